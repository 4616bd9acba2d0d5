"""Execute a :class:`~ddr.pipeline.planner.Plan` under the active dask scheduler.

The phases of the plan run in order:

- ``batch``: the one-pass fits and statistics that are ready together give their lazy
  statistics (:class:`ddr.base.FitPlan`); all are computed in ONE ``dask.compute``, so each
  input is read once for all of them; then each plan's solve runs on the client;
- ``fit``: a multi-pass fit (the estimator makes its own passes);
- ``compute``: scores;
- ``lazy``: transforms, predictions and loaded models (no data is read);
- ``stream``: every output that needs data: arrays go to Zarr through
  :func:`ddr.io.write_zarr` with ``compute=False`` (the driver writes metadata, workers
  write their chunks), scatter samples and confusion counts join the same ``dask.compute``;
  then each output is finalized (every chunk checked, provenance, fingerprint and the
  completion marker written last).

Small outputs (saved models, statistics, fitted attributes, metrics, plots of models) are
written as soon as their sources exist, so a crash later in the run keeps them, and a rerun
with ``--resume`` loads a complete saved model instead of fitting again.

The bytes read from each Zarr input are counted in every process (client and workers), so
the run summary reports *measured* passes per step and per input.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ddr.pipeline._counting import count_key
from ddr.pipeline.errors import RunError
from ddr.pipeline.fitplans import call, fit_plan
from ddr.pipeline.planner import FINGERPRINT_ATTR, OutputPlan, Phase, Plan, StepPlan
from ddr.pipeline.schema import PlotOutput, ZarrOutput, split_ref

__all__ = ["RunSummary", "run_plan"]


# ------------------------------------------------------------------------- summary
@dataclass
class StepResult:
    id: str
    op: str
    action: str  # "fit", "fit (one shared pass)", "loaded", "lazy", "skipped", "computed"
    phase: int | None = None
    seconds: float = 0.0
    passes: dict[str, float] = field(default_factory=dict)
    shared_with: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class OutputResult:
    path: str
    kind: str
    action: str  # "written", "skipped"
    reason: str = ""
    phase: int | None = None
    seconds: float = 0.0
    passes: dict[str, float] = field(default_factory=dict)


@dataclass
class RunSummary:
    """What a run did: wall time, and per step and output what happened and what it read."""

    pipeline: str
    file: str
    status: str = "running"
    error: str | None = None
    started: str = ""
    wall_seconds: float = 0.0
    scheduler: str = ""
    dashboard: str | None = None
    ddr_version: str = ""
    steps: list[StepResult] = field(default_factory=list)
    outputs: list[OutputResult] = field(default_factory=list)
    passes: dict[str, float] = field(default_factory=dict)
    planned_passes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: str | os.PathLike) -> None:
        from ddr.pipeline.reports import write_json

        write_json(path, self.to_dict(), None)

    def format(self) -> str:
        """The summary as a text table (what ``ddr run`` prints)."""
        lines = [
            f"run {self.pipeline}: {self.status} in {self.wall_seconds:.2f} s "
            f"(scheduler: {self.scheduler})"
        ]
        if self.error:
            lines.append(f"  error: {self.error}")
        if self.steps:
            w = max(len(s.id) for s in self.steps)
            wo = max(len(s.op) for s in self.steps)
            lines.append(f"  {'step':<{w}}  {'op':<{wo}}  {'seconds':>8}  action / passes")
            for s in self.steps:
                passes = _fmt_passes(s.passes)
                extra = f" (one pass for {len(s.shared_with) + 1} steps)" if s.shared_with else ""
                note = f" ({s.note})" if s.note else ""
                lines.append(
                    f"  {s.id:<{w}}  {s.op:<{wo}}  {s.seconds:8.2f}  {s.action}{note}"
                    f"{'; ' + passes if passes else ''}{extra}"
                )
        for o in self.outputs:
            passes = _fmt_passes(o.passes)
            lines.append(
                f"  {o.action:<8} {o.kind:<7} {_rel(o.path)}  ({o.seconds:.2f} s"
                f"{'; ' + passes if passes else ''}{'; ' + o.reason if o.reason else ''})"
            )
        if self.passes:
            planned = ", ".join(f"{k} {v}" for k, v in self.planned_passes.items())
            lines.append(f"  passes over inputs: {_fmt_passes(self.passes)} (planned: {planned})")
        return "\n".join(lines)


def _fmt_passes(passes: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f} passes" for k, v in passes.items() if v > 0)


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("../..") else path


# ------------------------------------------------------------------- schedulers
def active_client() -> Any:
    """The distributed Client the active dask config uses, or None for local schedulers."""
    import dask

    try:
        from distributed import Client, default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    sched = dask.config.get("scheduler", None)
    if isinstance(sched, Client):
        return sched
    if sched is not None and not (
        isinstance(sched, str) and sched in ("dask.distributed", "distributed")
    ):
        return None
    try:
        return default_client()
    except ValueError:
        return None


def describe_scheduler(client: Any) -> str:
    import dask

    if client is None:
        sched = dask.config.get("scheduler", None) or "threads"
        return sched if isinstance(sched, str) else getattr(sched, "__name__", str(sched))
    try:
        info = client.scheduler_info()
        workers = info.get("workers", {})
        threads = sum(w.get("nthreads", 0) for w in workers.values())
        return f"distributed {info.get('address', '')} ({len(workers)} workers, {threads} threads)"
    except Exception:  # pragma: no cover - a scheduler that does not answer
        return "distributed"


# ----------------------------------------------------------------------- runner
class _Runner:
    def __init__(self, plan: Plan, *, progress: bool, argv: list[str] | None) -> None:
        import ddr

        self.plan = plan
        self.progress = progress
        self.argv = argv
        self.values: dict[str, dict[str, Any]] = {}
        self.client = active_client()
        self.summary = RunSummary(
            plan.pipeline.name,
            os.path.abspath(plan.file),
            started=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            scheduler=describe_scheduler(self.client),
            ddr_version=ddr.__version__,
            planned_passes=plan.passes(),
        )
        self.step_results = {
            sid: StepResult(sid, s.op.name, "skipped" if s.action == "skip" else "pending")
            for sid, s in plan.steps.items()
        }
        for sid, s in plan.steps.items():
            if s.action == "skip":
                self.step_results[sid].note = "not needed: its outputs are complete"
        self.output_results = {
            o.index: OutputResult(
                o.path, o.kind, "skipped" if o.action == "skip" else "pending", o.reason
            )
            for o in plan.outputs
        }
        self._versions: dict[str, str] | None = None

    # ----------------------------------------------------------- counting
    def _counts(self) -> dict[str, int]:
        from ddr.pipeline._counting import read_counts

        total = dict(read_counts())
        if self.client is not None:
            with contextlib.suppress(Exception):
                for counts in self.client.run(read_counts).values():
                    for k, v in counts.items():
                        total[k] = total.get(k, 0) + v
        return total

    def _passes(self, before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
        """Measured passes between two counter snapshots, per stored array."""
        out = {}
        for label, names in self.plan.stored_arrays().items():
            inp = self.plan.inputs[names[0]]
            if inp.store_root is None or not inp.stored_bytes:
                continue
            key = count_key(inp.store_root, inp.spec.array or "")
            delta = after.get(key, 0) - before.get(key, 0)
            if delta:
                out[label] = round(delta / inp.stored_bytes, 3)
        return out

    # -------------------------------------------------------------- compute
    def _compute(self, items: list[Any]) -> list[Any]:
        import dask

        if not items:
            return []
        if self.client is not None:
            futures = self.client.compute(items)
            if self.progress:
                from distributed import progress

                with contextlib.redirect_stdout(sys.stderr):
                    progress(futures, notebook=False)
                    sys.stderr.write("\n")
            return self.client.gather(futures)
        return list(dask.compute(*items))

    @contextlib.contextmanager
    def _local_progress(self) -> Iterator[None]:
        if self.progress and self.client is None:
            from dask.diagnostics import ProgressBar

            with ProgressBar(minimum=1.0, out=sys.stderr):
                yield
        else:
            yield

    # --------------------------------------------------------------- values
    def value(self, ref: str) -> Any:
        head, tail = split_ref(ref)
        if head in self.plan.inputs:
            return self.plan.inputs[head].array
        outs = self.values[head]
        step = self.plan.steps[head]
        if tail is None:
            return outs[step.op.primary]
        if tail in outs:
            return outs[tail]
        base = outs[step.op.primary]
        if step.op.primary == "statistic":
            attr = getattr(base, tail)
            return attr() if callable(attr) else attr
        model = base
        if not hasattr(model, tail):
            fitted = sorted(k for k in vars(model) if k.endswith("_") and not k.startswith("_"))
            raise RunError(
                f"{type(model).__name__} has no fitted attribute {tail!r}; it has: "
                f"{', '.join(fitted)}",
                ref,
            )
        if tail in getattr(model, "_xarray_dims", {}):
            return model.as_xarray(tail)
        return getattr(model, tail)

    def _args(self, step: StepPlan) -> dict[str, Any]:
        return {role: self.value(ref) for role, ref in step.refs.items()}

    # --------------------------------------------------------------- phases
    def run(self) -> RunSummary:
        start = time.perf_counter()
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.summary.dashboard = self.client.dashboard_link
        try:
            for i, phase in enumerate(self.plan.phases, start=1):
                with self._local_progress():
                    self._phase(i, phase)
            self.summary.status = "ok"
        except RunError as exc:
            self.summary.status = "failed"
            self.summary.error = str(exc)
            raise
        except Exception as exc:
            self.summary.status = "failed"
            self.summary.error = f"{type(exc).__name__}: {exc}"
            raise RunError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self.summary.wall_seconds = round(time.perf_counter() - start, 3)
            self.summary.steps = list(self.step_results.values())
            self.summary.outputs = [self.output_results[o.index] for o in self.plan.outputs]
            totals: dict[str, float] = {}
            for r in [*self.summary.outputs]:
                for k, v in r.passes.items():
                    totals[k] = totals.get(k, 0.0) + v
            seen_phases: set[int | None] = set()
            for s in self.summary.steps:
                if s.phase in seen_phases:
                    continue
                seen_phases.add(s.phase)
                for k, v in s.passes.items():
                    totals[k] = totals.get(k, 0.0) + v
            self.summary.passes = {k: round(v, 3) for k, v in totals.items()}
        return self.summary

    def _phase(self, index: int, phase: Phase) -> None:
        before = self._counts() if phase.kind != "lazy" else {}
        start = time.perf_counter()
        if phase.kind == "lazy":
            for sid in phase.steps:
                self._lazy_step(sid, index)
        elif phase.kind == "batch":
            self._batch(phase.steps, index)
        elif phase.kind in ("fit", "compute"):
            for sid in phase.steps:
                self._single(sid, index)
        elif phase.kind == "stream":
            self._stream(phase.outputs, index)
            return
        seconds = time.perf_counter() - start
        if phase.kind != "lazy":
            passes = self._passes(before, self._counts())
            for sid in phase.steps:
                res = self.step_results[sid]
                res.passes = passes
                res.phase = index
                if phase.kind != "batch":
                    res.seconds = round(seconds, 3)
        for i in phase.outputs:
            self._small_output(self.plan.outputs[i], index)

    def _lazy_step(self, sid: str, index: int) -> None:
        import ddr

        step = self.plan.steps[sid]
        res = self.step_results[sid]
        res.phase = index
        start = time.perf_counter()
        try:
            if step.action == "load":
                est = ddr.load(step.load_from)
                self._store_fit(step, est)
                res.action = "loaded"
                res.note = f"complete saved model {_rel(step.load_from)}, same fingerprint"
            elif step.op.family == "load":
                self.values[sid] = {"model": ddr.load(os.path.abspath(step.spec.with_["path"]))}
                res.action = "loaded"
            else:
                args = self._args(step)
                out = call(args["model"], step.op.method, args)
                if isinstance(out, tuple):  # (x_scores, y_scores) of a two-view transform
                    self.values[sid] = {"data": out[0], "y_data": out[1]}
                else:
                    self.values[sid] = {step.op.primary: out}
                res.action = "lazy"
        except RunError:
            raise
        except Exception as exc:
            raise RunError(f"{type(exc).__name__}: {exc}", f"step {sid} ({step.op.name})") from exc
        res.seconds = round(time.perf_counter() - start, 3)

    def _store_fit(self, step: StepPlan, est: Any) -> None:
        outs: dict[str, Any] = {"model": est}
        if step.op.method == "fit_transform":
            X = self.value(step.refs["X"])
            outs = {"data": call(est, "transform", {"X": X}), "model": est}
        self.values[step.id] = outs

    def _new(self, step: StepPlan) -> Any:
        return step.op.cls(**step.spec.with_)

    def _batch(self, sids: list[str], index: int) -> None:
        from ddr.stats import lazy

        plans: dict[str, tuple[Any, Any]] = {}
        alone: list[str] = []
        for sid in sids:
            step = self.plan.steps[sid]
            try:
                args = self._args(step)
                if step.op.family == "statistic":
                    spec = step.op.cls.spec(**step.spec.with_)
                    X = args["X"]
                    sdim = X.dims[0] if hasattr(X, "dims") else None
                    y, w = args.get("y"), args.get("sample_weight")
                    y = _along(y, sdim)
                    w = _along(w, sdim)
                    # the list form, as the generative classifiers use: equal specs of the
                    # same input then share one key (computed once)
                    plans[sid] = (lazy([spec], X, y, w, sample_dim=sdim), None)
                    continue
                est = self._new(step)
                plan = fit_plan(est, args)
            except Exception as exc:
                raise RunError(
                    f"{type(exc).__name__}: {exc}", f"step {sid} ({step.op.name})"
                ) from exc
            if plan is None:
                alone.append(sid)
            else:
                plans[sid] = (plan.statistics, plan.finish)
        start = time.perf_counter()
        try:
            computed = self._compute([p[0] for p in plans.values()])
        except Exception as exc:
            names = ", ".join(plans)
            raise RunError(
                f"{type(exc).__name__}: {exc}", f"one-pass statistics of {names}"
            ) from exc
        for (sid, (_, finish)), value in zip(plans.items(), computed, strict=True):
            step = self.plan.steps[sid]
            try:
                if finish is None:
                    self.values[sid] = {"statistic": _single(value)}
                else:
                    self._store_fit(step, finish(value))
            except Exception as exc:
                raise RunError(
                    f"{type(exc).__name__}: {exc}", f"step {sid} ({step.op.name})"
                ) from exc
        seconds = round(time.perf_counter() - start, 3)
        for sid in plans:
            res = self.step_results[sid]
            res.action = "fit" if self.plan.steps[sid].op.family == "fit" else "computed"
            res.seconds = seconds
            res.shared_with = [s for s in plans if s != sid]
        for sid in alone:
            self._single(sid, index)
            self.step_results[sid].note = "multi-pass fit"

    def _single(self, sid: str, index: int) -> None:
        step = self.plan.steps[sid]
        res = self.step_results[sid]
        start = time.perf_counter()
        try:
            args = self._args(step)
            if step.op.family == "apply":  # score
                self.values[sid] = {"value": float(call(args["model"], "score", args))}
                res.action = "computed"
            else:
                est = self._new(step)
                plan = fit_plan(est, args)
                if plan is not None:
                    (value,) = self._compute([plan.statistics])
                    est = plan.finish(value)
                    res.action = "fit (one pass)"
                else:
                    with self._local_progress():
                        est = call(est, "fit", args)
                    res.action = "fit"
                self._store_fit(step, est)
        except RunError:
            raise
        except Exception as exc:
            raise RunError(f"{type(exc).__name__}: {exc}", f"step {sid} ({step.op.name})") from exc
        res.seconds = round(time.perf_counter() - start, 3)
        res.phase = index

    # -------------------------------------------------------------- outputs
    def _versions_dict(self) -> dict[str, str]:
        if self._versions is None:
            import dask
            import sklearn
            import xarray
            import zarr

            import ddr

            self._versions = {
                "ddr": ddr.__version__,
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "dask": dask.__version__,
                "xarray": xarray.__version__,
                "zarr": zarr.__version__,
                "scikit-learn": sklearn.__version__,
            }
        return self._versions

    def _provenance(self, out: OutputPlan) -> dict[str, Any]:
        steps: dict[str, Any] = {}
        inputs: dict[str, Any] = {}

        def walk(ref: str) -> None:
            head, _ = split_ref(ref)
            if head in self.plan.inputs:
                inp = self.plan.inputs[head]
                inputs[head] = {
                    "path": inp.path,
                    "array": inp.spec.array,
                    "shape": list(inp.meta.shape or ()),
                    "dtype": str(inp.meta.dtype),
                    "fingerprint": inp.fingerprint,
                }
                return
            if head in steps:
                return
            step = self.plan.steps[head]
            steps[head] = {
                "op": step.op.name,
                "with": step.spec.with_,
                "inputs": dict(step.refs),
                "fingerprint": step.fingerprint,
            }
            for r in step.refs.values():
                walk(r)

        for ref in out.refs.values():
            walk(ref)
        return {
            "pipeline": {
                "name": self.plan.pipeline.name,
                "file": os.path.abspath(self.plan.file),
                "resolved": self.plan.resolved,
            },
            "output": {"index": out.index, "kind": out.kind, "from": dict(out.refs)},
            "steps": steps,
            "inputs": inputs,
            "versions": self._versions_dict(),
            "run": {"started": self.summary.started, "command": " ".join(self.argv or sys.argv)},
        }

    def _small_output(self, out: OutputPlan, index: int) -> None:
        res = self.output_results[out.index]
        res.phase = index
        start = time.perf_counter()
        try:
            if out.kind == "model":
                self._write_model(out)
            elif out.kind == "metrics":
                self._write_metrics(out)
            elif out.kind == "plot":
                self._write_plot(out, {})
            else:
                pending, _ = self._zarr_pending(out)
                self._compute([pending.delayed])
                pending.finalize()
        except RunError:
            raise
        except Exception as exc:
            raise RunError(f"{type(exc).__name__}: {exc}", f"output {_rel(out.path)}") from exc
        res.action = "written"
        res.seconds = round(time.perf_counter() - start, 3)

    def _if_exists(self, out: OutputPlan) -> str:
        return "overwrite" if out.action == "overwrite" else "error"

    def _write_model(self, out: OutputPlan) -> None:
        from ddr.io.models import save_model
        from ddr.io.outputs import PROVENANCE_ATTR, history_line

        model = self.value(out.refs[next(iter(out.refs))])
        attrs = {
            FINGERPRINT_ATTR: out.fingerprint,
            PROVENANCE_ATTR: self._provenance(out),
            "history": history_line(self.argv),
        }
        save_model(model, out.path, if_exists=self._if_exists(out), attrs=attrs)

    def _write_metrics(self, out: OutputPlan) -> None:
        from ddr.pipeline.reports import write_json

        data: dict[str, Any] = {}
        for key, ref in out.refs.items():
            value = self.value(ref)
            if hasattr(value, "to_dict") and hasattr(value, "merge"):  # a statistic
                value = _statistic_readouts(value)
            data[key] = value
        data["ddr:provenance"] = self._provenance(out)
        _prepare_file(out)
        write_json(out.path, data, out.fingerprint)

    def _write_plot(self, out: OutputPlan, computed: dict[str, Any]) -> None:
        from ddr.pipeline.reports import plot

        spec: PlotOutput = out.spec  # type: ignore[assignment]
        data: dict[str, Any] = dict(computed)
        if spec.plot in ("scree", "kde", "loglik"):
            data["model"] = self.value(spec.from_)
        _prepare_file(out)
        plot(spec.plot, out.path, out.fingerprint, spec.title, **data)

    def _zarr_pending(self, out: OutputPlan) -> tuple[Any, Any]:
        """Write the metadata of a Zarr output (``ddr.io.write_zarr(compute=False)``); return
        the pending output and the dataset whose lazy variables are still to be written."""
        import xarray as xr

        from ddr.io import write_zarr

        spec: ZarrOutput = out.spec  # type: ignore[assignment]
        variables: dict[str, Any] = {}
        coords: dict[str, Any] = {}
        for key, ref in out.refs.items():
            value = self.value(ref)
            if key.startswith("coord:"):
                coords[key.removeprefix("coord:")] = value
                continue
            if hasattr(value, "to_dict") and hasattr(value, "merge"):  # a whole statistic
                for name, arr in _statistic_dataset(value, self._feature_dim(ref)).items():
                    variables[name if len(out.refs) == 1 else f"{key}_{name}"] = arr
                continue
            variables[key] = _as_dataarray(value, key)
        if isinstance(spec.dims, list):
            key = next(iter(variables))
            variables[key] = _rename_dims(variables[key], spec.dims)
        elif isinstance(spec.dims, dict):
            for var, dims in spec.dims.items():
                variables[var] = _rename_dims(variables[var], dims)
        ds = xr.Dataset(variables)
        for cname, value in coords.items():
            arr = _as_dataarray(value, cname)
            sdim = _sample_dim_of(ds)
            if sdim is None:
                raise RunError(
                    f"coordinate {cname!r} needs an array along samples in `from`",
                    f"output {_rel(out.path)}",
                )
            ds = ds.assign_coords({cname: (sdim, arr.data)})
        ds = _regular_chunks(_variable_strings(ds))
        attrs = dict(spec.attrs)
        attrs.setdefault("title", f"{self.plan.pipeline.name}: {', '.join(out.refs.values())}")
        pending = write_zarr(
            ds,
            out.path,
            if_exists=self._if_exists(out),
            inputs=[i.path for i in self.plan.inputs.values()],
            attrs=attrs,
            fingerprint=out.fingerprint,
            provenance=self._provenance(out),
            compute=False,
        )
        return pending, ds

    def _feature_dim(self, ref: str) -> str:
        step = self.plan.steps.get(split_ref(ref)[0])
        if step is not None and "X" in step.refs:
            X = self.value(step.refs["X"])
            dims = getattr(X, "dims", None)
            if dims and len(dims) == 2:
                return str(dims[1])
        return "feature"

    def _stream(self, indices: list[int], index: int) -> None:
        """Write every output that needs data in ONE compute.

        Each Zarr output's metadata is written by :func:`ddr.io.write_zarr` (``compute=False``);
        its lazy variables are then stored chunk by chunk into the arrays it created, all
        outputs together with one ``da.store`` and the plot data in the same ``compute``, so
        an input read by several outputs is read once (separate ``write_zarr`` graphs would
        each read it). Variables that cannot be stored raw (a CF encoding changes values)
        fall back to the pending output's own graph.
        """
        import dask.array as da

        from ddr.pipeline.reports import confusion_blocks, merge_confusion, sample_rows

        before = self._counts()
        start = time.perf_counter()
        sources: list[Any] = []
        targets: list[Any] = []
        items: list[Any] = []
        slots: list[tuple[OutputPlan, str, Any]] = []
        for i in indices:
            out = self.plan.outputs[i]
            try:
                if out.kind == "zarr":
                    pending, ds = self._zarr_pending(out)
                    raw = _raw_writes(pending.path, ds)
                    if raw is None:
                        items.append(pending.delayed)
                    else:
                        sources.extend(src for src, _ in raw)
                        targets.extend(tgt for _, tgt in raw)
                    slots.append((out, "zarr", pending))
                elif out.kind == "plot":
                    spec: PlotOutput = out.spec  # type: ignore[assignment]
                    src = _data(self.value(spec.from_))
                    labels = _data(self.value(spec.labels)) if spec.labels else None
                    if spec.plot == "scatter":
                        cols = list(spec.components)
                        lazy = {"scores": sample_rows(src, spec.max_points)[:, cols]}
                        if labels is not None:
                            lazy["labels"] = sample_rows(labels, spec.max_points)
                        meta = {"n_total": int(src.shape[0]), "components": (0, 1)}
                    else:  # confusion
                        lazy = {"confusion": confusion_blocks(src, labels)}
                        meta = {}
                    slots.append((out, "plot", (list(lazy), meta)))
                    items.extend(lazy.values())
                else:  # pragma: no cover - the planner streams only zarr outputs and plots
                    raise RunError(f"cannot stream a {out.kind} output", f"output {out.path}")
            except RunError:
                raise
            except Exception as exc:
                raise RunError(f"{type(exc).__name__}: {exc}", f"output {_rel(out.path)}") from exc
        stores: list[Any] = []
        if sources:
            stored = da.store(sources, targets, lock=False, compute=False)
            stores = list(stored) if isinstance(stored, tuple) else [stored]
        try:
            values = self._compute([*stores, *items])[len(stores) :]
        except Exception as exc:
            names = ", ".join(_rel(self.plan.outputs[i].path) for i in indices)
            raise RunError(f"{type(exc).__name__}: {exc}", f"writing {names}") from exc
        pos = 0
        for out, kind, payload in slots:
            try:
                if kind == "zarr":
                    if payload.delayed is not None and any(d is payload.delayed for d in items):
                        pos += 1
                    payload.finalize()
                else:
                    names, meta = payload
                    computed = dict(zip(names, values[pos : pos + len(names)], strict=True))
                    pos += len(names)
                    if "confusion" in computed:
                        computed["confusion"] = merge_confusion(computed["confusion"])
                    self._write_plot(out, {**computed, **meta})
            except Exception as exc:
                raise RunError(f"{type(exc).__name__}: {exc}", f"output {_rel(out.path)}") from exc
        seconds = round(time.perf_counter() - start, 3)
        passes = self._passes(before, self._counts())
        for i in indices:
            res = self.output_results[i]
            res.action, res.phase, res.seconds = "written", index, seconds
        if indices:
            self.output_results[indices[0]].passes = passes


# ------------------------------------------------------------------------ helpers
def _variable_strings(ds: Any) -> Any:
    """Lazy fixed-width strings (string class labels) as numpy's variable-length StringDType:
    xarray writes those lazily to Zarr v3 strings, where object arrays would be computed
    first to find their type (an extra pass over the input)."""
    import dask.array as da

    out = {}
    for name, var in ds.variables.items():
        if isinstance(var.data, da.Array) and var.dtype.kind == "U":
            out[name] = var.copy(data=var.data.astype(np.dtypes.StringDType()))
    return ds.assign(out) if out else ds


def _regular_chunks(ds: Any) -> Any:
    """Dask variables rechunked so every chunk but the last has the size of the first (what
    ``ddr.io.write_zarr`` also does), so each dask chunk is exactly one Zarr chunk."""
    import dask.array as da

    out = {}
    for name, var in ds.variables.items():
        data = var.data
        if isinstance(data, da.Array) and not any(np.isnan(c) for cs in data.chunks for c in cs):
            target = tuple(max(c) if c else 1 for c in data.chunks)
            regular = all(
                all(x == t for x in c[:-1]) and (not c or c[-1] <= t)
                for c, t in zip(data.chunks, target, strict=True)
            )
            if not regular:
                out[name] = var.copy(data=data.rechunk(target))
    return ds.assign(out) if out else ds


def _raw_writes(path: Path, ds: Any) -> list[tuple[Any, Any]] | None:
    """``(dask source, zarr target)`` for every lazy variable of ``ds`` that can be stored
    as it is into the arrays ``write_zarr`` created at ``path`` (same dtype, one dask chunk
    per Zarr chunk, no CF encoding); None if any cannot (then xarray's graph writes them)."""
    import dask.array as da
    import zarr

    pairs = []
    for name, var in ds.variables.items():
        data = var.data
        if not isinstance(data, da.Array):
            continue
        enc = var.encoding
        if any(k in enc for k in ("scale_factor", "add_offset", "units", "calendar")):
            return None
        if data.dtype.kind not in "biufUOT":
            return None
        if any(np.isnan(c) for cs in data.chunks for c in cs):
            return None
        try:
            target = zarr.open_array(
                store=str(path), path=str(name), mode="r+", config={"write_empty_chunks": True}
            )
        except Exception:
            return None
        if data.dtype.kind in "UOT":
            if target.dtype.kind not in "OUT" and "str" not in str(target.dtype).lower():
                return None
            data = data.astype(object)
        elif np.dtype(target.dtype) != data.dtype:
            return None
        if tuple(target.chunks) != tuple(c[0] for c in data.chunks) or target.shape != data.shape:
            return None
        pairs.append((data, target))
    return pairs


def _single(value: Any) -> Any:
    """The statistic of a one-element list-form result (``ddr.stats.lazy([spec], ...)``).

    A single-form request of the same spec on the same data has the same dask key in
    ``ddr.stats.engine`` (its final key does not include the form), so either form may
    arrive; both are accepted.
    """
    return value[0] if isinstance(value, tuple) else value


def _data(value: Any) -> Any:
    return value.data if hasattr(value, "dims") and hasattr(value, "data") else value


def _along(v: Any, sdim: Any) -> Any:
    dims = getattr(v, "dims", None)
    if v is None or sdim is None or dims is None or len(dims) != 1 or dims[0] == sdim:
        return v
    return v.rename({dims[0]: sdim})


def _as_dataarray(value: Any, name: str) -> Any:
    import xarray as xr

    if isinstance(value, xr.DataArray):
        return value.rename(name)
    if isinstance(value, (int, float, np.generic)) or np.ndim(value) == 0:
        return xr.DataArray(np.asarray(value), name=name)
    arr = value if hasattr(value, "chunks") else np.asarray(value)
    dims = (
        ("sample", "feature")[: arr.ndim]
        if arr.ndim <= 2
        else tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
    )
    if not hasattr(value, "chunks"):
        dims = tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
    return xr.DataArray(arr, dims=dims, name=name)


def _rename_dims(arr: Any, dims: list[str]) -> Any:
    return arr.rename(dict(zip(arr.dims, dims, strict=True)))


def _sample_dim_of(ds: Any) -> str | None:
    for var in ds.data_vars.values():
        if var.ndim >= 1 and hasattr(var.data, "chunks") and var.data.chunks is not None:
            return str(var.dims[0])
    return None


def _statistic_readouts(stat: Any) -> dict[str, Any]:
    name = type(stat).__name__
    out: dict[str, Any] = {}
    from ddr.pipeline.registry import READOUTS

    for readout in READOUTS.get(name, ()):
        try:
            attr = getattr(stat, readout)
            out[readout] = attr() if callable(attr) else attr
        except Exception:  # a read-out that does not apply (e.g. covariance of a diagonal)
            continue
    if not out:
        out = {k: v for k, v in stat.to_dict().items() if k != "type"}
    return out


def _statistic_dataset(stat: Any, feature_dim: str) -> dict[str, Any]:
    import xarray as xr

    fd = feature_dim
    dims_of = {
        "mean": (fd,),
        "variance": (fd,),
        "std": (fd,),
        "covariance": (fd, f"{fd}_2"),
        "correlation": (fd, f"{fd}_2"),
        "classes": ("class",),
        "counts": ("class",),
        "priors": ("class",),
        "means": ("class", fd),
        "variances": ("class", fd),
        "covariances": ("class", fd, f"{fd}_2"),
        "pooled_covariance": (fd, f"{fd}_2"),
        "within_scatter": (fd, f"{fd}_2"),
        "between_scatter": (fd, f"{fd}_2"),
        "class_counts": ("class",),
    }
    out = {}
    for name, value in _statistic_readouts(stat).items():
        arr = np.asarray(value)
        dims = dims_of.get(name)
        if dims is None or len(dims) != arr.ndim:
            dims = tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
        if arr.dtype.kind == "U":
            arr = arr.astype(object)
        out[name] = xr.DataArray(arr, dims=dims, name=name)
    if "variance" in out and "covariance" in out and out["covariance"].ndim != 2:
        del out["covariance"]
    return out


def _prepare_file(out: OutputPlan) -> None:
    """Refuse to replace a file the plan did not decide to overwrite (it appeared since)."""
    p = Path(out.path)
    if out.action != "overwrite" and p.exists():
        raise FileExistsError(f"{out.path!r} appeared while the pipeline ran; not replacing it")


def run_plan(
    plan: Plan,
    *,
    progress: bool | None = None,
    summary_path: str | None = None,
    performance_report: str | None = None,
    argv: list[str] | None = None,
    echo: Any = None,
) -> RunSummary:
    """Run ``plan`` under the active dask scheduler and return its summary.

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.
    progress : bool, optional
        Show progress bars (default: the pipeline's ``run.progress``).
    summary_path : str, optional
        Write the run summary JSON here (default: the pipeline's ``run.summary``).
    performance_report : str, optional
        Write a dask performance report (HTML; needs a distributed scheduler).
    argv : list of str, optional
        The command recorded in provenance and CF ``history`` (default ``sys.argv``).
    echo : callable, optional
        Where to print the dashboard link and notes (default: stderr).

    Raises
    ------
    RunError
        A step or an output failed; the summary (status "failed") is still written.
    """
    opts = plan.pipeline.run
    progress = opts.progress if progress is None else progress
    summary_path = summary_path or opts.summary
    performance_report = performance_report or opts.performance_report
    say = echo or (lambda msg: print(msg, file=sys.stderr))
    runner = _Runner(plan, progress=progress, argv=argv)
    if runner.client is not None:
        with contextlib.suppress(Exception):
            say(f"dask dashboard: {runner.client.dashboard_link}")
    report: Any = contextlib.nullcontext()
    if performance_report:
        import importlib.util

        if runner.client is None:
            say("note: a performance report needs a distributed scheduler; none written")
        elif importlib.util.find_spec("bokeh") is None:
            say("note: a performance report needs bokeh (pip install 'bokeh>=3.1'); none written")
        else:
            from distributed import performance_report as _report

            Path(performance_report).parent.mkdir(parents=True, exist_ok=True)
            report = _report(filename=os.path.abspath(performance_report))
    from threadpoolctl import threadpool_limits

    # one BLAS thread per dask thread; distributed workers get theirs from their nanny
    limits: Any = threadpool_limits(1) if runner.client is None else contextlib.nullcontext()
    try:
        with limits, _as_current(runner.client), report:
            summary = runner.run()
    finally:
        if summary_path:
            with contextlib.suppress(Exception):
                runner.summary.write(os.path.abspath(summary_path))
    return summary


@contextlib.contextmanager
def _as_current(client: Any) -> Iterator[None]:
    if client is None:
        yield
        return
    with client.as_current():
        yield


def summary_json(summary: RunSummary) -> str:
    return json.dumps(summary.to_dict(), indent=2, default=str)
