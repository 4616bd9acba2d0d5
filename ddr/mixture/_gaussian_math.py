"""The arithmetic of a Gaussian mixture's parameters, shared by its fit and its read-outs.

Covariances and precisions in scikit-learn's four layouts (``full`` (k, d, d), ``tied``
(d, d), ``diag`` (k, d), ``spherical`` (k,)) and the conversions between them; the M-step
from the merged E-step sums (:class:`~ddr.stats.GaussianMixtureSums`), written as
scikit-learn's so that an iteration from the same parameters is scikit-learn's to round-off;
the same sums of rows held in memory (the starts); the count of free parameters (BIC, AIC);
and the blockwise maps of ``predict``, ``predict_proba`` and ``score_samples``. Pure
functions of numpy arrays: no estimator, no dask.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ddr.stats.engine import aligned
from ddr.stats.mixture_sums import GaussianMixtureParams, normalise_log_prob, weighted_log_prob

__all__ = [
    "EPS10",
    "ILL_DEFINED",
    "covariances_of",
    "diagonals",
    "m_step",
    "n_parameters",
    "prec_chol_of",
    "precision_cholesky",
    "precisions_of",
    "predict_block",
    "proba_block",
    "score_block",
    "weighted_sums",
]

#: scikit-learn's floor on the components' weights: ``nk = sum_n r_nk + 10 eps``
EPS10 = 10 * np.finfo(np.float64).eps
#: scikit-learn's message for a covariance that is not positive definite
ILL_DEFINED = (
    "Fitting the mixture model failed because some components have ill-defined empirical "
    "covariance (for instance caused by singleton or collapsed samples). Try to decrease the "
    "number of components, increase reg_covar, or scale the input data."
)


# ------------------------------------------------------------------------- M-step
def precision_cholesky(covariances: np.ndarray, covariance_type: str) -> np.ndarray:
    """Cholesky factors of the precisions, scikit-learn's ``_compute_precision_cholesky``.

    Parameters
    ----------
    covariances : ndarray
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
    covariance_type : str

    Returns
    -------
    ndarray
        ``L^-T`` for ``L L^T = Sigma`` (full, tied); ``1 / sqrt(Sigma)`` (diag, spherical).

    Raises
    ------
    ValueError
        When a covariance is not positive definite (scikit-learn's message).
    """
    if covariance_type in ("full", "tied"):
        covs = covariances if covariance_type == "full" else covariances[None]
        out = np.empty_like(covs)
        d = covs.shape[-1]
        for k, cov in enumerate(covs):
            try:
                chol = linalg.cholesky(cov, lower=True)
            except linalg.LinAlgError:
                raise ValueError(ILL_DEFINED) from None
            out[k] = linalg.solve_triangular(chol, np.eye(d), lower=True).T
        return out if covariance_type == "full" else out[0]
    if np.any(np.less_equal(covariances, 0.0)):
        raise ValueError(ILL_DEFINED)
    return 1.0 / np.sqrt(covariances)


def m_step(
    weight: np.ndarray,
    mean: np.ndarray,
    scatter: np.ndarray,
    covariance_type: str,
    reg_covar: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's M-step from the merged sums: weights, means and covariances.

    ``nk = sum_n r_nk + 10 eps``; weights ``nk / sum nk``; means ``sum_n r_nk x_n / nk``;
    covariances the scatters over ``nk`` (tied: their sum over ``sum nk``; spherical: the
    mean of the per-feature variances) plus ``reg_covar`` on the diagonal.

    Parameters
    ----------
    weight : ndarray of shape (k,)
    mean : ndarray of shape (k, d)
    scatter : ndarray
        As :class:`~ddr.stats.GaussianMixtureSums` holds it.
    covariance_type : str
    reg_covar : float

    Returns
    -------
    weights, means, covariances : ndarray
    """
    nk = weight + EPS10
    means = (weight / nk)[:, None] * mean
    d = mean.shape[1]
    if covariance_type == "full":
        covariances = scatter / nk[:, None, None]
        covariances[:, np.arange(d), np.arange(d)] += reg_covar
    elif covariance_type == "tied":
        covariances = scatter[0] / nk.sum()
        covariances.flat[:: d + 1] += reg_covar
    else:
        covariances = scatter / nk[:, None] + reg_covar
        if covariance_type == "spherical":
            covariances = covariances.mean(axis=1)
    return nk / nk.sum(), means, covariances


def n_parameters(n_components: int, n_features: int, covariance_type: str) -> int:
    """Free parameters of a mixture (scikit-learn's ``_n_parameters``): the covariances'
    free entries, the means and ``k - 1`` weights.

    Parameters
    ----------
    n_components, n_features : int
    covariance_type : str

    Returns
    -------
    int
    """
    k, d = n_components, n_features
    cov = {"full": k * d * (d + 1) / 2.0, "diag": k * d, "tied": d * (d + 1) / 2.0}.get(
        covariance_type, float(k)
    )
    return int(cov + k * d + k - 1)


# ---------------------------------------------------------------- rows in memory
def weighted_sums(
    X: np.ndarray, resp: np.ndarray, covariance_type: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights, weighted means and weighted scatters of in-memory rows (as
    :class:`~ddr.stats.GaussianMixtureSums` holds them) for given responsibilities.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    resp : ndarray of shape (n, k)
        Each row's responsibilities.
    covariance_type : str

    Returns
    -------
    weight : ndarray of shape (k,)
    mean : ndarray of shape (k, d)
    scatter : ndarray of shape (k, d, d) (full), (1, d, d) (tied) or (k, d) (diag, spherical)
    """
    weight = resp.sum(axis=0)
    mean = (resp.T @ X) / np.maximum(weight, np.finfo(float).tiny)[:, None]
    k, d = mean.shape
    if covariance_type in ("full", "tied"):
        scatter = np.empty((k, d, d))
        for j in range(k):
            Y = X - mean[j]
            scatter[j] = (Y * resp[:, j : j + 1]).T @ Y
        if covariance_type == "tied":
            scatter = scatter.sum(axis=0)[None]
    else:
        scatter = np.stack([resp[:, j] @ (X - mean[j]) ** 2 for j in range(k)])
    return weight, mean, scatter


# -------------------------------------------------------------------- layouts
def diagonals(cov: np.ndarray, covariance_type: str, d: int) -> np.ndarray:
    """Each component's variances.

    Parameters
    ----------
    cov : ndarray
        Covariances in the layout of ``covariance_type``.
    covariance_type : str
    d : int
        Features.

    Returns
    -------
    ndarray of shape (k, d), (1, d) for tied
    """
    if covariance_type == "full":
        return np.diagonal(cov, axis1=1, axis2=2)
    if covariance_type == "tied":
        return np.diagonal(cov)[None]
    if covariance_type == "diag":
        return cov
    return np.repeat(cov[:, None], d, axis=1)


def precisions_of(prec_chol: np.ndarray, covariance_type: str) -> np.ndarray:
    """The precisions ``P P^T`` of their Cholesky factors (scikit-learn's ``precisions_``).

    Parameters
    ----------
    prec_chol : ndarray
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
    covariance_type : str

    Returns
    -------
    ndarray of the same shape
    """
    if covariance_type == "full":
        return np.matmul(prec_chol, np.swapaxes(prec_chol, 1, 2))
    if covariance_type == "tied":
        return prec_chol @ prec_chol.T
    return prec_chol**2


def covariances_of(precisions: np.ndarray, covariance_type: str) -> np.ndarray:
    """The covariances of given precisions (their inverses).

    Parameters
    ----------
    precisions : ndarray
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
    covariance_type : str

    Returns
    -------
    ndarray of the same shape
    """
    if covariance_type == "full":
        return np.stack([linalg.inv(p) for p in precisions])
    if covariance_type == "tied":
        return linalg.inv(precisions)
    return 1.0 / precisions


def prec_chol_of(precisions: np.ndarray, covariance_type: str) -> np.ndarray:
    """The lower Cholesky factors of given precisions, scikit-learn's
    ``_compute_precision_cholesky_from_precisions``.

    Parameters
    ----------
    precisions : ndarray
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
    covariance_type : str

    Returns
    -------
    ndarray of the same shape
    """
    if covariance_type == "full":
        return np.stack([linalg.cholesky(p, lower=True) for p in precisions])
    if covariance_type == "tied":
        return linalg.cholesky(precisions, lower=True)
    return np.sqrt(precisions)


# ---------------------------------------------------------------- blockwise maps
def proba_block(X: np.ndarray, params: GaussianMixtureParams) -> np.ndarray:
    """Responsibilities ``p(component | x)`` of a block's rows, shape (n, k)."""
    X, params = aligned((X, params))
    return normalise_log_prob(weighted_log_prob(X, params))[0]


def predict_block(X: np.ndarray, params: GaussianMixtureParams) -> np.ndarray:
    """The most probable component of a block's rows, shape (n,)."""
    X, params = aligned((X, params))
    return np.argmax(weighted_log_prob(X, params), axis=1)


def score_block(X: np.ndarray, params: GaussianMixtureParams) -> np.ndarray:
    """``log p(x)`` of a block's rows, shape (n,)."""
    X, params = aligned((X, params))
    return normalise_log_prob(weighted_log_prob(X, params))[1]
