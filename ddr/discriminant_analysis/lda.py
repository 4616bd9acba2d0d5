"""Linear discriminant analysis and the Fisher discriminant projection, from one pass of moments."""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ddr.base import FEATURE, map_rows
from ddr.discriminant_analysis._base import SHARED_CONSTRAINTS, DiscriminantBase, flip_columns
from ddr.generative.classifier import check_priors, class_log_prior
from ddr.stats._tiled import centred_product
from ddr.tags import DDRTags, n_components_limit, n_components_width

__all__ = ["LinearDiscriminantAnalysis", "lda_scores", "lda_transform"]


def lda_scores(
    X: np.ndarray, shift: np.ndarray, coef: np.ndarray, intercept: np.ndarray
) -> np.ndarray:
    """Per-class linear scores of a block, ``(X - shift) @ coef.T + intercept``, shape
    (n_block, k). Centring on the data's mean first keeps the scores exact whatever the
    offset of the data (``X @ coef.T`` with uncentred means cancels digits). Computed a
    cache-sized tile of rows at a time (:func:`~ddr.stats._tiled.centred_product`)."""
    return centred_product(X, coef.T, shift=shift, offset=-intercept)


def lda_transform(X: np.ndarray, shift: np.ndarray, scalings: np.ndarray) -> np.ndarray:
    """Fisher projection of a block, ``(X - shift) @ scalings``, shape (n_block, n_components),
    a tile of rows at a time."""
    return centred_product(X, scalings, shift=shift)


class LinearDiscriminantAnalysis(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, DiscriminantBase
):
    """LDA: Gaussian classes with a shared covariance, and the Fisher discriminant projection.

    The fit is one pass of :class:`ddr.stats.ClassMoments` (full), from which the class
    means, the within-class scatter ``S_W`` and the between-class scatter follow; the
    solvers work on d x d matrices on the client and reproduce scikit-learn's:

    - ``"svd"`` (default): the SVD of the centred, within-scaled data is the eigendecomposition
      of ``D^-1 S_W D^-1 / n`` (``D`` the within-class standard deviations), then an SVD of the
      (k x rank) between-class centres. No shrinkage.
    - ``"lsqr"``: ``coef_ = lstsq(covariance_, means_.T)``. Classification only (no transform).
    - ``"eigen"``: the generalised eigenproblem ``S_b v = lambda S_w v`` of the between- and
      within-class covariances.

    ``transform`` is the Fisher discriminant projection onto at most ``n_classes - 1``
    directions ordered by explained between-class variance (``explained_variance_ratio_``).

    Parameters
    ----------
    solver : {"svd", "lsqr", "eigen"}, default="svd"
    shrinkage : None, "auto" or float in [0, 1], default=None
        For "lsqr" and "eigen": shrink each class covariance (and the total covariance for
        "eigen") towards a scaled identity. "auto" is Ledoit-Wolf on standardised data, as in
        scikit-learn, computed from fourth cross-moments gathered in the same single pass.
    priors : array-like of shape (n_classes,), optional
        Renormalised with a warning if they do not sum to 1 (scikit-learn).
    n_components : int, optional
        Components kept by ``transform`` (at most ``min(n_classes - 1, n_features)``).
    store_covariance : bool, default=False
        With "svd", also compute ``covariance_`` (always computed by "lsqr"/"eigen").
    tol : float, default=1e-4
        "svd": singular values below ``tol`` are dropped (rank).

    Attributes
    ----------
    classes_, class_count_, priors_ : ndarray of shape (n_classes,)
    means_ : ndarray of shape (n_classes, n_features)
    coef_ : ndarray of shape (n_classes, n_features) or (1, n_features) for two classes
    intercept_ : ndarray of shape (n_classes,) or (1,)
    covariance_ : ndarray of shape (n_features, n_features)
        Prior-weighted sum of the (shrunk) class covariances.
    scalings_ : ndarray of shape (n_features, rank)
        Fisher directions (columns; signs fixed, largest entry positive).
    xbar_ : ndarray of shape (n_features,)
        Prior-weighted overall mean ("svd").
    explained_variance_ratio_ : ndarray of shape (n_components,)
    class_moments_ : ddr.stats.ClassMoments

    Notes
    -----
    Passes: ``fit`` reads the data once; ``predict`` and ``transform`` once each (one GEMM per
    block). With ``solver="lsqr"`` and a singular ``covariance_`` the minimum-norm solution
    depends on round-off, as in scikit-learn: use shrinkage.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "solver": [StrOptions({"svd", "lsqr", "eigen"})],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        **SHARED_CONSTRAINTS,
    }

    def __init__(
        self,
        solver: str = "svd",
        shrinkage: Any = None,
        priors: Any = None,
        n_components: int | None = None,
        store_covariance: bool = False,
        tol: float = 1e-4,
    ) -> None:
        self.solver = solver
        self.shrinkage = shrinkage
        self.priors = priors
        self.n_components = n_components
        self.store_covariance = store_covariance
        self.tol = tol

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.solve_params = frozenset(
            {"solver", "priors", "n_components", "store_covariance", "tol"}
        )
        assert tags.transformer is not None
        tags.transformer.width = n_components_width(self.n_components)
        tags.transformer.component_prefix = "LD"
        tags.transformer.n_components_limit = n_components_limit("n_features")
        tags.xarray_dims = {
            "means_": ("class", FEATURE),
            "priors_": ("class",),
            "class_count_": ("class",),
            "scalings_": (FEATURE, "component"),
            "covariance_": (FEATURE, FEATURE + "_2"),
        }
        # the Fisher directions whiten the within-class covariance: the data's inverse units
        tags.xarray_units = {
            "means_": 1,
            "priors_": 0,
            "class_count_": 0,
            "scalings_": -1,
            "covariance_": 2,
        }
        return tags

    def _priors(self) -> np.ndarray:
        return self.priors_

    # ----------------------------------------------------------------------- fit
    def _update(self) -> None:
        cm = self.class_moments_
        counts = cm.counts
        k, d = cm.n_classes, cm.n_features
        self.class_count_ = counts.copy()
        if self.priors is None:
            self.priors_ = counts / counts.sum()
        else:
            self.priors_ = check_priors(self.priors, k, renormalise="warn")
        seen = counts > 0
        n = counts.sum()
        if n <= seen.sum():
            raise ValueError(
                "The number of samples must be more than the number of classes "
                f"({n:g} samples, {int(seen.sum())} classes)."
            )
        max_components = min(k - 1, d)
        if self.n_components is None:
            self._max_components = max_components
        elif self.n_components > max_components:
            raise ValueError(
                "n_components cannot be larger than min(n_features, n_classes - 1); got "
                f"n_components={self.n_components} with {d} features and {k} classes."
            )
        else:
            self._max_components = int(self.n_components)
        self.means_ = np.where(seen[:, None], cm.means, 0.0)
        if self.solver == "svd":
            self._solve_svd(n)
        else:
            self._solve_covariance()
        if k == 2:  # binary case: scikit-learn keeps one row
            self.coef_ = (self.coef_[1] - self.coef_[0])[None, :]
            self.intercept_ = np.array([self.intercept_[1] - self.intercept_[0]])
        self._n_features_out = self._max_components

    def _pooled_covariance(self) -> np.ndarray:
        cov = np.zeros((self.n_features_in_,) * 2)
        for j in np.flatnonzero(self.class_count_ > 0):
            cov += self.priors_[j] * self._class_covariance(j, self.shrinkage)
        return cov

    def _solve_svd(self, n: float) -> None:
        cm = self.class_moments_
        seen = self.class_count_ > 0
        if self.store_covariance:
            self.covariance_ = self._pooled_covariance()
        elif hasattr(self, "covariance_"):
            del self.covariance_
        Sw = sum(m.scatter for m, s in zip(cm.moments, seen, strict=True) if s)
        std = np.sqrt(np.maximum(np.diagonal(Sw), 0.0) / n)
        std[std == 0] = 1.0
        # SVD of X = sqrt(1/n) Xc / std  <=>  eigh of X^T X = Sw / n / (std std^T)
        evals, V = linalg.eigh(Sw / n / np.outer(std, std))
        order = np.argsort(evals)[::-1]
        S = np.sqrt(np.maximum(evals[order], 0.0))
        V = flip_columns(V[:, order])
        rank = int(np.sum(S > self.tol))
        scalings = (V[:, :rank] / std[:, None]) / S[:rank]
        self.xbar_ = self.priors_ @ self.means_
        k_seen = int(seen.sum())
        fac = 1.0 if k_seen == 1 else 1.0 / (k_seen - 1)
        Xb = (np.sqrt(n * self.priors_ * fac) * (self.means_ - self.xbar_).T).T @ scalings
        _, S2, Vt2 = linalg.svd(Xb, full_matrices=False)
        total = np.sum(S2**2)
        ratio = S2**2 / total if total > 0 else np.zeros_like(S2)
        self.explained_variance_ratio_ = ratio[: self._max_components]
        rank2 = int(np.sum(S2 > self.tol * S2[0])) if S2.size and S2[0] > 0 else 0
        self.scalings_ = flip_columns(scalings @ Vt2.T[:, :rank2])
        coef = (self.means_ - self.xbar_) @ self.scalings_
        intercept = -0.5 * np.sum(coef**2, axis=1) + class_log_prior(self.priors_)
        self.coef_ = coef @ self.scalings_.T
        self._scores_ = (self.xbar_, self.coef_, intercept)
        self.intercept_ = intercept - self.xbar_ @ self.coef_.T

    def _solve_covariance(self) -> None:
        self.covariance_ = self._pooled_covariance()
        log_prior = class_log_prior(self.priors_)
        # scores are formed around the data's mean: (x - c) A (mu_k - c) - (mu_k - c) A
        # (mu_k - c) / 2 differs from scikit-learn's x A mu_k - mu_k A mu_k / 2 by a term
        # that is the same for every class (so probabilities and predictions are equal), and
        # cancels no digits when the data sit on a large offset
        seen = self.class_count_ > 0
        c = self.class_count_[seen] @ self.means_[seen] / self.class_count_[seen].sum()
        centred = self.means_ - c
        if self.solver == "lsqr":
            coef_c = linalg.lstsq(self.covariance_, centred.T)[0].T
            self.coef_ = linalg.lstsq(self.covariance_, self.means_.T)[0].T
            self.intercept_ = -0.5 * np.diag(self.means_ @ self.coef_.T) + log_prior
            self._scores_ = (c, coef_c, -0.5 * np.sum(centred * coef_c, axis=1) + log_prior)
            return
        Sw = self.covariance_
        Sb = self._total_covariance(self.shrinkage) - Sw
        try:
            evals, evecs = linalg.eigh(Sb, Sw)
        except linalg.LinAlgError as err:
            raise np.linalg.LinAlgError(
                "solver='eigen' needs a positive definite within-class covariance, and this "
                f"one is singular ({err}); use shrinkage (e.g. shrinkage='auto'), "
                "solver='svd', or remove constant / collinear features"
            ) from None
        ratio = np.sort(evals / np.sum(evals))[::-1]
        self.explained_variance_ratio_ = ratio[: self._max_components]
        self.scalings_ = flip_columns(evecs[:, np.argsort(evals)[::-1]])
        self.coef_ = (self.means_ @ self.scalings_) @ self.scalings_.T
        self.intercept_ = -0.5 * np.diag(self.means_ @ self.coef_.T) + log_prior
        coef_c = (centred @ self.scalings_) @ self.scalings_.T
        self._scores_ = (c, coef_c, -0.5 * np.sum(centred * coef_c, axis=1) + log_prior)

    # ------------------------------------------------------------------- predict
    def _jll(self) -> tuple[Any, tuple]:
        return lda_scores, self._scores_

    def decision_function(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """``X @ coef_.T + intercept_``; shape (n_samples,) for two classes.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray
        """
        check_is_fitted(self)
        if len(self.classes_) == 2:  # the log-odds: centred scores, exact on offset data
            return super().decision_function(X, sample_dim=sample_dim)
        # scikit-learn's per-class scores (its coef_ and intercept_; their class-independent
        # part grows with the data's offset)
        rows = self._predict_rows(X, sample_dim)
        zero = np.zeros(self.n_features_in_)
        return map_rows(
            rows, lda_scores, n_out=len(self.classes_), dtype=np.float64, new_dim="class",
            new_coords=self.classes_, name="decision", args=(zero, self.coef_, self.intercept_),
            check="output", method=f"{type(self).__name__}.decision_function",
        )  # fmt: skip

    def transform(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Project onto the Fisher discriminant directions.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, n_components)
            A DataArray has a ``component`` dim.
        """
        if self.solver == "lsqr":
            raise ValueError(
                "transform needs the discriminant directions, which the 'lsqr' solver does not "
                "compute; use solver='svd' or 'eigen'"
            )
        check_is_fitted(self)
        rows = self._predict_rows(X, sample_dim)
        m = self._max_components
        scalings = self.scalings_[:, :m]
        shift = self.xbar_ if self.solver == "svd" else np.zeros(self.n_features_in_)
        return map_rows(
            rows, lda_transform, n_out=scalings.shape[1], dtype=np.float64,
            new_dim="component", new_coords=np.arange(scalings.shape[1]), name="lda_transform",
            args=(shift, scalings), check="output", method=f"{type(self).__name__}.transform",
            units=self._output_units(0),  # unit within-class variance
        )  # fmt: skip

    def fit_transform(self, X: Any, y: Any = None, **params: Any) -> Any:
        """``fit(X, y).transform(X)`` (two passes over dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : array-like, dask array or DataArray of shape (n_samples,)
            Class labels.
        **params
            ``sample_dim``, passed to :meth:`fit` and :meth:`transform`.

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, n_components)
        """
        sample_dim = params.pop("sample_dim", None)
        return self.fit(X, y, sample_dim=sample_dim).transform(X, sample_dim=sample_dim)
