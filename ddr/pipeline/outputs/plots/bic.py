"""``plot: bic``: BIC and AIC of several fitted models against their number of components,
to choose it.

The plot is drawn from two or more fitted models of one pipeline (``from:`` a list of steps).
What it draws is asked of each model: ``information_criteria()``, a method returning its
``n_components``, ``bic`` and ``aic`` on its training rows from what the fit kept
(:meth:`ddr.GaussianMixture.information_criteria`), so the plot reads no data. Models that
differ in more than ``n_components`` (a ``covariance_type`` each, say) are drawn as one pair
of lines per setting, labelled by the parameters that differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from ddr.pipeline.outputs.base import CheckContext, WriteContext
from ddr.pipeline.outputs.plots.base import (
    BLUE,
    ORANGE,
    PlotKind,
    PlotOutput,
    figure,
    register_plot_kind,
)
from ddr.pipeline.plan import _a
from ddr.pipeline.spec_types import Ref

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["BicPlot", "BicPlotOutput", "criteria_table", "draw_bic"]

#: the method a model answers the plot with (see the module's docstring)
CRITERIA = "information_criteria"
#: colours of further settings (the first is BLUE)
_MORE_COLOURS = ("#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


class BicPlotOutput(PlotOutput):
    """BIC and AIC of fitted models by their number of components."""

    plot: Literal["bic"]
    from_: list[Ref] = Field(  # type: ignore[assignment]  # several models, not one
        alias="from",
        description="Two or more fitted models with information_criteria() (GaussianMixture "
        "fits of the same X with different n_components).",
    )


@register_plot_kind
class BicPlot(PlotKind):
    """BIC (solid) and AIC (dashed) per number of components; the lowest BIC marked."""

    name = "bic"
    spec = BicPlotOutput
    takes = "a list of fitted models with `information_criteria()` (GaussianMixture)"
    draws = (
        "BIC (solid) and AIC (dashed) of each model against its number of components, from "
        "the log-likelihood its fit computed last (no pass over the data), the lowest BIC "
        "marked and printed; models that differ in other parameters too (`covariance_type`) "
        "get a pair of lines per setting"
    )

    def check(
        self, ctx: CheckContext, out: OutputPlan, src: ValueMeta, metas: dict[str, ValueMeta]
    ) -> None:
        spec: BicPlotOutput = out.spec
        where = ("outputs", out.index, "from")
        if len(spec.from_) < 2:
            ctx.problem(where, "a bic plot compares two or more fitted models; name them in a list")
        for i, ref in enumerate(spec.from_):
            meta = metas.get(ref)
            if meta is None:
                continue  # an unknown reference, reported by the planner
            if meta.kind != "model":
                ctx.problem((*where, i), f"a bic plot is drawn from fitted models; {ref!r} is "
                            f"{_a(meta.kind)}")  # fmt: skip
            elif meta.cls is not None and not callable(getattr(meta.cls, CRITERIA, None)):
                ctx.problem(
                    (*where, i),
                    f"a bic plot needs models with {CRITERIA}() (GaussianMixture); {ref!r} is "
                    f"a {meta.cls.__name__}",
                )

    def gather(self, w: WriteContext, out: OutputPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        spec: BicPlotOutput = out.spec
        return {}, {"models": {ref: w.value(ref) for ref in spec.from_}}

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        return draw_bic(data["models"], title)

    def example(self) -> dict[str, Any]:
        # a k-means++ start: the plot needs models to compare, not k-means run to its end
        # before each (the conformance suite runs the example many times)
        steps = {
            f"gm{k}": {"op": "GaussianMixture.fit", "inputs": {"X": "X"},
                       "with": {"n_components": k, "random_state": 0,
                                "init_params": "k-means++"}}
            for k in (1, 2, 3)
        }  # fmt: skip
        return {"output": {"from": list(steps), "path": "bic.png"}, "steps": steps}


def criteria_table(models: dict[str, Any]) -> list[dict[str, Any]]:
    """Each model's criteria (its ``information_criteria()``), its name and its setting.

    Parameters
    ----------
    models : dict
        Fitted models by name.

    Returns
    -------
    list of dict
        Per model: what ``information_criteria()`` returns, plus ``name`` and ``setting``
        (the parameters other than ``n_components`` that differ between the models, as
        ``"covariance_type='tied'"``; empty when only ``n_components`` does).

    Raises
    ------
    ValueError
        When a model has no ``information_criteria()``, or the models were fitted on
        different numbers of rows (their criteria do not compare).
    """
    rows: list[dict[str, Any]] = []
    params: list[dict[str, Any]] = []
    for name, model in models.items():
        method = getattr(model, CRITERIA, None)
        if not callable(method):
            raise ValueError(
                f"a bic plot needs models with {CRITERIA}() (GaussianMixture); {name!r} is a "
                f"{type(model).__name__}"
            )
        rows.append({**method(), "name": name})
        params.append(model.get_params(deep=False) if hasattr(model, "get_params") else {})
    sizes = {int(r["n_samples"]) for r in rows}
    if len(sizes) > 1:
        listed = ", ".join(f"{r['name']}: {r['n_samples']}" for r in rows)
        raise ValueError(
            f"a bic plot compares models fitted on the same rows; these were fitted on "
            f"different numbers of rows ({listed})"
        )
    # what tells the models apart besides their size: one line per setting
    keys = sorted({k for p in params for k in p} - {"n_components", "random_state"})
    varying = [k for k in keys if len({repr(p.get(k)) for p in params}) > 1]
    for row, p in zip(rows, params, strict=True):
        row["setting"] = ", ".join(f"{k}={p.get(k)!r}" for k in varying)
    return rows


def draw_bic(models: dict[str, Any], title: str | None = None) -> Any:
    """BIC (solid) and AIC (dashed) against the number of components, one pair of lines per
    setting, the lowest BIC marked and printed.

    Parameters
    ----------
    models : dict
        Two or more fitted models by name (see :func:`criteria_table`).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.ticker import MaxNLocator

    rows = criteria_table(models)
    kind = type(next(iter(models.values()))).__name__
    fig, ax = figure(title, f"{kind}: BIC and AIC by number of components")
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    colours = (BLUE, *_MORE_COLOURS) if len(settings) > 1 else (BLUE,)
    for i, setting in enumerate(settings):
        mine = sorted((r for r in rows if r["setting"] == setting), key=lambda r: r["n_components"])
        k = np.array([r["n_components"] for r in mine], dtype=np.float64)
        bic = np.array([r["bic"] for r in mine], dtype=np.float64)
        aic = np.array([r["aic"] for r in mine], dtype=np.float64)
        colour = colours[i % len(colours)]
        suffix = f" ({setting})" if setting else ""
        ax.plot(k, bic, color=colour, marker="o", ms=4, label=f"BIC{suffix}")
        aic_colour = ORANGE if len(settings) == 1 else colour
        ax.plot(k, aic, color=aic_colour, marker="s", ms=3, linestyle="--", label=f"AIC{suffix}")
    best = min(rows, key=lambda r: r["bic"])
    ax.plot(
        [best["n_components"]], [best["bic"]], marker="*", ms=14, color="black",
        linestyle="none", label=f"lowest BIC {best['bic']:,.1f}: {best['name']}",
    )  # fmt: skip
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"number of components ({best['n_samples']:,} rows)")
    ax.set_ylabel("criterion (lower is better)")
    # below the axes: never on top of the lines
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    return fig
