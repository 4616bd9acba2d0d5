"""What the planner decides and the runner executes: the plan's data types and small helpers.

A :class:`Plan` holds the opened inputs, the steps in topological order (with what each
produces, known from metadata: :class:`ValueMeta`), the outputs with their fingerprints and
the action for each (write, overwrite, skip), and the *phases* the runner executes in order.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ddr.config.document import Document
from ddr.io.locations import Location
from ddr.pipeline.registry import Op
from ddr.pipeline.run_files import RunFile
from ddr.pipeline.spec_types import InputSpec, PipelineSpec, StepSpec, split_ref

__all__ = ["InputPlan", "OutputPlan", "Phase", "Plan", "StepPlan", "ValueMeta"]

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
    action: str = "run"  # "run", "load" (from a complete model output), "skip"
    load_from: Location | None = None  # the complete saved model it is loaded from


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
        """The plan as ``ddr plan`` prints it (:func:`ddr.pipeline.plan_render.format_plan`)."""
        from ddr.pipeline.plan_render import format_plan

        return format_plan(self)

    def to_dict(self) -> dict[str, Any]:
        """The plan as ``ddr plan --json`` prints it
        (:func:`ddr.pipeline.plan_render.plan_dict`)."""
        from ddr.pipeline.plan_render import plan_dict

        return plan_dict(self)

    def passes(self) -> dict[str, str]:
        """Planned passes over each stored array: exact (``"5"``), or ``"2+"`` when a fit
        that reads it decides its passes while it runs (EM until it converges)."""
        out = {}
        for label, names in self.stored_arrays().items():
            n = sum(max((p.reads.get(nm, 0) for nm in names), default=0) for p in self.phases)
            open_ended = any(
                p.kind == "fit"
                and any(nm in p.reads for nm in names)
                and any(self.steps[sid].passes is None for sid in p.steps)
                for p in self.phases
            )
            out[label] = f"{n}+" if open_ended else str(n)
        return out

    def ref_meta(self, ref: str) -> ValueMeta | None:
        head, tail = split_ref(ref)
        if head in self.inputs:
            return self.inputs[head].meta
        step = self.steps.get(head)
        if step is None:
            return None
        return step.outputs.get(tail or step.op.primary) or ValueMeta("attribute")


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
