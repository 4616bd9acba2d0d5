"""``plot: scatter``: two score columns (one of each view for CCA), evenly sampled rows,
coloured by class, with their correlation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from ddr.config.validation import Int, PositiveInt
from ddr.pipeline.outputs.arrays import data_of
from ddr.pipeline.outputs.base import CheckContext, WriteContext
from ddr.pipeline.outputs.plots.base import (
    BLUE,
    GREY,
    PlotKind,
    PlotOutput,
    check_labels,
    component_name,
    figure,
    natural_key,
    register_plot_kind,
)
from ddr.pipeline.plan import _a, _shape
from ddr.pipeline.spec_types import Ref, split_ref

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, Plan, ValueMeta

__all__ = ["ScatterPlot", "ScatterPlotOutput", "draw_scatter", "sample_rows"]


class ScatterPlotOutput(PlotOutput):
    """Two columns of scores against each other."""

    plot: Literal["scatter"]
    labels: Ref | None = Field(None, description="Colour by these labels.")
    y_from: Ref | None = Field(
        None,
        description="The scores on the vertical axis, when not `from` (CCA's Y variates: "
        "variates.y_data).",
    )
    max_points: PositiveInt = Field(5000, description="Rows drawn (evenly sampled).")
    components: tuple[Int, Int] = Field(
        (0, 1),
        description="The column of `from` on the horizontal axis and the column of "
        "`y_from` (or `from`) on the vertical one.",
    )


@register_plot_kind
class ScatterPlot(PlotKind):
    """Column ``components[0]`` of ``from`` against column ``components[1]`` of ``y_from``."""

    name = "scatter"
    spec = ScatterPlotOutput
    takes = "2-D scores, `labels:` to colour by class, `max_points`, `components`, `y_from`"
    draws = (
        "column `components[0]` of `from` against column `components[1]` of `y_from` "
        "(default: `from` again), evenly sampled rows, coloured by `labels`, with their "
        "correlation. CCA's first variates: `{plot: scatter, from: variates, y_from: "
        "variates.y_data, components: [0, 0]}`"
    )

    def refs(self, spec: ScatterPlotOutput) -> dict[str, str]:
        refs = {}
        if spec.labels:
            refs["labels"] = spec.labels
        if spec.y_from:
            refs["y_from"] = spec.y_from
        return refs

    def check(
        self, ctx: CheckContext, out: OutputPlan, src: ValueMeta, metas: dict[str, ValueMeta]
    ) -> None:
        spec: ScatterPlotOutput = out.spec  # type: ignore[assignment]
        base = ("outputs", out.index)
        if src.kind != "array" or (src.shape is not None and len(src.shape) != 2):
            ctx.problem(
                (*base, "from"),
                f"a scatter plot needs 2-D scores (samples x "
                f"components); {spec.from_!r} is {_a(src.kind)}"
                f"{' of shape ' + _shape(src.shape) if src.shape else ''}",
            )
            return
        width = src.shape[1] if src.shape else None
        if width is not None and spec.components[0] >= width:
            ctx.problem(
                (*base, "components"),
                f"components {list(spec.components)} but {spec.from_!r} has {width} columns",
            )
        ys = metas.get("y_from", src)
        where = spec.y_from or spec.from_
        if ys.kind != "array" or (ys.shape is not None and len(ys.shape) != 2):
            ctx.problem(
                (*base, "y_from"),
                f"y_from must be 2-D scores (samples x components); {where!r} is {_a(ys.kind)}",
            )
        elif ys.shape is not None and spec.components[1] >= (ys.shape[1] or np.inf):
            ctx.problem(
                (*base, "components"),
                f"components {list(spec.components)} but {where!r} has {ys.shape[1]} columns",
            )
        elif (
            ys.shape
            and src.shape
            and None not in (ys.shape[0], src.shape[0])
            and (ys.shape[0] != src.shape[0])
        ):
            ctx.problem(
                (*base, "y_from"),
                f"{where!r} has {ys.shape[0]} rows but {spec.from_!r} has {src.shape[0]}",
            )
        check_labels(ctx, out, src, metas.get("labels"))

    def gather(self, w: WriteContext, out: OutputPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        spec: ScatterPlotOutput = out.spec  # type: ignore[assignment]
        src = data_of(w.value(spec.from_))
        labels = data_of(w.value(spec.labels)) if spec.labels else None
        i, j = spec.components
        y_ref = spec.y_from or spec.from_
        ys = data_of(w.value(y_ref)) if spec.y_from else src
        lazy = {
            "x": sample_rows(src, spec.max_points)[:, i],
            "y": sample_rows(ys, spec.max_points)[:, j],
        }
        if labels is not None:
            lazy["labels"] = sample_rows(labels, spec.max_points)
        known = {
            "n_total": int(src.shape[0]),
            "xlabel": _column_name(w.plan, spec.from_, i),
            "ylabel": _column_name(w.plan, y_ref, j),
        }
        return lazy, known

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        return draw_scatter(
            data["x"],
            data["y"],
            data.get("labels"),
            data["n_total"],
            data.get("xlabel", "column 1"),
            data.get("ylabel", "column 2"),
            title,
        )

    def example(self) -> dict[str, Any]:
        return {
            "output": {"from": "scores", "labels": "y", "path": "scatter.png"},
            "steps": {
                "pca": {"op": "PCA.fit", "inputs": {"X": "X"}, "with": {"n_components": 2}},
                "scores": {"op": "PCA.transform", "inputs": {"model": "pca", "X": "X"}},
            },
        }


def sample_rows(arr: Any, max_points: int) -> Any:
    """Evenly spaced rows of a (lazy) array: at most ``max_points``, in order."""
    n = arr.shape[0]
    if n <= max_points:
        return arr
    idx = np.linspace(0, n - 1, max_points).round().astype(np.int64)
    return arr[idx]


def _column_name(plan: Plan, ref: str, i: int) -> str:
    """``PC1``: column ``i`` of ``ref``, named by the estimator class that made it."""
    head, tail = split_ref(ref)
    step = plan.steps.get(head)
    if step is None:
        return f"{head} column {i + 1}"
    return component_name(step.op.cls, i, tail or "data")


def draw_scatter(
    x: np.ndarray,
    y: np.ndarray,
    labels: np.ndarray | None,
    n_total: int,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
) -> Any:
    """One point per (sampled) row, coloured by class; the correlation of x and y printed."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    fig, ax = figure(title, f"{ylabel} against {xlabel}")
    if labels is None:
        ax.scatter(x, y, s=4, alpha=0.5, color=BLUE, linewidths=0)
    else:
        labels = np.asarray(labels)
        for lab in sorted(np.unique(labels).tolist(), key=lambda v: natural_key(str(v))):
            sel = labels == lab
            ax.scatter(x[sel], y[sel], s=4, alpha=0.6, label=str(lab), linewidths=0)
        ax.legend(title="class", markerscale=3, fontsize="small", loc="best")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    note = f"correlation {_corr(x, y):+.3f}"
    if x.size < n_total:
        note += f" on {x.size} of {n_total} rows (evenly sampled)"
    ax.annotate(note, (0.01, 0.01), xycoords="axes fraction", fontsize="small", color=GREY)
    return fig


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 2 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
