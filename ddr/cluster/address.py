"""``kind: address``: a client of a scheduler that is already running.

The address is given directly or read from a scheduler file. A scheduler that does not answer
within the block's ``timeout`` (default 30 s) is an error naming the address (and the file it
came from, with its age: a stale file is the usual cause), never a silent wait. The workers
were started elsewhere with their own dask config: the ``dask:`` block is compared with theirs
and each difference is reported, with the variable to set where the workers are started.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from ddr.cluster.backend import Backend, ClusterError, ClusterHandle, make_client
from ddr.cluster.kinds import register_backend
from ddr.cluster.worker_env import worker_environment

if TYPE_CHECKING:
    from ddr.config.document import Document

__all__ = ["Address"]

log = logging.getLogger("ddr.cluster")

_DEFAULT_TIMEOUT = "30s"


@register_backend
class Address(Backend):
    """``distributed.Client(address=...)`` or ``Client(scheduler_file=...)``."""

    kind = "address"
    target = "distributed.Client"
    example: ClassVar[dict[str, Any]] = {"address": "tcp://127.0.0.1:8786", "timeout": "30s"}
    needs_block = True
    waits = True

    @classmethod
    def keywords(cls) -> set[str]:
        from distributed import Client

        from ddr.cluster.backend import params_of

        return params_of(Client.__init__) - {"loop", "asynchronous"}

    @classmethod
    def check_block(cls, block: dict[str, Any], doc: Document) -> None:
        given = [k for k in ("address", "scheduler_file") if block.get(k)]
        if len(given) != 1:
            doc.problem(
                (cls.kind,),
                "give exactly one of address (tcp://host:port) or scheduler_file",
                key=True,
            )

    def _address(self) -> tuple[str, str]:
        """The scheduler's address and where it came from (for messages)."""
        path = self.kwargs.get("scheduler_file")
        if not path:
            return str(self.kwargs["address"]), ""
        try:
            with open(path, encoding="utf-8") as fh:
                address = json.load(fh)["address"]
        except FileNotFoundError:
            raise ClusterError(
                f"scheduler file {path} does not exist (is the scheduler running, and is the "
                "path on a file system this machine shares with it?)"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ClusterError(
                f"scheduler file {path} holds no scheduler address: {type(exc).__name__}: {exc}"
            ) from None
        age = time.time() - os.path.getmtime(path)
        return str(address), f" (from scheduler file {path}, written {_ago(age)} ago)"

    def preflight(self) -> None:
        self._address()

    @contextlib.contextmanager
    def start(self) -> Iterator[ClusterHandle]:
        from dask.utils import parse_timedelta

        address, source = self._address()
        kwargs = {k: v for k, v in self.kwargs.items() if k not in ("address", "scheduler_file")}
        timeout = kwargs.pop("timeout", _DEFAULT_TIMEOUT)
        try:
            client = make_client(address, timeout=timeout, set_as_default=False, **kwargs)
        except OSError as exc:
            seconds = parse_timedelta(timeout, default="s")
            stale = "; a stale scheduler file?" if source else ""
            raise ClusterError(
                f"no scheduler answered at {address}{source} within {seconds:g} s{stale} "
                f"({type(exc).__name__}: {exc})"
            ) from None
        with client:
            yield ClusterHandle(client, f"scheduler at {address}")

    def workers_joined(self, client: Any) -> None:
        report_worker_settings(client, self.config.dask)

    def dry_run(self) -> str:
        return super().dry_run() + (
            "\n# workers of an existing scheduler keep the dask config they were started with"
        )


def differing_worker_settings(client: Any, dask_block: dict[str, Any]) -> list[str]:
    """The keys of ``dask_block`` that the scheduler's workers hold with another value, each
    with the environment variable that would set it where the workers are started."""
    if not dask_block:
        return []

    def read(keys: list[str]) -> dict[str, Any]:
        import dask

        return {k: dask.config.get(k, None) for k in keys}

    keys = list(dask_block)
    out = []
    held = client.run(read, keys)
    for key in keys:
        values = {repr(v.get(key)) for v in held.values()}
        if values and values != {repr(dask_block[key])}:
            env = worker_environment({key: dask_block[key]})
            (name, value), *_ = env.items()
            out.append(f"{key}: workers have {', '.join(sorted(values))} (set {name}={value})")
    return out


def report_worker_settings(client: Any, dask_block: dict[str, Any]) -> None:
    """Warn (``ddr.cluster``) about settings of the ``dask:`` block the workers do not have."""
    for line in differing_worker_settings(client, dask_block):
        log.warning("the workers were started without the config's dask setting %s", line)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
