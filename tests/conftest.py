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
    """A 2-worker x 1-thread LocalCluster shared by the session (the machine has 2 cores),
    with ddr's client (it pickles to None in the config nannies hand to the workers they
    restart, so a worker lost in a test comes back)."""
    from distributed import LocalCluster

    from ddr.cluster.backend import make_client

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit="1GiB",
            dashboard_address=":0",  # None still tries 8787, which may be taken
        ) as cluster,
        make_client(cluster, set_as_default=False) as client,
    ):
        yield client


@pytest.fixture
def client(cluster_client):
    """The session cluster as the active scheduler for one test."""
    import dask

    with dask.config.set(scheduler=cluster_client):
        yield cluster_client


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """moto's S3 server on a random loopback port, reached through ``AWS_ENDPOINT_URL`` and the
    standard credential variables (set in this process for the session)."""
    from ddr.testing import start_s3_server, stop_s3_server

    server = start_s3_server(tmp_path_factory.mktemp("moto") / "moto.log")
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    try:
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        stop_s3_server(server)


@pytest.fixture
def s3_client(s3, cluster_client):
    """The session cluster as the active scheduler, its workers given the S3 environment."""
    import dask

    s3.share_with(cluster_client)
    with dask.config.set(scheduler=cluster_client):
        yield cluster_client
