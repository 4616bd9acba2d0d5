"""From a validated pipeline to an execution plan, checking everything before any data is read.

:func:`plan_pipeline` reads the file, validates it (schema, ops, parameters, references,
cycles), opens every input lazily (metadata only: dims, shape, dtype, chunks), propagates
shapes through the steps (estimators' declared output widths such as ``n_components``),
checks outputs (kinds, dims, paths, what exists on disk), computes fingerprints and decides
what the run would do: which steps run, which are loaded from a complete saved model, which
outputs are written or skipped, and the *phases*:

- ``batch``: one-pass fits and statistics that are ready together: their statistics are
  computed in ONE ``dask.compute`` (each input they read is read once);
- ``fit``: a multi-pass fit (the estimator makes its own passes);
- ``compute``: scores (each is a pass: ``score`` computes);
- ``lazy``: transforms, predictions, loads: no data is read;
- ``stream``: the outputs that need data (arrays to Zarr, sampled scatter plots, confusion
  matrices), computed together in one final ``dask.compute``.

All problems are collected and raised together as one :class:`PipelineError`.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ddr.config.document import Document, load_document
from ddr.config.errors import Location, PipelineError, Problem
from ddr.io.locations import LocationError, redact, resolve
from ddr.pipeline import registry
from ddr.pipeline.fingerprints import Fingerprinting
from ddr.pipeline.inputs import open_pipeline_input
from ddr.pipeline.output_checks import OutputChecks, output_refs
from ddr.pipeline.plan import (
    FINGERPRINT_ATTR,
    InputPlan,
    OutputPlan,
    Phase,
    Plan,
    StepPlan,
    ValueMeta,
    _a,
    _did_you_mean,
    _dims,
    _shape,
)
from ddr.pipeline.schedule import Scheduling
from ddr.pipeline.schema import InputSpec, Output, Pipeline, StepSpec, split_ref, validate
from ddr.pipeline.searches import (
    candidate_problems,
    grid_problems,
    search_outputs,
    searched_width,
)
from ddr.pipeline.state_plan import StatePlanning
from ddr.pipeline.update_plan import UpdatePlanning
from ddr.tags import get_ddr_tags

__all__ = [
    "FINGERPRINT_ATTR",
    "InputPlan",
    "OutputPlan",
    "Phase",
    "Plan",
    "StepPlan",
    "ValueMeta",
    "plan_pipeline",
    "replan",
]


def _section_parts(doc: Document, model: type, section: str, *, listed: bool = False) -> dict:
    """Validate each entry of a section (a mapping, or a list when ``listed``) on its own;
    keep the valid ones (a section of the wrong type is reported by the schema)."""
    from pydantic import TypeAdapter, ValidationError

    raw = doc.data.get(section) if isinstance(doc.data, dict) else None
    out: dict[Any, Any] = {}
    if listed:
        items = enumerate(raw) if isinstance(raw, list) else []
    else:
        items = raw.items() if isinstance(raw, dict) else []
    adapter = TypeAdapter(model)
    for key, value in items:
        try:
            out[key] = adapter.validate_python(value)
        except ValidationError:
            continue
    return out


# ---------------------------------------------------------------------------- plan
class _Planner(OutputChecks, Scheduling, Fingerprinting, StatePlanning, UpdatePlanning):
    def __init__(
        self,
        doc: Document,
        *,
        force: bool,
        resume: bool,
        check_outputs: bool,
        given: dict[str, str | None],
        update: bool = False,
    ) -> None:
        self.doc = doc
        self.given = given
        self.force = force
        # an update keeps complete outputs with the same fingerprint, as --resume does
        self.resume = resume or update
        self.updating = update
        self.state = None
        self.update = None
        self.check_outputs = check_outputs
        self.inputs: dict[str, InputPlan] = {}
        self.steps: dict[str, StepPlan] = {}
        self.outputs: list[OutputPlan] = []
        self.bad_steps: set[str] = set()
        self.bad_params: set[str] = set()  # steps whose parameters were refused

    def problem(self, path: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        self.doc.problem(path, message, key=key)

    def run(self) -> Plan | None:
        doc = self.doc
        pipeline = validate(doc, Pipeline)
        inputs = _section_parts(doc, InputSpec, "inputs")
        steps = _section_parts(doc, StepSpec, "steps")
        outputs = _section_parts(doc, Output, "outputs", listed=True)
        raw_steps = doc.data.get("steps") if isinstance(doc.data.get("steps"), dict) else {}
        self.bad_steps = set(raw_steps) - set(steps)
        for name in set(inputs) & set(raw_steps):
            self.problem(
                ("steps", name),
                f"step {name!r} has the name of an input; names of inputs and steps must differ",
                key=True,
            )
        # only the inputs something reads have their chunks listed
        used = {split_ref(r)[0] for s in steps.values() for r in s.inputs.values()}
        used |= {split_ref(r)[0] for o in outputs.values() for r in output_refs(o).values()}
        last = self._last_state(pipeline, outputs)  # --update: the grids' recorded masks
        for name, spec in inputs.items():
            opened = open_pipeline_input(
                name, spec, self.problem, check_chunks=name in used, last=last
            )
            if opened is not None:
                self.inputs[name] = opened
        self._link_steps(steps, set(inputs))
        order = self._topological(steps)
        for sid in order:
            self._step_meta(self.steps[sid])
        run_opts = pipeline.run if pipeline is not None else None
        default_if_exists = run_opts.if_exists if run_opts else "error"
        for i, spec in outputs.items():
            self._output(i, spec, default_if_exists)
        self._check_output_paths()
        files = self._check_run_files(run_opts, self.given)
        if doc.problems or pipeline is None:
            doc.raise_problems()
        self.steps = {sid: self.steps[sid] for sid in order}
        self._fingerprints()
        if self.check_outputs:
            self._decide_outputs()
            if not doc.problems:
                self._plan_state(pipeline, files)
                if self.updating:
                    self._plan_update()
                else:
                    self._recordings()
        doc.raise_problems()
        self._decide_steps()
        phases = self._schedule()
        self._update_phases(phases)
        doc.raise_problems()
        return Plan(
            doc.file,
            doc,
            pipeline,
            self.inputs,
            self.steps,
            self.outputs,
            phases,
            _resolved(doc.data),
            files,
            force=self.force,
            resume=self.resume and not self.updating,
            given=dict(self.given),
            state=self.state,
            update=self.update,
        )

    def _link_steps(self, steps: dict[str, StepSpec], input_names: set[str]) -> None:
        raw_inputs = self.doc.data.get("inputs") if isinstance(self.doc.data, dict) else None
        all_inputs = set(raw_inputs) if isinstance(raw_inputs, dict) else set(input_names)
        names = sorted(all_inputs | set(steps) | self.bad_steps)
        for sid, spec in steps.items():
            where = ("steps", sid)
            op = registry.get_op(spec.op)
            if op is None:
                hint = _did_you_mean(spec.op, registry.op_names())
                self.problem(
                    (*where, "op"),
                    f"unknown op {spec.op!r}{hint}; valid ops: {registry.describe_ops()}",
                )
                self.bad_steps.add(sid)
                continue
            refs, deps = {}, set()
            for role, ref in spec.inputs.items():
                head, _ = split_ref(ref)
                if op.role(role) is None:
                    valid = ", ".join(r.name for r in op.roles) or "none"
                    self.problem(
                        (*where, "inputs", role),
                        f"{op.name} has no input {role!r}"
                        f"{_did_you_mean(role, [r.name for r in op.roles])}; its "
                        f"inputs: {valid}",
                        key=True,
                    )
                    continue
                if head not in all_inputs and head not in steps and head not in self.bad_steps:
                    self.problem(
                        (*where, "inputs", role),
                        f"{ref!r} is neither an input nor a "
                        f"step{_did_you_mean(head, names)}; inputs and steps: "
                        f"{', '.join(names)}",
                    )
                    continue
                if head == sid and head not in all_inputs:
                    self.problem((*where, "inputs", role), f"step {sid!r} uses its own output")
                    continue
                if head == sid:
                    continue  # the name of an input and of this step: reported once above
                refs[role] = ref
                if head in steps or head in self.bad_steps:
                    deps.add(head)
            for r in op.roles:
                if r.required and r.name not in spec.inputs:
                    needed = ", ".join(x.name for x in op.roles if x.required)
                    self.problem(
                        where,
                        f"step {sid}: missing input {r.name!r} ({op.name} needs {needed})",
                        key=True,
                    )
            spec, written = self._current_names(sid, spec, op)
            bad_params = written.problems or registry.check_params(op, spec.with_)
            if spec.search is not None and not bad_params:
                for path, message, key in grid_problems(op, spec.with_, spec.search):
                    self.problem((*where, "search", *path), message, key=key)
                    self.bad_params.add(sid)
            if bad_params:
                self.bad_params.add(sid)
            for pname, message in bad_params:
                path = (*where, "with", pname) if pname in spec.with_ else (*where, "with")
                if pname in written.as_written:  # a renamed parameter: where it is written
                    path = (*where, "with", written.as_written[pname])
                if pname is None and "with" not in spec.model_fields_set:
                    path = where
                self.problem(path, message, key=pname is not None and "unknown" in message)
            self.steps[sid] = StepPlan(sid, spec, op, refs, deps)

    def _current_names(
        self, sid: str, spec: StepSpec, op: registry.Op
    ) -> tuple[StepSpec, registry.Renamed]:
        """``spec`` with renamed parameters in their current names (:func:`registry.renamed`),
        a FutureWarning at the line and column of each old name or value."""
        import warnings

        done = registry.renamed(op, spec.with_)
        for pname, key, message in done.notes:
            where = self.doc.where(("steps", sid, "with", pname), key=key)
            warnings.warn(f"{where}: {message}", FutureWarning, stacklevel=2)
        if done.params == spec.with_:
            return spec, done
        return spec.model_copy(update={"with_": done.params}), done

    def _topological(self, steps: dict[str, StepSpec]) -> list[str]:
        order: list[str] = []
        state: dict[str, int] = {}
        reported: set[frozenset[str]] = set()

        def visit(sid: str, stack: list[str]) -> None:
            if state.get(sid) == 2 or sid not in self.steps:
                return
            if state.get(sid) == 1:
                cycle = [*stack[stack.index(sid) :], sid]
                key = frozenset(cycle)
                if key not in reported:
                    reported.add(key)
                    last = stack[-1]
                    role = next(
                        r for r, ref in self.steps[last].refs.items() if split_ref(ref)[0] == sid
                    )
                    self.problem(
                        ("steps", last, "inputs", role),
                        f"cycle: {' -> '.join(cycle)}; a step cannot depend on itself",
                    )
                return
            state[sid] = 1
            for dep in sorted(self.steps[sid].deps):
                visit(dep, [*stack, sid])
            state[sid] = 2
            order.append(sid)

        for sid in self.steps:
            visit(sid, [])
        return [s for s in order if s in self.steps]

    def _step_meta(self, step: StepPlan) -> None:
        """Propagate shapes through one step and check its inputs against its op."""
        op, where = step.op, ("steps", step.id)
        metas: dict[str, ValueMeta] = {}
        if any(r.required and r.name not in step.refs for r in op.roles):
            return  # a missing or dangling input, already reported
        if step.id in self.bad_params:
            return  # refused parameters, already reported: nothing follows from them
        for role, ref in step.refs.items():
            head, _ = split_ref(ref)
            if head in self.bad_steps or (head in self.steps and not self.steps[head].outputs):
                return  # already reported upstream
            meta = self._resolve(ref, (*where, "inputs", role))
            if meta is None:
                return
            metas[role] = meta
        ok = True
        for role, meta in metas.items():
            ok &= self._check_role(step, op.role(role), meta)
        if not ok:
            return
        X = metas.get("X")
        n = X.shape[0] if X is not None and X.shape else None
        d = X.shape[1] if X is not None and X.shape and len(X.shape) == 2 else None
        for role, meta in metas.items():
            r = op.role(role)
            # feature weights lie along the features (one per column), not the rows
            along_rows = role != "X" and role not in registry.FEATURE_ROLES
            if r.kind == "array" and along_rows and meta.shape and n is not None:
                if meta.shape[0] is not None and meta.shape[0] != n:
                    self.problem(
                        (*where, "inputs", role),
                        f"{role} has {meta.shape[0]} rows but X has {n}; they must be equal",
                    )
                    ok = False
        if not ok:
            return
        # what the step's values read when computed: its arrays' inputs, and the training
        # data a model that keeps it reads (an exact KDE's score_samples)
        reads = frozenset().union(
            *(m.reads for m in metas.values() if m.kind in ("array", "model"))
        )
        if op.family == "load":
            model = self._load_meta(step)
            if model is not None:
                step.outputs = {"model": model}
            return
        if op.family == "statistic":
            step.outputs = {"statistic": ValueMeta("statistic", cls=op.cls)}
            return
        if op.family == "fit":
            self._fit_meta(step, X, n, d, reads)
            return
        self._apply_meta(step, metas, n, d, reads)

    def _resolve(self, ref: str, where: tuple[Any, ...]) -> ValueMeta | None:
        head, tail = split_ref(ref)
        if head in self.inputs:
            if tail is not None:
                self.problem(where, f"{ref!r}: an input has no outputs; write {head!r}")
                return None
            return self.inputs[head].meta
        if head not in self.steps:
            return None  # an input that failed to open (already reported)
        src = self.steps[head]
        if not src.outputs:
            return None
        if tail is None:
            return src.outputs[src.op.primary]
        if tail in src.outputs:
            return src.outputs[tail]
        primary = src.outputs[src.op.primary]
        if primary.kind == "model" and tail.endswith("_"):
            return ValueMeta("attribute", cls=primary.cls)
        if primary.kind == "statistic":
            names = primary.cls.readouts
            if tail in names:
                return ValueMeta("attribute", cls=primary.cls)
            self.problem(
                where,
                f"{ref!r}: {primary.cls.__name__} has no read-out {tail!r}; "
                f"read-outs: {', '.join(names)}",
            )
            return None
        outs = list(src.outputs)
        extra = ", or a fitted attribute ending in '_'" if primary.kind == "model" else ""
        self.problem(
            where,
            f"{ref!r}: step {head} ({src.op.name}) has no output {tail!r}"
            f"{_did_you_mean(tail, outs)}; its outputs: {', '.join(outs)}{extra}",
        )
        return None

    def _check_role(self, step: StepPlan, role: registry.Role, meta: ValueMeta) -> bool:
        where = ("steps", step.id, "inputs", role.name)
        ref = step.refs[role.name]
        if role.kind == "model":
            if meta.kind != "model":
                self.problem(
                    where,
                    f"{ref!r} is {_a(meta.kind)}, not a fitted model; "
                    f"{step.op.name} needs a model (a fit step or a load step)",
                )
                return False
            want = step.op.cls
            if meta.cls is not None and want is not None and meta.cls is not want:
                alt = f"{meta.cls.__name__}.{step.op.method}"
                hint = (
                    f"write {alt}"
                    if registry.get_op(alt) is not None
                    else f"{meta.cls.__name__} has no {step.op.method}"
                )
                self.problem(
                    where,
                    f"{ref!r} is a {meta.cls.__name__} model; {step.op.name} needs a "
                    f"{want.__name__} ({hint})",
                )
                return False
            return True
        if meta.kind != "array":
            self.problem(
                where,
                f"{ref!r} is {_a(meta.kind)}, not an array; {role.name} must be "
                "an input or an array made by a step",
            )
            return False
        ndim = len(meta.shape) if meta.shape is not None else None
        if role.ndim is not None and ndim is not None and ndim != role.ndim:
            want = "1-D (one value per sample)" if role.ndim == 1 else "2-D (samples x features)"
            self.problem(
                where,
                f"{role.name} must be {want}; {ref!r} has shape "
                f"{_shape(meta.shape)} and dims {_dims(meta.dims)}",
            )
            return False
        if role.ndim == 2 and meta.dtype is not None and np.dtype(meta.dtype).kind not in "biuf":
            self.problem(where, f"{role.name} must be numeric; {ref!r} has dtype {meta.dtype}")
            return False
        if (
            role.name == "sample_weight"
            and meta.dtype is not None
            and np.dtype(meta.dtype).kind not in "biuf"
        ):
            self.problem(where, f"sample_weight must be numeric; {ref!r} has dtype {meta.dtype}")
            return False
        return True

    def _fit_meta(
        self,
        step: StepPlan,
        X: ValueMeta | None,
        n: int | None,
        d: int | None,
        reads: frozenset[str],
    ) -> None:
        op, params = step.op, step.spec.with_
        cls = op.cls
        where = ("steps", step.id)
        transformer = get_ddr_tags(cls, **params).transformer
        limit = transformer.n_components_limit(n, d) if transformer else None
        nc = params.get("n_components")
        if limit is not None and isinstance(nc, int) and not isinstance(nc, bool) and nc > limit[0]:
            self.problem(
                (*where, "with", "n_components"),
                f"n_components={nc} is more than {limit[1]} = {limit[0]} of the data",
            )
            return
        width = transformer.width(n, d) if transformer else None
        if step.spec.search is not None:
            unfit = candidate_problems(cls, step.spec.with_, step.spec.search, n, d)
            for path, message in unfit:
                self.problem(("steps", step.id, "search", *path), message)
            if unfit:
                return
            width = searched_width(cls, step.spec.with_, step.spec.search, n, d)
        keeps = get_ddr_tags(cls, **params).fit.keeps_data(n, d)
        model = ValueMeta(
            "model",
            cls=cls,
            params=dict(params),
            n_features_in=d,
            n_out=width,
            dtype=X.dtype if X else None,
            reads=reads if keeps else frozenset(),  # every use reads its training data
        )
        step.outputs = {"model": model}
        if op.method == "fit_transform":
            dims = (X.dims[0] if X and X.dims else None, None)
            data = ValueMeta("array", (n, width), dims, np.dtype("float64"), reads)
            step.outputs = {"data": data, "model": model}
        if step.spec.search is not None:  # the fitted search and its small results
            for name, kind in search_outputs().items():
                step.outputs[name] = ValueMeta(kind, cls=cls if kind == "search" else None)

    def _apply_meta(
        self,
        step: StepPlan,
        metas: dict[str, ValueMeta],
        n: int | None,
        d: int | None,
        reads: frozenset[str],
    ) -> None:
        op = step.op
        model = metas["model"]
        X = metas.get("X")
        where = ("steps", step.id, "inputs", "X")
        method = op.method
        if method == "inverse_transform":
            if model.n_out is not None and d is not None and d != model.n_out:
                self.problem(
                    where,
                    f"inverse_transform needs {model.n_out} columns (the "
                    f"model's n_components); {step.refs['X']!r} has {d}",
                )
                return
        elif model.n_features_in is not None and d is not None and d != model.n_features_in:
            self.problem(
                where,
                f"{step.refs['X']!r} has {d} features but the model "
                f"{step.refs['model']!r} was fitted on {model.n_features_in}",
            )
            return
        sdim = X.dims[0] if X is not None and X.dims else None
        if method == "score":
            step.outputs = {"value": ValueMeta("metric", reads=reads)}
            return
        if method in ("predict", "score_samples"):
            shape: tuple[int | None, ...] = (n,)
            dims: tuple[str | None, ...] = (sdim,)
        elif method == "transform":
            shape, dims = (n, model.n_out), (sdim, None)
        elif method in ("inverse_transform", "impute"):
            shape, dims = (n, model.n_features_in), (sdim, None)
        elif method == "decision_function":  # (n,) for two classes, one column per class else
            step.outputs = {"data": ValueMeta("array", None, None, np.dtype("float64"), reads)}
            return
        else:  # predict_proba, predict_log_proba
            shape, dims = (n, None), (sdim, "class")
        dtype = None if method == "predict" else np.dtype("float64")
        step.outputs = {"data": ValueMeta("array", shape, dims, dtype, reads)}
        if "y_data" in op.outputs and "y" in metas:
            step.outputs["y_data"] = ValueMeta("array", shape, dims, dtype, reads)

    def _load_meta(self, step: StepPlan) -> ValueMeta | None:
        from ddr.io import output_status, read_attrs
        from ddr.io.models import CorruptModelError, check_model, model_class

        where = ("steps", step.id, "with", "path")
        raw = step.spec.with_.get("path")
        if not isinstance(raw, str):
            return None
        try:
            path = resolve(raw, step.spec.with_.get("storage_options"))
            status = output_status(path)
        except (LocationError, OSError, ImportError) as exc:
            self.problem(where, f"step {step.id}: {exc}")
            return None
        if status == "missing":
            self.problem(where, f"no saved model at {raw!r}")
            return None
        if status != "complete":
            self.problem(where, f"{raw!r} is not a complete ddr model (status: {status})")
            return None
        attrs = read_attrs(path)
        target = attrs.get("ddr:model")
        if not isinstance(target, str):
            self.problem(where, f"{raw!r} is a ddr output but not a saved model")
            return None
        cls = model_class(target)
        if cls is None:
            self.problem(
                where,
                f"{raw!r} holds a {target}, which this ddr does not have (neither a class of "
                "ddr nor one an installed plug-in registers)",
            )
            return None
        try:  # its arrays' metadata against what was saved: a corrupt model is refused here
            check_model(path)
        except CorruptModelError as exc:
            self.problem(where, str(exc.at(raw)))
            return None
        state = attrs.get("state", {})
        params = attrs.get("params", {})
        n_in = state.get("n_features_in_")
        transformer = get_ddr_tags(cls).transformer
        n_out = transformer.saved_width(state) if transformer else None
        return ValueMeta(
            "model",
            cls=cls,
            params=params if isinstance(params, dict) else {},
            n_features_in=n_in if isinstance(n_in, int) else None,
            n_out=n_out if isinstance(n_out, int) else None,
        )


def _resolved(data: dict[str, Any]) -> dict[str, Any]:
    """The resolved pipeline as recorded in provenance: JSON values, secrets redacted."""
    return redact(json.loads(json.dumps(data, default=str)))


def plan_pipeline(
    source: str | os.PathLike | Document,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    force: bool = False,
    resume: bool = False,
    check_outputs: bool = True,
    summary: str | None = None,
    performance_report: str | None = None,
    update: bool = False,
) -> Plan:
    """Read, validate and plan a pipeline file without reading any data.

    Parameters
    ----------
    source : path or Document
        The pipeline file (or an already loaded document).
    overrides : list of str
        ``--set key=value`` overrides.
    force : bool
        Replace existing outputs (``if_exists: overwrite`` for all).
    resume : bool
        Keep complete outputs with the same fingerprint (``if_exists: skip-if-complete``).
    check_outputs : bool
        Look at existing outputs (``False`` for ``ddr validate``, which only checks the file).
    summary, performance_report : str, optional
        ``--summary`` / ``--performance-report``: replace ``run.summary`` /
        ``run.performance_report``; checked like them (never inside an input or an output).
    update : bool
        ``--update``: read only the rows appended to the inputs since the last run, for
        every step whose statistics the run's state recorded (``run.state``); keep complete
        outputs with the same fingerprint (as ``resume``); a full run where an input
        changed otherwise (:mod:`ddr.pipeline.update_plan`).

    Raises
    ------
    PipelineError
        Every problem found, as ``file:line:col: message``.
    """
    doc = source if isinstance(source, Document) else load_document(source, overrides)
    given = {"summary": summary, "performance_report": performance_report}
    if update and force:
        raise ValueError("update and force contradict each other; give one")
    planner = _Planner(
        doc, force=force, resume=resume, check_outputs=check_outputs, given=given, update=update
    )
    plan = planner.run()
    if plan is None:  # pragma: no cover - run() raises instead
        raise PipelineError([Problem(Location(doc.file), "invalid pipeline")])
    return plan


def replan(plan: Plan) -> Plan:
    """Plan ``plan``'s pipeline again, as it was planned (the same file, overrides and
    options), with what exists now: after waiting for another run's outputs."""
    return plan_pipeline(
        plan.doc,
        force=plan.force,
        resume=plan.resume,
        update=plan.update is not None,
        **plan.given,
    )
