"""Two ``ddr run`` processes on the same outputs, on local files and on S3 (moto's server):
run A (held in the middle of its scores pass: tests/worker_delay.py) holds its outputs;
run B is refused while A is alive, naming A's run, host and pid; A is paused (SIGSTOP), its
claims go stale and B (``--wait``) takes them over and writes its own outputs; A, resumed,
can neither write a chunk nor mark an output complete, and fails. The outputs end complete
and wholly B's: no output ever mixes the two runs. Claims are released on success, failure
and Ctrl-C.
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

import numpy as np
import pytest
import zarr

from ddr.cli import inspect_path
from ddr.demo import DemoSpec, write_demo_data
from ddr.io import output_status, read_attrs
from ddr.io.claims import CLAIM_SUFFIX
from ddr.io.locations import resolve

TESTS = Path(__file__).resolve().parent

PIPELINE = """\
ddr: 1
name: claimed
params: {data: a.zarr, out: out}
inputs:
  X: {path: "${params.data}", array: X}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 3}}
  scores: {op: PCA.transform, inputs: {model: pca, X: X}}
outputs:
  - {kind: metrics, from: [pca.explained_variance_], path: "${params.out}/metrics.json"}
  - {kind: model, from: pca, path: "${params.out}/pca.model.zarr"}
  - {kind: zarr, from: scores, path: "${params.out}/scores.zarr"}
run: {claim_timeout: 4s}
"""

#: ``ddr`` whose chunk reads can be held back at a gate (tests/worker_delay.py)
SLOW_DDR = f"""\
import sys
sys.path.insert(0, {str(TESTS)!r})
import worker_delay  # noqa: F401
from ddr.cli import main
sys.argv[0] = "ddr"
main()
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("claims-data")
    write_demo_data(d / "a.zarr", DemoSpec(3000, 8, 3, 2, 500, seed=1))
    write_demo_data(d / "b.zarr", DemoSpec(3000, 8, 3, 2, 500, seed=2))
    write_demo_data(d / "holes.zarr", DemoSpec(3000, 8, 3, 2, 500, seed=3, missing=0.05))
    return d


@pytest.fixture(params=["local", "s3"])
def here(request, data, tmp_path, monkeypatch):
    """A working folder with the data, the pipeline, and where outputs go (``out``)."""
    for name in ("a.zarr", "b.zarr", "holes.zarr"):
        (tmp_path / name).symlink_to(data / name)
    (tmp_path / "claimed.yaml").write_text(PIPELINE)
    (tmp_path / "slow_ddr.py").write_text(SLOW_DDR)
    monkeypatch.chdir(tmp_path)
    out = "out" if request.param == "local" else request.getfixturevalue("s3").url("out")
    yield tmp_path, out
    for proc in _started.pop(tmp_path, []):  # a run a failed test left held or paused
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


#: the runs each test started, by its folder
_started: dict[Path, list[subprocess.Popen]] = {}


def _ddr(
    here: Path, args: list[str], name: str, gate: Path | None = None, free: int = 0
) -> subprocess.Popen:
    """``ddr run`` of the pipeline, its reads after the first ``free`` held until ``gate``
    exists (``gate=None``: not held)."""
    env = {**os.environ, "COLUMNS": "200"}
    if gate is not None:
        env |= {"DDR_TEST_CHUNK_GATE": str(gate), "DDR_TEST_CHUNK_FREE": str(free)}
    with open(here / f"{name}.out", "w") as out, open(here / f"{name}.err", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(here / "slow_ddr.py"), "run", "claimed.yaml", "--cluster",
             "sync", "--no-progress", *args],
            cwd=here, stdout=out, stderr=err, env=env, preexec_fn=_default_sigint,
        )  # fmt: skip
    _started.setdefault(here, []).append(proc)
    return proc


def _default_sigint() -> None:
    """Ctrl-C's default in the run: a shell without job control starts background commands
    (a CI script run with ``&``) with SIGINT ignored, and their children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _err(here: Path, name: str) -> str:
    return (here / f"{name}.err").read_text()


def _claims_left(out: str) -> list[str]:
    loc = resolve(out)
    if loc.is_local:
        return sorted(p.name for p in Path(loc.path).glob(f"*{CLAIM_SUFFIX}"))
    return sorted(k for k in loc.fs.find(loc.fs_path) if k.endswith(CLAIM_SUFFIX))


def _wait_for(condition, timeout: float, what: str, proc: subprocess.Popen, here: Path) -> None:
    """Wait until ``condition()`` holds while ``proc`` (a run whose stderr is ``here/a.err``
    or similar) still runs."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            errors = "\n".join(f"{p.name}: {p.read_text()}" for p in here.glob("*.err"))
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {what}:\n{errors}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _scores_chunks(out: str) -> int:
    loc = resolve(out).joinpath("scores.zarr", "scores", "c")
    try:
        if loc.is_local:
            return sum(1 for p in Path(loc.path).rglob("*") if p.is_file())
        return len(loc.fs.find(loc.fs_path))
    except FileNotFoundError:
        return 0


def _arrays(out: str) -> dict[str, np.ndarray]:
    found = {}
    for name in ("scores.zarr", "pca.model.zarr"):
        group = zarr.open_group(resolve(out).joinpath(name).store(), mode="r")
        for key, arr in group.arrays():
            found[f"{name}/{key}"] = arr[...]
    metrics = json.loads(resolve(out).joinpath("metrics.json").read_bytes())
    for key, value in metrics.items():
        if not key.startswith("ddr:"):
            found[f"metrics.json/{key}"] = np.asarray(value)
    return found


def test_a_paused_run_taken_over_never_mixes_outputs(here):
    here, out = here
    # what run B writes when nobody is in its way
    ref = _ddr(here, ["--set", "data=b.zarr", "--set", "out=ref"], "ref")
    assert ref.wait(timeout=300) == 0, _err(here, "ref")
    # run A: fits (6 chunks), writes its first chunk of scores, and is held at its next
    # read until the gate opens, holding its outputs meanwhile
    gate = here / "gate"
    a = _ddr(here, ["--set", f"out={out}"], "a", gate=gate, free=7)
    try:
        claim = resolve(out).joinpath("scores.zarr" + CLAIM_SUFFIX)
        _wait_for(claim.exists, 120, "run A to claim its outputs", a, here)
        record = json.loads(claim.read_bytes())
        assert record["pid"] == a.pid
        # run B while A is alive: refused, naming A
        b1 = _ddr(here, ["--set", "data=b.zarr", "--set", f"out={out}", "--force"], "b1")
        assert b1.wait(timeout=300) == 1, _err(here, "b1")
        said = _err(here, "b1")
        assert "ddr: error: run refused: the output " in said, said
        assert f"is being written by another run: run {record['run']} (host " in said, said
        # B names the first of A's claims it meets (scores, the model or the run state,
        # claimed a second apart on a slow machine): the time it says is that claim's
        named = re.search(r"the output (\S+) is being written", said).group(1)
        named_claim = json.loads(resolve(named + CLAIM_SUFFIX).read_bytes())
        assert named_claim["run"] == record["run"], said
        assert f"pid {a.pid}, since {named_claim['since']}" in said, said
        assert a.poll() is None, "run A ended before B tried: the test tested nothing"
        # A is paused while it streams its scores
        _wait_for(lambda: _scores_chunks(out) >= 1, 120, "run A to write scores", a, here)
        os.kill(a.pid, signal.SIGSTOP)
        paused_at = time.monotonic()
        written_by_a = _scores_chunks(out)
        # ddr inspect says who is writing it
        info, code = inspect_path(f"{out}/scores.zarr")
        assert code == 1 and info["status"] == "incomplete"
        assert info["claim"]["by"].startswith(f"run {record['run']} (host "), info
        # B waits for A's claims to go stale, takes them over and writes its outputs
        b2 = _ddr(here, ["--set", "data=b.zarr", "--set", f"out={out}", "--force", "--wait"], "b2")
        assert b2.wait(timeout=300) == 0, _err(here, "b2")
        said = _err(here, "b2")
        assert f"taking over {out}/scores.zarr from run {record['run']}" in said.replace(
            str(here) + "/", ""
        ), said
        assert "its last heartbeat is" in said, said
        # not before A's claims timed out (4 s after A's last heartbeat, which came at most
        # a quarter of the timeout before A was paused: 3.97 s after the pause was seen)
        assert time.monotonic() - paused_at >= 4.0 - 4.0 / 4
        assert written_by_a < 6, "A had written every chunk: no mix was possible"
    finally:
        gate.touch()
        os.kill(a.pid, signal.SIGCONT)
    # A goes on, and fails without touching B's outputs
    assert a.wait(timeout=300) == 1, _err(here, "a")
    said = _err(here, "a")
    assert "ClaimLost" in said and "this run's writes to it stop" in said, said
    for name in ("scores.zarr", "pca.model.zarr"):
        assert output_status(resolve(out).joinpath(name)) == "complete"
        fingerprint = read_attrs(resolve(out).joinpath(name))["ddr:fingerprint"]
        assert fingerprint == read_attrs(resolve("ref").joinpath(name))["ddr:fingerprint"]
    got, want = _arrays(out), _arrays("ref")
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert _claims_left(out) == []


def test_wait_then_resume_keeps_what_the_other_run_completed(here):
    """B (``--wait --resume``) waits for A, then plans again: A's outputs, complete and
    with B's fingerprint, are kept, not rewritten."""
    here, out = here
    # A is held at its first read until B says it waits: otherwise B never waited and the
    # test tests nothing
    gate = here / "gate"
    a = _ddr(here, ["--set", f"out={out}"], "a", gate=gate)
    claim = resolve(out).joinpath("scores.zarr" + CLAIM_SUFFIX)
    _wait_for(claim.exists, 120, "run A to claim its outputs", a, here)
    b = _ddr(here, ["--set", f"out={out}", "--resume", "--wait"], "b")
    _wait_for(lambda: "waiting for run " in _err(here, "b"), 120, "run B to wait for A", a, here)
    gate.touch()
    assert a.wait(timeout=300) == 0, _err(here, "a")
    assert b.wait(timeout=300) == 0, _err(here, "b")
    said = _err(here, "b")
    assert "waiting for run " in said, said
    summary = (here / "b.out").read_text()
    assert summary.count("(0.00 s; complete, same fingerprint)") == 3, summary
    assert _claims_left(out) == []


def test_claims_are_released_on_failure_and_on_ctrl_c(here):
    here, out = here
    # PCA refuses the NaN of this input once it reads it: the run fails after claiming
    failing = _ddr(here, ["--set", f"out={out}", "--set", "data=holes.zarr"], "fail")
    assert failing.wait(timeout=300) == 1, _err(here, "fail")
    assert "run failed" in _err(here, "fail")
    assert _claims_left(out) == []
    # held at its first read, never let go: it is interrupted there
    slow = _ddr(here, ["--set", f"out={out}"], "int", gate=here / "never")
    claim = resolve(out).joinpath("scores.zarr" + CLAIM_SUFFIX)
    _wait_for(claim.exists, 120, "the run to claim its outputs", slow, here)
    assert slow.poll() is None, "the run ended before it was interrupted: nothing was tested"
    slow.send_signal(signal.SIGINT)
    assert slow.wait(timeout=300) == 130, _err(here, "int")
    assert _claims_left(out) == []
