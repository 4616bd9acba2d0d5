"""An object store that stops answering is an error within the documented bound, never a hang
(issue 25, item 4), and a run whose store died keeps its summary.

Real parts only: a loopback socket that accepts connections and never answers, and moto's
S3 server stopped with SIGSTOP (continued in a ``finally``). The bounds are the tests' own,
set the way users set them (``DDR_S3_*``): 1 s to connect, 1 s for an answer, 2 tries, so a
request ends within 2 x 1 s + 0.3 s of back-off (a write: 2 x 2 s, connect + read per try).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dask
import pytest

from ddr.demo import DemoSpec, write_demo_data
from ddr.io import request_bounds
from ddr.io.locations import LocationError, resolve
from ddr.io.request_bounds import StoreNotAnswering
from ddr.pipeline.summary import RunSummary, written_to
from ddr.testing import S3Server, start_s3_server, stop_s3_server

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = {"DDR_S3_CONNECT_TIMEOUT": "1", "DDR_S3_READ_TIMEOUT": "1", "DDR_S3_TRIES": "2"}
#: a request's bound with BOUNDS (2 tries of 1 s, back-off 0.27 s) and room for a busy machine
READ_BOUND = 2 * 1 + 0.27 + 3
#: a write's: each try may also take connect + read to send
WRITE_BOUND = 2 * 2 + 0.27 + 3


class SilentEndpoint:
    """A loopback server that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        #: storage_options that reach it (credentials it never gets to check)
        self.options = {"endpoint_url": self.url, "key": "k", "secret": "s"}
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                conn, _ = self.sock.accept()
                self.accepted.append(conn)  # held open, never read from or written to

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent():
    endpoint = SilentEndpoint()
    try:
        yield endpoint
    finally:
        endpoint.close()


@pytest.fixture
def bounds(monkeypatch):
    for var, value in BOUNDS.items():
        monkeypatch.setenv(var, value)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[S3Server]:
    """This module's own moto server: pausing the session's would stall other tests."""
    found = start_s3_server(tmp_path_factory.mktemp("moto-stalls") / "moto.log")
    try:
        yield found
    finally:
        stop_s3_server(found)


@contextlib.contextmanager
def paused(server: S3Server) -> Iterator[None]:
    """moto's server stopped (SIGSTOP: connections are still accepted by the kernel, never
    answered), continued whatever happens; this process then forgets it went silent."""
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
        request_bounds.answered(server.endpoint)


def _opts(server: S3Server) -> dict[str, str]:
    return {"endpoint_url": server.endpoint, "key": server.key, "secret": server.secret}


# ------------------------------------------------------------------- one request
def test_a_read_from_an_endpoint_that_never_answers_ends_within_the_bound(silent, bounds):
    """One try per connection (botocore does not retry under s3fs; a read is not tried
    5 x 5 times): 2 connections, a TimeoutError naming the URL, the endpoint and the waits.
    Before the fix: 25 x 2 attempts, 125 s with a 2 s read timeout (1 500 s by default)."""
    loc = resolve("s3://bucket/x.zarr/zarr.json", silent.options)
    start = time.monotonic()
    with pytest.raises(TimeoutError) as err:
        loc.read_bytes()
    elapsed = time.monotonic() - start
    assert 2 <= elapsed < READ_BOUND
    assert len(silent.accepted) == 2
    assert str(err.value).startswith(
        f"s3://bucket/x.zarr/zarr.json: the storage endpoint did not answer in time (endpoint "
        f"{silent.url}) while trying to read (2 tries, each 1 s to connect and 1 s for the "
        "answer; "
    )
    # the endpoint is silent now: for read_timeout (1 s) requests fail at once, without a
    # connection; then one gets one try of connect_timeout (1 s)
    start = time.monotonic()
    with pytest.raises(
        TimeoutError, match=r"not asked: it did not answer a request 0\.\d s ago \(2 tries"
    ):
        loc.exists()
    assert time.monotonic() - start < 0.5 and len(silent.accepted) == 2
    time.sleep(1)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"\(1 try of 1 s, as it had not answered\)"):
        loc.exists()
    assert time.monotonic() - start < 1 + 1 and len(silent.accepted) == 3


def test_a_write_to_a_stopped_server_ends_within_the_bound(server, bounds):
    """botocore sends a PUT with ``Expect: 100-continue`` and aiohttp's read timeout starts
    only once the body is sent: before the fix a PUT to a stopped server waited forever."""
    loc = resolve(f"{server.url()}/f.bin", _opts(server))
    loc.write_bytes(b"before")
    with paused(server):
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"while trying to write \(2 tries"):
            loc.write_bytes(b"x" * 1000)
        elapsed = time.monotonic() - start
    assert elapsed < WRITE_BOUND
    assert loc.read_bytes() == b"before"  # the server is back and answers


def test_a_chunk_read_through_zarr_ends_within_the_bound(server, bounds):
    """zarr's store on a location ddr opened reads through the same bounds, and the error
    names the chunk and the endpoint."""
    import zarr

    url = f"{server.url()}/d.zarr"
    with dask.config.set(scheduler="sync"):
        write_demo_data(url, DemoSpec(200, 4, 2, 2, 50, seed=0), storage_options=_opts(server))
    arr = zarr.open_group(resolve(url, _opts(server)).store(), mode="r")["X"]
    with paused(server):
        start = time.monotonic()
        with pytest.raises(StoreNotAnswering) as err:
            arr[:50]
        elapsed = time.monotonic() - start
    assert elapsed < READ_BOUND
    assert str(err.value).startswith(f"GetObject {url}/X/c/0/0: the S3 endpoint {server.endpoint}")
    assert "2 tries, each 1 s to connect and 1 s for the answer" in str(err.value)


def test_the_bounds_travel_with_a_location_and_come_from_the_environment(monkeypatch):
    """A worker waits as long as the client: the bounds resolved from the client's
    environment are pickled with the location; options given win over the environment."""
    for var, value in BOUNDS.items():
        monkeypatch.setenv(var, value)
    loc = resolve("s3://b-1/x", {"config_kwargs": {"read_timeout": 7}})
    opts = loc._options()
    assert opts["tries"] == 2
    assert opts["config_kwargs"] == {
        "connect_timeout": 1.0,
        "read_timeout": 7,
        "retries": {"total_max_attempts": 1},
    }
    sent = pickle.dumps(loc)  # to a worker whose environment has no DDR_S3_*
    for var in BOUNDS:
        monkeypatch.delenv(var)
    assert resolve("s3://b-1/x")._options()["tries"] == 5  # the defaults
    assert pickle.loads(sent)._options() == opts  # as the client resolved them
    monkeypatch.setenv("DDR_S3_TRIES", "1.5")
    with pytest.raises(LocationError, match=r"DDR_S3_TRIES='1.5': expected a positive integer"):
        resolve("s3://b-1/x").store()


def test_an_error_from_a_worker_makes_the_endpoint_silent_in_the_client():
    """The client does not wait a full bound again for an endpoint a worker found silent."""
    endpoint = "http://127.0.0.1:9"  # discard: nothing answers there
    exc = StoreNotAnswering("GetObject s3://b/k: ...", why="2 tries", endpoint=endpoint, quiet=5)
    assert request_bounds.silence(endpoint) is None
    back = pickle.loads(pickle.dumps(exc))
    try:
        assert (str(back), back.why, back.endpoint) == (str(exc), "2 tries", endpoint)
        silent = request_bounds.silence(endpoint)
        assert silent is not None and 4 < silent.left <= 5 and silent.why == "2 tries"
    finally:
        request_bounds.answered(endpoint)


# ------------------------------------------------------------------ the summary
def test_a_summary_its_store_does_not_take_goes_to_a_local_fallback(
    silent, bounds, tmp_path, monkeypatch, caplog
):
    """Written to the working directory, said once (one warning), found by written_to;
    a later write of the same process goes to the same file."""
    monkeypatch.chdir(tmp_path)
    target = resolve("s3://bucket/out/run-summary.json", silent.options)
    summary = RunSummary(pipeline="p", file="p.yaml", status="failed", error="boom")
    with caplog.at_level(logging.WARNING, logger="ddr"):
        where = summary.write(target)
        summary.status = "interrupted"
        again = summary.write(target)
    assert where == again == written_to(target)
    assert where.is_local and Path(where.path).parent == tmp_path
    assert Path(where.path).name.startswith("run-summary.fallback-")
    assert RunSummary.read(where).status == "interrupted"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "could not write the run summary to s3://bucket/out/run-summary.json: the storage "
        f"endpoint did not answer in time (endpoint {silent.url}) while trying to write"
    )
    assert warnings[0].endswith(f"; wrote it to {Path(where.path).name} instead")


def test_a_summary_write_failing_after_every_output_completed_is_one_message(tmp_path):
    """The run succeeded: exit code 0, its outputs complete, one warning naming the local
    fallback file, no traceback (before: a traceback, exit 1)."""
    data = tmp_path / "demo.zarr"
    write_demo_data(data, DemoSpec(300, 5, 2, 2, 100, seed=0))
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "run-summary.json").mkdir()  # a folder where the file should go,
    (tmp_path / "taken" / "run-summary.json" / "kept").write_text("")  # and not an empty one
    args = [
        "run",
        str(ROOT / "pipelines" / "quickstart.yaml"),
        "-c",
        "threads",
        "--no-progress",
        "--set",
        f"data={data}",
        "--set",
        "out=out",
        "--set",
        "k=2",
        "--summary",
        "taken/run-summary.json",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "ddr.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    fallbacks = sorted(tmp_path.glob("run-summary.fallback-*.json"))
    assert len(fallbacks) == 1
    assert json.loads(fallbacks[0].read_text())["status"] == "ok"
    warnings = [line for line in done.stderr.splitlines() if "run summary" in line]
    assert len(warnings) == 1, done.stderr
    prefix = "ddr: warning: could not write the run summary to taken/run-summary.json: "
    assert warnings[0].startswith(prefix) and "Is a directory" in warnings[0]
    assert warnings[0].endswith(f"; wrote it to {fallbacks[0].name} instead")
    assert f"summary: {fallbacks[0].name}" in done.stdout
    assert not [name for name in os.listdir(tmp_path / "taken") if ".tmp-" in name]


# ------------------------------------------------------------------ whole commands
def _env(server_env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **server_env, **BOUNDS}


def test_ddr_inspect_of_an_endpoint_that_never_answers(silent, tmp_path):
    """5 min before the fix; now the first request waits its bound and the rest fail at
    once: exit code 2 (cannot be reached), one message naming the URL and the endpoint."""
    env = _env({"AWS_ENDPOINT_URL": silent.url, "AWS_ACCESS_KEY_ID": "k"})
    env.update(AWS_SECRET_ACCESS_KEY="s", AWS_DEFAULT_REGION="us-east-1")
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ddr.cli", "inspect", "s3://bucket/out/scores.zarr"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    said = "s3://bucket/out/scores.zarr: the storage endpoint did not answer in time (endpoint"
    assert f"{said} {silent.url})" in done.stderr
    assert elapsed < READ_BOUND + 5  # the interpreter's start-up included


def test_ctrl_c_ends_a_command_waiting_on_its_first_request(silent, tmp_path):
    """The main thread's wait for fsspec's IO thread is interruptible: with the default
    bounds (the request would wait 5 x 30 s), SIGINT ends ``ddr inspect`` at once."""
    env = {**os.environ, "AWS_ENDPOINT_URL": silent.url, "AWS_ACCESS_KEY_ID": "k"}
    env.update(AWS_SECRET_ACCESS_KEY="s", AWS_DEFAULT_REGION="us-east-1")
    for var in BOUNDS:
        env.pop(var, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddr.cli", "inspect", "s3://bucket/out/scores.zarr"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while not silent.accepted and time.monotonic() < deadline:  # the request is sent
            time.sleep(0.05)
        assert silent.accepted, "ddr inspect never reached the endpoint"
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert elapsed < 3, err
    assert "Traceback" not in err


def _default_sigint() -> None:
    """A subprocess started from a shell without job control inherits SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def _run_until(server: S3Server, tmp_path: Path, line: str) -> Iterator[tuple]:
    """``ddr run`` of the quickstart on ``server`` (a LocalCluster: workers read the
    chunks), stopped as soon as it logs ``line``: yields the process and its output so far
    (a list that a thread keeps filling)."""
    data = f"{server.url()}/demo.zarr"
    with dask.config.set(scheduler="sync"):
        spec = DemoSpec(20000, 10, 3, 2, 1000, seed=0)
        write_demo_data(data, spec, storage_options=_opts(server))
    args = ["run", str(ROOT / "pipelines" / "quickstart.yaml"), "--no-progress"]
    args += ["--set", f"data={data}", "--set", f"out={server.url('out')}", "--set", "k=2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddr.cli", *args],
        cwd=tmp_path,
        env=_env(server.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_default_sigint,
    )
    output: list[str] = []
    assert proc.stdout is not None
    for got in proc.stdout:
        output.append(got)
        if line in got:
            break
    reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        with paused(server):
            yield proc, output
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(5)


def test_a_run_whose_store_stops_mid_pass_fails_within_the_bound(server, tmp_path):
    """The workers' reads end within the bound and name the chunk; the client, told by
    them, fails its remaining requests at once: the summary goes to a local fallback (said),
    the claims are left to go stale. Before the fix: silent past 500 s (600 s in the
    issue)."""
    with _run_until(server, tmp_path, "pca: one pass over X") as (proc, output):
        start = time.monotonic()
        proc.wait(timeout=60)
        elapsed = time.monotonic() - start
    text = "".join(output)
    assert proc.returncode == 1, text
    assert elapsed < READ_BOUND + 10, text  # + the cluster's shutdown
    assert "Traceback" not in text
    assert (
        "ddr: error: run failed: one-pass statistics of pca: StoreNotAnswering: GetObject" in text
    )
    assert f"the S3 endpoint {server.endpoint} did not answer (2 tries" in text
    fallbacks = sorted(tmp_path.glob("run-summary.fallback-*.json"))
    assert len(fallbacks) == 1, text
    assert json.loads(fallbacks[0].read_text())["status"] == "failed"
    assert f"wrote it to {fallbacks[0].name} instead" in text
    assert f"summary: {fallbacks[0].name}" in text


def test_ctrl_c_ends_a_run_blocked_on_its_store_within_seconds(server, tmp_path):
    """SIGINT while the workers wait on a stopped server: exit code 130 within seconds
    (Ctrl-C was ignored before the fix), the summary kept locally as interrupted."""
    with _run_until(server, tmp_path, "pca: one pass over X") as (proc, output):
        time.sleep(0.5)  # the reads are in flight
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        proc.wait(timeout=60)
        elapsed = time.monotonic() - start
    text = "".join(output)
    assert proc.returncode == 130, text
    assert elapsed < 8, text
    assert "Traceback" not in text
    fallbacks = sorted(tmp_path.glob("run-summary.fallback-*.json"))
    assert len(fallbacks) == 1, text
    assert json.loads(fallbacks[0].read_text())["status"] == "interrupted"
