"""Model selection: a grid search of 5 folds x 20 candidates (GaussianNB's `var_smoothing` on
a log grid from 1e-9 to 1, PCA's `n_components` 1..20 scored by the held-out PPCA
log-likelihood). ddr's `GridSearchCV` (the statistics of every fold in one pass, each
(fold, candidate) model a solve of the merge of the other folds, every score in a second pass,
the refit a merge: 2 passes) against scikit-learn's `GridSearchCV` on the loaded array with the
same folds (`KFold(5)`, 101 fits from memory) and dask-ml's `GridSearchCV` (scikit-learn's
estimator fitted per fold on the dask array's rows). `best` is the chosen value; `score_diff`
the largest difference between ddr's and scikit-learn's per-split scores (float32 data: ddr
accumulates in float64, scikit-learn in float32).

A kernel density's bandwidth (20 values, `std * geomspace(0.02, 1, 20)`) on the first column
of X: ddr's binned `KernelDensity` searched on all rows (each fold's lattice histogram in
pass 1, every (fold, bandwidth) scored in pass 2); scikit-learn's exact `KernelDensity`
searched on a subsample of every `KDE_STRIDE`-th row (its tree KDE does about
`n_test x n_train` kernel evaluations per fit: all 2 000 000 rows of M would take hours),
and ddr's exact `KernelDensity` searched on the same subsample (`score_diff`: the largest
relative difference of their per-split scores).

On M, scikit-learn's in-memory search of GaussianNB (`SKIPPED_IN_MEMORY`, 77 s on S: about
13 minutes at M's ten times the rows on the 2-core reference machine) is not run, and every
dask-ml search is stopped after `PEER_TIMEOUT_S`; ddr's rows are run once there (on S, with
paired floors, at least three times)."""

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
#: in-memory searches not run on a dataset, for their time (see the module's notes)
SKIPPED_IN_MEMORY = {"M": ("GaussianNB var_smoothing",)}
#: ddr's rows repeated with paired read floors (elsewhere once: M's searches take minutes)
PAIRED_DATASETS = ("S",)
#: seconds after which a dask-ml search is recorded as timed out
PEER_TIMEOUT_S = 600.0
#: the exact KDE searches take every KDE_STRIDE-th row (10 000 rows of M, 1 000 of S)
KDE_STRIDE = 200
KDE_FACTORS = np.geomspace(0.02, 1.0, 20)


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
            if name in IN_MEMORY_DATASETS and label not in SKIPPED_IN_MEMORY.get(name, ()):
                _sklearn_row(ctx, name, label, make_sk, {param: values}, supervised, scores)
            _dask_ml_row(ctx, name, label, make_sk, {param: values}, supervised)
        _kde_rows(ctx, name)


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
        f"ddr GridSearchCV {label} (5 x 20)",
        name,
        search,
        scheduler="cluster",
        paired_floor=name in PAIRED_DATASETS,
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

    ctx.measure(
        f"dask-ml GridSearchCV {label} (5 x 20)",
        name,
        search,
        scheduler="cluster",
        timeout=PEER_TIMEOUT_S,
    )


def _kde_rows(ctx: Context, name: str) -> None:
    """The bandwidth grid: ddr binned on all rows; scikit-learn's exact KDE and ddr's exact
    KDE on every KDE_STRIDE-th row (loaded beforehand, untimed)."""
    from sklearn.model_selection import GridSearchCV as SkGridSearchCV
    from sklearn.model_selection import KFold
    from sklearn.neighbors import KernelDensity

    sub = np.asarray(ctx.array(name)[::KDE_STRIDE, :1].compute(scheduler="threads"), np.float64)
    grid = {"bandwidth": [float(v) for v in float(sub.std()) * KDE_FACTORS]}
    label = f"KernelDensity bandwidth, column 0 (5 x {len(KDE_FACTORS)})"

    def binned() -> dict:
        est = ddr.KernelDensity(algorithm="binned")
        found = GridSearchCV(est, grid, cv=N_SPLITS).fit(ctx.array(name)[:, :1])
        return _best(found)

    ctx.measure(f"ddr GridSearchCV {label}, binned, all rows", name, binned, scheduler="cluster")
    scores: dict[str, np.ndarray] = {}

    def exact() -> dict:
        found = GridSearchCV(ddr.KernelDensity(algorithm="exact"), grid, cv=N_SPLITS).fit(sub)
        scores["ddr"] = _split_scores(found.cv_results_)
        return _best(found)

    where = f"every {KDE_STRIDE}th row ({sub.shape[0]} rows)"
    ctx.measure(
        f"ddr GridSearchCV {label}, exact, {where}",
        name,
        exact,
        scheduler="threads",
        in_memory=True,
    )

    def sklearn() -> dict:
        found = SkGridSearchCV(KernelDensity(), grid, cv=KFold(N_SPLITS)).fit(sub)
        theirs = _split_scores(found.cv_results_)
        out = _best(found)
        out["score_diff"] = float(np.max(np.abs(theirs - scores["ddr"]) / np.abs(theirs)))
        return out

    ctx.measure(
        f"sklearn GridSearchCV {label}, exact, {where}",
        name,
        sklearn,
        scheduler="none",
        in_memory=True,
    )
