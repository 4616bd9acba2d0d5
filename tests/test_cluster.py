"""Cluster configs: the shipped ones validate, bad ones are reported with line and column,
dry runs print what would start (the SLURM/PBS job script), and clients start and stop."""

from __future__ import annotations

import os

import dask
import pytest
from pipeline_support import CLUSTER_CONFIGS

from ddr.cluster import (
    BLAS_THREAD_VARS,
    ClusterConfig,
    cluster_client,
    dry_run,
    json_schema,
    load_cluster_config,
)
from ddr.config.errors import PipelineError

SHIPPED = ["local", "address", "slurm", "pbs", "kubernetes"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_validate(name):
    config = load_cluster_config(CLUSTER_CONFIGS / f"{name}.yaml")
    assert isinstance(config, ClusterConfig)
    assert config.kind == name


def test_builtins():
    assert load_cluster_config("local").kind == "local"
    assert load_cluster_config("threads").kind == "threads"
    assert load_cluster_config("sync").kind == "sync"
    with pytest.raises(PipelineError, match="no such cluster config"):
        load_cluster_config("nowhere.yaml")


def test_params_and_overrides_reach_the_backend_kwargs():
    config = load_cluster_config(CLUSTER_CONFIGS / "address.yaml", ["address=tcp://10.0.0.1:9999"])
    assert config.backend_kwargs["address"] == "tcp://10.0.0.1:9999"
    slurm = load_cluster_config(CLUSTER_CONFIGS / "slurm.yaml", ["jobs=7", "queue=gpu"])
    assert slurm.scale.jobs == 7 and slurm.backend_kwargs["queue"] == "gpu"


def test_slurm_dry_run_prints_the_job_script():
    pytest.importorskip("dask_jobqueue")
    text = dry_run(load_cluster_config(CLUSTER_CONFIGS / "slurm.yaml", ["queue=long"]))
    assert "#SBATCH -p long" in text
    assert "#SBATCH --cpus-per-task=8" in text and "#SBATCH -t 02:00:00" in text
    for var in BLAS_THREAD_VARS:
        assert f"export {var}=1" in text
    assert "--nworkers 4" in text and "--lifetime 115m" in text


def test_pbs_dry_run_prints_the_job_script():
    pytest.importorskip("dask_jobqueue")
    text = dry_run(load_cluster_config(CLUSTER_CONFIGS / "pbs.yaml"))
    assert "#PBS -q workq" in text and "#PBS -l select=1:ncpus=8:mem=32GB" in text
    assert "export OMP_NUM_THREADS=1" in text


def test_other_dry_runs_describe_the_call():
    assert dry_run(load_cluster_config("threads")) == "dask.config.set(scheduler='threads')"
    assert dry_run(load_cluster_config(CLUSTER_CONFIGS / "local.yaml")).startswith(
        "distributed.LocalCluster(processes=True"
    )
    text = dry_run(load_cluster_config(CLUSTER_CONFIGS / "kubernetes.yaml"))
    assert "ddr" in text and "OMP_NUM_THREADS" in text


BROKEN = [
    (
        "ddr-cluster: 1\nkind: slurm\nslurm:\n  cores: 8\n  memroy: 32GB\n",
        [(5, 3, "dask_jobqueue.SLURMCluster has no keyword 'memroy' (did you mean 'memory'?)")],
    ),
    (
        "ddr-cluster: 1\nkind: local\nlocal:\n  n_workers: 2\n  thread_per_worker: 1\n",
        [
            (
                5,
                3,
                "distributed.LocalCluster has no keyword 'thread_per_worker' (did you mean "
                "'threads_per_worker'?)",
            )
        ],
    ),
    (
        "ddr-cluster: 1\nkind: address\naddress:\n  timeout: 5s\n",
        [(3, 1, "give exactly one of address (tcp://host:port) or scheduler_file")],
    ),
    (
        "ddr-cluster: 1\nkind: local\nslurm: {cores: 1}\n",
        [(3, 1, "a 'slurm' block in a config of kind 'local'")],
    ),
    (
        "ddr-cluster: 2\nkind: cloud\nscale: {jobs: 0}\n",
        [
            (1, 14, "unsupported schema version"),
            (2, 7, "kind: expected 'local', 'address', 'slurm', 'pbs'"),
            (3, 15, "scale.jobs: must be greater than 0"),
        ],
    ),
    (
        "ddr-cluster: 1\nkind: slurm\n",
        [(2, 7, "kind slurm needs a 'slurm' block")],
    ),
    (
        "ddr-cluster: 1\nkind: threads\ndask: {workers: 3}\nscale: {n: 2}\n",
        [
            (3, 8, "'workers' is not a dask config key"),
            (4, 1, "kind threads cannot be scaled from here"),
        ],
    ),
    (
        "ddr-cluster: 1\nkind: kubernetes\nkubernetes: {image: x, replicas: 3}\n",
        [(3, 24, "dask_kubernetes.operator.KubeCluster has no keyword 'replicas'")],
    ),
]


@pytest.mark.parametrize(("text", "expected"), BROKEN)
def test_broken_configs_report_line_and_column(tmp_path, text, expected):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(PipelineError) as info:
        load_cluster_config(path)
    got = [(p.location.line, p.location.col, p.message) for p in info.value.problems]
    assert len(got) == len(expected), got
    for (line, col, message), (gl, gc, gm) in zip(expected, got, strict=True):
        assert (gl, gc) == (line, col), got
        assert message in gm, gm
    assert str(info.value).splitlines()[1].startswith(f"{path}:{expected[0][0]}:")


def test_threads_config_sets_the_scheduler_and_blas_threads(monkeypatch):
    for var in BLAS_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    config = load_cluster_config("threads")
    with cluster_client(config) as handle:
        assert handle.client is None
        assert dask.config.get("scheduler") == "threads"
        assert all(os.environ[v] == "1" for v in BLAS_THREAD_VARS)
    assert dask.config.get("scheduler", None) != "threads"


def test_local_cluster_starts_applies_dask_config_and_stops(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "ddr-cluster: 1\nkind: local\nlocal:\n  n_workers: 1\n  threads_per_worker: 1\n"
        "  processes: false\n  dashboard_address: null\n"
        "dask:\n  distributed.scheduler.allowed-failures: 7\n"
    )
    with cluster_client(load_cluster_config(path)) as handle:
        assert handle.client is not None
        assert len(handle.client.scheduler_info()["workers"]) == 1
        assert dask.config.get("distributed.scheduler.allowed-failures") == 7
        assert dask.delayed(sum)([1, 2]).compute() == 3
        cluster = handle.cluster
    assert cluster.status.name in ("closed", "closing")


def test_cluster_json_schema():
    schema = json_schema()
    assert schema["title"].startswith("ddr cluster config")
    assert set(schema["properties"]["kind"]["enum"]) >= {"local", "slurm", "address"}
