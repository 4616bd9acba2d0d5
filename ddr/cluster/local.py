"""``kind: local``: a :class:`distributed.LocalCluster` on this machine (the default).

Worker processes are started by nannies, which hand each worker the client's dask config:
the config's ``dask:`` block is set while the cluster starts, so every worker runs with it.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from ddr.cluster.deployed import Deployed
from ddr.cluster.kinds import register_backend

__all__ = ["Local"]

# parse_memory_limit's warnings are LocalCluster's to give (it gives them when it starts)
_SILENT = logging.Logger("ddr.cluster.local.sizing")
_SILENT.addHandler(logging.NullHandler())


@register_backend
class Local(Deployed):
    """``distributed.LocalCluster(**block)``."""

    kind = "local"
    target = "distributed.LocalCluster"
    example: ClassVar[dict[str, Any]] = {
        "n_workers": 2,
        "threads_per_worker": 1,
        "memory_limit": "2GiB",
    }

    @classmethod
    def keywords(cls) -> set[str]:
        from distributed import LocalCluster, Nanny, Worker

        from ddr.cluster.backend import params_of

        names = params_of(LocalCluster.__init__, Nanny.__init__, Worker.__init__)
        return names - {"loop", "asynchronous", "start"}

    def worker_memory_limit(self) -> int | None:
        """Each worker's limit as ``LocalCluster`` sizes it: ``memory_limit`` (bytes, a
        size such as ``2GiB``, a fraction of this machine's memory, ``auto``) for the
        worker's threads, or, when unset, this machine's memory shared by the workers."""
        import math

        from dask.system import CPU_COUNT
        from distributed.worker_memory import parse_memory_limit

        kw = self.kwargs
        processes = kw.get("processes")
        processes = True if processes is None else bool(processes)
        n, threads = kw.get("n_workers"), kw.get("threads_per_worker")
        try:
            if n is None and threads is None:
                if processes:
                    from distributed.deploy.utils import nprocesses_nthreads

                    n, threads = nprocesses_nthreads()
                else:
                    n, threads = 1, CPU_COUNT
            if n is None:
                n = max(1, CPU_COUNT // threads) if processes else 1
            if threads is None:
                threads = max(1, math.ceil(CPU_COUNT / n)) if n else 1
            if "memory_limit" not in kw:
                return parse_memory_limit("auto", 1, n, logger=_SILENT) if n else None
            return parse_memory_limit(kw["memory_limit"], threads, logger=_SILENT)
        except (TypeError, ValueError, ZeroDivisionError):  # LocalCluster will say what
            return None

    def make_cluster(self) -> Any:
        from distributed import LocalCluster

        return LocalCluster(**self.kwargs)
