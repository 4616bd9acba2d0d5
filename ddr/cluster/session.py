"""Start the cluster of a config for a run, and describe it without starting it.

:func:`cluster_client` is the one place a run gets its scheduler: checks before starting
(:meth:`Backend.preflight`), the ``dask:`` block set in the client (and exported to the
workers by the backend), waiting for workers with reports and a bound
(:mod:`ddr.cluster.waiting`), and worker losses reported while the run lasts, a run with
no worker left stopped after ``wait_timeout`` (:mod:`ddr.cluster.events`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ddr.cluster.backend import BLAS_THREAD_VARS, Backend, ClusterHandle
from ddr.cluster.events import WorkerEvents
from ddr.cluster.kinds import backend_class
from ddr.cluster.memory import check_start_memory
from ddr.cluster.waiting import wait_for_workers

__all__ = ["backend_for", "cluster_client", "dry_run"]


def backend_for(config: Any) -> Backend:
    """The backend of a validated :class:`~ddr.cluster.config.ClusterConfig`."""
    return backend_class(config.kind)(config)


def _blas_env() -> None:
    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, "1")


@contextlib.contextmanager
def cluster_client(config: Any) -> Iterator[ClusterHandle]:
    """Start (or connect to) the scheduler of ``config`` and make it the active one.

    The ``dask:`` block is set for the duration (and reaches the workers); local workers
    inherit one BLAS thread per dask thread. Backends whose workers join later (batch jobs,
    pods, an existing scheduler) are waited for: at least one worker, or
    ``wait_for_workers``, within ``wait_timeout``.

    Raises
    ------
    ClusterError
        Before anything is read or written: a missing command or package, a job no node can
        run, a worker memory limit below what a worker holds at start (checked before
        anything is started), an unreachable scheduler, workers that did not join in time.
    """
    import dask

    backend = backend_for(config)
    _blas_env()
    backend.preflight()
    check_start_memory(backend)
    with dask.config.set(dict(config.dask)), backend.start() as handle:
        if handle.client is None:
            yield handle
            return
        wanted = max(config.wait_for_workers, 1 if backend.waits else 0)
        if wanted:
            wait_for_workers(handle, backend, wanted, config.wait_seconds)
        backend.workers_joined(handle.client)
        handle.description = _describe(handle)
        events = WorkerEvents(
            handle.client, wanted=config.wait_for_workers, timeout=config.wait_seconds
        )
        with events, dask.config.set(scheduler=handle.client):
            yield handle


def _describe(handle: ClusterHandle) -> str:
    try:
        workers = handle.client.scheduler_info(n_workers=-1).get("workers", {})
    except Exception:  # pragma: no cover - a scheduler that does not answer
        return handle.description
    threads = sum(w.get("nthreads", 0) for w in workers.values())
    return f"{handle.description} ({len(workers)} workers, {threads} threads)"


def dry_run(config: Any) -> str:
    """What ``config`` would start, without starting it or writing anything: the SLURM/PBS
    job script, the Kubernetes cluster spec, or the LocalCluster / Client call."""
    return backend_for(config).dry_run()
