"""PLS-SVD (maximum covariance) from one pass of the joint moments of (X, Y).

Seed 004's *maximum covariance*: the directions ``u, v`` that maximise ``u^T Sxy v`` with
``|u| = |v| = 1``, i.e. CCA with the variance terms dropped. They are the singular vectors of
the cross-covariance ``Sxy`` of the centred (and, with ``scale=True``, standardised) views:
scikit-learn's ``PLSSVD``, which takes the SVD of ``X^T Y`` of the whole data held in memory;
here ``Sxy`` comes from one pass of :class:`~ddr.stats.Moments` of the rows ``[x | y]``.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils._param_validation import Interval

from ddr.base import FEATURE
from ddr.cross_decomposition._views import Y_FEATURE, TwoViewMixin
from ddr.linalg.signs import component_signs
from ddr.stats import Moments
from ddr.tags import DDRTags

__all__ = ["PLSSVD"]


class PLSSVD(TwoViewMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Partial least squares SVD: the directions of maximum covariance of two views, in one pass.

    Parameters
    ----------
    n_components : int, default=2
        Number of pairs of directions, at most ``min(n_samples, n_features_x,
        n_features_y)`` (the rank of the cross-covariance).
    scale : bool, default=True
        Standardise each feature of both views (sample standard deviation, ddof=1; a
        constant feature is left unscaled) before the SVD, as scikit-learn does.

    Attributes
    ----------
    x_weights_ : ndarray of shape (n_features_x, n_components)
        Left singular vectors of the cross-covariance (unit columns; the largest entry of
        each positive, scikit-learn's ``svd_flip``). Scores are ``((X - x_mean_) / x_std_)
        @ x_weights_``.
    y_weights_ : ndarray of shape (n_features_y, n_components)
        Right singular vectors.
    x_mean_, y_mean_, x_std_, y_std_ : ndarray
        Means and scales of the two views (scales 1 with ``scale=False``).
    n_components_, n_features_in_, n_features_y_ : int
    fit_statistics_ : ddr.stats.Moments
        The joint moments of ``[x | y]`` the model was solved from: what :meth:`partial_fit`
        merges a batch into and :func:`ddr.merge_fits` merges.

    Notes
    -----
    One pass over the rows (X and Y read once each, in the same tasks); the SVD is of a
    ``n_features_x x n_features_y`` matrix on the client. Equal to scikit-learn's ``PLSSVD``
    (tested to 1e-10).
    """

    _score_name = "PLS score"

    def __init__(self, n_components: int = 2, *, scale: bool = True) -> None:
        self.n_components = n_components
        self.scale = scale

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.solve_params = frozenset({"n_components", "scale"})
        tags.xarray_dims = {
            "x_weights_": (FEATURE, "component"),
            "x_mean_": (FEATURE,),
            "x_std_": (FEATURE,),
            "y_weights_": (Y_FEATURE, "component"),
            "y_mean_": (Y_FEATURE,),
            "y_std_": (Y_FEATURE,),
        }
        # unit vectors; each view's mean and scale in its own units (1s with scale=False)
        std = 1 if self.scale else 0
        tags.xarray_units = {
            "x_weights_": 0,
            "x_mean_": 1,
            "x_std_": std,
            "y_weights_": 0,
            "y_mean_": 1,
            "y_std_": std,
        }
        tags.checks.params = {"n_components": 1}  # one pair of directions of a one-column view
        return tags

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "scale": ["boolean"],
    }

    def _check_width(self, n_samples: int, dx: int, dy: int) -> int:
        k, bound = int(self.n_components), min(n_samples, dx, dy)
        if k > bound:
            raise ValueError(
                f"PLSSVD: n_components must be at most min(n_samples, n_features_x, "
                f"n_features_y) = min({n_samples}, {dx}, {dy}) = {bound} (the rank of the "
                f"cross-covariance); got n_components={k}"
            )
        return k

    def _finish(self, mom: Moments, dx: int, dy: int, k: int) -> PLSSVD:
        S = mom.covariance(ddof=1)
        if self.scale:
            std = np.sqrt(np.diag(S))
            std[std == 0.0] = 1.0
        else:
            std = np.ones(dx + dy)
        C = S[:dx, dx:] / np.outer(std[:dx], std[dx:])
        U, _, Vt = linalg.svd(C, full_matrices=False)
        U, V = U[:, :k], Vt[:k].T
        signs = component_signs(U, axis=0)  # scikit-learn's svd_flip: V follows U
        self.x_weights_, self.y_weights_ = U * signs, V * signs
        self.x_mean_, self.y_mean_ = mom.mean[:dx].copy(), mom.mean[dx:].copy()
        self.x_std_, self.y_std_ = std[:dx].copy(), std[dx:].copy()
        self.n_components_ = k
        self.n_features_y_ = dy
        return self

    def _projections(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        return (
            (self.x_weights_ / self.x_std_[:, None], self.x_mean_),
            (self.y_weights_ / self.y_std_[:, None], self.y_mean_),
        )

    def _score_units(self) -> int:
        return 0 if self.scale else 1  # of the standardised views, or of the views
