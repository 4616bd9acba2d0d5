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

import ddr
from ddr.cli import app
from ddr.demo import DemoSpec, write_demo_data
from ddr.io import output_status
from ddr.io.locations import resolve
from ddr.pipeline import plan_pipeline, run_plan

runner = CliRunner()

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


@pytest.mark.parametrize("size", ["8k", "48k", "160k"])
def test_a_full_disk_leaves_nothing_that_blocks_a_rerun(workdir, tmp_path, monkeypatch, size):
    """Outputs on a file system that fills up at different points of the run: the run
    fails (exit 1, no traceback), leaves no temporary files, no output that says complete,
    no claim; what it leaves (an empty folder at worst) is reported missing or incomplete by
    ``ddr inspect``, and once there is space a plain rerun completes every output."""
    from pipeline_support import resize_tmpfs, small_tmpfs

    monkeypatch.chdir(workdir)
    with small_tmpfs(tmp_path / "disk", size) as disk:
        out = disk / "out"
        args = ["run", "crash.yaml", "--cluster", "sync", "--set", f"out={out}"]
        failed = runner.invoke(app, [*args, "--no-progress"])
        assert failed.exit_code == 1, failed.output
        assert "No space left on device" in failed.output, failed.output
        assert "Traceback" not in failed.output and "Logging error" not in failed.output
        left = [p.name for p in disk.rglob("*")]
        assert not [n for n in left if ".tmp-" in n or n.endswith(".ddr-claim")], left
        status = {name: output_status(out / name) for name in ("nb.model.zarr", "proba.zarr")}
        assert status["proba.zarr"] in ("missing", "incomplete"), status
        if status["nb.model.zarr"] == "complete":  # written before the disk filled: whole
            ddr.load(out / "nb.model.zarr")
        for name, state in status.items():
            code = runner.invoke(app, ["inspect", str(out / name)]).exit_code
            assert code == {"complete": 0, "incomplete": 1, "missing": 2}[state], (name, code)
        resize_tmpfs(disk, "8m")
        done = runner.invoke(app, [*args, "--no-progress"])
        assert done.exit_code == 0, done.output
        for name in ("nb.model.zarr", "proba.zarr"):
            assert output_status(out / name) == "complete"


def test_an_empty_output_folder_is_nobodys_output(workdir, tmp_path, monkeypatch):
    """An empty folder where an output goes (a full disk's leftover) does not block a run,
    with the default if_exists, --resume or --force."""
    monkeypatch.chdir(workdir)
    for flag in ([], ["--resume"], ["--force"]):
        out = tmp_path / f"out{len(flag)}{''.join(flag)}"
        (out / "proba.zarr").mkdir(parents=True)
        (out / "summary.json").mkdir()  # a file output's path, as an empty folder
        result = runner.invoke(
            app, ["run", "crash.yaml", "--cluster", "sync", "--set", f"out={out}", *flag]
        )
        assert result.exit_code == 0, result.output
        assert output_status(out / "proba.zarr") == "complete"
        assert (out / "summary.json").is_file()
