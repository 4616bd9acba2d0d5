"""A one-node SLURM on loopback for the tests: Debian's slurm-wlm with munge, run as root.

:class:`LocalSlurm` starts its own ``munged`` (own key and socket, so it shares nothing with
a munge the machine may run), ``slurmctld`` and ``slurmd`` on free ports, with a config in a
temporary directory, and waits until the node is idle. Two partitions: ``debug`` (the
default, no time limit) and ``short`` (jobs of at most one minute, for the tests of jobs that
can never start). The daemons are stopped by their pids when the tests end.

Install with ``apt-get install slurm-wlm munge`` (``.ci/run`` does it where it can).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil

SBIN = os.pathsep.join(["/usr/sbin", "/sbin"])
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scancel")


def missing() -> str | None:
    """Why a local SLURM cannot start here, or None."""
    path = os.environ.get("PATH", "") + os.pathsep + SBIN
    absent = [c for c in (*DAEMONS, *CLIENTS) if shutil.which(c, path=path) is None]
    if absent:
        return (
            f"SLURM is not installed ({', '.join(absent)} missing): apt-get install "
            "slurm-wlm munge (.ci/run does it)"
        )
    if os.geteuid() != 0:
        return "a one-node SLURM on loopback needs root (slurmd runs the jobs)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalSlurm:
    """slurmctld + slurmd + munged in ``root``; ``env`` holds ``SLURM_CONF`` for clients."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        self.memory_mb = int(psutil.virtual_memory().total / 2**20 * 0.5)
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.env["PATH"] = self.env.get("PATH", "") + os.pathsep + SBIN

    def _write_conf(self) -> None:
        r = self.root
        self.conf.write_text(
            f"""\
ClusterName=ddrtest{os.getpid()}
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
AuthInfo=socket={r}/munge/socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ReturnToService=2
MpiDefault=none
SchedulerParameters=sched_interval=2
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.memory_mb} State=UNKNOWN
PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes={self.host} MaxTime=1 State=UP
"""
        )

    def _run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def start(self) -> LocalSlurm:
        r = self.root
        for sub in ("spool", "state", "log", "munge"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        (r / "munge").chmod(0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._write_conf()
        m = r / "munge"
        self._run(
            "munged", "--force", f"--socket={m}/socket", f"--key-file={key}",
            f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log",
            f"--seed-file={m}/munged.seed",
        )  # fmt: skip
        self._run("slurmctld", "-f", str(self.conf))
        self._run("slurmd", "-f", str(self.conf))
        deadline = time.monotonic() + 60
        while "idle" not in self._run("sinfo", "-h", "-p", "debug", "-o", "%T", check=False):
            if time.monotonic() > deadline:
                log = (r / "log" / "slurmctld.log").read_text()[-2000:]
                raise RuntimeError(f"the SLURM node did not become idle in 60 s:\n{log}")
            time.sleep(0.5)
        return self

    def cancel_all(self) -> None:
        self._run("scancel", "--full", "-u", "root", check=False)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.cancel_all()
        for pidfile in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            path = self.root / pidfile
            with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
                pid = int(path.read_text().split()[0])
                os.kill(pid, signal.SIGTERM)
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).wait(timeout=20)
