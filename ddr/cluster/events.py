"""Report what happens to the workers while a run lasts, through the ``ddr.cluster`` logger.

The scheduler publishes every worker that joins or leaves on its ``"all"`` event topic, with
the tasks the worker was running and the finished results only it held (which the scheduler
then recomputes elsewhere). :class:`WorkerEvents` subscribes to that topic for the run and logs

- a worker lost (killed, crashed, unreachable): WARNING, with what is recomputed;
- a worker retired (``--lifetime``, scaling down): INFO, with the tasks it handed back;
- a worker joined (a restarted or newly started one): INFO;

and, when the run ends, the totals. Any scheduler publishes these events; nothing needs to be
installed on it.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["WorkerEvents"]

log = logging.getLogger("ddr.cluster")


def _kinds(keys: Iterable[Any]) -> str:
    """``"3 ddr-stats-block, 1 ddr-stats-merge"``: how many keys of each task prefix."""
    from dask.utils import key_split

    counts = collections.Counter(key_split(k) for k in keys)
    return ", ".join(f"{n} {name}" for name, n in counts.most_common())


class WorkerEvents:
    """Log lost, retired and joined workers of ``client``'s scheduler while in the ``with``.

    Attributes
    ----------
    lost, retired, joined : list of str
        Worker addresses, in the order the events came.
    recomputed : int
        Tasks the scheduler re-runs or recomputes because a worker was lost.
    """

    _TOPIC = "all"

    def __init__(self, client: Any) -> None:
        self.client = client
        self.lost: list[str] = []
        self.retired: list[str] = []
        self.joined: list[str] = []
        self.recomputed = 0
        self._workers: set[str] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> WorkerEvents:
        self._workers = set(self.client.scheduler_info(n_workers=-1).get("workers", {}))
        self.client.subscribe_topic(self._TOPIC, self._on_event)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.client.unsubscribe_topic(self._TOPIC)
        except Exception:  # the scheduler is already gone
            log.debug("could not unsubscribe from the scheduler's events", exc_info=True)
        if self.lost:
            log.warning(
                "during the run %d worker(s) were lost and %d retired; %d task(s) were "
                "re-run or recomputed",
                len(self.lost),
                len(self.retired),
                self.recomputed,
            )
        elif self.retired:
            log.info(
                "during the run %d worker(s) retired; %d task(s) were re-run",
                len(self.retired),
                self.recomputed,
            )

    # the handler runs in the client's event loop: it only logs, it never calls the client
    def _on_event(self, event: tuple[float, dict[str, Any]]) -> None:
        _, msg = event
        if not isinstance(msg, dict):
            return
        action = msg.get("action")
        if action == "remove-worker":
            self._removed(msg)
        elif action == "add-worker":
            with self._lock:
                self._workers.add(msg.get("worker", "?"))
                self.joined.append(msg.get("worker", "?"))
                left = len(self._workers)
            log.info("worker %s joined (%d workers)", msg.get("worker", "?"), left)

    def _removed(self, msg: dict[str, Any]) -> None:
        worker = msg.get("worker", "?")
        running = list(msg.get("processing-tasks") or ())
        results = list(msg.get("lost-computed-tasks") or ())
        scattered = list(msg.get("lost-scattered-tasks") or ())
        with self._lock:
            self._workers.discard(worker)
            left = len(self._workers)
            self.recomputed += len(running) + len(results)
            (self.retired if msg.get("expected") else self.lost).append(worker)
        redo = []
        if running:
            redo.append(f"{len(running)} running task(s) ({_kinds(running)}) re-run")
        if results:
            redo.append(f"{len(results)} finished result(s) ({_kinds(results)}) recomputed")
        if scattered:
            redo.append(f"{len(scattered)} scattered value(s) lost for good")
        what = "; ".join(redo) if redo else "nothing to recompute"
        if msg.get("expected"):
            log.info(
                "worker %s retired (its lifetime ended or the cluster scaled down); %s; "
                "%d workers left",
                worker,
                what,
                left,
            )
        else:
            log.warning(
                "worker %s lost (its process died or stopped answering); %s on the other "
                "workers; %d workers left",
                worker,
                what,
                left,
            )
