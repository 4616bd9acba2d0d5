"""What a cluster backend is: one class per ``kind`` of cluster config.

A :class:`Backend` knows the keyword names its block takes (read from the backend's own
signatures), how to check the block beyond those names, what to do before starting (commands
on ``PATH``, whether any node can run the job), how to start a client, what it would start
(``--dry-run``), and, for batch systems, why workers have not joined yet. The rest of
``ddr.cluster`` (loading, waiting, reporting) is written once against this interface; adding a
backend is adding one class, registered with :func:`ddr.cluster.kinds.register_backend`.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ddr.cluster.settings import ClusterSettings
    from ddr.config.document import Document

__all__ = [
    "BLAS_THREAD_VARS",
    "Backend",
    "ClusterError",
    "ClusterHandle",
    "JobState",
    "make_client",
]

BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class ClusterError(RuntimeError):
    """The cluster could not give ddr its workers: a command is missing, no node can run the
    job, the scheduler cannot be reached, or the workers did not join in time.

    Raised before any data is read or any output written.
    """


@dataclass(frozen=True)
class JobState:
    """A batch job that has not given its workers yet, as the batch system reports it.

    ``never`` is true when the batch system says the job can never start as submitted.
    """

    job_id: str
    state: str
    reason: str = ""
    never: bool = False

    def __str__(self) -> str:
        return f"job {self.job_id} {self.state}" + (f" ({self.reason})" if self.reason else "")


@dataclass
class ClusterHandle:
    """What ``cluster_client`` gives: the client (None for local schedulers), a label, the
    cluster object (None unless ddr started one) and how to ask about pending jobs."""

    client: Any
    description: str
    cluster: Any = None
    pending: Callable[[], list[JobState]] = field(default=lambda: [])


def params_of(*callables: Any) -> set[str]:
    """The keyword names the callables take (without ``self``, ``*args``, ``**kwargs``)."""
    out: set[str] = set()
    for fn in callables:
        for p in inspect.signature(fn).parameters.values():
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self":
                out.add(p.name)
    return out


def call_text(name: str, kwargs: dict[str, Any]) -> str:
    """``name(k=v, ...)``: how a dry run shows a call."""
    inner = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{name}({inner})"


@functools.cache
def _client_class() -> type:
    from distributed import Client

    class RunClient(Client):
        """A :class:`distributed.Client` that pickles to None (see :func:`make_client`)."""

        def __reduce__(self) -> tuple[Any, ...]:
            return (type(None), ())  # a builtin: unpickling imports nothing

    return RunClient


def make_client(*args: Any, **kwargs: Any) -> Any:
    """``distributed.Client(*args, **kwargs)``, of a subclass that pickles to None.

    :func:`~ddr.cluster.cluster_client` makes the client dask's ``scheduler`` in dask's
    global config, and distributed hands that config to every worker process a nanny starts
    or restarts by pickling it. A Client does not pickle (it holds asyncio tasks): without
    this, a nanny could not restart a worker that died while a run lasted (killed for
    memory, crashed) -- "cannot pickle '_asyncio.Task' object", no worker left. In the
    worker the key is None: a worker must not use this process's client anyway (distributed
    drops a *default* client from the config it hands on for the same reason).
    """
    return _client_class()(*args, **kwargs)


class Backend(abc.ABC):
    """One kind of cluster config. Subclasses set the class attributes and override what
    differs; instances hold one validated config.

    Parameters
    ----------
    config : ClusterSettings
        The validated cluster config (its block of this kind's keywords, ``scale:``,
        ``adapt:``, ``dask:``).

    Attributes
    ----------
    kind : str
        The config's ``kind:`` and the name of its keyword block.
    target : str
        What the block's keywords are passed to, e.g. ``dask_jobqueue.SLURMCluster``.
    block : bool
        Whether the kind takes a keyword block at all (threads/sync do not).
    needs_block : bool
        Whether the block is required.
    scalable : bool
        Whether ``scale:``/``adapt:`` apply.
    waits : bool
        Whether workers join some time after the cluster starts (batch jobs, pods, an
        existing scheduler): ddr then waits for at least one worker before running.
    example : dict or None
        A keyword block that validates (None for a kind without one): what the backend
        conformance suite (:mod:`ddr.testing.backend_checks`) validates and dry-runs.
    """

    kind: ClassVar[str]
    target: ClassVar[str]
    example: ClassVar[dict[str, Any] | None]
    block: ClassVar[bool] = True
    needs_block: ClassVar[bool] = False
    scalable: ClassVar[bool] = False
    waits: ClassVar[bool] = False

    def __init__(self, config: ClusterSettings) -> None:
        self.config = config
        self.kwargs: dict[str, Any] = dict(getattr(config, self.kind, None) or {})

    # ------------------------------------------------------------ validation
    @classmethod
    def keywords(cls) -> set[str]:
        """The keyword names the block accepts."""
        return set()

    @classmethod  # noqa: B027 (a hook: no problems beyond unknown keywords by default)
    def check_block(cls, block: dict[str, Any], doc: Document) -> None:
        """Add the block's problems beyond unknown keywords to ``doc``.

        Parameters
        ----------
        block : dict
            The config's keyword block of this kind.
        doc : Document
            The config file being validated: problems are added to it with their place.
        """

    # --------------------------------------------------------------- running
    def preflight(self) -> None:  # noqa: B027 (a hook: nothing to check by default)
        """Check what can be checked before anything is started; raise a ``ClusterError``."""

    @abc.abstractmethod
    def start(self) -> contextlib.AbstractContextManager[ClusterHandle]:
        """Start (or connect to) the cluster and give its handle.

        Returns
        -------
        contextlib.AbstractContextManager of ClusterHandle
            The handle; the cluster stops on exit.
        """

    def worker_memory_limit(self) -> int | None:
        """Give the ``memory_limit`` in bytes each worker will get.

        Returns
        -------
        int or None
            As far as the config says it before anything is started; None when it does not
            (or sets none).
        """
        return None

    def workers_joined(self, client: Any) -> None:  # noqa: B027 (a hook)
        """Check the workers once the wanted ones joined, before the run (a hook).

        Parameters
        ----------
        client : distributed.Client
            The run's client.
        """

    def dry_run(self) -> str:
        """What :meth:`start` would start, without starting or writing anything."""
        return call_text(self.target, self.kwargs)

    def asks(self) -> str:
        """What one job (or worker) asks of the batch system, for messages; '' if nothing."""
        return ""
