"""``plot: sizes``: the training rows per cluster of a fitted clustering or mixture model.

What the sizes are is asked of the estimator (its tags' ``cluster_sizes``,
:class:`ddr.tags.DDRTags`), so a new clustering model draws here by declaring them: KMeans
gives the counts of its fit's last pass (``cluster_sizes_``), a mixture may give its weights
times its rows. The plot reads no data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ddr.pipeline.outputs.base import CheckContext
from ddr.pipeline.outputs.plots.base import (
    BLUE,
    GREY,
    ModelPlot,
    PlotOutput,
    figure,
    register_plot_kind,
)
from ddr.tags import get_ddr_tags

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["SizesPlot", "SizesPlotOutput", "cluster_sizes", "draw_sizes"]

#: above this many clusters the bars carry no numbers (they would overlap)
_LABELLED = 20


class SizesPlotOutput(PlotOutput):
    """The cluster sizes of a fitted model."""

    plot: Literal["sizes"]


@register_plot_kind
class SizesPlot(ModelPlot):
    """Bars: the training rows per cluster, each with its count and share."""

    name = "sizes"
    spec = SizesPlotOutput
    takes = "a clustering model (KMeans's `cluster_sizes_`)"
    draws = (
        "the training rows per cluster (bars, numbered as `predict` labels the clusters, "
        "each with its count and share of the rows up to 20 clusters), the total and the "
        "smallest and largest cluster; read from the fitted model, no pass over the data"
    )

    def check(
        self, ctx: CheckContext, out: OutputPlan, src: ValueMeta, metas: dict[str, ValueMeta]
    ) -> None:
        super().check(ctx, out, src, metas)
        if src.kind != "model" or src.cls is None or not hasattr(src.cls, "__ddr_tags__"):
            return
        try:
            declared = get_ddr_tags(src.cls, **src.params).cluster_sizes is not None
        except (TypeError, ValueError):
            return  # parameters the class refuses: its fit step reports them
        if not declared:  # refused before any data is read, not when the figure is drawn
            ctx.problem(
                ("outputs", out.index, "from"),
                f"a sizes plot is drawn from a clustering model that declares its cluster "
                f"sizes (KMeans); {out.spec.from_!r} is a {src.cls.__name__}",
            )

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        return draw_sizes(data["model"], title)

    def example(self) -> dict[str, Any]:
        km = {"op": "KMeans.fit", "inputs": {"X": "X"}, "with": {"n_clusters": 3}}
        return {"output": {"from": "km", "path": "sizes.png"}, "steps": {"km": km}}


def cluster_sizes(model: Any) -> np.ndarray:
    """The training rows per cluster of a fitted model, as its tags say.

    Parameters
    ----------
    model : fitted estimator
        One whose tags declare ``cluster_sizes`` (:class:`ddr.tags.DDRTags`).

    Returns
    -------
    ndarray of shape (n_clusters,)
        float64.

    Raises
    ------
    ValueError
        When the model declares no cluster sizes.
    """
    tags = get_ddr_tags(model) if hasattr(model, "__ddr_tags__") else None
    sizes_of = None if tags is None else tags.cluster_sizes
    if sizes_of is None:
        raise ValueError(
            "a sizes plot needs a clustering model that declares its cluster sizes (its "
            f"tags' cluster_sizes, as KMeans does); {type(model).__name__} declares none"
        )
    return np.asarray(sizes_of(model), dtype=np.float64).ravel()


def draw_sizes(model: Any, title: str | None = None) -> Any:
    """Bars: the training rows per cluster of a fitted model, each with its count and share.

    Parameters
    ----------
    model : fitted estimator
        One whose tags declare ``cluster_sizes``.
    title : str, optional
        The figure's title (default: the class and "rows per cluster").

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.ticker import MaxNLocator

    sizes = cluster_sizes(model)
    fig, ax = figure(title, f"{type(model).__name__}: rows per cluster")
    k = np.arange(sizes.size)  # the labels predict gives
    bars = ax.bar(k, sizes, color=BLUE)
    total = float(sizes.sum())
    whole = bool(np.all(sizes == np.round(sizes)))  # counts; a mixture's are expected rows
    if sizes.size <= _LABELLED:
        share = sizes / total if total > 0 else np.zeros_like(sizes)
        ax.bar_label(
            bars,
            [f"{_count(s, whole)}\n{p:.1%}" for s, p in zip(sizes, share, strict=True)],
            fontsize="x-small",
            color=GREY,
        )
        ax.set_xticks(k)
        ax.margins(y=0.15)  # room for the labels above the tallest bar
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("cluster")
    ax.set_ylabel("training rows" if whole else "training rows (expected)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    smallest, largest = int(np.argmin(sizes)), int(np.argmax(sizes))
    ax.set_title(
        f"{sizes.size} clusters, {_count(total, whole)} rows; smallest: cluster {smallest} "
        f"({_count(sizes[smallest], whole)}), largest: cluster {largest} "
        f"({_count(sizes[largest], whole)})",
        fontsize="small",
        color=GREY,
    )
    return fig


def _count(value: float, whole: bool) -> str:
    return f"{value:,.0f}" if whole else f"{value:,.1f}"
