"""Cluster configs: the shipped ones validate, bad ones are reported with line and column,
dry runs print what would start (the SLURM/PBS job script), and clients start and stop."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import dask
import pytest
from pipeline_support import CLUSTER_CONFIGS, PIPELINES, files_written
from typer.testing import CliRunner

from ddr.cli import app
from ddr.cluster import (
    BLAS_THREAD_VARS,
    ClusterConfig,
    cluster_client,
    dry_run,
    json_schema,
    load_cluster_config,
    worker_environment,
)
from ddr.config.errors import PipelineError
from ddr.demo import DemoSpec, write_demo_data
from ddr.testing import parametrize_with_backend_checks, registered_backends

#: the cluster configs shipped in cluster-configs/, one per kind that takes a block
SHIPPED = sorted(p.stem for p in CLUSTER_CONFIGS.glob("*.yaml"))
#: the kinds whose workers are batch jobs (their dry run is a job script)
JOB_KINDS = sorted(cls.kind for cls in registered_backends() if hasattr(cls, "cluster_class"))


def test_every_kind_with_a_block_has_a_shipped_config():
    assert SHIPPED == sorted(cls.kind for cls in registered_backends() if cls.block)
    assert {"slurm", "pbs"} <= set(JOB_KINDS)


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


# ------------------------------------------------------- settings reach the workers
def test_worker_environment_gives_dask_the_same_settings():
    block = {
        "distributed.worker.memory.target": 0.55,
        "distributed.scheduler.allowed-failures": 7,
        "distributed.comm.timeouts.connect": "45s",
        "distributed.nanny.pre-spawn-environ.OMP_NUM_THREADS": 1,
        "distributed.nanny.pre-spawn-environ.MKL_NUM_THREADS": 1,
    }
    env = worker_environment(block)
    assert env == {
        "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.55",
        "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "7",
        "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "'45s'",
        # keys with capitals cannot be variable names: exported at their parent
        "DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON": (
            "{'OMP_NUM_THREADS': 1, 'MKL_NUM_THREADS': 1}"
        ),
    }
    # a fresh dask process reads them back as the block says
    code = (
        "import dask, distributed, json; print(json.dumps([dask.config.get(k) for k in "
        f"{list(block)!r}]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == list(block.values())


def test_local_workers_hold_the_dask_block(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "ddr-cluster: 1\nkind: local\nlocal:\n  n_workers: 1\n  threads_per_worker: 1\n"
        "  processes: true\n  dashboard_address: null\n  memory_limit: 1GiB\n"
        "dask:\n  distributed.worker.memory.target: 0.55\n"
        "  distributed.worker.memory.spill: 0.65\n"
    )

    def held(dask_worker):
        import dask

        mm = dask_worker.memory_manager
        return (
            mm.memory_target_fraction,
            mm.memory_spill_fraction,
            dask.config.get("distributed.worker.memory.target"),
        )

    with cluster_client(load_cluster_config(path)) as handle:
        assert set(handle.client.run(held).values()) == {(0.55, 0.65, 0.55)}


@pytest.mark.parametrize("name", JOB_KINDS)
def test_job_scripts_export_the_dask_block_and_fall_back_for_local_directory(name):
    pytest.importorskip("dask_jobqueue")
    text = dry_run(load_cluster_config(CLUSTER_CONFIGS / f"{name}.yaml"))
    for line in (
        "export DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=0.6",
        "export DASK_DISTRIBUTED__WORKER__MEMORY__SPILL=0.7",
        "export DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=5",
    ):
        assert line in text.splitlines()
    # exported before the worker starts, and the shipped $TMPDIR has a fallback
    assert text.index("export DASK_") < text.index("distributed.cli.dask_worker")
    assert "--local-directory ${TMPDIR:-/tmp} " in text


def test_job_script_local_directory_falls_back_when_tmpdir_is_unset(tmp_path):
    pytest.importorskip("dask_jobqueue")
    text = dry_run(load_cluster_config(CLUSTER_CONFIGS / "slurm.yaml"))
    command = next(line for line in text.splitlines() if "dask_worker" in line)
    directory = command.split("--local-directory ")[1].split()[0]
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    out = subprocess.run(
        ["bash", "-c", f"echo {directory}"], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "/tmp"
    env["TMPDIR"] = str(tmp_path)
    out = subprocess.run(
        ["bash", "-c", f"echo {directory}"], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == str(tmp_path)


def test_kubernetes_pods_get_the_dask_block():
    text = dry_run(load_cluster_config(CLUSTER_CONFIGS / "kubernetes.yaml"))
    assert "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET" in text and "0.6" in text
    assert "OMP_NUM_THREADS" in text


@pytest.mark.parametrize("name", JOB_KINDS)
def test_dry_run_writes_nothing(name, tmp_path, monkeypatch):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.chdir(tmp_path)
    text = dry_run(load_cluster_config(CLUSTER_CONFIGS / f"{name}.yaml"))
    assert "dask-logs/" in text  # the script names the log directory ...
    assert list(tmp_path.iterdir()) == []  # ... but it is not created


def test_dask_keys_that_cannot_reach_workers_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("ddr-cluster: 1\nkind: local\ndask:\n  Distributed.worker.memory.target: 1\n")
    with pytest.raises(PipelineError) as info:
        load_cluster_config(path)
    assert "cannot be exported to the workers" in str(info.value)


def test_wait_timeout_must_be_a_time(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("ddr-cluster: 1\nkind: local\nwait_timeout: soon\n")
    with pytest.raises(PipelineError) as info:
        load_cluster_config(path)
    assert f"{path}:3:15: wait_timeout: expected seconds or a time such as 10m; got 'soon'" in str(
        info.value
    )


# ------------------------------------------------- bad input: exit code, message, nothing written
@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        write_demo_data(tmp_path / "demo.zarr", DemoSpec(1000, 12, 2, 2, 500, seed=0))
    return tmp_path


def _run(*args: str):
    return CliRunner().invoke(app, ["run", str(PIPELINES / "quickstart.yaml"), *args])


def _nothing_written(directory) -> None:
    assert files_written(directory, {"demo.zarr", "sched.json"}) == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_times_out_with_its_address(workdir):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    result = _run(
        "--cluster",
        str(CLUSTER_CONFIGS / "address.yaml"),
        "--cluster-set",
        f"address={address}",
        "--cluster-set",
        "address.timeout=1s",
    )
    assert result.exit_code == 1, result.output
    assert (
        f"ddr: error: run failed before reading anything: no scheduler answered at {address} "
        "within 1 s (OSError: Timed out trying to connect" in result.output
    )
    _nothing_written(workdir)


def test_stale_scheduler_file_times_out_naming_the_file(workdir):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    (workdir / "sched.json").write_text(json.dumps({"address": address}))
    sets = ["address.address=null", "address.scheduler_file=sched.json", "address.timeout=1s"]
    result = _run(
        "--cluster",
        str(CLUSTER_CONFIGS / "address.yaml"),
        *[a for s in sets for a in ("--cluster-set", s)],
    )
    assert result.exit_code == 1, result.output
    assert re.search(
        rf"no scheduler answered at {address} \(from scheduler file sched.json, written \d+ s "
        r"ago\) within 1 s; a stale scheduler file\?",
        result.output,
    ), result.output
    _nothing_written(workdir)


def test_missing_scheduler_file(workdir):
    sets = ["address.address=null", "address.scheduler_file=nowhere.json"]
    result = _run(
        "--cluster",
        str(CLUSTER_CONFIGS / "address.yaml"),
        *[a for s in sets for a in ("--cluster-set", s)],
    )
    assert result.exit_code == 1, result.output
    assert "scheduler file nowhere.json does not exist" in result.output
    _nothing_written(workdir)


def test_cluster_set_key_the_backend_does_not_have(workdir):
    result = _run(
        "--cluster", str(CLUSTER_CONFIGS / "slurm.yaml"), "--cluster-set", "slurm.corse=2"
    )
    assert result.exit_code == 2, result.output
    assert (
        "--cluster-set slurm.corse=2: dask_jobqueue.SLURMCluster has no keyword 'corse' "
        "(did you mean 'cores'?)" in result.output
    )
    result = _run("--cluster", str(CLUSTER_CONFIGS / "slurm.yaml"), "--cluster-set", "job=2")
    assert result.exit_code == 2, result.output
    assert "--cluster-set job=2: no param 'job' in " in result.output
    assert "(did you mean 'jobs'?)" in result.output
    _nothing_written(workdir)


@pytest.mark.parametrize(
    ("name", "command", "package"),
    [
        ("slurm", "sbatch", "apt-get install slurm-client"),
        ("pbs", "qsub", "OpenPBS/PBS Pro or Torque"),
    ],
)
def test_batch_command_missing_on_path(workdir, monkeypatch, name, command, package):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.setenv("PATH", str(workdir / "bin"))  # an empty PATH: no batch commands
    result = _run("--cluster", str(CLUSTER_CONFIGS / f"{name}.yaml"))
    assert result.exit_code == 1, result.output
    assert f"ddr: error: run failed before reading anything: {command} not found on PATH" in (
        result.output
    )
    assert package in result.output
    _nothing_written(workdir)


# ----------------------------------------------------------------------- PBS (not run)
QSTAT_F = """\
Job Id: 1234.pbs01
    Job_Name = dask-worker
    job_state = Q
    queue = workq
    comment = Can Never Run: Insufficient amount of resource: ncpus (R: 8 A: 4 T: 4
\t)
    Resource_List.ncpus = 8

Job Id: 1235.pbs01
    Job_Name = dask-worker
    job_state = Q
    comment = Not Running: Insufficient amount of resource: ncpus (R: 8 A: 0 T: 4)

Job Id: 1236.pbs01
    job_state = R
"""


def test_qstat_output_gives_each_waiting_job_and_whether_it_can_ever_run():
    # the format of PBS Pro's `qstat -f` (no PBS server was run: see README)
    from ddr.cluster.pbs import parse_qstat

    jobs = parse_qstat(QSTAT_F)
    assert [(j.job_id, j.state, j.never) for j in jobs] == [
        ("1234.pbs01", "QUEUED", True),
        ("1235.pbs01", "QUEUED", False),
    ]
    assert (
        jobs[0].reason == "Can Never Run: Insufficient amount of resource: ncpus (R: 8 A: 4 T: 4)"
    )
    assert str(jobs[1]) == (
        "job 1235.pbs01 QUEUED (Not Running: Insufficient amount of resource: ncpus (R: 8 A: 0 "
        "T: 4))"
    )


def test_workers_of_an_existing_scheduler_are_compared_with_the_dask_block(tmp_path, caplog):
    import logging

    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        path = tmp_path / "c.yaml"
        path.write_text(
            f"ddr-cluster: 1\nkind: address\naddress: {{address: '{cluster.scheduler_address}'}}\n"
            "dask:\n  distributed.worker.memory.target: 0.42\n"
        )
        with caplog.at_level(logging.WARNING, logger="ddr.cluster"):
            with cluster_client(load_cluster_config(path)) as handle:
                assert handle.description.startswith("scheduler at tcp://")
    (message,) = [r.getMessage() for r in caplog.records if r.name == "ddr.cluster"]
    assert message == (
        "the workers were started without the config's dask setting "
        "distributed.worker.memory.target: workers have 0.6 (set "
        "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=0.42)"
    )


@parametrize_with_backend_checks(registered_backends())
def test_every_registered_backend_passes_the_backend_suite(backend, check, tmp_path):
    check(backend, tmp_path)
