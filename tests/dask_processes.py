"""A ``dask scheduler`` and ``dask worker`` processes on loopback, for tests that need real
separate processes (worker loss: killed by pid), torn down by pid when the test ends."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

DASK = str(Path(sys.executable).parent / "dask")
PRELOAD = str(Path(__file__).resolve().parent / "worker_delay.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DaskProcesses:
    """One scheduler and ``len(worker_args)`` workers of one thread each.

    Parameters
    ----------
    logs : Path
        Where the processes' output goes.
    worker_args : list of list of str
        Extra command-line arguments of each worker (``--no-nanny``, ``--lifetime 3s``, ...).
    chunk_delay : float
        Seconds each chunk read takes longer in the workers (``tests/worker_delay.py``).
    """

    def __init__(self, logs: Path, worker_args: list[list[str]], chunk_delay: float = 0.0):
        self.logs = logs
        self.worker_args = worker_args
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        self.env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "DDR_TEST_CHUNK_DELAY": str(chunk_delay),
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        self.procs: list[subprocess.Popen] = []

    def _spawn(self, name: str, args: list[str]) -> None:
        out = (self.logs / f"{name}.log").open("w")
        # a session of its own: stop() can end a nanny together with its worker process
        self.procs.append(
            subprocess.Popen(
                [DASK, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        )

    def start(self) -> DaskProcesses:
        port = self.address.rsplit(":", 1)[1]
        self._spawn(
            "scheduler", ["scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard"]
        )
        for extra in self.worker_args:
            self.add_worker(extra)
        self.wait_for_workers(len(self.worker_args))
        return self

    def client(self, timeout: str = "10s"):
        from distributed import Client

        return Client(self.address, timeout=timeout, set_as_default=False)

    def add_worker(self, extra: list[str]) -> None:
        """Start one more worker (``extra``: its command-line arguments)."""
        i = sum(1 for p in self.procs) - 1  # the scheduler is the first process
        self._spawn(
            f"worker{i}",
            [
                "worker", self.address, "--nthreads", "1", "--memory-limit", "2GiB",
                "--no-dashboard", "--name", f"w{i}", "--local-directory",
                str(self.logs / f"w{i}"), "--preload", PRELOAD, *extra,
            ],
        )  # fmt: skip

    def wait_for_workers(self, n: int, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.client("5s") as c:
                    c.wait_for_workers(n, timeout=max(1.0, deadline - time.monotonic()))
                return
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def worker_pids(self) -> dict[str, int]:
        """Worker address -> pid of the worker process (not its nanny)."""
        with self.client() as c:
            return c.run(os.getpid)

    def stop(self) -> None:
        """SIGTERM to every process, then SIGKILL to the process group of any still alive
        after 5 s (a nanny whose worker was killed in a test can take 30 s to close: nothing
        here needs a graceful close)."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 5.0
        for p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@contextlib.contextmanager
def dask_processes(
    logs: Path, worker_args: list[list[str]], chunk_delay: float = 0.0
) -> Iterator[DaskProcesses]:
    procs = DaskProcesses(logs, worker_args, chunk_delay)
    try:
        yield procs.start()
    finally:
        procs.stop()


def kill(pid: int) -> None:
    """kill -9 ``pid``."""
    os.kill(pid, signal.SIGKILL)
