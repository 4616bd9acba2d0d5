"""SLURM for real: the shipped cluster-configs/slurm.yaml on a one-node SLURM on loopback
(tests/slurm_support.py), with its sizes set from the command line.

A pipeline run through it gives the same outputs as a local run; its workers hold the config's
``dask:`` settings; a job no node can run stops the run before anything is submitted or
written; a job the batch system will never start, and workers that do not join in time, stop
it with the batch system's reason.
"""

from __future__ import annotations

import json
import logging
import re

import dask
import numpy as np
import pytest
import zarr
from pipeline_support import CLUSTER_CONFIGS, PIPELINES, files_written
from slurm_support import LocalSlurm, missing
from typer.testing import CliRunner

from ddr.cli import app
from ddr.cluster import ClusterError, cluster_client, load_cluster_config
from ddr.demo import DemoSpec, write_demo_data
from ddr.pipeline import plan_pipeline, run_plan

SLURM_YAML = CLUSTER_CONFIGS / "slurm.yaml"
QUICKSTART = PIPELINES / "quickstart.yaml"
#: the shipped config sized to the test node: one job of 2 worker processes x 1 thread
SMALL = [
    "slurm.cores=2",
    "slurm.processes=2",
    "slurm.memory=4GB",
    "queue=debug",
    "jobs=1",
    "workers=2",
    "wait=2m",
]


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    why = missing()
    if why:
        pytest.skip(why)
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def here(slurm, tmp_path, monkeypatch):
    """A working directory with small demo data, and SLURM's clients pointed at the node."""
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        write_demo_data(tmp_path / "demo.zarr", DemoSpec(4000, 12, 4, 3, 500, seed=3))
    yield tmp_path
    slurm.cancel_all()


def worker_settings(client):
    """What each running worker holds of the shipped configs' dask: block."""

    def held(dask_worker):  # nested: shipped by value (the workers cannot import tests/)
        import dask

        return (
            dask_worker.memory_manager.memory_target_fraction,
            dask_worker.memory_manager.memory_spill_fraction,
            dask.config.get("distributed.scheduler.allowed-failures"),
        )

    return set(client.run(held).values())


def test_pipeline_through_slurm_equals_a_local_run(here):
    config = load_cluster_config(SLURM_YAML, SMALL)
    plan = plan_pipeline(QUICKSTART, ["out=on-slurm"])
    with cluster_client(config) as handle:
        assert handle.description.startswith("SLURMCluster ("), handle.description
        workers = handle.client.scheduler_info(n_workers=-1)["workers"]
        assert len(workers) == 2
        # the config's dask: block reached the workers (exported in the job script)
        assert worker_settings(handle.client) == {(0.6, 0.7, 5)}
        summary = run_plan(plan)
    assert summary.status == "ok"
    assert "SLURMCluster" not in summary.scheduler and "2 workers" in summary.scheduler

    with dask.config.set(scheduler="threads"):
        run_plan(plan_pipeline(QUICKSTART, ["out=local"]))
    np.testing.assert_array_equal(
        zarr.open_group("on-slurm/scores.zarr", mode="r")["scores"][...],
        zarr.open_group("local/scores.zarr", mode="r")["scores"][...],
    )
    on_slurm, local = (
        {
            k: v
            for k, v in json.loads((here / d / "pca-metrics.json").read_text()).items()
            if not k.startswith("ddr:")
        }
        for d in ("on-slurm", "local")
    )
    assert on_slurm == local and len(on_slurm) == 3
    assert (here / "dask-logs").is_dir()  # the shipped config's log_directory


def _run(*extra: str) -> object:
    return CliRunner().invoke(
        app, ["run", str(QUICKSTART), "--cluster", str(SLURM_YAML), "--no-progress", *extra]
    )


def test_shipped_sizes_fit_no_node_exit_1_nothing_written(here, slurm):
    result = _run("--cluster-set", "queue=debug")
    assert result.exit_code == 1, result.output
    assert (
        "ddr: error: run failed before reading anything: no node of partition debug can run a job "
        f"of 8 CPUs and 30720 MiB: its 1 node(s) have at most {slurm.cpus} CPUs and "
        f"{slurm.memory_mb} MiB (sinfo); ask for less per job" in result.output
    )
    assert files_written(here, {"demo.zarr"}) == []


def test_unknown_partition_exit_1(here):
    result = _run()  # the shipped queue, normal, does not exist here
    assert result.exit_code == 1, result.output
    assert "SLURM has no partition 'normal' (sinfo lists: debug, short)" in result.output
    assert files_written(here, {"demo.zarr"}) == []


def test_job_the_batch_system_never_starts_exit_1(here):
    # the short partition takes jobs of at most 1 minute; the shipped walltime is 2 hours
    sets = [a for s in [*SMALL, "queue=short"] for a in ("--cluster-set", s)]
    result = _run(*sets)
    assert result.exit_code == 1, result.output
    assert "the batch system will never start the workers: job " in result.output
    assert re.search(
        r"job \d+ PENDING \(Partition(Config|TimeLimit)\); each job asks for 2 CPUs and "
        r"4096 MiB on partition short for 02:00:00",
        result.output,
    ), result.output
    assert files_written(here, {"demo.zarr"}) == []


def test_pending_jobs_are_reported_and_the_wait_is_bounded(here, caplog, monkeypatch):
    import ddr.cluster.waiting as waiting

    monkeypatch.setattr(waiting, "REPORT_EVERY", 2.0)
    # two jobs of 2 CPUs on a node of 2: the second waits for resources, and 4 workers
    # never join
    config = load_cluster_config(SLURM_YAML, [*SMALL, "jobs=2", "workers=4", "wait=9s"])
    with (
        caplog.at_level(logging.INFO, logger="ddr.cluster"),
        pytest.raises(ClusterError) as info,
        cluster_client(config),
    ):
        pass  # pragma: no cover
    message = str(info.value)
    assert "of 4 worker(s) joined within 9 s (wait_timeout); job " in message
    assert "PENDING (Resources)" in message
    assert "each job asks for 2 CPUs and 4096 MiB on partition debug for 02:00:00" in message
    waits = [r.getMessage() for r in caplog.records if "waiting for workers" in r.getMessage()]
    assert len(waits) >= 2, waits
    assert "PENDING (Resources)" in waits[-1]
