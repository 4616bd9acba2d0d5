"""The planner's decisions for ``ddr run --update``: what grew, what each step reads, what
each output becomes.

Mixed into the planner, after the outputs' fingerprints are compared (an update keeps
complete outputs with the same fingerprint, as ``--resume`` does) and the run's state is
read (:mod:`ddr.pipeline.state_plan`). For each input, the record the last run left is
compared with one listing of its stored chunks now (:func:`ddr.io.chunk_records.compare_records`):

- an old chunk rewritten or removed, rows removed, another layout, a selection that
  moves when rows are appended: the run is a **full run** (as ``--resume``), and the plan
  says why, naming the chunk;
- else each array of the pipeline gets its :class:`~ddr.pipeline.update_types.Rows`
  (rows then, now, and how many of the first are known to be as they were), passed row by
  row through transforms and predictions whose model did not change.

Then, per step: a fit whose statistics the state recorded **merges** the rows after its
recorded prefix (the new rows, and the rows of a partial chunk an append rewrote), or is
**solved from the recorded statistics** when none of its rows changed; any other fit reads
every row (multi-pass fits: randomized PCA, EM, kernel PCA, k-means, with no warm start;
fits on a grid over several sample dims). A fit on a grid over one sample dim (time steps
appended to a time x lat x lon field) merges as any other: the new rows are read with the
grid's mask (the first sample's: the one the state recorded where the stored chunks of that
sample are as they were, read no more, :mod:`ddr.pipeline.recorded_masks`; the mask is part
of what the state records of the input, so another mask than the last run's makes a full
run) and checked against it in the pass that reads them, so new rows with another mask are
an error naming the point and the time step.
Per output: an array output whose every variable is per row, made by models that did not
change, is **extended** by its new rows; a saved model (or fitted attributes) of a step
that gives what it gave keeps its content (only its fingerprint and provenance are
rewritten); any other outdated output is rewritten (per-row outputs of a model that changed
are recomputed from every row).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ddr.pipeline.plan import OutputPlan, Phase, StepPlan
from ddr.pipeline.spec_types import split_ref
from ddr.pipeline.update_types import InputUpdate, Recording, Rows, StatePlan, UpdatePlan

__all__ = ["UpdatePlanning"]


class UpdatePlanning:
    """Update decisions of :class:`ddr.pipeline.planner._Planner` (uses its state)."""

    inputs: dict[str, Any]
    steps: dict[str, StepPlan]
    outputs: list[OutputPlan]
    state: StatePlan | None
    update: UpdatePlan | None

    problem: Callable[..., Any]  # provided by the concrete class
    _ref_meta: Callable[..., Any]  # provided by Scheduling
    _reads: Callable[..., Any]  # provided by Scheduling
    _recordings: Callable[..., Any]  # provided by StatePlanning
    _full_recording: Callable[..., Any]  # provided by StatePlanning
    _aligned_rows: Callable[..., Any]  # provided by StatePlanning
    _splits: Callable[..., Any]  # provided by StatePlanning

    # ------------------------------------------------------------------- plan
    def _plan_update(self) -> None:
        """What grew since the last run, and what the update reads and writes."""
        up = UpdatePlan()
        self.update = up
        state = self.state
        if state is None:
            self.problem(
                ("run", "state"),
                "--update needs the state the last run recorded; this pipeline records none "
                "(run.state: false)",
            )
            return
        old = state.old
        if old is None:
            up.full_run = f"{state.old_reason}; this run records it"
            self._recordings()
            return
        for name, rec in state.records.items():
            verdict = _input_update(name, rec, old.inputs.get(name))
            up.inputs[name] = verdict
            if verdict.status == "changed" and up.full_run is None:
                up.full_run = f"input {name}: {verdict.why}"
        if up.full_run is not None:
            self._recordings()
            return
        self._rows_of: dict[str, Rows | None] = {}
        self._same_model: dict[str, bool] = {}
        for step in self.steps.values():
            self._step_update(step, state)
        for out in self.outputs:
            up.outputs[out.index] = self._output_update(out, state)

    # ------------------------------------------------------------------ rows
    def _rows(self, ref: str) -> Rows | None:
        """The rows of the array ``ref`` names (None: they may all differ)."""
        head, tail = split_ref(ref)
        if head in self.inputs:
            assert self.update is not None
            inp = self.update.inputs.get(head)
            return None if inp is None else inp.rows
        step = self.steps.get(head)
        if step is None:
            return None
        return self._rows_of.get(f"{head}.{tail or step.op.primary}")

    def _step_update(self, step: StepPlan, state: StatePlan) -> None:
        old = state.old
        sid = step.id
        family = step.op.family
        if family == "load":
            self._same_model[sid] = old.configs.get(sid) == state.configs.get(sid)
            return
        if family == "apply":
            same = self._same_model.get(split_ref(step.refs.get("model", ""))[0], False)
            if step.op.method == "score":
                return
            for out, role in (("data", "X"), ("y_data", "y")):
                if role in step.refs and same:
                    self._rows_of[f"{sid}.{out}"] = self._rows(step.refs[role])
            return
        if family not in ("fit", "statistic"):
            return
        arrays = [r for role, r in step.refs.items() if role != "model"]
        rows = self._rows(arrays[0]) if arrays else None
        for r in arrays[1:]:
            rows = None if rows is None else rows.meet(self._rows(r))
        if step.spec.search is not None:
            # its folds' statistics are not recorded (nor could a saved model give them)
            step.update_note = (
                "a grid search: searched again over every row, two passes; the folds' "
                "statistics are not recorded"
            )
            self._same_model[sid] = False
            return
        if sid not in state.recorded or "X" not in step.refs:
            grid = self._grid_dims(step)
            if grid is not None and len(grid) > 1:
                step.update_note = (
                    f"a grid over several sample dims {list(grid)}: rows appended along one "
                    "of them are not appended to its stacked rows; fitted again over every row"
                )
            else:
                step.update_note = (
                    "a fit of several passes, or one whose statistics do not merge: no warm start"
                    if family == "fit"
                    else "not recorded"
                )
            self._same_model[sid] = False
            return
        rec = old.steps.get(sid)
        why = _why_not_merged(rec, state.configs.get(sid), rows)
        if why is not None:
            step.recording = self._full_recording(step, why)
            self._same_model[sid] = False
            return
        assert rows is not None and rec is not None
        if rows.unchanged:
            step.recording = Recording(
                "recorded", rows.now, rec.prefix_rows, rows.now, rows.old, "no new rows"
            )
            self._same_model[sid] = True
            if step.op.method == "fit_transform" and "X" in step.refs:
                self._rows_of[f"{sid}.data"] = self._rows(step.refs["X"])
            return
        aligned = [self._aligned_rows(r) for r in arrays]
        now = 0 if any(a is None for a in aligned) else min(a for a in aligned if a is not None)
        prefix = min(max(now, rec.prefix_rows), rows.now)
        self._same_model[sid] = False
        if not self._splits(step, [rec.prefix_rows, prefix, rows.now]):
            step.recording = self._full_recording(
                step, "its estimator refuses the new rows alone (too few of them?)"
            )
            return
        step.recording = Recording("merge", rows.now, prefix, rec.prefix_rows, rows.old)

    def _grid_dims(self, step: StepPlan) -> tuple[str, ...] | None:
        """The sample dims of the grid input the step reads as X (None: not a grid)."""
        head = split_ref(step.refs.get("X", ""))[0]
        return self.inputs[head].spec.grid_sample_dims() if head in self.inputs else None

    def _output_update(self, out: OutputPlan, state: StatePlan) -> str:
        """What the update does with ``out``, in words (and its extension, when extended)."""
        if out.action == "skip":
            return "kept (complete, same fingerprint)"
        if out.action == "write" or not out.reason.startswith("complete"):
            return f"written ({out.reason})"
        changed = self._changed_models(out)
        rows = self._output_rows(out)
        if rows is not None and not changed:
            from ddr.pipeline.outputs import output_kind

            stored = output_kind(out.kind).status(out.location)[1]
            if stored is not None and stored == state.old.outputs.get(out.path):
                out.extend = rows
                added = rows.now - rows.old
                again = rows.old - rows.clean
                out.reason = (
                    f"complete; extended by its {added} new rows"
                    + (f" and {again} rows of a rewritten chunk" if again else "")
                    + " (the models it was made with did not change)"
                )
                return f"extended: rows {rows.clean}:{rows.now} written, rows 0:{rows.clean} kept"
        if not changed and not out.streamed and self._same_content(out, state):
            out.refresh = True
            out.reason = (
                "complete; the same content (its models did not change): its fingerprint and "
                "provenance are rewritten"
            )
            return "kept: the same content, its fingerprint and provenance rewritten"
        if changed:
            names = ", ".join(changed)
            verb = "recomputed from every row" if out.streamed else "rewritten"
            out.reason = f"complete; {verb}: {names} changed (fitted again with the new rows)"
            return f"{verb}: {names} changed"
        out.reason = "complete; rewritten (small)" if not out.streamed else out.reason
        return "rewritten" if not out.streamed else "recomputed from every row"

    def _same_content(self, out: OutputPlan, state: StatePlan) -> bool:
        """Whether a small Zarr output (a saved model, fitted attributes) holds what it held:
        the last run wrote it, and every step it is made of gives what it gave then (a fit
        solved from the recorded statistics, a load of the same saved model)."""
        from ddr.pipeline.outputs import output_kind

        if out.kind not in ("model", "zarr"):
            return False
        for ref in out.refs.values():
            head, _ = split_ref(ref)
            if head not in self.steps or not self._same_model.get(head, False):
                return False
        stored = output_kind(out.kind).status(out.location)[1]
        return stored is not None and stored == state.old.outputs.get(out.path)

    def _output_rows(self, out: OutputPlan) -> Rows | None:
        """The rows of a Zarr output whose every variable is per row (None otherwise)."""
        if out.kind != "zarr" or not out.streamed:
            return None
        rows: Rows | None = None
        for i, ref in enumerate(out.refs.values()):
            meta = self._ref_meta(ref)
            if meta is None or meta.kind != "array" or not meta.shape:
                return None
            r = self._rows(ref)
            if r is None:
                return None
            rows = r if i == 0 else r.meet(rows)
            if rows is None:
                return None
        return rows

    def _changed_models(self, out: OutputPlan) -> list[str]:
        """The fitted steps ``out`` depends on whose model this update changes."""
        found: list[str] = []

        def walk(ref: str) -> None:
            head, _ = split_ref(ref)
            step = self.steps.get(head)
            if step is None or head in found:
                return
            if step.op.family in ("fit", "statistic") and not self._same_model.get(head, False):
                found.append(head)
                return
            for r in step.refs.values():
                walk(r)

        for ref in out.refs.values():
            walk(ref)
        return found

    # ---------------------------------------------------------------- phases
    def _update_phases(self, phases: list[Phase]) -> None:
        """The share of each input that phases of an update read: the new rows (and those
        of a rewritten chunk) where every step or output of the phase that reads it merges
        or extends."""
        if self.update is None or self.update.full_run is not None or self.state is None:
            return
        for phase in phases:
            if phase.kind == "batch":
                for inp in phase.reads:
                    froms = []
                    for sid in phase.steps:
                        if inp not in self._reads(self.steps[sid]):
                            continue
                        rec = self.steps[sid].recording
                        froms.append(rec.read_from if rec and rec.mode == "merge" else None)
                    self._part(phase, inp, froms)
            elif phase.kind == "stream":
                for inp in phase.reads:
                    froms = []
                    for i in phase.outputs:
                        out = self.outputs[i]
                        if any(inp in (self._ref_meta(r).reads or ()) for r in out.refs.values()):
                            froms.append(out.extend.clean if out.extend else None)
                    self._part(phase, inp, froms)

    def _part(self, phase: Phase, inp: str, froms: list[int | None]) -> None:
        assert self.state is not None
        if not froms or any(f is None for f in froms):
            return
        rec = self.state.records[inp]
        if rec.array is None or rec.start is None:
            return
        lo = min(f for f in froms if f is not None)
        phase.parts[inp] = rows_share(rec, lo)


def rows_share(rec: Any, lo: int) -> float:
    """The share of an input's stored bytes that reading its selected rows ``lo:`` reads:
    the stored objects of the row blocks those rows lie in."""
    arr = rec.array
    first = (rec.start + lo) // arr.block_rows
    last = (rec.start + rec.rows - 1) // arr.block_rows
    from ddr.io.chunk_records import _block_of

    total = read = 0
    for key, token in arr.objects.items():
        size = int(token.split(":", 1)[0] or 0)
        total += size
        block = _block_of(key, arr.axis)
        if block is not None and first <= block <= last and lo < rec.rows:
            read += size
    return read / total if total else 1.0


def _why_not_merged(rec: Any, config: str | None, rows: Rows | None) -> str | None:
    """Why a recorded step cannot merge into what the last run recorded (None: it can)."""
    if rec is None:
        return "the last run recorded no statistics of it"
    if rec.config != config:
        return "it changed since the last run (op, parameters or inputs)"
    if rows is None:
        return "its input rows changed (not only appended)"
    if rows.old != rec.rows:
        return f"the last run fitted it on {rec.rows} rows, its inputs then had {rows.old}"
    if rows.clean < rec.prefix_rows:
        return "rows of its recorded prefix were rewritten"
    return None


def _input_update(name: str, rec: Any, old: Any) -> InputUpdate:
    """What happened to input ``name`` between the last run's record ``old`` and now."""
    from ddr.io.chunk_records import compare_records

    if old is None:
        return InputUpdate("changed", why="the last run did not record it")
    if old.identity != rec.identity:
        return InputUpdate("changed", why="what the pipeline reads of it changed")
    if old.array is None or rec.array is None:
        if old.fingerprint == rec.fingerprint:
            return InputUpdate("same", Rows(rec.rows, rec.rows, rec.rows))
        return InputUpdate(
            "changed",
            why="it is not one Zarr array whose chunks ddr records (a netCDF file, a CSR "
            "group), and its metadata changed: which rows are new cannot be told",
        )
    shown = f"{old.identity.get('array')}" if old.identity.get("array") else ""
    growth = compare_records(old.array, rec.array, shown)
    stored = (growth.old_rows, growth.rows)
    if growth.status == "changed":
        return InputUpdate("changed", stored=stored, why=growth.why)
    if growth.status == "same":
        return InputUpdate("same", Rows(old.rows, rec.rows, rec.rows), stored)
    if old.start is None or rec.start is None:
        return InputUpdate(
            "changed",
            stored=stored,
            why="rows were appended, and its isel selects rows by a list or a negative bound: "
            "which selected rows are new cannot be told",
        )
    if rec.start != old.start or rec.rows < old.rows:
        return InputUpdate("changed", stored=stored, why="its selection moved")
    clean = max(0, min(growth.dirty_from - old.start, old.rows))
    rows = Rows(old.rows, rec.rows, clean)
    if rows.unchanged:
        return InputUpdate("same", rows, stored, "its selection takes none of the new rows")
    return InputUpdate("appended", rows, stored)
