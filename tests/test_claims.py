"""Claims on outputs (ddr.io.claims), on a local file system and on S3 (moto's server):
taken by one run only, refused naming the holder, waited for, taken over when stale (a dead
process on this host, an old heartbeat) by exactly one of several takers racing in separate
processes, released; writes through a claimed store stop once another run took the output
over, and a run whose output was rewritten by another cannot mark it complete.

The end-to-end tests with a paused ``ddr run`` process are in test_claims_runs.py.
"""

from __future__ import annotations

import errno
import json
import logging
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zarr
from pipeline_support import small_tmpfs

from ddr.io import output_status, write_zarr
from ddr.io.claims import (
    CLAIM_ATTR,
    Claim,
    ClaimError,
    ClaimLost,
    ClaimRecord,
    OutputClaims,
    claim_location,
)
from ddr.io.locations import resolve


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path):
    """Where outputs go: a local folder or a fresh prefix on the S3 endpoint."""
    if request.param == "local":
        return str(tmp_path / "out")
    s3 = request.getfixturevalue("s3")
    return s3.url("out")


def _record(output: str, **changes) -> ClaimRecord:
    base = {
        "output": resolve(output).url,
        "run": "otherrun0001",
        "token": "t" * 32,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_started": _started(os.getpid()),
        "since": "2026-01-01T00:00:00Z",
        "heartbeat": time.time(),
        "timeout": 60.0,
        "command": "ddr run other.yaml",
    }
    return ClaimRecord(**{**base, **changes})


def _started(pid: int) -> float:
    import psutil

    return psutil.Process(pid).create_time()


def _dead_pid() -> tuple[int, float]:
    """The pid and start time of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    started = _started(proc.pid)
    proc.wait()
    return proc.pid, started


def _put(output: str, record: ClaimRecord) -> None:
    """Write a claim record as another run would have left it (a local claim file last
    touched at its heartbeat: its modification time is the heartbeat the holder renews)."""
    where = claim_location(resolve(output))
    where.write_bytes(record.to_bytes())
    if where.is_local:
        os.utime(where.path, (record.heartbeat, record.heartbeat))


def _exists(output: str) -> bool:
    return claim_location(resolve(output)).exists()


# --------------------------------------------------------------------- taking
def test_a_second_claim_is_refused_naming_the_first(where):
    out = resolve(f"{where}/a.zarr")
    with OutputClaims([out], command="ddr run first.yaml") as first:
        assert _exists(where + "/a.zarr")
        with pytest.raises(ClaimError) as err:
            OutputClaims([out]).acquire()
        text = str(err.value)
        assert text.startswith(f"the output {out.shown} is being written by another run: ")
        host, pid = socket.gethostname(), os.getpid()
        assert f"run {first.run} (host {host}, pid {pid}, since 20" in text, text
        assert re.search(r"last heartbeat \d s ago\); wait for it \(ddr run --wait\)", text)
        record = json.loads(claim_location(out).read_bytes())
        assert record["command"] == "ddr run first.yaml" and record["run"] == first.run
    assert not _exists(where + "/a.zarr")  # released
    with OutputClaims([out]):  # free again
        pass


def test_a_refused_run_holds_nothing(where):
    """Claims are taken in order; a run refused on its second output releases its first."""
    a, b = resolve(f"{where}/a.zarr"), resolve(f"{where}/b.zarr")
    with OutputClaims([b]), pytest.raises(ClaimError):
        OutputClaims([a, b]).acquire()
    assert not _exists(f"{where}/a.zarr") and not _exists(f"{where}/b.zarr")


def test_wait_takes_the_claim_once_it_is_released(where, caplog):
    out = resolve(f"{where}/a.zarr")
    first = OutputClaims([out])
    first.acquire()
    threading.Timer(1.5, first.release).start()
    second = OutputClaims([out], wait=True)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="ddr.io.claims"), second:
        assert second.waited and time.monotonic() - started >= 1.4
        record = json.loads(claim_location(out).read_bytes())
        assert record["run"] == second.run
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"waiting for run {first.run} (host ") for m in said), said


def test_wait_is_bounded(where):
    out = resolve(f"{where}/a.zarr")
    with OutputClaims([out]) as first:
        started = time.monotonic()
        with pytest.raises(
            ClaimError,
            match=r"still being written by another run after 1 s, the time it was given to "
            r"wait: run ",
        ):
            OutputClaims([out], wait=1.0).acquire()
        assert time.monotonic() - started < 5
        assert json.loads(claim_location(out).read_bytes())["run"] == first.run


# ------------------------------------------------------------------ takeovers
def test_a_claim_of_a_dead_process_is_taken_over_at_once(where, caplog):
    pid, started = _dead_pid()
    _put(f"{where}/a.zarr", _record(f"{where}/a.zarr", pid=pid, pid_started=started))
    claim = Claim(resolve(f"{where}/a.zarr"), "newrun000001", 4.0)
    with caplog.at_level(logging.WARNING, logger="ddr.io.claims"):
        assert claim.try_acquire() is None
    assert claim.took_over == "otherrun0001"
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"taking over {resolve(where + '/a.zarr').shown} from run otherrun0001" in said
    assert f"its process {pid} on this host is gone" in said
    claim.release()


def test_a_claim_with_an_old_heartbeat_is_taken_over(where, caplog):
    record = _record(f"{where}/a.zarr", host="elsewhere", heartbeat=time.time() - 100, timeout=30)
    _put(f"{where}/a.zarr", record)
    claim = Claim(resolve(f"{where}/a.zarr"), "newrun000001", 4.0)
    with caplog.at_level(logging.WARNING, logger="ddr.io.claims"):
        assert claim.try_acquire() is None
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "its last heartbeat is 100 s old (the claim times out after 30 s)" in said
    claim.release()


def test_an_unreadable_claim_is_stale_after_a_bounded_time(where, caplog, monkeypatch):
    """An empty claim file (what a full disk leaves) or one that is not a claim record is
    waited for a bounded time (a run may be creating it), then taken over, said."""
    monkeypatch.setattr(Claim, "UNREADABLE_AFTER", 0.5)
    for i, content in enumerate([b"", b"\x00garbage{"]):
        out = resolve(f"{where}/a{i}.zarr")
        claim_location(out).write_bytes(content)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="ddr.io.claims"):
            with OutputClaims([out], timeout=4.0) as mine:  # wait=False: no waiting asked
                record = json.loads(claim_location(out).read_bytes())
                assert record["run"] == mine.run
        assert 0.5 <= time.monotonic() - started < 10
        said = " ".join(r.getMessage() for r in caplog.records)
        assert f"taking over {out.shown} from an unreadable claim: it has not been a " in said
        assert "readable claim record for 0.5 s (an empty or damaged file" in said, said
        assert not _exists(out.url)


def test_a_claim_that_cannot_be_written_is_not_left_behind(tmp_path):
    """A full disk: creating the claim fails, and the empty file it began is removed, so
    the next run is not stopped by it."""
    with small_tmpfs(tmp_path / "full", fill=True) as full:
        out = resolve(full / "scores.zarr")
        with pytest.raises(OSError) as err:
            OutputClaims([out]).acquire()
        assert err.value.errno == errno.ENOSPC, err.value
        assert not os.path.lexists(claim_location(out).path)


def _hold_the_lock_paused(output: str, ready) -> None:  # in a separate process
    """Take the claim, enter a write (its shared lock) and stop there (SIGSTOP)."""
    import signal as _signal

    claims = OutputClaims([resolve(output)], timeout=1.0)
    claims.acquire()
    with claims.get(resolve(output)).writing():
        ready.set()
        os.kill(os.getpid(), _signal.SIGSTOP)
    claims.release()


def test_a_paused_writer_holding_the_lock_is_named_not_waited_for(tmp_path):
    """Run A stopped (SIGSTOP) in the middle of a write holds the claim's lock: its claim
    goes stale, but a takeover would let A's write land in B's output, so B (even with
    --wait) stops after a bounded time and names A's process and how to go on."""
    import signal as _signal

    out = str(tmp_path / "a.zarr")
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_the_lock_paused, args=(out, ready))
    holder.start()
    try:
        assert ready.wait(60)
        time.sleep(0.5)
        started = time.monotonic()
        with pytest.raises(ClaimError) as err:
            OutputClaims([resolve(out)], timeout=1.0, wait=True).acquire()
        assert time.monotonic() - started < 15
        text = str(err.value)
        assert "went stale" in text and "cannot be taken over: a write into" in text, text
        assert f"process {holder.pid} on this host holds its lock and is stopped" in text, text
        assert f"kill -CONT {holder.pid}" in text
    finally:
        os.kill(holder.pid, _signal.SIGCONT)
        holder.join(60)
    assert holder.exitcode == 0


def test_a_live_claim_elsewhere_is_not_taken_over(where):
    _put(f"{where}/a.zarr", _record(f"{where}/a.zarr", host="elsewhere", pid=1))
    other = Claim(resolve(f"{where}/a.zarr"), "newrun000001", 60.0).try_acquire()
    assert other is not None and other.run == "otherrun0001"


def test_a_long_write_does_not_stop_the_heartbeat(where):
    """The run holds its claim through a write longer than the claim's timeout (locally:
    the shared lock of the claim): its heartbeat goes on, so no other run takes it over."""
    out = resolve(f"{where}/a.zarr")
    with OutputClaims([out], timeout=2.0) as mine:
        claim = mine.get(out)
        found = []
        with claim.writing():
            time.sleep(3.0)
            look = threading.Thread(
                target=lambda: found.append(Claim(out, "other000001", 2.0).try_acquire())
            )
            look.start()
            look.join(timeout=10)  # a takeover would wait for this write: it must not try
            assert found, "the other run tried to take the claim over"
        other = found[0]
        assert other is not None and other.run == mine.run and other.stale() is None


def _take(output: str, barrier, results) -> None:  # in a separate process
    claim = Claim(resolve(output), f"taker{os.getpid()}", 600.0)
    barrier.wait()
    got = claim.try_acquire() is None
    results.put(got)
    if got:
        time.sleep(3.0)  # hold it (alive) while the others look


def test_of_racing_takers_exactly_one_wins(where, s3_env):
    """Four processes released at once on one stale claim: one takes it over, the others
    find it held (alive)."""
    pid, started = _dead_pid()
    output = f"{where}/a.zarr"
    _put(output, _record(output, pid=pid, pid_started=started))
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_take, args=(output, barrier, results)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(got) == [False, False, False, True], got


@pytest.fixture
def s3_env(where, request):
    """Spawned processes inherit the S3 endpoint's environment (set by the s3 fixture)."""
    if where.startswith("s3://"):
        request.getfixturevalue("s3")
    return where


# -------------------------------------------------------------------- writes
def test_writes_stop_once_the_output_is_taken_over(where):
    """A run whose claim went stale and was taken over can neither write a chunk nor mark
    its output complete; the taker's output is complete and its own."""
    import dask
    import dask.array as da

    out = f"{where}/scores.zarr"
    a = Claim(resolve(out), "runa00000001", 8.0)
    assert a.try_acquire() is None
    ours = np.arange(40.0).reshape(20, 2)
    pending = write_zarr(da.from_array(ours, chunks=(5, 2)), out, compute=False, claim=a)
    attrs = zarr.open_group(resolve(out).store(), mode="r").attrs.asdict()
    assert attrs[CLAIM_ATTR] == a.token and attrs["ddr:status"] == "incomplete"
    # run A stops answering: its heartbeat gets old, and run B takes the output over
    _put(out, _record(out, run=a.run, token=a.token, heartbeat=time.time() - 3600))
    b = Claim(resolve(out), "runb00000001", 8.0)
    assert b.try_acquire() is None and b.took_over == a.run
    theirs = -np.arange(40.0).reshape(20, 2)
    write_zarr(theirs, out, if_exists="overwrite", claim=b, fingerprint="B")
    assert output_status(out) == "complete"
    # A goes on: its chunk writes and its finalize are refused
    time.sleep(a.ttl)  # (object stores: A's last check of its claim has expired)
    with pytest.raises(ClaimLost, match=f"was taken over by run {b.run} "):
        dask.compute(pending.delayed, scheduler="sync")
    with pytest.raises(ClaimLost):
        pending.finalize()
    group = zarr.open_group(resolve(out).store(), mode="r")
    assert group.attrs["ddr:fingerprint"] == "B" and group.attrs[CLAIM_ATTR] == b.token
    np.testing.assert_array_equal(group["data"][...], theirs)
    b.release()
    assert not _exists(out)


def test_a_rewritten_output_is_not_marked_complete(where):
    """Run A's claim still holds, but its output was rewritten meanwhile (its metadata no
    longer carries A's token): A's finalize refuses, leaving the output as it is."""
    import dask

    out = f"{where}/scores.zarr"
    a = Claim(resolve(out), "runa00000001", 60.0)
    assert a.try_acquire() is None
    pending = write_zarr(np.ones((4, 2)), out, compute=False, claim=a)
    dask.compute(pending.delayed, scheduler="sync")
    group = zarr.open_group(resolve(out).store(read_only=False), mode="r+")
    group.attrs[CLAIM_ATTR] = "another-token"
    with pytest.raises(ClaimLost, match="rewritten by another run"):
        pending.finalize()
    assert output_status(out) == "incomplete"
    a.release()


def test_completion_is_conditional_on_the_version_checked(s3):
    """On S3 the completion marker is written over the version of zarr.json that was
    checked: a metadata write in between makes it fail (If-Match)."""
    from ddr.io.claimed_store import ClaimedStore, metadata_version

    out = s3.url("scores.zarr")
    a = Claim(resolve(out), "runa00000001", 60.0)
    assert a.try_acquire() is None
    write_zarr(np.ones((4, 2)), out, claim=a)
    _, version = metadata_version(resolve(out))
    assert version
    store = ClaimedStore(resolve(out).store(read_only=False), a.ref)
    store.expect("zarr.json", version)
    group = zarr.open_group(store, mode="r+")
    # another writer changes zarr.json after the version was read
    zarr.open_group(resolve(out).store(read_only=False), mode="r+").attrs["x"] = 1
    with pytest.raises(ClaimLost, match="rewritten by another run"):
        group.attrs["y"] = 2
    assert "y" not in zarr.open_group(resolve(out).store(), mode="r").attrs
    a.release()


@pytest.mark.parametrize(
    ("run_block", "message"),
    [
        ("{wait: soon}", "run.wait: expected true, false or a time such as 30m; got 'soon'"),
        ("{wait: -5}", "run.wait: expected true, false or a time such as 30m; got -5"),
        ("{claim_timeout: -1}", "run.claim_timeout: expected seconds or a time such as 10m"),
        ("{claim_timeout: forever}", "run.claim_timeout: expected seconds or a time"),
    ],
)
def test_bad_claim_options_are_refused_at_their_place(tmp_path, run_block, message):
    from ddr.config.errors import PipelineError
    from ddr.demo import DemoSpec, write_demo_data
    from ddr.pipeline import plan_pipeline

    write_demo_data(tmp_path / "d.zarr", DemoSpec(100, 4, 2, 2, 50))
    path = tmp_path / "p.yaml"
    path.write_text(
        f"ddr: 1\nname: x\ninputs:\n  X: {{path: {tmp_path}/d.zarr, array: X}}\nsteps:\n"
        "  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}\noutputs:\n"
        "  - {kind: metrics, from: [pca.explained_variance_], path: out/m.json}\n"
        f"run: {run_block}\n"
    )
    with pytest.raises(PipelineError) as err:
        plan_pipeline(path)
    assert f"{path}:9:" in str(err.value) and message in str(err.value), str(err.value)


def test_takeovers_of_several_outputs_wait_for_writes_in_flight_once(s3, caplog):
    """--resume after a killed run on S3: every stale claim is taken over, and the wait for
    the old run's writes in flight (twice a check's lifetime plus 2 s) is made once for the
    run, not once per output (8 outputs took 58-74 s)."""
    pid, started = _dead_pid()
    outputs = [s3.url(f"many/o{i}.zarr") for i in range(4)]
    for out in outputs:
        _put(out, _record(out, pid=pid, pid_started=started))
    claims = OutputClaims([resolve(o) for o in outputs], timeout=8.0)
    grace = claims.claims[0].grace
    began = time.monotonic()
    with caplog.at_level(logging.INFO, logger="ddr.io.claims"), claims:
        took = time.monotonic() - began
        assert all(c.took_over == "otherrun0001" for c in claims.claims)
    assert grace <= took < grace + 3.0, (took, grace)
    said = [r.getMessage() for r in caplog.records]
    assert any(
        m.startswith("waiting ") and "writes in flight of the runs taken over" in m for m in said
    ), said
