"""Worker processes that exit as soon as their worker has closed.

When a cluster closes, each nanny asks its worker to close and gives the worker *process*
4 seconds (``Nanny.close(timeout=5)``, 80 % of it) to exit before it kills it with
``distributed.nanny - WARNING - Worker process still alive after 4.0 seconds, killing``.
The worker itself closes in milliseconds; the seconds go to the process's exit, after the
worker has closed: the interpreter's final garbage collections walk every object the
process holds (numpy, scipy, scikit-learn, xarray, zarr, dask and ddr loaded: about
200 000 objects, some 0.4 s of CPU per process). All workers exit at once, so on a machine
with fewer cores than worker processes, or one busy with other work, the last ones pass the
4 seconds (measured on 2 cores: 8 workers took 1.8 to 4.1 s to close, often with the
warning; 0.2 to 0.6 s with this plugin), and every run's end (a failed run's message
included, which comes after the shutdown) waited for them.

:class:`QuickExit` moves what the worker process holds when its worker starts closing into
the garbage collector's permanent generation (:func:`gc.freeze`), which those final
collections skip: the process still runs its exit handlers and flushes its streams, it just
does not walk a heap it is about to free. Only in a process of its own, started by a nanny
(never in the process that runs the client: ``processes: false`` keeps the workers there).
"""

from __future__ import annotations

import gc
import logging
import os
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

__all__ = ["QuickExit", "exit_quickly"]

logger = logging.getLogger(__name__)


class QuickExit(WorkerPlugin):
    """A worker plugin: when the worker closes, its process skips walking its heap at exit
    (:func:`gc.freeze`), so the nanny does not have to kill it."""

    name = "ddr-quick-exit"

    def __init__(self) -> None:
        self.client_pid = os.getpid()

    def teardown(self, worker: Any) -> None:
        from distributed.core import Status

        # only a closing worker (not a plug-in removed from a running one), in a process of
        # its own (a nanny's): what is frozen is never collected, which only matters to a
        # process that goes on
        closing = getattr(worker, "status", None) in (Status.closing, Status.closing_gracefully)
        own = getattr(worker, "nanny", None) is not None and os.getpid() != self.client_pid
        if closing and own:
            gc.freeze()


def exit_quickly(client: Any) -> None:
    """Register :class:`QuickExit` on ``client``'s workers (and on workers that join later,
    restarted ones included). A scheduler that refuses it keeps distributed's defaults."""
    try:
        client.register_plugin(QuickExit(), name=QuickExit.name)
    except Exception as exc:  # no ddr on the workers, no pickled code allowed, ...
        logger.debug("worker plugin %s not registered: %s", QuickExit.name, exc)
