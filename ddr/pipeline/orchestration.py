"""One run of a pipeline, from its file to its outcome: what ``ddr run`` does, from Python.

:func:`run` goes through the stages of a run in order:

1. plan the pipeline (every problem is found before any data is read) and check the run
   files it was given;
2. claim the outputs the run writes (:mod:`ddr.io.claims`) *before* any cluster starts, so
   a run refused because another run holds an output stops at once; or wait for that run
   (``wait``) and plan again, as what it wrote may now be complete;
3. start the cluster (:func:`ddr.cluster.cluster_client`), or use the active scheduler;
4. check that every worker can hold one task of each pass (:mod:`ddr.pipeline.memory`);
5. execute the plan (:func:`ddr.pipeline.runner.execute`);
6. write the summary again with the whole wall time once the cluster is gone (to a local
   fallback file when its store does not take it, :meth:`RunSummary.write`);
7. release the claims, whatever happened.

What happened is reported once, through :mod:`logging` (this module's logger), and
returned as a :class:`RunOutcome`; ``ddr run`` maps it to its exit code. :func:`run_plan`
is the same run of a plan under the active scheduler that raises instead of returning a
failure.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddr.config.document import Document
from ddr.config.errors import PipelineError, RunError
from ddr.io.claims import ClaimError, OutputClaims, claim_location
from ddr.io.locations import Location, redact
from ddr.pipeline.memory import check_worker_memory
from ddr.pipeline.ownership import claim_outputs
from ddr.pipeline.plan import Plan
from ddr.pipeline.planner import plan_pipeline, replan
from ddr.pipeline.run_files import RunFile, refusals, run_files
from ddr.pipeline.runner import active_client, describe_scheduler, execute
from ddr.pipeline.summary import RunClock, RunSummary, _rel

__all__ = ["RunOutcome", "run", "run_pipeline", "run_plan"]

logger = logging.getLogger(__name__)

#: the scheduler a run with nothing to compute reports (it starts no cluster)
NO_CLUSTER = "none (nothing to do: every output is complete)"

#: how a run can end (:attr:`RunOutcome.status`)
STATUSES = ("ok", "failed", "refused", "interrupted", "invalid")


@dataclass
class RunOutcome:
    """How a run of :func:`run` ended, and its summary.

    Parameters
    ----------
    status : {"ok", "failed", "refused", "interrupted", "invalid"}
        ``"ok"``: every step and output is done. ``"failed"``: a step, an output, a worker
        or the cluster failed. ``"refused"``: another run holds one of the outputs (or the
        claims could not be written); nothing was read or written. ``"interrupted"``: Ctrl-C
        (``KeyboardInterrupt``); outputs being written stay marked incomplete. ``"invalid"``:
        planned again after waiting for another run, the pipeline has problems; nothing was
        run.
    summary : RunSummary, optional
        What the run did; None when it never started (refused, invalid, a cluster that did
        not start, a worker memory check that failed).
    summary_file : Location, optional
        Where the summary JSON was written: the pipeline's ``run.summary``, or the local
        fallback file when its store did not take it; None when none was written.
    error : str, optional
        What went wrong, as it was logged (secrets redacted).
    exception : BaseException, optional
        The exception the run ended with (:meth:`check` raises it again).
    """

    status: str
    summary: RunSummary | None = None
    summary_file: Location | None = None
    error: str | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the run succeeded."""
        return self.status == "ok"

    def check(self) -> RunSummary:
        """The summary of a run that succeeded; else raise the exception it ended with.

        Returns
        -------
        RunSummary
            The summary of the run (status ``"ok"``).

        Raises
        ------
        RunError
            A step, an output or a worker failed (the summary is its ``ddr_summary``).
        ddr.io.claims.ClaimError
            Another run holds one of the outputs.
        PipelineError
            Planned again after waiting, the pipeline has problems.
        KeyboardInterrupt
            The run was interrupted.
        """
        if self.status == "ok" and self.summary is not None:
            return self.summary
        if self.exception is not None:
            raise self.exception
        raise RunError(self.error or f"the run ended {self.status}")


def run(
    pipeline: str | os.PathLike[str] | Document | Plan,
    sets: Sequence[str] = (),
    *,
    force: bool = False,
    resume: bool = False,
    update: bool = False,
    summary: str | os.PathLike[str] | None = None,
    performance_report: str | os.PathLike[str] | None = None,
    cluster: Any = None,
    cluster_sets: Sequence[str] = (),
    wait: bool | float | None = None,
    argv: Sequence[str] | None = None,
    clock: RunClock | None = None,
) -> RunOutcome:
    """Run a pipeline as ``ddr run`` does: plan, claim the outputs, start the cluster, run,
    write the summary, release the claims.

    What happens while the run runs is returned, not raised (Ctrl-C included, as
    ``ddr run`` exits 130 for it), and reported once through ``logging``; call
    :meth:`ddr.pipeline.RunOutcome.check` to raise it instead. Problems with what it is given
    are raised before anything is claimed or read.

    Parameters
    ----------
    pipeline : str, path, Document or Plan
        The pipeline file (YAML), or a plan from ``ddr.pipeline.plan_pipeline`` (then
        ``sets``, ``force`` and ``resume`` were given to it and are not given here).
    sets : sequence of str
        ``key=value`` overrides, as ``ddr run --set`` takes them (``"k=5"``,
        ``"run.if_exists=overwrite"``).
    force : bool, default False
        Replace complete outputs too (``ddr run --force``).
    resume : bool, default False
        Keep complete outputs with the same fingerprint, redo the rest (``ddr run
        --resume``).
    update : bool, default False
        ``ddr run --update``: as ``resume``, and where rows were appended to the inputs
        since the last run, read only them for every step whose statistics the run's state
        recorded, and extend per-row outputs whose models did not change; a full run when
        an input changed otherwise (the plan says why).
    summary : str or path, optional
        Write the run summary JSON here (a path or URL) instead of ``run.summary``.
    performance_report : str or path, optional
        Write a dask performance report (HTML; distributed schedulers only) here instead of
        ``run.performance_report``. Both are checked as the planner checks the pipeline's
        (never inside an input or an output: ValueError).
    cluster : str, path or ClusterConfig, optional
        Where the work runs: a cluster config file, a built-in name (``"local"``,
        ``"threads"``, ``"sync"``) or a ``ddr.cluster.ClusterConfig``; the cluster is
        started for the run and stopped after it. Default: the active dask scheduler (a
        distributed ``Client`` made current, or dask's local schedulers).
    cluster_sets : sequence of str
        ``key=value`` overrides of the cluster config file (``ddr run --cluster-set``).
    wait : bool or float, optional
        When another run holds one of the outputs: refuse (False), wait until it ends or its
        claim goes stale (True), or wait at most this many seconds. Default: the pipeline's
        ``run.wait``.
    argv : sequence of str, optional
        The command recorded in provenance, CF ``history`` and the claims (default
        ``sys.argv``).
    clock : RunClock, optional
        Collects the wall time and its parts; ``ddr run`` passes one started with its
        process (``RunClock.since_process_start()``). Default: one started now.

    Returns
    -------
    RunOutcome
        The status (``ok``, ``failed``, ``refused``, ``interrupted``, ``invalid``), the
        summary, where it was written, and the error.

    Raises
    ------
    PipelineError
        The pipeline file or the cluster config has problems (every one, as
        ``file:line:col: message``); nothing was claimed or read.
    ValueError
        A run file refused (inside an input or an output), or planning options given with
        a plan.
    """
    clock = clock or RunClock()
    if isinstance(pipeline, Plan):
        if sets or force or resume or update:
            raise ValueError(
                "sets, force, resume and update are options of planning: give them to "
                "plan_pipeline, or give run() the pipeline file"
            )
        plan = pipeline
        files = _run_files(plan, {"summary": summary, "performance_report": performance_report})
    else:
        plan = plan_pipeline(
            pipeline,
            list(sets),
            force=force,
            resume=resume,
            update=update,
            summary=_text(summary),
            performance_report=_text(performance_report),
        )
        files = plan.run_files
    config = _cluster_config(cluster, cluster_sets)
    return _claimed_run(plan, files, config, wait=wait, argv=argv, clock=clock)


# the same function, under the name ddr.run_pipeline exports (ddr._EXPORTS)
run_pipeline = run


def run_plan(
    plan: Plan,
    *,
    summary_path: str | os.PathLike[str] | None = None,
    performance_report: str | os.PathLike[str] | None = None,
    argv: Sequence[str] | None = None,
    clock: RunClock | None = None,
) -> RunSummary:
    """Run ``plan`` under the active dask scheduler and return its summary; raise when it
    does not succeed.

    :func:`run` with the active scheduler, then :meth:`RunOutcome.check`: the run claims
    its outputs (another run holding one is refused, or waited for with ``run.wait``), and
    releases them when it ends, whether it succeeds, fails or is interrupted. Progress is
    reported through :mod:`logging` (see :func:`ddr.pipeline.runner.execute`).

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.
    summary_path : str, optional
        Write the run summary JSON here instead of the plan's (``run.summary``, or
        ``summary`` given to :func:`plan_pipeline`).
    performance_report : str, optional
        Write a dask performance report (HTML; needs a distributed scheduler) here instead
        of the plan's. Both are checked as the planner checks the pipeline's (never inside
        an input or an output: ValueError).
    argv : list of str, optional
        The command recorded in provenance and CF ``history`` (default ``sys.argv``).
    clock : RunClock, optional
        Collects the wall time and its parts (default: one started now).

    Returns
    -------
    RunSummary
        What each step and output did, the passes over the data and the wall time.

    Raises
    ------
    ddr.io.claims.ClaimError
        Another run is writing one of the outputs (nothing was read or written).
    RunError
        A step or an output failed; the summary (status ``"failed"``) is still written.
    KeyboardInterrupt
        The run was interrupted; the summary (status ``"interrupted"``) is still written.
    """
    given = {"summary": summary_path, "performance_report": performance_report}
    files = _run_files(plan, given, names={"summary": "summary_path"})
    outcome = _claimed_run(plan, files, None, wait=None, argv=argv, clock=clock or RunClock())
    return outcome.check()


# ----------------------------------------------------------------- the stages
def _claimed_run(
    plan: Plan,
    files: list[RunFile],
    config: Any,
    *,
    wait: bool | float | None,
    argv: Sequence[str] | None,
    clock: RunClock,
) -> RunOutcome:
    """Claim the outputs (before a cluster starts: a run refused stops at once), wait and
    plan again if need be, run, and release the claims."""
    from ddr.io.request_bounds import clear_interrupt

    clear_interrupt()  # a Ctrl-C of an earlier run in this process hurries no request of this one
    argv = list(argv) if argv is not None else None
    claims = claim_outputs(plan, wait=wait, argv=argv)
    try:
        claims.acquire()
    except ClaimError as exc:
        logger.error("run refused: %s", exc)
        return RunOutcome("refused", error=str(exc), exception=exc)
    except OSError as exc:  # the claim could not be written or read
        why = f"could not claim the outputs: {redact(str(exc))}"
        logger.error("run refused: %s", why)
        return RunOutcome("refused", error=why, exception=exc)
    except KeyboardInterrupt as exc:
        why = "interrupted while waiting for another run; nothing was written"
        logger.error("%s", why)
        return RunOutcome("interrupted", error=why, exception=exc)
    try:
        if claims.waited:  # what the other run wrote may be complete now
            try:
                plan = replan(plan)
            except PipelineError as exc:
                for problem in exc.problems:
                    logger.error("%s", problem)
                return RunOutcome("invalid", error=str(exc), exception=exc)
        return _run_on_cluster(plan, files, config, claims, argv, clock)
    finally:
        claims.release()
        clear_interrupt()  # released: what this process does next has its full bounds


def _run_on_cluster(
    plan: Plan,
    files: list[RunFile],
    config: Any,
    claims: OutputClaims,
    argv: list[str] | None,
    clock: RunClock,
) -> RunOutcome:
    """Start the cluster (``config``; None: the active scheduler), check the workers'
    memory, execute, stop the cluster; the summary is written with the final times."""
    from ddr.cluster import ClusterError
    from ddr.io.request_bounds import interrupt_requests

    summary_at = _location(files, "summary")
    for out in plan.outputs:
        if out.action == "overwrite" and out.reason.startswith("complete but outdated"):
            logger.info("rewriting %s: %s", _rel(out.path), out.reason)
    clock.add("start-up", clock.wall())
    summary: RunSummary | None = None
    status, error, exception = "ok", None, None
    closing = None
    # every output complete with its fingerprint: nothing reads data, so no cluster starts
    idle = (
        config is not None
        and all(o.action == "skip" for o in plan.outputs)
        and (plan.state is None or plan.state.action == "skip")
    )
    if idle:
        config = None
        logger.info("nothing to do: every output is complete (same fingerprint); no cluster")
    try:
        with _scheduler(config, clock, idle=idle) as where:
            if not idle:
                logger.info("running %s on %s", plan.pipeline.name, where)
            try:
                check_worker_memory(plan, active_client())  # before anything is read
                summary = execute(
                    plan,
                    claims,
                    summary_at=summary_at,
                    report_at=_location(files, "performance_report"),
                    argv=argv,
                    clock=clock,
                    scheduler=where if idle else None,
                )
            except KeyboardInterrupt:
                if config is not None:  # the cluster this run started closes mid-task
                    from ddr._log import quiet_interrupted_shutdown

                    quiet_interrupted_shutdown()
                raise
            finally:
                closing = time.perf_counter()
    except ClusterError as exc:  # before anything was read or written
        logger.error("run failed before reading anything: %s", exc)
        status, error, exception = "failed", str(exc), exc
    except RunError as exc:
        error = redact(str(exc))
        logger.error("run failed: %s", error)
        logger.debug("where it failed:", exc_info=True)
        status, summary, exception = "failed", _carried_summary(exc), exc
    except KeyboardInterrupt as exc:
        interrupt_requests()  # releasing claims, writing the summary: seconds at most
        error = "interrupted; outputs being written stay marked incomplete"
        logger.error("%s", error)
        status, summary, exception = "interrupted", _carried_summary(exc), exc
    except Exception as exc:  # the cluster failed while running, a worker died, ...
        error = f"{type(exc).__name__}: {redact(str(exc))}"
        logger.error("run failed: %s", error)
        logger.debug("where it failed:", exc_info=True)
        status, summary, exception = "failed", _carried_summary(exc), exc
    if closing is not None and config is not None:
        clock.add("cluster shutdown", time.perf_counter() - closing)
    written = None
    if summary is not None:  # with the whole wall time, now that the cluster is gone
        summary.clocked(clock)
        if summary_at is not None:  # a local fallback when it cannot go there, said once
            written = summary.write(summary_at)
    return RunOutcome(status, summary, written, error, exception)


@contextlib.contextmanager
def _scheduler(config: Any, clock: RunClock, *, idle: bool = False) -> Iterator[str]:
    """Start the cluster of ``config`` for the block (None: use the active scheduler;
    ``idle``: a run with nothing to compute, under dask's synchronous scheduler); yields
    what it is, for the log."""
    if idle:
        import dask

        with dask.config.set(scheduler="sync"):
            yield NO_CLUSTER
        return
    if config is None:
        yield describe_scheduler(active_client())
        return
    from ddr._log import ROOT, watch_cluster
    from ddr.cluster import cluster_client

    started = time.perf_counter()
    with cluster_client(config) as handle:
        clock.add("cluster start", time.perf_counter() - started)
        if handle.client is not None:
            # the progress bars shown (``ddr run``: ddr._log.console) count its tasks
            shown = logging.getLogger(ROOT).handlers
            watch_cluster(handle.client, shown, own_workers=config.kind == "local")
        yield handle.description


# ------------------------------------------------------------------ helpers
def _carried_summary(exc: BaseException) -> RunSummary | None:
    """The summary of a run that failed or was interrupted, as ``execute`` left it on its
    exception (never read back from its store, which may be the thing that failed)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        summary = getattr(cur, "ddr_summary", None)
        if summary is not None:
            return summary
        cur = cur.__cause__ or cur.__context__
    return None


def _cluster_config(cluster: Any, overrides: Sequence[str]) -> Any:
    """The validated cluster config ``cluster`` names (None: the active scheduler)."""
    if cluster is None or not isinstance(cluster, str | os.PathLike):
        if overrides:
            raise ValueError("cluster_sets apply to a cluster config file or name")
        return cluster
    from ddr.cluster import load_cluster_config

    return load_cluster_config(cluster, list(overrides))


def _run_files(
    plan: Plan, given: Mapping[str, Any], names: Mapping[str, str] | None = None
) -> list[RunFile]:
    """The plan's run files, or those given instead, checked as the planner checks the
    pipeline's (never inside an input, an output or each other); ``names`` are the
    arguments' names in messages."""
    if not any(given.values()):
        return plan.run_files
    from ddr.io.inputs import opened_inputs

    names = names or {}
    origins = {k: f"{names.get(k, k)}=" for k in given}
    files = run_files(plan.pipeline.run, {k: _text(v) for k, v in given.items()}, origins=origins)
    inputs = [(name, inp.location) for name, inp in plan.inputs.items()]
    known = {loc for _, loc in inputs}
    inputs += [("opened in this process", loc) for loc in opened_inputs() if loc not in known]
    outputs = [(f"outputs[{o.index}]", o.location) for o in plan.outputs]
    outputs += [(f"the claim of {w}", claim_location(loc)) for w, loc in list(outputs)]
    refused = refusals(files, inputs, outputs)
    if refused:
        raise ValueError("; ".join(f"{rf.origin}{rf.value!r}: {why}" for rf, why in refused))
    return files


def _location(files: list[RunFile], kind: str) -> Location | None:
    return next((f.location for f in files if f.kind == kind), None)


def _text(path: str | os.PathLike[str] | None) -> str | None:
    return None if path is None else os.fspath(path)
