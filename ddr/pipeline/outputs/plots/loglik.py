"""``plot: loglik``: an EM fit's log-likelihood per iteration and its relative gain."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ddr.pipeline.outputs.plots.base import (
    BLUE,
    GREY,
    ORANGE,
    ModelPlot,
    PlotOutput,
    figure,
    register_plot_kind,
)
from ddr.tags import get_ddr_tags

__all__ = ["LoglikPlot", "LoglikPlotOutput", "draw_loglik"]


class LoglikPlotOutput(PlotOutput):
    """The convergence of an EM fit."""

    plot: Literal["loglik"]


@register_plot_kind
class LoglikPlot(ModelPlot):
    """Top: the log-likelihood per EM iteration; bottom: its relative gain against ``tol``."""

    name = "loglik"
    spec = LoglikPlotOutput
    takes = "PPCA's EM curve"
    draws = (
        "PPCA's log-likelihood per EM iteration in plain numbers (integer iteration ticks), "
        "and below it the relative gain per iteration on a log scale against `tol`"
    )

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        return draw_loglik(data["model"], title)

    def example(self) -> dict[str, Any]:
        ppca = {"op": "PPCA.fit", "inputs": {"X": "X"}, "with": {"n_components": 2}}
        return {"output": {"from": "ppca", "path": "loglik.png"}, "steps": {"ppca": ppca}}


def draw_loglik(model: Any, title: str | None = None) -> Any:
    """Top: the log-likelihood per EM iteration, in plain numbers. Bottom: its relative gain
    per iteration (log scale) against the stopping tolerance ``tol``."""
    from matplotlib.ticker import MaxNLocator

    name = get_ddr_tags(model).loglik_attribute if hasattr(model, "__ddr_tags__") else None
    curve = None if name is None else getattr(model, name, None)
    if curve is None:
        raise ValueError(
            "a loglik plot needs a model fitted by EM, with a log-likelihood curve (PPCA's "
            f"loglik_curve_, FactorAnalysis's loglike_); {type(model).__name__} has none"
        )
    curve = np.asarray(curve, dtype=np.float64).ravel()
    fig, (top, bottom) = figure(title, f"{type(model).__name__}: EM convergence", rows=2)
    it = np.arange(1, curve.size + 1)
    top.plot(it, curve, marker="o", ms=3, color=BLUE)
    top.ticklabel_format(axis="y", style="plain", useOffset=False)
    top.set_ylabel("log-likelihood")
    top.annotate(
        f"final {curve[-1]:,.1f} after {curve.size} iteration{'s' if curve.size != 1 else ''}",
        (0.98, 0.05),
        xycoords="axes fraction",
        ha="right",
        fontsize="small",
        color=GREY,
    )
    gain = np.abs(np.diff(curve)) / np.maximum(np.abs(curve[1:]), np.finfo(float).tiny)
    if gain.size:
        floor = np.finfo(float).eps
        bottom.semilogy(it[1:], np.maximum(gain, floor), marker="o", ms=3, color=ORANGE)
    tol = getattr(model, "tol", None)
    if tol:
        bottom.axhline(tol, color=GREY, linestyle="--", linewidth=1, label=f"tol = {tol:g}")
        bottom.legend(fontsize="small", loc="upper right")
    bottom.set_ylabel("relative gain")
    bottom.set_xlabel("EM iteration")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig
