"""Category codes and their smoothed probabilities: what the categorical naive Bayes
classifier (:class:`ddr.naive_bayes.categorical.CategoricalNB`) and the categorical density
(:class:`ddr.density.categorical.CategoricalDensity`) share."""

from __future__ import annotations

from typing import Any

import numpy as np

from ddr.stats._checks import block_start, check_rows

__all__ = ["CONTINUOUS", "as_category_codes", "smoothed_log_probs"]


#: why scikit-learn's weighted-data checks fail for categorical models
CONTINUOUS = (
    "scikit-learn's check feeds continuous values; ddr refuses non-integer category codes "
    "where scikit-learn silently truncates them"
)


def as_category_codes(X: np.ndarray, block_info: dict[Any, Any] | None = None) -> np.ndarray:
    """``X`` as int64 category codes, or a ValueError/TypeError naming the offending values
    (which rows, for a dask block given its ``block_info``)."""
    X = np.asarray(X)
    if X.dtype.kind == "f":
        check_rows(X, block_start(block_info), "a categorical model")
        frac = X != np.floor(X)
        if frac.any():
            raise ValueError(
                "categorical X must hold integer category codes 0, 1, 2, ...; got non-integer "
                f"values such as {X[frac][:3].tolist()}"
            )
    elif X.dtype.kind not in "biu":
        raise TypeError(f"categorical X must be integer-coded; got dtype {X.dtype}")
    if X.size and X.min() < 0:
        raise ValueError(
            "Negative values in data passed as categorical X: category codes must be 0, 1, 2, "
            f"...; got {X.min():g}"
        )
    return X.astype(np.int64, copy=False)


def smoothed_log_probs(
    counts: np.ndarray, n_categories: np.ndarray, alpha: float
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Per-feature category counts and smoothed log-probabilities, and the unseen value.

    Parameters
    ----------
    counts : ndarray of shape (n_classes, n_features, n_codes)
    n_categories : ndarray of shape (n_features,)
    alpha : float

    Returns
    -------
    category_count : list of ndarray of shape (n_classes, n_categories[j])
    log_prob : list of ndarray of shape (n_classes, n_categories[j])
        ``log((count + alpha) / (class count + alpha * n_categories[j]))``; a class without
        rows gets the uniform distribution (its own smoothed value when ``alpha > 0``).
    unseen : ndarray of shape (n_features, n_classes)
        ``log(alpha / (class count + alpha * n_categories[j]))``: a category never seen.
    """
    k, d, width = counts.shape
    cat_counts, log_probs = [], []
    unseen = np.zeros((d, k))
    for j in range(d):
        cj = int(n_categories[j])
        cnt = np.zeros((k, cj))
        cnt[:, : min(cj, width)] = counts[:, j, :cj]
        denom = cnt.sum(axis=1, keepdims=True) + alpha * cj
        empty = denom[:, 0] <= 0
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = np.log(cnt + alpha) - np.log(denom)
            un = np.log(alpha) - np.log(denom[:, 0])
        # a class with no rows and alpha = 0: 0/0; a finite placeholder (its prior is 0 or
        # predictions refuse it, see BaseGenerativeClassifier._check_unseen)
        lp[empty] = -np.log(cj)
        un[empty] = -np.log(cj)
        cat_counts.append(cnt)
        log_probs.append(lp)
        unseen[j] = un
    return cat_counts, log_probs, unseen
