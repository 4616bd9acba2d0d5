"""Acceptance: SIGKILL ``ddr run`` while it writes; the killed output says incomplete; a rerun
completes it identically to an uninterrupted run, without refitting what was done. On local
files and on the S3 endpoint (no rename there: the status is the last PUT of the metadata)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import dask
import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

from ddr.cli import app
from ddr.demo import DemoSpec, write_demo_data
from ddr.io import output_status
from ddr.io.locations import resolve
from ddr.pipeline import plan_pipeline, run_plan

# Many small chunks, so that streaming the output takes long enough to be caught mid-way.
SPEC = DemoSpec(n_samples=20_000, n_features=8, rank=3, n_classes=3, chunk_rows=100, seed=5)

PIPELINE = """\
ddr: 1
name: crash
params: {data: big.zarr, out: out}
inputs:
  X: {path: "${params.data}", array: X}
  y: {path: "${params.data}", array: y}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  proba: {op: GaussianNB.predict_proba, inputs: {model: nb, X: X}}
outputs:
  - {kind: model, from: nb, path: "${params.out}/nb.model.zarr"}
  - {kind: zarr, from: proba, path: "${params.out}/proba.zarr"}
run: {if_exists: skip-if-complete, summary: "${params.out}/summary.json"}
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("crash")
    with dask.config.set(scheduler="threads"):
        write_demo_data(d / "big.zarr", SPEC)
    (d / "crash.yaml").write_text(PIPELINE)
    return d


def _chunks_written(path: str) -> tuple[int, int]:
    try:
        arr = zarr.open_group(resolve(path).store(), mode="r")["proba"]
        return arr.nchunks_initialized, arr.nchunks
    except Exception:  # not created yet
        return 0, 1


def _metadata_token(path: str) -> str:
    """What changes when a saved model's group metadata is rewritten (mtime, or ETag)."""
    return json.dumps(resolve(path).joinpath("zarr.json").stat_token(), sort_keys=True)


@pytest.fixture(params=["local", "s3"])
def where(request, workdir):
    """Where the data and outputs live: the local folder, or a prefix on the S3 endpoint
    (the same dataset uploaded); returns (data, prefix of outputs)."""
    if request.param == "local":
        return "big.zarr", str(workdir)
    s3 = request.getfixturevalue("s3")
    root = s3.url("crash")
    with dask.config.set(scheduler="threads"):
        write_demo_data(f"{root}/big.zarr", SPEC)
    return f"{root}/big.zarr", root


def test_sigkill_mid_write_then_resume(workdir, where, monkeypatch):
    monkeypatch.chdir(workdir)
    data, root = where
    reference, killed = f"{root}/reference", f"{root}/killed"
    # the uninterrupted run, for reference (same code path, in this process)
    with dask.config.set(scheduler="sync"):
        run_plan(plan_pipeline("crash.yaml", [f"data={data}", f"out={reference}"]))

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "ddr.cli",
        "run",
        "crash.yaml",
        "--cluster",
        "sync",
        "--no-progress",
        "--set",
        f"data={data}",
        "--set",
        f"out={killed}",
    ]
    proc = subprocess.Popen(
        cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    target = f"{killed}/proba.zarr"
    deadline = time.monotonic() + 120
    caught = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if output_status(target) == "incomplete":
                done, total = _chunks_written(target)
                if 0 < done < total:
                    caught = (done, total)
                    proc.send_signal(signal.SIGKILL)
                    break
            time.sleep(0.005 if target.startswith("/") else 0.05)
    finally:
        if proc.poll() is None and caught is None:
            proc.kill()
        proc.wait(timeout=60)
    assert caught is not None, f"the run ended before it could be killed:\n{proc.stdout.read()}"
    assert proc.returncode == -signal.SIGKILL

    # the killed output says it is incomplete; the model saved before the kill is complete
    result = CliRunner().invoke(app, ["inspect", target])
    assert result.exit_code == 1, result.output
    assert "INCOMPLETE" in result.output
    done, total = _chunks_written(target)
    assert 0 < done < total
    model = f"{killed}/nb.model.zarr"
    assert output_status(model) == "complete"
    model_meta = _metadata_token(model)

    # rerun: the model is loaded (no refit), the output is completed
    plan = plan_pipeline("crash.yaml", [f"data={data}", f"out={killed}"])
    assert plan.steps["nb"].action == "load"
    rerun = CliRunner().invoke(app, cmd[3:])  # the same command, in this process
    assert rerun.exit_code == 0, rerun.output
    summary = json.loads(resolve(f"{killed}/summary.json").read_bytes())
    steps = {s["id"]: s for s in summary["steps"]}
    assert steps["nb"]["action"] == "loaded" and steps["nb"]["passes"] == {}
    assert summary["passes"] == {"X": pytest.approx(1.0)}  # only the rewrite of the output
    assert _metadata_token(model) == model_meta
    assert output_status(target) == "complete"
    got = zarr.open_group(resolve(target).store(), mode="r")["proba"]
    ref = zarr.open_group(resolve(f"{reference}/proba.zarr").store(), mode="r")["proba"]
    np.testing.assert_array_equal(got[...], ref[...])
    assert got.metadata.dimension_names == ref.metadata.dimension_names
