"""What a plan holds of the run's state and of an update (``ddr run --update``), and how
``ddr plan`` shows it.

- :class:`StatePlan`: where the run's state goes (:mod:`ddr.pipeline.run_state`), whether
  this run writes it, the records of the inputs as the planner listed them, and the state
  the last run left (read, when there is one);
- :class:`Recording`: how a one-pass mergeable fit is computed so that its statistics can
  be recorded and merged into later: all its rows (``full``), the rows after its recorded
  prefix (``merge``), or none (``recorded``: solved from the recorded statistics);
- :class:`Rows`: the rows of an array an update sees: then, now, and how many of the
  first of them are known to be as they were;
- :class:`UpdatePlan`: what an update found (per input) and decided (per step and per
  output), or why the run is a full run instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddr.io.locations import Location

__all__ = [
    "InputUpdate",
    "Recording",
    "Rows",
    "StatePlan",
    "UpdatePlan",
    "format_update",
    "update_dict",
]


@dataclass
class StatePlan:
    """The run's state: where, whether this run writes it, and what the last run left.

    Attributes
    ----------
    location : Location
        Where the state is (``run.state``, or ``<name>.state.zarr`` beside the first output).
    fingerprint : str
        The state this plan would write (its inputs', steps' and outputs' fingerprints).
    action : {"write", "skip"}
        ``skip``: the state there is complete with the same fingerprint.
    reason : str
        What is there now, in words.
    records : dict
        Input name -> :class:`ddr.pipeline.run_state.InputRecord`, as the planner listed them.
    configs : dict
        Step id -> what identifies it but for the data (:func:`step_config`).
    recorded : list of str
        The steps whose statistics the state keeps (one pass of mergeable statistics).
    old : RunState or None
        The state the last run left (complete), or None.
    old_reason : str
        Why there is none, when there is none.
    """

    location: Location
    fingerprint: str = ""
    action: str = "write"
    reason: str = ""
    records: dict[str, Any] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)
    recorded: list[str] = field(default_factory=list)
    old: Any = None
    old_reason: str = ""

    @property
    def path(self) -> str:
        return self.location.url


@dataclass
class Recording:
    """How a one-pass mergeable step is computed, so that its statistics are recorded.

    Attributes
    ----------
    mode : {"full", "merge", "recorded"}
        ``full``: all its rows are read; ``merge``: the rows from ``read_from`` on are
        read and merged into the recorded prefix; ``recorded``: nothing is read, the model
        is solved from the recorded statistics.
    rows : int
        The rows it fits on now.
    prefix_rows : int
        Where its statistics are split now: the rows in complete stored chunks of every
        input it reads (0: no prefix; ``rows``: all of them).
    read_from : int
        The first row read (0 for ``full``; ``rows`` for ``recorded``).
    old_rows : int
        The rows it was fitted on by the last run (``merge``, ``recorded``).
    why : str
        Why this mode, in words.
    """

    mode: str
    rows: int
    prefix_rows: int
    read_from: int = 0
    old_rows: int = 0
    why: str = ""

    @property
    def new_rows(self) -> int:
        """Rows appended since the last run (``merge``)."""
        return max(self.rows - self.old_rows, 0) if self.mode != "full" else 0

    @property
    def reread_rows(self) -> int:
        """Rows of the last run read again (those of a chunk an append rewrote)."""
        return max(self.old_rows - self.read_from, 0) if self.mode == "merge" else 0


@dataclass(frozen=True)
class Rows:
    """The rows of an array between the last run and this one.

    Attributes
    ----------
    old : int
        Its rows then.
    now : int
        Its rows now.
    clean : int
        Its first ``clean`` rows are known to be as they were (they lie in stored chunks
        that were not rewritten); the rows after are read again.
    """

    old: int
    now: int
    clean: int

    @property
    def unchanged(self) -> bool:
        return self.old == self.now == self.clean

    def meet(self, other: Rows | None) -> Rows | None:
        """The rows of two arrays paired row by row (None when they do not pair)."""
        if other is None or (other.old, other.now) != (self.old, self.now):
            return None
        return Rows(self.old, self.now, min(self.clean, other.clean))


@dataclass
class InputUpdate:
    """What an update found of one input: ``same``, ``appended`` or ``changed`` rows."""

    status: str
    rows: Rows | None = None
    stored: tuple[int, int] | None = None  # stored rows then and now
    why: str = ""


@dataclass
class UpdatePlan:
    """What ``--update`` found and decided (``full_run``: why it is a full run instead)."""

    full_run: str | None = None
    inputs: dict[str, InputUpdate] = field(default_factory=dict)
    outputs: dict[int, str] = field(default_factory=dict)

    @property
    def new_rows(self) -> dict[str, int]:
        """Rows appended to each input that grew (selected rows)."""
        return {
            n: u.rows.now - u.rows.old
            for n, u in self.inputs.items()
            if u.rows is not None and u.rows.now > u.rows.old
        }


def format_update(plan: Any) -> list[str]:
    """The lines ``ddr plan --update`` adds: per input what grew, per step what it reads,
    per output what the update does.

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.

    Returns
    -------
    list of str
        None for a plan that is not an update.
    """
    up: UpdatePlan | None = plan.update
    if up is None:
        return []
    lines = ["update:"]
    if up.full_run is not None:
        lines.append(f"  a full run: {up.full_run}")
    for name, inp in up.inputs.items():
        lines.append(f"  input {name}: {_input_words(inp)}")
    for sid, step in plan.steps.items():
        words = _step_words(step)
        if words:
            lines.append(f"  step {sid}: {words}")
    for index, words in up.outputs.items():
        lines.append(
            f"  output {plan.outputs[index].kind} {_short(plan.outputs[index].path)}: {words}"
        )
    return lines


def _input_words(inp: InputUpdate) -> str:
    if inp.status == "changed":
        return f"changed: {inp.why}"
    rows = inp.rows
    if rows is None:
        return inp.why or inp.status
    if rows.now > rows.old:
        again = rows.old - rows.clean
        reread = f"; {again} rows of a rewritten chunk are read again" if again else ""
        return f"{rows.now - rows.old} new rows ({rows.old} -> {rows.now}){reread}"
    return "no new rows" + (f" ({inp.why})" if inp.why else "")


def _step_words(step: Any) -> str:
    rec: Recording | None = step.recording
    if step.action == "skip":
        return ""
    if rec is None:
        if step.op.family in ("fit", "statistic") and step.action == "run":
            return "reads every row (" + (step.update_note or "a fit of several passes") + ")"
        return ""
    if rec.mode == "recorded":
        return f"no new rows: solved from the recorded statistics ({rec.rows} rows), reads nothing"
    if rec.mode == "merge":
        again = f" and {rec.reread_rows} rows of a rewritten chunk" if rec.reread_rows else ""
        return (
            f"reads the {rec.new_rows} new rows{again} (rows {rec.read_from}:{rec.rows}) and "
            f"merges them into the recorded statistics of {rec.read_from} rows"
        )
    return f"reads every row ({rec.why})" if rec.why else "reads every row"


def _short(path: str) -> str:
    from ddr.pipeline.summary import _rel

    return _rel(path)


def update_dict(plan: Any) -> dict[str, Any] | None:
    """The update as JSON data (``ddr plan --update --json``).

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.

    Returns
    -------
    dict or None
        ``full_run``, ``inputs``, ``steps``, ``outputs``; None for a plan that is not an
        update.
    """
    up: UpdatePlan | None = plan.update
    if up is None:
        return None
    steps = {}
    for sid, step in plan.steps.items():
        rec: Recording | None = step.recording
        if step.action == "skip" or (rec is None and step.op.family not in ("fit", "statistic")):
            continue
        steps[sid] = (
            {"mode": "full", "why": step.update_note}
            if rec is None
            else {
                "mode": rec.mode,
                "rows": rec.rows,
                "read_from": rec.read_from,
                "new_rows": rec.new_rows,
                "reread_rows": rec.reread_rows,
                "why": rec.why,
            }
        )
    return {
        "full_run": up.full_run,
        "inputs": {
            n: {
                "status": u.status,
                "old_rows": None if u.rows is None else u.rows.old,
                "rows": None if u.rows is None else u.rows.now,
                "clean_rows": None if u.rows is None else u.rows.clean,
                "why": u.why,
            }
            for n, u in up.inputs.items()
        },
        "steps": steps,
        "outputs": {plan.outputs[i].path: words for i, words in up.outputs.items()},
    }
