"""Waiting for workers, visibly and for a bounded time.

Batch jobs, pods and remote workers join some time after the cluster starts. While fewer
workers than wanted have joined, :func:`wait_for_workers` logs (``ddr.cluster``, every
:data:`REPORT_EVERY` seconds) how many have, and for batch jobs each pending job's state and
the batch system's reason with what one job asks for. It stops with a
:class:`~ddr.cluster.backend.ClusterError` when the batch system says a job can never run, or
when ``wait_timeout`` passes: before any data is read or any output written.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ddr.cluster.backend import Backend, ClusterError, ClusterHandle, JobState

__all__ = ["REPORT_EVERY", "wait_for_workers"]

log = logging.getLogger("ddr.cluster")

#: seconds between two reports while waiting (and between two questions to the batch system)
REPORT_EVERY = 5.0
_POLL = 0.25


def n_workers(client: Any) -> int:
    """The number of workers connected to ``client``'s scheduler."""
    return len(client.scheduler_info(n_workers=-1).get("workers", {}))


def _jobs(jobs: list[JobState]) -> str:
    return "; ".join(str(j) for j in jobs[:5]) + (
        f"; and {len(jobs) - 5} more" if len(jobs) > 5 else ""
    )


def wait_for_workers(handle: ClusterHandle, backend: Backend, wanted: int, timeout: float) -> None:
    """Return once ``wanted`` workers joined; report while waiting; raise when it cannot be.

    Parameters
    ----------
    handle : ClusterHandle
        The started cluster's client and its pending-jobs query.
    backend : Backend
        For what one job asks (in messages).
    wanted : int
        Workers to wait for.
    timeout : float
        Seconds before giving up.

    Raises
    ------
    ClusterError
        A job can never run as submitted, or ``timeout`` passed.
    """
    asked = backend.asks()
    asks = f"; each job asks for {asked}" if asked else ""
    start = time.monotonic()
    next_look = start + 1.0  # the batch system sets a job's reason soon after submission
    next_report = start + REPORT_EVERY
    jobs: list[JobState] = []
    while True:
        have = n_workers(handle.client)
        now = time.monotonic()
        if have >= wanted:
            if now - start >= REPORT_EVERY:
                log.info("%d worker(s) joined after %.0f s", have, now - start)
            return
        if now >= next_look:
            jobs = handle.pending()
            next_look = now + REPORT_EVERY
            never = [j for j in jobs if j.never]
            if never:
                raise ClusterError(
                    f"the batch system will never start the workers: {_jobs(never)}{asks}"
                )
        pending = f"; {_jobs(jobs)}" if jobs else ""
        if now - start >= timeout:
            raise ClusterError(
                f"{have} of {wanted} worker(s) joined within {timeout:g} s (wait_timeout)"
                f"{pending}{asks}"
            )
        if now >= next_report:
            log.info(
                "waiting for workers: %d of %d joined after %.0f s%s%s",
                have,
                wanted,
                now - start,
                pending,
                asks,
            )
            next_report = now + REPORT_EVERY
        time.sleep(min(_POLL, max(0.0, timeout - (now - start))))
