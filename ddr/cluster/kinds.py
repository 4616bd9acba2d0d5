"""The cluster backends by ``kind``: adding a backend is adding its class here."""

from __future__ import annotations

from ddr.cluster.address import Address
from ddr.cluster.backend import Backend
from ddr.cluster.inline import Sync, Threads
from ddr.cluster.kubernetes import Kubernetes
from ddr.cluster.local import Local
from ddr.cluster.pbs import PBS
from ddr.cluster.slurm import SLURM

__all__ = ["BACKENDS", "backend_class"]

#: every kind of cluster config, in the order messages list them
BACKENDS: dict[str, type[Backend]] = {
    b.kind: b for b in (Local, Address, SLURM, PBS, Kubernetes, Threads, Sync)
}


def backend_class(kind: str) -> type[Backend]:
    """The backend class of ``kind``."""
    return BACKENDS[kind]
