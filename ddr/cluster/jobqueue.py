"""Batch systems through dask-jobqueue: what SLURM and PBS share.

Each batch job runs ``processes`` dask workers started by the job script. ddr adds to the
script what the workers need and would otherwise not get:

- the config's ``dask:`` block, exported as ``DASK_*`` variables before the workers start
  (:mod:`ddr.cluster.worker_env`), so ``distributed.worker.memory.target`` and the like hold in
  every worker, not only in the client;
- a fallback for a ``local_directory`` that names a shell variable: ``$TMPDIR`` becomes
  ``${TMPDIR:-/tmp}``, because on a node without ``TMPDIR`` dask's worker would be given an
  empty ``--local-directory``.

Before submitting, the submit command must be on ``PATH`` (else an error naming the package
that provides it) and the batch system is asked whether any node can run the job at all
(:meth:`JobQueue.check_nodes`). While jobs wait, :meth:`JobQueue.job_states` says why.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any, ClassVar

from ddr.cluster.backend import ClusterError, ClusterHandle, JobState, call_text, params_of
from ddr.cluster.deployed import Deployed
from ddr.cluster.worker_env import export_lines, worker_environment

__all__ = ["JobQueue", "batch_command"]

#: seconds a batch command (sinfo, squeue, qstat) may take before ddr gives up on it
COMMAND_TIMEOUT = 30.0

# keyword names of dask-jobqueue 0.9, to validate configs where it is not installed
_CLUSTER_KEYWORDS = {
    "n_workers", "security", "shared_temp_directory", "silence_logs", "name",
    "dashboard_address", "host", "scheduler_options", "scheduler_cls", "interface", "protocol",
    "config_name",
}  # fmt: skip
_JOB_KEYWORDS = {
    "cores", "memory", "processes", "nanny", "protocol", "security", "interface",
    "death_timeout", "local_directory", "extra", "worker_command", "worker_extra_args",
    "job_extra", "job_extra_directives", "env_extra", "job_script_prologue", "header_skip",
    "job_directives_skip", "log_directory", "shebang", "python", "job_name", "config_name",
}  # fmt: skip

_SHELL_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_MEMORY_LIMIT = re.compile(r"--memory-limit[ =](\S+)")


def batch_command(args: list[str], *, check: bool = True) -> str:
    """Run a batch system's command and return its output.

    Raises
    ------
    ClusterError
        The command failed (when ``check``) or took longer than :data:`COMMAND_TIMEOUT`
        seconds.
    """
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise ClusterError(
            f"`{' '.join(args)}` did not answer within {COMMAND_TIMEOUT:g} s "
            "(is the batch system's controller up?)"
        ) from None
    if check and done.returncode != 0:
        raise ClusterError(
            f"`{' '.join(args)}` failed (exit {done.returncode}): {done.stderr.strip()}"
        )
    return done.stdout


class JobQueue(Deployed):
    """A dask-jobqueue cluster: subclasses name the cluster class and the batch commands."""

    cluster_class: ClassVar[str]  # e.g. "SLURMCluster"
    #: commands the backend runs, each with the package that provides it
    commands: ClassVar[dict[str, str]]
    waits = True
    needs_block = True
    _own_keywords: ClassVar[set[str]] = set()

    # ------------------------------------------------------------ validation
    @classmethod
    def keywords(cls) -> set[str]:
        try:
            import dask_jobqueue
            from dask_jobqueue.core import Job, JobQueueCluster
        except ImportError:
            return _CLUSTER_KEYWORDS | _JOB_KEYWORDS | cls._own_keywords
        job = getattr(dask_jobqueue, cls.cluster_class).job_cls
        names = params_of(JobQueueCluster.__init__, job.__init__, Job.__init__)
        return names - {"job_cls", "loop", "asynchronous", "scheduler"}

    # ----------------------------------------------------------- job script
    def _cluster_type(self) -> Any:
        try:
            import dask_jobqueue
        except ImportError:
            raise ClusterError(
                f"kind {self.kind} needs dask-jobqueue: pip install 'ddr-stats[hpc]'"
            ) from None
        return getattr(dask_jobqueue, self.cluster_class)

    def cluster_kwargs(self) -> dict[str, Any]:
        """The block's keywords with the workers' environment and directory fallback added."""
        kwargs = dict(self.kwargs)
        prologue = export_lines(worker_environment(self.config.dask))
        kwargs["job_script_prologue"] = prologue + list(kwargs.get("job_script_prologue") or [])
        local = kwargs.get("local_directory")
        if isinstance(local, str):
            kwargs["local_directory"] = _SHELL_VAR.sub(
                lambda m: "${" + (m.group(1) or m.group(2)) + ":-/tmp}", local
            )
        return kwargs

    def job_script(self) -> str:
        """The job script one job would run, made without creating ``log_directory``
        (dask-jobqueue creates it when a job object is made; a dry run writes nothing)."""
        cls = self._cluster_type()
        from dask_jobqueue.core import Job

        kwargs = self.cluster_kwargs()
        job_kwargs = {
            k: v for k, v in kwargs.items() if k in params_of(cls.job_cls.__init__, Job.__init__)
        }
        log_dir = job_kwargs.get("log_directory")
        with tempfile.TemporaryDirectory(prefix="ddr-dry-run-") as tmp:
            if log_dir is not None:
                job_kwargs["log_directory"] = os.path.join(tmp, "logs")
            job = cls.job_cls(
                scheduler="tcp://<scheduler-address>:8786", name="ddr-worker", **job_kwargs
            )
            script = job.job_script()
            if log_dir is not None:
                script = script.replace(job_kwargs["log_directory"], str(log_dir))
        return script

    def dry_run(self) -> str:
        try:
            script = self.job_script()
        except ClusterError:
            return (
                f"# dask-jobqueue is not installed (pip install 'ddr-stats[hpc]'); it would be "
                f"called as\n{call_text('dask_jobqueue.' + self.cluster_class, self.kwargs)}"
            )
        scale = self.config.scale.model_dump(exclude_none=True) if self.config.scale else {}
        return f"# {self.cluster_class}: job script (scale: {scale or 'none'})\n{script}"

    # -------------------------------------------------------------- running
    def preflight(self) -> None:
        self._cluster_type()
        for command, package in self.commands.items():
            if shutil.which(command) is None:
                raise ClusterError(
                    f"{command} not found on PATH: kind {self.kind} submits and watches the "
                    f"workers' jobs with {', '.join(self.commands)}; {command} is provided by "
                    f"{package}"
                )
        self.check_nodes()

    def worker_memory_limit(self) -> int | None:
        """The ``--memory-limit`` the job script gives each worker (the job's ``memory``
        shared by its ``processes``)."""
        from dask.utils import parse_bytes

        try:
            found = _MEMORY_LIMIT.search(self.job_script())
            return parse_bytes(found.group(1)) if found else None
        except (ClusterError, ValueError, TypeError):  # no script: start() will say why
            return None

    def check_nodes(self) -> None:
        """Raise :class:`ClusterError` when no node of the queue can ever run one job."""

    def make_cluster(self) -> Any:
        return self._cluster_type()(**self.cluster_kwargs())

    @contextlib.contextmanager
    def start(self) -> Iterator[ClusterHandle]:
        log_dir = self.kwargs.get("log_directory")
        made = log_dir is not None and not os.path.exists(str(log_dir))
        try:
            with super().start() as handle:
                yield handle
        finally:
            if made:  # dask-jobqueue made it; no job wrote to it: leave nothing behind
                with contextlib.suppress(OSError):
                    os.rmdir(str(log_dir))

    def pending_jobs(self, cluster: Any) -> list[JobState]:
        ids = [str(job.job_id) for job in cluster.workers.values() if getattr(job, "job_id", None)]
        return self.job_states(ids) if ids else []

    def job_states(self, job_ids: list[str]) -> list[JobState]:
        """The batch system's view of ``job_ids`` (jobs it no longer lists are omitted)."""
        return []

    def directives(self) -> list[tuple[str, str]]:
        """The job script's directives as (flag, value), e.g. ``("--cpus-per-task", "8")``,
        ``("-p", "normal")``: what the batch system will be asked for."""
        prefix = self.directive + " "
        out = []
        for line in self.job_script().splitlines():
            if line.startswith(prefix):
                flag, _, value = line[len(prefix) :].strip().partition(" ")
                if "=" in flag and flag.startswith("--") and not value:
                    flag, _, value = flag.partition("=")
                out.append((flag, value.strip()))
        return out

    #: how the job script's directive lines start (``#SBATCH``, ``#PBS``)
    directive: ClassVar[str] = "#"
