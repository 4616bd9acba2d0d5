"""Memory checked before a run: can every worker hold one task of each pass, on top of what
it holds already?

A task of a pass over X holds one stored chunk (its bytes as read), the decoded chunk, the
statistics' values and the scratch their ``from_block`` allocates; a merge task holds
``split_every`` values and its result. The statistics of each fit are asked of the estimator
(its tags' ``fit.statistics``) and their sizes of the statistic classes (``value_nbytes``,
``block_nbytes``), never kept in a table here. Each worker runs ``nthreads`` tasks at once on
top of its baseline (measured: the worker's resident memory after importing ddr). When that
exceeds the fraction of ``memory_limit`` at which dask pauses the worker, the run is refused
before it reads anything, with the numbers; above the spill target it is a warning.

Class statistics grow with the number of classes, which is known only after the pass: the
estimate counts one class.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ddr.config.errors import RunError
from ddr.pipeline.plan import Plan, StepPlan
from ddr.pipeline.spec_types import split_ref
from ddr.tags import get_ddr_tags

__all__ = ["TaskMemory", "check_worker_memory", "pass_memory", "task_memory"]

log = logging.getLogger("ddr.pipeline")


@dataclass(frozen=True)
class TaskMemory:
    """The bytes one task of a step's pass holds at most."""

    step: str
    chunk: str  # e.g. "100000 x 100 float32"
    stored: int
    decoded: int
    statistics: int
    scratch: int
    merge: int

    @property
    def total(self) -> int:
        return max(self.stored + self.decoded + self.statistics + self.scratch, self.merge)

    def describe(self) -> str:
        return (
            f"{_mib(self.total)} for one task of {self.step} (chunk of {self.chunk}: "
            f"{_mib(self.stored)} stored + {_mib(self.decoded)} decoded, statistics "
            f"{_mib(self.statistics)}, scratch {_mib(self.scratch)}; a merge task "
            f"{_mib(self.merge)})"
        )


def _mib(n: float) -> str:
    from ddr.cluster.memory import mib

    return mib(n)


def _statistics(step: StepPlan, n_features: int) -> list[tuple[Any, int]]:
    if step.op.family == "statistic":
        return [(step.op.cls.spec(**step.spec.with_), n_features)]
    return get_ddr_tags(step.op.cls, **step.spec.with_).fit.statistics(n_features)


def task_memory(plan: Plan, sid: str) -> TaskMemory | None:
    """The working set of one task of step ``sid``'s widest pass, or None if it reads
    no stored array (alone: a shared pass holds the statistics of all its steps, see
    :func:`pass_memory`)."""
    from ddr.stats.engine import default_split_every

    step = plan.steps[sid]
    ref = step.refs.get("X")
    if ref is None or step.action != "run" or step.op.family not in ("fit", "statistic"):
        return None
    head, _ = split_ref(ref)
    meta = plan.ref_meta(ref)
    names = [head] if head in plan.inputs else sorted(meta.reads if meta else ())
    stored = [plan.inputs[n] for n in names if n in plan.inputs]
    if not stored:
        return None
    rows = max(max(inp.array.data.chunks[0]) for inp in stored)
    chunk = sum(
        rows * int(np.prod(inp.meta.shape[1:])) * np.dtype(inp.meta.dtype).itemsize
        for inp in stored
    )
    n_features = int(meta.shape[1]) if meta and meta.shape and meta.shape[1] else 1
    derived = 0 if head in plan.inputs else 8 * rows * n_features  # the block fed to the fit
    stats = _statistics(step, n_features)
    values = sum(spec.value_nbytes(width) for spec, width in stats)
    scratch = max((spec.block_nbytes(rows, width) for spec, width in stats), default=0)
    fan_in = default_split_every(max((w for _, w in stats), default=n_features))
    first = stored[0]
    label = f"{rows} x {n_features} {first.meta.dtype}"
    return TaskMemory(
        f"step {sid}", label, chunk, chunk + derived, values, scratch, (fan_in + 1) * values
    )


def pass_memory(plan: Plan) -> list[TaskMemory]:
    """The working set of one task of each pass the plan makes: the steps of a shared pass
    (a ``batch`` phase) hold their statistics in the same task."""
    out = []
    for phase in plan.phases:
        tasks = [t for t in (task_memory(plan, sid) for sid in phase.steps) if t is not None]
        if not tasks:
            continue
        if phase.kind != "batch":
            out.extend(tasks)
            continue
        widest = max(tasks, key=lambda t: t.stored + t.decoded)
        out.append(
            replace(
                widest,
                step="the pass shared by " + ", ".join(t.step for t in tasks),
                statistics=sum(t.statistics for t in tasks),
                scratch=max(t.scratch for t in tasks),
                merge=sum(t.merge for t in tasks),
            )
        )
    return out


def check_worker_memory(plan: Plan, client: Any) -> None:
    """Refuse (``RunError``) a run whose workers cannot hold what it needs: what a worker
    holds before any task (its baseline) plus one task of the plan's widest pass per thread,
    against the fraction of ``memory_limit`` at which dask pauses the worker; warn
    (``ddr.pipeline``) when it would pass the spill target.

    The baseline is measured in each worker after importing ddr's task modules. Where that
    import could itself pause a worker or get it restarted (a limit below
    :data:`~ddr.cluster.memory.MEASURE_BELOW`), the check is made first without importing:
    the worker's memory as it is plus what the imports add in a fresh process
    (:func:`~ddr.cluster.memory.start_memory`).
    """
    from ddr.cluster import ClusterError
    from ddr.cluster.memory import MEASURE_BELOW, start_memory, worker_memory

    if client is None:
        return
    tasks = pass_memory(plan)
    task = max(tasks, key=lambda t: t.total) if tasks else None
    try:
        bare = worker_memory(client, imports=False)
        start = None
        if any(0 < w.limit < MEASURE_BELOW and not w.imported for w in bare):
            start = start_memory()
        if start is not None:
            for w in bare:
                if w.limit and not w.imported:
                    said = (
                        f"{_mib(w.baseline)} measured, and {_mib(start.imports)} that importing "
                        "ddr's task modules adds, measured in a fresh process"
                    )
                    _check(replace(w, baseline=w.baseline + start.imports), task, said, warn=False)
        workers = []
        if task is not None:  # measured again after the imports, unless every worker had them
            imported = all(w.imported for w in bare)
            workers = bare if imported else worker_memory(client)
    except ClusterError as exc:  # a worker died while it was measured
        raise RunError(str(exc)) from None
    for w in workers:
        if w.limit and _check(w, task, "measured"):
            return


def _check(worker: Any, task: TaskMemory | None, said: str, *, warn: bool = True) -> bool:
    """Raise ``RunError`` when ``worker``'s baseline (``said``: how it is known) and one
    ``task`` per thread pass its stop fraction; True after a warning (``warn``) that they
    pass the spill target."""
    need = worker.baseline + (worker.nthreads * task.total if task is not None else 0)
    stop = worker.stop_fraction * worker.limit
    numbers = (
        f"worker {worker.address} has memory_limit {_mib(worker.limit)}; it holds "
        f"{_mib(worker.baseline)} before any task ({said})"
    )
    if task is not None:
        numbers += (
            f" and each of its {worker.nthreads} thread(s) needs up to {task.describe()}: "
            f"in all {_mib(need)}"
        )
    if need > stop:
        raise RunError(
            f"not enough memory per worker: {numbers}, more than the {_mib(stop)} "
            f"({worker.stop_fraction:g} of the limit) at which {worker.stop_words}. Give "
            "each worker more memory (memory_limit) or fewer threads, or store the input in "
            "smaller chunks"
        )
    if warn and task is not None and worker.target and need > worker.target * worker.limit:
        log.warning(
            "%s, past the spill target (%g of the limit): dask may spill results to disk",
            numbers,
            worker.target,
        )
        return True
    return False
