"""Worker loss, for real: a ``dask scheduler`` and two ``dask worker`` processes on loopback
(tests/dask_processes.py), one worker process killed by pid (kill -9; its nanny starts a new
one) in the middle of a shared pass, of PPCA's EM and of the streaming writes, or retired by
``--lifetime`` in the middle of a run. The outputs equal those of an undisturbed run (PPCA
within 3e-12), and the run's log (the ``ddr.cluster`` logger) reports each lost or retired
worker and what was recomputed.

Each chunk read takes 0.1 s longer in these workers (tests/worker_delay.py) so that a pass
over the small test data lasts long enough to be interrupted.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr
from dask_processes import dask_processes, kill
from pipeline_support import CLUSTER_CONFIGS, PIPELINES

from ddr.cluster import cluster_client, load_cluster_config
from ddr.config.errors import RunError
from ddr.demo import DemoSpec, write_demo_data
from ddr.io import output_status
from ddr.pipeline import plan_pipeline, run_plan
from ddr.pipeline.summary import RunSummary

DELAY = 0.1

#: pipelines without plots (matplotlib in the client would only slow the tests down)
PCA_SCORES = """\
ddr: 1
name: pca-scores
params: {out: out}
inputs:
  X: {path: demo.zarr, array: X}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 4}}
  scores: {op: PCA.transform, inputs: {model: pca, X: X}}
outputs:
  - {kind: zarr, from: scores, path: "${params.out}/scores.zarr"}
  - {kind: metrics, from: [pca.explained_variance_], path: "${params.out}/metrics.json"}
"""
PPCA_MISSING = """\
ddr: 1
name: ppca-em
params: {out: out}
inputs:
  X: {path: demo-missing.zarr, array: X}
steps:
  ppca: {op: PPCA.fit, inputs: {X: X}, with: {n_components: 3, max_iter: 5, tol: 0.0}}
  scores: {op: PPCA.transform, inputs: {model: ppca, X: X}}
outputs:
  - {kind: zarr, from: scores, path: "${params.out}/scores.zarr"}
  - {kind: model, from: ppca, path: "${params.out}/ppca.model.zarr"}
  - kind: metrics
    from: {noise_variance: ppca.noise_variance_, loglik: ppca.loglik_curve_}
    path: ${params.out}/metrics.json
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("worker-loss-data")
    with dask.config.set(scheduler="threads"):
        write_demo_data(d / "demo.zarr", DemoSpec(6000, 12, 4, 3, 500, seed=5))
        write_demo_data(
            d / "demo-missing.zarr", DemoSpec(6000, 12, 4, 3, 500, seed=6, missing=0.05)
        )
    (d / "pca-scores.yaml").write_text(PCA_SCORES)
    (d / "ppca-em.yaml").write_text(PPCA_MISSING)
    return d


@pytest.fixture(scope="module")
def procs(tmp_path_factory):
    """Two workers with nannies: a killed worker process is replaced for the next test."""
    with dask_processes(tmp_path_factory.mktemp("worker-loss-logs"), [[], []], DELAY) as p:
        yield p


@pytest.fixture
def workdir(data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("demo.zarr", "demo-missing.zarr", "pca-scores.yaml", "ppca-em.yaml"):
        (tmp_path / name).symlink_to(data / name)
    (tmp_path / "logs").mkdir()
    return tmp_path


class KillWhen(threading.Thread):
    """kill -9 one worker (``everyone``: every worker) once it holds a finished ``prefix``
    task while more ``prefix`` tasks are still to run, and ``groups`` task groups of that
    prefix have been seen (the iteration of a multi-pass fit). With ``reread``, the held
    task must be one whose chunk reads no other worker holds: its recomputation reads
    them again (otherwise it may find them on the other worker and read nothing)."""

    def __init__(
        self,
        procs,
        prefix: str,
        groups: int = 1,
        everyone: bool = False,
        reading: str = "",
        reread: bool = False,
    ) -> None:
        super().__init__(daemon=True)
        self.procs, self.prefix, self.groups, self.reading = procs, prefix, groups, reading
        self.reread = reread
        pids = procs.worker_pids()
        self.victim, self.pid = next(iter(pids.items()))
        self.others = [pid for pid in pids.values() if pid != self.pid] if everyone else []
        self.killed_at: float | None = None
        self.killed_wall: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        prefix, victim, reading, reread = self.prefix, self.victim, self.reading, self.reread

        def look(dask_scheduler):  # runs on the scheduler (shipped by value)
            from dask.utils import key_split

            def ours(t):  # a ``prefix`` task (that reads ``reading``: stores of row numbers do not)
                return key_split(t.key) == prefix and (
                    not reading or any(reading in str(d.key) for d in t.dependencies)
                )

            def lost_with(t, ws):  # recomputing ``t`` without ``ws`` reads chunks again
                reads = [d for d in t.dependencies if "from-zarr" in str(d.key)]
                return bool(reads) and all((d.who_has or set()) <= {ws} for d in reads)

            ws = dask_scheduler.workers.get(victim)
            held = ws is not None and any(
                ours(t) and (not reread or lost_with(t, ws)) for t in ws.has_what
            )
            tasks = [t for t in dask_scheduler.tasks.values() if ours(t)]
            todo = any(t.state in ("waiting", "queued", "processing") for t in tasks)
            return held and todo, sorted({t.group_key for t in tasks})

        seen: set[str] = set()
        with self.procs.client() as client:
            while not self.stop.is_set():
                ready, groups = client.run_on_scheduler(look)
                seen.update(groups)
                if ready and len(seen) >= self.groups:
                    for pid in [self.pid, *self.others]:
                        kill(pid)
                    self.killed_at, self.killed_wall = time.monotonic(), time.time()
                    return
                time.sleep(0.02)


def _run(procs, pipeline: Path, sets: list[str], killer: KillWhen | None) -> RunSummary:
    config = load_cluster_config(CLUSTER_CONFIGS / "address.yaml", [f"address={procs.address}"])
    with cluster_client(config):
        if killer is not None:
            killer.start()
        try:
            summary = run_plan(plan_pipeline(pipeline, sets))
        finally:
            if killer is not None:
                killer.stop.set()
                killer.join()
    assert summary.status == "ok"
    return summary


def _undisturbed(pipeline: Path, sets: list[str]) -> RunSummary:
    with dask.config.set(scheduler="threads"):
        summary = run_plan(plan_pipeline(pipeline, sets))
    assert summary.status == "ok"
    return summary


def _same_passes(disturbed: RunSummary, undisturbed: RunSummary) -> None:
    """The summary counts each task's read once: the passes after a lost worker are those
    of an undisturbed run, per step, per output and in all, and what the lost worker's
    recomputed tasks read again is reported apart."""
    assert disturbed.passes == undisturbed.passes and disturbed.passes
    assert [s.passes for s in disturbed.steps] == [s.passes for s in undisturbed.steps]
    assert [o.passes for o in disturbed.outputs] == [o.passes for o in undisturbed.outputs]
    assert undisturbed.read_again == {}
    assert disturbed.read_again and all(v > 0 for v in disturbed.read_again.values())
    assert "read again after lost workers: " in disturbed.format()


def _arrays(out: Path) -> dict[str, np.ndarray]:
    """Every array of every Zarr output under ``out``, and every JSON metric."""
    found: dict[str, np.ndarray] = {}
    for store in sorted(out.glob("*.zarr")):
        group = zarr.open_group(str(store), mode="r")
        for name, arr in group.arrays():
            found[f"{store.name}/{name}"] = arr[...]
    for path in sorted(out.glob("*.json")):
        if path.name == "run-summary.json":
            continue
        for key, value in json.loads(path.read_text()).items():
            if not key.startswith("ddr:"):
                found[f"{path.name}/{key}"] = np.asarray(value)
    return found


def _same(a: Path, b: Path, rtol: float = 0.0) -> None:
    got, want = _arrays(a), _arrays(b)
    assert sorted(got) == sorted(want) and got
    for key in want:
        if rtol == 0.0:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        else:
            np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=0, err_msg=key)


def _lost_reported(caplog, victim: str) -> str:
    lines = [r.getMessage() for r in caplog.records if r.name == "ddr.cluster"]
    lost = [m for m in lines if m.startswith(f"worker {victim} lost")]
    assert lost, lines
    assert any(m.startswith("during the run 1 worker(s) were lost") for m in lines), lines
    return lost[0]


@pytest.mark.parametrize(
    ("pipeline", "prefix", "reread"),
    [
        # a pass shared by 5 fits; a block held whose chunks only the victim read
        (PIPELINES / "one-pass-statistics.yaml", "ddr-stats-block", True),
        # streaming the scores to Zarr: any stored block (a held store task whose chunk
        # reads no other worker holds did not come in three runs: the worker was never killed)
        (Path("pca-scores.yaml"), "store-map", False),
    ],
    ids=["shared-pass", "streaming-writes"],
)
def test_worker_killed_mid_run_gives_identical_outputs(
    procs, workdir, caplog, pipeline, prefix, reread
):
    path = workdir / pipeline
    procs.wait_for_workers(2)
    with caplog.at_level(logging.INFO, logger="ddr.cluster"):
        killer = KillWhen(procs, prefix, reading="from-zarr", reread=reread)
        disturbed = _run(procs, path, ["out=disturbed"], killer)
    assert killer.killed_at is not None, "the worker was not killed: the test tested nothing"
    message = _lost_reported(caplog, killer.victim)
    assert "recomputed" in message and prefix in message, message
    undisturbed = _undisturbed(path, ["out=undisturbed"])
    _same(workdir / "disturbed", workdir / "undisturbed")
    _same_passes(disturbed, undisturbed)


@pytest.mark.filterwarnings("ignore:PPCA. EM did not converge")
def test_worker_killed_during_ppca_em(procs, workdir, caplog):
    path, sets = workdir / "ppca-em.yaml", []
    procs.wait_for_workers(2)
    with caplog.at_level(logging.INFO, logger="ddr.cluster"):
        killer = KillWhen(procs, "ddr-stats-block", groups=3, reread=True)  # third EM pass
        disturbed = _run(procs, path, [*sets, "out=disturbed"], killer)
    assert killer.killed_at is not None, "the worker was not killed: the test tested nothing"
    _lost_reported(caplog, killer.victim)
    undisturbed = _undisturbed(path, [*sets, "out=undisturbed"])
    _same(workdir / "disturbed", workdir / "undisturbed", rtol=3e-12)
    _same_passes(disturbed, undisturbed)


def test_worker_retired_by_lifetime_mid_run(workdir, caplog):
    path = workdir / "pca-scores.yaml"
    # one worker retires 5 s after it starts; the run's two passes over 12 chunks slowed
    # to 0.4 s each, on two workers, last longer than that
    workers = [["--lifetime", "5s"], []]
    with (
        dask_processes(workdir / "logs", workers, chunk_delay=4 * DELAY) as procs,
        caplog.at_level(logging.INFO, logger="ddr.cluster"),
    ):
        _run(procs, path, ["out=disturbed"], None)
    lines = [r.getMessage() for r in caplog.records if r.name == "ddr.cluster"]
    retired = [m for m in lines if " retired (its lifetime ended or the cluster scaled down)" in m]
    assert retired, lines
    assert any(m.startswith("during the run 1 worker(s) retired") for m in lines), lines
    assert not any(" lost " in m for m in lines), lines
    _undisturbed(path, ["out=undisturbed"])
    _same(workdir / "disturbed", workdir / "undisturbed")


# ----------------------------------------------------------------- no worker left
NO_NANNY_CONFIG = """\
ddr-cluster: 1
kind: address
address: {{address: "{address}", timeout: 10s}}
wait_for_workers: {wanted}
wait_timeout: {timeout}
"""


def _config(procs, tmp: Path, wanted: int, timeout: str) -> Path:
    path = tmp / "no-nanny.yaml"
    path.write_text(NO_NANNY_CONFIG.format(address=procs.address, wanted=wanted, timeout=timeout))
    return path


def test_every_worker_lost_stops_the_run_after_wait_timeout(workdir, caplog):
    """Both workers (without nannies: nothing restarts them) killed while the scores stream
    to Zarr: the loss is said within seconds, the run stops once wait_timeout (3 s) has
    passed without a worker, says why, and its summary keeps the pass it made before."""
    path = workdir / "pca-scores.yaml"
    workers = [["--no-nanny"], ["--no-nanny"]]
    with (
        dask_processes(workdir / "logs", workers, chunk_delay=4 * DELAY) as procs,
        caplog.at_level(logging.INFO, logger="ddr.cluster"),
    ):
        config = load_cluster_config(_config(procs, workdir, 2, "3s"))
        killer = KillWhen(procs, "store-map", everyone=True, reading="from-zarr")
        with cluster_client(config), pytest.raises(RunError) as err:
            killer.start()
            try:
                run_plan(plan_pipeline(path, ["out=gone", "run.summary=gone/summary.json"]))
            finally:
                killer.stop.set()
                killer.join()
        stopped = time.monotonic()
    assert killer.killed_at is not None, "the workers were not killed: the test tested nothing"
    assert "no worker was left for 3 s" in str(err.value) and "wait_timeout" in str(err.value)
    # stopped after the timeout, not minutes later
    assert 3.0 <= stopped - killer.killed_at < 15.0, stopped - killer.killed_at
    said = [
        r for r in caplog.records if r.name == "ddr.cluster" and "no worker is left" in r.message
    ]
    assert said and said[0].created - killer.killed_wall < 3.0, [r.message for r in said]
    assert any(
        r.levelno == logging.ERROR and "the run stopped" in r.message for r in caplog.records
    )
    summary = json.loads((workdir / "gone" / "summary.json").read_text())
    assert summary["status"] == "failed" and "no worker was left" in summary["error"]
    assert summary["passes"]["X"] >= 1.0  # the fit's pass, counted before the workers went
    assert output_status(workdir / "gone" / "scores.zarr") == "incomplete"


def test_a_worker_that_joins_in_time_lets_the_run_go_on(workdir, caplog):
    """The only worker killed mid-stream, a new one started a second later: within
    wait_timeout, so the run goes on and gives the undisturbed outputs and passes."""
    path = workdir / "pca-scores.yaml"
    with (
        dask_processes(workdir / "logs", [["--no-nanny"]], chunk_delay=4 * DELAY) as procs,
        caplog.at_level(logging.INFO, logger="ddr.cluster"),
    ):
        config = load_cluster_config(_config(procs, workdir, 1, "60s"))
        killer = KillWhen(procs, "store-map", reading="from-zarr")

        def replace() -> None:
            killer.join()
            if killer.killed_at is not None:
                time.sleep(1.0)
                procs.add_worker(["--no-nanny"])

        with cluster_client(config):
            killer.start()
            helper = threading.Thread(target=replace, daemon=True)
            helper.start()
            try:
                disturbed = run_plan(plan_pipeline(path, ["out=disturbed"]))
            finally:
                killer.stop.set()
                helper.join()
    assert killer.killed_at is not None, "the worker was not killed: the test tested nothing"
    lines = [r.getMessage() for r in caplog.records if r.name == "ddr.cluster"]
    assert any(m.startswith("no worker is left") for m in lines), lines
    assert any(m.startswith("a worker joined after") for m in lines), lines
    assert disturbed.status == "ok"
    undisturbed = _undisturbed(path, ["out=undisturbed"])
    _same(workdir / "disturbed", workdir / "undisturbed")
    assert disturbed.passes == undisturbed.passes


def test_plsa_mixtures_held_by_a_killed_worker_are_recomputed(procs):
    """pLSA's per-row mixtures live on the workers between passes: kill -9 a worker that holds
    some after two passes, and the third pass recomputes them from their lineage (the earlier
    passes of those blocks), equal to an undisturbed third pass."""
    import dask.array as da
    import scipy.sparse

    from ddr.stats import PLSASums
    from ddr.stats.engine import compute_with_rows

    X = np.random.default_rng(0).poisson(1.0, (1200, 30)).astype(np.float64)
    Xd = da.from_array(scipy.sparse.csr_matrix(X), chunks=(100, -1))
    spec = PLSASums.spec(topics=np.random.default_rng(1).dirichlet(np.ones(30), size=3))
    with dask.config.set(scheduler="threads"):
        rows = None
        for _ in range(3):
            want, rows = compute_with_rows(spec, X, rows)
    procs.wait_for_workers(2)
    with procs.client() as client, dask.config.set(scheduler=client):
        rows = compute_with_rows(spec, Xd, compute_with_rows(spec, Xd)[1])[1]
        held = client.who_has()
        pids = procs.worker_pids()
        victim = next(a for a in pids if any(a in held[b.key] for b in rows.blocks))
        kill(pids[victim])
        got, new_rows = compute_with_rows(spec, Xd, rows)
        theta = np.vstack(dask.compute(*new_rows.blocks))
    assert got.loglik == pytest.approx(want.loglik, rel=1e-12)
    np.testing.assert_allclose(got.topic_word, want.topic_word, rtol=1e-12)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
