"""What a plot kind is (``plot: scree``, ``scatter``, ...), the registry of plot kinds, and
what their figures share.

A *plot kind* is one class, subclassing :class:`PlotKind`, that owns its extra spec fields
(:attr:`PlotKind.spec`, a subclass of :class:`PlotOutput`), what it may be drawn from and its
other checks, the data it gathers in a run (small values at once, lazy ones computed in the
run's final pass with every other output) and its drawing. The ``plot`` output kind
(:mod:`ddr.pipeline.outputs.plot`) writes the figure; registering a class with
:func:`register_plot_kind` is all a new plot takes.

Figures name their axes for the method (``PC1``, ``KPC1``, ``LD1``: asked of the estimator
class, see :func:`component_name`) and print the numbers a reader needs. matplotlib is
imported when a figure is drawn, with the non-interactive Agg backend.
"""

from __future__ import annotations

import abc
import typing
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Union

from pydantic import Field

from ddr.pipeline.outputs.base import CheckContext, OutputSpec, WriteContext
from ddr.pipeline.outputs.registry import KindRegistry, spec_models, tag_of
from ddr.pipeline.plan import _a
from ddr.pipeline.spec_types import Ref
from ddr.tags import get_ddr_tags

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = [
    "PLOTS",
    "ModelPlot",
    "PlotKind",
    "PlotOutput",
    "check_labels",
    "component_name",
    "figure",
    "natural_key",
    "plot_kind",
    "plot_kinds",
    "plot_union",
    "register_plot_kind",
    "unregister_plot_kind",
]

BLUE, ORANGE, GREY = "#4C72B0", "#DD8452", "0.35"


class PlotOutput(OutputSpec):
    """A PNG figure (matplotlib, the ``plot`` extra); each plot kind's spec adds its
    ``plot:`` name and its own fields."""

    kind: Literal["plot"]
    from_: Ref = Field(alias="from", description="What the plot is drawn from (see its plot).")
    title: str | None = None


class PlotKind(abc.ABC):
    """One kind of plot. Subclass, set the class attributes, implement the abstract
    methods, and register the class with :func:`register_plot_kind`.

    Attributes
    ----------
    name : str
        The ``plot:`` of the entry.
    spec : type
        Its spec: a subclass of :class:`PlotOutput` with ``plot: Literal[name]`` and the
        plot's own fields.
    takes : str
        What ``from`` names, a few words of Markdown for the docs' table of kinds.
    draws : str
        What the figure shows, a sentence of Markdown for the docs.
    """

    name: ClassVar[str]
    spec: ClassVar[type[PlotOutput]]
    takes: ClassVar[str]
    draws: ClassVar[str]

    def refs(self, spec: Any) -> dict[str, str]:
        """What the entry names besides ``from``, as key -> reference."""
        return {}

    def planned_refs(self, spec: Any, ctx: CheckContext) -> dict[str, str]:
        """:meth:`refs` and what the plot reads besides, known once the steps are."""
        return self.refs(spec)

    def ref_where(self, spec: Any, key: str) -> tuple[Any, ...]:
        """Where the reference of ``key`` (one of :meth:`planned_refs`) is written."""
        return (key,)

    @abc.abstractmethod
    def check(
        self, ctx: CheckContext, out: OutputPlan, src: ValueMeta, metas: dict[str, ValueMeta]
    ) -> None:
        """Report what is wrong before any data is read (``src``: what ``from`` holds)."""

    @abc.abstractmethod
    def gather(self, w: WriteContext, out: OutputPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(lazy, known)``: dask collections to compute (in the run's final pass when the
        output streams), by name, and the values known already."""

    def finish(self, computed: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
        """The data :meth:`draw` takes, from the computed lazy values and the known ones."""
        return {**known, **computed}

    @abc.abstractmethod
    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        """The matplotlib Figure."""

    @abc.abstractmethod
    def example(self) -> dict[str, Any]:
        """An entry the conformance suite writes: ``{"output": {...}, "steps": {...}}``, the
        output without ``kind`` and ``plot`` (see :meth:`OutputKind.examples
        <ddr.pipeline.outputs.base.OutputKind.examples>`)."""


class ModelPlot(PlotKind):
    """A plot of a fitted model (its data known once the model is)."""

    def check(
        self, ctx: CheckContext, out: OutputPlan, src: ValueMeta, metas: dict[str, ValueMeta]
    ) -> None:
        if src.kind != "model":
            ctx.problem(
                ("outputs", out.index, "from"),
                f"a {self.name} plot is drawn from a fitted model; {out.spec.from_!r} is "
                f"{_a(src.kind)}",
            )

    def gather(self, w: WriteContext, out: OutputPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        return {}, {"model": w.value(out.spec.from_)}


def check_labels(
    ctx: CheckContext, out: OutputPlan, src: ValueMeta, labels: ValueMeta | None
) -> None:
    """``labels:`` must be 1-D, one per row of ``from``."""
    spec = out.spec
    if labels is None:
        return
    where = ("outputs", out.index, "labels")
    if labels.kind != "array" or (labels.shape is not None and len(labels.shape) != 1):
        ctx.problem(
            where, f"labels must be 1-D (one per sample); {spec.labels!r} is {_a(labels.kind)}"
        )
    elif src.shape and labels.shape and src.shape[0] != labels.shape[0]:
        ctx.problem(
            where,
            f"{spec.labels!r} has {labels.shape[0]} rows but {spec.from_!r} has {src.shape[0]}",
        )


# ------------------------------------------------------------------------ figures
def figure(title: str | None, default: str, *, rows: int = 1) -> tuple[Any, Any]:
    """A Figure (Agg backend) with ``rows`` axes sharing x, titled ``title`` or
    ``default``."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    if rows == 1:
        fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    else:
        fig, ax = plt.subplots(
            rows, 1, figsize=(6.4, 5.6), sharex=True, layout="constrained", height_ratios=[2, 1]
        )
    fig.suptitle(title or default)
    return fig, ax


def component_name(cls: type | None, i: int, output: str = "data") -> str:
    """The name of column ``i`` of what ``cls`` (an estimator class) outputs: ``PC3``, as
    its tags say (:class:`ddr.tags.TransformerTags`)."""
    if cls is None or not hasattr(cls, "__ddr_tags__"):
        return f"column {i + 1}"
    transformer = get_ddr_tags(cls).transformer
    return transformer.name(i, output) if transformer is not None else f"component {i + 1}"


def natural_key(label: str) -> tuple[int, Any]:
    """Sort key of class labels: numbers in numeric order, then strings."""
    try:
        return (0, float(label))
    except ValueError:
        return (1, label)


# ---------------------------------------------------------------------- registry
def _spec_problems(cls: type[PlotKind]) -> list[str]:
    models = spec_models(cls.spec)
    if len(models) != 1 or not issubclass(models[0], PlotOutput):
        return ["spec (a subclass of PlotOutput)"]
    if tag_of(models[0], "plot") != cls.name:
        return [f"spec {models[0].__name__} with plot: Literal[{cls.name!r}]"]
    return []


#: the registered plot kinds
PLOTS: KindRegistry[PlotKind] = KindRegistry(
    "plot", PlotKind, ("takes", "draws"), _spec_problems, group="ddr.outputs"
)

#: Register a plot kind class (also as a class decorator).
register_plot_kind = PLOTS.register
#: Remove a registered plot kind class.
unregister_plot_kind = PLOTS.unregister
#: The registered plot kinds by name, in the order messages list them.
plot_kinds = PLOTS.all
#: The plot kind registered under a name (a ValueError naming the plots if none is).
plot_kind = PLOTS.get


def plot_union() -> Any:
    """The specs of every plot kind, told apart by ``plot:`` (a discriminated union)."""
    specs = tuple(p.spec for p in plot_kinds().values())
    if len(specs) == 1:
        return specs[0]
    return typing.Annotated[Union[specs], Field(discriminator="plot")]  # noqa: UP007
