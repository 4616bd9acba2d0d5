"""Errors of pipeline and cluster files, each with the place it was found.

Every problem found while reading, validating or planning a file is a :class:`Problem`
(``file:line:col: message``); they are collected and raised together as one
:class:`PipelineError`, so a user fixes all of them in one go. The command line prints them
one per line and exits with code 2. Lines and columns are 1-based, as editors count them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Location", "PipelineError", "Problem", "RunError", "describe_error"]


@dataclass(frozen=True, order=True)
class Location:
    """A place in a file (1-based line and column), or a command-line override (line 0)."""

    file: str
    line: int = 1
    col: int = 1

    def __str__(self) -> str:
        return self.file if self.line == 0 else f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file, where it is."""

    location: Location
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


class PipelineError(ValueError):
    """A pipeline or cluster file is invalid; found before any data is read.

    Attributes
    ----------
    problems : list of Problem
        Every problem found, sorted by place in the file.
    """

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(set(problems), key=lambda p: (p.location, p.message))
        n = len(self.problems)
        head = f"{n} problem{'s' if n != 1 else ''} found"
        super().__init__(head + ":\n" + "\n".join(str(p) for p in self.problems))


class RunError(RuntimeError):
    """A valid pipeline failed while running (a step raised, a worker died, ...).

    Attributes
    ----------
    step : str or None
        The step (or ``"output <path>"``) that failed.
    """

    def __init__(self, message: str, step: str | None = None) -> None:
        self.step = step
        super().__init__(message if step is None else f"{step}: {message}")


def describe_error(exc: BaseException) -> str:
    """``"Type: message"`` for a run's error; a computation cancelled with a reason (ddr's
    watch of a cluster with no worker left) is its reason alone."""
    from concurrent.futures import CancelledError

    reason = getattr(exc, "msg", None)
    if isinstance(exc, CancelledError) and isinstance(reason, str) and reason:
        return reason
    return f"{type(exc).__name__}: {exc}"
