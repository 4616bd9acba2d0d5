"""The figures pipelines draw, as matplotlib Figures (saved by :func:`ddr.pipeline.reports.plot`).

Each ``draw_*`` function takes computed, small data and returns a Figure with its axes named
for the method (``PC1``, ``KPC1``, ``LD1``, ``X variate 1``: asked of the estimator class,
see :meth:`ddr.base.DDRMixin._component_name`), units where there are units, and the numbers
a reader needs printed on it (correlations, bandwidths, accuracy and which rows it is on).

- ``scree``: each component's share of the total variance (bars) and the cumulative share;
- ``scatter``: two score columns (one of each view for CCA), evenly sampled rows, coloured
  by class, with their correlation;
- ``kde``: the density curve over a histogram of the training data, with the bandwidth;
- ``confusion``: true x predicted counts, saying whether the rows were used to fit;
- ``loglik``: an EM fit's (PPCA, FactorAnalysis) log-likelihood per iteration and its
  relative gain against ``tol``.

matplotlib is imported here only, with the non-interactive Agg backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddr.pipeline.reports import natural_key

__all__ = [
    "component_name",
    "draw_confusion",
    "draw_kde",
    "draw_loglik",
    "draw_scatter",
    "draw_scree",
    "kde_grid",
]

BLUE, ORANGE, GREY = "#4C72B0", "#DD8452", "0.35"


def _figure(title: str | None, default: str, *, rows: int = 1) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    if rows == 1:
        fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    else:
        fig, ax = plt.subplots(
            rows, 1, figsize=(6.4, 5.6), sharex=True, layout="constrained", height_ratios=[2, 1]
        )
    fig.suptitle(title or default)
    return fig, ax


def component_name(cls: type | None, i: int, output: str = "data") -> str:
    """The name of column ``i`` of what ``cls`` (an estimator class) outputs: ``PC3``."""
    hook = getattr(cls, "_component_name", None)
    return hook(i, output) if hook is not None else f"column {i + 1}"


# ------------------------------------------------------------------------ scree
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
    fig, ax = _figure(title, f"{cls.__name__}: variance explained per component")
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


# ---------------------------------------------------------------------- scatter
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
    fig, ax = _figure(title, f"{ylabel} against {xlabel}")
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


# -------------------------------------------------------------------- confusion
def draw_confusion(
    labels: list[str], counts: np.ndarray, rows: str, title: str | None = None
) -> Any:
    """Counts of (true, predicted) labels; ``rows`` says which rows they are (``"test rows
    (not used to fit)"``, ``"training rows"``) and goes in the title and the note."""
    counts = np.asarray(counts)
    fig, ax = _figure(f"{title or 'Confusion matrix'} ({rows.split(' (')[0]})", "")
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


# ----------------------------------------------------------------------- loglik
def draw_loglik(model: Any, title: str | None = None) -> Any:
    """Top: the log-likelihood per EM iteration, in plain numbers. Bottom: its relative gain
    per iteration (log scale) against the stopping tolerance ``tol``."""
    from matplotlib.ticker import MaxNLocator

    name = getattr(model, "_loglik_attribute", None)
    curve = None if name is None else getattr(model, name, None)
    if curve is None:
        raise ValueError(
            "a loglik plot needs a model fitted by EM, with a log-likelihood curve (PPCA's "
            f"loglik_curve_, FactorAnalysis's loglike_); {type(model).__name__} has none"
        )
    curve = np.asarray(curve, dtype=np.float64).ravel()
    fig, (top, bottom) = _figure(title, f"{type(model).__name__}: EM convergence", rows=2)
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


# -------------------------------------------------------------------------- kde
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
    fig, ax = _figure(title, f"{type(model).__name__}: estimated density")
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
