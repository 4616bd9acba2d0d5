"""Where a Gaussian mixture's EM starts: the given parameters checked, or ``init_params``.

scikit-learn starts a mixture from responsibilities (``_initialize``) and its M-step; ddr
does the same from what it can have without reading the rows more than once or twice:

- ``"kmeans"``: k-means of the uniform sample of rows (three runs of k-means++ and Lloyd's
  iterations to a fixed point, in memory, the lowest inertia kept), then one pass that labels
  every row with its nearest centre and sums the clusters' counts, means and scatters
  (:class:`~ddr.stats.KMeansSums`): the M-step of a k-means labelling's one-hot
  responsibilities, as scikit-learn's, whose k-means runs Lloyd's iterations over all rows
  first (out of core, one pass each: 19 to 76 on the demo data, for no higher final
  log-likelihood; ``benchmarks/results/clustering.md``);
- ``"k-means++"`` and ``"random_from_data"``: one row of the sample per component (its
  one-hot responsibility), covariance ``reg_covar``;
- ``"random"``: random responsibilities of the sample's rows.

Pure functions of the estimator's parameters; the sample is drawn by the estimator (one
pass, shared by its ``n_init`` starts).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddr.clustering.kmeans import best_sample_centres
from ddr.mixture._gaussian_math import EPS10, m_step, weighted_sums
from ddr.stats import KMeansSums, compute
from ddr.stats._input import Rows

__all__ = ["KMEANS_STARTS", "check_inits", "from_init_params"]

#: k-means runs on the sample for ``init_params="kmeans"``, the one of lowest inertia kept
#: (in memory: no pass; one run lands in a poor local optimum far more often)
KMEANS_STARTS = 3


def check_inits(
    k: int, d: int, covariance_type: str, weights_init: Any, means_init: Any, precisions_init: Any
) -> tuple[Any, Any, Any]:
    """The given weights, means and precisions as float arrays, checked as scikit-learn
    checks them (its messages); None for those not given.

    Parameters
    ----------
    k, d : int
        Components and features.
    covariance_type : str
    weights_init : array-like of shape (k,) or None
    means_init : array-like of shape (k, d) or None
    precisions_init : array-like or None
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.

    Returns
    -------
    weights, means, precisions : ndarray or None

    Raises
    ------
    ValueError
        A shape, a range or a definiteness scikit-learn refuses.
    """
    ct = covariance_type
    weights = means = precisions = None
    if weights_init is not None:
        weights = np.asarray(weights_init, dtype=np.float64)
        if weights.shape != (k,):
            raise ValueError(
                f"The parameter 'weights' should have the shape of ({k},), but got {weights.shape}"
            )
        if np.any(weights < 0) or np.any(weights > 1) or not np.isfinite(weights).all():
            raise ValueError(
                "The parameter 'weights' should be in the range [0, 1], but got max value "
                f"{np.max(weights):.5f}, min value {np.min(weights):.5f}"
            )
        if not np.allclose(np.abs(1.0 - np.sum(weights)), 0.0):
            raise ValueError(
                f"The parameter 'weights' should be normalized, but got sum(weights) = "
                f"{np.sum(weights):.5f}"
            )
    if means_init is not None:
        means = np.asarray(means_init, dtype=np.float64)
        if means.shape != (k, d):
            raise ValueError(
                f"The parameter 'means' should have the shape of ({k}, {d}), but got {means.shape}"
            )
        if not np.isfinite(means).all():
            raise ValueError("The parameter 'means' contains NaN or infinity")
    if precisions_init is not None:
        precisions = np.asarray(precisions_init, dtype=np.float64)
        want = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[ct]
        if precisions.shape != want:
            raise ValueError(
                f"The parameter '{ct} precision' should have the shape of {want}, but got "
                f"{precisions.shape}"
            )
        if ct in ("full", "tied"):
            for p in precisions if ct == "full" else precisions[None]:
                if not (np.allclose(p, p.T) and np.linalg.eigvalsh(p)[0] > 0.0):
                    raise ValueError(f"'{ct} precision' should be symmetric, positive-definite")
        elif np.any(np.less_equal(precisions, 0.0)):
            raise ValueError(f"'{ct} precision' should be positive")
    return weights, means, precisions


def from_init_params(
    init_params: str,
    covariance_type: str,
    k: int,
    reg_covar: float,
    rows: Rows,
    rng: np.random.RandomState,
    sample: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Weights, means and covariances from ``init_params`` (scikit-learn's ``_initialize``
    of its responsibilities), and the passes over the rows that read.

    Parameters
    ----------
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}
    covariance_type : str
    k : int
        Components.
    reg_covar : float
    rows : Rows
        All the rows (read once more for ``"kmeans"``).
    rng : RandomState
        Seeds the start.
    sample : RowSample
        The uniform sample of rows (its ``rows``, shape (m, d)).

    Returns
    -------
    weights : ndarray of shape (k,)
    means : ndarray of shape (k, d)
    covariances : ndarray
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
    passes : int
        1 for ``"kmeans"``, else 0.
    """
    ct = covariance_type
    n, d = rows.shape
    rows_ = sample.rows
    if init_params == "kmeans":
        # k-means of the sample (in memory), then one pass: every row's cluster at those
        # centres, and the clusters' counts, means and scatters (a k-means labelling's
        # one-hot responsibilities, scikit-learn's start)
        centres = best_sample_centres(rows_, k, rng, KMEANS_STARTS)
        scatter_kind = "full" if ct in ("full", "tied") else "diag"
        spec = KMeansSums.spec(centres=centres, scatter=scatter_kind)
        stat = compute(spec, rows.data)
        scatter = stat.scatter.sum(axis=0)[None] if ct == "tied" else stat.scatter
        _, m, cov = m_step(stat.counts, stat.means, scatter, ct, reg_covar)
        return (stat.counts + EPS10) / n, m, cov, 1
    if init_params == "random":
        resp = rng.uniform(size=(rows_.shape[0], k))
        resp /= resp.sum(axis=1, keepdims=True)
        weight, mean, scatter = weighted_sums(rows_, resp, ct)
        _, m, cov = m_step(weight, mean, scatter, ct, reg_covar)
        return (weight + EPS10) / rows_.shape[0], m, cov, 0
    if init_params == "k-means++":
        from sklearn.cluster import kmeans_plusplus

        centre = rows_.mean(axis=0)
        _, idx = kmeans_plusplus(rows_ - centre, k, random_state=rng)
    else:  # random_from_data
        idx = rng.choice(rows_.shape[0], size=k, replace=False)
    # one row per component: scikit-learn's one-hot responsibilities of those rows
    zero = {"full": np.zeros((k, d, d)), "tied": np.zeros((1, d, d))}.get(ct, np.zeros((k, d)))
    _, m, cov = m_step(np.ones(k), rows_[idx], zero, ct, reg_covar)
    return np.full(k, (1.0 + EPS10) / n), m, cov, 0
