"""``kind: slurm``: dask-jobqueue's ``SLURMCluster``.

Before submitting, ``sinfo`` says whether the partition exists and whether any of its nodes
has the CPUs and memory one job asks for (the job script's ``--cpus-per-task`` and ``--mem``);
if none has, the run stops before anything is submitted or written. While jobs pend,
``squeue`` gives each job's state and reason; a reason that means the job can never start as
submitted (``PartitionConfig``, ``PartitionTimeLimit``, a per-job limit of the account or
QOS, ...) or a job that ended before its workers joined is an error.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ddr.cluster.backend import ClusterError, JobState
from ddr.cluster.jobqueue import JobQueue, batch_command
from ddr.cluster.kinds import register_backend

__all__ = ["SLURM"]

_PACKAGE = (
    "SLURM's client commands (Debian/Ubuntu: apt-get install slurm-client; on a cluster, "
    "load your site's slurm module)"
)
#: squeue reasons under which a job never starts as submitted (squeue(1), JOB REASON CODES)
NEVER = {
    "PartitionConfig",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "BadConstraints",
    "InvalidAccount",
    "InvalidQOS",
    "DependencyNeverSatisfied",
}
_PER_JOB_LIMIT = re.compile(r"(Assoc|QOS)Max\w*Per(Job|Node)\w*")
#: job states after which a job gives no more workers
ENDED = {
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT",
}  # fmt: skip
_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}


def _mib(value: str) -> float:
    """SLURM's memory size (``30G``, ``3815M``, ``4000`` MB) in MiB."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)B?", value.strip().upper())
    if m is None:
        raise ClusterError(f"cannot read the job's memory request {value!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "M"]


@register_backend
class SLURM(JobQueue):
    """``dask_jobqueue.SLURMCluster(**block)``."""

    kind = "slurm"
    target = "dask_jobqueue.SLURMCluster"
    example: ClassVar[dict[str, Any]] = {
        "queue": "debug",
        "cores": 2,
        "memory": "4GB",
        "walltime": "00:10:00",
    }
    cluster_class = "SLURMCluster"
    directive = "#SBATCH"
    commands: ClassVar[dict[str, str]] = {
        "sbatch": _PACKAGE,
        "squeue": _PACKAGE,
        "scancel": _PACKAGE,
        "sinfo": _PACKAGE,
    }
    _own_keywords: ClassVar[set[str]] = {
        "queue",
        "project",
        "account",
        "walltime",
        "job_cpu",
        "job_mem",
    }

    def _request(self) -> tuple[str | None, int, float, str | None]:
        """Partition (None: the default), CPUs, memory (MiB) and time limit of one job."""
        asked = dict(self.directives())
        partition = asked.get("-p") or asked.get("--partition")
        cpus = int(asked.get("--cpus-per-task", 1))
        mem = _mib(asked["--mem"]) if "--mem" in asked else 0.0
        return partition, cpus, mem, asked.get("-t") or asked.get("--time")

    def asks(self) -> str:
        partition, cpus, mem, time = self._request()
        where = f"partition {partition}" if partition else "the default partition"
        limit = f" for {time}" if time else ""
        return f"{cpus} CPUs and {mem:.0f} MiB on {where}{limit}"

    def check_nodes(self) -> None:
        partition, cpus, mem, _ = self._request()
        if partition is None:
            names = batch_command(["sinfo", "-h", "-o", "%P"]).split()
            default = [p.rstrip("*") for p in names if p.endswith("*")]
            if not default:
                raise ClusterError("the job names no partition and SLURM has no default one")
            partition = default[0]
        out = batch_command(["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%c|%m"])
        nodes = []
        for line in out.splitlines():
            name, c, m = line.strip().split("|")
            nodes.append((name, int(c.rstrip("+")), float(m.rstrip("+"))))
        if not nodes:
            names = sorted(
                {p.rstrip("*") for p in batch_command(["sinfo", "-h", "-o", "%P"]).split()}
            )
            raise ClusterError(
                f"SLURM has no partition {partition!r} (sinfo lists: {', '.join(names)}); "
                "choose one with --cluster-set queue=NAME"
            )
        if not any(c >= cpus and m >= mem for _, c, m in nodes):
            most_cpus = max(c for _, c, _ in nodes)
            most_mem = max(m for _, _, m in nodes)
            raise ClusterError(
                f"no node of partition {partition} can run a job of {cpus} CPUs and "
                f"{mem:.0f} MiB: its {len(nodes)} node(s) have at most {most_cpus} CPUs and "
                f"{most_mem:.0f} MiB (sinfo); ask for less per job (--cluster-set "
                "slurm.cores=N --cluster-set slurm.processes=N --cluster-set slurm.memory=SIZE) "
                "or choose another queue"
            )

    def job_states(self, job_ids: list[str]) -> list[JobState]:
        out = batch_command(
            ["squeue", "-h", "--states=all", "-j", ",".join(job_ids), "-o", "%i|%T|%r"],
            check=False,  # squeue fails on ids it has already forgotten
        )
        states = []
        for line in out.splitlines():
            job_id, state, reason = [*line.strip().split("|"), "", ""][:3]
            reason = "" if reason == "None" else reason
            never = reason in NEVER or bool(_PER_JOB_LIMIT.fullmatch(reason))
            if state in ENDED:
                never, reason = True, f"ended before its workers joined; {reason or 'see its log'}"
            if state != "RUNNING" or never:
                states.append(JobState(job_id, state, reason, never))
        return states
