"""Fits whose statistics the run records, and the state the run writes last.

A step the plan records (:class:`~ddr.pipeline.update_types.Recording`) is fitted from the
statistics of runs of its rows, each built by its own estimator's one-pass plan
(:class:`ddr.base.FitPlan`) over those rows alone and computed in the run's shared pass:

- ``full``: rows ``0:prefix`` and ``prefix:rows`` (one run when the prefix is all or none
  of them); each stored chunk is still read once, the runs being cut at chunk boundaries;
- ``merge`` (``--update``): rows ``read_from:prefix`` and ``prefix:rows``, merged into the
  prefix statistics the last run recorded; the new rows, and those of a partial chunk an
  append rewrote, are all that is read;
- ``recorded``: nothing is read; the model is solved from the statistics recorded.

The model is the solve of the merge of the prefix and the rest, the same solve ``fit``
makes (``partial_fit`` merges the same way): a full run and an update of the same rows
merge the same statistics in the same order where the merge tree allows it (within one
merge task: the default fan-in of 16 row blocks), and agree to round-off elsewhere.

:func:`write_run_state` writes the state (:mod:`ddr.pipeline.run_state`) once every output
of the run is complete.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddr.pipeline.fitplans import sample_dims_of
from ddr.pipeline.plan import Plan, StepPlan
from ddr.pipeline.registry import FEATURE_ROLES
from ddr.pipeline.run_state import RunState, StepRecord, write_state
from ddr.pipeline.state_plan import cut_rows

__all__ = ["RecordedFit", "recorded_fit", "write_run_state"]

logger = logging.getLogger("ddr.pipeline.runner")


@dataclass
class RecordedFit:
    """A recorded step's share of the run's shared pass, and its solve.

    Attributes
    ----------
    items : list
        The lazy statistics of its runs of rows (computed with the pass).
    finish : callable
        Given their computed values (in order), returns ``(value, record)``: the fitted
        model (or the statistic of a statistic step) and the statistics to record.
    """

    items: list[Any]
    finish: Callable[[list[Any]], tuple[Any, StepRecord]]
    solver: Any = None  # the FitPlan whose solve fits the model (None: a statistic step)

    def explain(self, exc: Exception) -> None:
        """Raise ``exc`` again with the estimator's advice, if it has some (as
        :meth:`ddr.base.FitPlan.explain`)."""
        if self.solver is not None:
            self.solver.explain(exc)


def _bounds(step: StepPlan) -> list[tuple[int, int]]:
    """The runs of rows a recorded step reads (none when solved from the recorded)."""
    rec = step.recording
    if rec.mode == "recorded":
        return []
    start = rec.read_from if rec.mode == "merge" else 0
    cuts = sorted({start, min(max(rec.prefix_rows, start), rec.rows), rec.rows})
    return [(lo, hi) for lo, hi in itertools.pairwise(cuts) if hi > lo]


def recorded_fit(step: StepPlan, args: dict[str, Any], plan: Plan) -> RecordedFit:
    """The lazy statistics and the solve of recorded step ``step`` over its arguments.

    Parameters
    ----------
    step : StepPlan
        A step with a :class:`~ddr.pipeline.update_types.Recording`.
    args : dict
        Its arguments by role (lazy arrays; nothing is computed here).
    plan : Plan
        The plan (its state: the configs, and the last run's statistics for a merge).

    Returns
    -------
    RecordedFit
        Its share of the shared pass (one item per run of rows) and its solve.
    """
    from ddr._merged_fit import merge_statistics
    from ddr.pipeline.fitplans import fit_plan

    rec = step.recording
    state = plan.state
    cls: Any = step.op.cls
    parts = _bounds(step)
    items: list[Any] = []
    solver: Any = None
    for lo, hi in parts:
        rows = {
            role: v if role == "model" or role in FEATURE_ROLES else cut_rows(v, lo, hi)
            for role, v in args.items()
        }
        if step.op.family == "statistic":
            items.append(_lazy_statistic(step, rows))
            continue
        est = cls(**step.spec.with_)
        if lo and hasattr(est, "_merging_count"):  # its checks count the rows before
            est._merging_count = float(lo)
        fitplan = fit_plan(est, rows)
        if fitplan is None:  # pragma: no cover - the planner asked the same estimator
            raise RuntimeError(f"step {step.id}: {step.op.name} has no one-pass fit")
        items.append(fitplan.statistics)
        solver = fitplan
    if step.op.family == "fit" and solver is None:  # solved from the recorded: nothing read
        solver = fit_plan(cls(**step.spec.with_), args)

    def finish(values: list[Any]) -> tuple[Any, StepRecord]:
        held, prefix = (None, None)
        if rec.mode != "full":
            held, prefix = state.old.statistics(step.id)
        tail = None
        if rec.mode == "recorded":
            whole = held
        else:
            for (_, hi), value in zip(parts, values, strict=True):
                value = (
                    value[0]
                    if isinstance(value, tuple) and step.op.family == "statistic"
                    else value
                )
                if hi <= rec.prefix_rows:
                    prefix = value if prefix is None else merge_statistics(prefix, value)
                else:
                    tail = value
            whole = (
                prefix
                if tail is None
                else tail
                if prefix is None
                else merge_statistics(prefix, tail)
            )
        fitted = whole if solver is None else solver.solve(whole)
        record = StepRecord(
            plan.state.configs[step.id],
            step.fingerprint,
            rec.rows,
            rec.prefix_rows if prefix is not None else 0,
            whole,
            prefix,
        )
        return fitted, record

    return RecordedFit(items, finish, solver)


def saved_record(step: StepPlan, model: Any, plan: Plan) -> StepRecord | None:
    """The record of a step loaded from a saved model (a rerun after a crash).

    Parameters
    ----------
    step : StepPlan
        A recorded step the plan loads from a complete saved model.
    model : estimator
        The loaded model.
    plan : Plan
        The plan.

    Returns
    -------
    StepRecord or None
        The statistics the model keeps, and as its prefix the same only where that is all
        its rows (a saved model keeps no statistics of a part of them: the next update
        reads every row of it); None for a model that keeps none.
    """
    keeps = getattr(model, "_fit_statistics", None)
    whole = keeps() if callable(keeps) else None
    rec = step.recording
    if whole is None or rec is None or plan.state is None:
        return None
    prefix = whole if rec.prefix_rows == rec.rows else None
    return StepRecord(
        plan.state.configs[step.id],
        step.fingerprint,
        rec.rows,
        rec.rows if prefix is not None else 0,
        whole,
        prefix,
    )


def _lazy_statistic(step: StepPlan, args: dict[str, Any]) -> Any:
    """The lazy statistic of a statistic step over ``args`` (as the runner computes it)."""
    from ddr.stats import lazy

    cls: Any = step.op.cls
    spec = cls.spec(**step.spec.with_)
    X = args["X"]
    sdim, along = sample_dims_of(X)  # a grid's sample dims
    y, w = args.get("y"), args.get("sample_weight")
    return lazy([spec], X, _along(y, along), _along(w, along), sample_dim=sdim)


def _along(v: Any, sdim: Any) -> Any:
    dims = getattr(v, "dims", None)
    if v is None or sdim is None or dims is None or len(dims) != 1 or dims[0] == sdim:
        return v
    return v.rename({dims[0]: sdim})


def write_run_state(
    plan: Plan,
    records: dict[str, StepRecord],
    claim: Any,
    provenance: dict[str, Any],
    argv: list[str] | None,
) -> float:
    """Write the run's state, once every output of the run is complete.

    Parameters
    ----------
    plan : Plan
        The plan (its state: where, the input records, the configs).
    records : dict
        Step id -> the statistics this run computed (or took from a saved model). A
        recorded step not among them has its statistics copied from the last run's state,
        where it has them as this run would compute them (same fingerprint).
    claim : Claim or None
        The run's claim on the state's location.
    provenance : dict
        What the state records of the run.
    argv : list of str, optional
        The command, for the CF ``history`` line.

    Returns
    -------
    float
        The seconds the write took.
    """
    from ddr.io.outputs import history_line

    state = plan.state
    start = time.perf_counter()
    new = RunState(plan.pipeline.name, dict(state.records), configs=dict(state.configs))
    for sid in state.recorded:
        rec = records.get(sid)
        if rec is None and state.old is not None and sid in state.old.steps:
            old = state.old.steps[sid]
            if old.fingerprint == plan.steps[sid].fingerprint:
                whole, prefix = state.old.statistics(sid)
                rec = StepRecord(
                    old.config, old.fingerprint, old.rows, old.prefix_rows, whole, prefix
                )
        if rec is not None:
            new.steps[sid] = rec
    new.outputs = {o.path: o.fingerprint for o in plan.outputs}
    attrs = {"ddr:provenance": provenance, "history": history_line(argv)}
    write_state(state.location, new, fingerprint=state.fingerprint, attrs=attrs, claim=claim)
    return time.perf_counter() - start
