"""``plot: scree``: each component's share of the total variance and the cumulative share."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ddr.pipeline.outputs.plots.base import (
    BLUE,
    GREY,
    ORANGE,
    ModelPlot,
    PlotOutput,
    component_name,
    figure,
    register_plot_kind,
)

__all__ = ["ScreePlot", "ScreePlotOutput", "draw_scree"]


class ScreePlotOutput(PlotOutput):
    """A scree plot of a fitted model."""

    plot: Literal["scree"]


@register_plot_kind
class ScreePlot(ModelPlot):
    """Bars: each component's share of the total variance; line: the cumulative share."""

    name = "scree"
    spec = ScreePlotOutput
    takes = "from a model with `explained_variance_ratio_` or `eigenvalues_`"
    draws = (
        "each component's share of the *total* variance (bars, as a percentage) and the "
        "cumulative share; for kernel PCA the total is the trace of the centred kernel "
        "matrix, so components that were not computed count too; the legend sits below the "
        "axes"
    )

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        return draw_scree(data["model"], title)

    def example(self) -> dict[str, Any]:
        return {
            "output": {"from": "pca", "path": "scree.png"},
            "steps": {"pca": {"op": "PCA.fit", "inputs": {"X": "X"}, "with": {"n_components": 2}}},
        }


def _shares(model: Any) -> tuple[np.ndarray, str]:
    """Each component's share of the total variance, and what the total is."""
    ratio = getattr(model, "explained_variance_ratio_", None)
    if ratio is not None:
        return np.asarray(ratio, dtype=np.float64).ravel(), "share of the total variance"
    for attr in ("eigenvalues_", "explained_variance_"):
        value = getattr(model, attr, None)
        if value is not None:  # no total known: the share of what was computed, said so
            v = np.asarray(value, dtype=np.float64).ravel()
            return (v / v.sum() if v.sum() > 0 else v), "share of the computed components"
    raise ValueError(
        f"a scree plot needs a model with explained_variance_ratio_ or eigenvalues_; "
        f"{type(model).__name__} has neither"
    )


def draw_scree(model: Any, title: str | None = None) -> Any:
    """Bars: each component's share of the total variance; line: the cumulative share."""
    from matplotlib.ticker import PercentFormatter

    share, of_what = _shares(model)
    cls = type(model)
    fig, ax = figure(title, f"{cls.__name__}: variance explained per component")
    k = np.arange(1, share.size + 1)
    ax.bar(k, share, color=BLUE, label=of_what)
    ax.plot(k, np.cumsum(share), color=ORANGE, marker="o", ms=3, label="cumulative")
    ax.set_ylim(0, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel(of_what)
    ax.set_xlabel("component")
    if share.size <= 15:
        ax.set_xticks(k, [component_name(cls, i) for i in range(share.size)])
    else:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    # below the axes: never on top of the bars or the line
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    total = float(np.sum(share))
    ax.annotate(
        f"{share.size} components: {total:.1%}",
        (0.98, 0.5),
        xycoords="axes fraction",
        ha="right",
        color=GREY,
        fontsize="small",
    )
    return fig
