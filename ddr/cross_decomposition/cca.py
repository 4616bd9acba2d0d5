"""Canonical correlation analysis from one pass of the joint moments of (X, Y).

With the covariances ``Sxx``, ``Syy``, ``Sxy`` of the two views (one pass of
:class:`~ddr.stats.Moments` of the rows ``[x | y]``, built blockwise), CCA (Hotelling, 1936)
finds directions ``u, v`` maximising ``corr(u^T x, v^T y)``. The closed form: with
``Kx = Cx^{-1/2}``, ``Ky = Cy^{-1/2}``, the SVD ``Kx Sxy Ky = P diag(s) Q^T`` gives
``u_j = Kx p_j``, ``v_j = Ky q_j`` and the canonical correlations ``s_j``.

Regularisation (seed 004: ``u^T (X X^T + lambda I) u`` in place of the variance) interpolates
between maximum correlation and maximum covariance:

    Cx = (1 - reg) Sxx + reg * (trace(Sxx) / d_x) I        (same for y),

so ``reg=0`` is CCA and ``reg=1`` the maximum-covariance directions (the singular vectors of
``Sxy``, PLS-SVD). The identity is scaled by the mean variance so that ``reg`` means the same
whatever the units of the data.
"""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import dask.array as da
import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils._param_validation import Interval

from ddr.base import FEATURE, DDRMixin, FitPlan, fit_context, map_rows, rank_limit
from ddr.linalg.signs import component_signs
from ddr.stats import Moments, lazy
from ddr.stats._input import Rows, align_by_coordinate, as_rows, is_dask, is_xarray

__all__ = ["CCA"]


def _project(X: np.ndarray, weights: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Canonical variates ``(X - mean) @ weights`` of one block."""
    return np.subtract(X, mean, dtype=np.float64) @ weights


def _inv_sqrt(C: np.ndarray, name: str, reg: float) -> np.ndarray:
    lam, U = linalg.eigh(C)
    top = max(float(lam.max()), 0.0)
    tol = top * C.shape[0] * np.finfo(np.float64).eps
    if top <= 0 or lam.min() <= tol:
        rank = int((lam > tol).sum())
        raise ValueError(
            f"CCA: the covariance of {name} is singular (rank {rank} < {C.shape[0]} features)"
            f" with reg={reg}; CCA is then undetermined (any direction in the null space "
            "correlates perfectly). Use reg > 0, or remove collinear or constant features"
        )
    return (U / np.sqrt(lam)) @ U.T


class CCA(DDRMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Regularised canonical correlation analysis in one pass over paired row blocks.

    Parameters
    ----------
    n_components : int, default=2
        Number of pairs of canonical directions, at most ``min(n_features_x, n_features_y)``.
    reg : float in [0, 1], default=0.0
        0: maximum correlation (CCA); 1: maximum covariance; between: the regularised
        problem of the module docstring (useful when a view has more features than rows or
        collinear features).

    Attributes
    ----------
    x_weights_ : ndarray of shape (n_features_x, n_components)
        Canonical directions of X, applied to centred, unscaled X. At ``reg=0`` each variate
        ``(X - x_mean_) @ x_weights_[:, j]`` has unit sample variance (ddof=1).
    y_weights_ : ndarray of shape (n_features_y, n_components)
    x_mean_, y_mean_ : ndarray
        Means of the two views.
    correlations_ : ndarray of shape (n_components,)
        Sample correlation of each pair of canonical variates (the canonical correlations at
        ``reg=0``), descending at ``reg=0``.
    singular_values_ : ndarray of shape (n_components,)
        Singular values of ``Cx^{-1/2} Sxy Cy^{-1/2}`` (equal to ``correlations_`` at reg=0).
    n_components_, n_features_in_, n_features_y_ : int

    Notes
    -----
    One pass over the rows (X and Y are read once each, in the same tasks); everything else
    is (d_x + d_y)-sized. Signs: each x direction's largest-magnitude weight is positive and
    the y direction follows so that the correlation is non-negative. X and Y must have the
    same rows; dask inputs are aligned to the row chunks of X.
    """

    @classmethod
    def _component_name(cls, i: int, output: str = "data") -> str:
        return f"{'Y' if output == 'y_data' else 'X'} canonical variate {i + 1}"

    _xarray_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "x_weights_": (FEATURE, "component"),
        "x_mean_": (FEATURE,),
    }

    def __init__(self, n_components: int = 2, *, reg: float = 0.0) -> None:
        self.n_components = n_components
        self.reg = reg

    # ----------------------------------------------------------------- inputs
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "reg": [Interval(Real, 0, 1, closed="both")],
    }

    _n_components_limit = classmethod(rank_limit)

    def _translation_invariant_output(self) -> str | None:
        return "transform"

    def _check_width(self, dx: int, dy: int) -> int:
        k = int(self.n_components)
        if k > min(dx, dy):
            raise ValueError(
                f"CCA: n_components must be in [1, min(n_features_x, n_features_y)] = [1, "
                f"{min(dx, dy)}]; got n_components={k}"
            )
        return k

    def _y_rows(self, y: Any, rows: Rows, sample_dim: Hashable | None) -> Rows:
        if y is None:
            raise ValueError(
                "CCA requires y to be passed, but the target y is None: call fit(X, Y) with "
                "the second view Y of shape (n_samples, n_features_y)"
            )
        if is_xarray(y):
            y = align_by_coordinate(y, rows, "Y")
        if is_dask(y) or is_xarray(y):
            yr = as_rows(y, sample_dim=sample_dim, name="Y")
        else:
            arr = check_array(y, ensure_2d=False, dtype=(np.float64, np.float32), input_name="Y")
            yr = Rows(arr.reshape(-1, 1) if arr.ndim == 1 else arr, "numpy")
        if yr.shape[0] != rows.shape[0]:
            raise ValueError(
                f"CCA: X has {rows.shape[0]} rows but Y has {yr.shape[0]}; the two views must "
                "describe the same samples (paired rows)"
            )
        return yr

    @staticmethod
    def _joint(rows: Rows, yr: Rows) -> Any:
        """``[X | Y]`` row block by row block (lazy when either view is dask)."""
        if not rows.is_lazy and not yr.is_lazy:
            return np.hstack(
                [np.asarray(rows.data, dtype=np.float64), np.asarray(yr.data, dtype=np.float64)]
            )
        X, Y = rows.data, yr.data
        if not rows.is_lazy:
            X = da.from_array(X, chunks=(Y.chunks[0], -1))
        if not yr.is_lazy:
            Y = da.from_array(Y, chunks=(X.chunks[0], -1))
        if Y.chunks[0] != X.chunks[0]:
            Y = Y.rechunk({0: X.chunks[0]})
        dtype = np.result_type(X.dtype, Y.dtype, np.float32)
        return da.concatenate([X.astype(dtype), Y.astype(dtype)], axis=1).rechunk({1: -1})

    # -------------------------------------------------------------------- fit
    @fit_context
    def fit(self, X: Any, y: Any, *, sample_dim: Hashable | None = None) -> CCA:
        """Fit from one pass of the joint moments of the paired views.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features_x)
        y : array-like, dask array or DataArray of shape (n_samples, n_features_y)
            The second view Y (1-D is taken as one feature).
        sample_dim : hashable, optional
            The sample dim of DataArray inputs.

        Returns
        -------
        self
        """
        plan = self._fit_plan(X, y, sample_dim=sample_dim)
        value = plan.compute()
        return plan.finish(value)

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan:
        sample_dim = fit_params.get("sample_dim")
        rows = self._rows(X, reset=True, sample_dim=sample_dim)
        yr = self._y_rows(y, rows, sample_dim)
        dx, dy = rows.shape[1], yr.shape[1]
        k = self._check_width(dx, dy)
        if rows.shape[0] < 2:
            raise ValueError(f"CCA needs at least 2 samples; got n_samples={rows.shape[0]}")
        stats = lazy(Moments, self._joint(rows, yr))
        return FitPlan.over(rows, stats, lambda m: self._finish(m, dx, dy, k))

    def _finish(self, mom: Moments, dx: int, dy: int, k: int) -> CCA:
        S = mom.covariance(ddof=1)
        Sxx, Syy, Sxy = S[:dx, :dx], S[dx:, dx:], S[:dx, dx:]
        r = float(self.reg)
        Cx = (1 - r) * Sxx + r * (np.trace(Sxx) / dx) * np.eye(dx)
        Cy = (1 - r) * Syy + r * (np.trace(Syy) / dy) * np.eye(dy)
        Kx, Ky = _inv_sqrt(Cx, "X", r), _inv_sqrt(Cy, "Y", r)
        P, s, Qt = linalg.svd(Kx @ Sxy @ Ky)
        wx, wy = Kx @ P[:, :k], Ky @ Qt[:k].T
        signs = component_signs(wx, axis=0)  # y follows x: correlations stay positive
        wx, wy = wx * signs, wy * signs
        cov = np.einsum("ik,ij,jk->k", wx, Sxy, wy)
        vx = np.einsum("ik,ij,jk->k", wx, Sxx, wx)
        vy = np.einsum("ik,ij,jk->k", wy, Syy, wy)
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = np.where((vx > 0) & (vy > 0), cov / np.sqrt(vx * vy), 0.0)
        self.x_weights_, self.y_weights_ = wx, wy
        self.x_mean_, self.y_mean_ = mom.mean[:dx].copy(), mom.mean[dx:].copy()
        self.correlations_ = corr
        self.singular_values_ = s[:k]
        self.n_components_ = k
        self.n_features_y_ = dy
        return self

    # -------------------------------------------------------------- transform
    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def transform(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Any:
        """Canonical variates of X (and of Y when given), blockwise.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features_x)
        y : array-like, dask array or DataArray of shape (n_samples, n_features_y), optional

        Returns
        -------
        x_scores : same form as X, shape (n_samples, n_components_)
        y_scores : same form as Y, shape (n_samples, n_components_); only when Y is given
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim)
        xs = map_rows(
            rows,
            _project,
            n_out=self.n_components_,
            dtype=np.float64,
            new_dim="component",
            name="cca_x_scores",
            args=(self.x_weights_, self.x_mean_),
        )
        if y is None:
            return xs
        yr = self._y_rows(y, rows, sample_dim)
        if yr.shape[1] != self.n_features_y_:
            raise ValueError(
                f"Y has {yr.shape[1]} features, but CCA was fitted with "
                f"{self.n_features_y_} features in Y"
            )
        ys = map_rows(
            yr,
            _project,
            n_out=self.n_components_,
            dtype=np.float64,
            new_dim="component",
            name="cca_y_scores",
            args=(self.y_weights_, self.y_mean_),
        )
        return xs, ys

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit, then return ``(x_scores, y_scores)`` (as scikit-learn's CCA)."""
        return self.fit(X, y, **fit_params).transform(X, y, **fit_params)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
