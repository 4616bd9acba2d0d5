"""Progress of long work, reported through the :mod:`logging` module.

Library code never prints: a fit that reads the data several times reports each pass (and
an EM fit each iteration, with its log-likelihood) as one ``INFO`` record on its module's
logger under ``ddr``. How the records are shown is the application's choice; the ``ddr``
command line (:mod:`ddr._log`) shows a progress bar on a terminal and one plain line per
record otherwise, and writes every record to a log file beside the run summary.

A record that reports progress carries a :class:`Progress` in its ``ddr_progress``
attribute, so a handler can draw a bar from it without parsing the message::

    passes = Passes(logging.getLogger(__name__), "PCA (randomized)", total=4, unit="pass")
    for i in range(4):
        with passes.step():
            ...  # one read of the data
    # INFO "PCA (randomized): pass 1 of 4 (2.31 s)" ... one line per pass

With Python's default logging configuration (no handler on ``ddr``), nothing is shown
below ``WARNING``: ``logging.basicConfig(level=logging.INFO)`` shows the lines.

In a Jupyter kernel (Jupyter, JupyterLab, VS Code, Colab: :func:`in_notebook`), each job
also shows a progress bar in the output of the running cell, updated in place at each pass
(:class:`NotebookBar`: an HTML ``<progress>`` through IPython's display handles, so it needs
no widget extension and no package beyond the kernel's own);
:func:`set_notebook_progress` turns the bars off.
"""

from __future__ import annotations

import contextlib
import html
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PROGRESS_ATTR",
    "NotebookBar",
    "Passes",
    "Progress",
    "in_notebook",
    "set_notebook_progress",
]

#: the attribute of a :class:`logging.LogRecord` that holds its :class:`Progress`
PROGRESS_ATTR = "ddr_progress"


@dataclass(frozen=True)
class Progress:
    """Where a multi-step job stands: ``done`` of ``total`` units (``total`` None: unknown).

    ``finished`` marks the last record of the job (a bar for it can be closed).
    """

    what: str
    done: int
    total: int | None
    unit: str = "pass"
    finished: bool = False

    @property
    def fraction(self) -> float | None:
        """``done / total``, or None when the total is not known."""
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


class Passes:
    """Report the passes (or iterations) of one job on ``logger``, one INFO record each.

    Parameters
    ----------
    logger : logging.Logger
        The reporting module's logger (``logging.getLogger(__name__)``).
    what : str
        What runs, e.g. ``"PCA (randomized)"``; every message starts with it.
    total : int, optional
        How many passes there will be, when known (EM: the upper bound is not the total).
    unit : str
        ``"pass"`` or ``"iteration"``.
    """

    def __init__(
        self, logger: logging.Logger, what: str, total: int | None = None, unit: str = "pass"
    ) -> None:
        self.logger = logger
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0
        self._started = time.perf_counter()
        self._step_started = self._started
        self._bar: NotebookBar | None = None  # in a Jupyter kernel: this job's bar

    def start(self, message: str) -> None:
        """Say what starts (e.g. ``"4 passes over X"``): a record with 0 passes done."""
        self._started = self._step_started = time.perf_counter()
        self._log(f"{self.what}: {message}", finished=False)

    def begin(self) -> None:
        """A pass starts now (its record, logged by :meth:`advance`, says how long it took)."""
        self._step_started = time.perf_counter()

    @contextlib.contextmanager
    def step(self, detail: str = "") -> Iterator[None]:
        """Time one pass; its record is logged when it ends (not when it fails)."""
        self.begin()
        yield
        self.advance(detail)

    def advance(self, detail: str = "") -> None:
        """One more pass done (``detail`` is appended, e.g. the log-likelihood)."""
        self.done += 1
        seconds = time.perf_counter() - self._step_started
        of = f" of {self.total}" if self.total else ""
        extra = f"; {detail}" if detail else ""
        self._log(
            f"{self.what}: {self.unit} {self.done}{of} ({seconds:.2f} s{extra})",
            finished=self.total is not None and self.done >= self.total,
        )
        self.begin()

    def finish(self, message: str) -> None:
        """Close the job with a summary line (e.g. ``"converged after 12 iterations"``)."""
        seconds = time.perf_counter() - self._started
        self._log(f"{self.what}: {message} ({seconds:.2f} s in all)", finished=True)

    def _log(self, message: str, *, finished: bool) -> None:
        progress = Progress(self.what, self.done, self.total, self.unit, finished)
        self.logger.info(message, extra={PROGRESS_ATTR: progress})
        if _NOTEBOOK["enabled"] and in_notebook():
            if self._bar is None:
                self._bar = NotebookBar()
            self._bar.show(progress, message, time.perf_counter() - self._started)


# ------------------------------------------------------------------- notebooks
_NOTEBOOK = {"enabled": True}


def set_notebook_progress(enabled: bool) -> None:
    """Show a progress bar per job in a Jupyter kernel (``True``, the default) or not.

    Parameters
    ----------
    enabled : bool
        False: in a notebook too, progress is only logged.
    """
    _NOTEBOOK["enabled"] = bool(enabled)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel, where a cell's output can show HTML.

    True when IPython is imported (never imported here) and its shell is a kernel's
    (``ZMQInteractiveShell`` or a subclass: Jupyter, JupyterLab, VS Code, Colab, an
    in-process kernel); False in a terminal IPython, a script, a dask worker.

    Returns
    -------
    bool
    """
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # a half-imported or broken IPython: no notebook to draw in
        return False
    return shell is not None and any(
        cls.__name__ == "ZMQInteractiveShell" for cls in type(shell).__mro__
    )


class NotebookBar:
    """One job's progress in a notebook cell's output: an HTML ``<progress>`` bar with the
    job's last message, shown once and updated in place (an IPython display handle).

    Display failures (no frontend, an old IPython) turn the bar off; they never fail the
    work it reports.
    """

    def __init__(self) -> None:
        self._handle: Any = None
        self._failed = False

    def show(self, progress: Progress, message: str, seconds: float) -> None:
        """Show (first call) or update the bar: ``progress`` and ``message`` now."""
        if self._failed:
            return
        bundle = {"text/html": bar_html(progress, message, seconds), "text/plain": message}
        try:
            import importlib

            display = importlib.import_module("IPython.display").display  # the kernel's
            if self._handle is None:
                self._handle = display(bundle, raw=True, display_id=True)
            else:
                self._handle.update(bundle, raw=True)
        except Exception:
            self._failed = True


def bar_html(progress: Progress, message: str, seconds: float) -> str:
    """The HTML of a notebook bar: the ``<progress>`` element (indeterminate while the total
    is unknown), the units done and the job's last message.

    Parameters
    ----------
    progress : Progress
        Where the job stands.
    message : str
        Its last record's message.
    seconds : float
        Time since the job started.

    Returns
    -------
    str
    """
    p = progress
    if p.finished:
        value = ' value="1" max="1"'
    elif p.total:
        value = f' value="{p.done}" max="{p.total}"'
    else:
        value = ""  # indeterminate: EM until it converges
    of = f" of {p.total}" if p.total else ""
    state = "done" if p.finished else f"{p.unit} {min(p.done + 1, p.total or p.done + 1)}{of}"
    return (
        '<div class="ddr-progress" style="font-family: monospace; margin: 2px 0">'
        f'<progress{value} style="width: 16em; vertical-align: middle"></progress> '
        f"<b>{html.escape(p.what)}</b>: {html.escape(state)}, {seconds:.1f} s"
        f'<div style="color: #666">{html.escape(message)}</div></div>'
    )
