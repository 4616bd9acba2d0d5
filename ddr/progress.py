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
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["PROGRESS_ATTR", "Passes", "Progress"]

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
