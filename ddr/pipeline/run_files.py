"""The files a run writes besides its outputs, and the one check every written path passes.

A run writes its outputs (``outputs:``), a claim beside each of them (:mod:`ddr.io.claims`),
and run files: the summary (``run.summary`` or ``--summary``), the log beside a local
summary, and the dask performance report (``run.performance_report`` or
``--performance-report``). Whatever the source of a path (the pipeline file, a ``--set``
override, a command-line option, an argument of :func:`ddr.pipeline.run_plan`), it is
resolved here and checked by :func:`clash` against every input and every other path the run
writes, before anything is read or written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddr.io.locations import Location, resolve

__all__ = [
    "RUN_FILE_OPTIONS",
    "RunFile",
    "clash",
    "log_location",
    "refusals",
    "run_files",
    "run_location",
]

#: the run options that name a file the run writes, and their command-line option
RUN_FILE_OPTIONS = {"summary": "--summary", "performance_report": "--performance-report"}

_WHAT = {
    "summary": "the run summary",
    "log": "the run log",
    "performance_report": "the performance report",
}


@dataclass(frozen=True)
class RunFile:
    """A file the run writes that is not an output.

    Attributes
    ----------
    kind : str
        ``"summary"``, ``"log"`` or ``"performance_report"``.
    value : str
        The path as given (a log: its summary's, from which it is derived).
    location : Location
        Where it goes.
    origin : str
        Where the path came from: ``"run.summary"``, ``"--summary"``, ...; a log has the
        origin of its summary.
    """

    kind: str
    value: str
    location: Location
    origin: str

    @property
    def what(self) -> str:
        return _WHAT[self.kind]


def run_location(path: str, storage_options: Mapping[str, Any] | None) -> Location:
    """Where a run file goes: ``run.storage_options`` apply to URLs only (a local
    ``--summary`` beside a pipeline that writes to S3 is fine)."""
    return resolve(path, storage_options if "://" in path else None)


def log_location(summary: Location) -> Location | None:
    """The log file beside a local summary (``run.json`` -> ``run.log``); None at a URL (a
    log at a URL would be rewritten whole each time it grows)."""
    if not summary.is_local:
        return None
    return resolve(Path(summary.path).with_suffix(".log"))


def run_files(
    run_opts: Any,
    given: Mapping[str, str | os.PathLike[str] | None] | None = None,
    *,
    origins: Mapping[str, str] = RUN_FILE_OPTIONS,
    errors: list[tuple[str, str, str]] | None = None,
) -> list[RunFile]:
    """The run files of a run: ``given`` values (the command line, or :func:`run_plan`'s
    arguments, named in messages by ``origins``) replace the pipeline's ``run:`` values; a log
    goes beside a local summary.

    Raises
    ------
    ddr.io.locations.LocationError
        A malformed path or URL, unless ``errors`` is given: then ``(origin, value,
        message)`` is appended to it for each and the others are still resolved.
    """
    from ddr.io.locations import LocationError

    given = given or {}
    storage = getattr(run_opts, "storage_options", None)
    out = []
    for key in RUN_FILE_OPTIONS:
        value = given.get(key)
        origin = origins[key] if value else f"run.{key}"
        value = value or getattr(run_opts, key, None)
        if not value:
            continue
        value = os.fspath(value)
        try:
            loc = run_location(value, storage)
        except LocationError as exc:
            if errors is None:
                raise
            errors.append((origin, value, str(exc)))
            continue
        out.append(RunFile(key, value, loc, origin))
        if key == "summary":
            log = log_location(loc)
            if log is not None:
                out.append(RunFile("log", value, log, origin))
    return out


def clash(
    path: Location,
    inputs: Iterable[tuple[str, Location]],
    written: Iterable[tuple[str, Location]] = (),
) -> str | None:
    """Why ``path`` may not be written, or None.

    Parameters
    ----------
    path : Location
        A path the run writes.
    inputs : iterable of (name, Location)
        Every input of the run.
    written : iterable of (description, Location)
        The other paths the run writes (outputs, their claims, other run files).
    """
    for name, inp in inputs:
        if path.overlaps(inp):
            rel = "is" if path == inp else "is inside" if inp.contains(path) else "contains"
            return (
                f"{path.shown}{path.link_note} {rel} the input {name} ({inp.shown}); inputs "
                "are never written"
            )
    for what, other in written:
        if path.overlaps(other):
            rel = "is" if path == other else "is inside" if other.contains(path) else "contains"
            return (
                f"{path.shown} {rel} {what} ({other.shown}); each file the run writes needs "
                "its own path"
            )
    return None


def refusals(
    files: list[RunFile],
    inputs: Iterable[tuple[str, Location]],
    outputs: Iterable[tuple[str, Location]],
) -> list[tuple[RunFile, str]]:
    """The run files that may not be written, each with why: :func:`clash` against every
    input, every output (and its claim) and the run files before it."""
    inputs, outputs = list(inputs), list(outputs)
    out = []
    for i, rf in enumerate(files):
        others = outputs + [(o.what, o.location) for o in files[:i]]
        why = clash(rf.location, inputs, others)
        if why is not None:
            shown = rf.value if rf.kind != "log" else f"{rf.location.shown} (beside the summary)"
            out.append((rf, f"refusing to write {rf.what} {shown}: {why}"))
    return out
