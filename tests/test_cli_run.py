"""The command line as a newcomer meets it: --version, help in plain words, progress lines
in a redirected stderr and in the log file, true times, the error shown once with ddr's
advice, Ctrl-C, exact planned passes, what a rerun rewrites and why, demo data in chunks,
the dashboard on a free port.

Runs that must be a real process (stderr to a file, Ctrl-C, worker processes) are started
with ``subprocess``; the rest use typer's CliRunner.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import zarr
from typer.testing import CliRunner

import ddr
from ddr.cli import app
from ddr.demo import DemoSpec, write_demo_data

runner = CliRunner()
DDR = str(Path(sys.executable).parent / "ddr")
COMMANDS = ["run", "validate", "plan", "inspect", "schema", "ops", "demo-data", "version"]

RANDOMIZED = """\
ddr: 1
name: wide
params: {passes: 3}
inputs:
  X: {path: wide.zarr, array: X}
steps:
  pca:
    op: PCA.fit
    inputs: {X: X}
    with: {n_components: 4, svd_solver: randomized, iterated_power: "${params.passes}"}
outputs:
  - {kind: metrics, from: {passes: pca.n_passes_}, path: out/metrics.json}
run: {if_exists: skip-if-complete, summary: out/run-summary.json}
"""


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli-run")
    write_demo_data(d / "wide.zarr", DemoSpec(4000, 300, 6, 3, 500, seed=3))
    write_demo_data(d / "holes.zarr", DemoSpec(2000, 10, 3, 3, 250, missing=0.05))
    return d


@pytest.fixture
def here(wide, tmp_path, monkeypatch):
    for name in ("wide.zarr", "holes.zarr"):
        (tmp_path / name).symlink_to(wide / name)
    (tmp_path / "wide.yaml").write_text(RANDOMIZED)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def ddr_process(args: list[str], cwd: Path, **kwargs) -> subprocess.Popen:
    """``ddr ARGS`` in ``cwd``, its stdout and stderr going to files there."""
    env = {**os.environ, "COLUMNS": "100"}
    with open(cwd / "stdout.txt", "w") as out, open(cwd / "stderr.txt", "w") as err:
        return subprocess.Popen([DDR, *args], cwd=cwd, stdout=out, stderr=err, env=env, **kwargs)


# --------------------------------------------------------------------- help
def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"ddr {ddr.__version__}\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_in_plain_words(command):
    text = runner.invoke(app, [command, "--help"], terminal_width=80).output
    assert text.startswith(f"Usage: ddr {command} [OPTIONS]")
    for python_type in ("<", ">", "{", "list[", "str]", "bool", "<path>"):
        assert python_type not in text, (command, python_type)
    assert "…" not in text  # nothing truncated
    assert not re.search(r"\w-\n", text), text  # no word split at a hyphen across lines
    assert max(len(line) for line in text.splitlines()) <= 80


def test_help_keeps_values_whole():
    text = runner.invoke(app, ["run", "--help"], terminal_width=80).output
    assert "skip-if-complete" in text and "--cluster FILE|local|threads|sync" in text
    assert "--set KEY=VALUE" in text and "Usage: ddr run [OPTIONS] PIPELINE\n" in text
    top = runner.invoke(app, ["--help"], terminal_width=80).output
    assert "..." not in top.split("Commands:")[1]  # one-line summaries, not cut
    assert "130 interrupted" in top


# -------------------------------------------------------------- feedback, times
def test_stderr_to_a_file_has_one_plain_line_per_pass(here):
    proc = ddr_process(["run", "wide.yaml", "--cluster", "threads"], here)
    started = psutil.Process(proc.pid).create_time()
    assert proc.wait(timeout=300) == 0, (here / "stderr.txt").read_text()
    # the summary is written last: its time is (nearly) the end of the run
    elapsed = (here / "out" / "run-summary.json").stat().st_mtime - started
    err = (here / "stderr.txt").read_text()
    assert "\r" not in err and "\x1b" not in err
    for i in range(1, 5):
        assert len(re.findall(rf"^ddr: PCA \(randomized solver\): pass {i} of 4 ", err, re.M)) == 1
    assert "ddr: PCA (randomized solver): 4 passes over the data (4000 x 300)" in err
    log = (here / "out" / "run-summary.log").read_text()  # beside the summary
    assert "\r" not in log and log.count("PCA (randomized solver): pass ") == 4
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO +ddr\.", log, re.M)
    out = (here / "stdout.txt").read_text()
    assert "summary: out/run-summary.json, log: out/run-summary.log" in out

    summary = json.loads((here / "out" / "run-summary.json").read_text())
    parts = summary["timings"]
    assert list(parts) == [
        "start-up",
        "cluster start",
        "passes",
        "writes",
        "other",
        "cluster shutdown",
    ]
    # the whole wall time of the process, of which the parts account for nearly all
    assert summary["wall_seconds"] == pytest.approx(elapsed, abs=0.5)
    assert summary["wall_seconds"] - sum(parts.values()) < 0.5
    assert parts["start-up"] > 0.2 and parts["passes"] > 0
    first = out.splitlines()[0]
    assert first.startswith(f"run wide: ok in {summary['wall_seconds']:.2f} s (start-up ")

    # a rerun has nothing to do, and says how long that took: all of it start-up
    proc = ddr_process(["run", "wide.yaml", "--cluster", "threads"], here)
    assert proc.wait(timeout=300) == 0
    again = json.loads((here / "out" / "run-summary.json").read_text())
    assert again["wall_seconds"] > 0.2 and "passes" not in again["timings"]
    assert again["wall_seconds"] - sum(again["timings"].values()) < 0.5


@pytest.mark.parametrize("log", ["a folder", "a full disk"])
def test_the_log_is_named_only_when_it_was_written(here, log):
    """A log file that cannot be opened, or whose writes fail, is said once on stderr and
    not named beside the summary as if it held the run's log."""
    (here / "out").mkdir()
    if log == "a folder":
        (here / "out" / "run-summary.log").mkdir()
    elif Path("/dev/full").exists():
        (here / "out" / "run-summary.log").symlink_to("/dev/full")
    else:
        pytest.skip("no /dev/full")
    result = runner.invoke(app, ["run", "wide.yaml", "--cluster", "threads", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("could not write the log file") == 1, result.stderr
    assert "summary: out/run-summary.json\n" in result.stdout, result.stdout
    assert "log:" not in result.stdout


def test_quiet_keeps_stderr_empty(here):
    result = runner.invoke(app, ["run", "wide.yaml", "--cluster", "threads", "-q"])
    assert result.exit_code == 0
    assert result.stderr == ""
    assert "run wide: ok in" in result.stdout


# ------------------------------------------------------------ local cluster
NAN_PCA = """\
ddr: 1
name: nan-pca
inputs:
  X: {path: holes.zarr, array: X}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}
outputs:
  - {kind: model, from: pca, path: out/pca.model.zarr}
run: {summary: out/run-summary.json}
"""


def test_nan_into_pca_on_a_local_cluster_is_one_error_with_the_hint(here):
    (here / "nan.yaml").write_text(NAN_PCA)
    proc = ddr_process(["run", "nan.yaml"], here)
    assert proc.wait(timeout=300) == 1
    err = (here / "stderr.txt").read_text()
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert errors == [
        "ddr: error: run failed: step pca (PCA.fit): ValueError: X contains "
        f"{errors[0].split('X contains ')[1].split(' NaN')[0]} NaN value(s). PCA needs "
        "complete rows; for data with missing values use ddr.PPCA(solver='em'), which fits "
        "principal components with NaN treated as missing"
    ], err
    for noise in ("Traceback", "Compute Failed", "distributed.worker", "CancelledError"):
        assert noise not in err, err
    # the traceback is in the log file, for whoever needs it
    assert "Traceback" in (here / "out" / "run-summary.log").read_text()
    summary = json.loads((here / "out" / "run-summary.json").read_text())
    assert summary["status"] == "failed" and "ddr.PPCA" in summary["error"]


SLOW = RANDOMIZED.replace("passes: 3", "passes: 40")


def test_ctrl_c_exits_130_and_marks_the_summary_interrupted(here):
    (here / "slow.yaml").write_text(SLOW)
    # its own process group, as a terminal's Ctrl-C reaches the workers too
    proc = ddr_process(["run", "slow.yaml"], here, start_new_session=True)
    deadline = time.monotonic() + 240
    while not re.search(r"pass 2 of \d+", (here / "stderr.txt").read_text()):
        assert proc.poll() is None, (here / "stderr.txt").read_text()
        assert time.monotonic() < deadline, "the run did not get going"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    err = (here / "stderr.txt").read_text()
    assert err.rstrip().endswith(
        "ddr: error: interrupted; outputs being written stay marked incomplete"
    )
    for noise in ("Traceback", "asyncio", "Task exception", "KeyboardInterrupt", "Exception"):
        assert noise not in err, err
    summary = json.loads((here / "out" / "run-summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert "cluster shutdown" in summary["timings"]
    assert (here / "stdout.txt").read_text().startswith("run wide: interrupted in ")


def test_dashboard_on_a_free_port(here):
    pytest.importorskip("bokeh")
    import socket
    import warnings

    from ddr.cluster import cluster_client, load_cluster_config

    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 8787))
    except OSError:
        pass  # in use already: what the test needs
    config = load_cluster_config("local")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with cluster_client(config) as handle:
            link = handle.client.dashboard_link
    taken.close()
    assert re.match(r"http://[\w.]+:\d+/status", link) and ":8787/" not in link


# ------------------------------------------------------------------ planning
def test_plan_gives_exact_passes_when_known(here):
    text = runner.invoke(app, ["plan", "wide.yaml"]).output
    assert "pca: PCA.fit(X=X) with n_components=4" in text and "(4 passes)" in text
    assert "passes over inputs: X: 4" in text
    # EM from a random start: one pass per iteration, as many as it takes
    ppca = RANDOMIZED.replace("op: PCA.fit", "op: PPCA.fit").replace(
        'with: {n_components: 4, svd_solver: randomized, iterated_power: "${params.passes}"}',
        "with: {n_components: 4, init: random}",
    )
    (here / "ppca.yaml").write_text(ppca.replace("pca.n_passes_", "pca.n_iter_"))
    text = runner.invoke(app, ["plan", "ppca.yaml"]).output
    assert "(passes decided at run time)" in text and "passes over inputs: X: 1+" in text
    # PPCA and FactorAnalysis from their moments: one pass, and EM's passes after it when X
    # has missing values (which the plan cannot know): at least 1, as the run measures it
    for op in ("PPCA", "FactorAnalysis"):
        one = ppca.replace("op: PPCA.fit", f"op: {op}.fit").replace(", init: random", "")
        (here / "one.yaml").write_text(one.replace("pca.n_passes_", "pca.n_iter_"))
        text = runner.invoke(app, ["plan", "one.yaml"]).output
        assert "(one pass, then more if it needs them" in text, text
        assert "1. batch" in text and "passes over inputs: X: 1+\n" in text + "\n", text


def test_a_rerun_says_what_changed_and_what_it_rewrites(here):
    assert runner.invoke(app, ["run", "wide.yaml", "--cluster", "threads"]).exit_code == 0
    result = runner.invoke(app, ["run", "wide.yaml", "--cluster", "threads", "--set", "passes=2"])
    assert result.exit_code == 0
    assert (
        "ddr: rewriting out/metrics.json: complete but outdated: "
        "pca.with.iterated_power 3 -> 2" in result.stderr
    )
    plan = runner.invoke(app, ["plan", "wide.yaml", "--set", "passes=2"]).output
    assert "skip      metrics out/metrics.json" in plan
    plan = runner.invoke(app, ["plan", "wide.yaml"]).output  # plan says it too
    assert "(complete but outdated: pca.with.iterated_power 2 -> 3)" in plan


def test_demo_data_is_in_several_chunks_by_default(tmp_path):
    result = runner.invoke(app, ["demo-data", str(tmp_path / "d.zarr"), "--n-samples", "4000"])
    assert result.exit_code == 0
    assert "in 8 chunks of 500 rows" in result.output
    assert zarr.open_array(str(tmp_path / "d.zarr"), path="X").chunks == (500, 50)
