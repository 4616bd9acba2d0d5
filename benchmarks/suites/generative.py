"""Generative classifiers: ddr GaussianNB and QDA (one pass of diagonal / full `ClassMoments`),
LDA and BernoulliNB, KernelNB (binned, S only) against scikit-learn (`partial_fit` over the stored
chunks, and `fit` on the loaded array where it fits) and dask-ml's GaussianNB, fit and predict
timed separately. Accuracy side by side: `acc` is the training accuracy (predict on the same
rows against `y`); `var_err` the largest relative error of GaussianNB's fitted variances
against a float64 fit of the loaded array (S and M).

GaussianMixture (issue 27: an EM iteration within 1.3x the read floor), 5 components, from
the same start (5 rows of the first chunk, equal weights, the first chunk's covariance):
"one EM iteration" is its E-step, one pass of `GaussianMixtureSums` (the M-step is a small
solve on the client), per covariance type, paired with dask's read floor; "10 EM
iterations" (`tol=0`) beside scikit-learn's in memory (float64, as ddr computes),
`per_iter_x` the seconds per iteration over the table's read floor, `lower_bound` the mean
log-likelihood per row at the last E-step (ddr's SQUAREM extrapolates from the third
iteration on, scikit-learn's EM does not)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import ddr
from benchmarks.harness import Context

# scikit-learn on the loaded array: only where it fits in memory beside everything else
IN_MEMORY_DATASETS = ("S", "M")
KERNEL_NB_DATASETS = ("S",)


def run(ctx: Context) -> None:
    _warm_up(ctx)
    for name in ctx.datasets:
        y_all = ctx.labels(name).compute()
        classes = np.unique(y_all)
        ref_var = _reference_variances(ctx, name, y_all)
        _ddr_rows(ctx, name, ref_var)
        _sklearn_rows(ctx, name, classes, y_all, ref_var)
        _dask_ml_rows(ctx, name)
        _gaussian_mixture_rows(ctx, name)


def _warm_up(ctx: Context) -> None:
    """Import the estimators' modules on the workers (untimed), so no row pays for it."""
    import dask

    name = ctx.datasets[0]
    X, y = ctx.array(name)[:2000], ctx.labels(name)[:2000]
    with dask.config.set(scheduler=ctx.client()):
        for make in (ddr.GaussianNB, ddr.QuadraticDiscriminantAnalysis, ddr.BernoulliNB):
            make().fit(X, y).score(X, y)


def _var_err(var: np.ndarray, ref_var: np.ndarray | None) -> dict:
    if ref_var is None:
        return {}
    return {"var_err": float(np.max(np.abs(np.asarray(var) - ref_var) / ref_var))}


def _reference_variances(ctx: Context, name: str, y: np.ndarray) -> np.ndarray | None:
    """GaussianNB variances of the loaded array in float64 (two-pass per class)."""
    if name not in IN_MEMORY_DATASETS:
        return None
    X = ctx.numpy(name)
    out = []
    for c in np.unique(y):
        Xc = X[y == c].astype(np.float64)
        out.append(Xc.var(axis=0))
    var = np.stack(out)
    return var + 1e-9 * X.astype(np.float64).var(axis=0).max()


# ---------------------------------------------------------------------------------- ddr
def _ddr_rows(ctx: Context, name: str, ref_var: np.ndarray | None) -> None:
    fitted: dict[str, Any] = {}

    def fit(label: str, make: Callable[[], Any]) -> Callable[[], dict]:
        def run_fit() -> dict:
            est = make().fit(ctx.array(name), ctx.labels(name))
            fitted[label] = est
            return _var_err(est.var_, ref_var) if hasattr(est, "var_") else {}

        return run_fit

    def predict(label: str) -> Callable[[], dict]:
        def run_predict() -> dict:
            return {"acc": fitted[label].score(ctx.array(name), ctx.labels(name))}

        return run_predict

    models = [
        ("GaussianNB", ddr.GaussianNB),
        ("QDA", lambda: ddr.QuadraticDiscriminantAnalysis(reg_param=1e-6)),
        ("LDA", ddr.LinearDiscriminantAnalysis),
        ("BernoulliNB(binarize=0)", ddr.BernoulliNB),
    ]
    if name in KERNEL_NB_DATASETS:
        models.append(("KernelNB binned", lambda: ddr.KernelNB(algorithm="binned")))
    for label, make in models:
        schedulers = ("cluster", "threads") if label in ("GaussianNB", "QDA") else ("cluster",)
        for scheduler in schedulers:
            ctx.measure(
                f"ddr {label} fit",
                name,
                fit(label, make),
                scheduler=scheduler,
                paired_floor=scheduler == "cluster" and label in ("GaussianNB", "QDA"),
            )
        if label in fitted:
            ctx.measure(f"ddr {label} predict", name, predict(label), scheduler="cluster")


# ------------------------------------------------------------------------ scikit-learn
def _sklearn_rows(
    ctx: Context, name: str, classes: np.ndarray, y_all: np.ndarray, ref_var: np.ndarray | None
) -> None:
    from sklearn.discriminant_analysis import (
        LinearDiscriminantAnalysis,
        QuadraticDiscriminantAnalysis,
    )
    from sklearn.naive_bayes import GaussianNB

    zx, zy = ctx.zarr_array(name), ctx.zarr_array(name, "y")
    step = zx.chunks[0]
    state: dict[str, Any] = {}

    def partial_fit() -> dict:
        clf = GaussianNB()
        for start in range(0, zx.shape[0], step):
            clf.partial_fit(zx[start : start + step], zy[start : start + step], classes=classes)
        state["pf"] = clf
        return _var_err(clf.var_, ref_var)

    def chunked_predict() -> dict:
        hits = 0
        for start in range(0, zx.shape[0], step):
            hits += int(
                np.sum(state["pf"].predict(zx[start : start + step]) == zy[start : start + step])
            )
        return {"acc": hits / zx.shape[0]}

    ctx.measure("sklearn GaussianNB partial_fit over chunks", name, partial_fit, scheduler="none")
    if "pf" in state:
        ctx.measure(
            "sklearn GaussianNB predict over chunks", name, chunked_predict, scheduler="none"
        )
    if name not in IN_MEMORY_DATASETS:
        return
    X = ctx.numpy(name)
    for label, make in [
        ("GaussianNB", GaussianNB),
        ("QDA", lambda: QuadraticDiscriminantAnalysis(reg_param=1e-6)),
        ("LDA", LinearDiscriminantAnalysis),
    ]:

        def fit(make=make, label=label) -> dict:
            state[label] = make().fit(X, y_all)
            return _var_err(state[label].var_, ref_var) if label == "GaussianNB" else {}

        def predict(label=label) -> dict:
            return {"acc": float(np.mean(state[label].predict(X) == y_all))}

        ctx.measure(f"sklearn {label} fit, loaded array", name, fit, scheduler="none",
                    in_memory=True)  # fmt: skip
        if label in state:
            ctx.measure(f"sklearn {label} predict, loaded array", name, predict,
                        scheduler="none", in_memory=True)  # fmt: skip


# ----------------------------------------------------------------------------- dask-ml
def _dask_ml_rows(ctx: Context, name: str) -> None:
    """dask-ml's fit leaves its parameters lazy: computing them is part of the fit."""
    import dask

    state: dict[str, Any] = {}

    def fit() -> dict:
        from dask_ml.naive_bayes import GaussianNB

        clf = GaussianNB().fit(ctx.dask_array(name), ctx.dask_labels(name))
        clf.theta_, clf.sigma_, clf.class_count_, clf.class_prior_ = dask.compute(
            clf.theta_, clf.sigma_, clf.class_count_, clf.class_prior_
        )
        state["clf"] = clf
        return {}

    def predict() -> dict:
        pred = state["clf"].predict(ctx.dask_array(name))
        pred, y = dask.compute(pred, ctx.dask_labels(name))
        return {"acc": float(np.mean(np.asarray(pred) == y))}

    ctx.measure("dask-ml GaussianNB fit", name, fit, scheduler="cluster")
    if "clf" in state:
        ctx.measure("dask-ml GaussianNB predict", name, predict, scheduler="cluster")


# -------------------------------------------------------------------- GaussianMixture
GM_K = 5
GM_ITER = 10
GM_TYPES = ("full", "tied", "diag")


def _mixture_start(ctx: Context, name: str, covariance_type: str) -> dict[str, np.ndarray]:
    """The start every GaussianMixture row begins from: 5 rows of the first chunk as means,
    equal weights, the first chunk's covariance (its diagonal for diag) as every component's."""
    first = np.asarray(ctx.zarr_array(name)[: ctx.zarr_array(name).chunks[0]], dtype=np.float64)
    means = first[np.random.default_rng(0).choice(first.shape[0], GM_K, replace=False)]
    cov = np.cov(first, rowvar=False)
    precisions = {
        "full": np.stack([np.linalg.inv(cov)] * GM_K),
        "tied": np.linalg.inv(cov),
        "diag": np.tile(1.0 / np.diag(cov), (GM_K, 1)),
    }[covariance_type]
    return {
        "weights_init": np.full(GM_K, 1.0 / GM_K),
        "means_init": means,
        "precisions_init": precisions,
    }


def _gaussian_mixture_rows(ctx: Context, name: str) -> None:
    import warnings

    import dask
    from sklearn.exceptions import ConvergenceWarning

    # read before any row: the first chunk would count as half a pass of S in the row
    starts = {ct: _mixture_start(ctx, name, ct) for ct in GM_TYPES}

    def fit(covariance_type: str, max_iter: int, X: Any) -> Any:
        start = starts[covariance_type]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return ddr.GaussianMixture(
                GM_K, covariance_type=covariance_type, max_iter=max_iter, tol=0.0, **start
            ).fit(X)

    with dask.config.set(scheduler=ctx.client()):  # the workers import the module, untimed
        fit("full", 2, ctx.array(name)[:2000])
    from ddr.mixture._gaussian_math import covariances_of, precision_cholesky
    from ddr.stats import GaussianMixtureSums, compute
    from ddr.stats.mixture_sums import GaussianMixtureParams

    for ct in GM_TYPES:
        # the E-step pass at the start, its precision factors as EM's iterates have them
        # (upper triangular; those of given precisions are lower, and only start a fit)
        cov = covariances_of(starts[ct]["precisions_init"], ct)
        params = GaussianMixtureParams(
            starts[ct]["weights_init"], starts[ct]["means_init"], precision_cholesky(cov, ct), ct
        )

        def one_iteration(params: GaussianMixtureParams = params) -> dict:
            compute(GaussianMixtureSums.spec(params=params), ctx.array(name))
            return {}

        ctx.measure(
            f"ddr GaussianMixture({GM_K}, {ct}), one EM iteration",
            name,
            one_iteration,
            scheduler="cluster",
            paired_floor=True,
        )
    floor = ctx.floor_seconds(name)
    for ct in ("full", "diag"):

        def ours(ct: str = ct) -> dict:
            gm = fit(ct, GM_ITER, ctx.array(name))
            return {"iterations": gm.n_iter_, "lower_bound": gm.lower_bound_}

        row = ctx.measure(f"ddr GaussianMixture({GM_K}, {ct}), {GM_ITER} EM iterations", name,
                          ours, scheduler="cluster")  # fmt: skip
        if floor and row.passes and not row.error:
            row.metrics["per_iter_x"] = row.seconds / row.passes / floor
    if name not in IN_MEMORY_DATASETS:
        return
    from sklearn.mixture import GaussianMixture as SkGM

    X = ctx.numpy(name).astype(np.float64)  # loaded after the ddr rows: not in their memory
    for ct in ("full", "diag"):

        def sklearn(ct: str = ct) -> dict:
            start = starts[ct]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                # random_from_data: its start is overridden by the given parameters (with
                # "kmeans" scikit-learn would run k-means over X first, for nothing)
                sk = SkGM(GM_K, covariance_type=ct, max_iter=GM_ITER, tol=0.0,
                          init_params="random_from_data", **start).fit(X)  # fmt: skip
            return {"iterations": sk.n_iter_, "lower_bound": sk.lower_bound_}

        row = ctx.measure(
            f"sklearn GaussianMixture({GM_K}, {ct}), {GM_ITER} EM iterations (float64)",
            name, sklearn, scheduler="none", in_memory=True,
        )  # fmt: skip
        if floor and not row.error:
            row.metrics["per_iter_x"] = row.seconds / GM_ITER / floor
