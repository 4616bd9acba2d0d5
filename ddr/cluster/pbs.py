"""``kind: pbs``: dask-jobqueue's ``PBSCluster`` (PBS Pro, OpenPBS, Torque).

While jobs wait, ``qstat -f`` gives each job's state and the scheduler's comment; PBS Pro's
``Can Never Run`` comment is an error. No node sizes are checked before submitting (the
output of ``pbsnodes`` differs between PBS flavours); the scheduler's comment says it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ddr.cluster.backend import JobState
from ddr.cluster.jobqueue import JobQueue, batch_command
from ddr.cluster.kinds import register_backend

__all__ = ["PBS", "parse_qstat"]

_PACKAGE = "PBS's client commands (OpenPBS/PBS Pro or Torque; on a cluster, your site's pbs module)"
_STATES = {
    "Q": "QUEUED",
    "H": "HELD",
    "W": "WAITING",
    "T": "MOVING",
    "R": "RUNNING",
    "E": "EXITING",
    "F": "FINISHED",
    "C": "COMPLETED",
}


def parse_qstat(text: str) -> list[JobState]:
    """The jobs in ``qstat -f`` output that have not given their workers (not running)."""
    jobs: list[JobState] = []
    fields: dict[str, str] = {}
    job_id = None

    def flush() -> None:
        if job_id is None:
            return
        state = _STATES.get(fields.get("job_state", ""), fields.get("job_state", "?"))
        comment = fields.get("comment", "")
        never = comment.startswith("Can Never Run") or state in ("FINISHED", "COMPLETED")
        if state != "RUNNING" or never:
            jobs.append(JobState(job_id, state, comment, never))

    key = None
    for line in text.splitlines():
        if line.startswith("Job Id:"):
            flush()
            job_id, fields, key = line.split(":", 1)[1].strip(), {}, None
        elif " = " in line and line.startswith("    "):
            key, _, value = line.strip().partition(" = ")
            fields[key] = value
        elif key is not None and line.startswith("\t"):  # a long value continues
            fields[key] += line.strip()
    flush()
    return jobs


@register_backend
class PBS(JobQueue):
    """``dask_jobqueue.PBSCluster(**block)``."""

    kind = "pbs"
    target = "dask_jobqueue.PBSCluster"
    example: ClassVar[dict[str, Any]] = {
        "queue": "workq",
        "cores": 2,
        "memory": "4GB",
        "walltime": "00:10:00",
    }
    cluster_class = "PBSCluster"
    directive = "#PBS"
    commands: ClassVar[dict[str, str]] = {"qsub": _PACKAGE, "qstat": _PACKAGE, "qdel": _PACKAGE}
    _own_keywords: ClassVar[set[str]] = {"queue", "project", "account", "resource_spec", "walltime"}

    def asks(self) -> str:
        asked = [v for flag, v in self.directives() if flag in ("-l", "-q")]
        return ", ".join(asked)

    def job_states(self, job_ids: list[str]) -> list[JobState]:
        return parse_qstat(batch_command(["qstat", "-f", *job_ids], check=False))
