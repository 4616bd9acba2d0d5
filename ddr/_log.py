"""How the ``ddr`` command shows what the library logs: lines, a progress bar, a log file.

Library code only logs (records under the ``ddr`` logger; a pass over the data carries a
:class:`ddr.progress.Progress`). :func:`console` attaches the handlers for one command:

- on a terminal, a progress bar on the last line of stderr (the job, its passes, the share
  of the current pass's dask tasks done, the time), redrawn in place, with the other records
  printed above it;
- when stderr is not a terminal (a file, a pipe, a batch job's log), or with
  ``--no-progress``, one plain line per record: no carriage returns, no escape codes;
- ``-v`` adds debug records and tracebacks, ``-q`` keeps only warnings and errors;
- a log file (every record at debug level, with times), e.g. beside the run summary. A log
  file that cannot be written (a full disk, a quota, no permission) is said once, as a
  warning on the console, and the command goes on without it;
- Python warnings (a ``ConvergenceWarning``, a scikit-learn or dask warning) as
  ``ddr: warning: message (Category)`` like every other message, and in the log file, not
  Python's raw ``path:line: Category: message`` and source line (:func:`route_warnings`;
  only the command line installs it: a Python caller of the library sees warnings as usual).

:func:`watch_cluster` (for a distributed client) counts the tasks the scheduler runs, for the
bar, and keeps workers from printing a traceback for every failed task: the client raises
the error once, with ddr's advice, and its traceback goes to the log file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from distributed.diagnostics.plugin import WorkerPlugin

from ddr.progress import PROGRESS_ATTR, Progress

__all__ = ["BarHandler", "LineHandler", "LogFile", "console", "route_warnings", "watch_cluster"]

ROOT = "ddr"
FILE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_PREFIX = {logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.CRITICAL: "error: "}

#: a source of task counts for the bar: ``() -> (tasks to run so far, tasks done so far)``
TaskCounts = Callable[[], tuple[int, int]]


class _ConsoleFormatter(logging.Formatter):
    """``ddr: message`` (``ddr: warning: message`` above INFO); a traceback only at debug."""

    def __init__(self, tracebacks: bool) -> None:
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        text = f"ddr: {_PREFIX.get(record.levelno, '')}{record.getMessage()}"
        if self.tracebacks and record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class LineHandler(logging.StreamHandler):
    """One plain line per record (what a log file or a pipe should get)."""

    def __init__(self, stream: IO[str], *, tracebacks: bool = False) -> None:
        super().__init__(stream)
        self.setFormatter(_ConsoleFormatter(tracebacks))


class BarHandler(logging.Handler):
    """Records as lines, and the progress of the current job as a bar on the last line.

    The bar is drawn with a carriage return and an erase-line escape, so it is only for a
    terminal. A thread redraws it a few times a second (the time and, when ``tasks`` is
    set, the share of the current pass's tasks that are done move while a pass runs).
    """

    def __init__(
        self, stream: IO[str], *, tracebacks: bool = False, interval: float = 0.25
    ) -> None:
        super().__init__()
        self.stream = stream
        self.setFormatter(_ConsoleFormatter(tracebacks))
        self.tasks: TaskCounts | None = None
        self._progress: Progress | None = None
        self._since = time.perf_counter()
        self._base = (0, 0)
        self._shown = False
        self._io = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._tick, args=(interval,), name="ddr-progress-bar", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ records
    def emit(self, record: logging.LogRecord) -> None:
        try:
            progress = getattr(record, PROGRESS_ATTR, None)
            line = self.format(record)
            counts = self._counts()
            with self._io:
                self._clear()
                self.stream.write(line + "\n")
                if isinstance(progress, Progress):
                    self._progress = None if progress.finished else progress
                    self._since = time.perf_counter()
                    self._base = counts
                self._draw(counts)
                self.stream.flush()
        except Exception:  # pragma: no cover - logging must never raise
            self.handleError(record)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        with self._io:
            self._clear()
            self.stream.flush()
        super().close()

    # --------------------------------------------------------------------- bar
    def _tick(self, interval: float) -> None:
        while not self._stop.wait(interval):
            if self._progress is None:
                continue
            counts = self._counts()  # may ask the scheduler: not while holding the stream
            with self._io:
                self._draw(counts)
                self.stream.flush()

    def _counts(self) -> tuple[int, int]:
        if self.tasks is None:
            return (0, 0)
        try:
            return self.tasks()
        except Exception:  # a scheduler that stopped answering: no task share
            return self._base

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self._shown = False

    def _draw(self, counts: tuple[int, int]) -> None:
        p = self._progress
        if p is None:
            return
        added, done = counts
        todo = added - self._base[0]
        share = min(1.0, (done - self._base[1]) / todo) if todo > 0 else None
        self.stream.write("\r\x1b[2K" + bar_line(p, share, time.perf_counter() - self._since))
        self._shown = True


class LogFile(logging.FileHandler):
    """Every record, at debug level with times, to a file; a file that cannot be written is
    given up, said once through ``report``.

    logging's own handler prints a "--- Logging error ---" block with a traceback for each
    record it cannot write: on a full disk, one per line of progress. Here the first failed
    write (or flush, or close) closes the file and calls ``report`` with what went wrong;
    later records are dropped.

    Parameters
    ----------
    path : path-like
        The file (replaced). Opening it may raise ``OSError``.
    report : callable
        Called once with a message when a write fails.
    """

    def __init__(self, path: str | os.PathLike, report: Callable[[str], None]) -> None:
        super().__init__(path, mode="w", encoding="utf-8")
        self._shown = str(path)
        self._report = report
        self.failed = False
        self.setFormatter(logging.Formatter(FILE_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def flush(self) -> None:
        if self.failed:
            return
        try:
            super().flush()
        except OSError as exc:
            self._give_up(exc)

    def handleError(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            self._give_up(exc)
        else:  # a record that cannot be formatted: logging's own report names it
            super().handleError(record)

    def close(self) -> None:
        try:
            super().close()  # flushes what is buffered: fails again on a full disk
        except OSError as exc:
            self._give_up(exc)

    def _give_up(self, exc: OSError) -> None:
        if self.failed:
            return
        self.failed = True
        stream, self.stream = self.stream, None  # type: ignore[assignment]
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
        self._report(log_file_failed(self._shown, exc))


def log_file_failed(path: str | os.PathLike, exc: OSError) -> str:
    """What a command says when its log file cannot be written."""
    return f"could not write the log file {path}: {exc.strerror or exc}; going on without it"


def bar_line(p: Progress, share: float | None, seconds: float, width: int | None = None) -> str:
    """The text of the bar: ``what [#####-----] pass 2 of 4, 37% of its tasks, 12.3 s``.

    ``share`` is the share of the current pass's tasks that are done (None: unknown).
    """
    width = width or max(40, shutil.get_terminal_size((100, 20)).columns - 1)
    if p.total:
        filled = (p.done + (share or 0.0)) / p.total
        state = f"{p.unit} {min(p.done + 1, p.total)} of {p.total}"
    else:
        filled = share or 0.0
        state = f"{p.unit} {p.done + 1}"
    tail = f" {state}" + (f", {share:.0%} of its tasks" if share is not None else "")
    tail += f", {seconds:.1f} s"
    cells = 20
    n = round(min(max(filled, 0.0), 1.0) * cells)
    line = f"{p.what} [{'#' * n}{'-' * (cells - n)}]{tail}"
    return line[:width]


# ----------------------------------------------------------------- local tasks
def _local_task_counts() -> tuple[TaskCounts, Callable[[], None]]:
    """Count the tasks of dask's local schedulers (threads, sync) in this process."""
    from dask.callbacks import Callback

    counts = [0, 0]

    class Counter(Callback):
        def _start_state(self, dsk: Any, state: dict[str, Any]) -> None:
            counts[0] += len(state["ready"]) + len(state["waiting"]) + len(state["running"])

        def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
            counts[1] += 1

    counter = Counter()
    counter.register()
    return (lambda: (counts[0], counts[1])), counter.unregister


# -------------------------------------------------------------------- cluster
def _install_counter(dask_scheduler: Any = None) -> None:
    """On the scheduler: count tasks that start waiting to run and tasks that finish."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class TaskCounter(SchedulerPlugin):
        name = "ddr-task-counter"

        def __init__(self) -> None:
            self.added = 0
            self.done = 0

        def transition(self, key: Any, start: str, finish: str, *args: Any, **kw: Any) -> None:
            if finish == "waiting" and start != "waiting":  # waiting -> waiting: no new task
                self.added += 1
            elif start == "processing" and finish in ("memory", "erred"):
                self.done += 1

    if TaskCounter.name not in dask_scheduler.plugins:
        dask_scheduler.add_plugin(TaskCounter())


def _read_counter(dask_scheduler: Any = None) -> tuple[int, int]:
    plugin = dask_scheduler.plugins["ddr-task-counter"]
    return plugin.added, plugin.done


#: worker log records that only repeat an error the client raises: (logger, start of message,
#: text it must contain)
_ECHOES = (
    ("distributed.worker", "Compute Failed", ""),
    ("distributed.worker.state_machine", "Async instruction for", "CancelledError"),
)


class QuietTaskErrors(WorkerPlugin):
    """A worker plugin: the worker does not log a traceback for each failed task.

    The client raises the first error of a compute once (ddr reports it with its advice, and
    writes its traceback to the log file); on a local cluster the workers' logs are the
    terminal, where one failing input would otherwise print a traceback per block, and then
    a warning for every transfer the failure cancelled.
    """

    name = "ddr-quiet-task-errors"

    def setup(self, worker: Any) -> None:
        for name in {logger for logger, _, _ in _ECHOES}:
            logging.getLogger(name).addFilter(_not_an_echo)

    def teardown(self, worker: Any) -> None:
        for name in {logger for logger, _, _ in _ECHOES}:
            logging.getLogger(name).removeFilter(_not_an_echo)


def _not_an_echo(record: logging.LogRecord) -> bool:
    msg = str(record.msg)
    for name, start, contains in _ECHOES:
        if record.name == name and msg.startswith(start) and contains in record.getMessage():
            return False
    return True


class IgnoreInterrupts(WorkerPlugin):
    """A worker plugin for worker processes this process started (a LocalCluster): they
    do not stop on Ctrl-C, which the terminal sends to every process of the group. This
    process stops the run and then closes its cluster; workers that each died of the
    interrupt would print a traceback apiece. A worker that saw Ctrl-C goes quiet as this
    process does (:func:`quiet_interrupted_shutdown`): the scheduler may stop before the
    worker is told to, and its failed heartbeat would print one more."""

    name = "ddr-ignore-interrupts"

    def __init__(self, parent_pid: int) -> None:
        self.parent_pid = parent_pid

    def setup(self, worker: Any) -> None:
        import signal

        # only in a worker's own process, where the event loop runs in the main thread
        if os.getpid() != self.parent_pid and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _quiet_on_interrupt)


def _quiet_on_interrupt(signum: int, frame: Any) -> None:
    quiet_interrupted_shutdown()


def _not_a_cancelled_start(record: logging.LogRecord) -> bool:
    """False for a nanny's record of a worker start cancelled (the cluster closing)."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, asyncio.CancelledError)


def quiet_interrupted_shutdown() -> None:
    """After Ctrl-C the cluster is closed mid-task: distributed's warnings about lost tasks
    and killed workers, and asyncio's about cancelled ones, tell the user nothing (ddr logs
    the interrupt itself)."""
    for name in ("distributed", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def watch_cluster(client: Any, handlers: list[logging.Handler], *, own_workers: bool) -> None:
    """Count ``client``'s tasks for the progress bars in ``handlers`` and quiet its workers'
    per-task tracebacks; ``own_workers`` (a LocalCluster) also keeps Ctrl-C from killing
    the workers before the run stops, and, while :func:`route_warnings` lasts, shows the
    workers' Python warnings here, as ``ddr: warning: ...`` (each text once). A scheduler
    that refuses (no ddr there, no pickled code allowed) keeps its defaults: the bars then
    show passes only."""
    log = logging.getLogger(__name__)
    plugins: list[WorkerPlugin] = [QuietTaskErrors()]
    if own_workers:
        # a LocalCluster's nannies run in this process: one whose worker was still starting
        # when the cluster closed logs the cancellation with a traceback, which says nothing
        logging.getLogger("distributed.nanny").addFilter(_not_a_cancelled_start)
        plugins.append(IgnoreInterrupts(os.getpid()))
        if warnings.showwarning is _show_warning:  # the command line shows warnings its way
            _warnings_from_workers(client)
            plugins.append(WarningsToClient(os.getpid()))
    for plugin in plugins:
        try:
            client.register_plugin(plugin, name=plugin.name)
        except Exception as exc:
            log.debug("worker plugin %s not registered: %s", plugin.name, exc)
    bars = [h for h in handlers if isinstance(h, BarHandler)]
    if not bars:
        return
    try:
        client.run_on_scheduler(_install_counter)
    except Exception as exc:
        log.debug("no task counts from the scheduler: %s", exc)
        return
    for bar in bars:
        bar.tasks = lambda: tuple(client.run_on_scheduler(_read_counter))


# ------------------------------------------------------------------- warnings
#: the logger Python warnings are logged with while a console is set up (a child of ``ddr``:
#: its handlers show them)
WARNINGS = f"{ROOT}.warnings"
#: the topic workers send their warnings to the client under (:class:`WarningsToClient`)
WARNINGS_TOPIC = "ddr-warnings"
_consoles = 0  # consoles set up in this process: warnings go through the logger while > 0


def warning_text(message: Warning | str, category: type[Warning]) -> str:
    """A warning as one message: its text and its category, without its source line."""
    return f"{message} ({category.__name__})"


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: IO[str] | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` while :func:`route_warnings` lasts."""
    if file is not None:  # shown to a file the caller chose: as Python shows it
        with contextlib.suppress(OSError):
            file.write(warnings.formatwarning(message, category, filename, lineno, line))
        return
    _log_warning(warning_text(message, category), filename, lineno)


def _log_warning(text: str, filename: str = __file__, lineno: int = 0) -> None:
    """Log ``text`` through the console's handlers (and the log file), or, with no console
    set up, print it as the console would."""
    logger = logging.getLogger(WARNINGS)
    record = logger.makeRecord(WARNINGS, logging.WARNING, filename, lineno, "%s", (text,), None)
    if _consoles:
        logger.handle(record)
        return
    with contextlib.suppress(OSError, ValueError):  # a closed stderr: nowhere to say it
        sys.stderr.write(_ConsoleFormatter(False).format(record) + "\n")
        sys.stderr.flush()


@contextlib.contextmanager
def route_warnings() -> Iterator[None]:
    """Show Python warnings as ``ddr: warning: message (Category)`` for the block: through
    the ``ddr`` logger's handlers while a :func:`console` is set up (so the log file has
    them too), else on stderr. Which warnings are shown is Python's filters' choice, as
    always (each once per place it is raised, ``-W``, ``PYTHONWARNINGS``). What the ``ddr``
    command installs; the library itself never does."""
    saved = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        yield
    finally:
        if warnings.showwarning is _show_warning:
            warnings.showwarning = saved


class WarningsToClient(WorkerPlugin):
    """A worker plugin for worker processes this process started (a LocalCluster): a
    Python warning raised in a task is sent to the client (:func:`watch_cluster` shows it
    as ``ddr: warning: ...``, once however many workers raise it) instead of being printed
    raw by the worker process onto the same terminal."""

    name = "ddr-warnings-to-client"

    def __init__(self, parent_pid: int) -> None:
        self.parent_pid = parent_pid

    def setup(self, worker: Any) -> None:
        if os.getpid() == self.parent_pid:  # workers in this process: route_warnings has them
            return

        def send(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: IO[str] | None = None,
            line: str | None = None,
        ) -> None:
            if file is not None:
                with contextlib.suppress(OSError):
                    file.write(warnings.formatwarning(message, category, filename, lineno, line))
                return
            try:
                worker.log_event(WARNINGS_TOPIC, {"text": warning_text(message, category)})
            except Exception:  # a closing worker: as Python would show it
                sys.stderr.write(warnings.formatwarning(message, category, filename, lineno))

        warnings.showwarning = send


def _warnings_from_workers(client: Any) -> None:
    """Show the warnings :class:`WarningsToClient` sends, each text once."""
    seen: set[str] = set()

    def show(event: tuple[float, Any]) -> None:
        msg = event[1]
        text = msg.get("text") if isinstance(msg, dict) else None
        if isinstance(text, str) and text not in seen:
            seen.add(text)
            _log_warning(text)

    client.subscribe_topic(WARNINGS_TOPIC, show)


# -------------------------------------------------------------------- console
@contextlib.contextmanager
def console(
    verbosity: int = 0,
    *,
    progress: bool = True,
    log_file: str | os.PathLike | None = None,
    stream: IO[str] | None = None,
) -> Iterator[list[logging.Handler]]:
    """Show the ``ddr`` logger's records for the duration of a command.

    Parameters
    ----------
    verbosity : int
        ``-1`` (``-q``): warnings and errors only; ``0``: progress and notes; ``1`` (``-v``):
        also debug records and tracebacks.
    progress : bool
        A progress bar when ``stream`` is a terminal (else plain lines anyway).
    log_file : path-like, optional
        Also write every record, at debug level with times, to this file (replaced).
    stream : file, optional
        Where the console output goes (default ``sys.stderr``).

    Yields
    ------
    list of logging.Handler
        The handlers attached (give them to :func:`watch_cluster`).
    """
    stream = stream or sys.stderr
    level = {-1: logging.WARNING, 0: logging.INFO}.get(verbosity, logging.DEBUG)
    tracebacks = verbosity > 0
    tty = bool(getattr(stream, "isatty", lambda: False)())
    screen: logging.Handler
    untask: Callable[[], None] | None = None
    if progress and tty and level <= logging.INFO:
        bar = BarHandler(stream, tracebacks=tracebacks)
        bar.tasks, untask = _local_task_counts()
        screen = bar
    else:
        screen = LineHandler(stream, tracebacks=tracebacks)
    screen.setLevel(level)
    handlers = [screen]

    def warn(message: str) -> None:  # straight to the screen: the logger may be detached
        screen.handle(logging.LogRecord(ROOT, logging.WARNING, __file__, 0, message, None, None))

    if log_file is not None:
        path = Path(log_file)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            to_file: logging.Handler | None = LogFile(path, warn)
        except OSError as exc:
            warn(log_file_failed(path, exc))
            to_file = None
        if to_file is not None:
            to_file.setLevel(logging.DEBUG)
            handlers.append(to_file)
    logger = logging.getLogger(ROOT)
    saved = logger.level, logger.propagate
    logger.setLevel(logging.DEBUG if len(handlers) > 1 else level)
    logger.propagate = False  # shown here, not again by a root handler
    for h in handlers:
        logger.addHandler(h)
    # asyncio's complaints come from distributed's client internals (a task cancelled by
    # Ctrl-C, ...): the log file keeps them, the terminal shows them with -v
    aio = logging.getLogger("asyncio")
    aio_handlers = handlers if tracebacks else handlers[1:]
    aio_saved = aio.propagate
    aio.propagate = False
    for h in aio_handlers:
        aio.addHandler(h)
    global _consoles
    _consoles += 1
    try:
        with route_warnings():  # Python warnings as ddr: warning: lines, and in the log file
            yield handlers
    finally:
        _consoles -= 1
        for h in aio_handlers:
            aio.removeHandler(h)
        aio.propagate = aio_saved
        for h in handlers:
            logger.removeHandler(h)
            h.close()
        if untask is not None:
            untask()
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
