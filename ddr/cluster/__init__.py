"""Cluster configs: a YAML file -> a running dask scheduler for ``ddr run``.

A cluster config names a backend and passes its keyword arguments verbatim::

    ddr-cluster: 1
    kind: slurm                # local | address | slurm | pbs | kubernetes | threads | sync
    slurm:                     # dask_jobqueue.SLURMCluster(**this)
      cores: 8
      memory: 32GB
      processes: 4
      walltime: "01:00:00"
    scale: {jobs: 4}           # cluster.scale(jobs=4) (or {n: workers}); or adapt: {...}
    wait_for_workers: 1        # and wait_timeout: 10m
    dask:                      # set in the client AND exported to every worker
      distributed.worker.memory.target: 0.6

``local`` is a :class:`distributed.LocalCluster` (the default when no config is named, sized
by dask to this machine's cores and memory), ``address`` a :class:`distributed.Client` to an
existing scheduler (``address:`` or ``scheduler_file:``), ``slurm``/``pbs``
dask-jobqueue's ``SLURMCluster``/``PBSCluster`` (the ``hpc`` extra), ``kubernetes`` the
dask-kubernetes operator's ``KubeCluster`` (the ``k8s`` extra), ``threads``/``sync`` dask's
local schedulers in this process. Each kind is one class (:mod:`ddr.cluster.kinds`); optional
backends are imported only when used.

Configs are validated like pipelines (``file:line:col: message``, unknown keyword names
listed against the backend's own), take ``params`` with ``${params.x}`` and ``--cluster-set``
overrides, and ``ddr run --dry-run`` prints what would be started (the SLURM/PBS job script)
and writes nothing. Starting checks what can be checked first (commands on ``PATH``, a node
that can run the job), waits for workers with reports and a bound, and reports workers lost
or retired during the run; see :func:`cluster_client`. Everything is reported through the
``ddr.cluster`` logger.

Every worker keeps one BLAS thread per dask thread: ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` default to 1 in the environment local
workers inherit (and distributed's nannies set them too); the shipped SLURM, PBS and
Kubernetes configs export them in the job script / pod environment.
"""

# the shipped backends register themselves (ddr.cluster.kinds), in the order messages list
# them, before the config schema is built from the registry
from ddr.cluster import local, address, slurm, pbs, kubernetes, inline  # noqa: I001, F401
from ddr.cluster.backend import BLAS_THREAD_VARS, ClusterError, ClusterHandle, JobState
from ddr.cluster.config import (
    BUILTIN,
    ClusterConfig,
    json_schema,
    load_cluster_config,
    validate_cluster,
)
from ddr.cluster.events import WorkerEvents
from ddr.cluster.session import backend_for, cluster_client, dry_run
from ddr.cluster.worker_env import worker_environment

__all__ = [
    "BLAS_THREAD_VARS",
    "BUILTIN",
    "ClusterConfig",
    "ClusterError",
    "ClusterHandle",
    "JobState",
    "WorkerEvents",
    "backend_for",
    "cluster_client",
    "dry_run",
    "json_schema",
    "load_cluster_config",
    "validate_cluster",
    "worker_environment",
]
