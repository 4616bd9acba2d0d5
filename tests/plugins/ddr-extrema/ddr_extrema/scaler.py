"""``MaxAbsScaler``: each feature divided by its largest absolute value, fitted in one pass
of :class:`~ddr_extrema.extrema.Extrema` (scikit-learn's ``MaxAbsScaler``)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from ddr.base import FEATURE, FitPlan, fit_context
from ddr.families import Blockwise, SameWidthTransformer, out_dtype
from ddr.stats import lazy
from ddr.tags import DDRTags, always, fixed_passes
from ddr_extrema.extrema import Extrema

__all__ = ["MaxAbsScaler"]


def _scale(X: np.ndarray, scale: np.ndarray, dtype: Any) -> np.ndarray:
    return (np.asarray(X, dtype=dtype) / scale).astype(dtype, copy=False)


def _unscale(X: np.ndarray, scale: np.ndarray, dtype: Any) -> np.ndarray:
    return (np.asarray(X, dtype=dtype) * scale).astype(dtype, copy=False)


def _widest_pass(n_features: int) -> list[tuple[Any, int]]:
    return [(Extrema.spec(), n_features)]


class MaxAbsScaler(SameWidthTransformer, BaseEstimator):
    """Scale each feature by its maximum absolute value, into [-1, 1].

    Fitted in ONE pass over the rows (a mergeable :class:`~ddr_extrema.extrema.Extrema`);
    ``transform`` and ``inverse_transform`` are blockwise, in the input's form.

    Attributes
    ----------
    max_abs_ : ndarray of shape (n_features,)
        Per-feature maximum absolute value.
    scale_ : ndarray of shape (n_features,)
        ``max_abs_``, with 1 for features that are all 0.
    n_samples_seen_ : float
        Rows (total weight) seen.
    n_features_in_ : int
    extrema_ : Extrema
        The statistic the scale was read from (``partial_fit`` merges into it).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}

    def __init__(self) -> None:
        pass

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = fixed_passes(1)
        tags.fit.statistics = _widest_pass
        tags.fit.mergeable = always
        tags.xarray_dims = {"max_abs_": (FEATURE,), "scale_": (FEATURE,)}
        return tags

    @fit_context
    def fit(
        self, X: Any, y: Any = None, sample_weight: Any = None, *, sample_dim: Hashable = None
    ) -> MaxAbsScaler:
        """Compute the per-feature maximum absolute value in one pass.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional
            Rows of weight 0 do not count.
        sample_dim : hashable, optional
            The sample dim of a DataArray X.

        Returns
        -------
        self
        """
        return self._fit_plan(X, y, sample_weight=sample_weight, sample_dim=sample_dim).run()

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan:
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"))
        weighted = fit_params.get("sample_weight") is not None
        stats = lazy(Extrema.spec(), rows.data, sample_weight=fit_params.get("sample_weight"))
        return FitPlan.over(rows, stats, lambda value: self._set(_some_weight(value, weighted)))

    @fit_context
    def partial_fit(
        self, X: Any, y: Any = None, sample_weight: Any = None, *, sample_dim: Hashable = None
    ) -> MaxAbsScaler:
        """Merge the statistic of a batch into the fitted one.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional
        sample_dim : hashable, optional

        Returns
        -------
        self
        """
        first = not hasattr(self, "extrema_")
        rows = self._rows(X, reset=first, sample_dim=sample_dim)
        stats = lazy(Extrema.spec(), rows.data, sample_weight=sample_weight)
        value = _some_weight(FitPlan.over(rows, stats, _same).compute(), sample_weight is not None)
        return self._set(value if first else self.extrema_.merge(value))

    def _set(self, extrema: Extrema) -> MaxAbsScaler:
        self.extrema_ = extrema
        self.n_samples_seen_ = extrema.count
        self.max_abs_ = extrema.max_abs
        self.scale_ = np.where(extrema.max_abs > 0, extrema.max_abs, 1.0)
        return self

    def _forward(self, rows: Any) -> Blockwise:
        dtype = out_dtype(rows.data.dtype)
        return Blockwise(_scale, (self.scale_, dtype), dtype, "max-abs-scale", check="input")

    def _backward(self, rows: Any) -> Blockwise:
        dtype = out_dtype(rows.data.dtype)
        return Blockwise(_unscale, (self.scale_, dtype), dtype, "max-abs-unscale", check="input")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _same(value: Any) -> Any:
    return value


def _some_weight(value: Extrema, weighted: bool) -> Extrema:
    if weighted and value.count == 0:
        raise ValueError("Sample weights must contain at least one non-zero number")
    return value
