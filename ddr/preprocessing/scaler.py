"""Standardisation (zero mean, unit variance per feature) from one pass of diagonal Moments.

The per-feature mean and variance come from :class:`ddr.stats.Moments` in its diagonal form
(O(d) memory, per-block float64 centring and Chan merges, so exact whatever the offset), with
``nan_policy="omit"``: NaN entries are ignored when fitting and kept when transforming, as
scikit-learn's ``StandardScaler`` does. ``partial_fit`` merges the moments of each batch, so
the result does not depend on how the data was batched. Transforms are blockwise: numpy in,
numpy out; dask in, lazy dask out; DataArray in, DataArray out with the same coordinates.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

import dask
import numpy as np
from sklearn.base import BaseEstimator

from ddr.base import FEATURE, FitPlan, fit_context
from ddr.families import Blockwise, SameWidthTransformer, out_dtype
from ddr.stats import Moments, lazy
from ddr.stats._input import Rows
from ddr.tags import DDRTags, always, fixed_passes

__all__ = ["StandardScaler"]

_SPEC = Moments.spec(diagonal=True, nan_policy="omit")


# ------------------------------------------------------------------ blockwise functions
def _scale_block(
    X: np.ndarray, mean: np.ndarray | None, scale: np.ndarray | None, dtype: Any
) -> np.ndarray:
    """``(X - mean) / scale`` in the output dtype (scikit-learn's in-place arithmetic)."""
    out = np.array(X, dtype=dtype, copy=True)
    if mean is not None:
        out -= mean
    if scale is not None:
        out /= scale
    return out


def _unscale_block(
    X: np.ndarray, mean: np.ndarray | None, scale: np.ndarray | None, dtype: Any
) -> np.ndarray:
    """``X * scale + mean`` in the output dtype."""
    out = np.array(X, dtype=dtype, copy=True)
    if scale is not None:
        out *= scale
    if mean is not None:
        out += mean
    return out


def _is_constant_feature(var: np.ndarray, mean: np.ndarray, n: Any) -> np.ndarray:
    """scikit-learn's test for a variance indistinguishable from 0 (Chan, Golub and LeVeque's
    error bound of the two-pass algorithm), so near-constant features get scale 1."""
    eps = np.finfo(np.float64).eps
    upper = n * eps * var + (n * mean * eps) ** 2
    return var <= upper


def _widest_pass(n_features: int) -> list[tuple[Any, int]]:
    return [(_SPEC, n_features)]


class StandardScaler(SameWidthTransformer, BaseEstimator):
    """Standardise features by removing the mean and scaling to unit variance.

    ``z = (x - mean_) / scale_``, fitted in ONE pass over the rows.

    Parameters
    ----------
    with_mean : bool, default=True
        Centre the data.
    with_std : bool, default=True
        Scale to unit variance.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,) or None
        Per-feature mean (float64); None when ``with_mean=False`` and ``with_std=False``.
    var_ : ndarray of shape (n_features,) or None
        Per-feature variance (ddof=0, float64); None when ``with_std=False``.
    scale_ : ndarray of shape (n_features,) or None
        ``sqrt(var_)``, with 1 for features whose variance is 0 to round-off (as
        scikit-learn); None when ``with_std=False``.
    n_samples_seen_ : float, int or ndarray of shape (n_features,)
        Samples (total weight) seen per feature, NaN entries excluded; a scalar when the same
        for every feature.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has string feature names.
    moments_ : Moments
        The diagonal moments accumulated so far (``partial_fit`` merges into them).

    Notes
    -----
    Passes over the data: ``fit`` 1, ``partial_fit`` 1 over the batch, ``transform`` and
    ``inverse_transform`` none (lazy for dask input). Moments are accumulated in float64;
    transforms return the input's float dtype (float64 for integer input, which is upcast).
    Dask input must hold whole rows in each chunk. Unlike scikit-learn, sparse input and the
    ``copy`` parameter are not supported (outputs are always new arrays).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
    }

    def __init__(self, *, with_mean: bool = True, with_std: bool = True) -> None:
        self.with_mean = with_mean
        self.with_std = with_std

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = fixed_passes(1)
        tags.fit.statistics = _widest_pass
        tags.fit.mergeable = always
        tags.fit.solve_params = frozenset({"with_mean", "with_std"})
        if self.with_mean:
            tags.translation_invariant = "transform"
        tags.xarray_dims = {"mean_": (FEATURE,), "var_": (FEATURE,), "scale_": (FEATURE,)}
        tags.xarray_units = {"mean_": 1, "var_": 2, "scale_": 1}
        return tags

    # -------------------------------------------------------------------- fit
    @fit_context
    def fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> StandardScaler:
        """Compute the per-feature mean and variance in one pass.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            NaN entries are ignored.
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative frequency weights.
        sample_dim : hashable, optional
            The sample dim of a DataArray X.

        Returns
        -------
        self
        """
        plan = self._fit_plan(X, y, sample_weight=sample_weight, sample_dim=sample_dim)
        value = plan.compute()
        _check_some_weight(value, sample_weight)
        return plan.finish(value)

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan:
        """The fit as one lazy pass of diagonal Moments and the read-out."""
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"), allow_nan=True)
        stats = lazy(_SPEC, rows.data, sample_weight=fit_params.get("sample_weight"))
        return FitPlan.over(rows, stats, self._set)

    @fit_context
    def partial_fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> StandardScaler:
        """Merge the moments of a batch into the fitted ones (one pass over the batch).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : None
            Ignored (scikit-learn's signature).
        sample_weight : array-like of shape (n_samples,), optional
            Frequency weights.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        self
        """
        first = not hasattr(self, "moments_")
        rows = self._rows(X, reset=first, sample_dim=sample_dim, allow_nan=True)
        (batch,) = dask.compute(lazy(_SPEC, rows.data, sample_weight=sample_weight))
        _check_some_weight(batch, sample_weight)
        return self._set(batch if first else self.moments_.merge(batch))

    # what ddr.merge_fits asks
    def _fit_statistics(self) -> Moments | None:
        return getattr(self, "moments_", None)

    def _solve_statistics(self, moments: Moments) -> StandardScaler:
        return self._set(moments)

    def _set(self, moments: Moments) -> StandardScaler:
        self.moments_ = moments
        count = np.asarray(moments.count, dtype=np.float64)
        weighted = not np.allclose(count, np.round(count))
        if not self.with_mean and not self.with_std and not weighted:
            count = count.astype(np.int64)
        self.n_samples_seen_ = count[0] if count.size and np.ptp(count) == 0 else count
        seen = count > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(seen, moments.mean, np.nan)
            var = np.where(
                seen, np.maximum(moments.scatter, 0.0) / np.where(seen, count, 1), np.nan
            )
        if not self.with_mean and not self.with_std:
            self.mean_, self.var_, self.scale_ = None, None, None
            return self
        self.mean_ = mean
        if self.with_std:
            self.var_ = var
            scale = np.sqrt(var)
            scale[_is_constant_feature(var, mean, count)] = 1.0
            self.scale_ = scale
        else:
            self.var_, self.scale_ = None, None
        return self

    # -------------------------------------------------------------- transforms
    def _params(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        mean = self.mean_ if self.with_mean else None
        return mean, self.scale_

    def _forward(self, rows: Rows) -> Blockwise:
        """``(X - mean_) / scale_``; NaN stays NaN."""
        dtype = out_dtype(rows.data.dtype)
        args = (*self._params(), dtype)
        units = 0 if self.with_std else 1  # standardised, or only centred
        return Blockwise(
            _scale_block, args, dtype, "standard-scale", check="input", allow_nan=True,
            units=units,
        )  # fmt: skip

    def fit_transform(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> Any:
        """Fit (one pass), then transform X (lazy for dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : None
            Ignored (scikit-learn's signature).
        sample_weight : array-like of shape (n_samples,), optional
            Frequency weights.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        same kind as X, shape (n_samples, n_features)
            The standardised data.
        """
        self.fit(X, sample_weight=sample_weight, sample_dim=sample_dim)
        return self.transform(X, sample_dim=sample_dim)

    def _backward(self, rows: Rows) -> Blockwise:
        """``X * scale_ + mean_``."""
        dtype = out_dtype(rows.data.dtype)
        args = (*self._params(), dtype)
        return Blockwise(
            _unscale_block, args, dtype, "standard-unscale", check="input", allow_nan=True,
            units=1,
        )  # fmt: skip

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _check_some_weight(moments: Moments, sample_weight: Any) -> None:
    if sample_weight is not None and moments.n_rows > 0 and not np.any(moments.count > 0):
        raise ValueError(
            "Sample weights must contain at least one non-zero number (on a row whose values "
            "are not NaN); got sample_weight summing to 0 over the rows with values"
        )
