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
    dask:                      # dask.config.set(...) while the cluster runs
      distributed.worker.memory.target: 0.6

``local`` is a :class:`distributed.LocalCluster` (the default when no config is named, sized
by dask to this machine's cores and memory), ``address`` a :class:`distributed.Client` to an
existing scheduler (``address:`` or ``scheduler_file:``), ``slurm``/``pbs``
dask-jobqueue's ``SLURMCluster``/``PBSCluster`` (the ``hpc`` extra), ``kubernetes`` the
dask-kubernetes operator's ``KubeCluster`` (the ``k8s`` extra), ``threads``/``sync`` dask's
local schedulers in this process. Optional backends are imported only when used.

Configs are validated like pipelines (``file:line:col: message``, unknown keyword names
listed against the backend's own), take ``params`` with ``${params.x}`` and ``--set``
overrides, and ``ddr run --dry-run`` prints what would be started (the SLURM/PBS job script).

Every worker keeps one BLAS thread per dask thread: ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` default to 1 in the environment local
workers inherit (and distributed's nannies set them too); the shipped SLURM, PBS and
Kubernetes configs export them in the job script / pod environment.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from ddr.config.document import Document, load_document
from ddr.config.errors import Location, PipelineError, Problem
from ddr.config.validation import validate

__all__ = [
    "BUILTIN",
    "BLAS_THREAD_VARS",
    "ClusterConfig",
    "cluster_client",
    "dry_run",
    "load_cluster_config",
]

Kind = Literal["local", "address", "slurm", "pbs", "kubernetes", "threads", "sync"]
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

# Keyword names of the optional backends (dask-jobqueue 0.9, dask-kubernetes 2024+ operator),
# used to validate configs when the backend is not installed; when it is, its own signatures
# are read instead.
_JOBQUEUE_CLUSTER = (
    "n_workers",
    "security",
    "shared_temp_directory",
    "silence_logs",
    "name",
    "dashboard_address",
    "host",
    "scheduler_options",
    "scheduler_cls",
    "interface",
    "protocol",
    "config_name",
)
_JOB = (
    "cores",
    "memory",
    "processes",
    "nanny",
    "protocol",
    "security",
    "interface",
    "death_timeout",
    "local_directory",
    "extra",
    "worker_command",
    "worker_extra_args",
    "job_extra",
    "job_extra_directives",
    "env_extra",
    "job_script_prologue",
    "header_skip",
    "job_directives_skip",
    "log_directory",
    "shebang",
    "python",
    "job_name",
    "config_name",
)
_SLURM = ("queue", "project", "account", "walltime", "job_cpu", "job_mem")
_PBS = ("queue", "project", "account", "resource_spec", "walltime")
_KUBE = (
    "name",
    "namespace",
    "image",
    "n_workers",
    "resources",
    "env",
    "worker_command",
    "port_forward_cluster_ip",
    "create_mode",
    "shutdown_on_close",
    "idle_timeout",
    "resource_timeout",
    "scheduler_service_type",
    "custom_cluster_spec",
    "scheduler_forward_port",
    "jupyter",
    "quiet",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Scale(_Strict):
    """``cluster.scale(...)``: a number of workers or of batch jobs."""

    n: PositiveInt | None = Field(None, description="Workers.")
    jobs: PositiveInt | None = Field(None, description="Batch jobs (SLURM/PBS).")


class Adapt(_Strict):
    """``cluster.adapt(...)``: adaptive scaling between bounds."""

    minimum: int | None = None
    maximum: int | None = None
    minimum_jobs: int | None = None
    maximum_jobs: int | None = None


class ClusterConfig(_Strict):
    """A ddr cluster config file."""

    ddr_cluster: Literal[1] = Field(alias="ddr-cluster", description="Schema version (1).")
    kind: Kind
    description: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    local: dict[str, Any] | None = Field(None, description="distributed.LocalCluster kwargs.")
    address: dict[str, Any] | None = Field(None, description="distributed.Client kwargs.")
    slurm: dict[str, Any] | None = Field(None, description="dask_jobqueue.SLURMCluster kwargs.")
    pbs: dict[str, Any] | None = Field(None, description="dask_jobqueue.PBSCluster kwargs.")
    kubernetes: dict[str, Any] | None = Field(
        None, description="dask_kubernetes.operator.KubeCluster kwargs."
    )
    scale: Scale | None = None
    adapt: Adapt | None = None
    wait_for_workers: int = Field(
        0, ge=0, description="Wait until this many workers joined before running."
    )
    dask: dict[str, Any] = Field(
        default_factory=dict, description="dask.config keys (dotted) set while the run lasts."
    )

    @property
    def backend_kwargs(self) -> dict[str, Any]:
        block = getattr(self, self.kind, None) if self.kind not in ("threads", "sync") else None
        return dict(block or {})


#: built-in configs usable by name: ``--cluster local`` (the default), ``threads``, ``sync``
BUILTIN: dict[str, str] = {
    "local": """\
ddr-cluster: 1
kind: local
description: A LocalCluster sized by dask to this machine (processes, one BLAS thread each).
local:
  processes: true
  memory_limit: auto
  dashboard_address: ":0"
""",
    "threads": "ddr-cluster: 1\nkind: threads\ndescription: dask's threaded scheduler\n",
    "sync": "ddr-cluster: 1\nkind: sync\ndescription: dask's single-threaded scheduler\n",
}


# ----------------------------------------------------------------- valid kwargs
def _params_of(*callables: Any) -> set[str]:
    out: set[str] = set()
    for fn in callables:
        for p in inspect.signature(fn).parameters.values():
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self":
                out.add(p.name)
    return out


def valid_kwargs(kind: str) -> tuple[set[str], str]:
    """Keyword names the backend of ``kind`` accepts, and the backend's name."""
    if kind == "local":
        from distributed import LocalCluster, Nanny, Worker

        names = _params_of(LocalCluster.__init__, Nanny.__init__, Worker.__init__)
        return names - {"loop", "asynchronous", "start"}, "distributed.LocalCluster"
    if kind == "address":
        from distributed import Client

        return _params_of(Client.__init__) - {"loop", "asynchronous"}, "distributed.Client"
    if kind in ("slurm", "pbs"):
        try:
            import dask_jobqueue
            from dask_jobqueue.core import Job, JobQueueCluster

            job = (
                dask_jobqueue.SLURMCluster.job_cls
                if kind == "slurm"
                else dask_jobqueue.PBSCluster.job_cls
            )
            names = _params_of(JobQueueCluster.__init__, job.__init__, Job.__init__)
            names -= {"job_cls", "loop", "asynchronous", "scheduler"}
        except ImportError:
            names = set(_JOBQUEUE_CLUSTER) | set(_JOB) | set(_SLURM if kind == "slurm" else _PBS)
        return names, f"dask_jobqueue.{'SLURM' if kind == 'slurm' else 'PBS'}Cluster"
    if kind == "kubernetes":
        try:
            from dask_kubernetes.operator import KubeCluster

            names = _params_of(KubeCluster.__init__) - {"loop", "asynchronous"}
        except ImportError:
            names = set(_KUBE)
        return names, "dask_kubernetes.operator.KubeCluster"
    return set(), kind


# ------------------------------------------------------------------- loading
def load_cluster_config(
    source: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()
) -> ClusterConfig:
    """Read and validate a cluster config file (or a built-in name: local, threads, sync).

    Raises
    ------
    PipelineError
        Every problem, as ``file:line:col: message``.
    """
    name = str(source)
    if not Path(name).exists() and name in BUILTIN:
        doc = load_document(f"<builtin {name}>", overrides, text=BUILTIN[name])
    else:
        if not Path(name).exists():
            raise PipelineError(
                [
                    Problem(
                        Location(name, 0, 0),
                        f"no such cluster config (give a file or one of {', '.join(BUILTIN)})",
                    )
                ]
            )
        doc = load_document(name, overrides)
    return validate_cluster(doc)


def validate_cluster(doc: Document) -> ClusterConfig:
    """Validate a loaded cluster document; raise all problems at once."""
    import difflib

    config = validate(doc, ClusterConfig)
    data = doc.data if isinstance(doc.data, dict) else {}
    kind = data.get("kind")
    blocks = ("local", "address", "slurm", "pbs", "kubernetes")
    if isinstance(kind, str) and kind in (*blocks, "threads", "sync"):
        for other in blocks:
            if other != kind and other in data:
                doc.problem(
                    (other,),
                    f"a {other!r} block in a config of kind {kind!r}; remove "
                    f"it or set kind: {other}",
                    key=True,
                )
        block = data.get(kind)
        if kind in ("address", "slurm", "pbs", "kubernetes") and not isinstance(block, dict):
            doc.problem(
                ("kind",),
                f"kind {kind} needs a {kind!r} block with the backend's keyword arguments",
            )
        elif isinstance(block, dict):
            valid, backend = valid_kwargs(kind)
            for key in block:
                if key not in valid:
                    close = difflib.get_close_matches(key, sorted(valid), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    doc.problem((kind, key), f"{backend} has no keyword {key!r}{hint}", key=True)
            if kind == "address":
                given = [k for k in ("address", "scheduler_file") if block.get(k)]
                if len(given) != 1:
                    doc.problem(
                        (kind,),
                        "give exactly one of address (tcp://host:port) or scheduler_file",
                        key=True,
                    )
        if kind in ("threads", "sync", "address") and ("scale" in data or "adapt" in data):
            doc.problem(
                ("scale",) if "scale" in data else ("adapt",),
                f"kind {kind} cannot be scaled from here",
                key=True,
            )
    if isinstance(data.get("dask"), dict):
        import dask

        for key in data["dask"]:
            if not isinstance(key, str) or ("." not in key and key not in dask.config.config):
                doc.problem(
                    ("dask", key),
                    f"{key!r} is not a dask config key (use dotted keys "
                    "such as distributed.worker.memory.target)",
                    key=True,
                )
    doc.raise_problems()
    assert config is not None  # validate() added problems otherwise
    return config


# ------------------------------------------------------------------- running
@dataclass
class ClusterHandle:
    """What ``cluster_client`` gives: the client (None for local schedulers) and a label."""

    client: Any
    description: str
    cluster: Any = None


def _blas_env() -> None:
    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, "1")


def _make_cluster(config: ClusterConfig) -> Any:
    kwargs = config.backend_kwargs
    if config.kind == "local":
        from distributed import LocalCluster

        return LocalCluster(**kwargs)
    if config.kind in ("slurm", "pbs"):
        try:
            import dask_jobqueue
        except ImportError:
            raise RuntimeError(
                f"kind {config.kind} needs dask-jobqueue: pip install 'ddr[hpc]'"
            ) from None
        cls = dask_jobqueue.SLURMCluster if config.kind == "slurm" else dask_jobqueue.PBSCluster
        return cls(**kwargs)
    if config.kind == "kubernetes":
        try:
            from dask_kubernetes.operator import KubeCluster
        except ImportError:
            raise RuntimeError(
                "kind kubernetes needs dask-kubernetes: pip install 'ddr[k8s]'"
            ) from None
        return KubeCluster(**kwargs)
    raise ValueError(f"no cluster object for kind {config.kind!r}")  # pragma: no cover


@contextlib.contextmanager
def cluster_client(config: ClusterConfig) -> Iterator[ClusterHandle]:
    """Start (or connect to) the scheduler of ``config`` and make it the active one.

    The ``dask:`` block is set for the duration; local workers inherit one BLAS thread.
    """
    import dask

    _blas_env()
    with dask.config.set(dict(config.dask)):
        if config.kind in ("threads", "sync"):
            with dask.config.set(scheduler=config.kind):
                yield ClusterHandle(None, f"dask {config.kind} scheduler (this process)")
            return
        from distributed import Client

        if config.kind == "address":
            kwargs = {"set_as_default": False, **config.backend_kwargs}
            with Client(**kwargs) as client:
                if config.wait_for_workers:
                    client.wait_for_workers(config.wait_for_workers)
                with dask.config.set(scheduler=client):
                    yield ClusterHandle(client, f"scheduler at {client.scheduler.address}")
            return
        cluster = _make_cluster(config)
        try:
            if config.scale is not None:
                cluster.scale(**config.scale.model_dump(exclude_none=True))
            if config.adapt is not None:
                cluster.adapt(**config.adapt.model_dump(exclude_none=True))
            with Client(cluster, set_as_default=False) as client:
                if config.wait_for_workers:
                    client.wait_for_workers(config.wait_for_workers)
                with dask.config.set(scheduler=client):
                    yield ClusterHandle(client, _describe(cluster, client), cluster)
        finally:
            cluster.close()


def _describe(cluster: Any, client: Any) -> str:
    try:
        workers = client.scheduler_info().get("workers", {})
        threads = sum(w.get("nthreads", 0) for w in workers.values())
        return f"{type(cluster).__name__} ({len(workers)} workers, {threads} threads)"
    except Exception:  # pragma: no cover - a scheduler that does not answer yet
        return type(cluster).__name__


def dry_run(config: ClusterConfig) -> str:
    """What ``config`` would start, without starting it: the SLURM/PBS job script, the
    Kubernetes cluster spec, or the LocalCluster / Client call."""
    kwargs = config.backend_kwargs
    if config.kind in ("slurm", "pbs"):
        try:
            import dask_jobqueue
        except ImportError:
            return (
                f"# dask-jobqueue is not installed (pip install 'ddr[hpc]'); it would be "
                f"called as\n{_call('dask_jobqueue.' + config.kind.upper() + 'Cluster', kwargs)}"
            )
        cls = dask_jobqueue.SLURMCluster if config.kind == "slurm" else dask_jobqueue.PBSCluster
        job_kwargs = {
            k: v for k, v in kwargs.items() if k in _params_of(cls.job_cls.__init__, _job_base())
        }
        job = cls.job_cls(
            scheduler="tcp://<scheduler-address>:8786", name="ddr-worker", **job_kwargs
        )
        scale = config.scale.model_dump(exclude_none=True) if config.scale else {}
        head = f"# {cls.__name__}: job script (scale: {scale or 'none'})\n"
        return head + job.job_script()
    if config.kind == "kubernetes":
        try:
            import yaml as _yaml  # noqa: F401 (dask-kubernetes depends on PyYAML)
            from dask_kubernetes.operator import make_cluster_spec

            spec_kwargs = {k: v for k, v in kwargs.items() if k in _params_of(make_cluster_spec)}
            import json

            return json.dumps(make_cluster_spec(**spec_kwargs), indent=2)
        except ImportError:
            return (
                f"# dask-kubernetes is not installed (pip install 'ddr[k8s]'); it would be "
                f"called as\n{_call('dask_kubernetes.operator.KubeCluster', kwargs)}"
            )
    if config.kind == "local":
        return _call("distributed.LocalCluster", kwargs)
    if config.kind == "address":
        return _call("distributed.Client", kwargs)
    return f"dask.config.set(scheduler={config.kind!r})"


def _job_base() -> Any:
    from dask_jobqueue.core import Job

    return Job.__init__


def _call(name: str, kwargs: dict[str, Any]) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{name}({inner})"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of cluster config files (``ddr schema --cluster``)."""
    schema = ClusterConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "ddr cluster config (schema version 1)"
    return schema
