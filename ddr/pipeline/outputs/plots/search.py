"""``plot: search``: a grid search's mean test score against each parameter of its grid.

Drawn from a searched fit step's ``search`` output (``from: nb.search``: the fitted
:class:`ddr.model_selection.GridSearchCV`), so the plot reads no data. One panel per grid
parameter: the mean score over the folds with the standard deviation across them as error
bars, for the candidates that differ from the best one in that parameter only (the profile
through the best), the other candidates as grey dots; a logarithmic axis for a parameter
whose values are positive numbers spanning two decades or more, a categorical one for
values that are not all numbers (LDA's ``shrinkage`` with ``"auto"``); the best candidate
starred and printed.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ddr.pipeline.outputs.base import CheckContext, WriteContext
from ddr.pipeline.outputs.plots.base import (
    BLUE,
    GREY,
    PlotKind,
    PlotOutput,
    register_plot_kind,
)
from ddr.pipeline.plan import _a

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["SearchPlot", "SearchPlotOutput", "draw_search", "parameter_axis", "profile"]

#: values spanning at least this ratio (two decades) get a logarithmic axis
_DECADES = 100.0


class SearchPlotOutput(PlotOutput):
    """The scores of a grid search by parameter."""

    plot: Literal["search"]


@register_plot_kind
class SearchPlot(PlotKind):
    """One panel per grid parameter: mean test score, the std across folds as error bars,
    the best candidate starred."""

    name = "search"
    spec = SearchPlotOutput
    takes = "a searched fit step's `search` (`from: nb.search`)"
    draws = (
        "a grid search's mean test score (error bars: the standard deviation across the "
        "folds) against each parameter of its grid, one panel per parameter, through the "
        "best candidate (the others grey), on a log axis where the values span decades, "
        "the best candidate starred; from the search's results, no pass over the data"
    )

    def check(
        self, ctx: CheckContext, out: OutputPlan, src: ValueMeta, metas: dict[str, ValueMeta]
    ) -> None:
        if src.kind != "search":
            ctx.problem(
                ("outputs", out.index, "from"),
                f"a search plot is drawn from a searched fit step's search (e.g. "
                f"{out.spec.from_.partition('.')[0]}.search, a fit step with search:); "
                f"{out.spec.from_!r} is {_a(src.kind)}",
            )

    def gather(self, w: WriteContext, out: OutputPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        return {}, {"search": w.value(out.spec.from_)}

    def draw(self, data: dict[str, Any], title: str | None) -> Any:
        return draw_search(data["search"], title)

    def example(self) -> dict[str, Any]:
        nb = {
            "op": "GaussianNB.fit",
            "inputs": {"X": "X", "y": "y"},
            "search": {"param_grid": {"var_smoothing": [1e-9, 1e-3, 0.1, 1.0]}, "cv": 3},
        }
        return {"output": {"from": "nb.search", "path": "search.png"}, "steps": {"nb": nb}}


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def parameter_axis(values: list[Any]) -> tuple[str, list[Any]]:
    """How a parameter's values are placed on an axis.

    Parameters
    ----------
    values : list
        The values the grid gives the parameter, in the candidates' order.

    Returns
    -------
    scale : {"log", "linear", "category"}
        ``"log"`` for positive numbers whose largest is at least 100 times the smallest,
        ``"linear"`` for other numbers, ``"category"`` when any value is not a number.
    levels : list
        The distinct values: sorted numbers, or the categories in their first order.
    """
    distinct: list[Any] = []
    for v in values:
        if not any(v is u or (type(v) is type(u) and v == u) for u in distinct):
            distinct.append(v)
    if not all(_is_number(v) for v in distinct):
        return "category", distinct
    levels = sorted(distinct)
    positive = levels[0] > 0
    return ("log" if positive and levels[-1] >= _DECADES * levels[0] else "linear"), levels


def profile(params: list[dict[str, Any]], best: int, name: str) -> list[int]:
    """The candidates that differ from candidate ``best`` in parameter ``name`` alone.

    Parameters
    ----------
    params : list of dict
        ``cv_results_["params"]``.
    best : int
        The best candidate's index.
    name : str

    Returns
    -------
    list of int
        Indices of candidates that set ``name`` and every other parameter as ``best`` does
        (``best`` itself among them when it sets ``name``).
    """
    ref = params[best]
    return [
        i
        for i, p in enumerate(params)
        if name in p and set(p) == set(ref) and all(_same(p[k], ref[k]) for k in p if k != name)
    ]


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b) or (_is_number(a) and _is_number(b) and a == b)


def draw_search(search: Any, title: str | None = None) -> Any:
    """The mean test score against each grid parameter of a fitted search.

    Parameters
    ----------
    search : fitted GridSearchCV
        ``ddr.model_selection.GridSearchCV`` (or scikit-learn's, with one scoring).
    title : str, optional
        The figure's title (default: the estimator and the scoring).

    Returns
    -------
    matplotlib.figure.Figure
        One panel per parameter of the grid.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    results = search.cv_results_
    params: list[dict[str, Any]] = list(results["params"])
    mean = np.asarray(results["mean_test_score"], dtype=np.float64)
    std = np.asarray(results["std_test_score"], dtype=np.float64)
    best = int(search.best_index_)
    names = list(dict.fromkeys(k for p in params for k in p)) or ["(no parameter)"]
    scoring = getattr(search, "scoring_", None) or search.scoring or "score"
    folds = int(search.n_splits_)
    fig, axes = plt.subplots(
        1,
        len(names),
        figsize=(max(6.4, 4.2 * len(names)), 4.4),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    estimator = type(search.estimator).__name__
    fig.suptitle(title or f"{estimator}: {scoring} by parameter ({folds}-fold cross-validation)")
    for ax, name in zip(axes[0], names, strict=True):
        _panel(ax, name, params, mean, std, best)
    axes[0][0].set_ylabel(f"mean {scoring} (error bars: std over {folds} folds)")
    shown = ", ".join(f"{k}={v!r}" for k, v in params[best].items())
    note = (
        f"best: {shown}, {scoring} {mean[best]:.6g} ± {std[best]:.2g} "
        f"(candidate {best + 1} of {len(params)})"
    )
    failed = [i for i in range(len(params)) if not np.isfinite(mean[i])]
    if failed:  # scored error_score (NaN): not drawn, but said
        listed = "; ".join(
            ", ".join(f"{k}={v!r}" for k, v in params[i].items()) for i in failed[:3]
        )
        more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
        note += f"\nno score (the fit or scoring failed): {listed}{more}"
    fig.text(
        0.5,
        -0.02,
        note,
        ha="center",
        va="top",
        color=GREY,
        fontsize="small",
    )
    return fig


def _panel(
    ax: Any,
    name: str,
    params: list[dict[str, Any]],
    mean: np.ndarray,
    std: np.ndarray,
    best: int,
) -> None:
    """One parameter's panel (see :func:`draw_search`)."""
    have = [i for i, p in enumerate(params) if name in p]
    if not have:  # a grid without parameters: the one candidate
        ax.errorbar([0], mean[:1], yerr=std[:1], color=BLUE, marker="o", capsize=3)
        ax.set_xticks([0], ["the estimator as given"])
        return
    scale, levels = parameter_axis([params[i][name] for i in have])

    def x_of(value: Any) -> float:
        if scale == "category":
            return float(next(j for j, u in enumerate(levels) if _same(value, u)))
        return float(value)

    scored = set(np.flatnonzero(np.isfinite(mean)).tolist())  # the others are said below
    line = [i for i in profile(params, best, name) if i in scored] if name in params[best] else []
    others = [i for i in have if i not in line and i in scored]
    if others:
        ax.plot(
            [x_of(params[i][name]) for i in others],
            mean[others],
            linestyle="none",
            marker=".",
            color="0.7",
            label="other candidates",
        )
    if line:
        line = sorted(line, key=lambda i: x_of(params[i][name]))
        ax.errorbar(
            [x_of(params[i][name]) for i in line],
            mean[line],
            yerr=std[line],
            color=BLUE,
            marker="o",
            ms=4,
            capsize=3,
            label="the others as in the best" if len(params[best]) > 1 else None,
        )
        ax.plot(
            [x_of(params[best][name])],
            [mean[best]],
            marker="*",
            ms=15,
            color="black",
            linestyle="none",
            label=f"best: {params[best][name]!r}",
        )
    if scale == "log":
        ax.set_xscale("log")
    elif scale == "linear" and all(isinstance(v, Integral) for v in levels):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # n_components: whole numbers
    elif scale == "category":
        ax.set_xticks(
            range(len(levels)), [repr(v) if isinstance(v, str) else str(v) for v in levels]
        )
        ax.set_xlim(-0.5, len(levels) - 0.5)
    ax.set_xlabel(name + (" (log scale)" if scale == "log" else ""))
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.grid(True, color="0.9")
    ax.legend(fontsize="small", loc="best")
