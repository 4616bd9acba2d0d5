"""Truncated SVD (latent semantic analysis) of arrays larger than memory, dense or sparse.

No centring: ``X ~ U S V^T`` of the data as given, which keeps sparse word counts sparse
(centring would fill them in). The solver is ddr's randomized block Krylov iteration
(:func:`ddr.linalg.randomized.randomized_scatter_eigh` with ``centre=False``) on the Gram
matrix ``X^T X``, applied to a d x l basis per pass by :class:`ddr.stats.GramProduct`: two
sparse products per CSR row block (O(nnz l)), or two GEMMs per dense one. ``X^T X`` and the
n x l sketch are never formed. The first pass also gathers the column moments that the
explained-variance ratios need. ``algorithm="arpack"`` is scikit-learn's other solver, ARPACK
(``scipy.sparse.linalg.svds``) on the data held in memory.
"""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.sparse
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE, FitPlan, MergedFitMixin, check_some_weight, fit_context
from ddr.decomposition._feature_weights import (
    FeatureWeighted,
    fit_weights,
    plan_with_weights,
    scale_columns,
    weighted_gram,
    weighted_scatter_eigh,
    weighted_statistic,
)
from ddr.decomposition._pca_solvers import svd_flip_rows
from ddr.families import Blockwise, FitThenTransform, LinearProjection, out_dtype
from ddr.linalg.randomized import (
    RandomizedEigh,
    initial_basis,
    lazy_pass,
    randomized_passes,
    randomized_scatter_eigh,
    single_pass_eigh,
)
from ddr.stats._checks import check_weights
from ddr.stats._input import Rows, align_to_rows, is_dask
from ddr.stats._tiled import centred_product
from ddr.tags import DDRTags, rank_limit

__all__ = ["TruncatedSVD"]


def _project_block(X: Any, components_t: np.ndarray, dtype: Any) -> np.ndarray:
    """``X @ components_.T`` of a dense or CSR block, in float64, returned as ``dtype`` (a
    dense block a cache-sized tile of rows at a time: no float64 copy of the block)."""
    if scipy.sparse.issparse(X):
        out = np.asarray(scipy.sparse.csr_matrix(X, dtype=np.float64) @ components_t)
        return out.astype(dtype, copy=False)
    return centred_product(np.asarray(X), components_t, dtype=dtype)


def _reconstruct_block(Z: np.ndarray, components: np.ndarray, dtype: Any) -> np.ndarray:
    return (np.asarray(Z, dtype=np.float64) @ components).astype(dtype, copy=False)


def _arpack(
    rows: Rows,
    k: int,
    tol: float,
    random_state: Any,
    weights: np.ndarray | None,
    feature_weights: np.ndarray | None = None,
) -> RandomizedEigh:
    """The top ``k`` singular triplets of the data loaded into memory by ARPACK, started as
    scikit-learn's (``uniform(-1, 1)`` from ``random_state``), as the eigenpairs of ``X^T X``
    with the column moments; with frequency weights, of ``diag(sqrt(w)) X`` (whose Gram
    matrix is ``X^T diag(w) X``); with feature weights, of ``X diag(feature_weights)`` (the
    column means stay the data's own, the trace is the weighted data's)."""
    fw = np.ones(rows.shape[1]) if feature_weights is None else feature_weights
    from scipy.sparse.linalg import svds
    from sklearn.utils.sparsefuncs import mean_variance_axis

    X = rows.data.compute() if is_dask(rows.data) else rows.data
    if scipy.sparse.issparse(X):
        X = scipy.sparse.csr_matrix(X, dtype=np.float64)
        mean, var = mean_variance_axis(X, axis=0, weights=weights)
        count = float(X.shape[0] if weights is None else weights.sum())
        trace = float((var * fw**2).sum()) * count
        if weights is not None:
            X = scipy.sparse.diags(np.sqrt(weights)) @ X
    else:
        X = np.asarray(X, dtype=np.float64)
        count = float(X.shape[0] if weights is None else weights.sum())
        mean = np.average(X, axis=0, weights=weights)
        sq = ((X - mean) * fw) ** 2
        trace = float(sq.sum() if weights is None else weights @ sq.sum(axis=1))
        if weights is not None:
            X = X * np.sqrt(weights)[:, None]
    if feature_weights is not None:
        X = scale_columns(X, feature_weights)
    v0 = check_random_state(random_state).uniform(-1, 1, min(X.shape))
    _, s, vt = svds(X, k=k, tol=tol, v0=v0)
    order = np.argsort(s)[::-1]
    return RandomizedEigh(count, mean, trace, s[order] ** 2, vt[order].T, 1)


class TruncatedSVD(
    FeatureWeighted, MergedFitMixin, FitThenTransform, LinearProjection, BaseEstimator
):
    """Truncated SVD without centring (LSA), randomized, over dense or sparse row blocks.

    Parameters
    ----------
    n_components : int, default=2
        Number of singular triplets, at most ``min(n_samples, n_features)`` (below it with
        ``algorithm="arpack"``).
    algorithm : {"randomized", "arpack"}, default="randomized"
        ``"randomized"``: ddr's randomized block Krylov iteration over the row blocks,
        ``n_iter + 1`` passes. ``"arpack"``: ARPACK (``scipy.sparse.linalg.svds``) on the
        data loaded into memory (one read; in-memory data), as scikit-learn's.
    n_iter : int, default=5
        Power (block Krylov) iterations, each re-orthonormalised against all earlier blocks;
        the data is read ``n_iter + 1`` times. The default 5 gives singular values equal to
        ARPACK's (``scipy.sparse.linalg.svds``) to 1e-5 relative on word counts (see the
        README); each further iteration costs one pass.
    n_oversamples : int, default=10
        Extra dimensions of each block beyond ``n_components``.
    power_iteration_normalizer : {"auto", "QR"}, default="auto"
        How the randomized solver normalises its power iterations: always QR
        (re-orthonormalisation against every earlier block), which both values mean.
        scikit-learn's cheaper ``"LU"`` and ``"none"`` lose the small singular values to
        round-off and are refused.
    random_state : int, RandomState or None, default=None
        Seeds the Gaussian test matrix (the ARPACK start with ``algorithm="arpack"``).
    tol : float, default=0.0
        Tolerance of ARPACK's singular values (0: machine precision); not used by the
        randomized solver.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Right singular vectors (orthonormal rows), largest absolute loading of each positive
        (scikit-learn's ``svd_flip(u_based_decision=False)``).
    singular_values_ : ndarray of shape (n_components,)
    explained_variance_ : ndarray of shape (n_components,)
        Variance of each column of ``transform(X)``: ``s_j^2 / n - (mean_ . v_j)^2``, as
        scikit-learn's ``np.var(X_transformed, axis=0)``.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Fraction of the total variance of ``X`` (the sum of its column variances).
    mean_ : ndarray of shape (n_features,)
        Column means (not subtracted: kept for the variances above), unweighted.
    feature_weights_ : ndarray of shape (n_features,) or None
        The ``feature_weights`` of the fit, or None.
    n_components_ : int
    n_samples_ : int
    n_passes_ : int
        Passes made over the data.
    n_features_in_ : int
    fit_statistics_ : ddr.stats.GramProduct
        What a one-pass fit was solved from (``X^T X`` applied to the fixed basis); what
        :meth:`partial_fit` merges a batch into and :func:`ddr.merge_fits` merges. Only after
        a one-pass fit (``n_components + n_oversamples >= n_features``).

    Notes
    -----
    Input may be numpy, dask or xarray (dense), an in-memory scipy.sparse matrix, or a dask
    array of scipy.sparse CSR row blocks (:func:`ddr.io.open_csr`); sparse blocks are never
    densified. Everything accumulates in float64, except that float32 sparse values are
    multiplied in float32 in runs of rows whose sums are added in float64
    (:class:`ddr.stats.GramProduct`: the float64 model to about 1e-7); ``transform`` returns
    float32 for float32 input and float64 otherwise (dense, even for sparse input, as
    scikit-learn).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "algorithm": [StrOptions({"randomized", "arpack"})],
        "n_iter": [Interval(Integral, 0, None, closed="left")],
        "n_oversamples": [Interval(Integral, 0, None, closed="left")],
        "power_iteration_normalizer": [StrOptions({"auto", "QR"})],
        "random_state": ["random_state"],
        "tol": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        n_components: int = 2,
        *,
        algorithm: str = "randomized",
        n_iter: int = 5,
        n_oversamples: int = 10,
        power_iteration_normalizer: str = "auto",
        random_state: Any = None,
        tol: float = 0.0,
    ) -> None:
        self.n_components = n_components
        self.algorithm = algorithm
        self.n_iter = n_iter
        self.n_oversamples = n_oversamples
        self.power_iteration_normalizer = power_iteration_normalizer
        self.random_state = random_state
        self.tol = tol

    # ------------------------------------------------------------------- tags
    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = self._passes
        tags.fit.statistics = self._widest_pass
        tags.fit.mergeable = self._one_pass
        if self.algorithm == "arpack":
            tags.fit.loads_data = "algorithm='arpack' takes the SVD of the data in memory"
        assert tags.transformer is not None
        tags.transformer.component_prefix = "SV"
        tags.transformer.n_components_limit = rank_limit
        tags.xarray_dims = {
            "components_": ("component", FEATURE),
            "mean_": (FEATURE,),
            "singular_values_": ("component",),
            "explained_variance_": ("component",),
            "explained_variance_ratio_": ("component",),
        }
        # unit rows; the singular values and variances are those of X * w
        tags.xarray_units = {
            "components_": 0,
            "mean_": 1,
            "singular_values_": self._weighted_units(1),
            "explained_variance_": self._weighted_units(2),
            "explained_variance_ratio_": 0,
        }
        if self._weights() is not None:
            tags.xarray_dims["feature_weights_"] = (FEATURE,)
            tags.xarray_units["feature_weights_"] = None  # their units are the user's
        return tags

    # -------------------------------------------------------------------- fit
    def _width(self, n_features: int) -> int:
        return min(n_features, self.n_components + self.n_oversamples)

    def _passes(self, n_samples: int, n_features: int) -> int | None:
        if self.algorithm == "arpack":
            return 1
        return randomized_passes(n_features, self._width(n_features), self.n_iter)

    def _one_pass(self, n_samples: Any, n_features: Any) -> bool:
        """One pass of GramProduct that merges: when the first block spans every feature."""
        return n_features is not None and self._merges(int(n_features))

    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        from ddr.stats import GramProduct

        basis = np.broadcast_to(0.0, (n_features, self._width(n_features)))  # shape only
        return [(GramProduct.spec(basis=basis), n_features)]

    def _check_k(self, n: float, d: int) -> None:
        limit = d if np.isnan(n) else min(int(n), d)
        if self.algorithm == "arpack" and self.n_components >= limit:
            raise ValueError(
                f"n_components={self.n_components} must be below min(n_samples, n_features)="
                f"{limit} with algorithm='arpack' (ARPACK computes fewer singular triplets than "
                "the rank); use the randomized algorithm for all of them"
            )
        if self.n_components > limit:
            what = f"n_features={d}" if np.isnan(n) else f"min(n_samples={int(n)}, n_features={d})"
            raise ValueError(
                f"n_components={self.n_components} must be at most {what}={limit}: the rank "
                "of X is no larger"
            )

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan | None:
        """One pass when the first block spans every feature (``n_components +
        n_oversamples >= n_features``: ``X^T X`` is then known exactly from it) or with
        ``n_iter=0`` (a one-pass sketch). None (a multi-pass fit) otherwise."""
        if self.algorithm == "arpack":
            return None
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"))
        n, d = rows.shape
        if randomized_passes(d, self._width(d), self.n_iter) != 1:
            return None
        self._check_k(float(n) + self._rows_merged(), d)  # a partial_fit: all rows so far
        weights, sample_weight = fit_params.get("feature_weights"), fit_params.get("sample_weight")
        merging = bool(getattr(self, "_merging_count", 0.0))
        if self._merges(d):
            # the basis spans R^d: any orthonormal one gives the same eigensystem, and the
            # identity is the same for every batch of a partial_fit and every site of
            # ddr.merge_fits, so their statistics merge; X^T X itself is known, so the
            # feature weights enter the solve (_solve_statistics), lazy ones read after it
            stat = lazy_pass(rows.data, np.eye(d), None, centre=False, sample_weight=sample_weight)
            plan = FitPlan.over(rows, stat, self._solve_statistics)
            return plan_with_weights(plan, self, weights, rows, merging=merging)
        # a sketch: its statistic depends on the draw and merges with no other; the weights
        # scale its basis (see _feature_weights)
        w = fit_weights(self, weights, rows, merging=merging)
        V = initial_basis(d, self._width(d), check_random_state(self.random_state))
        Vw = V if w is None else V * w[:, None]
        stat = lazy_pass(rows.data, Vw, None, centre=False, sample_weight=sample_weight)
        return FitPlan.over(
            rows, stat, lambda value: self._set(single_pass_eigh(weighted_statistic(value, w), V))
        )

    def _merges(self, n_features: int) -> bool:
        """The fit is one pass of statistics that merge: its first block spans R^d."""
        return self.algorithm != "arpack" and self._width(n_features) >= n_features

    def _solve_statistics(self, value: Any) -> TruncatedSVD:
        """Solve ``X^T X`` (the statistic for the identity basis), feature weights applied."""
        value = weighted_gram(value, self._weights())
        return self._set(single_pass_eigh(value, np.eye(self.n_features_in_)))

    @fit_context
    def fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        feature_weights: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> TruncatedSVD:
        """Fit the leading singular triplets of X in ``n_iter + 1`` passes.

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, dask array or DataArray, shape (n_samples, n_features)
            The data (a dask array of dense or of sparse blocks).
        y : ignored
        sample_weight : array-like, dask array or DataArray of shape (n_samples,), optional
            Non-negative frequency weights: the SVD of ``diag(sqrt(w)) X`` (the Gram matrix
            ``X^T diag(w) X``), so that a row of weight ``w`` counts as ``w`` copies of it
            and 0 as none; the variances are weighted alike.
        feature_weights : array-like or DataArray of shape (n_features,), optional
            Non-negative feature weights: the SVD of ``X * feature_weights`` (no centring,
            as the model has none), as :meth:`ddr.PCA.fit` takes them (a DataArray on some
            of a grid's feature dims is broadcast over the others). No extra pass.
        sample_dim : hashable, optional
            The sample dim of a DataArray X.

        Returns
        -------
        self
        """
        plan = self._fit_plan(
            X, sample_weight=sample_weight, feature_weights=feature_weights, sample_dim=sample_dim
        )
        if plan is not None:
            return plan.run()
        rows = self._rows(X, reset=True, sample_dim=sample_dim)
        fw = fit_weights(self, feature_weights, rows, merging=False)
        n, d = rows.shape
        self._check_k(float(n), d)
        if self.algorithm == "arpack":
            weights = None
            if sample_weight is not None:
                given = np.asarray(align_to_rows(sample_weight, rows, "sample_weight"))
                weights = check_weights(given, int(n))
                check_some_weight(np.sum(given), type(self).__name__)
            res = _arpack(rows, self.n_components, self.tol, self.random_state, weights, fw)
            return self._set(res)
        if fw is not None:
            res = weighted_scatter_eigh(
                rows,
                self._width(d),
                fw,
                n_power_iter=self.n_iter,
                random_state=check_random_state(self.random_state),
                centre=False,
                sample_weight=sample_weight,
            )
            return self._set(res)
        res = randomized_scatter_eigh(
            rows,
            self._width(d),
            n_power_iter=self.n_iter,
            random_state=check_random_state(self.random_state),
            label="TruncatedSVD",
            centre=False,
            sample_weight=sample_weight,
        )
        return self._set(res)

    def _set(self, res: RandomizedEigh) -> TruncatedSVD:
        """The fitted attributes from the eigenpairs of ``X^T X``."""
        check_some_weight(res.count, type(self).__name__)
        self._check_k(res.count, res.mean.shape[0])
        k = self.n_components
        components = svd_flip_rows(np.ascontiguousarray(res.eigenvectors[:, :k].T))
        s2 = np.maximum(res.eigenvalues[:k], 0.0)
        count = res.count
        w = self._weights()
        # the variances are those of the weighted data, whose mean is mean * w
        projected_mean = components @ (res.mean if w is None else res.mean * w)
        self.components_ = components
        self.singular_values_ = np.sqrt(s2)
        self.explained_variance_ = np.maximum(s2 / count - projected_mean**2, 0.0)
        total = res.trace / count
        self.explained_variance_ratio_ = (
            self.explained_variance_ / total if total > 0 else np.zeros(k)
        )
        self.mean_ = res.mean
        self.n_components_ = k
        self.n_samples_ = int(count) if float(count).is_integer() else float(count)
        self.n_passes_ = res.passes
        return self

    # ------------------------------------------------------------- transforms
    def _projection(self, rows: Rows) -> Blockwise:
        """``X @ components_.T`` (dense output, even for sparse rows, as scikit-learn)."""
        dtype = out_dtype(rows.data.dtype)
        args = (np.ascontiguousarray(self._weighted_projection(self.components_).T), dtype)
        units = self._weighted_units(1)
        return Blockwise(_project_block, args, dtype, "truncated-svd-transform", units=units)

    def _reconstruction(self, rows: Rows) -> Blockwise:
        """``X @ (components_ / feature_weights_)``: a rank-``n_components`` approximation of
        the data (NaN where a weight is 0)."""
        dtype = out_dtype(rows.data.dtype)
        check = self._reconstruction_check()
        args = (self._unweighted(self.components_), dtype)
        return Blockwise(
            _reconstruct_block, args, dtype, "truncated-svd-inverse", check=check, units=1
        )

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
