"""``plot: kde``: a density model's curve over a histogram of the data it was fitted on
(computed in the run's final pass, shared with the other outputs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ddr.pipeline.outputs.arrays import data_of
from ddr.pipeline.outputs.base import CheckContext, WriteContext
from ddr.pipeline.outputs.plots.base import (
    BLUE,
    ModelPlot,
    PlotOutput,
    figure,
    register_plot_kind,
)
from ddr.pipeline.spec_types import split_ref

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan

__all__ = ["HISTOGRAM_BINS", "KdePlot", "KdePlotOutput", "draw_kde", "kde_grid"]

#: bins of the histogram of the data under a 1-D density
HISTOGRAM_BINS = 60
#: the key of the training data among the output's references
DATA = "kde:data"


class KdePlotOutput(PlotOutput):
    """The density a model estimates."""

    plot: Literal["kde"]


@register_plot_kind
class KdePlot(ModelPlot):
    """1-D: the density over a histogram of the training data, with the bandwidth. More
    dimensions: slices through the mean along the first features."""

    name = "kde"
    spec = KdePlotOutput
    takes = "a density model"
    draws = (
        "the density over a histogram of the data the density was fitted on (computed in "
        "the final pass, shared with the other outputs) and the bandwidth, also in data units"
    )

    def planned_refs(self, spec: KdePlotOutput, ctx: CheckContext) -> dict[str, str]:
        # the X its fit step read (a loaded model's data is not at hand: no histogram)
        head, tail = split_ref(spec.from_)
        step = ctx.steps.get(head)
        if step is None or step.op.family != "fit" or tail not in (None, "model"):
            return {}
        data = step.refs.get("X")
        return {DATA: data} if data is not None else {}

    def ref_where(self, spec: KdePlotOutput, key: str) -> tuple[Any, ...]:
        return ("from",)

    def gather(self, w: WriteContext, out: OutputPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        import dask.array as da

        model = w.value(out.spec.from_)
        known = {"model": model}
        if DATA not in out.refs or int(getattr(model, "n_features_in_", 1)) != 1:
            return {}, known
        data = data_of(w.value(out.refs[DATA]))
        center, scale = kde_grid(model)
        lo, hi = float(center[0] - 4 * scale[0]), float(center[0] + 4 * scale[0])
        column = data[:, 0] if data.ndim == 2 else data
        counts, _ = da.histogram(column, bins=HISTOGRAM_BINS, range=(lo, hi))
        known["edges"] = np.linspace(lo, hi, HISTOGRAM_BINS + 1)
        return {"counts": counts}, known

    def finish(self, computed: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
        data = {**known, **computed}
        if "counts" in data:
            data["histogram"] = (np.asarray(data.pop("counts")), data.pop("edges"))
        return data

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        return draw_kde(data["model"], data.get("histogram"), title)

    def example(self) -> dict[str, Any]:
        kde = {"op": "KernelDensity.fit", "inputs": {"X": "X"}}
        return {"output": {"from": "kde", "path": "kde.png"}, "steps": {"kde": kde}}


def kde_grid(model: Any, n_grid: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Centre and scale (per feature) of a density model's training data: the plot spans
    centre +- 4 scales."""
    d = int(getattr(model, "n_features_in_", 1))
    moments = getattr(model, "moments_", None)
    if moments is not None and hasattr(moments, "mean"):
        mean = np.asarray(moments.mean, dtype=np.float64)
        var = np.asarray(moments.variance(0), dtype=np.float64)
        return mean, np.sqrt(np.where(var > 0, var, 1.0))
    for attr in ("mean_", "location_", "_center_"):
        if getattr(model, attr, None) is not None:
            return np.asarray(getattr(model, attr), dtype=np.float64).ravel(), np.ones(d)
    return np.zeros(d), np.ones(d)


def draw_kde(
    model: Any,
    histogram: tuple[np.ndarray, np.ndarray] | None = None,
    title: str | None = None,
    *,
    n_curves: int = 4,
    n_grid: int = 256,
) -> Any:
    """1-D: the density over a histogram of the training data (``(counts, edges)``), with
    the bandwidth. More dimensions: slices through the mean along the first features."""
    d = int(getattr(model, "n_features_in_", 1))
    center, scale = kde_grid(model)
    fig, ax = figure(title, f"{type(model).__name__}: estimated density")
    if d == 1 and histogram is not None:
        counts, edges = (np.asarray(a, dtype=np.float64) for a in histogram)
        widths = np.diff(edges)
        dens = counts / max(counts.sum(), 1) / widths
        ax.bar(edges[:-1], dens, width=widths, align="edge", color="0.85", label="data")
    for j in range(min(d, n_curves)):
        t = np.linspace(center[j] - 4 * scale[j], center[j] + 4 * scale[j], n_grid)
        grid = np.tile(center, (n_grid, 1))
        grid[:, j] = t
        dens = np.exp(np.asarray(model.score_samples(grid), dtype=np.float64))
        label = "density estimate" if d == 1 else f"feature {j} (others at the mean)"
        ax.plot(t, dens, color=BLUE if d == 1 else None, label=label)
    ax.set_xlabel("value" if d == 1 else "value along the feature")
    ax.set_ylabel("density")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small", loc="upper right")
    bw = getattr(model, "bandwidth_", None)
    if bw is not None:
        note = f"bandwidth {bw:.3g}"
        chol = getattr(model, "kernel_cholesky_", None)
        if d == 1 and chol is not None:
            note += f" (kernel sd {bw * float(np.ravel(chol)[0]):.3g} in data units)"
        rule = getattr(model, "bandwidth", None)
        if isinstance(rule, str):
            note += f", {rule}"
        ax.annotate(note, (0.01, 0.97), xycoords="axes fraction", va="top", fontsize="small")
    return fig
