"""What each plot output needs from a run: the lazy data computed in the stream phase (one
pass shared with the other outputs) and what the plan says about it (axis names, whether
predictions are on training rows).

:func:`streamed_data` gives, for a plot that needs data, the dask collections to compute and
the small values known already; :func:`model_data` the same for plots of a fitted model.
Both return keyword arguments of :func:`ddr.pipeline.reports.plot`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ddr.io.locations import Location, resolve
from ddr.pipeline.plan import OutputPlan, Plan
from ddr.pipeline.plots import component_name, kde_grid
from ddr.pipeline.reports import confusion_blocks, sample_rows
from ddr.pipeline.schema import PlotOutput, split_ref
from ddr.pipeline.writers import data_of

__all__ = ["HISTOGRAM_BINS", "finish_data", "model_data", "streamed_data"]

#: bins of the histogram of the data under a 1-D density
HISTOGRAM_BINS = 60


def _column_name(plan: Plan, ref: str, i: int) -> str:
    """``PC1``: column ``i`` of ``ref``, named by the estimator class that made it."""
    head, tail = split_ref(ref)
    step = plan.steps.get(head)
    if step is None:
        return f"{head} column {i + 1}"
    return component_name(step.op.cls, i, tail or "data")


def _saved_model_path(plan: Plan, ref: str) -> Location | None:
    step = plan.steps.get(split_ref(ref)[0])
    if step is None:
        return None
    if step.action == "load":
        return step.load_from
    if step.op.family == "load":
        return resolve(step.spec.with_["path"], step.spec.with_.get("storage_options"))
    return None


def model_data(out: OutputPlan, value: Callable[[str], Any]) -> dict[str, Any]:
    """The model a scree, kde or loglik plot is drawn from."""
    spec: PlotOutput = out.spec  # type: ignore[assignment]
    return {"model": value(spec.from_)}


def streamed_data(
    plan: Plan, out: OutputPlan, value: Callable[[str], Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(lazy, known)``: dask collections to compute in the stream phase, by name, and the
    values known already."""
    import dask.array as da

    from ddr.pipeline.lineage import rows_role

    spec: PlotOutput = out.spec  # type: ignore[assignment]
    if spec.plot == "kde":
        model = value(spec.from_)
        known = {"model": model}
        data = data_of(value(out.refs["kde:data"]))
        if int(getattr(model, "n_features_in_", 1)) != 1:
            return {}, known
        center, scale = kde_grid(model)
        lo, hi = float(center[0] - 4 * scale[0]), float(center[0] + 4 * scale[0])
        column = data[:, 0] if data.ndim == 2 else data
        counts, _ = da.histogram(column, bins=HISTOGRAM_BINS, range=(lo, hi))
        known["edges"] = np.linspace(lo, hi, HISTOGRAM_BINS + 1)
        return {"counts": counts}, known
    src = data_of(value(spec.from_))
    labels = data_of(value(spec.labels)) if spec.labels else None
    if spec.plot == "scatter":
        i, j = spec.components
        y_ref = spec.y_from or spec.from_
        ys = data_of(value(y_ref)) if spec.y_from else src
        lazy = {
            "x": sample_rows(src, spec.max_points)[:, i],
            "y": sample_rows(ys, spec.max_points)[:, j],
        }
        if labels is not None:
            lazy["labels"] = sample_rows(labels, spec.max_points)
        known = {
            "n_total": int(src.shape[0]),
            "xlabel": _column_name(plan, spec.from_, i),
            "ylabel": _column_name(plan, y_ref, j),
        }
        return lazy, known
    rows = rows_role(plan.steps, plan.inputs, spec.from_, _model_path(plan, spec.from_))
    return {"confusion": confusion_blocks(src, labels)}, {"rows": rows}


def _model_path(plan: Plan, predictions: str) -> Location | None:
    step = plan.steps.get(split_ref(predictions)[0])
    if step is None or "model" not in step.refs:
        return None
    return _saved_model_path(plan, step.refs["model"])


def finish_data(computed: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of :func:`ddr.pipeline.reports.plot` from computed lazy data."""
    from ddr.pipeline.reports import merge_confusion

    data = {**known, **computed}
    if "confusion" in data:
        data["confusion"] = merge_confusion(data["confusion"])
    if "counts" in data:
        data["histogram"] = (np.asarray(data.pop("counts")), data.pop("edges"))
    data.pop("edges", None)
    return data
