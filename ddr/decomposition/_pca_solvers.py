"""The three PCA solvers, each returning the leading spectrum of the covariance (ddof=1).

- :func:`solve_covariance`: ``eigh`` of the d x d covariance from one pass of ``Moments``
  (only the top ``k`` eigenpairs when ``k`` is much smaller than ``d``);
- :func:`solve_randomized`: randomized block Krylov on the centred scatter, never forming a
  d x d matrix (:func:`ddr.linalg.randomized.randomized_scatter_eigh`);
- :func:`solve_exact`: the thin SVD of the centred data in memory (the reference);
- :func:`solve_arpack`: the top ``k`` singular triplets of the centred data in memory by
  ARPACK (scikit-learn's ``svd_solver="arpack"``).

:func:`mle_dimension` is Minka's estimate of the dimensionality from the eigenvalues
(``n_components="mle"``).

The estimator (:mod:`ddr.decomposition.pca`) turns a :class:`Spectrum` into scikit-learn's
fitted attributes, so every solver is read out the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg

from ddr.decomposition._feature_weights import weighted_scatter_eigh
from ddr.linalg.randomized import randomized_scatter_eigh
from ddr.linalg.signs import component_signs
from ddr.stats import Moments
from ddr.stats._input import Rows

__all__ = [
    "Spectrum",
    "mle_dimension",
    "solve_arpack",
    "solve_covariance",
    "solve_exact",
    "solve_randomized",
    "svd_flip_rows",
]

# eigh computes only the top k eigenpairs when k is below this fraction of d: the MRRR driver
# then skips most of the back-transformation (measured 2-3x faster at d = 2000, k = 10).
_SUBSET_FRACTION = 0.25


@dataclasses.dataclass(frozen=True)
class Spectrum:
    """Leading eigenpairs of the sample covariance (ddof=1) and what they were computed from.

    Attributes
    ----------
    n_samples : int or float
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

    n_samples: int | float
    mean: np.ndarray
    total_variance: float
    variances: np.ndarray
    components: np.ndarray
    n_reliable: int


def svd_flip_rows(components: np.ndarray) -> np.ndarray:
    """Rows with ddr's sign convention (:func:`ddr.linalg.signs.component_signs`, scikit-learn's
    ``svd_flip(u_based_decision=False)``)."""
    return components * component_signs(components, axis=1)[:, None]


def solve_covariance(
    moments: Moments, n_top: int | None, weights: np.ndarray | None = None
) -> Spectrum:
    """Eigenpairs of the covariance held by ``moments``.

    Parameters
    ----------
    moments : Moments
        Full (not diagonal) moments of the data.
    n_top : int or None
        The number of leading eigenpairs wanted, or None for all ``min(n, d)`` of them.
    weights : ndarray of shape (n_features,), optional
        Feature weights: the eigenpairs of ``diag(w) C diag(w)``, the covariance of the
        weighted centred data ``(X - mean) * w``, from the same moments (the mean stays the
        data's own).
    """
    count = float(moments.count)  # frequency weights may sum to a fraction
    n = int(count)
    cov = moments.covariance(ddof=1)
    if weights is not None:
        cov = cov * weights[:, None] * weights[None, :]
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
    n_samples = n if count.is_integer() else count
    return Spectrum(n_samples, moments.mean, total, np.maximum(lam, 0.0), comps, keep)


def solve_exact(X: np.ndarray, n_top: int | None, weights: np.ndarray | None = None) -> Spectrum:
    """Thin SVD of the centred in-memory data, in float64 (LAPACK ``gesdd``, like scikit-learn's
    ``svd_solver="full"``); of ``(X - mean) * weights`` with feature weights."""
    n, d = X.shape
    mean, Xc = _centred(X)
    if weights is not None:
        Xc *= weights
    _, s, vt = scipy.linalg.svd(Xc, full_matrices=False, check_finite=False)
    lam = s**2 / (n - 1)
    keep = min(n, d) if n_top is None else n_top
    comps = svd_flip_rows(vt[:keep])
    return Spectrum(n, mean, float(lam.sum()), lam[:keep], comps, keep)


def _centred(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float64 mean of X and X centred on it (the mean's rounding corrected)."""
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0)
    Xc = X - mean
    # the float64 mean still carries the rounding of its sum; centre on the exact mean
    resid = Xc.mean(axis=0)
    Xc -= resid
    return mean + resid, Xc


def solve_arpack(
    X: np.ndarray,
    n_top: int,
    tol: float,
    random_state: np.random.RandomState,
    weights: np.ndarray | None = None,
) -> Spectrum:
    """The top ``n_top`` singular triplets of the centred in-memory data by ARPACK
    (``scipy.sparse.linalg.svds``, started as scikit-learn's: ``uniform(-1, 1)`` from
    ``random_state``); ``0 < n_top < min(n_samples, n_features)``. The total variance is the
    sum of the column variances (ddof=1). With feature weights, of ``(X - mean) * weights``."""
    from scipy.sparse.linalg import svds

    n = X.shape[0]
    mean, Xc = _centred(X)
    if weights is not None:
        Xc *= weights
    v0 = random_state.uniform(-1, 1, min(Xc.shape))
    _, s, vt = svds(Xc, k=n_top, tol=tol, v0=v0)
    order = np.argsort(s)[::-1]
    lam = s[order] ** 2 / (n - 1)
    comps = svd_flip_rows(np.ascontiguousarray(vt[order]))
    total = float(np.einsum("ij,ij->", Xc, Xc) / (n - 1))
    return Spectrum(n, mean, total, lam, comps, n_top)


def mle_dimension(spectrum: np.ndarray, n_samples: int) -> int:
    """Minka's maximum-likelihood dimensionality from every eigenvalue of the covariance.

    T. P. Minka, *Automatic choice of dimensionality for PCA*, NIPS 2000: the rank ``k`` in
    ``[1, d - 1]`` with the largest Laplace-approximated evidence of the probabilistic PCA
    model, with scikit-learn's conventions (``_assess_dimension``: eigenvalues below 1e-15
    end the search, the noise variance is at least 1e-15). scikit-learn evaluates the
    ``O(k d)`` pair term of every rank afresh, ``O(d^3)`` in all; here each rank's terms are
    updated from the previous rank's, ``O(d^2)`` in all, so d in the thousands takes
    milliseconds.

    Parameters
    ----------
    spectrum : ndarray of shape (n_features,)
        The eigenvalues, decreasing.
    n_samples : int

    Returns
    -------
    int
        The estimated number of components (1 when ``n_features`` is 1).
    """
    from scipy.special import gammaln

    lam = np.asarray(spectrum, dtype=np.float64)
    d, n = lam.shape[0], float(n_samples)
    eps = 1e-15
    if d < 2:
        return 1
    log_n = np.log(n)
    i = np.arange(1, d)  # the ranks tried
    # pu: -r log 2 + sum_{i<=r} [lgamma((d - i + 1) / 2) - log(pi) (d - i + 1) / 2]
    pu = -i * np.log(2.0) + np.cumsum(gammaln((d - i + 1) / 2.0) - np.log(np.pi) * (d - i + 1) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_lam = np.log(lam)
        pl = -np.cumsum(log_lam[: d - 1]) * n / 2.0
        tail = np.cumsum(lam[::-1])[::-1]  # tail[r] = sum(lam[r:])
        v = np.maximum(eps, tail[1:] / (d - i))
        pv = -np.log(v) * n * (d - i) / 2.0
        m = d * i - i * (i + 1.0) / 2.0
        pp = np.log(2.0 * np.pi) * (m + i) / 2.0
        # pa(r) = sum_{q<r} sum_{j>q} [log((lam_q - lam_j)(1/s_j - 1/s_q)) + log n], with
        # s_j = lam_j for j < r and v_r beyond: split into
        #   A(r) = sum_{q<r} sum_{j>q} log(lam_q - lam_j)            (cumulated row sums)
        #   B(r) = sum_{q<j<r} log(1/lam_j - 1/lam_q)                (grows by one column)
        #   C(r) = (d - r) sum_{q<r} log(1/v_r - 1/lam_q)
        rows = np.array([np.log(lam[q] - lam[q + 1 :]).sum() for q in range(d - 1)])
        A = np.cumsum(rows)
        inv = 1.0 / lam
        B = np.zeros(d - 1)
        for r in range(2, d):
            B[r - 1] = B[r - 2] + np.log(inv[r - 1] - inv[: r - 1]).sum()
        C = np.array([(d - r) * np.log(1.0 / v[r - 1] - inv[:r]).sum() for r in range(1, d)])
        pairs = i * (d - 1) - i * (i - 1) / 2.0
        pa = A + B + C + pairs * log_n
        ll = pu + pl + pv + pp - pa / 2.0 - i * log_n / 2.0
    ll = np.where(lam[: d - 1] < eps, -np.inf, ll)
    return int(np.argmax(ll)) + 1


def solve_randomized(
    rows: Rows,
    n_top: int,
    *,
    n_oversamples: int,
    n_power_iter: int,
    random_state: np.random.RandomState,
    on_error: Callable[[ValueError], Any] | None = None,
    weights: np.ndarray | None = None,
) -> tuple[Spectrum, int]:
    """Randomized block Krylov PCA over the row blocks; returns the spectrum and the passes.

    The block width is ``l = min(n_top + n_oversamples, d)``; the data is read
    ``n_power_iter + 1`` times. With feature weights, of ``(X - mean) * weights``: the
    scatter is applied to the weighted basis and the product weighted
    (:func:`ddr.decomposition._feature_weights.weighted_scatter_eigh`), the same passes.
    """
    d = rows.shape[1]
    width = min(n_top + n_oversamples, d)
    if weights is not None:
        res = weighted_scatter_eigh(
            rows,
            width,
            weights,
            n_power_iter=n_power_iter,
            random_state=random_state,
            on_error=on_error,
        )
    else:
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
