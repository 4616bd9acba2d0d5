"""dask's local schedulers in the ``ddr`` process: ``kind: threads`` and ``kind: sync``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ddr.cluster.backend import Backend, ClusterHandle
from ddr.cluster.kinds import register_backend

__all__ = ["Sync", "Threads"]


@register_backend
class Threads(Backend):
    """dask's threaded scheduler (``dask.config.set(scheduler="threads")``)."""

    kind = "threads"
    target = "dask.config.set(scheduler='threads')"
    block = False
    example = None

    @contextlib.contextmanager
    def start(self) -> Iterator[ClusterHandle]:
        import dask

        with dask.config.set(scheduler=self.kind):
            yield ClusterHandle(None, f"dask {self.kind} scheduler (this process)")

    def dry_run(self) -> str:
        return self.target


@register_backend
class Sync(Threads):
    """dask's single-threaded scheduler, for debugging."""

    kind = "sync"
    target = "dask.config.set(scheduler='sync')"
