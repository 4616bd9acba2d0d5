"""Shared fixtures: random data and one 2-worker LocalCluster for the whole session."""

from __future__ import annotations

import os

import numpy as np
import pytest

# One BLAS thread per dask thread: an inherited OPENBLAS_NUM_THREADS > 1 oversubscribes 2 cores.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def cluster_client():
    """A 2-worker x 1-thread LocalCluster shared by the session (the machine has 2 cores)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit="1GiB",
            dashboard_address=":0",  # None still tries 8787, which may be taken
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


@pytest.fixture
def client(cluster_client):
    """The session cluster as the active scheduler for one test."""
    import dask

    with dask.config.set(scheduler=cluster_client):
        yield cluster_client
