"""Memory checked before a run: each pass's working set per task, asked of the estimator and
statistic classes, against each worker's memory_limit and measured baseline; a limit below
what a worker holds at start refused before the cluster starts, and workers restarted for
memory again and again stopping the run with the reason."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import dask
import numpy as np
import pytest
from pipeline_support import files_written
from typer.testing import CliRunner

from ddr.cli import app
from ddr.demo import DemoSpec, write_demo_data
from ddr.pipeline import plan_pipeline
from ddr.pipeline.memory import pass_memory, task_memory
from ddr.stats import ClassMoments, Moments
from ddr.stats.ppca_sums import PPCASums
from ddr.stats.sketch import CentredProduct

PIPELINE = """\
ddr: 1
name: fits
params: {solver: covariance_eigh}
inputs:
  X: {path: data.zarr, array: X}
  y: {path: data.zarr, array: y}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 5, svd_solver: "${params.solver}"}}
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  ppca: {op: PPCA.fit, inputs: {X: X}, with: {n_components: 4, max_iter: 3, init: random}}
outputs:
  - {kind: metrics, from: [pca.explained_variance_, nb.class_prior_, ppca.noise_variance_],
     path: out/metrics.json}
"""


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        write_demo_data(tmp_path / "data.zarr", DemoSpec(20000, 300, 4, 3, 20000, seed=0))
    (tmp_path / "fits.yaml").write_text(PIPELINE)
    return tmp_path


def test_working_sets_come_from_the_statistic_classes(here):
    plan = plan_pipeline(here / "fits.yaml")
    chunk = 20000 * 300 * 4
    d = 300
    pca = task_memory(plan, "pca")
    assert (pca.stored, pca.decoded) == (chunk, chunk)
    assert pca.statistics == Moments.value_nbytes(d) == 8 * (d * d + 2 * d)
    assert pca.scratch == 8 * 1024 * d  # the centring buffer: at least 1024 rows
    assert pca.merge == (16 + 1) * pca.statistics  # split_every 16 at d = 300
    nb = task_memory(plan, "nb")
    assert nb.statistics == ClassMoments.value_nbytes(d, diagonal=True) == 8 * 3 * d
    ppca = task_memory(plan, "ppca")
    q1 = 5
    assert ppca.statistics == 8 * (d * (q1 * q1 + q1 + 2) + 3 * q1 * q1)
    assert ppca.scratch == PPCASums.block_nbytes(20000, d, params=_params(d, 4))
    # PCA and GaussianNB share one pass: one task holds both statistics
    shared = next(t for t in pass_memory(plan) if "shared" in t.step)
    assert shared.statistics == pca.statistics + nb.statistics
    # the randomized solver's passes hold a d x (k + n_oversamples) product
    randomized = task_memory(plan_pipeline(here / "fits.yaml", ["solver=randomized"]), "pca")
    basis = np.broadcast_to(0.0, (d, 15))
    assert randomized.statistics == CentredProduct.value_nbytes(d, basis=basis)
    assert randomized.statistics == 8 * (d * 15 + 3 * d + 15)


def _params(d, q):
    from ddr.stats.ppca_sums import PPCAParams

    return PPCAParams(np.zeros((d, q)), np.zeros(d), 1.0)


def test_memory_limit_too_small_exit_1_nothing_written(here):
    cluster = here / "small.yaml"
    cluster.write_text(
        "ddr-cluster: 1\nkind: local\nlocal:\n  n_workers: 1\n  threads_per_worker: 8\n"
        "  memory_limit: 450MiB\n  dashboard_address: null\n"
    )
    result = CliRunner().invoke(
        app, ["run", "fits.yaml", "--cluster", str(cluster), "--no-progress"]
    )
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    # refused before ddr imports anything in the worker: its memory as it is plus what the
    # imports add in a fresh process
    assert re.search(
        r"ddr: error: run failed: not enough memory per worker: worker tcp://\S+ has memory_limit "
        r"450 MiB; it holds \d+ MiB before any task \(\d+ MiB measured, and \d+ MiB that "
        r"importing ddr's task modules adds, measured in a fresh process\) and each of its 8 "
        r"thread\(s\) "
        # the widest task: PPCA's EM pass (rows with missing values, solved in sub-blocks)
        r"needs up to \d+ MiB for one task of step ppca \(chunk of 20000 x 300 float32: 23 MiB "
        r"stored \+ 23 MiB decoded, statistics 0.074 MiB, scratch 16 MiB; a merge task 1.3 "
        r"MiB\): in all \d+ MiB, more than the 360 MiB \(0.8 of the limit\) at which dask "
        r"pauses the worker",
        text,
    ), text
    assert files_written(here, {"data.zarr", "fits.yaml", "small.yaml"}) == []


# ------------------------------------------------------- what a worker needs at start
DDR = str(Path(sys.executable).parent / "ddr")

SMALL = """\
ddr-cluster: 1
kind: local
local:
  n_workers: 1
  threads_per_worker: 1
  memory_limit: {limit}
  dashboard_address: null
{extra}"""

#: a preload that takes memory when its worker starts (what a site's preload, plugin or
#: environment can add to a worker: ddr's measurement of a fresh process cannot see it)
HOG_AT_START = """\
import numpy as np
_held = []
def dask_setup(worker):
    _held.append(np.ones({mib} * 2**20 // 8))
"""

#: a preload that takes memory once its worker runs a task (a task that needs more than
#: the limit, whatever ddr's estimate said)
HOG_IN_TASK = """\
import threading, time
import numpy as np
_held = []
def dask_setup(worker):
    def watch():
        while not worker.state.executing_count:
            time.sleep(0.01)
        _held.append(np.ones({mib} * 2**20 // 8))
    threading.Thread(target=watch, daemon=True).start()
"""


def _cluster(here, limit, extra=""):
    path = here / "small.yaml"
    path.write_text(SMALL.format(limit=limit, extra=extra))
    return path


def _ddr_run(here, cluster, timeout=180):
    """``ddr run fits.yaml`` in a process of its own: what the terminal shows, the
    workers' and distributed's lines included; (exit code, output, seconds)."""
    started = time.monotonic()
    done = subprocess.run(
        [DDR, "run", "fits.yaml", "--cluster", str(cluster), "--no-progress"],
        cwd=here,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def test_limit_below_what_a_worker_holds_at_start_refused_before_starting(here, monkeypatch):
    """100 MiB per worker: a worker holds more than 80% of that (where dask pauses it)
    before any task. Refused before the cluster starts, with the limit and the need."""
    from ddr.cluster.local import Local

    def no_cluster(self):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(Local, "make_cluster", no_cluster)
    cluster = _cluster(here, "100MiB")
    result = CliRunner().invoke(
        app, ["run", "fits.yaml", "--cluster", str(cluster), "--no-progress"]
    )
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert re.search(
        r"ddr: error: run failed before reading anything: not enough memory per worker: each "
        r"worker has memory_limit 100 MiB, and a worker holds (\d+) MiB before it runs any "
        r"task \(measured: a fresh process of this Python after importing distributed, numpy, "
        r"dask and ddr's task modules\), more than the 80 MiB \(0.8 of the limit\) at which dask "
        r"pauses the worker: no task could run. Give each worker a memory_limit of at least "
        r"(\d+) MiB, and more for what its tasks hold \(nothing was started\)",
        text,
    ), text
    assert files_written(here, {"data.zarr", "fits.yaml", "small.yaml"}) == []


def test_start_need_is_measured_in_a_fresh_process():
    from ddr.cluster.memory import start_memory

    start = start_memory()
    # numpy, dask.array, zarr and ddr's statistics: tens of MiB on top of the interpreter
    assert 50 * 2**20 < start.total < 2 * 2**30
    assert 10 * 2**20 < start.imports < start.total


def test_worker_limits_known_before_starting(tmp_path):
    from dask.utils import parse_bytes

    from ddr.cluster import load_cluster_config
    from ddr.cluster.session import backend_for

    path = tmp_path / "c.yaml"
    for limit, threads, expected in [
        ("300MiB", 2, 300 * 2**20),
        ("2GB", 1, 2 * 10**9),
        (0, 1, None),  # no limit
    ]:
        path.write_text(
            SMALL.format(limit=limit, extra="").replace(
                "threads_per_worker: 1", f"threads_per_worker: {threads}"
            )
        )
        assert backend_for(load_cluster_config(path)).worker_memory_limit() == expected
    pytest.importorskip("dask_jobqueue")
    slurm = backend_for(load_cluster_config("cluster-configs/slurm.yaml"))
    script = slurm.job_script()
    given = re.search(r"--memory-limit (\S+)", script).group(1)
    assert slurm.worker_memory_limit() == parse_bytes(given)


def _between_start_and_run(pause=0.8):
    """A limit just above the pre-check's floor (what a fresh process holds at start, at
    the pause fraction) and below what fits.yaml needs (its baseline plus a 49 MiB task)."""
    from ddr.cluster.memory import start_memory

    return int(start_memory().total / pause / 2**20) + 8  # MiB


def test_limit_above_start_but_below_the_run_one_clear_error(here):
    """A limit the pre-check lets through but the run's tasks do not fit in: refused once
    the worker joined, before ddr imports anything there (the import would get the worker
    paused), with the numbers; no traceback, no paused worker, in seconds."""
    limit = _between_start_and_run()
    code, out, seconds = _ddr_run(here, _cluster(here, f"{limit}MiB"))
    assert code == 1, out
    assert "Traceback" not in out and "Pausing worker" not in out, out
    errors = [line for line in out.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, out
    assert re.search(
        r"ddr: error: run failed: not enough memory per worker: worker tcp://\S+ has "
        rf"memory_limit {limit} MiB; it holds \d+ MiB before any task \(\d+ MiB "
        r"measured, and \d+ MiB that importing ddr's task modules adds, measured in a fresh "
        r"process\) and each of its 1 thread\(s\) needs up to \d+ MiB for one task",
        out,
    ), out
    assert seconds < 60, seconds
    assert files_written(here, {"data.zarr", "fits.yaml", "small.yaml"}) == []


def test_worker_killed_for_memory_at_start_stops_the_run(here):
    """A worker whose preload takes it past 95% of its limit at start: its nanny restarts it
    forever (dask alone: hundreds of restarts, then KilledWorker). ddr stops at once with
    the limit and what the worker held; no traceback."""
    (here / "hog.py").write_text(HOG_AT_START.format(mib=250))
    cluster = _cluster(here, "300MiB", f"  preload: [{here / 'hog.py'}]\n")
    code, out, seconds = _ddr_run(here, cluster)
    assert code == 1, out
    assert "Traceback" not in out, out
    # which is said depends on when the nanny kills it: while ddr asks for its memory, after
    # (ddr sees it restarted again and again, before or during the pass; the nanny's restart
    # may come before the scheduler says the worker held nothing), or before, when ddr saw
    # what it held
    assert re.search(
        r"ddr: error: run failed: (one-pass statistics of [^:]+: )?not enough memory per "
        r"worker: (worker tcp://\S+ \(memory_limit 300 MiB\) was restarted by its nanny|"
        r"workers were restarted \d+ times for passing 0.95 of memory_limit 300 MiB while "
        r"they held no task|workers were restarted \d+ times for passing 0.95 of (its "
        r"memory_limit|memory_limit 300 MiB) \(up to \d+ MiB|worker tcp://\S+ has "
        r"memory_limit 300 MiB; it holds \d+ MiB before any task \(\d+ MiB measured)",
        out,
    ), out
    assert seconds < 60, seconds


def test_workers_restarted_for_memory_while_running_stop_the_run(here):
    """Each worker that gets a task is taken past its limit: restarted by its nanny (the
    restart works under ddr's client, whose config a nanny hands on), again and again; the
    run stops at distributed.scheduler.allowed-failures restarts (3), before dask's
    KilledWorker, with the reason."""
    (here / "hog.py").write_text(HOG_IN_TASK.format(mib=300))
    cluster = _cluster(here, "400MiB", f"  preload: [{here / 'hog.py'}]\n")
    code, out, seconds = _ddr_run(here, cluster)
    assert code == 1, out
    assert "Traceback" not in out and "KilledWorker" not in out, out
    assert "joined" in out  # the nanny restarted the worker
    assert re.search(
        r"ddr: error: run failed: .*not enough memory per worker: workers were restarted 3 "
        r"times for passing 0.95 of memory_limit 400 MiB \(up to \d+ MiB; "
        r"distributed.scheduler.allowed-failures is 3\)",
        out,
    ), out
    assert seconds < 90, seconds


def test_restarts_named_by_an_old_address_count_as_idle_when_no_removed_worker_held_anything():
    """A nanny may report each restart under the address its worker had first, while the
    scheduler removes the worker under the address it had since (seen in the run above): the
    restarts are idle when every removed worker held nothing, and not when one held tasks;
    the limit of a worker never seen is the cluster spec's."""
    from types import SimpleNamespace

    from ddr.cluster.events import WorkerEvents

    # the worker died before the run saw it: its limit is the cluster spec's
    spec = {0: {"options": {"memory_limit": "300MiB", "nthreads": 1}}}
    client = SimpleNamespace(cluster=SimpleNamespace(worker_spec=spec))

    def events(held: bool) -> WorkerEvents:
        ev = WorkerEvents(client=client)
        ev._read_spec_limit()
        for new in ("tcp://a:2", "tcp://a:3"):
            ev._on_event((0.0, {"action": "add-worker", "worker": new}))
            tasks = ["('fit-1', 0)"] if held else []
            removed = {"action": "remove-worker", "worker": new, "processing-tasks": tasks}
            ev._on_event((0.0, removed))
        for rss in (313, 314):
            ev._on_memory_restart((0.0, {"worker": "tcp://a:1", "rss": rss * 2**20}))
        return ev

    assert WorkerEvents(client=None)._memory_stop() is None
    idle = events(held=False)._memory_stop()
    assert idle is not None and "restarted 2 times" in idle and "while they held no task" in idle
    assert "of memory_limit 300 MiB while" in idle and "(up to 314 MiB)" in idle
    assert events(held=True)._memory_stop() is None  # 2 restarts, fewer than allowed-failures
