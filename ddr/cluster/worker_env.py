"""The config's ``dask:`` block as environment variables, so that it reaches every worker.

dask reads ``DASK_*`` variables when it is imported (:func:`dask.config.collect_env`):
``DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=0.6`` sets ``distributed.worker.memory.target``,
values parsed with :func:`ast.literal_eval`. Workers started by a batch job or in a pod are
new processes that see only their environment, so the job script exports these variables and
the pod spec sets them. dask lower-cases variable names and reads ``_`` as ``-``, which would
break keys with capitals (``distributed.nanny.pre-spawn-environ.OMP_NUM_THREADS``): such a
key is exported at its parent as a dict literal, which dask merges into its defaults.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

__all__ = ["export_lines", "worker_environment"]

# a key segment dask gives back unchanged after lower-casing and reading "_" as "-"
_SAFE = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")


def _nest(parts: list[str], value: Any) -> Any:
    for part in reversed(parts):
        value = {part: value}
    return value


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for k, v in other.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def worker_environment(dask_block: dict[str, Any]) -> dict[str, str]:
    """``{DASK_...: literal}`` for each dotted key of a config's ``dask:`` block.

    Parameters
    ----------
    dask_block : dict
        Dotted dask config keys and their values, e.g.
        ``{"distributed.worker.memory.target": 0.6}``.

    Returns
    -------
    dict of str to str
        Environment variables that give a fresh dask process the same settings.
    """
    grouped: dict[str, Any] = {}
    for key, value in dask_block.items():
        parts = str(key).split(".")
        safe = 0
        while safe < len(parts) and _SAFE.fullmatch(parts[safe]):
            safe += 1
        if safe == 0:
            raise ValueError(f"dask config key {key!r} cannot be exported to the workers")
        name = "DASK_" + "__".join(p.upper().replace("-", "_") for p in parts[:safe])
        rest = _nest(parts[safe:], value)
        if isinstance(rest, dict) and isinstance(grouped.get(name), dict):
            _merge(grouped[name], rest)
        else:
            grouped[name] = rest
    return {name: repr(value) for name, value in grouped.items()}


def export_lines(env: dict[str, str]) -> list[str]:
    """``export NAME=value`` lines for a job script, each value quoted for the shell."""
    return [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
