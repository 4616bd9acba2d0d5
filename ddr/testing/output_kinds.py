"""The conformance suite of output kinds: what every registered kind must do.

For each example a kind gives (:meth:`ddr.pipeline.outputs.OutputKind.examples`), in a
small pipeline over a demo dataset:

- **write**: a run writes it; its kind reads it back as complete, with the planned
  fingerprint and its provenance;
- **inspect**: ``ddr inspect --json`` recognises it (its kind, complete, the fingerprint;
  exit code 0);
- **resume**: a rerun with ``--resume`` keeps it (planned as ``skip``, not rewritten);
- **crash**: a run killed at any write before the one that marks it complete leaves it
  incomplete or missing, never complete; the first state that reads as complete holds what
  an uninterrupted run wrote; ``ddr inspect`` says INCOMPLETE or missing (exit code 1 or 2);
  a rerun with ``--resume`` completes it.

A kill is simulated in this process: an audit hook (:func:`sys.addaudithook`) counts the
file-system writes into the output (opens for writing, renames, removals, new folders, at
its path, below it, or the temporary file beside it that is renamed into place) and raises
:class:`Killed` at the k-th, and at every later one, before it happens. The writes of an
output kind that does not go through local files are not seen (its crash check then
fails: the write was never interrupted).

Use it in a plug-in's tests, over every registered kind (so registering a kind puts it under
test)::

    from ddr.testing import check_output_kind, parametrize_with_output_kind_checks

    @parametrize_with_output_kind_checks()
    def test_output_kind(case, tmp_path):
        check_output_kind(case, tmp_path)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Killed",
    "OutputKindCase",
    "check_crash",
    "check_inspect",
    "check_output_kind",
    "check_resume",
    "check_write",
    "output_kind_cases",
    "parametrize_with_output_kind_checks",
]

#: the demo dataset the examples read (inputs ``X`` and ``y``): small, several chunks
DATA = {"n_samples": 240, "n_features": 3, "rank": 2, "n_classes": 3, "chunk_rows": 60, "seed": 0}
#: what ``ddr inspect`` shows that differs between two runs writing the same output
VOLATILE = ("path", "bytes", "provenance", "history", "claim", "version")


@dataclass(frozen=True)
class OutputKindCase:
    """One example of one registered output kind.

    Parameters
    ----------
    kind : str
        The kind's name.
    index : int
        Which of its examples.
    example : dict
        The example (its output entry and steps).
    """

    kind: str
    index: int
    example: dict[str, Any]

    def __str__(self) -> str:
        plot = self.example["output"].get("plot")
        return f"{self.kind}-{plot}" if plot else f"{self.kind}-{self.index}"


def output_kind_cases() -> list[OutputKindCase]:
    """Every example of every registered output kind (what to parametrize tests over)."""
    from ddr.pipeline.outputs import output_kinds

    return [
        OutputKindCase(name, i, example)
        for name, kind in output_kinds().items()
        for i, example in enumerate(kind.examples())
    ]


def parametrize_with_output_kind_checks(cases: list[OutputKindCase] | None = None) -> Any:
    """A pytest parametrisation of ``case`` over ``cases``, with ids ``"kind-index"``.

    Parameters
    ----------
    cases : list of OutputKindCase, optional
        Default: every example of every registered kind (:func:`output_kind_cases`).

    Returns
    -------
    decorator
        ``pytest.mark.parametrize``; a plot's id names it (``"plot-kde"``).
    """
    import pytest

    cases = output_kind_cases() if cases is None else cases
    return pytest.mark.parametrize("case", cases, ids=[str(c) for c in cases])


def check_output_kind(case: OutputKindCase, workdir: str | os.PathLike) -> None:
    """Every check of the suite on ``case``, in ``workdir``.

    Parameters
    ----------
    case : OutputKindCase
        The example.
    workdir : str or path-like
        An empty directory.
    """
    work = _Work(case, Path(workdir))
    check_write(work)
    check_inspect(work)
    check_resume(work)
    check_crash(work)


# ------------------------------------------------------------------------ the checks
def check_write(work: _Work) -> None:
    """A run writes the output; its kind reads it back as complete, with the planned
    fingerprint and a provenance naming the kind."""
    plan, summary = work.run()
    out = plan.outputs[0]
    assert summary.outputs[0].action == "written", summary.outputs[0]
    status, fingerprint = work.kind().status(out.location)
    assert status == "complete", f"{work.case}: written, but its kind reads {status!r}"
    assert fingerprint == out.fingerprint, f"{work.case}: stored {fingerprint!r}"
    provenance = work.kind().read_provenance(out.location)
    assert isinstance(provenance, dict), f"{work.case}: no provenance read back"
    assert provenance.get("output", {}).get("kind") == work.case.kind, provenance
    work.reference = work.shown()


def check_inspect(work: _Work) -> None:
    """``ddr inspect`` recognises the complete output: its kind, complete, the fingerprint."""
    info, code = work.inspect()
    assert code == 0, f"{work.case}: ddr inspect exits {code}: {info}"
    assert info.get("kind") == work.case.kind, f"{work.case}: ddr inspect says {info}"
    assert info["status"] == "complete" and info.get("fingerprint") == work.fingerprint(), info


def check_resume(work: _Work) -> None:
    """A rerun with ``--resume`` keeps the complete output: planned as skip, not rewritten."""
    before = work.provenance()
    plan, summary = work.run(resume=True)
    out = plan.outputs[0]
    assert out.action == "skip", f"{work.case}: --resume plans {out.action} ({out.reason})"
    assert summary.outputs[0].action == "skipped", summary.outputs[0]
    assert work.provenance() == before, f"{work.case}: --resume rewrote it"


def check_crash(work: _Work, *, limit: int = 12) -> None:
    """A run killed at any write before the one that marks the output complete leaves it
    incomplete or missing; the first state that reads as complete is whole; ``ddr inspect``
    says so; ``--resume`` completes a killed one.

    The writes are counted in one uninterrupted run; the kill points tried are the first
    write and a binary search for the first kill that leaves the output complete (at most
    ``limit`` runs).
    """
    if work.reference is None:
        check_write(work)
    work.clean()
    with _watching(work.target) as watch:
        work.run()
    total = watch.count
    assert total > 0, f"{work.case}: no write into the output was seen (not on local files?)"

    def complete_after_kill(k: int) -> bool:
        work.clean()
        with _watching(work.target, kill_at=k):
            try:
                work.run()
            except Killed:
                pass
            else:
                raise AssertionError(f"{work.case}: the run was not killed at write {k}")
        status = work.status()
        if status == "complete":
            return True
        assert status in ("incomplete", "missing"), f"{work.case}: killed at {k}: {status}"
        return False

    assert not complete_after_kill(1), f"{work.case}: complete before its first write"
    info, code = work.inspect()
    assert code in (1, 2), f"{work.case}: killed at write 1, ddr inspect exits {code}: {info}"
    lo, hi, runs = 1, total + 1, 1  # not complete when killed at lo; complete at hi
    while hi - lo > 1 and runs < limit:
        mid = (lo + hi) // 2
        runs += 1
        if complete_after_kill(mid):
            hi = mid
        else:
            lo = mid
    if hi <= total:  # the first state that reads complete holds what a whole run wrote
        complete_after_kill(hi)
        assert work.shown() == work.reference, f"{work.case}: complete after a kill at {hi}"
    complete_after_kill(lo)  # the last state before: not complete, and inspect says so
    info, code = work.inspect()
    assert code in (1, 2), f"{work.case}: killed at write {lo}, ddr inspect exits {code}"
    plan, _ = work.run(resume=True)
    assert work.status() == "complete", f"{work.case}: --resume after a kill left it so"
    assert work.fingerprint() == plan.outputs[0].fingerprint


# ------------------------------------------------------------------------ one case
class _Work:
    """A case's pipeline, data and output in a directory, and how to look at the output."""

    def __init__(self, case: OutputKindCase, root: Path) -> None:
        from ddr.demo import DemoSpec, write_demo_data

        self.case = case
        self.root = root.resolve()
        self.reference: dict[str, Any] | None = None
        data = self.root / "data.zarr"
        if not data.exists():
            import dask

            with dask.config.set(scheduler="sync"):
                write_demo_data(data, DemoSpec(**DATA))
        output = {"kind": case.kind, **case.example["output"]}
        output["path"] = str(self.root / "out" / output["path"])
        self.target = output["path"]
        pipeline = {
            "ddr": 1,
            "name": f"conformance-{str(case).replace('_', '-')}",
            "inputs": {
                "X": {"path": str(data), "array": "X"},
                "y": {"path": str(data), "array": "y"},
            },
            "steps": case.example.get("steps", {}),
            "outputs": [output],
        }
        self.file = self.root / "pipeline.yaml"
        self.file.write_text(json.dumps(pipeline, indent=2))  # JSON is YAML

    def run(self, *, resume: bool = False) -> tuple[Any, Any]:
        import dask

        from ddr.pipeline import plan_pipeline, run_plan

        with dask.config.set(scheduler="sync"):
            plan = plan_pipeline(str(self.file), resume=resume)
            return plan, run_plan(plan, argv=["ddr", "run", str(self.file)])

    def location(self) -> Any:
        from ddr.io.locations import resolve

        return resolve(self.target)

    def kind(self) -> Any:
        from ddr.pipeline.outputs import output_kind

        return output_kind(self.case.kind)

    def status(self) -> str:
        return self.kind().status(self.location())[0]

    def fingerprint(self) -> str | None:
        return self.kind().status(self.location())[1]

    def provenance(self) -> dict[str, Any] | None:
        return self.kind().read_provenance(self.location())

    def inspect(self) -> tuple[dict[str, Any], int]:
        """``ddr inspect PATH --json``: what it printed and its exit code."""
        from typer.testing import CliRunner

        from ddr.cli import app

        with warnings.catch_warnings():  # zarr on the temporary file a killed write left
            warnings.filterwarnings("ignore", "Object at .* is not recognized", UserWarning)
            result = CliRunner().invoke(app, ["inspect", self.target, "--json"])
        return json.loads(result.stdout), result.exit_code

    def shown(self) -> dict[str, Any]:
        """What ``ddr inspect`` shows, without what differs between runs."""
        info, _ = self.inspect()
        return {k: v for k, v in info.items() if k not in VOLATILE}

    def clean(self) -> None:
        """Remove the output (and a claim a killed run left beside it)."""
        from ddr.io.claims import claim_location

        location = self.location()
        location.remove()
        claim_location(location).remove()


# --------------------------------------------------------------------- simulated kills
class Killed(BaseException):
    """A simulated kill: raised before a write into the output. A BaseException, so that
    no ``except Exception`` on the way lets the run go on writing."""


class _Watch:
    def __init__(self, target: str, kill_at: int | None) -> None:
        self.target = os.path.abspath(target)
        self.parent, self.name = os.path.split(self.target)
        self.kill_at = kill_at
        self.count = 0
        self.killed = False

    def owns(self, path: Any) -> bool:
        if isinstance(path, int) or path is None:
            return False
        path = os.path.abspath(os.fsdecode(path))
        if path == self.target or path.startswith(self.target + os.sep):
            return True
        head, tail = os.path.split(path)  # the temporary file renamed into place
        return head == self.parent and tail.startswith(f".{self.name}.tmp-")


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_lock = threading.Lock()
_current: list[_Watch] = []
_hooked: list[bool] = []


def _written(event: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The paths an audit event writes to (none for reads and other events)."""
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(flags, int) and flags & _WRITE_FLAGS) or (
            isinstance(mode, str) and any(c in mode for c in "wax+")
        )
        return (path,) if writes else ()
    if event == "os.rename":
        return args[:2]
    if event in ("os.remove", "os.rmdir", "os.mkdir", "os.truncate", "shutil.rmtree"):
        return args[:1]
    return ()


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _current:
        return
    watch = _current[0]
    paths = _written(event, args)
    if not any(watch.owns(p) for p in paths):
        return
    with _lock:
        watch.count += 1
        if watch.kill_at is not None and (watch.killed or watch.count >= watch.kill_at):
            watch.killed = True
            raise Killed(f"killed before write {watch.count} ({event} {paths[0]})")


class _watching:
    """Count (and from ``kill_at`` on, refuse) the writes into ``target`` while inside."""

    def __init__(self, target: str, kill_at: int | None = None) -> None:
        self.watch = _Watch(target, kill_at)

    def __enter__(self) -> _Watch:
        if not _hooked:  # an audit hook cannot be removed: one, idle outside this block
            sys.addaudithook(_hook)
            _hooked.append(True)
        _current[:] = [self.watch]
        return self.watch

    def __exit__(self, *exc: Any) -> None:
        _current.clear()
