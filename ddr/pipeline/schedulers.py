"""The dask scheduler a run uses: the active distributed client (if any), its dashboard, and
how the summary names it."""

from __future__ import annotations

from typing import Any

__all__ = ["active_client", "dashboard_link", "describe_scheduler"]


def active_client() -> Any:
    """The distributed Client the active dask config uses, or None for local schedulers."""
    import dask

    try:
        from distributed import Client, default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    sched = dask.config.get("scheduler", None)
    if isinstance(sched, Client):
        return sched
    if sched is not None and not (
        isinstance(sched, str) and sched in ("dask.distributed", "distributed")
    ):
        return None
    try:
        return default_client()
    except ValueError:
        return None


def dashboard_link(client: Any) -> str | None:
    """The dashboard URL of a distributed client, if it serves one (it needs bokeh)."""
    import importlib.util

    if client is None or importlib.util.find_spec("bokeh") is None:
        return None
    try:
        return str(client.dashboard_link)
    except Exception:  # no dashboard (dashboard_address=None)
        return None


def describe_scheduler(client: Any) -> str:
    """What the run summary says the run ran on (local scheduler's name, or the cluster's
    address, workers and threads)."""
    import dask

    if client is None:
        sched = dask.config.get("scheduler", None) or "threads"
        return sched if isinstance(sched, str) else getattr(sched, "__name__", str(sched))
    try:
        info = client.scheduler_info()
        workers = info.get("workers", {})
        threads = sum(w.get("nthreads", 0) for w in workers.values())
        return f"distributed {info.get('address', '')} ({len(workers)} workers, {threads} threads)"
    except Exception:  # pragma: no cover - a scheduler that does not answer
        return "distributed"
