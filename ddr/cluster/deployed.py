"""Backends that start a dask cluster object (``LocalCluster``, ``SLURMCluster``, ``KubeCluster``)
and connect a client to it: scaled or adapted as the config says, closed when the run ends."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator
from typing import Any

from ddr.cluster.backend import Backend, ClusterHandle, JobState, make_client
from ddr.cluster.shutdown import exit_quickly

__all__ = ["Deployed"]


class Deployed(Backend):
    """A backend whose :meth:`make_cluster` gives a ``distributed`` cluster object."""

    scalable = True

    @abc.abstractmethod
    def make_cluster(self) -> Any:
        """The started cluster object."""

    def pending_jobs(self, cluster: Any) -> list[JobState]:
        """Jobs of ``cluster`` whose workers have not joined, with the batch system's reason."""
        return []

    @contextlib.contextmanager
    def start(self) -> Iterator[ClusterHandle]:
        cluster = self.make_cluster()
        try:
            if self.config.scale is not None:
                cluster.scale(**self.config.scale.model_dump(exclude_none=True))
            if self.config.adapt is not None:
                cluster.adapt(**self.config.adapt.model_dump(exclude_none=True))
            with make_client(cluster, set_as_default=False) as client:
                exit_quickly(client)  # no "Worker process still alive ..., killing" at close
                yield ClusterHandle(
                    client,
                    type(cluster).__name__,
                    cluster,
                    pending=lambda: self.pending_jobs(cluster),
                )
        finally:
            cluster.close()
