"""``plot: maps``: a fitted attribute on the grid the model was fitted on, one panel per
component (EOF maps), masked points blank."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from ddr.config.validation import Int
from ddr.pipeline.outputs.plots.base import (
    GREY,
    ModelPlot,
    PlotOutput,
    component_name,
    register_plot_kind,
)
from ddr.tags import get_ddr_tags

if TYPE_CHECKING:
    from ddr.pipeline.outputs.base import CheckContext
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["MapsPlot", "MapsPlotOutput", "draw_maps"]

#: panels side by side before a new row starts
_COLUMNS = 3


class MapsPlotOutput(PlotOutput):
    """Maps of a fitted attribute, a panel per component."""

    plot: Literal["maps"]
    attribute: str = Field(
        "components_",
        description="The fitted attribute drawn (one the estimator gives as a map, e.g. "
        "components_, mean_).",
    )
    components: Int = Field(
        6, ge=1, description="Draw the first this many components (panels), at most."
    )


@register_plot_kind
class MapsPlot(ModelPlot):
    """A fitted attribute on the model's grid: one panel per component, one colour scale
    centred on 0 for all panels, masked points blank."""

    name = "maps"
    spec = MapsPlotOutput
    takes = "from a model (its `attribute`, by default `components_`)"
    draws = (
        "the attribute on the grid the model was fitted on (`sample_dims:`; the input's "
        "coordinates on the axes), one panel per component with its share of the variance "
        "where the model has `explained_variance_ratio_`, one colour scale centred on 0, "
        "masked points (NaN at every sample) blank; a model fitted on one feature dim gets "
        "a line per panel"
    )

    def check(
        self, ctx: CheckContext, out: OutputPlan, src: ValueMeta, metas: dict[str, ValueMeta]
    ) -> None:
        super().check(ctx, out, src, metas)
        attr = out.spec.attribute
        if src.kind != "model" or src.cls is None or not hasattr(src.cls, "__ddr_tags__"):
            return
        declared = get_ddr_tags(src.cls, **src.params).xarray_dims
        if attr not in declared:
            ctx.problem(
                ("outputs", out.index, "attribute"),
                f"{src.cls.__name__} has no attribute {attr!r} to draw as a map; it has "
                f"{', '.join(sorted(declared)) or 'none'}",
            )

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        return draw_maps(data["model"], title, data["attribute"], data["components"])

    def gather(self, w: Any, out: OutputPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        lazy, known = super().gather(w, out)
        known.update(attribute=out.spec.attribute, components=out.spec.components)
        return lazy, known

    def example(self) -> dict[str, Any]:
        pca = {"op": "PCA.fit", "inputs": {"X": "X"}, "with": {"n_components": 2}}
        return {"output": {"from": "pca", "path": "maps.png"}, "steps": {"pca": pca}}


def _feature_dims(model: Any, arr: Any, attribute: str) -> tuple[str, ...]:
    """The dims of ``arr`` (``model.as_xarray(attribute)``) that are features: all but the
    dims the attribute declares of its own (``component``, ``class``; renamed
    ``<estimator>_<dim>`` where a feature dim has the name), whichever grid they are on
    (X's, or Y's for a two-view model's ``y_weights_``)."""
    owner = type(model).__name__.lower()
    declared = get_ddr_tags(model).xarray_dims.get(attribute, ())
    own = {d for d in declared if not d.startswith("__")}
    own |= {f"{owner}_{d}" for d in own}
    return tuple(str(d) for d in arr.dims if str(d) not in own) or (str(arr.dims[-1]),)


def draw_maps(
    model: Any, title: str | None = None, attribute: str = "components_", components: int = 6
) -> Any:
    """The fitted ``attribute`` of ``model`` on its grid: a panel per component (the first
    ``components``), one colour scale centred on 0, NaN (masked points) blank.

    Parameters
    ----------
    model : estimator
        Fitted; ``attribute`` among its ``xarray_dims`` tag (``model.as_xarray``).
    title : str, optional
        The figure's title (default: the model and the attribute).
    attribute : str
        The attribute, e.g. ``components_`` of shape (n_components, n_features).
    components : int
        Panels at most.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    cls = type(model)
    arr = model.as_xarray(attribute)
    if not hasattr(arr, "dims") or not hasattr(arr, "values") or hasattr(arr, "data_vars"):
        raise ValueError(
            f"a maps plot draws one grid; {cls.__name__} was fitted on a Dataset (one grid per "
            "variable): write its maps with kind: zarr"
        )
    fdims = _feature_dims(model, arr, attribute)
    lead = [d for d in arr.dims if d not in fdims]
    if len(fdims) > 2 or len(lead) > 1:
        raise ValueError(
            f"a maps plot draws 1 or 2 feature dims with one panel dim; {cls.__name__}."
            f"{attribute} has dims {tuple(map(str, arr.dims))} (feature dims {fdims}): select "
            "a level of the input with isel"
        )
    arr = arr.transpose(*lead, *fdims)
    if lead:
        arr = arr.isel({lead[0]: slice(0, components)})
    panels = arr.sizes[lead[0]] if lead else 1
    ncols = panels if panels <= _COLUMNS else min(_COLUMNS, math.ceil(math.sqrt(panels)))
    nrows = math.ceil(panels / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.6 * ncols + 0.8, 2.6 * nrows + 0.6), layout="constrained",
        squeeze=False,
    )  # fmt: skip
    fig.suptitle(title or f"{cls.__name__}: {attribute.rstrip('_')} on the grid")
    values = np.asarray(arr.values, dtype=np.float64)
    top = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    ratio = getattr(model, "explained_variance_ratio_", None)
    image = None
    for i, ax in enumerate(axes.ravel()):
        if i >= panels:
            ax.set_visible(False)
            continue
        one = arr.isel({lead[0]: i}) if lead else arr
        name = component_name(cls, i) if lead and lead[0] == "component" else f"{i + 1}"
        share = f" ({float(ratio[i]):.1%})" if ratio is not None and lead else ""
        ax.set_title(f"{name}{share}" if lead else attribute.rstrip("_"), fontsize="medium")
        if len(fdims) == 2:
            image = _panel(ax, one, fdims, top)
        else:
            ax.plot(_axis(one, fdims[0]), np.asarray(one.values), color=GREY, marker=".", ms=3)
            ax.axhline(0.0, color=GREY, linewidth=0.5)
            ax.set_xlabel(_label(one, fdims[0]))
    if image is not None:
        units = arr.attrs.get("units")  # what the attribute is in, when the data said
        label = attribute.rstrip("_") + (f" ({units})" if units else "")
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label=label)
    masked = int(np.isnan(values[0] if lead else values).sum())
    if masked:
        fig.text(0.01, 0.005, f"{masked} masked points (blank)", color=GREY, fontsize="small")
    return fig


def _axis(arr: Any, dim: str) -> np.ndarray:
    """The coordinate of ``dim`` (numeric) or the positions along it."""
    if dim in arr.coords and np.asarray(arr.coords[dim].values).dtype.kind in "iuf":
        return np.asarray(arr.coords[dim].values, dtype=np.float64)
    return np.arange(arr.sizes[dim], dtype=np.float64)


def _label(arr: Any, dim: str) -> str:
    units = arr.coords[dim].attrs.get("units") if dim in arr.coords else None
    return f"{dim} ({units})" if units else dim


def _panel(ax: Any, one: Any, fdims: tuple[str, ...], top: float) -> Any:
    """One map: ``fdims`` (y, x) with their coordinates, NaN left blank."""
    y, x = fdims
    values = np.ma.masked_invalid(np.asarray(one.transpose(y, x).values, dtype=np.float64))
    image = ax.pcolormesh(
        _axis(one, x), _axis(one, y), values, cmap="RdBu_r", vmin=-top, vmax=top,
        shading="nearest",
    )  # fmt: skip
    ax.set_xlabel(_label(one, x), fontsize="small")
    ax.set_ylabel(_label(one, y), fontsize="small")
    ax.tick_params(labelsize="small")
    return image
