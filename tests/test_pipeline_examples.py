"""Acceptance: every pipeline in pipelines/ validates, and runs on small data both on a
2-worker LocalCluster and on a separately started ``dask scheduler`` with two ``dask worker``
processes on loopback, reached through cluster-configs/address.yaml."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import dask
import pytest
from pipeline_support import CLUSTER_CONFIGS, OVERRIDES, PIPELINES, example_names, make_data
from typer.testing import CliRunner

from ddr.cli import app
from ddr.io import output_status
from ddr.pipeline import plan_pipeline, run_plan

NAMES = example_names()


def test_there_is_a_pipeline_per_family():
    assert {
        "quickstart",
        "randomized-pca-wide",
        "kernel-pca-nystrom",
        "ppca-missing",
        "classify",
        "kde",
        "cca",
        "fit-once",
        "apply-saved",
        "one-pass-statistics",
    } <= set(NAMES)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("examples-data"))


def test_every_pipeline_validates(data, monkeypatch):
    monkeypatch.chdir(data)
    for name in NAMES:
        if name == "apply-saved":  # needs the models fit-once writes (validated when run)
            continue
        sets = [a for s in OVERRIDES.get(name, []) for a in ("--set", s)]
        result = CliRunner().invoke(app, ["validate", str(PIPELINES / f"{name}.yaml"), *sets])
        assert result.exit_code == 0, result.output
        assert "valid pipeline" in result.output


def _outputs_complete(plan) -> None:
    for out in plan.outputs:
        if out.kind in ("zarr", "model"):
            assert output_status(out.path) == "complete", out.path
        else:
            assert Path(out.path).is_file(), out.path


def test_every_pipeline_runs_on_a_local_cluster(data, tmp_path, monkeypatch, client):
    for name in ("demo.zarr", "demo-2.zarr", "demo-missing.zarr", "wide.zarr"):
        (tmp_path / name).symlink_to(data / name)
    monkeypatch.chdir(tmp_path)
    for name in NAMES:
        plan = plan_pipeline(PIPELINES / f"{name}.yaml", OVERRIDES.get(name, []))
        summary = run_plan(plan, progress=False)
        assert summary.status == "ok", name
        assert summary.scheduler.startswith("distributed"), summary.scheduler
        _outputs_complete(plan)
        # the workers' reads are counted too
        assert all(v > 0 for v in summary.passes.values()) and summary.passes, name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def scheduler_address(tmp_path_factory):
    """A `dask scheduler` and two `dask worker` processes on loopback, torn down after."""
    dask_cli = str(Path(sys.executable).parent / "dask")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("dask-logs")
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    procs = [
        subprocess.Popen(
            [dask_cli, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=(logs / "scheduler.log").open("w"),
            stderr=subprocess.STDOUT,
            env=env,
        )
    ]
    try:
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        dask_cli,
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--memory-limit",
                        "1GiB",
                        "--no-dashboard",
                        "--name",
                        f"w{i}",
                        "--local-directory",
                        str(logs / f"w{i}"),
                    ],
                    stdout=(logs / f"worker{i}.log").open("w"),
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        from distributed import Client

        deadline = time.monotonic() + 90
        while True:
            try:
                with Client(address, timeout="5s", set_as_default=False) as c:
                    c.wait_for_workers(2, timeout=max(1.0, deadline - time.monotonic()))
                break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_every_pipeline_runs_on_a_separate_scheduler(
    data, tmp_path, monkeypatch, scheduler_address
):
    for name in ("demo.zarr", "demo-2.zarr", "demo-missing.zarr", "wide.zarr"):
        (tmp_path / name).symlink_to(data / name)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    config = str(CLUSTER_CONFIGS / "address.yaml")
    for name in NAMES:
        args = [
            "run",
            str(PIPELINES / f"{name}.yaml"),
            "--cluster",
            config,
            "--cluster-set",
            f"address={scheduler_address}",
            "--no-progress",
            "--summary",
            f"summaries/{name}.json",
        ]
        for s in OVERRIDES.get(name, []):
            args += ["--set", s]
        with dask.config.set(scheduler="sync"):  # the CLI must switch to the cluster itself
            result = runner.invoke(app, args)
        assert result.exit_code == 0, f"{name}:\n{result.output}"
        summary = json.loads((tmp_path / "summaries" / f"{name}.json").read_text())
        assert summary["status"] == "ok"
        assert summary["scheduler"].startswith(f"distributed {scheduler_address}")
        assert "2 workers" in summary["scheduler"]
        plan = plan_pipeline(PIPELINES / f"{name}.yaml", [*OVERRIDES.get(name, [])], resume=True)
        _outputs_complete(plan)
        assert all(o.action == "skip" for o in plan.outputs), name
