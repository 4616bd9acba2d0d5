"""What an update did, for the run summary: the rows that were new, the passes over them and
over every row, and the time each took (``ddr run --update``).

The runner hands :class:`UpdateReport` each phase's measured reads: a phase the plan made
read only new rows (``Phase.parts``: the merges of one-pass fits, the extension of per-row
outputs) counts as a pass over the **new rows**; any other phase that reads data (a
multi-pass fit, a per-row output recomputed because its model changed, a plot of every
row) as a pass over **every row**. Passes are in the summary's unit: bytes read over the
stored array's bytes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["UpdateReport", "update_lines"]


class UpdateReport:
    """Collects what an update read, phase by phase (see the module docstring)."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.bytes_new: dict[str, int] = {}
        self.passes_new: dict[str, float] = {}
        self.passes_all: dict[str, float] = {}
        self.seconds_new = 0.0
        self.seconds_all = 0.0

    def phase(self, phase: Any, read: dict[str, int], seconds: float) -> None:
        """Add a phase's measured reads (bytes per stored array) and its seconds."""
        if not read:
            return
        groups = self.plan.stored_arrays()
        new = bool(phase.parts) and all(
            any(nm in phase.parts for nm in groups[label]) for label in read
        )
        for label, n in read.items():
            stored = self.plan.inputs[groups[label][0]].stored_bytes or 1
            into = self.passes_new if new else self.passes_all
            into[label] = round(into.get(label, 0.0) + n / stored, 3)
            if new:
                self.bytes_new[label] = self.bytes_new.get(label, 0) + n
        if new:
            self.seconds_new += seconds
        else:
            self.seconds_all += seconds

    def to_dict(self) -> dict[str, Any]:
        """What the summary keeps (``RunSummary.update``)."""
        up = self.plan.update
        steps = {}
        for sid, step in self.plan.steps.items():
            rec = step.recording
            if step.action == "skip" or step.op.family not in ("fit", "statistic"):
                continue
            if rec is None or rec.mode == "full":
                mode = "read every row"
            else:
                mode = "merged the new rows" if rec.mode == "merge" else "solved from the recorded"
            steps[sid] = {
                "mode": mode,
                "new_rows": 0 if rec is None else rec.new_rows,
                "reread_rows": 0 if rec is None else rec.reread_rows,
            }
        inputs = {}
        for name, inp in up.inputs.items():
            rows = inp.rows
            inputs[name] = {
                "status": inp.status,
                "old_rows": None if rows is None else rows.old,
                "rows": None if rows is None else rows.now,
                "reread_rows": 0 if rows is None else rows.old - rows.clean,
            }
        return {
            "full_run": up.full_run,
            "new_rows": up.new_rows,
            "inputs": inputs,
            "steps": steps,
            "outputs": {self.plan.outputs[i].path: w for i, w in up.outputs.items()},
            "passes_new_rows": self.passes_new,
            "bytes_new_rows": self.bytes_new,
            "seconds_new_rows": round(self.seconds_new, 3),
            "passes_every_row": self.passes_all,
            "seconds_every_row": round(self.seconds_all, 3),
        }


def update_lines(update: dict[str, Any] | None) -> list[str]:
    """The summary's lines about an update (none for a run that is not one)."""
    if not update:
        return []
    if update.get("full_run"):
        return [f"  update: a full run: {update['full_run']}"]
    grew = ", ".join(
        f"{n} {i['rows'] - i['old_rows']} ({i['old_rows']} -> {i['rows']})"
        for n, i in update["inputs"].items()
        if i.get("rows") is not None and i["rows"] > i["old_rows"]
    )
    lines = [f"  update: new rows: {grew or 'none'}"]
    new = _passes(update.get("passes_new_rows") or {})
    if new:
        lines.append(
            f"    passes over the new rows (and rewritten chunks): {new} in "
            f"{update.get('seconds_new_rows', 0.0):.2f} s"
        )
    every = _passes(update.get("passes_every_row") or {})
    if every:
        lines.append(
            f"    passes over every row (fits of several passes, outputs recomputed): {every} in "
            f"{update.get('seconds_every_row', 0.0):.2f} s"
        )
    return lines


def _passes(passes: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in passes.items() if v > 0)
