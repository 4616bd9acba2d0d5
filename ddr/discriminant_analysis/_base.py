"""Shared pieces of QDA and LDA: fit without sample weights (as scikit-learn), covariances with
optional shrinkage from the statistics, decision functions, deterministic signs."""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Real
from typing import Any

import numpy as np

from ddr.discriminant_analysis._ledoit_wolf import (
    ClassFourthMoments,
    ledoit_wolf_covariance,
    shrunk_covariance,
)
from ddr.naive_bayes._base import BaseGenerativeClassifier
from ddr.stats import ClassMoments
from ddr.stats.base import Statistic, StatSpec

__all__ = ["DiscriminantBase", "check_shrinkage", "flip_columns"]


def flip_columns(V: np.ndarray) -> np.ndarray:
    """Signs fixed so that the largest-magnitude entry of each column is positive."""
    if V.size == 0:
        return V
    idx = np.argmax(np.abs(V), axis=0)
    signs = np.sign(V[idx, np.arange(V.shape[1])])
    signs[signs == 0] = 1.0
    return V * signs


def check_shrinkage(shrinkage: Any) -> None:
    if shrinkage is None or shrinkage == "auto":
        return
    if isinstance(shrinkage, bool) or not isinstance(shrinkage, Real):
        raise TypeError(f"shrinkage must be None, 'auto' or a float in [0, 1]; got {shrinkage!r}")
    if not 0 <= shrinkage <= 1:
        raise ValueError(f"shrinkage must be None, 'auto' or a float in [0, 1]; got {shrinkage!r}")


class DiscriminantBase(BaseGenerativeClassifier):
    """Generative classifier with full class covariances (QDA, LDA).

    Statistics: :class:`ddr.stats.ClassMoments` (full), plus :class:`ClassFourthMoments`
    in the same pass when ``shrinkage="auto"`` needs the Ledoit-Wolf intensity.
    """

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

    def fit(self, X: Any, y: Any, *, sample_dim: Hashable | None = None) -> DiscriminantBase:
        """Fit in one pass over the rows of ``X``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
        sample_dim : hashable, optional
            The sample dimension of a DataArray ``X``.

        Returns
        -------
        self
        """
        return super().fit(X, y, sample_dim=sample_dim)

    def partial_fit(
        self, X: Any, y: Any, classes: Any = None, *, sample_dim: Hashable | None = None
    ) -> DiscriminantBase:
        """Merge the statistics of a batch into the stored ones and solve again.

        Equals ``fit`` on all batches together. ``classes`` is required on the first call.

        Returns
        -------
        self
        """
        return super().partial_fit(X, y, classes, sample_dim=sample_dim)

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
