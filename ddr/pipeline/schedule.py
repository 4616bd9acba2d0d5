"""The planner's decisions of what runs, and in which phases.

Mixed into the planner. A step is needed when an output that will be written depends on
it; a needed fit whose saved model is a complete output with the same fingerprint is
loaded instead of refitted. Needed steps are then grouped into phases: everything lazy
first, then all ready one-pass fits and statistics together (one ``dask.compute``, one read
of each input), then scores, then multi-pass fits one at a time, and finally one phase that
streams every output needing data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddr.pipeline.fitplans import SAMPLE_DIMS_ATTR
from ddr.pipeline.outputs import output_kind
from ddr.pipeline.plan import OutputPlan, Phase, StepPlan, ValueMeta
from ddr.pipeline.searches import SEARCH_OUTPUTS, SEARCH_PASSES
from ddr.pipeline.spec_types import split_ref
from ddr.tags import get_ddr_tags

__all__ = ["Scheduling"]


def _forbid_compute(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    raise RuntimeError("the planner must not read data")


class Scheduling:
    """Step decisions and phases of :class:`ddr.pipeline.planner._Planner` (uses its state)."""

    inputs: dict[str, Any]
    steps: dict[str, StepPlan]
    outputs: list[OutputPlan]
    state: Any  # the run's state (ddr.pipeline.update_types.StatePlan), from StatePlanning

    def _decide_steps(self) -> None:
        """Which steps the outputs to write (and the run's state) need, and which of those
        load a saved model or are solved from the recorded statistics.

        A step whose statistics a state written by this run keeps is needed, unless the last
        run's state has them as this run would compute them (then they are copied); a step
        loaded from a saved model gives the statistics the model keeps.
        """
        state = self.state
        writes_state = state is not None and state.action == "write"
        saved: dict[str, Any] = {}
        for out in self.outputs:
            head = output_kind(out.kind).saved_model(out) if out.action == "skip" else None
            if head is not None:
                saved.setdefault(head, out.location)
        # a searched step is loaded from its saved model only if nothing to be written needs
        # its search (the plot, the results): a saved model keeps no folds
        searched = {
            split_ref(ref)[0]
            for out in self.outputs
            if out.action != "skip"
            for ref in out.refs.values()
            if split_ref(ref)[1] in SEARCH_OUTPUTS
        }
        needed: set[str] = set()

        def need(ref: str) -> None:
            head, _ = split_ref(ref)
            if head not in self.steps or head in needed:
                return
            needed.add(head)
            step = self.steps[head]
            if step.recording is not None and step.recording.mode == "recorded":
                # solved from the recorded statistics: reads nothing (the steps before it
                # give lazy arrays, for the features' names and numbers)
                step.action = "recorded"
                if "model" in step.outputs:
                    step.outputs["model"].reads = frozenset()
                for r in step.refs.values():
                    need(r)
                return
            if (
                step.op.family == "fit"
                and head in saved
                and step.op.method == "fit"
                and not (step.spec.search is not None and head in searched)
            ):
                step.action, step.load_from = "load", saved[head]
                if "model" in step.outputs:  # loaded: its data are in memory, read from it
                    step.outputs["model"].reads = frozenset()
                return
            for r in step.refs.values():
                need(r)

        for out in self.outputs:
            if out.action != "skip":
                for ref in out.refs.values():
                    need(ref)
        if writes_state:  # the state keeps what it cannot copy from the last run's
            for sid in state.recorded:
                if not self._carried(sid):  # type: ignore[attr-defined]
                    need(sid)
        for sid, step in self.steps.items():
            if sid not in needed:
                step.action = "skip"

    def _schedule(self) -> list[Phase]:
        todo = [s for s in self.steps.values() if s.action != "skip"]
        for s in todo:
            if s.action == "run" and s.spec.search is not None:
                # a grid search: two passes of its own, whatever the folds and candidates
                s.one_pass, s.search = False, self._plan_search(s)
                s.passes = SEARCH_PASSES  # known whatever the shapes (a width may not be)
                continue
            if s.action == "run" and s.op.family in ("fit", "statistic"):
                s.one_pass = self._is_one_pass(s)
                s.passes = self._fit_passes(s)
                if s.one_pass and (s.passes is not None or not self._open_ended(s)):
                    s.passes = 1  # else: one pass, then more if it needs them (EM, NaN)
        done: set[str] = {s.id for s in self.steps.values() if s.action == "skip"}
        phases: list[Phase] = []
        written: set[int] = set()
        while todo:
            ready = [s for s in todo if s.deps <= done]
            lazy = [
                s
                for s in ready
                if s.action in ("load", "recorded")
                or s.op.family == "load"
                or (s.op.family == "apply" and s.op.method != "score")
            ]
            batch = [s for s in ready if s not in lazy and s.one_pass]
            scores = [s for s in ready if s.op.family == "apply" and s.op.method == "score"]
            searches = [s for s in ready if s not in lazy and s.spec.search is not None]
            if lazy:
                phase = Phase("lazy", [s.id for s in lazy])
            elif batch:
                phase = Phase("batch", [s.id for s in batch])
            elif scores:
                phase = Phase("compute", [s.id for s in scores])
            elif searches:
                phase = Phase("search", [searches[0].id])
            else:
                phase = Phase("fit", [ready[0].id])
            if phase.kind != "lazy":
                for sid in phase.steps:
                    for inp in self._reads(self.steps[sid]):
                        # a batch reads each input once; each score is its own pass; a
                        # multi-pass fit as often as its estimator says (1 if not known)
                        count = phase.reads.get(inp, 0) + 1 if phase.kind == "compute" else 1
                        if phase.kind in ("fit", "search"):
                            count = self.steps[sid].passes or 1
                        phase.reads[inp] = count
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
                    for inp in self._model_reads(out):
                        phase.reads[inp] = phase.reads.get(inp, 0) + 1
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
            for i in rest:  # after the streaming compute, drawn or saved on their own
                for inp in self._model_reads(self.outputs[i]):
                    phase.reads[inp] = phase.reads.get(inp, 0) + 1
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
            if meta is not None and meta.kind in ("array", "model"):
                out |= meta.reads
        return out

    def _model_reads(self, out: OutputPlan) -> set[str]:
        """The inputs an output reads on its own, through a whole model it is given that
        keeps its training data (an exact KDE saved, or its density drawn): one pass each."""
        found: set[str] = set()
        for ref in out.refs.values():
            head, tail = split_ref(ref)
            meta = self._ref_meta(ref)
            if head in self.steps and meta is not None and meta.kind == "model" and not tail:
                found |= meta.reads
        return found

    def _is_one_pass(self, step: StepPlan) -> bool | None:
        """Whether the fit is one pass of statistics, asked of the estimator on lazy stand-ins
        (nothing is computed: a compute here raises). An estimator that refuses the inputs
        (a ValueError or TypeError from ``_fit_plan``) is a problem of the step, reported
        with its location; anything else is raised."""
        import dask

        from ddr.pipeline.fitplans import fit_plan

        if step.op.family == "statistic":
            return True
        args = self._lazy_args(step)
        if args is None:
            return None
        est = step.op.cls(**step.spec.with_)
        try:
            with dask.config.set(scheduler=_scheduler_for(args)):
                plan = fit_plan(est, args)
        except (TypeError, ValueError) as exc:
            self.problem(("steps", step.id), f"{step.op.name}: {exc}")  # type: ignore[attr-defined]
            return None
        return plan is not None

    def _lazy_args(self, step: StepPlan) -> dict[str, Any] | None:
        """The step's arguments as lazy arrays: inputs as they are, arrays of steps as
        zeros of their shape (None when a shape is not known)."""
        args = {}
        for role, ref in step.refs.items():
            head, _ = split_ref(ref)
            if head in self.inputs:
                inp = self.inputs[head]
                grid = inp.array.attrs.get(SAMPLE_DIMS_ATTR)
                args[role] = _grid_standin(inp.array, inp.grid_mask) if grid else inp.array
            else:
                meta = self._ref_meta(ref)
                if meta is None or meta.shape is None or any(s is None for s in meta.shape):
                    return None
                args[role] = _standin(meta)
        return args

    def _plan_search(self, step: StepPlan) -> Any:
        """What a searched step's grid search costs (:func:`ddr.pipeline.searches.plan_search`
        on lazy stand-ins, nothing computed); what it refuses is a problem of its ``search``."""
        from ddr.pipeline.searches import plan_search

        args = self._lazy_args(step)
        if args is None or step.spec.search is None:
            return None
        import dask

        try:
            with dask.config.set(scheduler=_scheduler_for(args)):
                return plan_search(step.op, step.spec.with_, step.spec.search, args)
        except (TypeError, ValueError) as exc:
            self.problem(("steps", step.id, "search"), f"{step.op.name}: {exc}")  # type: ignore[attr-defined]
            return None

    def _open_ended(self, step: StepPlan) -> bool:
        """Whether the estimator says its passes over an X of this shape are decided while
        it fits (EM on data with missing values goes on after its first pass)."""
        if step.op.family != "fit" or "X" not in step.refs:
            return False
        meta = self._ref_meta(step.refs["X"])
        if meta is None or meta.shape is None or len(meta.shape) != 2 or None in meta.shape:
            return False
        try:
            tags = get_ddr_tags(step.op.cls, **step.spec.with_)
            return tags.fit.passes(int(meta.shape[0]), int(meta.shape[1])) is None
        except Exception:
            return False

    def _fit_passes(self, step: StepPlan) -> int | None:
        """The passes of a multi-pass fit over its X, when the estimator knows them from the
        shape (randomized PCA: ``n_power_iter + 1``); None when decided while fitting."""
        if "X" not in step.refs:
            return None
        meta = self._ref_meta(step.refs["X"])
        if meta is None or meta.shape is None or len(meta.shape) != 2 or None in meta.shape:
            return None
        try:
            tags = get_ddr_tags(step.op.cls, **step.spec.with_)
            return tags.fit.passes(int(meta.shape[0]), int(meta.shape[1]))
        except Exception:
            return None


#: the name of the zeros a grid input is replaced by while planning
_GRID_STANDIN = "ddr-grid-standin"


def _grid_standin(arr: Any, mask: Any) -> Any:
    """A grid input (``sample_dims:``) as zeros of its shape, chunks, dims, coordinates and
    attributes, NaN where its ``mask`` (read while opening it) is: what a fit on it plans is
    asked of these, since reading it as a grid reads its first sample again."""
    import dask.array as da

    ns = arr.ndim - (mask.ndim if mask is not None else 0)
    nan = None
    if mask is not None and mask.any() and np.dtype(arr.dtype).kind == "f":
        nan = np.where(mask, np.nan, 0.0)
    zeros = da.map_blocks(
        _standin_block, nan, ns, np.dtype(arr.dtype), chunks=arr.data.chunks,
        dtype=arr.dtype, name=f"{_GRID_STANDIN}-{da.core.tokenize(arr.shape, nan)}",
        meta=np.empty((0,) * arr.ndim, dtype=arr.dtype),
    )  # fmt: skip
    return arr.copy(data=zeros)


def _standin_block(nan: Any, ns: int, dtype: Any, block_info: Any = None) -> np.ndarray:
    """A block of a grid's stand-in: zeros, NaN at the masked features."""
    where = block_info[None]["array-location"]
    shape = tuple(hi - lo for lo, hi in where)
    if nan is None:
        return np.zeros(shape, dtype=dtype)
    part = nan[tuple(slice(lo, hi) for lo, hi in where[ns:])]
    return np.broadcast_to(part, shape).astype(dtype)


def _scheduler_for(args: dict[str, Any]) -> Any:
    """Dask's synchronous scheduler where a grid's stand-in is among ``args`` (its first
    sample, zeros, is computed: nothing is read), else one that refuses every compute."""
    grid = any(
        getattr(getattr(v, "data", None), "name", "").startswith(_GRID_STANDIN)
        for v in args.values()
    )
    return "sync" if grid else _forbid_compute


def _standin(meta: ValueMeta) -> Any:
    import dask.array as da
    import xarray as xr

    shape = tuple(int(s) for s in meta.shape)
    dtype = meta.dtype if meta.dtype is not None else np.float64
    arr = da.zeros(shape, dtype=dtype, chunks=(max(1, shape[0]), *shape[1:]))
    dims = tuple(d or f"dim_{i}" for i, d in enumerate(meta.dims or ())) or None
    return xr.DataArray(arr, dims=dims) if dims and len(dims) == len(shape) else arr
