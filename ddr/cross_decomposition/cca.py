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

from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils._param_validation import Interval

from ddr.base import FEATURE
from ddr.cross_decomposition._views import TwoViewMixin
from ddr.linalg.signs import component_signs
from ddr.stats import Moments
from ddr.tags import DDRTags

__all__ = ["CCA"]


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


class CCA(TwoViewMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
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

    _score_name = "canonical variate"

    def __init__(self, n_components: int = 2, *, reg: float = 0.0) -> None:
        self.n_components = n_components
        self.reg = reg

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.solve_params = frozenset({"n_components", "reg"})
        tags.xarray_dims = {"x_weights_": (FEATURE, "component"), "x_mean_": (FEATURE,)}
        tags.checks.params = {"n_components": 1}  # one pair of directions of a one-column view
        return tags

    # ----------------------------------------------------------------- inputs
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "reg": [Interval(Real, 0, 1, closed="both")],
    }

    def _check_width(self, n_samples: int, dx: int, dy: int) -> int:
        k = int(self.n_components)
        if k > min(dx, dy):
            raise ValueError(
                f"CCA: n_components must be in [1, min(n_features_x, n_features_y)] = [1, "
                f"{min(dx, dy)}]; got n_components={k}"
            )
        return k

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

    def _projections(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        return (self.x_weights_, self.x_mean_), (self.y_weights_, self.y_mean_)
