"""``plot: confusion``: counts of true x predicted class (computed in the run's final pass
as one small dict per row block, merged on the client), with the accuracy and whether the
rows were used to fit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from ddr.io.locations import Location, resolve
from ddr.pipeline.lineage import rows_role
from ddr.pipeline.outputs.arrays import data_of
from ddr.pipeline.outputs.base import CheckContext, WriteContext
from ddr.pipeline.outputs.plots.base import (
    GREY,
    PlotKind,
    PlotOutput,
    check_labels,
    figure,
    natural_key,
    register_plot_kind,
)
from ddr.pipeline.plan import _a
from ddr.pipeline.spec_types import Ref, split_ref

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, Plan, ValueMeta

__all__ = [
    "ConfusionPlot",
    "ConfusionPlotOutput",
    "confusion_blocks",
    "draw_confusion",
    "merge_confusion",
]


class ConfusionPlotOutput(PlotOutput):
    """A confusion matrix of predictions."""

    plot: Literal["confusion"]
    labels: Ref | None = Field(None, description="The true labels.")


@register_plot_kind
class ConfusionPlot(PlotKind):
    """Counts of (true, predicted) labels, saying which rows they are."""

    name = "confusion"
    spec = ConfusionPlotOutput
    takes = "predicted labels, `labels:` the truth"
    draws = (
        "counts of true x predicted class, with a labelled colour bar and the accuracy; the "
        "title says whether the rows are the **training rows**, **held-out rows (not used to "
        "fit)** (another dataset, or a row selection that does not overlap the training one, "
        "also for a loaded model, from its provenance) or **rows partly used to fit**"
    )

    def refs(self, spec: ConfusionPlotOutput) -> dict[str, str]:
        return {"labels": spec.labels} if spec.labels else {}

    def check(
        self, ctx: CheckContext, out: OutputPlan, src: ValueMeta, metas: dict[str, ValueMeta]
    ) -> None:
        spec: ConfusionPlotOutput = out.spec  # type: ignore[assignment]
        base = ("outputs", out.index)
        if src.kind != "array" or (src.shape is not None and len(src.shape) != 1):
            ctx.problem(
                (*base, "from"),
                f"a confusion matrix needs predicted labels "
                f"(1-D); {spec.from_!r} is {_a(src.kind)}",
            )
            return
        if spec.labels is None:
            ctx.problem(base, "a confusion matrix needs the true labels: add `labels:`")
        check_labels(ctx, out, src, metas.get("labels"))

    def gather(self, w: WriteContext, out: OutputPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        spec: ConfusionPlotOutput = out.spec  # type: ignore[assignment]
        src = data_of(w.value(spec.from_))
        labels = data_of(w.value(spec.labels)) if spec.labels else None
        plan = w.plan
        rows = rows_role(plan.steps, plan.inputs, spec.from_, _model_path(plan, spec.from_))
        return {"confusion": confusion_blocks(src, labels)}, {"rows": rows}

    def finish(self, computed: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
        return {**known, "confusion": merge_confusion(computed["confusion"])}

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        labels, counts = data["confusion"]
        return draw_confusion(labels, counts, data.get("rows", "rows"), title)

    def example(self) -> dict[str, Any]:
        return {
            "output": {"from": "pred", "labels": "y", "path": "confusion.png"},
            "steps": {
                "nb": {"op": "GaussianNB.fit", "inputs": {"X": "X", "y": "y"}},
                "pred": {"op": "GaussianNB.predict", "inputs": {"model": "nb", "X": "X"}},
            },
        }


def _model_path(plan: Plan, predictions: str) -> Location | None:
    """Where the model that made ``predictions`` was saved, when it is loaded (its
    provenance names the rows it was fitted on)."""
    step = plan.steps.get(split_ref(predictions)[0])
    if step is None or "model" not in step.refs:
        return None
    model = plan.steps.get(split_ref(step.refs["model"])[0])
    if model is None:
        return None
    if model.action == "load":
        return model.load_from
    if model.op.family == "load":
        return resolve(model.spec.with_["path"], model.spec.with_.get("storage_options"))
    return None


# ------------------------------------------------------------------ lazy counts
def confusion_blocks(pred: Any, truth: Any) -> Any:
    """A lazy object array with one ``{(true, predicted): count}`` dict per row block.

    An array (not a Delayed) so that it is optimized together with the other arrays of the
    same compute, and shares their reads of the input.
    """
    import dask.array as da

    pred = pred if isinstance(pred, da.Array) else da.asarray(pred)
    truth = truth if isinstance(truth, da.Array) else da.asarray(truth)
    truth = truth.rechunk(pred.chunks)
    return da.map_blocks(
        _pair_counts_block,
        pred,
        truth,
        dtype=object,
        chunks=((1,) * pred.numblocks[0],),
        meta=np.empty((0,), dtype=object),
    )


def _pair_counts_block(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    out = np.empty(1, dtype=object)
    out[0] = _pair_counts(pred, truth)
    return out


def merge_confusion(parts: Any) -> tuple[list[str], np.ndarray]:
    """Labels and counts[true, predicted] from the per-block dicts."""
    return _merge_counts(list(np.asarray(parts, dtype=object).ravel()))


def _as_str(a: Any) -> np.ndarray:
    # through object: numpy's StringDType (Zarr v3 strings) does not cast to "U" directly
    return np.asarray(a).astype(object).astype(str)


def _pair_counts(pred: np.ndarray, truth: np.ndarray) -> dict[tuple[Any, Any], int]:
    pairs, counts = np.unique(
        np.stack([_as_str(truth), _as_str(pred)], axis=1),
        axis=0,
        return_counts=True,
    )
    return {(a, b): int(c) for (a, b), c in zip(pairs.tolist(), counts.tolist(), strict=True)}


def _merge_counts(parts: list[dict[tuple[Any, Any], int]]) -> tuple[list[str], np.ndarray]:
    total: dict[tuple[Any, Any], int] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, 0) + v
    labels = sorted({a for a, _ in total} | {b for _, b in total}, key=natural_key)
    pos = {lab: i for i, lab in enumerate(labels)}
    mat = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for (a, b), v in total.items():
        mat[pos[a], pos[b]] = v
    return labels, mat


# ------------------------------------------------------------------------ figure
def draw_confusion(
    labels: list[str], counts: np.ndarray, rows: str, title: str | None = None
) -> Any:
    """Counts of (true, predicted) labels; ``rows`` says which rows they are (``"test rows
    (not used to fit)"``, ``"training rows"``) and goes in the title and the note."""
    counts = np.asarray(counts)
    fig, ax = figure(f"{title or 'Confusion matrix'} ({rows.split(' (')[0]})", "")
    im = ax.imshow(counts, cmap="Blues")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    top = counts.max() if counts.size else 0
    if len(labels) <= 20:
        for a in range(len(labels)):
            for b in range(len(labels)):
                ax.text(
                    b,
                    a,
                    str(counts[a, b]),
                    ha="center",
                    va="center",
                    fontsize="small",
                    color="white" if counts[a, b] > top / 2 else "black",
                )
    total = int(counts.sum())
    acc = np.trace(counts) / total if total else float("nan")
    ax.set_title(f"accuracy {acc:.3f} on {total} {rows}", fontsize="small", color=GREY)
    bar = fig.colorbar(im, ax=ax)
    bar.set_label("rows")
    return fig
