"""What an output kind is, and the registry of kinds.

An *output kind* (``kind: zarr``, ``model``, ``metrics``, ``plot``, ...) is one class,
subclassing :class:`OutputKind`, that owns everything ddr knows about such outputs:

- its spec model (:attr:`OutputKind.spec`: what the YAML entry may say; the schema's union of
  outputs is built from the registry, so ``ddr schema``, ``ddr validate`` and its messages
  follow);
- its checks before any data is read (:meth:`OutputKind.check`: what ``from`` may name);
- how it is written: at once when its sources exist (:meth:`OutputKind.write`), or in the
  run's final pass with every other output that needs data (:meth:`OutputKind.streams`,
  :meth:`OutputKind.stream`);
- how it is read back: status and fingerprint (:meth:`OutputKind.status`), provenance,
  whether a complete one belongs to another pipeline, and what ``ddr inspect`` shows.

Registering the class (:func:`register_output_kind`) is all it takes; a class that lacks a
required piece is refused there, naming what is missing. Nothing else in ddr branches on
kind names: it asks the kind (:func:`output_kind` raises for an unknown name, listing the
known ones).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import Field

from ddr.config.validation import PathStr
from ddr.pipeline.outputs.registry import KindRegistry, spec_models, tag_of
from ddr.pipeline.spec_types import IfExists, StorageOptions, Strict

if TYPE_CHECKING:
    from ddr.io.claims import Claim
    from ddr.io.locations import Location
    from ddr.pipeline.plan import OutputPlan, Plan, StepPlan, ValueMeta

__all__ = [
    "KINDS",
    "CheckContext",
    "OutputKind",
    "OutputSpec",
    "Probe",
    "Streamed",
    "WriteContext",
    "kind_at",
    "output_kind",
    "output_kinds",
    "register_output_kind",
    "unregister_output_kind",
]


class OutputSpec(Strict):
    """What every output entry says besides its kind's own fields: where and how to write."""

    path: PathStr = Field(
        description="Where to write: a local path (relative to the working dir) or a URL "
        "(s3://, gs://, az://, file://)."
    )
    storage_options: StorageOptions = None
    if_exists: IfExists | None = Field(None, description="Overrides run.if_exists for this output.")
    description: str = ""


# --------------------------------------------------------------- what kinds are given
class CheckContext(Protocol):
    """What :meth:`OutputKind.check` may use of the planner."""

    steps: dict[str, StepPlan]
    inputs: dict[str, Any]

    def problem(self, path: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        """Report ``message`` at ``path`` in the pipeline file (``("outputs", 3, "from")``)."""


class WriteContext(Protocol):
    """What :meth:`OutputKind.write` and :meth:`OutputKind.stream` may use of the runner."""

    plan: Plan
    argv: list[str] | None

    def value(self, ref: str) -> Any:
        """The value a reference names (lazy arrays stay lazy)."""

    def provenance(self, out: OutputPlan) -> dict[str, Any]:
        """What the output records of how it was made (pipeline, lineage, versions, run)."""

    def claim(self, out: OutputPlan) -> Claim | None:
        """This run's claim on the output (every write must hold it)."""

    def if_exists(self, out: OutputPlan) -> str:
        """``"overwrite"`` when the plan replaces what is there, else ``"error"``."""

    def compute(self, items: list[Any]) -> list[Any]:
        """Compute dask collections together (counted as the run's passes)."""


@dataclass
class Streamed:
    """An output's share of the run's final pass.

    Attributes
    ----------
    stores : list of (dask array, zarr array)
        Chunks stored as they are, with every other output's, in one ``da.store``.
    lazy : list
        Dask collections computed in the same ``compute``.
    finish : callable
        Called with the computed values of ``lazy`` (in order) once the pass is done.
    """

    stores: list[tuple[Any, Any]] = field(default_factory=list)
    lazy: list[Any] = field(default_factory=list)
    finish: Callable[[list[Any]], None] = lambda values: None


class Probe:
    """What is at a location, each fact read at most once (kinds recognising what they
    wrote for ``ddr inspect`` share the reads)."""

    def __init__(self, location: Location) -> None:
        self.location = location

    @cached_property
    def is_file(self) -> bool:
        """A file (not a Zarr store, not a folder)."""
        return not self.location.is_zarr() and self.location.is_file()

    @cached_property
    def content(self) -> bytes | None:
        """The bytes of a file; None for a store, or a file that cannot be read (access
        errors and timeouts are raised)."""
        if not self.is_file:
            return None
        try:
            return self.location.read_bytes()
        except (PermissionError, TimeoutError, ConnectionError):
            raise
        except Exception:  # unreadable: not a (complete) ddr file
            return None

    @cached_property
    def attrs(self) -> dict[str, Any] | None:
        """The attributes of a Zarr group; None when there is none or they cannot be read."""
        if self.is_file:
            return None
        from ddr.io import read_attrs

        try:
            return read_attrs(self.location)
        except (PermissionError, TimeoutError, ConnectionError):
            raise
        except Exception:
            return None


# ------------------------------------------------------------------------ the class
class OutputKind(abc.ABC):
    """One kind of pipeline output. Subclass, set the class attributes, implement the
    abstract methods, and register the class with :func:`register_output_kind`.

    Attributes
    ----------
    name : str
        The ``kind:`` of the YAML entry.
    spec : type
        The pydantic model of the entry (a subclass of :class:`OutputSpec` whose ``kind``
        field is ``Literal[name]``), or a discriminated union of such models.
    takes : str
        What ``from`` may name, one line of Markdown for the docs' table of kinds.
    writes : str
        What is written, one line of Markdown for the same table.
    replaces_foreign : bool
        Whether ``--force`` may replace something at the path that ddr did not write (files
        rewritten whole may; a folder may hold anything and is never replaced).
    """

    name: ClassVar[str]
    spec: ClassVar[Any]
    takes: ClassVar[str]
    writes: ClassVar[str]
    replaces_foreign: ClassVar[bool] = False

    # ---------------------------------------------------------------- planning
    def spec_type(self) -> Any:
        """The type the schema's union of outputs holds for this kind (:attr:`spec`)."""
        return self.spec

    def refs(self, spec: Any) -> dict[str, str]:
        """What the entry names, as key -> reference (the keys name the values in what is
        written). By default ``from``: one reference, a list, or a mapping."""
        src = spec.from_
        if isinstance(src, str):
            return {src.replace(".", "_"): src}
        if isinstance(src, list):
            return {r: r for r in src}
        return dict(src)

    def planned_refs(self, spec: Any, ctx: CheckContext) -> dict[str, str]:
        """:meth:`refs` and what the kind reads besides, known once the steps are (a KDE
        plot's histogram reads the data its density was fitted on)."""
        return self.refs(spec)

    def ref_where(self, spec: Any, key: str) -> tuple[Any, ...]:
        """Where the reference of ``key`` is written in the entry (for messages)."""
        src = spec.from_
        if isinstance(src, dict):
            return ("from", key)
        if isinstance(src, list):
            return ("from", src.index(key))
        return ("from",)

    @abc.abstractmethod
    def check(self, ctx: CheckContext, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        """Report what is wrong with the output before any data is read (``metas``: what
        each of ``out.refs`` holds, known from metadata)."""

    def streams(self, out: OutputPlan, metas: dict[str, ValueMeta]) -> bool:
        """Whether the output needs a pass over the data (written by :meth:`stream` in the
        run's final pass); else :meth:`write` writes it as soon as its sources exist."""
        return False

    # ----------------------------------------------------------------- writing
    @abc.abstractmethod
    def write(self, w: WriteContext, out: OutputPlan) -> None:
        """Write the output whole, with its fingerprint and provenance; a crash at any
        point leaves it incomplete or missing, never complete."""

    def stream(self, w: WriteContext, out: OutputPlan) -> Streamed:
        """The output's share of the final pass (kinds whose :meth:`streams` can be true:
        registration refuses such a kind that does not define this)."""
        raise TypeError(f"the {self.name} output kind does not stream; it is written whole")

    # ------------------------------------------------------------- reading back
    @abc.abstractmethod
    def status(self, location: Location) -> tuple[str, str | None]:
        """``(status, fingerprint)``: ``"missing"``, ``"complete"`` (with the stored
        fingerprint), ``"incomplete"`` or ``"not-ddr"``."""

    @abc.abstractmethod
    def read_provenance(self, location: Location) -> dict[str, Any] | None:
        """The provenance stored in the output, or None."""

    def written_elsewhere(self, location: Location, pipeline: Any) -> str | None:
        """What a complete output at ``location`` is when the pipeline named ``pipeline``
        did not write it (a dataset, another pipeline's output), in words; None when it did
        (or when such outputs are always rewritten whole)."""
        return None

    def saved_model(self, out: OutputPlan) -> str | None:
        """The step whose fitted model this output saves (a rerun loads it from a complete
        output instead of fitting again), else None."""
        return None

    @abc.abstractmethod
    def recognizes(self, probe: Probe) -> int:
        """How surely what is at ``probe.location`` is an output of this kind: 0 not, 1 its
        form fits (any Zarr store), 2 its content says so (a fingerprint inside)."""

    @abc.abstractmethod
    def inspect(self, probe: Probe) -> dict[str, Any]:
        """What ``ddr inspect`` shows: ``status`` (as :meth:`status`), ``fingerprint``, and
        what the output holds."""

    # ---------------------------------------------------------------- testing
    @abc.abstractmethod
    def examples(self) -> list[dict[str, Any]]:
        """Entries the conformance suite (:mod:`ddr.testing.output_kinds`) writes: each
        ``{"output": {...}, "steps": {...}}``, the output without ``kind`` and with a file
        name as ``path``, the steps it needs over the inputs ``X`` (features) and ``y``
        (class labels)."""


# --------------------------------------------------------------------- the registry
def _spec_problems(cls: type[OutputKind]) -> list[str]:
    problems = []
    models = spec_models(cls.spec)
    if not models:
        problems.append("spec (a pydantic model, or a union of models)")
    for model in models:
        if not issubclass(model, OutputSpec):
            problems.append(f"spec {model.__name__} subclassing OutputSpec")
        elif tag_of(model, "kind") != cls.name:
            problems.append(f"spec {model.__name__} with kind: Literal[{cls.name!r}]")
    if cls.streams is not OutputKind.streams and cls.stream is OutputKind.stream:
        problems.append("stream (it overrides streams)")
    return problems


#: the registered output kinds
KINDS: KindRegistry[OutputKind] = KindRegistry(
    "output kind", OutputKind, ("takes", "writes"), _spec_problems, group="ddr.outputs"
)

#: Register an output kind class (also as a class decorator); see :meth:`KindRegistry.register`.
register_output_kind = KINDS.register
#: Remove a registered output kind class.
unregister_output_kind = KINDS.unregister
#: The registered output kinds by name, in the order messages list them.
output_kinds = KINDS.all
#: The output kind registered under a name (a ValueError naming the kinds if none is).
output_kind = KINDS.get


def kind_at(location: Location) -> tuple[OutputKind | None, Probe]:
    """The kind whose output is at ``location`` (the one most sure of it; None when none
    recognises it), and the probe holding what was read there."""
    probe = Probe(location)
    best, sure = None, 0
    for kind in output_kinds().values():
        score = kind.recognizes(probe)
        if score > sure:
            best, sure = kind, score
    return best, probe
