"""A Gaussian mixture as an EM problem of :func:`ddr.em.fit_em`: the E-step statistic at given
parameters, scikit-learn's M-step, and SQUAREM's coordinates.

SQUAREM extrapolates in coordinates where every step stays a mixture: log-weights, means in
units of the data's spread (the start's marginal spread per feature), and the log-diagonal
and off-diagonal entries of each covariance's Cholesky factor in those units (diag and
spherical: log standard deviations). A point whose smallest covariance eigenvalue falls below
``reg_covar`` (no M-step gives one) is refused, and :func:`ddr.em.fit_em` pulls it back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.special import logsumexp

from ddr.mixture._gaussian_math import diagonals, m_step, precision_cholesky
from ddr.stats import GaussianMixtureSums
from ddr.stats.mixture_sums import GaussianMixtureParams

__all__ = ["MixtureEM", "MixtureModel", "mixture_model"]


@dataclasses.dataclass(frozen=True, eq=False)
class MixtureModel:
    """EM's parameters: the E-step's (weights, means, precision factors) and the
    covariances they came from.

    Parameters
    ----------
    params : GaussianMixtureParams
    covariances : ndarray
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
    """

    params: GaussianMixtureParams
    covariances: np.ndarray


def mixture_model(
    weights: np.ndarray, means: np.ndarray, covariances: np.ndarray, covariance_type: str
) -> MixtureModel:
    """The model of weights, means and covariances (their precisions' factors computed).

    Parameters
    ----------
    weights : ndarray of shape (k,)
    means : ndarray of shape (k, d)
    covariances : ndarray
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
    covariance_type : str

    Returns
    -------
    MixtureModel

    Raises
    ------
    ValueError
        When a covariance is not positive definite.
    """
    prec = precision_cholesky(covariances, covariance_type)
    return MixtureModel(GaussianMixtureParams(weights, means, prec, covariance_type), covariances)


class MixtureEM:
    """A Gaussian mixture for :func:`ddr.em.fit_em`, with SQUAREM's coordinates.

    Parameters
    ----------
    covariance_type : str
    reg_covar : float
        Added to every covariance's diagonal by the M-step.
    start : MixtureModel
        The start, whose marginal spread per feature is the unit of SQUAREM's coordinates.
    """

    def __init__(self, covariance_type: str, reg_covar: float, start: MixtureModel) -> None:
        self.ct = covariance_type
        self.reg = reg_covar
        # the mixture's marginal spread per feature: the unit of the means and covariances
        p, cov = start.params, start.covariances
        var = diagonals(cov, self.ct, p.n_features)
        centre = p.weights @ p.means / max(float(p.weights.sum()), np.finfo(float).tiny)
        spread = p.weights @ (var + (p.means - centre) ** 2)
        self.scale = np.sqrt(np.maximum(spread, np.finfo(float).tiny))

    def statistic(self, model: MixtureModel) -> Any:
        return GaussianMixtureSums.spec(params=model.params)

    def m_step(self, stat: GaussianMixtureSums, model: MixtureModel) -> MixtureModel:
        weights, means, covs = m_step(stat.weight, stat.mean, stat.scatter, self.ct, self.reg)
        return mixture_model(weights, means, covs, self.ct)

    # ------------------------------------------------------------- SQUAREM
    def to_vector(self, model: MixtureModel) -> np.ndarray:
        p = model.params
        parts = [np.log(p.weights), (p.means / self.scale).ravel()]
        cov = model.covariances
        s = self.scale
        if self.ct in ("full", "tied"):
            covs = cov if self.ct == "full" else cov[None]
            low = np.tril_indices(s.shape[0], -1)
            for c in covs:
                L = np.linalg.cholesky(c / np.outer(s, s))
                parts += [np.log(np.diagonal(L)), L[low]]
        elif self.ct == "diag":
            parts.append(0.5 * np.log(cov / s**2).ravel())
        else:
            parts.append(0.5 * np.log(cov / np.mean(s**2)))
        return np.concatenate(parts)

    def from_vector(self, vector: np.ndarray, model: MixtureModel) -> MixtureModel | None:
        p = model.params
        k, d = p.means.shape
        if not np.isfinite(vector).all():
            return None
        logw = vector[:k]
        weights = np.exp(logw - logsumexp(logw))
        means = vector[k : k + k * d].reshape(k, d) * self.scale
        rest = vector[k + k * d :]
        s = self.scale
        if self.ct in ("full", "tied"):
            n_cov = k if self.ct == "full" else 1
            low = np.tril_indices(d, -1)
            size = d + low[0].shape[0]
            covs = np.empty((n_cov, d, d))
            for j in range(n_cov):
                part = rest[j * size : (j + 1) * size]
                L = np.diag(np.exp(part[:d]))
                L[low] = part[d:]
                covs[j] = (L @ L.T) * np.outer(s, s)
            smallest = min(float(np.linalg.eigvalsh(c)[0]) for c in covs)
            cov: np.ndarray = covs if self.ct == "full" else covs[0]
        elif self.ct == "diag":
            cov = np.exp(2.0 * rest.reshape(k, d)) * s**2
            smallest = float(cov.min())
        else:
            cov = np.exp(2.0 * rest) * np.mean(s**2)
            smallest = float(cov.min())
        if not smallest >= self.reg or not np.isfinite(cov).all():
            return None  # below what any M-step gives: not a point EM could reach
        try:
            return mixture_model(weights, means, cov, self.ct)
        except ValueError:
            return None
