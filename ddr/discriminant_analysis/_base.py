"""Shared pieces of QDA and LDA: fit without sample weights (as scikit-learn), covariances with
optional shrinkage from the statistics, decision functions, deterministic signs."""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import InvalidParameterError, fit_context
from ddr.discriminant_analysis._ledoit_wolf import (
    ClassFourthMoments,
    ledoit_wolf_covariance,
    shrunk_covariance,
)
from ddr.generative.classifier import BaseGenerativeClassifier
from ddr.linalg.signs import component_signs
from ddr.stats import ClassMoments
from ddr.stats.base import Statistic, StatSpec
from ddr.tags import DDRTags

__all__ = ["SHARED_CONSTRAINTS", "DiscriminantBase", "flip_columns"]


def flip_columns(V: np.ndarray) -> np.ndarray:
    """Columns with ddr's sign convention (:func:`ddr.linalg.signs.component_signs`)."""
    return V * component_signs(V, axis=0)


#: The constraints QDA and LDA share (scikit-learn's declarations).
SHARED_CONSTRAINTS: dict[str, list[Any]] = {
    "shrinkage": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="both"), None],
    "priors": ["array-like", None],
    "store_covariance": ["boolean"],
    "tol": [Interval(Real, 0, None, closed="left")],
}


class DiscriminantBase(BaseGenerativeClassifier):
    """Generative classifier with full class covariances (QDA, LDA).

    Statistics: :class:`ddr.stats.ClassMoments` (full), plus :class:`ClassFourthMoments`
    in the same pass when ``shrinkage="auto"`` needs the Ledoit-Wolf intensity.
    """

    _abstract_estimator = True

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.translation_invariant = "predict_proba"
        return tags

    def _check_param_combination(self) -> None:
        if self.solver == "svd" and self.shrinkage is not None:
            raise InvalidParameterError(
                f"The 'shrinkage' parameter of {type(self).__name__} must be None with "
                f"solver='svd' (shrinkage needs another solver). Got {self.shrinkage!r} instead."
            )

    def _statistics(self) -> dict[str, StatSpec]:
        specs = {"class_moments_": ClassMoments.spec()}
        if getattr(self, "shrinkage", None) == "auto":
            specs["fourth_moments_"] = ClassFourthMoments.spec()
        return specs

    def _empty_statistics(self, classes: np.ndarray, n_features: int) -> dict[str, Statistic]:
        out: dict[str, Statistic] = {"class_moments_": ClassMoments.empty(classes, n_features)}
        if getattr(self, "shrinkage", None) == "auto":
            out["fourth_moments_"] = ClassFourthMoments.empty(classes, n_features)
        return out

    def _forget(self) -> None:
        super()._forget()
        if hasattr(self, "fourth_moments_"):
            del self.fourth_moments_

    @fit_context
    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, sample_dim: Hashable | None = None
    ) -> DiscriminantBase:
        """Fit in one pass over the rows of ``X``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Non-negative frequency weights: a weight of 2 gives the model of the row
            repeated, 0 the model without it (class means, covariances and priors).
        sample_dim : hashable, optional
            The sample dimension of a DataArray ``X``.

        Returns
        -------
        self
        """
        return super().fit(X, y, sample_weight, sample_dim=sample_dim)

    @fit_context
    def partial_fit(
        self,
        X: Any,
        y: Any,
        classes: Any = None,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> DiscriminantBase:
        """Merge the statistics of a batch into the stored ones and solve again.

        Equals ``fit`` on all batches together. ``classes`` is required on the first call.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : array-like, dask array or DataArray of shape (n_samples,)
            Class labels.
        classes : array-like of shape (n_classes,), optional
            Every class label; required on the first call.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Non-negative frequency weights (as for :meth:`fit`).
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        self
        """
        return super().partial_fit(X, y, classes, sample_weight, sample_dim=sample_dim)

    # ------------------------------------------------------------------ helpers
    def _class_covariance(self, k: int, shrinkage: Any) -> np.ndarray:
        """Covariance (ddof=0) of class ``k`` with scikit-learn's ``shrinkage`` semantics."""
        m = self.class_moments_.moments[k]
        if shrinkage == "auto":
            f = self.fourth_moments_
            return ledoit_wolf_covariance(f.counts[k], f.means[k], f.m2[k], f.m4[k])[0]
        cov = m.scatter / m.count
        if shrinkage is not None:
            cov = shrunk_covariance(cov, float(shrinkage))
        return cov

    def _total_covariance(self, shrinkage: Any) -> np.ndarray:
        """Covariance (ddof=0) of all rows, with the same shrinkage."""
        if shrinkage == "auto":
            return ledoit_wolf_covariance(*self.fourth_moments_.total())[0]
        seen = [
            m for m, c in zip(self.class_moments_.moments, self.class_count_, strict=True) if c > 0
        ]
        tot = seen[0]
        for m in seen[1:]:
            tot = tot.merge(m)
        cov = tot.scatter / tot.count
        return cov if shrinkage is None else shrunk_covariance(cov, float(shrinkage))

    def decision_function(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Class scores; for two classes the log-odds of ``classes_[1]``, shape (n_samples,).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, n_classes) or (n_samples,)
        """
        scores = self.predict_joint_log_proba(X, sample_dim=sample_dim)
        if len(self.classes_) != 2:
            return scores
        if hasattr(scores, "isel"):  # DataArray: drop the class dim
            return (scores.isel({"class": 1}) - scores.isel({"class": 0})).rename("decision")
        return scores[:, 1] - scores[:, 0]
