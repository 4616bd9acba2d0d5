"""The multivariate Gaussian density fitted by maximum likelihood in one pass."""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from ddr.base import (
    FEATURE,
    DDRMixin,
    FitPlan,
    MergedFitMixin,
    check_some_weight,
    fit_context,
    map_rows,
)
from ddr.families import LogLikelihoodScore
from ddr.stats import Moments, lazy
from ddr.tags import DDRTags, always, fixed_passes, moments_pass

__all__ = ["WEIGHTS_SINGULAR", "GaussianDensity", "gaussian_log_density"]

#: why scikit-learn's weighted-data check fails for maximum-likelihood covariances
WEIGHTS_SINGULAR = (
    "the check's weighted data have fewer samples than features: the maximum-likelihood "
    "covariance is singular (documented; reg_covar or bandwidth_scaling='none' pass)"
)


def gaussian_log_density(
    X: np.ndarray, mean: np.ndarray, prec_chol: np.ndarray, const: float
) -> np.ndarray:
    """``log N(x; mean, Sigma)`` of a block: ``const - 0.5 |(x - mean) P|^2``, one GEMM.

    ``P = L^-T`` with ``L L^T = Sigma``; ``const = -d/2 log(2 pi) - log|L|``.
    """
    Z = (np.asarray(X, dtype=np.float64) - mean) @ prec_chol
    return const - 0.5 * np.einsum("ij,ij->i", Z, Z)


class GaussianDensity(MergedFitMixin, LogLikelihoodScore, DDRMixin, DensityMixin, BaseEstimator):
    """A multivariate normal fitted by maximum likelihood (or with a ``ddof`` correction).

    The fit is one pass of :class:`ddr.stats.Moments` (Chan merge, two-pass accuracy).

    Parameters
    ----------
    ddof : float, default=0
        Covariance divisor ``n - ddof``: 0 is the maximum-likelihood estimate, 1 the
        unbiased one.
    reg_covar : float, default=0.0
        Added to the diagonal of the covariance (as in scikit-learn's GaussianMixture).
        A singular covariance (constant or collinear features; condition number above 1e12)
        raises a ValueError that suggests it.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
    covariance_ : ndarray of shape (n_features, n_features)
    precision_cholesky_ : ndarray of shape (n_features, n_features)
        ``L^-T`` for ``L L^T = covariance_`` (scikit-learn's name and convention).
    n_samples_seen_ : float
        Total weight of the training rows.
    moments_ : ddr.stats.Moments

    Notes
    -----
    Passes: ``fit`` reads the data once; ``score_samples``, ``score``, ``bic`` and ``aic``
    once each. ``score`` is the *mean* log-likelihood per sample (GaussianMixture's
    convention).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "ddof": [Interval(Real, 0, None, closed="left")],
        "reg_covar": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, *, ddof: float = 0, reg_covar: float = 0.0) -> None:
        self.ddof = ddof
        self.reg_covar = reg_covar

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = fixed_passes(1)
        tags.fit.statistics = moments_pass
        tags.fit.mergeable = always
        tags.fit.solve_params = frozenset({"ddof", "reg_covar"})
        tags.translation_invariant = "score_samples"
        tags.xarray_dims = {"mean_": (FEATURE,), "covariance_": (FEATURE, FEATURE + "_2")}
        tags.xarray_units = {"mean_": 1, "covariance_": 2}
        tags.checks.expected_failed_checks = {
            "check_sample_weight_equivalence_on_dense_data": WEIGHTS_SINGULAR
        }
        return tags

    @fit_context
    def fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> GaussianDensity:
        """Maximum-likelihood mean and covariance in one pass.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional
            Frequency weights.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        self
        """
        return self._fit_plan(X, sample_weight=sample_weight, sample_dim=sample_dim).run()

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan:
        """The fit as one lazy pass of Moments and the Cholesky factorisation."""
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"))
        w = fit_params.get("sample_weight")
        return FitPlan.over(rows, lazy(Moments, rows.data, None, w), self._finish)

    _statistics_attr = "moments_"

    def _solve_statistics(self, value: Moments) -> GaussianDensity:
        return self._finish(value)

    def _finish(self, m: Moments) -> GaussianDensity:
        self.moments_ = m
        check_some_weight(m.count, "GaussianDensity")
        if m.count - self.ddof <= 0:
            raise ValueError(
                f"GaussianDensity needs more than ddof={self.ddof} samples; got "
                f"{m.count:g} (total weight)"
            )
        d = m.n_features
        cov = m.covariance(self.ddof) + self.reg_covar * np.eye(d)
        try:
            L = linalg.cholesky(cov, lower=True)
        except linalg.LinAlgError:
            L = None
        # condition number above 1e12 (exact collinearity leaves a pivot ~ eps): singular
        if L is None or np.min(np.diagonal(L)) ** 2 <= 1e-12 * np.max(np.diagonal(cov)):
            raise ValueError(
                "the covariance is singular (a constant or collinear feature, or fewer samples "
                f"than features: {m.count:g} samples, {d} features); set reg_covar > 0 "
                "(e.g. reg_covar=1e-6) to regularise it"
            )
        self.mean_ = m.mean.copy()
        self.covariance_ = cov
        self.precision_cholesky_ = linalg.solve_triangular(L, np.eye(d), lower=True).T
        self._log_const_ = float(-0.5 * d * np.log(2 * np.pi) - np.sum(np.log(np.diagonal(L))))
        self.n_samples_seen_ = float(m.count)
        return self

    def score_samples(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Log-density of each row.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples,)
        """
        check_is_fitted(self)
        rows = self._rows(X, reset=False, sample_dim=sample_dim)
        return map_rows(
            rows, gaussian_log_density, n_out=None, dtype=np.float64, name="log_density",
            args=(self.mean_, self.precision_cholesky_, self._log_const_),
            method=f"{type(self).__name__}.score_samples",
        )  # fmt: skip

    def _n_parameters(self) -> int:
        d = self.n_features_in_
        return d + d * (d + 1) // 2

    def bic(self, X: Any, *, sample_dim: Hashable | None = None) -> float:
        """Bayesian information criterion ``-2 log L + p log n`` on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        float
        """
        total, n = self._total_log_likelihood(X, sample_dim)
        return -2.0 * total + self._n_parameters() * np.log(n)

    def aic(self, X: Any, *, sample_dim: Hashable | None = None) -> float:
        """Akaike information criterion ``-2 log L + 2 p`` on ``X``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        float
        """
        total, _ = self._total_log_likelihood(X, sample_dim)
        return -2.0 * total + 2.0 * self._n_parameters()

    def sample(self, n_samples: int = 1, random_state: Any = None) -> np.ndarray:
        """Draw from the fitted normal.

        Parameters
        ----------
        n_samples : int, default 1
            Number of samples to draw.
        random_state : int, numpy Generator or None
            Seed of the draws.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        if isinstance(n_samples, bool) or not isinstance(n_samples, Integral) or n_samples < 1:
            raise ValueError(f"n_samples must be an int >= 1; got {n_samples!r}")
        rng = np.random.default_rng(random_state)
        L = linalg.cholesky(self.covariance_, lower=True)
        return self.mean_ + rng.standard_normal((n_samples, self.n_features_in_)) @ L.T
