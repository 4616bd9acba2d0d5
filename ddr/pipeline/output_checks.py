"""The planner's checks of outputs, and what to do with each existing one.

Mixed into the planner: each output's references must exist and be of a kind the output
can write (arrays to Zarr, models as models, small values as metrics, the right source for
each plot), dims must match, paths must not touch an input or another output, and an
existing output is kept, rewritten or refused according to ``if_exists``, its status and
its fingerprint.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from ddr.io.claims import claim_location
from ddr.io.locations import Location, LocationError, resolve
from ddr.pipeline.plan import (
    FINGERPRINT_ATTR,
    OutputPlan,
    StepPlan,
    ValueMeta,
    _a,
    _did_you_mean,
    _shape,
)
from ddr.pipeline.run_files import RunFile, refusals, run_files
from ddr.pipeline.schema import ModelOutput, Output, PlotOutput, ZarrOutput, split_ref

__all__ = ["OutputChecks", "output_refs"]


def output_refs(spec: Output) -> dict[str, str]:
    """What an output names in its file: variable or key -> reference (``coord:NAME`` for a
    Zarr output's coordinates, ``labels`` and ``y_from`` for a plot's)."""
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
    if isinstance(spec, PlotOutput) and spec.y_from:
        refs["y_from"] = spec.y_from
    return refs


class OutputChecks:
    """Output checks of :class:`ddr.pipeline.planner._Planner` (uses its state)."""

    doc: Any
    inputs: dict[str, Any]
    steps: dict[str, StepPlan]
    outputs: list[OutputPlan]
    bad_steps: set[str]
    force: bool
    resume: bool

    problem: Callable[..., Any]  # provided by the concrete class

    _resolve: Callable[..., Any]  # provided by the concrete class

    def _output(self, i: int, spec: Output, default_if_exists: str) -> None:
        refs = output_refs(spec)
        if isinstance(spec, PlotOutput) and spec.plot == "kde":
            data = self._training_data(spec.from_)
            if data is not None:  # a histogram of it under the density
                refs["kde:data"] = data
        if_exists = spec.if_exists or default_if_exists
        if self.force:
            if_exists = "overwrite"
        elif self.resume:
            if_exists = "skip-if-complete"
        try:
            location = resolve(spec.path, spec.storage_options)
            if location.read_only:
                raise LocationError(f"{location.url}: {location.protocol}:// URLs are read-only")
        except LocationError as exc:
            self.problem(("outputs", i, "path"), str(exc))
            return
        out = OutputPlan(i, spec, location, if_exists, refs)
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

    def _training_data(self, ref: str) -> str | None:
        """The X a fit step read (a loaded model's data is not at hand: None)."""
        head, tail = split_ref(ref)
        step = self.steps.get(head)
        if step is None or step.op.family != "fit" or tail not in (None, "model"):
            return None
        return step.refs.get("X")

    def _output_ref_path(self, index: int, spec: Output, key: str) -> tuple[Any, ...]:
        base = ("outputs", index)
        if key.startswith("coord:"):
            return (*base, "coords", key.removeprefix("coord:"))
        if key in ("labels", "y_from") and isinstance(spec, PlotOutput):
            return (*base, key)
        if key == "kde:data" and isinstance(spec, PlotOutput):
            return (*base, "from")
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
            if width is not None and spec.components[0] >= width:
                self.problem(
                    (*base, "components"),
                    f"components {list(spec.components)} but {spec.from_!r} has {width} columns",
                )
            ys = metas.get("y_from", src)
            where = spec.y_from or spec.from_
            if ys.kind != "array" or (ys.shape is not None and len(ys.shape) != 2):
                self.problem(
                    (*base, "y_from"),
                    f"y_from must be 2-D scores (samples x components); {where!r} is {_a(ys.kind)}",
                )
            elif ys.shape is not None and spec.components[1] >= (ys.shape[1] or np.inf):
                self.problem(
                    (*base, "components"),
                    f"components {list(spec.components)} but {where!r} has {ys.shape[1]} columns",
                )
            elif (
                ys.shape
                and src.shape
                and None not in (ys.shape[0], src.shape[0])
                and (ys.shape[0] != src.shape[0])
            ):
                self.problem(
                    (*base, "y_from"),
                    f"{where!r} has {ys.shape[0]} rows but {spec.from_!r} has {src.shape[0]}",
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

        seen: dict[Location, int] = {}
        inputs = [loc for _, loc in self._all_inputs()]
        for out in self.outputs:
            where = ("outputs", out.index, "path")
            try:
                check_not_input(out.location, inputs)
            except ValueError:
                inp = next(
                    (i for i in inputs if out.location.overlaps(i)),
                    inputs[0] if inputs else out.location,
                )
                rel = (
                    "is"
                    if out.location == inp
                    else "would be inside"
                    if inp.contains(out.location)
                    else "contains"
                )
                self.problem(
                    where,
                    f"the output {out.spec.path!r}{out.location.link_note} {rel} the input "
                    f"{inp.shown!r}; outputs never overwrite inputs",
                )
                continue
            claim = claim_location(out.location)
            inp = next((i for i in inputs if claim.overlaps(i)), None)
            if inp is not None:
                self.problem(
                    where,
                    f"the claim of the output {out.spec.path!r} ({claim.shown}) would be "
                    f"inside the input {inp.shown!r}; outputs never overwrite inputs",
                )
                continue
            for other, j in seen.items():
                if out.location.overlaps(other):
                    self.problem(
                        where,
                        f"the output {out.spec.path!r} overlaps outputs[{j}] "
                        f"({other.shown}); each output needs its own path",
                    )
                    break
            seen[out.location] = out.index

    def _check_run_files(self, run_opts: Any, given: dict[str, str | None]) -> list[RunFile]:
        """Resolve the run files (summary, its log, performance report) from the pipeline and
        from ``given`` (the command line), and check each against every input and every other
        path the run writes; return them."""
        from ddr.config.errors import Location as Place
        from ddr.config.errors import Problem

        def problem(origin: str, value: str, message: str) -> None:
            if origin.startswith("run."):
                self.problem(("run", origin.removeprefix("run.")), message)
            else:  # a command-line option
                self.doc.problems.append(Problem(Place(f"{origin} {value}", 0, 0), message))

        errors: list[tuple[str, str, str]] = []
        files = run_files(run_opts, given, errors=errors)
        for origin, value, message in errors:
            problem(origin, value, message)
        from ddr.io.inputs import opened_inputs

        inputs = self._all_inputs()
        known = {loc for _, loc in inputs}
        inputs += [("opened in this process", loc) for loc in opened_inputs() if loc not in known]
        for rf, why in refusals(files, inputs, self._written_outputs()):
            problem(rf.origin, rf.value, why)
        return files

    def _written_outputs(self) -> list[tuple[str, Location]]:
        """Every path the outputs write (each output and its claim), described for
        messages."""
        out = []
        for o in self.outputs:
            out.append((f"outputs[{o.index}]", o.location))
            out.append((f"the claim of outputs[{o.index}]", claim_location(o.location)))
        return out

    def _all_inputs(self) -> list[tuple[str, Location]]:
        """Every input as (name, location), those that could not be opened included, and
        the saved models the pipeline's load steps read (``the model of step S``)."""
        found = {name: p.location for name, p in self.inputs.items()}
        raw_inputs = self.doc.data.get("inputs") if isinstance(self.doc.data, dict) else {}
        for name, spec in raw_inputs.items() if isinstance(raw_inputs, dict) else []:
            if name in found or not isinstance(spec, dict):
                continue
            if isinstance(spec.get("path"), str):
                try:
                    found[name] = resolve(spec["path"])
                except LocationError:  # reported with the input
                    continue
        for sid, step in self.steps.items():
            if sid in self.bad_steps or step.op.family != "load":
                continue
            path, options = step.spec.with_.get("path"), step.spec.with_.get("storage_options")
            if isinstance(path, str) and (options is None or isinstance(options, dict)):
                try:
                    found[f"the model step {sid} loads"] = resolve(path, options)
                except LocationError:  # reported with the step
                    continue
        return list(found.items())

    def _decide_outputs(self) -> None:
        for out in self.outputs:
            where = ("outputs", out.index, "path")
            try:
                out.location.check_writable()
                status, stored = _existing(out)
            except (OSError, ImportError, LocationError) as exc:
                self.problem(where, f"output {out.spec.path!r}: {exc}")
                continue
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
                other = _written_elsewhere(out, self.doc.data.get("name"))
                if other is not None:
                    self.problem(
                        where,
                        f"{out.spec.path!r} holds {other}, complete; this pipeline replaces "
                        "only its own outputs (choose another path, or pass --force to "
                        "replace it)",
                    )
                    continue
                out.action, out.reason = "overwrite", self._outdated(out)
            else:
                out.action, out.reason = "overwrite", "incomplete"

    def _outdated(self, out: OutputPlan) -> str:
        """Why a complete output with another fingerprint is rewritten: what changed."""
        from ddr.pipeline.lineage import describe_changes, lineage, read_provenance

        planned = lineage(self.steps, self.inputs, list(out.refs.values()))
        changes = describe_changes(read_provenance(out.location, out.kind), planned)
        if not changes:
            return "complete but outdated (fingerprint differs)"
        return "complete but outdated: " + "; ".join(changes)


def _written_elsewhere(out: OutputPlan, pipeline: Any) -> str | None:
    """What a complete store at an output's path is when it is not an output of the
    pipeline named ``pipeline`` (a demo dataset, another pipeline's output, a model saved
    from Python), in words; None when this pipeline wrote it."""
    if out.kind not in ("zarr", "model"):
        return None  # small files (metrics, plots) are rewritten whole, never a dataset
    from ddr.io import read_attrs

    try:
        attrs = read_attrs(out.location)
    except (OSError, ValueError, KeyError):
        return "a store whose attributes cannot be read"
    prov = attrs.get("ddr:provenance")
    name = prov.get("pipeline", {}).get("name") if isinstance(prov, dict) else None
    if name is not None and name == pipeline:
        return None
    if "ddr:demo" in attrs:
        return "a dataset written by ddr demo-data"
    if name is not None:
        return f"an output of the pipeline {name!r}"
    if "ddr:model" in attrs:
        return f"a {attrs['ddr:model']} model saved outside a pipeline"
    return "a store written by ddr outside a pipeline"


def _existing(out: OutputPlan) -> tuple[str, str | None]:
    """Status of an output and the fingerprint stored in it, from its metadata document
    (Zarr) or the file itself (JSON, PNG)."""
    from ddr.io import output_status, read_attrs

    p = out.location
    if out.kind in ("zarr", "model"):
        status = output_status(p)
        stored = None
        if status == "complete":
            stored = read_attrs(p).get(FINGERPRINT_ATTR)
        return status, stored
    if not p.exists() or p.is_empty_folder():
        return "missing", None
    from ddr.pipeline.reports import read_fingerprint

    stored = read_fingerprint(p)
    return ("complete", stored) if stored is not None else ("not-ddr", None)
