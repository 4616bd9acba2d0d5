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
- ``compute``: scores (one shared ``dask.compute``);
- ``lazy``: transforms, predictions, loads: no data is read;
- ``stream``: the outputs that need data (arrays to Zarr, sampled scatter plots, confusion
  matrices), computed together in one final ``dask.compute``.

All problems are collected and raised together as one :class:`PipelineError`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ddr.pipeline import registry
from ddr.pipeline.errors import Location, PipelineError, Problem
from ddr.pipeline.loader import Document, load_document
from ddr.pipeline.registry import Op
from ddr.pipeline.schema import (
    InputSpec,
    ModelOutput,
    Output,
    Pipeline,
    PlotOutput,
    StepSpec,
    ZarrOutput,
    split_ref,
    validate,
)

__all__ = ["InputPlan", "OutputPlan", "Phase", "Plan", "StepPlan", "ValueMeta", "plan_pipeline"]

FINGERPRINT_ATTR = "ddr:fingerprint"


# ------------------------------------------------------------------------ data types
@dataclass
class ValueMeta:
    """What a reference holds, known before the run."""

    kind: str  # "array", "model", "statistic", "metric", "attribute"
    shape: tuple[int | None, ...] | None = None
    dims: tuple[str | None, ...] | None = None
    dtype: Any = None
    reads: frozenset[str] = frozenset()  # inputs a lazy array reads when computed
    cls: type | None = None
    params: dict[str, Any] = field(default_factory=dict)
    n_features_in: int | None = None
    n_out: int | None = None


@dataclass
class InputPlan:
    name: str
    spec: InputSpec
    path: str
    array: Any  # lazy xarray.DataArray, sample dim first
    sample_dim: str
    fingerprint: str
    store_root: str | None  # counted Zarr store root, for measured passes
    stored_bytes: int | None
    meta: ValueMeta


@dataclass
class StepPlan:
    id: str
    spec: StepSpec
    op: Op
    refs: dict[str, str]  # role -> reference
    deps: set[str]  # step ids
    fingerprint: str = ""
    outputs: dict[str, ValueMeta] = field(default_factory=dict)
    one_pass: bool | None = None  # None: decided at run time
    action: str = "run"  # "run", "load" (from a complete model output), "skip"
    load_from: str | None = None


@dataclass
class OutputPlan:
    index: int
    spec: Output
    path: str
    if_exists: str
    refs: dict[str, str]  # variable/key -> reference
    fingerprint: str = ""
    status: str = "missing"
    action: str = "write"  # "write", "overwrite", "skip"
    reason: str = ""
    streamed: bool = False  # needs a pass over data (written in the final stream phase)

    @property
    def kind(self) -> str:
        return self.spec.kind


@dataclass
class Phase:
    kind: str  # "batch", "fit", "compute", "lazy", "stream"
    steps: list[str] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)  # small outputs written after the phase
    reads: dict[str, int] = field(default_factory=dict)  # input -> planned passes


@dataclass
class Plan:
    """Everything the runner needs, and what ``ddr plan`` prints."""

    file: str
    doc: Document
    pipeline: Pipeline
    inputs: dict[str, InputPlan]
    steps: dict[str, StepPlan]  # topological order
    outputs: list[OutputPlan]
    phases: list[Phase]
    resolved: dict[str, Any]

    def stored_arrays(self) -> dict[str, list[str]]:
        """Label -> input names, grouping inputs that are the same stored array (e.g. two
        column selections of one Zarr array): a read of one is a read of the others."""
        groups: dict[tuple[str, str], list[str]] = {}
        for name, inp in self.inputs.items():
            groups.setdefault((inp.path, inp.spec.array or ""), []).append(name)
        return {", ".join(names): names for names in groups.values()}

    def passes(self) -> dict[str, str]:
        """Planned passes over each stored array: ``"1"``, or ``"2+"`` when a multi-pass fit
        reads it (its own passes are known only when it runs)."""
        out = {}
        for label, names in self.stored_arrays().items():
            n = sum(1 for p in self.phases if any(name in p.reads for name in names))
            multi = any(p.kind == "fit" and any(nm in p.reads for nm in names) for p in self.phases)
            out[label] = f"{n}+" if multi else str(n)
        return out

    def ref_meta(self, ref: str) -> ValueMeta | None:
        head, tail = split_ref(ref)
        if head in self.inputs:
            return self.inputs[head].meta
        step = self.steps.get(head)
        if step is None:
            return None
        return step.outputs.get(tail or step.op.primary) or ValueMeta("attribute")


# ----------------------------------------------------------------------- utilities
def _sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _abspath(p: str) -> str:
    return os.path.abspath(os.path.expanduser(p))


def _a(noun: str) -> str:
    """``"an array"``, ``"a model"``: kinds of values in messages."""
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _forbid_compute(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    raise RuntimeError("the planner must not read data")


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
class _Planner:
    def __init__(self, doc: Document, *, force: bool, resume: bool, check_outputs: bool) -> None:
        self.doc = doc
        self.force = force
        self.resume = resume
        self.check_outputs = check_outputs
        self.inputs: dict[str, InputPlan] = {}
        self.steps: dict[str, StepPlan] = {}
        self.outputs: list[OutputPlan] = []
        self.bad_steps: set[str] = set()

    def problem(self, path: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        self.doc.problem(path, message, key=key)

    # -------------------------------------------------------------- sections
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
        for name, spec in inputs.items():
            self._open_input(name, spec)
        self._link_steps(steps, set(inputs))
        order = self._topological(steps)
        for sid in order:
            self._step_meta(self.steps[sid])
        run_opts = pipeline.run if pipeline is not None else None
        default_if_exists = run_opts.if_exists if run_opts else "error"
        for i, spec in outputs.items():
            self._output(i, spec, default_if_exists)
        self._check_output_paths()
        self._check_run_paths(run_opts)
        if doc.problems or pipeline is None:
            doc.raise_problems()
        self.steps = {sid: self.steps[sid] for sid in order}
        self._fingerprints()
        if self.check_outputs:
            self._decide_outputs()
        doc.raise_problems()
        self._decide_steps()
        phases = self._schedule()
        return Plan(
            doc.file,
            doc,
            pipeline,
            self.inputs,
            self.steps,
            self.outputs,
            phases,
            _resolved(doc.data),
        )

    # ---------------------------------------------------------------- inputs
    def _open_input(self, name: str, spec: InputSpec) -> None:
        from ddr.io import describe_input, open_input

        path = _abspath(spec.path)
        where = ("inputs", name)
        try:
            arr = open_input(path, spec.array)
        except FileNotFoundError:
            self.problem(
                (*where, "path"), f"input {name}: no Zarr store or netCDF file at {spec.path!r}"
            )
            return
        except (KeyError, ValueError, OSError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            self.problem((*where, "array" if spec.array else "path"), f"input {name}: {msg}")
            return
        if spec.dims is not None and list(arr.dims) != list(spec.dims):
            self.problem(
                (*where, "dims"),
                f"input {name} has dims {list(map(str, arr.dims))}; "
                f"the pipeline expects {spec.dims}",
            )
            return
        sdim = spec.sample_dim or str(arr.dims[0])
        if sdim not in arr.dims:
            self.problem(
                (*where, "sample_dim"),
                f"input {name}: sample_dim {sdim!r} is not one "
                f"of its dims {list(map(str, arr.dims))}",
            )
            return
        arr = arr.transpose(sdim, ...)
        root, stored = None, None
        counted = _counted(arr, path, spec.array)
        if counted is not None:
            arr, root, stored = counted
        if spec.isel:
            unknown = sorted(set(spec.isel) - {str(d) for d in arr.dims})
            if unknown:
                self.problem(
                    (*where, "isel"),
                    f"input {name}: isel names dims {unknown} that it does not have (dims "
                    f"{list(map(str, arr.dims))})",
                )
                return
            try:
                arr = arr.isel(spec.selection())
            except (IndexError, ValueError) as exc:
                self.problem((*where, "isel"), f"input {name}: isel {spec.isel}: {exc}")
                return
            if 0 in arr.shape:
                self.problem(
                    (*where, "isel"),
                    f"input {name}: isel {spec.isel} selects nothing (shape {tuple(arr.shape)})",
                )
                return
        if spec.chunks:
            unknown = sorted(set(spec.chunks) - {str(d) for d in arr.dims})
            if unknown:
                self.problem(
                    (*where, "chunks"),
                    f"input {name}: chunks names dims {unknown} "
                    f"that it does not have (dims {list(map(str, arr.dims))})",
                )
                return
            arr = arr.chunk(spec.chunks)
        if arr.ndim == 2 and hasattr(arr.data, "chunks") and len(arr.data.chunks[1]) > 1:
            fdim = str(arr.dims[1])
            self.problem(
                (*where, "chunks") if spec.chunks else (*where, "path"),
                f"input {name} is chunked along {fdim!r} ({len(arr.data.chunks[1])} "
                f"chunks); ddr reads whole rows: add `chunks: {{{fdim}: -1}}`",
            )
            return
        desc = describe_input(arr)
        fp = _sha(
            {
                "path": path,
                "array": spec.array,
                "isel": spec.isel,
                "meta": desc,
                "store": _metadata_fingerprint(path, spec.array),
            }
        )
        meta = ValueMeta(
            "array",
            tuple(int(s) for s in arr.shape),
            tuple(str(d) for d in arr.dims),
            np.dtype(arr.dtype),
            frozenset([name]),
        )
        self.inputs[name] = InputPlan(name, spec, path, arr, sdim, fp, root, stored, meta)

    # ----------------------------------------------------------------- steps
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
            for pname, message in registry.check_params(op, spec.with_):
                path = (*where, "with", pname) if pname in spec.with_ else (*where, "with")
                if pname is None and "with" not in spec.model_fields_set:
                    path = where
                self.problem(path, message, key=pname is not None and "unknown" in message)
            self.steps[sid] = StepPlan(sid, spec, op, refs, deps)

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
            if r.kind == "array" and role != "X" and meta.shape and n is not None:
                if meta.shape[0] is not None and meta.shape[0] != n:
                    self.problem(
                        (*where, "inputs", role),
                        f"{role} has {meta.shape[0]} rows but X has {n}; they must be equal",
                    )
                    ok = False
        if not ok:
            return
        reads = frozenset().union(*(m.reads for m in metas.values() if m.kind == "array"))
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
            names = registry.READOUTS.get(primary.cls.__name__, ())
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
        limit = registry.width_limit(cls, n, d)
        nc = params.get("n_components")
        if limit is not None and isinstance(nc, int) and not isinstance(nc, bool) and nc > limit[0]:
            self.problem(
                (*where, "with", "n_components"),
                f"n_components={nc} is more than {limit[1]} = {limit[0]} of the data",
            )
            return
        width = registry.declared_width(cls, params, n, d)
        model = ValueMeta(
            "model",
            cls=cls,
            params=dict(params),
            n_features_in=d,
            n_out=width,
            dtype=X.dtype if X else None,
        )
        step.outputs = {"model": model}
        if op.method == "fit_transform":
            dims = (X.dims[0] if X and X.dims else None, None)
            data = ValueMeta("array", (n, width), dims, np.dtype("float64"), reads)
            step.outputs = {"data": data, "model": model}

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
        else:  # predict_proba
            shape, dims = (n, None), (sdim, "class")
        dtype = None if method == "predict" else np.dtype("float64")
        step.outputs = {"data": ValueMeta("array", shape, dims, dtype, reads)}
        if "y_data" in op.outputs and "y" in metas:
            step.outputs["y_data"] = ValueMeta("array", shape, dims, dtype, reads)

    def _load_meta(self, step: StepPlan) -> ValueMeta | None:
        import zarr

        from ddr.io import output_status

        where = ("steps", step.id, "with", "path")
        raw = step.spec.with_.get("path")
        if not isinstance(raw, str):
            return None
        path = _abspath(raw)
        status = output_status(path)
        if status == "missing":
            self.problem(where, f"no saved model at {raw!r}")
            return None
        if status != "complete":
            self.problem(where, f"{raw!r} is not a complete ddr model (status: {status})")
            return None
        attrs = zarr.open_group(path, mode="r").attrs.asdict()
        target = attrs.get("ddr:model")
        if not isinstance(target, str):
            self.problem(where, f"{raw!r} is a ddr output but not a saved model")
            return None
        cls = _model_class(target)
        if cls is None:
            self.problem(where, f"{raw!r} holds a {target}, which this ddr does not have")
            return None
        state = attrs.get("state", {})
        params = attrs.get("params", {})
        n_in = state.get("n_features_in_")
        n_out = state.get("n_components_")
        if n_out is None and cls.__name__ == "StandardScaler":
            n_out = n_in
        return ValueMeta(
            "model",
            cls=cls,
            params=params if isinstance(params, dict) else {},
            n_features_in=n_in if isinstance(n_in, int) else None,
            n_out=n_out if isinstance(n_out, int) else None,
        )

    # --------------------------------------------------------------- outputs
    def _output(self, i: int, spec: Output, default_if_exists: str) -> None:
        src = spec.from_
        if isinstance(src, str):
            refs = {(getattr(spec, "name", None) or src.replace(".", "_")): src}
        elif isinstance(src, list):
            refs = {r: r for r in src}
        else:
            refs = dict(src)
        if isinstance(spec, ZarrOutput):
            for cname, ref in spec.coords.items():
                refs[f"coord:{cname}"] = ref
        if isinstance(spec, PlotOutput) and spec.labels:
            refs["labels"] = spec.labels
        if_exists = spec.if_exists or default_if_exists
        if self.force:
            if_exists = "overwrite"
        elif self.resume:
            if_exists = "skip-if-complete"
        out = OutputPlan(i, spec, _abspath(spec.path), if_exists, refs)
        metas: dict[str, ValueMeta] = {}
        ok = True
        for key, ref in refs.items():
            path = self._output_ref_path(i, spec, key)
            head, _ = split_ref(ref)
            if head not in self.inputs and head not in self.steps and head not in self.bad_steps:
                raw_inputs = self.doc.data.get("inputs")
                if not (isinstance(raw_inputs, dict) and head in raw_inputs):
                    names = sorted(set(self.inputs) | set(self.steps) | self.bad_steps)
                    self.problem(
                        path,
                        f"{ref!r} is neither an input nor a step"
                        f"{_did_you_mean(head, names)}; inputs and steps: "
                        f"{', '.join(names)}",
                    )
                ok = False
                continue
            if head in self.bad_steps or (head in self.steps and not self.steps[head].outputs):
                ok = False
                continue
            meta = self._resolve(ref, path)
            if meta is None:
                ok = False
                continue
            metas[key] = meta
        self.outputs.append(out)
        if ok:
            self._check_output_kinds(out, metas)
            out.streamed = any(m.kind == "array" for m in metas.values())

    def _output_ref_path(self, index: int, spec: Output, key: str) -> tuple[Any, ...]:
        base = ("outputs", index)
        if key.startswith("coord:"):
            return (*base, "coords", key.removeprefix("coord:"))
        if key == "labels" and isinstance(spec, PlotOutput):
            return (*base, "labels")
        if isinstance(spec.from_, dict):
            return (*base, "from", key)
        if isinstance(spec.from_, list):
            return (*base, "from", spec.from_.index(key))
        return (*base, "from")

    def _check_output_kinds(self, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        spec = out.spec
        base = ("outputs", out.index)
        if isinstance(spec, ModelOutput):
            meta = next(iter(metas.values()))
            if meta.kind != "model":
                self.problem(
                    (*base, "from"),
                    f"a model output needs a fitted model; {spec.from_!r} is {_a(meta.kind)}",
                )
            return
        if spec.kind == "metrics":
            for key, meta in metas.items():
                if meta.kind == "array":
                    self.problem(
                        self._output_ref_path(out.index, spec, key),
                        f"{out.refs[key]!r} is an "
                        "array with one value per sample; metrics are small values "
                        "(write arrays with kind: zarr)",
                    )
                elif meta.kind == "model":
                    self.problem(
                        self._output_ref_path(out.index, spec, key),
                        f"{out.refs[key]!r} is a "
                        "model; name one of its fitted attributes (e.g. "
                        f"{out.refs[key]}.explained_variance_ratio_) or save it with "
                        "kind: model",
                    )
            return
        if isinstance(spec, ZarrOutput):
            self._check_zarr_output(out, metas)
            return
        if isinstance(spec, PlotOutput):
            self._check_plot(out, metas)

    def _check_zarr_output(self, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        spec: ZarrOutput = out.spec  # type: ignore[assignment]
        base = ("outputs", out.index)
        rows: dict[str, tuple[int | None, str]] = {}
        for key, meta in metas.items():
            if meta.kind == "model":
                self.problem(
                    self._output_ref_path(out.index, spec, key),
                    f"{out.refs[key]!r} is a model; "
                    "save models with kind: model (or name a fitted attribute, e.g. "
                    f"{out.refs[key]}.components_)",
                )
                continue
            if meta.kind == "metric":
                self.problem(
                    self._output_ref_path(out.index, spec, key),
                    f"{out.refs[key]!r} is a number; write numbers with kind: metrics",
                )
                continue
            if key.startswith("coord:") and meta.shape is not None and len(meta.shape) != 1:
                self.problem(
                    self._output_ref_path(out.index, spec, key),
                    f"coordinate {key[6:]!r} must be "
                    f"1-D; {out.refs[key]!r} has shape {_shape(meta.shape)}",
                )
                continue
            if meta.kind == "array" and meta.shape:
                rows[key] = (meta.shape[0], out.refs[key])
        if isinstance(spec.dims, list):
            if isinstance(spec.from_, dict):
                self.problem(
                    (*base, "dims"),
                    "with several variables in `from`, give dims as "
                    "a mapping variable -> dim names",
                )
            else:
                key = next(iter(metas), None)
                self._check_dims(out, key, metas.get(key), spec.dims, (*base, "dims"))
        elif isinstance(spec.dims, dict):
            for var, dims in spec.dims.items():
                if var not in out.refs:
                    self.problem(
                        (*base, "dims", var),
                        f"dims names the variable {var!r}, which "
                        f"is not in `from` ({', '.join(k for k in out.refs if ':' not in k)})",
                        key=True,
                    )
                    continue
                self._check_dims(out, var, metas.get(var), dims, (*base, "dims", var))
        sizes = {n for n, _ in rows.values() if n is not None}
        if len(sizes) > 1:
            desc = ", ".join(f"{ref} ({n})" for n, ref in rows.values())
            self.problem(
                (*base, "from"),
                f"the arrays of one Zarr output must have the same number of samples; got {desc}",
            )

    def _check_dims(
        self,
        out: OutputPlan,
        key: str | None,
        meta: ValueMeta | None,
        dims: list[str],
        where: tuple[Any, ...],
    ) -> None:
        if meta is None or meta.shape is None:
            return
        if len(dims) != len(meta.shape):
            self.problem(
                where,
                f"{len(dims)} dim names {dims} for {out.refs[key]!r}, which has "
                f"{len(meta.shape)} dims (shape {_shape(meta.shape)})",
            )
        elif len(set(dims)) != len(dims):
            self.problem(where, f"dim names must differ; got {dims}")

    def _check_plot(self, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        import importlib.util

        spec: PlotOutput = out.spec  # type: ignore[assignment]
        base = ("outputs", out.index)
        if importlib.util.find_spec("matplotlib") is None:
            self.problem((*base, "plot"), "plots need matplotlib: pip install 'ddr[plot]'")
        if not spec.path.lower().endswith(".png"):
            self.problem(
                (*base, "path"),
                f"plots are PNG files; the path must end in .png (got {spec.path!r})",
            )
        src = metas.get(next(iter(out.refs)))
        labels = metas.get("labels")
        if src is None:
            return
        want_model = spec.plot in ("scree", "kde", "loglik")
        if want_model and src.kind != "model":
            self.problem(
                (*base, "from"),
                f"a {spec.plot} plot is drawn from a fitted model; {spec.from_!r} is "
                f"{_a(src.kind)}",
            )
            return
        if spec.plot == "scatter":
            if src.kind != "array" or (src.shape is not None and len(src.shape) != 2):
                self.problem(
                    (*base, "from"),
                    f"a scatter plot needs 2-D scores (samples x "
                    f"components); {spec.from_!r} is {_a(src.kind)}"
                    f"{' of shape ' + _shape(src.shape) if src.shape else ''}",
                )
                return
            width = src.shape[1] if src.shape else None
            if width is not None and max(spec.components) >= width:
                self.problem(
                    (*base, "components"),
                    f"components {list(spec.components)} but {spec.from_!r} has {width} columns",
                )
        if spec.plot == "confusion":
            if src.kind != "array" or (src.shape is not None and len(src.shape) != 1):
                self.problem(
                    (*base, "from"),
                    f"a confusion matrix needs predicted labels "
                    f"(1-D); {spec.from_!r} is {_a(src.kind)}",
                )
                return
            if spec.labels is None:
                self.problem(base, "a confusion matrix needs the true labels: add `labels:`")
        if labels is not None:
            if labels.kind != "array" or (labels.shape is not None and len(labels.shape) != 1):
                self.problem(
                    (*base, "labels"),
                    f"labels must be 1-D (one per sample); {spec.labels!r} is {_a(labels.kind)}",
                )
            elif src.shape and labels.shape and src.shape[0] != labels.shape[0]:
                self.problem(
                    (*base, "labels"),
                    f"{spec.labels!r} has {labels.shape[0]} rows but "
                    f"{spec.from_!r} has {src.shape[0]}",
                )

    def _check_output_paths(self) -> None:
        from ddr.io.outputs import check_not_input

        seen: dict[str, int] = {}
        inputs = [p.path for p in self.inputs.values()]
        raw_inputs = self.doc.data.get("inputs") if isinstance(self.doc.data, dict) else {}
        for spec in raw_inputs.values() if isinstance(raw_inputs, dict) else []:
            if isinstance(spec, dict) and isinstance(spec.get("path"), str):
                inputs.append(_abspath(spec["path"]))
        for out in self.outputs:
            where = ("outputs", out.index, "path")
            try:
                check_not_input(out.path, inputs)
            except ValueError:
                inp = next(
                    (i for i in inputs if _related(out.path, i)), inputs[0] if inputs else ""
                )
                rel = (
                    "is"
                    if Path(out.path) == Path(inp)
                    else "would be inside"
                    if Path(inp) in Path(out.path).parents
                    else "contains"
                )
                self.problem(
                    where,
                    f"the output {out.spec.path!r} {rel} the input "
                    f"{os.path.relpath(inp)!r}; outputs never overwrite inputs",
                )
                continue
            for other, j in seen.items():
                if _related(out.path, other):
                    self.problem(
                        where,
                        f"the output {out.spec.path!r} overlaps outputs[{j}] "
                        f"({os.path.relpath(other)}); each output needs its own path",
                    )
                    break
            seen[out.path] = out.index

    def _check_run_paths(self, run_opts: Any) -> None:
        if run_opts is None:
            return
        for key in ("summary", "performance_report"):
            value = getattr(run_opts, key)
            if value is None:
                continue
            path = _abspath(value)
            for inp in self.inputs.values():
                if _related(path, inp.path):
                    self.problem(
                        ("run", key),
                        f"run.{key} {value!r} is inside the input {inp.name}; choose another path",
                    )

    # ---------------------------------------------------------- fingerprints
    def _ref_fp(self, ref: str) -> str:
        head, tail = split_ref(ref)
        if head in self.inputs:
            return self.inputs[head].fingerprint
        return f"{self.steps[head].fingerprint}.{tail or self.steps[head].op.primary}"

    def _fingerprints(self) -> None:
        import ddr

        for step in self.steps.values():
            extra = {}
            if step.op.family == "load":
                extra["model"] = _metadata_fingerprint(_abspath(step.spec.with_["path"]), None)
            step.fingerprint = _sha(
                {
                    "op": step.op.name,
                    "with": step.spec.with_,
                    "inputs": {r: self._ref_fp(ref) for r, ref in sorted(step.refs.items())},
                    "ddr": ddr.__version__,
                    **extra,
                }
            )
        for out in self.outputs:
            config = out.spec.model_dump(
                by_alias=True, exclude={"path", "if_exists", "description"}
            )
            out.fingerprint = _sha(
                {
                    "output": config,
                    "sources": {k: self._ref_fp(r) for k, r in sorted(out.refs.items())},
                    "ddr": ddr.__version__,
                }
            )

    def _decide_outputs(self) -> None:
        for out in self.outputs:
            where = ("outputs", out.index, "path")
            status, stored = _existing(out)
            out.status = status
            if status == "missing":
                out.action, out.reason = "write", "missing"
                continue
            if status == "not-ddr":
                if out.if_exists == "overwrite" and out.kind in ("metrics", "plot"):
                    out.action, out.reason = "overwrite", "not written by ddr"
                    continue
                self.problem(
                    where,
                    f"{out.spec.path!r} exists and was not written by ddr; "
                    "refusing to replace it (choose another path)",
                )
                continue
            if out.if_exists == "error":
                state = "complete" if status == "complete" else "INCOMPLETE (an interrupted run?)"
                self.problem(
                    where,
                    f"the output {out.spec.path!r} already exists ({state}); "
                    "pass --force to replace it, --resume (if_exists: skip-if-complete) "
                    "to keep complete outputs, or set if_exists",
                )
                continue
            if out.if_exists == "overwrite":
                out.action, out.reason = "overwrite", f"{status}, --force/overwrite"
            elif status == "complete" and stored == out.fingerprint:
                out.action, out.reason = "skip", "complete, same fingerprint"
            elif status == "complete":
                out.action, out.reason = "overwrite", "complete but outdated (fingerprint differs)"
            else:
                out.action, out.reason = "overwrite", "incomplete"

    def _decide_steps(self) -> None:
        """Which steps the outputs to write need, and which of those load a saved model."""
        saved: dict[str, str] = {}
        for out in self.outputs:
            if out.kind == "model" and out.action == "skip":
                head, tail = split_ref(out.refs[next(iter(out.refs))])
                if tail in (None, "model"):
                    saved.setdefault(head, out.path)
        needed: set[str] = set()

        def need(ref: str) -> None:
            head, _ = split_ref(ref)
            if head not in self.steps or head in needed:
                return
            needed.add(head)
            step = self.steps[head]
            if step.op.family == "fit" and head in saved and step.op.method == "fit":
                step.action, step.load_from = "load", saved[head]
                return
            for r in step.refs.values():
                need(r)

        for out in self.outputs:
            if out.action != "skip":
                for ref in out.refs.values():
                    need(ref)
        for sid, step in self.steps.items():
            if sid not in needed:
                step.action = "skip"

    # -------------------------------------------------------------- schedule
    def _schedule(self) -> list[Phase]:
        todo = [s for s in self.steps.values() if s.action != "skip"]
        for s in todo:
            if s.action == "run" and s.op.family in ("fit", "statistic"):
                s.one_pass = self._is_one_pass(s)
        done: set[str] = {s.id for s in self.steps.values() if s.action == "skip"}
        phases: list[Phase] = []
        written: set[int] = set()
        while todo:
            ready = [s for s in todo if s.deps <= done]
            lazy = [
                s
                for s in ready
                if s.action == "load"
                or s.op.family == "load"
                or (s.op.family == "apply" and s.op.method != "score")
            ]
            batch = [s for s in ready if s not in lazy and s.one_pass]
            scores = [s for s in ready if s.op.family == "apply" and s.op.method == "score"]
            if lazy:
                phase = Phase("lazy", [s.id for s in lazy])
            elif batch:
                phase = Phase("batch", [s.id for s in batch])
            elif scores:
                phase = Phase("compute", [s.id for s in scores])
            else:
                phase = Phase("fit", [ready[0].id])
            if phase.kind != "lazy":
                for sid in phase.steps:
                    for inp in self._reads(self.steps[sid]):
                        phase.reads[inp] = 1
            done |= set(phase.steps)
            todo = [s for s in todo if s.id not in done]
            for out in self.outputs:
                if (
                    out.action != "skip"
                    and not out.streamed
                    and out.index not in written
                    and all(
                        split_ref(r)[0] in done or split_ref(r)[0] in self.inputs
                        for r in out.refs.values()
                    )
                ):
                    phase.outputs.append(out.index)
                    written.add(out.index)
            phases.append(phase)
        rest = [o.index for o in self.outputs if o.action != "skip" and o.index not in written]
        if rest:
            phase = Phase("stream", outputs=rest)
            for i in rest:
                for ref in self.outputs[i].refs.values():
                    meta = self._ref_meta(ref)
                    if meta is not None and meta.kind == "array":
                        for inp in meta.reads:
                            phase.reads[inp] = 1
            phases.append(phase)
        return phases

    def _ref_meta(self, ref: str) -> ValueMeta | None:
        head, tail = split_ref(ref)
        if head in self.inputs:
            return self.inputs[head].meta
        step = self.steps[head]
        return step.outputs.get(tail or step.op.primary)

    def _reads(self, step: StepPlan) -> set[str]:
        out: set[str] = set()
        for ref in step.refs.values():
            meta = self._ref_meta(ref)
            if meta is not None and meta.kind == "array":
                out |= meta.reads
        return out

    def _is_one_pass(self, step: StepPlan) -> bool | None:
        """Whether the fit is one pass of statistics, asked of the estimator on lazy stand-ins
        (nothing is computed: a compute here raises)."""
        import dask

        from ddr.pipeline.fitplans import fit_plan

        if step.op.family == "statistic":
            return True
        args = {}
        for role, ref in step.refs.items():
            head, _ = split_ref(ref)
            if head in self.inputs:
                args[role] = self.inputs[head].array
            else:
                meta = self._ref_meta(ref)
                if meta is None or meta.shape is None or any(s is None for s in meta.shape):
                    return None
                args[role] = _standin(meta)
        try:
            est = step.op.cls(**step.spec.with_)
            with dask.config.set(scheduler=_forbid_compute):
                plan = fit_plan(est, args)
        except Exception:
            return None
        return plan is not None


def _standin(meta: ValueMeta) -> Any:
    import dask.array as da
    import xarray as xr

    shape = tuple(int(s) for s in meta.shape)
    dtype = meta.dtype if meta.dtype is not None else np.float64
    arr = da.zeros(shape, dtype=dtype, chunks=(max(1, shape[0]), *shape[1:]))
    dims = tuple(d or f"dim_{i}" for i, d in enumerate(meta.dims or ())) or None
    return xr.DataArray(arr, dims=dims) if dims and len(dims) == len(shape) else arr


def _related(a: str, b: str) -> bool:
    pa, pb = Path(a), Path(b)
    return pa == pb or pa in pb.parents or pb in pa.parents


def _shape(shape: tuple[int | None, ...] | None) -> str:
    if shape is None:
        return "?"
    return (
        "("
        + ", ".join("?" if s is None else str(s) for s in shape)
        + ("," if len(shape) == 1 else "")
        + ")"
    )


def _dims(dims: tuple[str | None, ...] | None) -> str:
    return "?" if dims is None else "(" + ", ".join(str(d) for d in dims) + ")"


def _model_class(target: str) -> type | None:
    import importlib

    module, _, name = target.rpartition(".")
    if not module.startswith("ddr."):
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _counted(arr: Any, path: str, name: str | None) -> tuple[Any, str, int] | None:
    """``arr`` read through a :class:`CountingStore` when the stored values are what xarray
    gives (no scale/offset, no fill-value masking that changes values), else None."""
    import dask.array as da
    import zarr

    from ddr.io.inputs import is_zarr_store
    from ddr.pipeline._counting import CountingStore, stored_bytes

    if not is_zarr_store(path) or not isinstance(arr.data, da.Array):
        return None
    enc = arr.encoding
    if "scale_factor" in enc or "add_offset" in enc:
        return None
    fill = enc.get("_FillValue")
    if fill is not None and not (isinstance(fill, float) and math.isnan(fill)):
        return None
    try:
        store = CountingStore(path, read_only=True)
        z = zarr.open_array(store=store, path=name or "", mode="r")
    except Exception:
        return None
    if np.dtype(z.dtype) != np.dtype(arr.dtype) or z.shape != arr.transpose(*arr.dims).shape:
        return None
    dims_stored = _stored_dims(z, arr)
    if dims_stored is None:
        return None
    data = da.from_zarr(z, chunks=_chunks_for(arr, dims_stored))
    counted = arr.transpose(*dims_stored).copy(data=data).transpose(*arr.dims)
    return counted, str(store.root), stored_bytes(path, name or "")


def _stored_dims(z: Any, arr: Any) -> tuple[str, ...] | None:
    names = getattr(z.metadata, "dimension_names", None) or z.attrs.get("_ARRAY_DIMENSIONS")
    if names and all(n is not None for n in names) and set(names) == {str(d) for d in arr.dims}:
        return tuple(names)
    return tuple(str(d) for d in arr.dims) if arr.ndim == 1 else None


def _chunks_for(arr: Any, dims: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    by_dim = dict(zip((str(d) for d in arr.dims), arr.data.chunks, strict=True))
    return tuple(by_dim[d] for d in dims)


def _metadata_fingerprint(path: str, name: str | None) -> Any:
    """What identifies a stored input without reading its values: the Zarr metadata
    documents of the store root and the array (attributes, shape, chunks, codecs), or the
    size and modification time of a netCDF file."""
    p = Path(path)
    if p.is_file():
        st = p.stat()
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    docs = {}
    for base in {p, p / name} if name else {p}:
        for fname in ("zarr.json", ".zarray", ".zattrs", ".zgroup"):
            f = base / fname
            if f.is_file():
                docs[str(f.relative_to(p))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return docs


def _existing(out: OutputPlan) -> tuple[str, str | None]:
    """Status of an output path and the fingerprint stored in it."""
    from ddr.io import output_status, read_attrs

    p = Path(out.path)
    if out.kind in ("zarr", "model"):
        status = output_status(p)
        stored = None
        if status == "complete":
            stored = read_attrs(p).get(FINGERPRINT_ATTR)
        return status, stored
    if not p.exists():
        return "missing", None
    from ddr.pipeline.reports import read_fingerprint

    stored = read_fingerprint(p)
    return ("complete", stored) if stored is not None else ("not-ddr", None)


def _resolved(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data, default=str))


def plan_pipeline(
    source: str | os.PathLike | Document,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    force: bool = False,
    resume: bool = False,
    check_outputs: bool = True,
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

    Raises
    ------
    PipelineError
        Every problem found, as ``file:line:col: message``.
    """
    doc = source if isinstance(source, Document) else load_document(source, overrides)
    planner = _Planner(doc, force=force, resume=resume, check_outputs=check_outputs)
    plan = planner.run()
    if plan is None:  # pragma: no cover - run() raises instead
        raise PipelineError([Problem(Location(doc.file), "invalid pipeline")])
    return plan
