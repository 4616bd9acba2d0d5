"""What the planner decides and the runner executes: the plan's data types and small helpers.

A :class:`Plan` holds the opened inputs, the steps in topological order (with what each
produces, known from metadata: :class:`ValueMeta`), the outputs with their fingerprints and
the action for each (write, overwrite, skip), and the *phases* the runner executes in order.
It shows itself as ``ddr plan`` does: text (:meth:`Plan.format`) or JSON data
(:meth:`Plan.to_dict`); nothing there reads data or looks at outputs: what is shown is what
the planner decided.
"""

from __future__ import annotations

import difflib
import hashlib
import html
import json
from dataclasses import dataclass, field
from typing import Any

from ddr.config.document import Document
from ddr.io.locations import Location
from ddr.pipeline.registry import Op
from ddr.pipeline.run_files import RunFile
from ddr.pipeline.spec_types import InputSpec, PipelineSpec, StepSpec, split_ref
from ddr.pipeline.summary import _rel
from ddr.pipeline.update_types import format_update, update_dict
from ddr.tags import get_ddr_tags

__all__ = [
    "InputPlan",
    "OutputPlan",
    "Phase",
    "Plan",
    "StepPlan",
    "ValueMeta",
    "format_plan",
    "plan_dict",
    "plan_html",
]

FINGERPRINT_ATTR = "ddr:fingerprint"


@dataclass
class ValueMeta:
    """What a reference holds, known before the run."""

    kind: str  # "array", "model", "statistic", "metric", "attribute"
    shape: tuple[int | None, ...] | None = None
    dims: tuple[str | None, ...] | None = None
    dtype: Any = None
    reads: frozenset[str] = frozenset()  # inputs a lazy array reads when computed
    cls: type | None = None
    params: dict[str, Any] = field(default_factory=dict)
    n_features_in: int | None = None
    n_out: int | None = None


@dataclass
class InputPlan:
    name: str
    spec: InputSpec
    path: str
    array: Any  # lazy xarray.DataArray, sample dim first
    sample_dim: str
    fingerprint: str
    store_root: str | None  # counted Zarr store root, for measured passes
    stored_bytes: int | None
    meta: ValueMeta
    location: Location  # where ``path`` points, with its storage_options
    #: what its ``isel`` reads of the stored array (ddr.pipeline._counting.BlockReads:
    #: stored bytes per block); None: the whole array
    reads: Any = None
    #: a grid input read by something: its features NaN at its first sample (bool, feature
    #: dims' shape), read once while planning and handed to every fit on it (which reads
    #: no sample to find it: not in the run's passes); an update takes the one the last
    #: run recorded where it still holds (ddr.pipeline.recorded_masks)
    grid_mask: Any = None
    #: the record of its stored array (ddr.io.chunk_records.ArrayRecord) where opening it
    #: listed it (an update checking a recorded mask): the run's state takes that listing
    listing: Any = None


@dataclass
class StepPlan:
    id: str
    spec: StepSpec
    op: Op
    refs: dict[str, str]  # role -> reference
    deps: set[str]  # step ids
    fingerprint: str = ""
    outputs: dict[str, ValueMeta] = field(default_factory=dict)
    one_pass: bool | None = None  # None: decided at run time
    passes: int | None = None  # passes of a fit over its X; None: decided at run time
    # "run", "load" (from a complete model output), "recorded" (solved from the statistics
    # the run's state recorded, reading nothing: ``--update``), "skip"
    action: str = "run"
    load_from: Location | None = None  # the complete saved model it is loaded from
    #: how a one-pass mergeable fit is computed so its statistics are recorded
    #: (:class:`ddr.pipeline.update_types.Recording`); None: as the estimator fits
    recording: Any = None
    update_note: str = ""  # why an update reads every row of it (``--update``)
    #: what a searched step's grid search costs (:class:`ddr.model_selection.SearchPlan`)
    search: Any = None


@dataclass
class OutputPlan:
    index: int
    spec: Any  # the spec of its kind (ddr.pipeline.schema.Output)
    location: Location
    if_exists: str
    refs: dict[str, str]  # variable/key -> reference
    fingerprint: str = ""
    status: str = "missing"
    action: str = "write"  # "write", "overwrite", "skip"
    reason: str = ""
    streamed: bool = False  # needs a pass over data (written in the final stream phase)
    #: an update extends it by its new rows (:class:`ddr.pipeline.update_types.Rows`)
    extend: Any = None
    #: an update rewrites only its fingerprint and provenance (its content is the same)
    refresh: bool = False

    @property
    def kind(self) -> str:
        """The name of its kind (``zarr``, ``plot``, ...): ``output_kind(out.kind)``
        (:func:`ddr.pipeline.outputs.output_kind`) checks, writes and reads back the output."""
        return str(self.spec.kind)

    @property
    def path(self) -> str:
        """The normalised location (an absolute path, or a URL without credentials)."""
        return self.location.url


@dataclass
class Phase:
    kind: str  # "batch", "fit", "compute", "lazy", "stream"
    steps: list[str] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)  # small outputs written after the phase
    reads: dict[str, int] = field(default_factory=dict)  # input -> planned passes
    #: input -> share of its stored array the phase reads, where an update reads only new
    #: rows (instead of its selection's)
    parts: dict[str, float] = field(default_factory=dict)


@dataclass
class Plan:
    """Everything the runner needs, and what ``ddr plan`` prints."""

    file: str
    doc: Document
    pipeline: PipelineSpec  # a ddr.pipeline.schema.Pipeline
    inputs: dict[str, InputPlan]
    steps: dict[str, StepPlan]  # topological order
    outputs: list[OutputPlan]
    phases: list[Phase]
    resolved: dict[str, Any]
    run_files: list[RunFile] = field(default_factory=list)  # summary, log, performance report
    force: bool = False
    resume: bool = False
    given: dict[str, Any] = field(default_factory=dict)  # run files given to plan_pipeline
    #: the run's state (:class:`ddr.pipeline.update_types.StatePlan`); None: none recorded
    state: Any = None
    #: what ``--update`` found and decided (:class:`ddr.pipeline.update_types.UpdatePlan`)
    update: Any = None

    def run_file(self, kind: str) -> RunFile | None:
        """The run file of ``kind`` (``"summary"``, ``"log"``, ``"performance_report"``)."""
        return next((f for f in self.run_files if f.kind == kind), None)

    def stored_arrays(self) -> dict[str, list[str]]:
        """Label -> input names, grouping inputs that are the same stored array (e.g. two
        column selections of one Zarr array): a read of one is a read of the others."""
        groups: dict[tuple[str, str], list[str]] = {}
        for name, inp in self.inputs.items():
            groups.setdefault((inp.path, inp.spec.array or ""), []).append(name)
        return {", ".join(names): names for names in groups.values()}

    def format(self) -> str:
        """The plan as ``ddr plan`` prints it (:func:`format_plan`)."""
        return format_plan(self)

    def _repr_html_(self) -> str:
        """The plan as HTML tables (what Jupyter shows): :func:`plan_html`."""
        return plan_html(self)

    def to_dict(self) -> dict[str, Any]:
        """The plan as ``ddr plan --json`` prints it (:func:`plan_dict`)."""
        return plan_dict(self)

    def passes(self) -> dict[str, str]:
        """Planned passes over each stored array: exact (``"5"``), or ``"2+"`` when a fit
        that reads it decides its passes while it runs (EM until it converges).

        The unit is the one the run measures (:class:`ddr.pipeline.RunSummary`): the
        stored bytes read over the stored array's bytes. A read of rows 0:75000 of 100 000
        is 0.75 of a pass (``"0.75"``), and a read of rows 75000: another 0.25: the two
        add up to one pass, as the run measures them; inputs of one stored array read in
        the same phase read each of its blocks once.
        """
        out = {}
        for label, names in self.stored_arrays().items():
            n = sum(self._phase_passes(p, names) for p in self.phases)
            open_ended = any(
                p.kind in ("fit", "batch")
                and any(nm in p.reads for nm in names)
                and any(self.steps[sid].passes is None for sid in p.steps)
                for p in self.phases
            )
            out[label] = f"{_count(n)}+" if open_ended else _count(n)
        return out

    def _phase_passes(self, phase: Phase, names: list[str]) -> float:
        """Passes over one stored array (its inputs ``names``) that ``phase`` makes: the
        k-th read of each input that is read at least k times, read together."""
        from ddr.pipeline._counting import union_share

        counts = {nm: phase.reads[nm] for nm in names if phase.reads.get(nm)}
        parts = [phase.parts[nm] for nm in counts if nm in phase.parts]
        if parts:  # an update reads these inputs' new rows only
            others = [self.inputs[nm].reads for nm in counts if nm not in phase.parts]
            return max([*parts, *([union_share(others)] if others else [])])
        return sum(
            union_share([self.inputs[nm].reads for nm, c in counts.items() if c >= k])
            for k in range(1, max(counts.values(), default=0) + 1)
        )

    def ref_meta(self, ref: str) -> ValueMeta | None:
        head, tail = split_ref(ref)
        if head in self.inputs:
            return self.inputs[head].meta
        step = self.steps.get(head)
        if step is None:
            return None
        return step.outputs.get(tail or step.op.primary) or ValueMeta("attribute")


def _count(n: float) -> str:
    """Passes as ``ddr plan`` prints them: ``5``, or ``0.75`` for parts of the array."""
    return str(round(n)) if abs(n - round(n)) < 0.005 else f"{n:.2f}"


# ---------------------------------------------------------------------- rendering
#: what each kind of phase does, in the plan's words
_PHASE_WORDS = {
    "batch": "one shared pass computes the statistics of",
    "fit": "multi-pass fit of",
    "search": "two-pass grid search of",
    "compute": "scores",
    "lazy": "lazy (reads nothing)",
    "stream": "streams outputs to disk",
}


def format_plan(plan: Plan) -> str:
    """The DAG, the phases, the passes over each input and what would be written or skipped,
    as text.

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.

    Returns
    -------
    str
        Lines without a final newline.
    """
    passes = plan.passes()
    lines = [f"pipeline {plan.pipeline.name} ({plan.file})", "inputs:"]
    shared = plan.stored_arrays()
    for name, inp in plan.inputs.items():
        sizes = zip(inp.meta.dims or (), inp.meta.shape or (), strict=True)
        dims = ", ".join(f"{d}: {s}" for d, s in sizes)
        if inp.spec.sample_dims is not None:  # a grid: its dims, and the features it gives
            dims = ", ".join(f"{d}: {s}" for d, s in inp.array.sizes.items())
            d = inp.meta.shape[1] if inp.meta.shape else None
            masked = int(inp.grid_mask.sum()) if inp.grid_mask is not None else None
            dims += f"; {d} features" + (f", {masked} masked" if masked is not None else "")
        where = _rel(inp.path) + (f" [{inp.spec.array}]" if inp.spec.array else "")
        nrow = len(inp.array.data.chunks[0]) if hasattr(inp.array.data, "chunks") else 1
        label = next(k for k, v in shared.items() if name in v)
        part = inp.reads.share() if inp.reads is not None else 1.0
        part_of = f" ({_count(part)} of the stored array)" if _count(part) != "1" else ""
        lines.append(
            f"  {name}: {where} ({dims}) {inp.meta.dtype}, {nrow} row chunks{part_of}; "
            f"passes: {passes[label]}{' (shared: ' + label + ')' if label != name else ''}"
        )
    lines.append("steps:")
    for sid, step in plan.steps.items():
        lines.append(f"  {sid}: {_step_line(step)}")
    lines.append("phases:")
    for i, phase in enumerate(plan.phases, start=1):
        line = f"  {i}. {phase.kind:<7} {_PHASE_WORDS[phase.kind]} {', '.join(phase.steps)}"
        line = line.rstrip()
        if phase.reads:
            line += f"; reads {', '.join(_read_words(phase, nm) for nm in phase.reads)}"
        lines.append(line)
        for o in phase.outputs:
            out = plan.outputs[o]
            lines.append(f"       then writes {out.kind} {_rel(out.path)}")
    lines.append("outputs:")
    for out in plan.outputs:
        src = ", ".join(out.refs.values())
        lines.append(f"  {out.action:<9} {out.kind:<7} {_rel(out.path)}  <- {src}  ({out.reason})")
    if plan.state is not None:
        st = plan.state
        lines.append(f"state: {st.action:<9} {_rel(st.path)}  ({st.reason})")
    lines.extend(format_update(plan))
    total = ", ".join(f"{k}: {v}" for k, v in passes.items())
    lines.append(f"passes over inputs: {total}")
    return "\n".join(lines)


def plan_html(plan: Plan) -> str:
    """The plan as ``ddr plan`` prints it, as HTML tables: inputs (with the passes over each
    stored array), steps, phases and outputs (what a run would write or skip and why).

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.

    Returns
    -------
    str
        An HTML fragment (every value escaped).
    """
    passes = plan.passes()
    shared = plan.stored_arrays()

    def table(caption: str, head: list[str], rows: list[list[str]]) -> str:
        cell = 'style="text-align: left; padding: 1px 8px; vertical-align: top"'
        ths = "".join(f"<th {cell}>{html.escape(h)}</th>" for h in head)
        trs = "".join(
            "<tr>" + "".join(f"<td {cell}>{html.escape(str(v))}</td>" for v in row) + "</tr>"
            for row in rows
        )
        return (
            f'<table class="ddr-plan-{caption}" style="margin-bottom: 0.5em">'
            f'<caption style="text-align: left"><b>{caption}</b></caption>'
            f"<tr>{ths}</tr>{trs}</table>"
        )

    inputs = []
    for name, inp in plan.inputs.items():
        label = next(k for k, v in shared.items() if name in v)
        sizes = zip(inp.meta.dims or (), inp.meta.shape or (), strict=True)
        part = inp.reads.share() if inp.reads is not None else 1.0
        inputs.append(
            [
                name,
                _rel(inp.path) + (f" [{inp.spec.array}]" if inp.spec.array else ""),
                ", ".join(f"{d}: {n}" for d, n in sizes),
                str(inp.meta.dtype),
                _count(part),
                passes[label] + (f" (shared: {label})" if label != name else ""),
            ]
        )
    steps = [[sid, _step_line(step).strip()] for sid, step in plan.steps.items()]
    phases = [
        [
            str(i),
            phase.kind,
            f"{_PHASE_WORDS[phase.kind]} {', '.join(phase.steps)}".strip(),
            ", ".join(phase.reads),
            ", ".join(_rel(plan.outputs[o].path) for o in phase.outputs),
        ]
        for i, phase in enumerate(plan.phases, start=1)
    ]
    outputs = [
        [o.action, o.kind, _rel(o.path), ", ".join(o.refs.values()), o.reason] for o in plan.outputs
    ]
    total = ", ".join(f"{k}: {v}" for k, v in passes.items())
    return (
        f'<div class="ddr-plan"><p><b>pipeline {html.escape(plan.pipeline.name)}</b> '
        f"({html.escape(str(plan.file))})</p>"
        + table(
            "inputs",
            ["input", "where", "sizes", "dtype", "share of the stored array", "passes"],
            inputs,
        )
        + table("steps", ["step", "what"], steps)
        + table("phases", ["", "phase", "what", "reads", "then writes"], phases)
        + table("outputs", ["action", "kind", "path", "from", "why"], outputs)
        + "".join(f"<p>{html.escape(line.strip())}</p>" for line in format_update(plan))
        + f"<p><b>passes over inputs</b>: {html.escape(total)}</p></div>"
    )


def _read_words(phase: Phase, name: str) -> str:
    """An input a phase reads, with the share an update reads of it (its new rows)."""
    if name not in phase.parts:
        return name
    return f"{name} (new rows only: {_count(phase.parts[name])} of the stored array)"


def _step_line(step: StepPlan) -> str:
    """``op(role=ref, ...) with params``, its passes and what the run does with it."""
    args = ", ".join(f"{r}={ref}" for r, ref in step.refs.items())
    params = ", ".join(f"{k}={v!r}" for k, v in step.spec.with_.items())
    state = {
        "run": "",
        "skip": "  [skipped: not needed]",
        "load": f"  [load {_rel(step.load_from.url if step.load_from else '')}: complete, "
        "same fingerprint]",
        "recorded": "  [solved from the recorded statistics: no new rows]",
    }[step.action]
    passes = ""
    if step.action == "run" and step.spec.search is not None:
        passes = f"  ({_search_words(step)})"
    elif step.action == "run" and step.op.family in ("fit", "statistic"):
        if step.one_pass and step.passes is None:
            passes = "  (one pass, then more if it needs them: decided at run time)"
        elif step.one_pass:
            passes = "  (one pass)"
        elif step.passes:
            passes = f"  ({step.passes} passes)"
        else:
            note = _passes_note(step)
            passes = f"  (passes decided at run time{': ' + note if note else ''})"
    return f"{step.op.name}({args}){' with ' + params if params else ''}{passes}{state}"


def _passes_note(step: StepPlan) -> str | None:
    """What the estimator knows beforehand of passes decided while it fits (its tags'
    ``fit.passes_note``), or None."""
    try:
        return get_ddr_tags(step.op.cls, **step.spec.with_).fit.passes_note
    except Exception:  # parameters the estimator refuses are reported elsewhere
        return None


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON data (``ddr plan --json``): inputs, steps, phases, outputs, passes.

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.

    Returns
    -------
    dict
        Plain values (strings, numbers, lists, dicts) but for the steps' parameters, which
        are what the pipeline gave.
    """
    return {
        "pipeline": plan.pipeline.name,
        "file": str(plan.file),
        "inputs": {
            n: {
                "path": i.path,
                "array": i.spec.array,
                "dims": list(i.meta.dims or ()),
                "shape": list(i.meta.shape or ()),
                "dtype": str(i.meta.dtype),
                "fingerprint": i.fingerprint,
            }
            for n, i in plan.inputs.items()
        },
        "steps": {
            sid: {
                "op": s.op.name,
                "inputs": s.refs,
                "with": s.spec.with_,
                "action": s.action,
                "one_pass": s.one_pass,
                "search": _search_dict(s),
                "load_from": s.load_from.url if s.load_from else None,
                "fingerprint": s.fingerprint,
            }
            for sid, s in plan.steps.items()
        },
        "phases": [
            {
                "kind": p.kind,
                "steps": p.steps,
                "outputs": [plan.outputs[i].path for i in p.outputs],
                "reads": p.reads,
            }
            for p in plan.phases
        ],
        "outputs": [
            {
                "path": o.path,
                "kind": o.kind,
                "from": o.refs,
                "action": o.action,
                "reason": o.reason,
                "status": o.status,
                "fingerprint": o.fingerprint,
            }
            for o in plan.outputs
        ],
        "passes": plan.passes(),
        "state": None
        if plan.state is None
        else {
            "path": plan.state.path,
            "action": plan.state.action,
            "reason": plan.state.reason,
            "recorded_steps": plan.state.recorded,
        },
        "update": update_dict(plan),
    }


def _search_words(step: StepPlan) -> str:
    """A searched step's search in ``ddr plan``'s words: scoring, folds, candidates, passes."""
    spec = step.spec.search
    assert spec is not None
    cv = spec.cv
    folds = "contiguous folds" if isinstance(cv, int) else f"hashed folds, seed {cv.seed}"
    cost = step.search
    if cost is None:  # the width of its data is known only once it runs
        cost = f"{step.passes} passes over the data; folds and statistics counted when it runs"
    return f"grid search by {spec.scoring or 'its own score'}, {folds}: {cost}"


def _search_dict(step: StepPlan) -> dict[str, Any] | None:
    """A searched step's search as ``ddr plan --json`` shows it: what the file says and
    what it costs (None for other steps)."""
    if step.spec.search is None:
        return None
    out: dict[str, Any] = step.spec.search.model_dump(mode="json")
    plan = step.search
    if plan is not None:
        out.update(
            n_passes=plan.n_passes,
            n_splits=plan.n_splits,
            n_candidates=plan.n_candidates,
            n_statistics=plan.n_statistics,
            n_solves=plan.n_solves,
            fold_sizes=list(plan.fold_sizes),
        )
    return out


# ----------------------------------------------------------------------- utilities
def _sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _a(noun: str) -> str:
    """``"an array"``, ``"a model"``: kinds of values in messages."""
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _shape(shape: tuple[int | None, ...] | None) -> str:
    if shape is None:
        return "?"
    return (
        "("
        + ", ".join("?" if s is None else str(s) for s in shape)
        + ("," if len(shape) == 1 else "")
        + ")"
    )


def _dims(dims: tuple[str | None, ...] | None) -> str:
    return "?" if dims is None else "(" + ", ".join(str(d) for d in dims) + ")"
