"""The planner's decisions about the run's state (:mod:`ddr.pipeline.run_state`).

Mixed into the planner. Every run of a pipeline whose ``run.state`` is not ``false``
records, beside its outputs, what it read of each input (one listing of its stored chunks)
and the statistics of each step whose fit is one pass of mergeable statistics; the next
``ddr run --update`` reads only the rows appended since (:mod:`ddr.pipeline.update_plan`).
Here the planner:

- places the state (``run.state``, or ``<name>.state.zarr`` beside the first output) and
  checks it against every input and every path the run writes;
- lists each input's stored chunks (:func:`ddr.io.chunk_records.array_record`) and notes
  which rows its selection takes;
- finds the steps whose statistics can be recorded (:meth:`StatePlanning._mergeable`) and
  where each one's statistics are split (:class:`~ddr.pipeline.update_types.Recording`:
  the prefix of rows in complete stored chunks, so that a chunk an append rewrites is read
  again and never trusted);
- fingerprints the state and decides whether this run writes it.
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable
from typing import Any

import numpy as np

from ddr.io.locations import Location, LocationError, resolve
from ddr.pipeline.plan import OutputPlan, StepPlan, _sha
from ddr.pipeline.recorded_masks import contiguous_start, input_identity
from ddr.pipeline.run_state import InputRecord, RunState
from ddr.pipeline.spec_types import split_ref
from ddr.pipeline.update_types import Recording, StatePlan

__all__ = ["StatePlanning", "contiguous_start", "forbid_compute"]


def _forbid(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    raise RuntimeError("the planner must not read data")


def forbid_compute() -> Any:
    """A dask config in which any compute raises (the planner reads no data)."""
    import dask

    return dask.config.set(scheduler=_forbid)


class StatePlanning:
    """State decisions of :class:`ddr.pipeline.planner._Planner` (uses its state)."""

    doc: Any
    inputs: dict[str, Any]
    steps: dict[str, StepPlan]
    outputs: list[OutputPlan]
    force: bool
    state: StatePlan | None
    updating: bool
    check_outputs: bool
    #: the state :meth:`_last_state` read (its location's URL, and read_state's answer)
    _state_read: tuple[str, tuple[RunState | None, str]] | None = None

    problem: Callable[..., Any]  # provided by the concrete class
    _ref_meta: Callable[..., Any]  # provided by Scheduling

    # ------------------------------------------------------------------ where
    def _state_location(self, pipeline: Any) -> Location | None:
        """Where the state goes (None: ``run.state: false``); a problem when it may not."""
        if not self.outputs:
            return None
        try:
            return _state_at(pipeline, self.outputs[0].location)
        except LocationError as exc:
            self.problem(("run", "state"), f"run.state: {exc}")
            return None

    def _last_state(self, pipeline: Any, outputs: dict[int, Any]) -> RunState | None:
        """``--update``: the state the last run left, read before the inputs are opened so
        that a grid input takes the mask it recorded instead of reading its first sample
        (:func:`~ddr.pipeline.recorded_masks.recorded_mask`); None for other runs, or where
        there is none (what is wrong with its place is reported once the outputs are
        planned, :meth:`_plan_state`).

        Parameters
        ----------
        pipeline : Pipeline or None
            The validated pipeline (None: invalid, reported).
        outputs : dict
            The outputs' specs that validated, by their index in the file.
        """
        from ddr.pipeline.run_state import read_state

        self._state_read = None
        if not (self.updating and self.check_outputs) or pipeline is None or not outputs:
            return None
        first = outputs[min(outputs)]
        try:
            loc = _state_at(pipeline, resolve(first.path, first.storage_options))
            if loc is None:
                return None
            found = read_state(loc)
        except (LocationError, OSError, ImportError, ValueError):  # found again, reported later
            return None
        self._state_read = (loc.url, found)
        return found[0]

    def _check_state_path(self, loc: Location, given: bool, written: list[Any]) -> bool:
        from ddr.pipeline.run_files import clash

        inputs = [(name, p.location) for name, p in self.inputs.items()]
        why = clash(loc, inputs, written)
        if why is None:
            return True
        where = ("run", "state") if given else ("outputs", 0, "path")
        hint = "" if given else " (it goes beside the first output; set run.state)"
        self.problem(where, f"refusing to write the run's state {loc.shown}{hint}: {why}")
        return False

    # ---------------------------------------------------------------- the plan
    def _plan_state(self, pipeline: Any, run_files: list[Any]) -> None:
        """Place the state, record the inputs and steps, and decide whether to write it."""
        from ddr.io.claims import claim_location
        from ddr.pipeline.run_state import read_state
        from ddr.pipeline.update_types import StatePlan

        self.state = None
        loc = self._state_location(pipeline)
        if loc is None:
            return
        written: list[tuple[str, Location]] = []
        for o in self.outputs:
            written.append((f"outputs[{o.index}]", o.location))
            written.append((f"the claim of outputs[{o.index}]", claim_location(o.location)))
        written += [(rf.what, rf.location) for rf in run_files]
        if not self._check_state_path(loc, isinstance(pipeline.run.state, str), written):
            return
        state = StatePlan(loc)
        state.records = {name: self._input_record(name) for name in self.inputs}
        for sid, step in self.steps.items():
            state.configs[sid] = self._step_config(step, state.configs)
        state.recorded = [sid for sid, s in self.steps.items() if self._mergeable(s)]
        from ddr._version import __version__

        state.fingerprint = _sha(
            {
                "inputs": {n: r.fingerprint for n, r in state.records.items()},
                "steps": {sid: self.steps[sid].fingerprint for sid in state.recorded},
                "outputs": {o.path: o.fingerprint for o in self.outputs},
                "ddr": __version__,
            }
        )
        self.state = state
        self._decide_state(state)
        if state.reason.startswith("complete"):
            read = self._state_read  # read before the inputs were opened (--update)
            state.old, state.old_reason = (
                read[1] if read is not None and read[0] == loc.url else read_state(loc)
            )
        else:
            state.old_reason = f"no complete state at {loc.shown} ({state.reason})"

    def _decide_state(self, state: StatePlan) -> None:
        from ddr.io import output_status, read_attrs
        from ddr.io.outputs import FINGERPRINT_ATTR

        try:
            status = output_status(state.location)
        except (OSError, ImportError, LocationError) as exc:
            self.problem(("run", "state"), f"the run's state {state.location.shown}: {exc}")
            return
        if status == "not-ddr":
            self.problem(
                ("run", "state"),
                f"{state.location.shown} exists and was not written by ddr; refusing to "
                "replace it with the run's state (set run.state to another path, or false)",
            )
            return
        if status == "complete":
            stored = read_attrs(state.location).get(FINGERPRINT_ATTR)
            same = stored == state.fingerprint and not self.force
            state.action = "skip" if same else "write"
            state.reason = "complete, same fingerprint" if same else "complete but outdated"
        else:
            state.action, state.reason = "write", status

    # ---------------------------------------------------------------- records
    def _input_record(self, name: str) -> InputRecord:
        """What this run reads of input ``name``: identity, fingerprint, selected rows, the
        record of its stored array (one listing: the one made while opening it, where an
        update checked a recorded mask with it) and a grid's mask."""
        from ddr.io.chunk_records import array_record

        inp = self.inputs[name]
        rows = int(inp.meta.shape[0])
        arr = inp.listing
        if arr is None:
            try:
                arr = array_record(inp.location, inp.spec.array, inp.sample_dim)
            except (OSError, ValueError):  # the store stopped answering: nothing to compare
                arr = None
        start = None if arr is None else contiguous_start(inp.spec.isel, inp.sample_dim, arr.rows)
        mask = None if inp.grid_mask is None else np.asarray(inp.grid_mask, dtype=bool)
        return InputRecord(_identity(inp), inp.fingerprint, rows, start, arr, mask)

    def _step_config(self, step: StepPlan, configs: dict[str, str]) -> str:
        """What identifies a step but for the data it reads: op, parameters, the identity of
        its inputs and the configs of the steps before it (and the saved model a load step
        reads, and ddr's version: statistics are read only by the ddr that wrote them)."""
        from ddr._version import __version__
        from ddr.pipeline.inputs import metadata_fingerprint

        refs: dict[str, Any] = {}
        for role, ref in sorted(step.refs.items()):
            head, tail = split_ref(ref)
            if head in self.inputs:
                refs[role] = _identity(self.inputs[head])
            else:
                refs[role] = f"{configs.get(head, head)}.{tail}"
        extra = {}
        if step.op.family == "load":
            where = resolve(step.spec.with_["path"], step.spec.with_.get("storage_options"))
            extra = {"model": metadata_fingerprint(where, None), "path": where.url}
        if step.spec.search is not None:
            extra["search"] = step.spec.search.model_dump(mode="json")
        params = {k: v for k, v in step.spec.with_.items() if k != "storage_options"}
        return _sha(
            {"op": step.op.name, "with": params, "inputs": refs, "ddr": __version__, **extra}
        )

    def _mergeable(self, step: StepPlan) -> bool:
        """Whether the step's fit is one pass of statistics that merge (asked of the
        estimator on lazy stand-ins; nothing is computed): its statistics can be recorded."""
        if not step.outputs:  # refused while planning: reported there
            return False
        if step.spec.search is not None:  # per-fold statistics, not recorded: searched anew
            return False
        head = split_ref(step.refs.get("X", ""))[0]
        grid = self.inputs[head].spec.grid_sample_dims() if head in self.inputs else None
        if grid is not None and len(grid) > 1:
            # a grid over several sample dims: its rows are counted over all of them, which
            # appending along one does not append to; an update fits it again over every row
            # (a grid over one sample dim is recorded: each run of its rows is handed the
            # mask read while planning, so their statistics merge)
            return False
        if step.op.family == "statistic":
            return True
        if step.op.family != "fit" or step.op.method not in ("fit", "fit_transform"):
            return False
        cls: Any = step.op.cls
        if not callable(getattr(cls, "_fit_statistics", None)):
            return False
        from ddr._merged_fit import MergedFitMixin

        if (
            issubclass(cls, MergedFitMixin)
            and cls._solve_statistics is MergedFitMixin._solve_statistics
        ):
            return False
        est = self._trial_plan(step, self._stand_ins(step, None))
        if est is None:
            return False
        merges = getattr(est, "_merges", None)
        d = getattr(est, "n_features_in_", None)
        return not (callable(merges) and d is not None and not merges(d))

    def _stand_ins(self, step: StepPlan, rows: tuple[int, int] | None) -> dict[str, Any] | None:
        """The step's arguments as lazy arrays (inputs as they are, other arrays as zeros of
        their shape), each cut to ``rows`` (None: all); None when a shape is not known."""
        from ddr.pipeline.schedule import _standin

        args: dict[str, Any] = {}
        for role, ref in step.refs.items():
            head, _ = split_ref(ref)
            if head in self.inputs:
                value = self.inputs[head].array
            else:
                meta = self._ref_meta(ref)
                if meta is None or meta.shape is None or any(s is None for s in meta.shape):
                    return None
                value = _standin(meta)
            args[role] = value if rows is None else cut_rows(value, *rows)
        return args

    def _trial_plan(self, step: StepPlan, args: dict[str, Any] | None, merged: float = 0.0) -> Any:
        """The estimator after building its one-pass plan over ``args`` (nothing computed);
        None when it has none or refuses them."""
        from ddr.pipeline.fitplans import fit_plan

        if args is None:
            return None
        cls: Any = step.op.cls
        est = cls(**step.spec.with_)
        if merged and hasattr(est, "_merging_count"):
            est._merging_count = merged
        try:
            with forbid_compute():
                plan = fit_plan(est, args)
        except Exception:  # refused: the step is planned (and its problem reported) as it was
            return None
        return est if plan is not None else None

    def _splits(self, step: StepPlan, bounds: list[int]) -> bool:
        """Whether the step's estimator takes each run of rows between ``bounds`` alone (its
        checks of a number of rows count the rows before, where it says how)."""
        if step.op.family == "statistic":
            return True
        for lo, hi in itertools.pairwise(bounds):
            if hi <= lo:
                continue
            if self._trial_plan(step, self._stand_ins(step, (lo, hi)), merged=lo) is None:
                return False
        return True

    # ------------------------------------------------------------- prefixes
    def _aligned_rows(self, ref: str) -> int | None:
        """The rows of an array, now, that lie in complete stored chunks of every input it
        is made from (row by row); None when not known (then 0 is used)."""
        head, _ = split_ref(ref)
        if head in self.inputs and self.state is not None:
            rec = self.state.records[head]
            if rec.array is None or rec.start is None:
                return None
            full = rec.array.full_blocks * rec.array.block_rows
            return max(0, min(full - rec.start, rec.rows))
        step = self.steps.get(head)
        if step is None or step.op.family != "apply" or "X" not in step.refs:
            return None
        found = [self._aligned_rows(r) for role, r in step.refs.items() if role in ("X", "y")]
        return None if any(f is None for f in found) else min(f for f in found if f is not None)

    def _full_recording(self, step: StepPlan, why: str = "") -> Recording:
        """A recording that reads all the step's rows, split at its prefix where its
        estimator takes the parts alone."""
        meta = self._ref_meta(step.refs["X"])
        rows = int(meta.shape[0])
        arrays = [r for role, r in step.refs.items() if role != "model"]
        aligned = [self._aligned_rows(r) for r in arrays]
        prefix = 0 if any(a is None for a in aligned) else min(a for a in aligned if a is not None)
        if 0 < prefix < rows and not self._splits(step, [0, prefix, rows]):
            prefix = 0
        return Recording("full", rows, prefix, 0, 0, why)

    def _recordings(self) -> None:
        """Every recorded step reads all its rows (a run that is not an update)."""
        if self.state is None:
            return
        for sid in self.state.recorded:
            step = self.steps[sid]
            if "X" in step.refs:
                step.recording = self._full_recording(step)

    def _carried(self, sid: str) -> bool:
        """Whether the last run's state has step ``sid``'s statistics as this run would
        compute them (same step, same inputs): a state written now copies them."""
        old = self.state.old if self.state is not None else None
        return (
            old is not None
            and sid in old.steps
            and old.steps[sid].fingerprint == (self.steps[sid].fingerprint)
        )


def cut_rows(value: Any, lo: int, hi: int) -> Any:
    """Rows ``lo:hi`` of an array (a DataArray along its first dim, or a dask array)."""
    dims = getattr(value, "dims", None)
    if dims:
        return value.isel({dims[0]: slice(lo, hi)})
    return value[lo:hi]


def _state_at(pipeline: Any, first: Location) -> Location | None:
    """Where the state goes: ``run.state`` (None: ``false``), else ``<name>.state.zarr``
    beside the ``first`` output; a :class:`LocationError` when that is not a location."""
    opts = pipeline.run
    value = opts.state
    if value is False:
        return None
    if isinstance(value, str):
        return resolve(value, opts.storage_options if "://" in value else None)
    parent = Location(first.protocol, posixpath.dirname(first.path), first.storage_options)
    return parent.joinpath(f"{pipeline.name}.state.zarr")


def _identity(inp: Any) -> dict[str, Any]:
    """What names an input (:func:`~ddr.pipeline.recorded_masks.input_identity`)."""
    return input_identity(inp.path, inp.spec, inp.sample_dim, inp.grid_mask)
