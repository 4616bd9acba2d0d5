"""``kind: local``: a :class:`distributed.LocalCluster` on this machine (the default).

Worker processes are started by nannies, which hand each worker the client's dask config:
the config's ``dask:`` block is set while the cluster starts, so every worker runs with it.
"""

from __future__ import annotations

from typing import Any

from ddr.cluster.deployed import Deployed

__all__ = ["Local"]


class Local(Deployed):
    """``distributed.LocalCluster(**block)``."""

    kind = "local"
    target = "distributed.LocalCluster"

    @classmethod
    def keywords(cls) -> set[str]:
        from distributed import LocalCluster, Nanny, Worker

        from ddr.cluster.backend import params_of

        names = params_of(LocalCluster.__init__, Nanny.__init__, Worker.__init__)
        return names - {"loop", "asynchronous", "start"}

    def make_cluster(self) -> Any:
        from distributed import LocalCluster

        return LocalCluster(**self.kwargs)
