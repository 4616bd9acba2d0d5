"""Report what happens to the workers while a run lasts, through the ``ddr.cluster`` logger,
and stop a run that has no worker left.

The scheduler publishes every worker that joins or leaves on its ``"all"`` event topic, with
the tasks the worker was running and the finished results only it held (which the scheduler
then recomputes elsewhere). :class:`WorkerEvents` subscribes to that topic for the run and logs

- a worker lost (killed, crashed, unreachable): WARNING, with what is recomputed;
- a worker retired (``--lifetime``, scaling down): INFO, with the tasks it handed back;
- a worker joined (a restarted or newly started one): INFO;
- fewer workers left than ``wait_for_workers`` asked for: WARNING, once per drop;

and, when the run ends, the totals. Any scheduler publishes these events; nothing needs to be
installed on it.

A worker whose memory passes ``distributed.worker.memory.terminate`` of its limit is
restarted by its nanny, which publishes it on the ``"worker-restart-memory"`` topic: each is
a WARNING with the numbers. A worker that is restarted again and again never gets anything
done (dask would restart it forever: a limit below what the worker holds at start, a task
that needs more than the limit), so the run is stopped, its tasks cancelled with a message
that says the limit and what the worker held, when

- two workers were restarted for memory while they held no task and no result (what they
  hold at start does not fit), or
- ``distributed.scheduler.allowed-failures`` workers (at least 1) were restarted for memory
  in all: one fewer than the deaths after which dask gives up on one task that kills its
  workers (``KilledWorker``, which does not say why), so the reason is said first.

When no worker is left while the run waits for tasks, dask would wait forever. A watch
thread says so at once (WARNING), again every :data:`~ddr.cluster.waiting.REPORT_EVERY`
seconds, and when no worker has joined within ``wait_timeout`` it cancels the run's tasks
with a message that says why: the computation raises, the run fails (exit 1) and its outputs
stay marked incomplete. A worker that joins in time (a restarted job, an adaptive cluster
scaling up) lets the run go on. How fast a lost worker is noticed is the scheduler's: at once
for a process that died (its connection closes), after ``distributed.scheduler.worker-ttl``
(5 minutes by default) for one that stopped answering.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["WorkerEvents"]

log = logging.getLogger("ddr.cluster")

#: states of a client's future whose task is still to run (``lost``: its result went with a
#: worker and is recomputed)
_WAITING = ("pending", "lost")


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
    _MEMORY_TOPIC = "worker-restart-memory"
    _POLL = 0.25
    #: restarts for memory of workers that held nothing after which the run stops
    IDLE_RESTARTS = 2

    def __init__(self, client: Any, *, wanted: int = 0, timeout: float = 600.0) -> None:
        self.client = client
        self.wanted = wanted
        self.timeout = timeout
        self.lost: list[str] = []
        self.retired: list[str] = []
        self.joined: list[str] = []
        self.recomputed = 0
        self.stopped: str | None = None  # why the run's tasks were cancelled
        self.memory_restarts: list[tuple[str, int]] = []  # (worker, its memory) in order
        self._held: dict[str, bool] = {}  # removed worker -> whether it held tasks/results
        self._limits: dict[str, int] = {}  # worker -> memory_limit, as joined
        self._spec_limit = 0  # the memory_limit every worker of the cluster's spec has
        self._workers: set[str] = set()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._watch = threading.Thread(
            target=self._watch_workers, name="ddr-no-workers", daemon=True
        )

    def __enter__(self) -> WorkerEvents:
        self._read_limits()
        self._read_spec_limit()
        self._workers = set(self._limits)
        self.client.subscribe_topic(self._TOPIC, self._on_event)
        self.client.subscribe_topic(self._MEMORY_TOPIC, self._on_memory_restart)
        self._watch.start()
        return self

    def _read_spec_limit(self) -> None:
        """The memory_limit the cluster object (a LocalCluster or another SpecCluster in
        this process) gives every worker: what a worker restarted before it ever joined
        had (its nanny's event does not say)."""
        from distributed.worker_memory import parse_memory_limit

        spec: Any = getattr(getattr(self.client, "cluster", None), "worker_spec", None)
        try:
            limits = {
                parse_memory_limit(
                    w["options"]["memory_limit"], w["options"].get("nthreads", 1), logger=log
                )
                for w in spec.values()
            }
        except Exception:  # no spec here (a remote scheduler), or another shape of it
            return
        if len(limits) == 1:
            self._spec_limit = int(limits.pop() or 0)

    def _read_limits(self) -> None:
        try:
            workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        except Exception:  # a scheduler that is going away: keep what is known
            log.debug("could not ask the scheduler for its workers", exc_info=True)
            return
        with self._lock:
            for addr, info in workers.items():
                self._limits[addr] = int(info.get("memory_limit") or 0)

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._watch.join(timeout=5)
        for topic in (self._TOPIC, self._MEMORY_TOPIC):
            try:
                self.client.unsubscribe_topic(topic)
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

    def _on_memory_restart(self, event: tuple[float, dict[str, Any]]) -> None:
        _, msg = event
        if not isinstance(msg, dict):
            return
        worker, rss = str(msg.get("worker", "?")), int(msg.get("rss") or 0)
        with self._lock:
            self.memory_restarts.append((worker, rss))
            limit = self._limit_of(worker)
        log.warning(
            "worker %s was restarted by its nanny: its memory, %s, passed %s of its memory_limit%s",
            worker,
            _mib(rss),
            _terminate_fraction(),
            f" {_mib(limit)}" if limit else "",
        )

    def _limit_of(self, worker: str) -> int:
        """``worker``'s memory_limit, or the one all known workers share (a restarted
        worker comes back with a new address and its nanny's limit); 0 if unknown."""
        if worker in self._limits:
            return self._limits[worker]
        known = set(self._limits.values())
        return known.pop() if len(known) == 1 else self._spec_limit

    # ----------------------------------------------------------- restarted for memory
    def _memory_stop(self) -> str | None:
        """Why the run must stop because its workers are restarted for memory, or None."""
        from dask import config

        with self._lock:
            restarts = list(self.memory_restarts)
            # a nanny may name its worker by the address it had before an earlier restart,
            # which no removal names: such a restart is taken as idle when every worker
            # removed so far held nothing (unknown until a removal is seen)
            any_held = any(self._held.values()) if self._held else None
            idle = [(w, rss) for w, rss in restarts if self._held.get(w, any_held) is False]
            limit = max((self._limit_of(w) for w, _ in restarts), default=0)
        # one fewer than dask's bound for one task (allowed-failures + 1 deaths, then
        # KilledWorker, which does not say why): the run stops with the reason first
        allowed = int(config.get("distributed.scheduler.allowed-failures", 3))
        bound = max(allowed, 1)
        if len(idle) < self.IDLE_RESTARTS and len(restarts) < bound:
            return None
        has = f"memory_limit {_mib(limit)}" if limit else "its memory_limit"
        largest = _mib(max(rss for _, rss in restarts))
        if len(idle) >= self.IDLE_RESTARTS:
            return (
                f"not enough memory per worker: workers were restarted {len(idle)} times for "
                f"passing {_terminate_fraction()} of {has} while they held no task and no "
                f"result (up to {largest}): what a worker holds at start (the interpreter, "
                "its imports, preloads and plugins) does not fit, and dask would restart it "
                "forever. Give each worker more memory (memory_limit); the run stopped"
            )
        return (
            f"not enough memory per worker: workers were restarted {len(restarts)} times for "
            f"passing {_terminate_fraction()} of {has} (up to {largest}; "
            f"distributed.scheduler.allowed-failures is {allowed}): the run's tasks need "
            "more than that. Give each worker more memory (memory_limit) or fewer threads, "
            "or store the input in smaller chunks; the run stopped"
        )

    # ------------------------------------------------------------------- no workers
    def _watch_workers(self) -> None:
        """Say at once when no worker is left while tasks wait, and cancel them when none has
        joined within the timeout."""
        from ddr.cluster.waiting import REPORT_EVERY

        since: float | None = None  # when the run was first seen waiting with no worker
        report = 0.0
        memory: str | None = None
        while not self._done.wait(self._POLL):
            memory = memory or self._memory_stop()
            if memory is not None:  # cancel what the run computes, now and from now on
                self._cancel_waiting(memory)
                continue
            with self._lock:
                left = len(self._workers)
            now = time.monotonic()
            if left:
                if since is not None:
                    log.info(
                        "a worker joined after %.0f s without any; the run goes on", now - since
                    )
                since = None
                continue
            if not self._waiting():
                continue
            if since is None:
                since, report = now, now + REPORT_EVERY
                log.warning(
                    "no worker is left and the run's tasks wait for one; the run stops if none "
                    "joins within %s (wait_timeout)",
                    _seconds(self.timeout),
                )
            elif now - since >= self.timeout:
                self._stop_run(now - since)
            elif now >= report:
                report = now + REPORT_EVERY
                log.warning(
                    "still no worker after %.0f s; the run stops in %.0f s",
                    now - since,
                    self.timeout - (now - since),
                )

    def _waiting(self) -> bool:
        """Whether the client holds tasks that are not finished."""
        try:
            return any(s.status in _WAITING for s in list(self.client.futures.values()))
        except Exception:  # a client that is closing
            return False

    def _stop_run(self, waited: float) -> None:
        first = self.stopped is None
        if first:
            self.stopped = (
                f"no worker was left for {waited:.0f} s (every worker was lost or retired and "
                f"none joined within wait_timeout, {_seconds(self.timeout)}); the run stopped"
            )
            log.error("%s", self.stopped)
        self._cancel_waiting(self.stopped, reason="no-workers")

    def _cancel_waiting(self, why: str, reason: str = "memory") -> None:
        """Cancel the client's unfinished tasks with ``why`` (what the run reports)."""
        from distributed import Future

        if self.stopped is None:
            self.stopped = why
        try:
            keys = [k for k, s in list(self.client.futures.items()) if s.status in _WAITING]
            if keys:
                futures = [Future(k, self.client) for k in keys]
                self.client.cancel(futures, reason=reason, msg=why)
        except Exception:  # a client that is closing
            log.debug("could not cancel the run's tasks", exc_info=True)

    def _removed(self, msg: dict[str, Any]) -> None:
        worker = msg.get("worker", "?")
        running = list(msg.get("processing-tasks") or ())
        results = list(msg.get("lost-computed-tasks") or ())
        scattered = list(msg.get("lost-scattered-tasks") or ())
        with self._lock:
            before = len(self._workers)
            self._workers.discard(worker)
            left = len(self._workers)
            self.recomputed += len(running) + len(results)
            (self.retired if msg.get("expected") else self.lost).append(worker)
            self._held[worker] = bool(running or results)
        if 0 < left < self.wanted <= before:
            log.warning(
                "%d worker(s) left, fewer than the %d wanted (wait_for_workers); the run goes "
                "on with them",
                left,
                self.wanted,
            )
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


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _mib(n: float) -> str:
    from ddr.cluster.memory import mib

    return mib(n)


def _terminate_fraction() -> str:
    from ddr.cluster.memory import memory_fractions

    return f"{memory_fractions()[2] or 1:g}"
