"""Acceptance: every pipeline in pipelines/ validates, and runs on small data both on a
2-worker LocalCluster and on a separately started ``dask scheduler`` with two ``dask worker``
processes on loopback, reached through cluster-configs/address.yaml."""

from __future__ import annotations

import importlib.util
import json

import dask
import pytest
from dask_processes import dask_processes
from pipeline_support import (
    CLUSTER_CONFIGS,
    COUNTS,
    DATASETS,
    GRIDDED,
    OVERRIDES,
    PIPELINES,
    example_names,
    make_data,
)
from typer.testing import CliRunner

from ddr.cli import app
from ddr.pipeline import plan_pipeline, run_plan
from ddr.pipeline.outputs import output_kind

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
        "lsa-plsa",
        "grid-search",
        "eof",
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
        assert output_kind(out.kind).status(out.location)[0] == "complete", out.path


@pytest.fixture(scope="module")
def local_dir(data, tmp_path_factory):
    """One working directory for all pipelines (apply-saved reads what fit-once wrote)."""
    d = tmp_path_factory.mktemp("examples-local")
    for name in (*DATASETS, *COUNTS, *GRIDDED):
        (d / name).symlink_to(data / name)
    return d


@pytest.mark.parametrize("name", NAMES)
def test_pipeline_runs_on_a_local_cluster(name, local_dir, monkeypatch, client):
    monkeypatch.chdir(local_dir)
    plan = plan_pipeline(PIPELINES / f"{name}.yaml", OVERRIDES.get(name, []))
    report = local_dir / f"{name}-report.html" if name == "quickstart" else None
    summary = run_plan(plan, performance_report=report)
    assert summary.status == "ok"
    assert summary.scheduler.startswith("distributed"), summary.scheduler
    assert summary.dashboard is None or summary.dashboard.startswith("http")
    _outputs_complete(plan)
    # the workers' reads are counted too
    assert summary.passes and all(v > 0 for v in summary.passes.values())
    if report is not None and importlib.util.find_spec("bokeh") is not None:
        assert report.stat().st_size > 10_000  # the dask performance report (HTML)


@pytest.fixture(scope="module")
def scheduler_address(tmp_path_factory):
    """A `dask scheduler` and two `dask worker` processes on loopback, torn down after."""
    with dask_processes(tmp_path_factory.mktemp("dask-logs"), [[], []]) as procs:
        yield procs.address


@pytest.fixture(scope="module")
def address_dir(data, tmp_path_factory):
    d = tmp_path_factory.mktemp("examples-address")
    for name in (*DATASETS, *COUNTS, *GRIDDED):
        (d / name).symlink_to(data / name)
    return d


@pytest.mark.parametrize("name", NAMES)
def test_pipeline_runs_on_a_separate_scheduler(name, address_dir, monkeypatch, scheduler_address):
    monkeypatch.chdir(address_dir)
    config = str(CLUSTER_CONFIGS / "address.yaml")
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
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((address_dir / "summaries" / f"{name}.json").read_text())
    assert summary["status"] == "ok"
    assert summary["scheduler"].startswith(f"distributed {scheduler_address}")
    assert "2 workers" in summary["scheduler"]
    plan = plan_pipeline(PIPELINES / f"{name}.yaml", OVERRIDES.get(name, []), resume=True)
    _outputs_complete(plan)
    assert all(o.action == "skip" for o in plan.outputs)
