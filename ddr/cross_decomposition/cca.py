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

The likelihood (``score_samples``, ``score``) is that of probabilistic CCA (Bach and Jordan,
2005): a latent ``z ~ N(0, I_k)`` shared by both views, ``x = x_mean + Wx z + e_x`` and
``y = y_mean + Wy z + e_y`` with view-wise Gaussian noise. Its maximum-likelihood fit is the
Gaussian on ``[x | y]`` whose view covariances are ``Cx`` and ``Cy`` and whose
cross-covariance is ``Cx U diag(s) V^T Cy`` (``U``, ``V`` the canonical directions, ``s``
the canonical correlations): with all ``min(d_x, d_y)`` pairs at ``reg=0`` it is the sample
covariance itself. In the whitened coordinates each pair of directions is a 2 x 2 block
``[[1, s], [s, 1]]`` and every other direction has unit variance, so the log-density of a
row needs only its canonical variates and its Mahalanobis norms in each view:

    -2 log p = (d_x + d_y) log(2 pi) + log|Cx| + log|Cy| + sum_j log(1 - s_j^2)
               + |x - x_mean|^2_{Cx^-1} + |y - y_mean|^2_{Cy^-1}
               + sum_j (s_j^2 (a_j^2 + b_j^2) - 2 s_j a_j b_j) / (1 - s_j^2),

with ``a_j``, ``b_j`` the j-th canonical variates of the row.
"""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils._param_validation import Interval

from ddr.base import FEATURE, map_rows
from ddr.cross_decomposition._views import Y_FEATURE, TwoViewMixin
from ddr.linalg.signs import component_signs
from ddr.stats import Moments
from ddr.stats._input import is_dask, is_xarray
from ddr.tags import DDRTags

__all__ = ["CCA"]

_LOG_2PI = float(np.log(2 * np.pi))


def _marginal_block(
    X: np.ndarray, mean: np.ndarray, whiten: np.ndarray, const: float
) -> np.ndarray:
    """Log-density of each row of a block under ``N(mean, C)``, ``whiten`` = ``C^{-1/2}``."""
    Z = (np.asarray(X, dtype=np.float64) - mean) @ whiten
    return -0.5 * np.einsum("ij,ij->i", Z, Z) - const


def _log_likelihood_block(
    XY: np.ndarray,
    dx: int,
    mean: np.ndarray,
    whiten_x: np.ndarray,
    whiten_y: np.ndarray,
    wx: np.ndarray,
    wy: np.ndarray,
    s: np.ndarray,
    const: float,
) -> np.ndarray:
    """Log-density of each row ``[x | y]`` of a block under probabilistic CCA (module notes)."""
    R = np.asarray(XY, dtype=np.float64) - mean
    Rx, Ry = R[:, :dx], R[:, dx:]
    Zx, Zy = Rx @ whiten_x, Ry @ whiten_y
    quad = np.einsum("ij,ij->i", Zx, Zx) + np.einsum("ij,ij->i", Zy, Zy)
    a, b = Rx @ wx, Ry @ wy
    quad += ((s**2) * (a * a + b * b) - 2 * s * a * b) @ (1.0 / (1.0 - s**2))
    return -0.5 * quad - const


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
    x_covariance_, y_covariance_ : ndarray of shape (n_features_x, n_features_x) and \
(n_features_y, n_features_y)
        The view covariances ``Cx``, ``Cy`` of the model (ddof=1; regularised with ``reg``);
        :meth:`score_samples` reads them.
    n_components_, n_features_in_, n_features_y_ : int
    fit_statistics_ : ddr.stats.Moments
        The joint moments of ``[x | y]`` the model was solved from: what :meth:`partial_fit`
        merges a batch into and :func:`ddr.merge_fits` merges.

    Notes
    -----
    One pass over the rows (X and Y are read once each, in the same tasks); everything else
    is (d_x + d_y)-sized. Signs: each x direction's largest-magnitude weight is positive and
    the y direction follows so that the correlation is non-negative. X and Y must have the
    same rows; dask inputs are aligned to the row chunks of X.

    :meth:`score_samples` and :meth:`score` are the log-likelihood of probabilistic CCA
    (Bach and Jordan, 2005; module notes), of the pairs ``(x, y)`` (with ``reg > 0``, while
    the singular values stay below 1, when the model is still a Gaussian): scikit-learn's
    ``CCA.score`` is the R^2 of its ``predict`` instead (a regression of Y on X from its
    iterative PLS fit, which this closed-form CCA does not have).
    """

    _score_name = "canonical variate"

    def __init__(self, n_components: int = 2, *, reg: float = 0.0) -> None:
        self.n_components = n_components
        self.reg = reg

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.solve_params = frozenset({"n_components", "reg"})
        tags.xarray_dims = {
            "x_weights_": (FEATURE, "component"),
            "x_mean_": (FEATURE,),
            "x_covariance_": (FEATURE, FEATURE + "_2"),
            "y_weights_": (Y_FEATURE, "component"),
            "y_mean_": (Y_FEATURE,),
            "y_covariance_": (Y_FEATURE, Y_FEATURE + "_2"),
            "correlations_": ("component",),
            "singular_values_": ("component",),
        }
        # each view's in its own units (Y's attributes in Y's): the weights map a view to
        # variates of unit variance, so they are in the view's inverse units
        tags.xarray_units = {
            "x_weights_": -1,
            "x_mean_": 1,
            "x_covariance_": 2,
            "y_weights_": -1,
            "y_mean_": 1,
            "y_covariance_": 2,
            "correlations_": 0,
            "singular_values_": 0,
        }
        tags.checks.params = {"n_components": 1}  # one pair of directions of a one-column view
        if not self.reg:
            tags.checks.expected_failed_checks = {
                "check_sample_weight_equivalence_on_dense_data": (
                    "the check's rows leave the covariance of X singular (rank 8 < 30 "
                    "features), which CCA refuses at reg=0 (tests/test_sample_weight.py checks "
                    "the weights on data of full rank)"
                )
            }
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
        self.x_covariance_, self.y_covariance_ = Cx, Cy
        return self

    # ------------------------------------------------------------- likelihood
    def score_samples(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Any:
        """Log-likelihood of each pair ``(x, y)`` under probabilistic CCA (blockwise); of
        each ``x`` when Y is not given.

        The Gaussian on ``[x | y]`` that the fitted directions define (module notes: view
        covariances ``x_covariance_``, ``y_covariance_``, cross-covariance through the
        ``n_components_`` canonical pairs). With every pair (``n_components = min(d_x,
        d_y)``) and ``reg=0`` it is the Gaussian of the sample mean and covariance (ddof=1).
        Without Y, the model's marginal density of X: ``N(x_mean_, x_covariance_)``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features_x)
        y : array-like, dask array or DataArray of shape (n_samples, n_features_y), optional
            The second view of the same rows.
        sample_dim : hashable, optional
            The sample dim of DataArray inputs.

        Returns
        -------
        ll : same kind as X, shape (n_samples,)
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim)
        if y is None:
            lam, U = linalg.eigh(self.x_covariance_)
            const = 0.5 * (self.n_features_in_ * _LOG_2PI + float(np.log(lam).sum()))
            return map_rows(
                rows,
                _marginal_block,
                n_out=None,
                dtype=np.float64,
                name="cca-score-samples",
                args=(self.x_mean_, U / np.sqrt(lam), const),
                check="output",
                method="CCA.score_samples",
            )
        yr = self._y_rows(y, rows, sample_dim)
        dx, dy = self.n_features_in_, self.n_features_y_
        if yr.shape[1] != dy:
            raise ValueError(
                f"Y has {yr.shape[1]} features, but CCA was fitted with {dy} features in Y"
            )
        s = np.asarray(self.singular_values_, dtype=np.float64)
        if np.any(s >= 1.0 - 1e-12) and float(self.reg) == 0.0:
            raise ValueError(
                "CCA.score_samples: a canonical correlation is 1 (singular values "
                f"{np.round(s, 12).tolist()}): the two views are exactly linearly related along "
                "it and the model's density is degenerate; fit with fewer components"
            )
        if np.any(s >= 1.0 - 1e-12):
            raise ValueError(
                f"CCA.score_samples: with reg={self.reg} the singular values "
                f"{np.round(s, 6).tolist()} reach 1: the regularised view covariances are too "
                "small for the cross-covariance of these directions and define no Gaussian. "
                "Use a smaller reg (or fewer components) to score"
            )
        (wx, mx), (wy, my) = self._projections()
        lam_x, U_x = linalg.eigh(self.x_covariance_)
        lam_y, U_y = linalg.eigh(self.y_covariance_)
        logdet = float(np.log(lam_x).sum() + np.log(lam_y).sum() + np.log1p(-(s**2)).sum())
        const = 0.5 * ((dx + dy) * _LOG_2PI + logdet)
        joint = rows.with_data(self._joint(rows, yr))
        return map_rows(
            joint,
            _log_likelihood_block,
            n_out=None,
            dtype=np.float64,
            name="cca-score-samples",
            args=(
                dx,
                np.concatenate([mx, my]),
                U_x / np.sqrt(lam_x),
                U_y / np.sqrt(lam_y),
                wx,
                wy,
                s,
                const,
            ),
            check="output",
            method="CCA.score_samples",
        )

    def score(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> float:
        """Mean log-likelihood of the pairs ``(x, y)`` under probabilistic CCA (of the rows of
        X alone when Y is not given; one pass over dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features_x)
        y : array-like, dask array or DataArray of shape (n_samples, n_features_y), optional
        sample_dim : hashable, optional
            The sample dim of DataArray inputs.

        Returns
        -------
        float
            The mean of :meth:`score_samples` (not scikit-learn's R^2 of a regression: see
            the class notes).
        """
        ll = self.score_samples(X, y, sample_dim=sample_dim)
        ll = ll.data if is_xarray(ll) else ll
        return float(ll.mean().compute() if is_dask(ll) else np.mean(ll))

    def _projections(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        return (self.x_weights_, self.x_mean_), (self.y_weights_, self.y_mean_)

    def _score_units(self) -> int:
        return 0  # canonical variates: unit variance at reg=0, dimensionless at any reg
