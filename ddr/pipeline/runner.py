"""Execute a :class:`~ddr.pipeline.planner.Plan` under the active dask scheduler
(:func:`execute`; :func:`ddr.pipeline.run` claims the outputs and starts the cluster first).

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
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from ddr.config.errors import RunError, describe_error
from ddr.io.claims import OutputClaims
from ddr.io.locations import Location, redact, resolve
from ddr.pipeline.fitplans import call, fit_plan, sample_dims_of
from ddr.pipeline.plan import Phase, Plan, StepPlan
from ddr.pipeline.read_counts import ReadCounting
from ddr.pipeline.recorded_fits import (
    RecordedFit,
    recorded_fit,
    saved_record,
    write_run_state,
)
from ddr.pipeline.schedulers import active_client, dashboard_link, describe_scheduler
from ddr.pipeline.searches import make_search
from ddr.pipeline.spec_types import split_ref
from ddr.pipeline.summary import OutputResult, RunClock, RunSummary, StepResult, _rel
from ddr.pipeline.update_report import UpdateReport
from ddr.pipeline.writers import OutputWriter
from ddr.progress import Passes
from ddr.tags import get_ddr_tags

__all__ = ["RunClock", "RunSummary", "active_client", "describe_scheduler", "execute"]

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------- runner
class _Runner(ReadCounting, OutputWriter):
    def __init__(
        self, plan: Plan, *, clock: RunClock, argv: list[str] | None, claims: OutputClaims
    ) -> None:
        import ddr

        self.plan = plan
        self.claims = claims
        self.clock = clock
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
        self._reads: list[str] = []  # the inputs the current phase reads (for messages)
        self._tally = self._install_tally()
        self._again: dict[str, int] = {}
        self._last_counts: dict[str, int] = {}
        self.records: dict[str, Any] = {}  # step -> the statistics the run's state keeps
        self.report = UpdateReport(plan) if plan.update is not None else None

    # -------------------------------------------------------------- compute
    def _compute(self, items: list[Any]) -> list[Any]:
        """Compute ``items`` together (one pass over the inputs they share)."""
        import dask

        if not items:
            return []
        with self.clock.timing("passes"):
            if self.client is not None:
                return self.client.gather(self.client.compute(items))
            return list(dask.compute(*items))

    def _pass(self, what: str, items: list[Any], reads: list[str]) -> list[Any]:
        """:meth:`_compute` reported as one pass over ``reads`` (a record when it starts and
        one when it ends)."""
        passes = Passes(logger, what, total=1)
        passes.start(f"one pass over {', '.join(reads) or 'the data'}")
        with passes.step():
            return self._compute(items)

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
        if hasattr(model, "__ddr_tags__") and tail in get_ddr_tags(model).xarray_dims:
            return model.as_xarray(tail)
        return getattr(model, tail)

    def _args(self, step: StepPlan) -> dict[str, Any]:
        return {role: self.value(ref) for role, ref in step.refs.items()}

    # --------------------------------------------------------------- phases
    def run(self) -> RunSummary:
        start = time.perf_counter()
        accounted = self._accounted()
        self._counts()
        again_before = dict(self._again)
        self.summary.dashboard = dashboard_link(self.client)
        try:
            for i, phase in enumerate(self.plan.phases, start=1):
                self._phase(i, phase)
            state = self.plan.state
            if state is not None and state.action == "write":  # last: every output is complete
                with self._writing():
                    seconds = write_run_state(
                        self.plan,
                        self.records,
                        self.claims.get(state.location),
                        self._state_provenance(),
                        self.argv,
                    )
                logger.info("wrote the run's state %s (%.2f s)", _rel(state.path), seconds)
            self.summary.status = "ok"
        except RunError as exc:
            self.summary.status = "failed"
            self.summary.error = redact(str(exc))
            raise
        except KeyboardInterrupt:
            self.summary.status = "interrupted"
            self.summary.error = "interrupted (Ctrl-C); outputs being written stay incomplete"
            raise
        except Exception as exc:
            self.summary.status = "failed"
            self.summary.error = redact(describe_error(exc))
            raise RunError(self.summary.error) from exc
        finally:
            elapsed = time.perf_counter() - start
            self.clock.add("other", elapsed - (self._accounted() - accounted))
            self.summary.clocked(self.clock)
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
            self.summary.read_again = self._passes(again_before, self._again)
            if self.report is not None:
                self.summary.update = self.report.to_dict()
        return self.summary

    def _accounted(self) -> float:
        return self.clock.parts.get("passes", 0.0) + self.clock.parts.get("writes", 0.0)

    def _phase(self, index: int, phase: Phase) -> None:
        if self.report is None or (phase.kind == "lazy" and not phase.outputs):
            self._run_phase(index, phase)
            return
        before, start = self._counts(), time.perf_counter()
        self._run_phase(index, phase)
        self.report.phase(phase, self._bytes(before, self._counts()), time.perf_counter() - start)

    def _run_phase(self, index: int, phase: Phase) -> None:
        what = ", ".join(phase.steps) or f"{len(phase.outputs)} output(s)"
        logger.debug("phase %d of %d (%s): %s", index, len(self.plan.phases), phase.kind, what)
        self._reads = list(phase.reads)
        # each snapshot of the read counters is a round trip to the scheduler: a stream phase
        # counts its own, and a snapshot taken with nothing run since is reused
        before = self._counts() if phase.kind not in ("lazy", "stream") else {}
        start = time.perf_counter()
        if phase.kind == "lazy":
            for sid in phase.steps:
                self._lazy_step(sid, index)
        elif phase.kind == "batch":
            self._batch(phase.steps, index)
        elif phase.kind in ("fit", "compute", "search"):
            for sid in phase.steps:
                self._single(sid, index)
        elif phase.kind == "stream":
            self._stream(phase.outputs, index)
            return
        seconds = time.perf_counter() - start
        after: dict[str, int] | None = None
        if phase.kind != "lazy":
            after = self._counts()
            passes = self._passes(before, after)
            for sid in phase.steps:
                res = self.step_results[sid]
                res.passes = passes
                res.phase = index
                if phase.kind != "batch":
                    res.seconds = round(seconds, 3)
        for i in phase.outputs:
            # a saved model that keeps lazy training data (an exact KDE) reads it to save it
            before = after if after is not None else self._counts()
            self._small_output(self.plan.outputs[i], index)
            after = self._counts()
            self.output_results[i].passes = self._passes(before, after)

    def _lazy_step(self, sid: str, index: int) -> None:
        import ddr

        step = self.plan.steps[sid]
        res = self.step_results[sid]
        res.phase = index
        start = time.perf_counter()
        try:
            if step.action == "recorded":
                fit = recorded_fit(step, self._args(step), self.plan)
                value, self.records[sid] = fit.finish([])
                self._store_recorded(step, value)
                res.action = "solved from the recorded statistics"
                res.note = f"no new rows: {step.recording.rows} rows, nothing read"
            elif step.action == "load":
                est = ddr.load(step.load_from)
                if step.recording is not None and self.plan.state is not None:
                    record = saved_record(step, est, self.plan)
                    if record is not None:
                        self.records[sid] = record
                self._store_fit(step, est)
                res.action = "loaded"
                res.note = f"complete saved model {_rel(step.load_from.url)}, same fingerprint"
            elif step.op.family == "load":
                with_ = step.spec.with_
                where = resolve(with_["path"], with_.get("storage_options"))
                self.values[sid] = {"model": ddr.load(where)}
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
            raise RunError(describe_error(exc), f"step {sid} ({step.op.name})") from exc
        res.seconds = round(time.perf_counter() - start, 3)

    def _store_fit(self, step: StepPlan, est: Any) -> None:
        outs: dict[str, Any] = {"model": est}
        if step.op.method == "fit_transform":
            X = self.value(step.refs["X"])
            outs = {"data": call(est, "transform", {"X": X}), "model": est}
        self.values[step.id] = outs

    def _new(self, step: StepPlan) -> Any:
        return step.op.cls(**step.spec.with_)

    def _store_recorded(self, step: StepPlan, value: Any) -> None:
        if step.op.family == "statistic":
            self.values[step.id] = {"statistic": value}
        else:
            self._store_fit(step, value)

    def _state_provenance(self) -> dict[str, Any]:
        """What the run's state records of the run that wrote it."""
        return {
            "pipeline": {"name": self.plan.pipeline.name, "file": os.path.abspath(self.plan.file)},
            "versions": self._versions_dict(),
            "run": {"started": self.summary.started, "command": redact(" ".join(self.argv or []))},
        }

    def _batch(self, sids: list[str], index: int) -> None:
        from ddr.stats import lazy

        plans: dict[str, tuple[Any, Any]] = {}
        alone: list[str] = []
        for sid in sids:
            step = self.plan.steps[sid]
            try:
                args = self._args(step)
                if step.recording is not None:  # its statistics are recorded (or merged into)
                    plans[sid] = (None, recorded_fit(step, args, self.plan))
                    continue
                if step.op.family == "statistic":
                    spec = step.op.cls.spec(**step.spec.with_)
                    X = args["X"]
                    sdim, along = sample_dims_of(X)  # a grid's sample dims
                    y, w = args.get("y"), args.get("sample_weight")
                    y = _along(y, along)
                    w = _along(w, along)
                    # the list form, as the generative classifiers use: equal specs of the
                    # same input then share one key (computed once)
                    plans[sid] = (lazy([spec], X, y, w, sample_dim=sdim), None)
                    continue
                est = self._new(step)
                plan = fit_plan(est, args)
            except Exception as exc:
                raise RunError(describe_error(exc), f"step {sid} ({step.op.name})") from exc
            if plan is None:
                alone.append(sid)
            else:
                plans[sid] = (plan.statistics, plan)
        start = time.perf_counter()
        names = ", ".join(plans)
        items: list[Any] = []  # a recorded fit's runs of rows: each its own item
        for lazy_value, fitplan in plans.values():
            items.extend(fitplan.items if isinstance(fitplan, RecordedFit) else [lazy_value])
        try:
            flat = iter(self._pass(names, items, self._reads))
        except Exception as exc:
            _explain(exc, {sid: plan for sid, (_, plan) in plans.items()}, self.plan)
            raise RunError(describe_error(exc), f"one-pass statistics of {names}") from exc
        for sid, (_, fitplan) in plans.items():
            step = self.plan.steps[sid]
            try:
                if isinstance(fitplan, RecordedFit):
                    value, self.records[sid] = fitplan.finish([next(flat) for _ in fitplan.items])
                    self._store_recorded(step, value)
                    continue
                value = next(flat)
                if fitplan is None:
                    self.values[sid] = {"statistic": _single(value)}
                else:
                    self._store_fit(step, fitplan.solve(value))
            except Exception as exc:
                raise RunError(describe_error(exc), f"step {sid} ({step.op.name})") from exc
        seconds = round(time.perf_counter() - start, 3)
        for sid in plans:
            res = self.step_results[sid]
            res.action = "fit" if self.plan.steps[sid].op.family == "fit" else "computed"
            res.seconds = seconds
            res.shared_with = [s for s in plans if s != sid]
            rec = self.plan.steps[sid].recording
            if rec is not None and rec.mode == "merge":
                again = f" and {rec.reread_rows} of a rewritten chunk" if rec.reread_rows else ""
                res.note = (
                    f"read its {rec.new_rows} new rows{again}, merged into the recorded "
                    f"statistics of {rec.read_from} rows"
                )
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
                with self.clock.timing("passes"):
                    value = float(call(args["model"], "score", args))
                logger.info("%s: %s = %.6g", sid, step.op.name, value)
                self.values[sid] = {"value": value}
                res.action = "computed"
            elif step.spec.search is not None:
                self._search(step, args)
                res.action = "grid search"
                res.note = str(self.values[sid]["search"].plan_)
            else:
                est = self._new(step)
                plan = fit_plan(est, args)
                if plan is not None:
                    try:
                        (value,) = self._pass(sid, [plan.statistics], self._reads)
                    except Exception as exc:
                        plan.explain(exc)
                        raise
                    est = plan.solve(value)
                    res.action = "fit (one pass)"
                else:
                    logger.info("%s: %s, a multi-pass fit", sid, step.op.name)
                    with self.clock.timing("passes"):
                        est = call(est, "fit", args)
                    res.action = "fit"
                self._store_fit(step, est)
        except RunError:
            raise
        except Exception as exc:
            raise RunError(describe_error(exc), f"step {sid} ({step.op.name})") from exc
        res.seconds = round(time.perf_counter() - start, 3)
        res.phase = index

    def _search(self, step: StepPlan, args: dict[str, Any]) -> None:
        """A searched step: its grid search (two passes), the best candidate refitted from
        the merge of every fold's statistics as its model, the search and its results as
        its other outputs (:mod:`ddr.pipeline.searches`)."""
        assert step.spec.search is not None
        search = make_search(step.op, step.spec.with_, step.spec.search)
        passes = Passes(logger, f"{step.id} (grid search)", total=2)
        passes.start(f"{step.search or 'two passes'}; over {', '.join(self._reads) or 'the data'}")
        with self.clock.timing("passes"):
            call(search, "fit", args)
        passes.finish(f"best {search.best_params_}, {search.scoring_} {search.best_score_:.6g}")
        self._store_fit(step, search.best_estimator_)
        self.values[step.id].update(
            search=search,
            best_params_=search.best_params_,
            best_score_=search.best_score_,
            best_index_=search.best_index_,
        )

    # -------------------------------------------------------------- outputs


# ------------------------------------------------------------------------ helpers


def _explain(exc: Exception, fitplans: dict[str, Any], plan: Plan) -> None:
    """Raise the error of a shared pass again as the first fit that has advice for it gives
    it (PCA given NaN points to PPCA), naming that step; else return."""
    for sid, fitplan in fitplans.items():
        if fitplan is None:
            continue
        try:
            fitplan.explain(exc)
        except Exception as explained:
            step = plan.steps[sid]
            raise RunError(
                f"{type(explained).__name__}: {explained}", f"step {sid} ({step.op.name})"
            ) from exc


def _single(value: Any) -> Any:
    """The statistic of a one-element list-form result (``ddr.stats.lazy([spec], ...)``).

    A single-form request of the same spec on the same data has the same dask key in
    ``ddr.stats.engine`` (its final key does not include the form), so either form may
    arrive; both are accepted.
    """
    return value[0] if isinstance(value, tuple) else value


def _along(v: Any, sdim: Any) -> Any:
    dims = getattr(v, "dims", None)
    if v is None or sdim is None or dims is None or len(dims) != 1 or dims[0] == sdim:
        return v
    return v.rename({dims[0]: sdim})


def execute(
    plan: Plan,
    claims: OutputClaims,
    *,
    summary_at: Location | None = None,
    report_at: Location | None = None,
    argv: list[str] | None = None,
    clock: RunClock | None = None,
    scheduler: str | None = None,
) -> RunSummary:
    """Run ``plan``'s phases under the active dask scheduler and return its summary.

    The lower half of a run (:func:`ddr.pipeline.run` is the whole of it: claims, cluster,
    memory check, outcome). Progress is reported through :mod:`logging` (the
    ``ddr.pipeline.runner`` logger and the estimators' own): one INFO record per phase and
    per pass over the data, the dask dashboard link, notes as warnings.

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.
    claims : OutputClaims
        The claims on the plan's outputs, taken (every write checks them).
    summary_at : Location, optional
        Where the summary JSON goes, also when the run fails (a local fallback file when it
        cannot go there, :meth:`RunSummary.write`).
    report_at : Location, optional
        Where a dask performance report (HTML; distributed schedulers only) goes.
    argv : list of str, optional
        The command recorded in provenance and CF ``history`` (default ``sys.argv``).
    clock : RunClock, optional
        Collects the times of the run's parts (default: one started now).
    scheduler : str, optional
        What the summary says the run ran on (default: the active scheduler described).

    Returns
    -------
    RunSummary
        Status ``"ok"``.

    Raises
    ------
    RunError
        A step or an output failed; the summary (status ``"failed"``) is on the exception
        as ``ddr_summary``, and written.
    KeyboardInterrupt
        The run was interrupted; the summary (status ``"interrupted"``) is on the exception
        as ``ddr_summary``, and written.
    """
    runner = _Runner(plan, clock=clock or RunClock(), argv=argv, claims=claims)
    if scheduler is not None:
        runner.summary.scheduler = scheduler
    if runner.client is not None:
        link = dashboard_link(runner.client)
        if link:
            logger.info("dask dashboard: %s", link)
        else:
            logger.info("dask dashboard: not served (it needs bokeh: pip install 'bokeh>=3.1')")
    report: Any = contextlib.nullcontext()
    if report_at is not None:
        import importlib.util

        if runner.client is None:
            logger.warning("a performance report needs a distributed scheduler; none written")
        elif importlib.util.find_spec("bokeh") is None:
            logger.warning(
                "a performance report needs bokeh (pip install 'bokeh>=3.1'); none written"
            )
        else:
            report = _performance_report(report_at)
    from threadpoolctl import threadpool_limits

    # one BLAS thread per dask thread; distributed workers get theirs from their nanny
    limits: Any = threadpool_limits(1) if runner.client is None else contextlib.nullcontext()
    try:
        with limits, _as_current(runner.client), report:
            summary = runner.run()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            from ddr.io.request_bounds import interrupt_requests

            interrupt_requests()  # what is left to do cannot wait on a store for long
        # the caller takes the summary from here, not back from its store
        exc.ddr_summary = runner.summary  # type: ignore[attr-defined]
        raise
    finally:
        if summary_at is not None:  # to a local fallback when it cannot go there
            runner.summary.write(summary_at)
    return summary


@contextlib.contextmanager
def _performance_report(where: Location) -> Iterator[None]:
    """dask's performance report, written to a local temporary file and then, whole, to
    ``where`` (a local path or a URL)."""
    import tempfile

    from distributed import performance_report

    with tempfile.TemporaryDirectory(prefix="ddr-report-") as tmp:
        local = os.path.join(tmp, "report.html")
        with performance_report(filename=local):
            yield
        with open(local, "rb") as fh:
            where.write_bytes(fh.read())


@contextlib.contextmanager
def _as_current(client: Any) -> Iterator[None]:
    if client is None:
        yield
        return
    with client.as_current():
        yield
