"""What each worker has for a run: its memory limit, what it holds before any task (its
baseline, measured after importing what ddr's tasks import), its threads and the fractions
of the limit at which dask spills and pauses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerMemory", "worker_memory"]


@dataclass(frozen=True)
class WorkerMemory:
    """One worker's memory, in bytes; ``limit`` 0 when the worker has none."""

    address: str
    limit: int
    baseline: int
    nthreads: int
    target: float | None
    pause: float | None
    terminate: float | None

    @property
    def stop_fraction(self) -> float:
        """The fraction of ``limit`` past which the worker stops making progress: dask pauses
        it (or, without pausing, its nanny restarts it)."""
        return float(self.pause or self.terminate or 1.0)


def _probe(dask_worker: Any) -> tuple[int, int, int, Any, Any, Any]:
    import dask
    import psutil

    # what a ddr task imports is part of the baseline
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
    )


def worker_memory(client: Any) -> list[WorkerMemory]:
    """The memory of every worker of ``client``'s scheduler."""
    return [
        WorkerMemory(address, limit, rss, nthreads, target or None, pause or None, term or None)
        for address, (rss, limit, nthreads, target, pause, term) in client.run(_probe).items()
    ]
