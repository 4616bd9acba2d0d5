"""Independent categorical (multinomial) distributions per feature, fitted in one pass."""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from ddr.base import (
    DDRMixin,
    FitPlan,
    MergedFitMixin,
    check_some_weight,
    fit_context,
    map_rows,
)
from ddr.families import LogLikelihoodScore
from ddr.generative.categories import CONTINUOUS, as_category_codes, smoothed_log_probs
from ddr.stats import CategoricalCounts, lazy
from ddr.stats._input import is_dask
from ddr.tags import DDRTags, always, fixed_passes, moments_pass

__all__ = ["CategoricalDensity", "categorical_log_density"]


def categorical_log_density(X: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``sum_j log p_j(x_j)`` of a block of codes; ``table[j, c]`` (last column: unseen)."""
    codes = np.minimum(as_category_codes(X), table.shape[1] - 1)
    out = np.zeros(codes.shape[0])
    for j in range(codes.shape[1]):
        out += table[j, codes[:, j]]
    return out


class CategoricalDensity(MergedFitMixin, LogLikelihoodScore, DDRMixin, DensityMixin, BaseEstimator):
    """A product of categorical distributions, one per feature, by (smoothed) maximum likelihood.

    ``p(x) = prod_j p_j(x_j)`` with ``p_j(c) = (N_jc + alpha) / (N + alpha K_j)``: the
    multinomial MLE for ``alpha=0``, the posterior mean under a symmetric Dirichlet(alpha)
    prior otherwise. Features are coded ``0, 1, ..., K_j - 1``.

    Parameters
    ----------
    alpha : float, default=0.0
        Additive smoothing. With 0 (the MLE) a category never seen has probability 0 and
        log-density ``-inf``.
    min_categories : int or array-like of shape (n_features,), optional
        ``K_j = max(max code seen + 1, min_categories)``.

    Attributes
    ----------
    n_categories_ : ndarray of shape (n_features,)
    category_count_ : list of ndarray of shape (n_categories_[j],)
    feature_log_prob_ : list of ndarray of shape (n_categories_[j],)
    n_samples_seen_ : float
    category_counts_ : ddr.stats.CategoricalCounts

    Notes
    -----
    Passes: ``fit`` reads the data once; ``score_samples`` once. Codes at or beyond
    ``n_categories_[j]`` get the probability of a zero count, ``alpha / (N + alpha K_j)``;
    negative or non-integer codes raise a ValueError. ``score`` is the mean log-likelihood.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "alpha": [Interval(Real, 0, None, closed="left")],
        "min_categories": [None, "array-like", Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, *, alpha: float = 0.0, min_categories: Any = None) -> None:
        self.alpha = alpha
        self.min_categories = min_categories

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = fixed_passes(1)
        # the memory check's estimate: what it has always been told (the pass holds the
        # category counts, class x feature x category)
        tags.fit.statistics = moments_pass
        tags.fit.mergeable = always
        tags.fit.solve_params = frozenset({"alpha", "min_categories"})
        tags.checks.expected_failed_checks = {
            "check_sample_weight_equivalence_on_dense_data": CONTINUOUS
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
    ) -> CategoricalDensity:
        """Category counts per feature in one pass.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            Non-negative integer category codes.
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        self
        """
        return self._fit_plan(X, sample_weight=sample_weight, sample_dim=sample_dim).run()

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan:
        """The fit as one lazy pass of category counts and the smoothed frequencies."""
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"), dtype="numeric")
        mc = None if self.min_categories is None else np.asarray(self.min_categories)
        if mc is not None and (
            mc.dtype.kind not in "iu"
            or mc.ndim > 1
            or (mc.ndim == 1 and mc.shape[0] != rows.shape[1])
        ):
            raise ValueError(
                "min_categories must be an int or an int array of shape "
                f"({rows.shape[1]},); got {self.min_categories!r}"
            )
        data = rows.data
        data = (
            data.map_blocks(as_category_codes, dtype=np.int64)
            if is_dask(data)
            else as_category_codes(data)
        )
        stats = lazy(CategoricalCounts, data, None, fit_params.get("sample_weight"))
        return FitPlan.over(rows, stats, self._finish)

    _statistics_attr = "category_counts_"

    def _solve_statistics(self, value: CategoricalCounts) -> CategoricalDensity:
        return self._finish(value)

    def _finish(self, stat: CategoricalCounts) -> CategoricalDensity:
        a = self.alpha
        self.category_counts_ = stat
        seen = stat.n_categories
        if self.min_categories is None:
            n_cat = seen.astype(np.int64)
        else:
            n_cat = np.maximum(seen, np.asarray(self.min_categories)).astype(np.int64)
        self.n_categories_ = n_cat
        total = stat.counts.sum(axis=(0, 2))[0] if stat.counts.size else 0.0
        check_some_weight(total, "CategoricalDensity")
        cc, lp, unseen = smoothed_log_probs(stat.counts, n_cat, float(a))
        self.category_count_ = [c[0] for c in cc]
        self.feature_log_prob_ = [p[0] for p in lp]
        self._unseen_log_prob_ = unseen[:, 0]
        self.n_samples_seen_ = float(total)
        return self

    def _table(self) -> np.ndarray:
        d = self.n_features_in_
        table = np.empty((d, int(self.n_categories_.max()) + 1))
        for j in range(d):
            cj = int(self.n_categories_[j])
            table[j, :cj] = self.feature_log_prob_[j]
            table[j, cj:] = self._unseen_log_prob_[j]
        return table

    def score_samples(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Log-probability of each row.

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
        rows = self._rows(X, reset=False, sample_dim=sample_dim, dtype="numeric")
        with np.errstate(divide="ignore"):
            return map_rows(
                rows, categorical_log_density, n_out=None, dtype=np.float64,
                name="log_density", args=(self._table(),),
                method=f"{type(self).__name__}.score_samples",
            )  # fmt: skip

    def sample(self, n_samples: int = 1, random_state: Any = None) -> np.ndarray:
        """Draw codes, each feature independently from its fitted distribution.

        Parameters
        ----------
        n_samples : int, default 1
            Number of samples to draw.
        random_state : int, numpy Generator or None
            Seed of the draws.

        Returns
        -------
        ndarray of shape (n_samples, n_features), int64
        """
        check_is_fitted(self)
        if isinstance(n_samples, bool) or not isinstance(n_samples, Integral) or n_samples < 1:
            raise ValueError(f"n_samples must be an int >= 1; got {n_samples!r}")
        rng = np.random.default_rng(random_state)
        out = np.empty((n_samples, self.n_features_in_), dtype=np.int64)
        for j, lp in enumerate(self.feature_log_prob_):
            p = np.exp(lp)
            out[:, j] = rng.choice(p.shape[0], size=n_samples, p=p / p.sum())
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.positive_only = True
        return tags
