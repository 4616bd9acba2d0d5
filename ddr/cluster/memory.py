"""What each worker has for a run, and what a worker needs before it runs anything.

A worker's memory: its limit, what it holds before any task (its baseline, measured after
importing what ddr's tasks import), its threads and the fractions of the limit at which dask
spills and pauses it and at which its nanny restarts it (:func:`worker_memory`).

What a worker needs at start (:func:`start_memory`): the resident memory of a fresh
interpreter of this Python after importing distributed's worker, numpy, dask.array and ddr's
task modules, measured once per process in a subprocess (about 1.5 s), and only when some
worker's limit is small enough for it to matter (below :data:`MEASURE_BELOW`). A worker
holds at least that much before its first task: a limit whose stop fraction is below it can
never run a task. dask pauses such a worker (it then waits forever for memory it never gets
back) or its nanny restarts it, again and again. :func:`start_problem` says so, with the
numbers, before the cluster is started (:func:`ddr.cluster.cluster_client`) and once the
workers joined, before ddr imports anything in them
(:func:`ddr.pipeline.memory.check_worker_memory`).
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddr.cluster.backend import BLAS_THREAD_VARS, ClusterError

__all__ = [
    "MEASURE_BELOW",
    "WorkerMemory",
    "memory_fractions",
    "StartMemory",
    "start_memory",
    "start_problem",
    "stop_words",
    "worker_memory",
]

log = logging.getLogger("ddr.cluster")

_MiB = 2**20

#: limits at or above this are never below what a worker needs at start (measured: 150 to
#: 450 MiB), so no interpreter is started to measure it
MEASURE_BELOW = 2 * 2**30

#: what a worker process imports before it can run one of ddr's tasks
_START_IMPORTS = (
    "distributed.worker",
    "distributed.nanny",
    "numpy",
    "dask.array",
    "ddr.io",
    "ddr.stats",
)
_MEASURED = (
    "measured: a fresh process of this Python after importing distributed, numpy, dask and "
    "ddr's task modules"
)
#: seconds to wait for a dead worker's "restarted for memory" event
_EVENT_WAIT = 2.0
#: seconds the measuring interpreter may take; past that no floor is known (no check)
_MEASURE_TIMEOUT = 120.0


def mib(n: float) -> str:
    """``"184 MiB"``, ``"2.4 MiB"``: bytes for messages."""
    return f"{n / _MiB:.0f} MiB" if n >= 10 * _MiB else f"{n / _MiB:.2g} MiB"


@dataclass(frozen=True)
class WorkerMemory:
    """One worker's memory, in bytes; ``limit`` 0 when the worker has none.

    ``baseline`` is the worker's resident memory when it was asked: after importing ddr's
    task modules (:func:`worker_memory`), or as it is (``imports=False``; ``imported`` says
    whether they were imported already).
    """

    address: str
    limit: int
    baseline: int
    nthreads: int
    target: float | None
    pause: float | None
    terminate: float | None
    imported: bool = True

    @property
    def stop_fraction(self) -> float:
        """The fraction of ``limit`` past which the worker stops making progress: dask pauses
        it (or, without pausing, its nanny restarts it)."""
        return float(self.pause or self.terminate or 1.0)

    @property
    def stop_words(self) -> str:
        """What happens to the worker at :attr:`stop_fraction` of its limit."""
        return stop_words(self.pause, self.terminate)


def stop_words(pause: float | None, terminate: float | None) -> str:
    """What happens to a worker at its stop fraction, for messages."""
    if pause:
        return "dask pauses the worker"
    if terminate:
        return "its nanny restarts the worker"
    return "the worker runs out of memory"


def _fraction(value: Any) -> float | None:
    """A memory fraction of dask's config (``False``: disabled) as a float or None."""
    if value is None or value is False:
        return None
    return float(value) or None


def memory_fractions(overrides: Mapping[str, Any] | None = None) -> tuple[float | None, ...]:
    """``(target, pause, terminate)`` of ``distributed.worker.memory`` in dask's config, with
    ``overrides`` (a cluster config's ``dask:`` block, dotted keys) applied; None when off."""
    import dask

    out = []
    for name in ("target", "pause", "terminate"):
        key = f"distributed.worker.memory.{name}"
        value = (overrides or {}).get(key, dask.config.get(key, None))
        out.append(_fraction(value))
    return tuple(out)


@dataclass(frozen=True)
class StartMemory:
    """What a worker holds before it runs any task of ddr, in bytes: ``total``, the resident
    memory of a fresh process of this Python after importing what a worker imports
    (distributed's worker and nanny, numpy, dask.array, ddr's task modules), of which
    ``imports`` is what the imports after distributed's add."""

    total: int
    imports: int


@functools.cache
def start_memory() -> StartMemory | None:
    """What a worker holds at start (:class:`StartMemory`), measured in a fresh interpreter
    with one BLAS thread, as local workers run; None if it could not be measured (then
    nothing is checked against it).

    Measured once per process (about 1.5 s). Workers on other machines (batch jobs, pods)
    run the same environment as a rule; their own memory is measured again once they joined.
    """
    first, rest = _START_IMPORTS[:2], _START_IMPORTS[2:]
    code = (
        "import psutil\n"
        + "".join(f"import {name}\n" for name in first)
        + "print(psutil.Process().memory_info().rss)\n"
        + "".join(f"import {name}\n" for name in rest)
        + "print(psutil.Process().memory_info().rss)\n"
    )
    env = dict(os.environ)
    env.update({var: "1" for var in BLAS_THREAD_VARS})
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=_MEASURE_TIMEOUT,
            env=env,
            check=True,
        )
        bare, total = (int(line) for line in done.stdout.split()[-2:])
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        log.debug("could not measure what a worker holds at start: %s", exc)
        return None
    return StartMemory(total, max(total - bare, 0))


def start_problem(who: str, limit: int, pause: float | None, terminate: float | None) -> str | None:
    """Why a worker (``who``) with this ``memory_limit`` cannot run any task, or None.

    A worker holds at least :func:`start_memory` before any task; past its stop fraction
    (``pause``, else ``terminate``) of its limit it never runs one. Measured only when the
    limit is below :data:`MEASURE_BELOW`.
    """
    if not 0 < limit < MEASURE_BELOW:
        return None
    start = start_memory()
    fraction = pause or terminate or 1.0
    if start is None or start.total <= fraction * limit:
        return None
    return (
        f"not enough memory per worker: {who} has memory_limit {mib(limit)}, and a worker "
        f"holds {mib(start.total)} before it runs any task ({_MEASURED}), more than the "
        f"{mib(fraction * limit)} ({fraction:g} of the limit) at which "
        f"{stop_words(pause, terminate)}: no task could run. Give each worker a memory_limit "
        f"of at least {mib(start.total / fraction)}, and more for what its tasks hold"
    )


def check_start_memory(backend: Any) -> None:
    """Refuse (:class:`ClusterError`) a cluster whose workers' memory limit, known from its
    config before anything is started, is below what a worker needs at start."""
    limit = backend.worker_memory_limit()
    if not limit:
        return
    _, pause, terminate = memory_fractions(backend.config.dask)
    problem = start_problem("each worker", limit, pause, terminate)
    if problem is not None:
        raise ClusterError(problem + " (nothing was started)")


def _probe(dask_worker: Any, imports: bool = True) -> tuple[Any, ...]:
    import dask
    import psutil

    imported = "ddr.stats" in sys.modules and "ddr.io" in sys.modules
    if imports:  # what a ddr task imports is part of the baseline
        import ddr.io
        import ddr.stats  # noqa: F401

    mm = dask_worker.memory_manager
    return (
        psutil.Process().memory_info().rss,
        int(mm.memory_limit or 0),
        int(dask_worker.state.nthreads),
        mm.memory_target_fraction,
        mm.memory_pause_fraction,
        dask.config.get("distributed.worker.memory.terminate", None),
        imported or imports,
    )


def worker_memory(client: Any, *, imports: bool = True) -> list[WorkerMemory]:
    """The memory of every worker of ``client``'s scheduler, measured after importing what
    ddr's tasks import (``imports``) or as it is.

    Raises
    ------
    ClusterError
        A worker died while it was asked: with ``imports``, the imports took it past the
        fraction of its limit at which its nanny restarts it.
    """
    limits = {
        addr: int(info.get("memory_limit") or 0)
        for addr, info in client.scheduler_info(n_workers=-1).get("workers", {}).items()
    }
    answers = client.run(_probe, imports=imports, on_error="return")
    died = {addr: a for addr, a in answers.items() if isinstance(a, BaseException)}
    if died:
        addr, exc = next(iter(died.items()))
        raise ClusterError(_died(client, addr, exc, limits.get(addr, 0), imports))
    return [
        WorkerMemory(addr, limit, rss, nthreads, target or None, pause or None, term or None, imp)
        for addr, (rss, limit, nthreads, target, pause, term, imp) in answers.items()
    ]


def _died(client: Any, addr: str, exc: BaseException, limit: int, imports: bool) -> str:
    """What to say of worker ``addr`` that died while it was asked for its memory: restarted
    by its nanny for memory (its ``"worker-restart-memory"`` event, waited for a moment:
    it may come after the closed connection), or only died."""
    import time

    doing = (
        "while it imported what ddr's tasks import" if imports else "while ddr asked for its memory"
    )
    rss = None
    deadline = time.monotonic() + _EVENT_WAIT
    while rss is None:
        try:
            events = client.get_events("worker-restart-memory")
        except Exception:  # a scheduler that does not keep events
            break
        rss = next((m.get("rss") for _, m in events if m.get("worker") == addr), None)
        if rss is not None or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if rss is None and not limit:  # no limit, no memory event: not for memory
        return f"worker {addr} died {doing}: {type(exc).__name__}: {exc}"
    terminate = memory_fractions()[2] or 1.0
    has = f" (memory_limit {mib(limit)})" if limit else ""
    if rss is not None:
        what = (
            f"was restarted by its nanny {doing}, before it ran any task: its memory, "
            f"{mib(rss)}, passed {terminate:g} of its limit"
        )
    else:
        what = (
            f"died {doing} ({type(exc).__name__}), before it ran any task: its nanny restarts a "
            f"worker whose memory passes {terminate:g} of its limit"
        )
    start = start_memory() if 0 < limit < MEASURE_BELOW else None
    needs = ""
    if start is not None:
        needs = f"; a worker holds {mib(start.total)} before it runs any task ({_MEASURED})"
        if start.total < terminate * limit:
            needs += ", the rest is what this worker adds (preloads, plugins, its environment)"
    return (
        f"not enough memory per worker: worker {addr}{has} {what}{needs}. Give each worker "
        "more memory (memory_limit)"
    )
