"""The three PCA solvers, each returning the leading spectrum of the covariance (ddof=1).

- :func:`solve_covariance`: ``eigh`` of the d x d covariance from one pass of ``Moments``
  (only the top ``k`` eigenpairs when ``k`` is much smaller than ``d``);
- :func:`solve_randomized`: randomized block Krylov on the centred scatter, never forming a
  d x d matrix (:func:`ddr.linalg.randomized.randomized_scatter_eigh`);
- :func:`solve_exact`: the thin SVD of the centred data in memory (the reference).

The estimator (:mod:`ddr.decomposition.pca`) turns a :class:`Spectrum` into scikit-learn's
fitted attributes, so every solver is read out the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg

from ddr.linalg.randomized import randomized_scatter_eigh
from ddr.linalg.signs import component_signs
from ddr.stats import Moments
from ddr.stats._input import Rows

__all__ = ["Spectrum", "solve_covariance", "solve_exact", "solve_randomized", "svd_flip_rows"]

# eigh computes only the top k eigenpairs when k is below this fraction of d: the MRRR driver
# then skips most of the back-transformation (measured 2-3x faster at d = 2000, k = 10).
_SUBSET_FRACTION = 0.25


@dataclasses.dataclass(frozen=True)
class Spectrum:
    """Leading eigenpairs of the sample covariance (ddof=1) and what they were computed from.

    Attributes
    ----------
    n_samples : int
    mean : ndarray of shape (n_features,)
    total_variance : float
        Trace of the covariance (ddof=1): the denominator of explained-variance ratios.
    variances : ndarray of shape (m,)
        Eigenvalues of the covariance, decreasing and non-negative.
    components : ndarray of shape (m, n_features)
        Orthonormal rows, signs fixed by :func:`svd_flip_rows`.
    n_reliable : int
        How many leading entries are accurate to the solver's tolerance (all of them for the
        covariance and exact solvers; the requested ones, not the oversampling, for the
        randomized solver).
    """

    n_samples: int
    mean: np.ndarray
    total_variance: float
    variances: np.ndarray
    components: np.ndarray
    n_reliable: int


def svd_flip_rows(components: np.ndarray) -> np.ndarray:
    """Rows with ddr's sign convention (:func:`ddr.linalg.signs.component_signs`, scikit-learn's
    ``svd_flip(u_based_decision=False)``)."""
    return components * component_signs(components, axis=1)[:, None]


def solve_covariance(moments: Moments, n_top: int | None) -> Spectrum:
    """Eigenpairs of the covariance held by ``moments``.

    Parameters
    ----------
    moments : Moments
        Full (not diagonal) moments of the data.
    n_top : int or None
        The number of leading eigenpairs wanted, or None for all ``min(n, d)`` of them.
    """
    n = int(moments.count)
    cov = moments.covariance(ddof=1)
    d = cov.shape[0]
    total = float(np.maximum(np.diagonal(cov), 0.0).sum())
    keep = min(n, d) if n_top is None else n_top
    if keep < _SUBSET_FRACTION * d:
        lam, vec = scipy.linalg.eigh(
            cov, subset_by_index=[d - keep, d - 1], driver="evr", check_finite=False
        )
    else:
        lam, vec = scipy.linalg.eigh(cov, driver="evd", check_finite=False)
    lam, vec = lam[::-1][:keep], vec[:, ::-1][:, :keep]
    comps = svd_flip_rows(np.ascontiguousarray(vec.T))
    return Spectrum(n, moments.mean, total, np.maximum(lam, 0.0), comps, keep)


def solve_exact(X: np.ndarray, n_top: int | None) -> Spectrum:
    """Thin SVD of the centred in-memory data, in float64 (LAPACK ``gesdd``, like scikit-learn's
    ``svd_solver="full"``)."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    mean = X.mean(axis=0)
    Xc = X - mean
    # the float64 mean still carries the rounding of its sum; centre on the exact mean
    resid = Xc.mean(axis=0)
    mean = mean + resid
    Xc -= resid
    _, s, vt = scipy.linalg.svd(Xc, full_matrices=False, check_finite=False)
    lam = s**2 / (n - 1)
    keep = min(n, d) if n_top is None else n_top
    comps = svd_flip_rows(vt[:keep])
    return Spectrum(n, mean, float(lam.sum()), lam[:keep], comps, keep)


def solve_randomized(
    rows: Rows,
    n_top: int,
    *,
    n_oversamples: int,
    n_power_iter: int,
    random_state: np.random.RandomState,
    on_error: Callable[[ValueError], Any] | None = None,
) -> tuple[Spectrum, int]:
    """Randomized block Krylov PCA over the row blocks; returns the spectrum and the passes.

    The block width is ``l = min(n_top + n_oversamples, d)``; the data is read
    ``n_power_iter + 1`` times.
    """
    d = rows.shape[1]
    width = min(n_top + n_oversamples, d)
    res = randomized_scatter_eigh(
        rows,
        width,
        n_power_iter=n_power_iter,
        random_state=random_state,
        on_error=on_error,
        label="PCA (randomized solver)",
    )
    n = int(res.count)
    if n < 2:
        raise ValueError(f"PCA needs at least 2 samples; got n_samples={n}")
    lam = res.eigenvalues / (n - 1)
    comps = svd_flip_rows(np.ascontiguousarray(res.eigenvectors.T))
    spec = Spectrum(n, res.mean, res.trace / (n - 1), lam, comps, min(n_top, lam.size))
    return spec, res.passes
