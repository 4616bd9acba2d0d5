"""``kind: lsf``: workers as IBM Spectrum LSF jobs, through dask-jobqueue's ``LSFCluster``.

While jobs pend, ``bjobs`` gives each job's state and pending reason.
"""

from __future__ import annotations

from typing import ClassVar

from ddr.cluster.backend import JobState
from ddr.cluster.jobqueue import JobQueue, batch_command

__all__ = ["LSF", "parse_bjobs"]

_PACKAGE = "LSF's client commands (on a cluster, your site's lsf module or profile.lsf)"


def parse_bjobs(text: str) -> list[JobState]:
    """The jobs in ``bjobs -noheader -o "jobid stat pend_reason"`` output that are not
    running."""
    jobs = []
    for line in text.splitlines():
        job_id, _, rest = line.strip().partition(" ")
        state, _, reason = rest.strip().partition(" ")
        if job_id and state and state != "RUN":
            jobs.append(JobState(job_id, state, reason.strip(), state in ("EXIT", "DONE")))
    return jobs


class LSF(JobQueue):
    """``dask_jobqueue.LSFCluster(**block)``."""

    kind = "lsf"
    target = "dask_jobqueue.LSFCluster"
    cluster_class = "LSFCluster"
    directive = "#BSUB"
    example: ClassVar[dict[str, object]] = {
        "queue": "normal", "cores": 2, "memory": "4GB", "walltime": "00:10",
    }  # fmt: skip
    commands: ClassVar[dict[str, str]] = {"bsub": _PACKAGE, "bjobs": _PACKAGE, "bkill": _PACKAGE}
    _own_keywords: ClassVar[set[str]] = {
        "queue", "project", "walltime", "ncpus", "mem", "use_stdin", "lsf_units",
    }  # fmt: skip

    def asks(self) -> str:
        return ", ".join(f"{flag} {value}" for flag, value in self.directives() if flag != "-J")

    def job_states(self, job_ids: list[str]) -> list[JobState]:
        out = batch_command(
            ["bjobs", "-noheader", "-o", "jobid stat pend_reason", *job_ids], check=False
        )
        return parse_bjobs(out)
