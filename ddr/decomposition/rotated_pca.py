"""Rotated principal components (rotated EOF analysis): PCA, then varimax or promax.

The fit is :class:`ddr.PCA`'s (one pass of moments with the covariance solver), then a
rotation of the k leading loadings on the client (:mod:`ddr.linalg.rotation`), as xeofs's
``EOFRotator`` (Richman 1986) defines it:

- the loadings ``A = V diag(sqrt(e))`` (V the d x k principal axes, e their variances,
  ddof=1) are rotated, Kaiser-normalised, by varimax (``power=1``) or promax (``power > 1``):
  ``A_rot = A R``;
- the variance of a rotated mode is the sum of its squared rotated loadings,
  ``lambda_j = sum_i A_rot[i, j]^2``; the modes are sorted by it, decreasing;
- the rotated components are the unit columns ``A_rot[:, j] / sqrt(lambda_j)``, each signed
  so that its largest magnitude is positive (the scores follow);
- the scores are ``Z diag(e^{-1/2}) R^{-T} diag(sqrt(lambda))`` with ``Z`` PCA's scores
  (``(X - mean) V``): the whitened principal components, rotated by ``R^{-T}`` (``R``
  itself for varimax), scaled back to the rotated variances. Their variance (ddof=1) is
  ``lambda``, their correlation matrix ``phi = (R^T R)^{-1}`` (the identity for varimax),
  and ``scores @ components_ + mean_`` is PCA's reconstruction of X from k components.

``RotatedPCA.from_pca`` rotates an already fitted :class:`ddr.PCA` without reading data.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ddr.base import FEATURE, FitPlan, fit_context
from ddr.decomposition._feature_weights import FeatureWeighted
from ddr.decomposition._pca_model import (
    MISSING_HINT,
    check_complete,
    inverse_block,
    transform_block,
)
from ddr.decomposition.pca import PCA
from ddr.families import Blockwise, FitThenTransform, LinearProjection, out_dtype
from ddr.linalg.rotation import Rotation, orthomax, promax
from ddr.linalg.signs import component_signs
from ddr.stats._input import Rows
from ddr.tags import DDRTags, get_ddr_tags, rank_limit

__all__ = ["RotatedPCA"]

#: what a fit remembers of its input (set by ``DDRMixin._rows``): ``from_pca`` takes the
#: PCA's, so the rotated model reads the same inputs
_INPUT_ATTRS = (
    "n_features_in_",
    "feature_names_in_",
    "feature_dim_",
    "feature_coords_",
    "feature_layout_",
    "sample_dims_",
    "feature_units_",
)
_SOLVERS = ("auto", "covariance_eigh", "randomized", "full", "arpack")
#: a principal variance at most this times the largest (times n_features) is round-off:
#: the component is outside the data's span and its scores cannot be whitened
_RANK_TOL = float(np.finfo(np.float64).eps)


class RotatedPCA(FeatureWeighted, FitThenTransform, LinearProjection, BaseEstimator):
    """Principal components rotated by varimax or promax (rotated EOF analysis).

    Parameters
    ----------
    n_components : int, default=2
        The k principal components that are rotated, ``1 <= k <= min(n_samples,
        n_features)``. Rotating a single component changes nothing.
    power : float, default=1
        Promax's power (at least 1): 1 is varimax (an orthogonal rotation, uncorrelated
        scores); 2 to 4 give promax (oblique, correlated scores), xeofs's ``power``.
    max_iter : int, default=1000
        Largest number of iterations of the varimax rotation.
    tol : float, default=1e-8
        Varimax stops when the sum of the singular values of its gradient changes by less
        than ``tol`` times itself (xeofs's ``rtol``).
    svd_solver : {"auto", "covariance_eigh", "randomized", "full", "arpack"}, default="auto"
        The solver of the principal components, as :class:`ddr.PCA`'s (``"covariance_eigh"``:
        one pass and d x d memory; ``"randomized"`` for wide data).
    iterated_power : int, default=3
        :class:`ddr.PCA`'s, for the randomized solver.
    n_oversamples : int, default=10
        :class:`ddr.PCA`'s, for the randomized solver.
    random_state : int, RandomState or None, default=None
        :class:`ddr.PCA`'s, for the randomized and ARPACK solvers.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The rotated components (unit rows; oblique for promax), by decreasing
        ``explained_variance_``, the largest magnitude of each positive.
    explained_variance_ : ndarray of shape (n_components,)
        The variance of each rotated mode: the sum of its squared rotated loadings (the
        variance, ddof=1, of its scores). They sum to PCA's for varimax.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the total variance.
    singular_values_ : ndarray of shape (n_components,)
        xeofs's "pseudo" norms, ``sqrt(explained_variance_ * (n_samples_ - 1))``.
    rotation_matrix_ : ndarray of shape (n_components, n_components)
        ``R``: the rotated loadings ``components_.T * sqrt(explained_variance_)`` equal
        ``pca_.components_.T * sqrt(pca_.explained_variance_) @ R`` (columns in this
        model's order and signs).
    phi_ : ndarray of shape (n_components, n_components)
        The correlation matrix of the rotated scores, ``(R^T R)^{-1}``: the identity for
        varimax.
    mean_ : ndarray of shape (n_features,)
    feature_weights_ : ndarray of shape (n_features,) or None
        The ``feature_weights`` of the fit (``pca_``'s), or None.
    pca_ : PCA
        The principal components that were rotated.
    n_components_ : int
    n_samples_ : int or float
        The rows fitted (the sum of ``sample_weight`` when given).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has string feature names.
    n_iter_ : int
        Iterations of the varimax rotation.
    n_passes_ : int
        Passes over the data (``pca_``'s: 1 with the covariance solver; 0 for
        :meth:`from_pca`).

    Notes
    -----
    Passes over the data: those of :class:`ddr.PCA` with the same solver (1 with the
    covariance solver); the rotation is d x k and k x k work on the client.
    :meth:`from_pca` reads no data.

    ``transform`` gives xeofs's rotated scores: with ``Z = pca_.transform(X)``,
    ``Z / sqrt(pca_.explained_variance_) @ inv(rotation_matrix_).T *
    sqrt(explained_variance_)``, one blockwise product ``(X - mean_) @ T``.
    ``inverse_transform`` maps scores back through ``components_``: ``scores @ components_
    + mean_``, PCA's reconstruction from k components.

    Differences from xeofs's ``EOFRotator``: its ``rotation_matrix`` and ``phi_matrix``
    keep the unsorted order of the modes and the signs of its unrotated EOFs; here they are
    sorted and signed as ``components_``. xeofs refuses to rotate a single mode (here: the
    identity). Kaiser normalisation divides by the row norms (xeofs adds machine epsilon to
    them, a relative change of ``eps / norm``).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "power": [Interval(Real, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "svd_solver": [StrOptions(set(_SOLVERS))],
        "iterated_power": [Interval(Integral, 0, None, closed="left")],
        "n_oversamples": [Interval(Integral, 0, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_components: int = 2,
        *,
        power: float = 1,
        max_iter: int = 1000,
        tol: float = 1e-8,
        svd_solver: str = "auto",
        iterated_power: int = 3,
        n_oversamples: int = 10,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.power = power
        self.max_iter = max_iter
        self.tol = tol
        self.svd_solver = svd_solver
        self.iterated_power = iterated_power
        self.n_oversamples = n_oversamples
        self.random_state = random_state

    # ------------------------------------------------------------------- tags
    def _unrotated(self) -> PCA:
        """The PCA whose components are rotated (unfitted)."""
        return PCA(
            n_components=self.n_components,
            svd_solver=self.svd_solver,
            iterated_power=self.iterated_power,
            n_oversamples=self.n_oversamples,
            random_state=self.random_state,
        )

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        pca = get_ddr_tags(self._unrotated())
        tags.fit.passes = pca.fit.passes
        tags.fit.statistics = pca.fit.statistics
        tags.fit.loads_data = pca.fit.loads_data
        tags.checks.expected_failed_checks = dict(pca.checks.expected_failed_checks)
        assert tags.transformer is not None
        tags.transformer.component_prefix = "RC"
        tags.transformer.n_components_limit = rank_limit
        tags.translation_invariant = "transform"
        tags.xarray_dims = dict(pca.xarray_dims)  # the same attributes, rotated
        tags.xarray_units = dict(pca.xarray_units)  # unit rows; variances of X_w's scores
        for name in ("explained_variance_", "singular_values_"):
            tags.xarray_units[name] = self._weighted_units(pca.xarray_units[name] or 0)
        if self._weights() is not None:
            tags.xarray_dims["feature_weights_"] = (FEATURE,)
            tags.xarray_units["feature_weights_"] = None  # their units are the user's
        return tags

    # -------------------------------------------------------------------- fit
    def _check_k(self, X: Any, sample_dim: Hashable | None) -> None:
        """Validate X as this estimator's input, and k against its shape."""
        rows = self._rows(X, reset=True, sample_dim=sample_dim, allow_nan=True)
        n, d = rows.shape
        k = int(self.n_components)
        limit = d if np.isnan(n) else min(int(n), d)
        if k > limit:
            shown = "n_samples=unknown" if np.isnan(n) else f"n_samples={int(n)}"
            raise ValueError(
                f"RotatedPCA: n_components={k} must be at most min({shown}, n_features={d}) "
                f"= {limit}"
            )

    @fit_context
    def fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        feature_weights: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> RotatedPCA:
        """Fit the principal components of X and rotate them.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            Complete data (no NaN); dask chunks must hold whole rows.
        y : ignored
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Non-negative frequency weights, as :meth:`ddr.PCA.fit` takes them (covariance
            solver).
        feature_weights : array-like or DataArray of shape (n_features,), optional
            Non-negative feature weights (e.g. ``sqrt(cos(lat))``), as :meth:`ddr.PCA.fit`
            takes them: the principal components of ``(X - mean) * feature_weights`` are
            rotated (xeofs's rotation of a weighted EOF analysis); ``components_`` are in
            the weighted space.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        self
        """
        self._check_k(X, sample_dim)
        pca = self._unrotated().fit(
            X, sample_weight=sample_weight, feature_weights=feature_weights, sample_dim=sample_dim
        )
        return self._rotate(pca, passes=pca.n_passes_)

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan | None:
        """PCA's one pass of moments (covariance solver), the rotation in its solve."""
        self._check_k(X, fit_params.get("sample_dim"))
        plan = self._unrotated()._fit_plan(X, y, **fit_params)
        if plan is None:
            return None
        solve = plan.finish
        return dataclasses.replace(plan, finish=lambda value: self._rotate(solve(value), passes=1))

    @classmethod
    def from_pca(
        cls, pca: PCA, *, power: float = 1, max_iter: int = 1000, tol: float = 1e-8
    ) -> RotatedPCA:
        """Rotate the components of a fitted :class:`ddr.PCA`, reading no data.

        Parameters
        ----------
        pca : PCA
            Fitted; all its ``n_components_`` components are rotated.
        power, max_iter, tol
            As the constructor's.

        Returns
        -------
        RotatedPCA
            Fitted (``n_passes_ = 0``), with ``pca``'s solver parameters; ``pca_`` is a copy
            of ``pca``.

        Raises
        ------
        TypeError
            When ``pca`` is not a ``ddr.PCA``.
        sklearn.exceptions.NotFittedError
            When it is not fitted.
        """
        if not isinstance(pca, PCA):
            raise TypeError(
                f"RotatedPCA.from_pca rotates a fitted ddr.PCA; got {type(pca).__name__}"
            )
        check_is_fitted(pca)
        est = cls(
            n_components=int(pca.n_components_),
            power=power,
            max_iter=max_iter,
            tol=tol,
            svd_solver=pca.solver_,
            iterated_power=pca._iterated_power(),
            n_oversamples=pca.n_oversamples,
            random_state=copy.deepcopy(pca.random_state),
        )
        est._validate_params()
        for attr in _INPUT_ATTRS:
            if hasattr(pca, attr):
                setattr(est, attr, copy.deepcopy(getattr(pca, attr)))
        return est._rotate(copy.deepcopy(pca), passes=0)

    def _rotate(self, pca: PCA, *, passes: int) -> RotatedPCA:
        """Rotate ``pca``'s loadings and set the fitted attributes (client-side, k x k)."""
        ev = np.asarray(pca.explained_variance_, dtype=np.float64)
        k, d = ev.size, pca.components_.shape[1]
        small = np.flatnonzero(ev <= ev.max(initial=0.0) * d * _RANK_TOL)
        if small.size:
            raise ValueError(
                f"RotatedPCA: principal component(s) {(small + 1).tolist()} of the "
                f"n_components={k} have no variance (the data have rank below {k}); their "
                "scores cannot be scaled for the rotation. Rotate fewer components"
            )
        loadings = pca.components_.T * np.sqrt(ev)
        if self.power == 1:
            rot = orthomax(loadings, gamma=1.0, max_iter=self.max_iter, tol=self.tol)
        else:
            rot = promax(loadings, power=self.power, max_iter=self.max_iter, tol=self.tol)
        if not rot.converged:
            warnings.warn(
                f"RotatedPCA: the varimax rotation did not converge in max_iter="
                f"{self.max_iter} iterations to tol={self.tol:g}; increase max_iter",
                ConvergenceWarning,
                stacklevel=3,
            )
        self._set(pca, rot, passes)
        return self

    def _set(self, pca: PCA, rot: Rotation, passes: int) -> None:
        var = np.einsum("ij,ij->j", rot.loadings, rot.loadings)
        order = np.argsort(-var, kind="stable")
        var = var[order]
        components = rot.loadings[:, order] / np.sqrt(var)
        signs = component_signs(components, axis=0)
        total = _total_variance(pca)
        self.components_ = np.ascontiguousarray((components * signs).T)
        self.explained_variance_ = var
        self.explained_variance_ratio_ = var / total if total > 0 else np.zeros_like(var)
        self.singular_values_ = np.sqrt(var * (pca.n_samples_ - 1))
        self.rotation_matrix_ = rot.rotation[:, order] * signs
        self.phi_ = rot.phi[np.ix_(order, order)] * np.outer(signs, signs)
        self.mean_ = pca.mean_
        self.feature_weights_ = getattr(pca, "feature_weights_", None)
        self.n_samples_ = pca.n_samples_
        self.n_components_ = int(var.size)
        self.n_features_in_ = pca.n_features_in_
        self.n_iter_ = rot.n_iter
        self.n_passes_ = passes
        self.pca_ = pca
        for attr in _INPUT_ATTRS:  # a fit's input, as the PCA read it
            if hasattr(pca, attr):
                setattr(self, attr, getattr(pca, attr))

    # ------------------------------------------------------------- transforms
    def _score_map(self) -> np.ndarray:
        """``T`` (n_features, n_components): the scores are ``(X - mean_) @ T``."""
        pca = self.pca_
        R = self.rotation_matrix_
        inv_t = R if self.power == 1 else linalg.inv(R).T  # orthogonal: R^{-T} = R
        whiten = pca.components_.T / np.sqrt(pca.explained_variance_)
        return (whiten @ inv_t) * np.sqrt(self.explained_variance_)

    def _transform_rows(self, X: Any, sample_dim: Hashable | None) -> Rows:
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        if not rows.is_lazy:
            check_complete(rows.data)
        return rows

    def _projection(self, rows: Rows) -> Blockwise:
        """The rotated scores ``((X - mean_) * feature_weights_) @ T``, in the input's float
        dtype."""
        dtype = out_dtype(rows.data.dtype)
        args = (self.mean_, self._weighted_projection(self._score_map().T), None, dtype)
        units = self._weighted_units(1)
        return Blockwise(
            transform_block, args, dtype, "rotated-pca-transform", hint=MISSING_HINT, units=units
        )

    def _reconstruction(self, rows: Rows) -> Blockwise:
        """``scores @ (components_ / feature_weights_) + mean_`` (NaN where a weight is 0)."""
        dtype = out_dtype(rows.data.dtype)
        args = (self.mean_, self._unweighted(self.components_), None, dtype)
        check = self._reconstruction_check()
        return Blockwise(
            inverse_block, args, dtype, "rotated-pca-inverse-transform", check=check, units=1
        )

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _total_variance(pca: PCA) -> float:
    """The total variance (the trace of the covariance) PCA's ratios are fractions of."""
    ev, ratio = pca.explained_variance_, pca.explained_variance_ratio_
    j = int(np.argmax(ratio)) if ratio.size else 0
    return float(ev[j] / ratio[j]) if ratio.size and ratio[j] > 0 else 0.0
