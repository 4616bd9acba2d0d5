"""The run summary: what a run did, per step and per output, with wall time and passes.

Printed by ``ddr run`` (:meth:`RunSummary.format`) and written as JSON (``run.summary`` or
``--summary``). Passes are *measured*: chunk bytes read from each stored input in every
process, divided by its stored size; each task's read counts once, however often a lost
worker made dask run it (the bytes read again are reported apart, ``read_again``).

A summary that cannot be written where it should go (a store that stopped answering, a full
disk) is written to a local fallback file instead, and a warning says where
(:meth:`RunSummary.write`, :func:`written_to`): a run never loses its summary, nor fails
for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OutputResult", "RunClock", "RunSummary", "StepResult", "written_to"]

logger = logging.getLogger("ddr.pipeline.summary")

# summaries this process could not write where they should go -> where they went instead
_FALLBACKS: dict[Any, Any] = {}
_fallback_lock = threading.Lock()


@dataclass
class RunClock:
    """Where the wall time of a run goes, part by part.

    ``started`` is when the clock started (seconds since the epoch): the ``ddr`` command
    gives its process start (:meth:`since_process_start`), so the whole wall time includes
    starting Python and the cluster; :func:`ddr.pipeline.run` called from Python without a
    clock starts one itself.
    Parts, in order: ``start-up`` (imports, reading and checking the pipeline), ``cluster
    start``, ``passes`` (dask computes over the data, including the final pass that streams
    chunks to Zarr), ``writes`` (metadata, models, metrics, plots, completion markers),
    ``other`` (client-side solves, building graphs) and ``cluster shutdown``.
    """

    started: float = field(default_factory=time.time)
    parts: dict[str, float] = field(default_factory=dict)

    @classmethod
    def since_process_start(cls) -> RunClock:
        """A clock started when this process started (Python's start-up included): what
        the ``ddr`` command times its run with."""
        import psutil

        try:
            started = psutil.Process().create_time()
        except psutil.Error:  # pragma: no cover - no process table
            started = time.time()
        return cls(started=started)

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] = self.parts.get(part, 0.0) + max(seconds, 0.0)

    @contextlib.contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Add the time spent in the block to ``part`` (also when it raises)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(part, time.perf_counter() - start)

    def wall(self) -> float:
        """Seconds since ``started``."""
        return time.time() - self.started

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.parts.items()}


@dataclass
class StepResult:
    id: str
    op: str
    action: str  # "fit", "fit (one shared pass)", "loaded", "lazy", "skipped", "computed"
    phase: int | None = None
    seconds: float = 0.0
    passes: dict[str, float] = field(default_factory=dict)
    shared_with: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class OutputResult:
    path: str
    kind: str
    action: str  # "written", "skipped"
    reason: str = ""  # what the planner found there before the run: "missing", ...
    phase: int | None = None
    seconds: float = 0.0
    passes: dict[str, float] = field(default_factory=dict)


@dataclass
class RunSummary:
    """What a run did: wall time, and per step and output what happened and what it read."""

    pipeline: str
    file: str
    status: str = "running"  # "ok", "failed", "interrupted"
    error: str | None = None
    started: str = ""
    wall_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    scheduler: str = ""
    dashboard: str | None = None
    ddr_version: str = ""
    steps: list[StepResult] = field(default_factory=list)
    outputs: list[OutputResult] = field(default_factory=list)
    passes: dict[str, float] = field(default_factory=dict)
    planned_passes: dict[str, str] = field(default_factory=dict)
    #: passes' worth of bytes read again to recompute tasks after workers were lost (not in
    #: ``passes``, which count each task's read once)
    read_again: dict[str, float] = field(default_factory=dict)
    #: what ``--update`` did (:class:`ddr.pipeline.update_report.UpdateReport`): rows that
    #: were new, passes over them and over every row, seconds; None for other runs
    update: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: Any) -> Any:
        """Write the summary as JSON to a local path, a URL or a
        :class:`~ddr.io.locations.Location` (whole or not at all; secrets redacted).

        When it cannot be written there (the store does not answer, the disk is full, ...),
        it goes to a local fallback file, and one warning says why and where; this
        process's later writes to ``path`` go to that file (:func:`written_to`). Never
        raises for the write: the summary reports a run, and cannot fail it.

        Returns
        -------
        Location or None
            Where the summary is; None when the fallback could not be written either (an
            error says so).
        """
        from ddr.io.locations import resolve

        target = resolve(path)
        moved = _FALLBACKS.get(target)
        if moved is None:
            try:
                self._write_to(target)
                return target
            except Exception as exc:  # whatever the storage raised: the fallback takes it
                return self._write_fallback(target, exc)
        try:
            self._write_to(moved)
            return moved
        except Exception as exc:
            from ddr.io.locations import redact

            why = redact(str(exc))
            logger.error("could not write the run summary to %s either: %s", moved.shown, why)
            return None

    def _write_to(self, where: Any) -> None:
        from ddr.pipeline.reports import write_json

        write_json(where, self.to_dict(), None)

    def _write_fallback(self, target: Any, exc: Exception) -> Any:
        """Write to a local file in the working directory (else the temporary directory)
        after writing to ``target`` failed with ``exc``; say so once."""
        from ddr.io.locations import redact, resolve

        why = _without_prefix(redact(str(exc)) or type(exc).__name__, target.url)
        given = Path(target.path)
        stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        name = f"{given.stem or 'run-summary'}.fallback-{stamp}{given.suffix or '.json'}"
        failed = []
        for folder in (os.getcwd(), tempfile.gettempdir()):
            moved = resolve(os.path.join(folder, name))
            try:
                self._write_to(moved)
            except Exception as again:
                failed.append(f"{moved.shown}: {redact(str(again))}")
                continue
            with _fallback_lock:
                _FALLBACKS[target] = moved
            logger.warning(
                "could not write the run summary to %s: %s; wrote it to %s instead",
                target.shown,
                why,
                moved.shown,
            )
            return moved
        logger.error(
            "could not write the run summary to %s: %s; nor to a local file: %s",
            target.shown,
            why,
            "; ".join(failed),
        )
        return None

    @classmethod
    def read(cls, path: Any) -> RunSummary:
        """A summary written by :meth:`write` (a path, URL or Location)."""
        import json

        from ddr.io.locations import resolve

        data = json.loads(resolve(path).read_bytes().decode("utf-8"))
        steps = [StepResult(**s) for s in data.pop("steps", [])]
        outputs = [OutputResult(**o) for o in data.pop("outputs", [])]
        return cls(**data, steps=steps, outputs=outputs)

    def clocked(self, clock: RunClock) -> None:
        """Take the whole wall time and its parts from ``clock`` (now)."""
        self.wall_seconds = round(clock.wall(), 3)
        self.timings = clock.rounded()

    def format(self) -> str:
        """The summary as a text table (what ``ddr run`` prints)."""
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items())
        lines = [
            f"run {self.pipeline}: {self.status} in {self.wall_seconds:.2f} s"
            + (f" ({parts})" if parts else ""),
            f"  scheduler: {self.scheduler}",
        ]
        if self.error:
            lines.append(f"  error: {self.error}")
        if self.steps:
            w = max(len(s.id) for s in self.steps)
            wo = max(len(s.op) for s in self.steps)
            lines.append(f"  {'step':<{w}}  {'op':<{wo}}  {'seconds':>8}  action / passes")
            for s in self.steps:
                passes = _fmt_passes(s.passes)
                extra = f" (one pass for {len(s.shared_with) + 1} steps)" if s.shared_with else ""
                note = f" ({s.note})" if s.note else ""
                lines.append(
                    f"  {s.id:<{w}}  {s.op:<{wo}}  {s.seconds:8.2f}  {s.action}{note}"
                    f"{'; ' + passes if passes else ''}{extra}"
                )
        for o in self.outputs:
            passes = _fmt_passes(o.passes)
            found = _found(o)
            lines.append(
                f"  {o.action:<8} {o.kind:<7} {_rel(o.path)}  ({o.seconds:.2f} s"
                f"{'; ' + passes if passes else ''}{'; ' + found if found else ''})"
            )
        if self.passes:
            planned = ", ".join(f"{k} {v}" for k, v in self.planned_passes.items())
            lines.append(f"  passes over inputs: {_fmt_passes(self.passes)} (planned: {planned})")
        from ddr.pipeline.update_report import update_lines

        lines.extend(update_lines(self.update))
        if any(v > 0 for v in self.read_again.values()):
            lines.append(
                f"  read again after lost workers: {_fmt_passes(self.read_again)} (not counted "
                "above)"
            )
        return "\n".join(lines)


def written_to(path: Any) -> Any:
    """Where this process's run summaries for ``path`` (a path, URL or Location) are: the
    local fallback file after a write there failed, else ``path``'s location."""
    from ddr.io.locations import resolve

    target = resolve(path)
    return _FALLBACKS.get(target, target)


def _without_prefix(text: str, url: str) -> str:
    """An error message without the ``"<url>: "`` it starts with (the caller names it)."""
    return text[len(url) + 2 :] if text.startswith(f"{url}: ") else text


def _found(o: OutputResult) -> str:
    """What the run found at an output before it ran: an output it wrote ``was missing``
    (``was complete but outdated: ...``); one it kept is ``complete, same fingerprint``
    before and after."""
    if not o.reason or o.action == "skipped":
        return o.reason
    return f"was {o.reason}"


def _fmt_passes(passes: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f} passes" for k, v in passes.items() if v > 0)


def _rel(path: str) -> str:
    """A path for display: relative to the working directory when below it; URLs as they
    are."""
    if "://" in path:
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("../..") else path
