"""Model selection: a grid search of 5 folds x 20 candidates (GaussianNB's `var_smoothing` on
a log grid from 1e-9 to 1, PCA's `n_components` 1..20 scored by the held-out PPCA
log-likelihood). ddr's `GridSearchCV` (the statistics of every fold in one pass, each
(fold, candidate) model a solve of the merge of the other folds, every score in a second pass,
the refit a merge: 2 passes) against scikit-learn's `GridSearchCV` on the loaded array with the
same folds (`KFold(5)`, 101 fits from memory) and dask-ml's `GridSearchCV` (scikit-learn's
estimator fitted per fold on the dask array's rows). `best` is the chosen value; `score_diff`
the largest difference between ddr's and scikit-learn's per-split scores (float32 data: ddr
accumulates in float64, scikit-learn in float32)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import ddr
from benchmarks.harness import Context
from ddr.model_selection import GridSearchCV

N_SPLITS = 5
# scikit-learn on the loaded array: only where it fits in memory beside everything else
IN_MEMORY_DATASETS = ("S", "M")


def _grids() -> dict[str, tuple[Callable[[], Any], Callable[[], Any], str, list[Any], bool]]:
    """label -> (ddr estimator, scikit-learn estimator, parameter, 20 values, supervised)."""
    from sklearn.decomposition import PCA
    from sklearn.naive_bayes import GaussianNB

    return {
        "GaussianNB var_smoothing": (
            ddr.GaussianNB,
            GaussianNB,
            "var_smoothing",
            [float(v) for v in np.logspace(-9, 0, 20)],
            True,
        ),
        "PCA n_components": (
            lambda: ddr.PCA(svd_solver="covariance_eigh"),
            lambda: PCA(svd_solver="covariance_eigh"),
            "n_components",
            list(range(1, 21)),
            False,
        ),
    }


def run(ctx: Context) -> None:
    for name in ctx.datasets:
        for label, (make, make_sk, param, values, supervised) in _grids().items():
            scores: dict[str, np.ndarray] = {}
            _ddr_row(ctx, name, label, make, {param: values}, supervised, scores)
            if name in IN_MEMORY_DATASETS:
                _sklearn_row(ctx, name, label, make_sk, {param: values}, supervised, scores)
            _dask_ml_row(ctx, name, label, make_sk, {param: values}, supervised)


def _split_scores(results: dict[str, Any]) -> np.ndarray:
    return np.stack([results[f"split{k}_test_score"] for k in range(N_SPLITS)])


def _best(search: Any) -> dict[str, float]:
    (value,) = search.best_params_.values()
    return {"best": float(value)}


def _ddr_row(
    ctx: Context,
    name: str,
    label: str,
    make: Callable[[], Any],
    grid: dict[str, list[Any]],
    supervised: bool,
    scores: dict[str, np.ndarray],
) -> None:
    def search() -> dict:
        y = ctx.labels(name) if supervised else None
        found = GridSearchCV(make(), grid, cv=N_SPLITS).fit(ctx.array(name), y)
        scores["ddr"] = _split_scores(found.cv_results_)
        return _best(found)

    ctx.measure(
        f"ddr GridSearchCV {label} (5 x 20)", name, search, scheduler="cluster", paired_floor=True
    )


def _sklearn_row(
    ctx: Context,
    name: str,
    label: str,
    make: Callable[[], Any],
    grid: dict[str, list[Any]],
    supervised: bool,
    scores: dict[str, np.ndarray],
) -> None:
    from sklearn.model_selection import GridSearchCV as SkGridSearchCV
    from sklearn.model_selection import KFold

    X = ctx.numpy(name)
    y = ctx.labels(name).compute() if supervised else None

    def search() -> dict:
        found = SkGridSearchCV(make(), grid, cv=KFold(N_SPLITS)).fit(X, y)
        out = _best(found)
        if "ddr" in scores:
            out["score_diff"] = float(
                np.abs(_split_scores(found.cv_results_) - scores["ddr"]).max()
            )
        return out

    ctx.measure(
        f"sklearn GridSearchCV {label} (5 x 20), loaded array",
        name,
        search,
        scheduler="none",
        in_memory=True,
    )


def _dask_ml_row(
    ctx: Context,
    name: str,
    label: str,
    make: Callable[[], Any],
    grid: dict[str, list[Any]],
    supervised: bool,
) -> None:
    def search() -> dict:
        from dask_ml.model_selection import GridSearchCV as DaskGridSearchCV

        y = ctx.dask_labels(name) if supervised else None
        # dask-ml submits its fits to the default client (dask's scheduler setting is not
        # enough): the suite's cluster made current
        with ctx.client().as_current():
            found = DaskGridSearchCV(make(), grid, cv=N_SPLITS).fit(ctx.dask_array(name), y)
        return _best(found)

    ctx.measure(f"dask-ml GridSearchCV {label} (5 x 20)", name, search, scheduler="cluster")
