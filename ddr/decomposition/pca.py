"""Principal component analysis of arrays larger than memory.

Four solvers (scikit-learn's ``svd_solver`` names), one set of fitted attributes
(scikit-learn's names):

- ``"covariance_eigh"``: ONE pass of :class:`ddr.stats.Moments` (per-block float64 centring,
  Chan merge, so two-pass accuracy whatever the offset of the data), then ``eigh`` of the
  d x d covariance, only the top ``k`` when ``k`` is much smaller than ``d``. ``partial_fit``
  merges the moments of each new batch.
- ``"randomized"``: randomized block Krylov iteration on the centred scatter (Halko, Martinsson
  and Tropp; Musco and Musco), ``iterated_power + 1`` passes, never forming a d x d matrix
  (:mod:`ddr.linalg.randomized`).
- ``"full"``: the thin SVD of the centred data in memory, the reference.
- ``"arpack"``: the top ``k`` singular triplets of the centred data in memory by ARPACK
  (``scipy.sparse.linalg.svds``), as scikit-learn's.
- ``"auto"``: ``"covariance_eigh"`` for ``n_features <= AUTO_COVARIANCE_MAX_FEATURES`` (2048:
  the d x d float64 scatter is at most 32 MiB, and a merge task of the tree holds
  ``split_every`` = 16 of them), ``"randomized"`` above (and ``"covariance_eigh"`` for
  ``n_components="mle"``, which needs every eigenvalue).

ddr's former names ``solver`` (values ``"covariance"``, ``"exact"``) and ``n_power_iter``
still work until ddr 0.3, with a FutureWarning.

Transforms are blockwise (:func:`ddr.base.map_rows`): numpy in, numpy out; dask in, lazy dask
out; DataArray in, DataArray out with the sample coordinate and a ``component`` dim.
"""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import dask
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions
from sklearn.utils.metaestimators import available_if

from ddr.base import (
    FEATURE,
    SAMPLE_WEIGHT_CHECKS,
    FitPlan,
    InvalidParameterError,
    check_some_weight,
    fit_context,
)
from ddr.decomposition._feature_weights import FeatureWeighted, fit_weights, plan_with_weights
from ddr.decomposition._pca_model import (
    MISSING_HINT,
    ProbabilisticPCA,
    check_complete,
    inverse_block,
    raise_missing,
    transform_block,
)
from ddr.decomposition._pca_solvers import (
    Spectrum,
    mle_dimension,
    solve_arpack,
    solve_covariance,
    solve_exact,
    solve_randomized,
)
from ddr.families import (
    Blockwise,
    FitThenTransform,
    LinearProjection,
    LogLikelihoodScore,
    out_dtype,
)
from ddr.linalg.randomized import randomized_passes
from ddr.stats import Moments, lazy
from ddr.stats._input import Rows, is_dask
from ddr.tags import DDRTags, moments_pass, rank_limit

__all__ = ["AUTO_COVARIANCE_MAX_FEATURES", "FRACTION_MAX_COMPONENTS", "PCA"]

#: ``svd_solver="auto"`` uses the covariance solver up to this many features, randomized above.
AUTO_COVARIANCE_MAX_FEATURES = 2048
#: With a fractional ``n_components`` the randomized solver sketches for this many components
#: (plus oversampling) and picks the smallest ``k`` among them.
FRACTION_MAX_COMPONENTS = 100

_SOLVERS = ("auto", "covariance_eigh", "randomized", "full", "arpack")
#: ddr's former solver names, scikit-learn's since ddr 0.2
_RENAMED_SOLVERS = {"covariance": "covariance_eigh", "exact": "full"}
#: ``iterated_power="auto"``: block Krylov iterations with re-orthonormalisation (see the
#: parameter's documentation)
AUTO_ITERATED_POWER = 3


def _covariance_solver(est: PCA) -> bool:
    if est._param("svd_solver") in ("auto", "covariance_eigh"):
        return True
    raise AttributeError(
        "partial_fit accumulates the d x d covariance; it needs svd_solver='covariance_eigh' "
        f"or 'auto'; this PCA has svd_solver={est.svd_solver!r}"
    )


class PCA(
    FeatureWeighted,
    ProbabilisticPCA,
    LogLikelihoodScore,
    FitThenTransform,
    LinearProjection,
    BaseEstimator,
):
    """Principal component analysis from passes of mergeable statistics.

    Parameters
    ----------
    n_components : int, float, "mle" or None, default=None
        An int ``k`` in ``[1, min(n_samples, n_features)]``; a float in (0, 1): the smallest
        ``k`` whose components explain more than that fraction of the total variance (the
        trace of the covariance, known from the same pass, for every solver); ``"mle"``:
        Minka's maximum-likelihood estimate of the dimensionality from the eigenvalues
        (scikit-learn's; needs every eigenvalue, so the covariance or full solver, and
        ``n_samples >= n_features``); or None: all ``min(n_samples, n_features)`` components
        (not with the randomized solver).
    whiten : bool, default=False
        Divide the scores by ``sqrt(explained_variance_)`` so they have unit variance.
    svd_solver : {"auto", "covariance_eigh", "randomized", "full", "arpack"}, default="auto"
        ``"covariance_eigh"``: one pass, ``eigh`` of the d x d covariance. ``"randomized"``:
        ``iterated_power + 1`` passes, memory O(d (k + n_oversamples)(iterated_power + 1)),
        for wide data. ``"full"``: loads the data and takes its SVD (small data; the
        reference). ``"arpack"``: loads the data and takes its top ``k`` singular triplets
        by ARPACK (``0 < k < min(n_samples, n_features)``). ``"auto"``: covariance_eigh for
        ``n_features <= 2048``, randomized above. (Formerly ``solver``, with
        ``"covariance"`` and ``"exact"`` for ``"covariance_eigh"`` and ``"full"``: accepted
        until ddr 0.3 with a FutureWarning.)
    tol : float, default=0.0
        Tolerance of the singular values computed by ``svd_solver="arpack"`` (0: machine
        precision); not used by the other solvers.
    iterated_power : int or "auto", default=3
        Power (block Krylov) iterations of the randomized solver; it reads the data
        ``iterated_power + 1`` times. The default 3 (4 passes) gives, with 10 oversamples,
        top-10 principal angles below 0.002 degrees and explained variances within 5e-9 of
        exact on low-rank-plus-noise data like ddr's benchmarks and on scikit-learn's digits
        (see docs/linear.md); each further iteration costs one pass and typically gains
        one to two orders of magnitude. ``"auto"`` is 3 (scikit-learn's ``"auto"``, 4 or 7
        iterations of plain subspace iteration, would cost ddr more passes for no gain:
        block Krylov iteration converges faster). Formerly ``n_power_iter``.
    n_oversamples : int, default=10
        Extra dimensions of the randomized sketch beyond ``k``.
    power_iteration_normalizer : {"auto", "QR"}, default="auto"
        How the randomized solver normalises its power iterations: always QR
        (re-orthonormalisation against every earlier block), which both values mean.
        scikit-learn's cheaper ``"LU"`` and ``"none"`` lose the small components to
        round-off and are refused.
    random_state : int, RandomState or None, default=None
        Seeds the Gaussian test matrix of the randomized solver and the ARPACK start (pass
        an int for reproducible results; the other solvers are deterministic).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Principal axes (orthonormal rows), largest absolute loading of each positive. With
        ``feature_weights``, the axes of the weighted data (the maps in the weighted space,
        as eofs and xeofs give them; ``as_xarray("components_", weighted=False)`` unweights
        them).
    explained_variance_ : ndarray of shape (n_components,)
        Variance (ddof=1) along each component (of the weighted data with feature weights).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Fraction of the total variance (the trace of the covariance).
    singular_values_ : ndarray of shape (n_components,)
        Singular values of the centred data, ``sqrt(explained_variance_ * (n_samples_ - 1))``.
    mean_ : ndarray of shape (n_features,)
        The data's mean (unweighted).
    feature_weights_ : ndarray of shape (n_features,) or None
        The ``feature_weights`` of the fit (masked features left out), or None.
    noise_variance_ : float
        The probabilistic PCA noise: the mean variance of the discarded directions,
        ``(total - sum(explained_variance_)) / (min(n_samples_, n_features) - n_components_)``.
    n_components_ : int
    n_samples_ : int or float
        The rows fitted (the sum of ``sample_weight`` when given: a float where it is one).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Defined when X has string feature names.
    solver_ : str
        The solver used (``"covariance_eigh"``, ``"randomized"``, ``"full"`` or
        ``"arpack"``).
    n_passes_ : int
        Passes made over the data by the last ``fit`` (over the batch for ``partial_fit``).
    moments_ : Moments
        The accumulated statistic (covariance solver only; ``partial_fit`` merges into it).

    Notes
    -----
    Passes over the data: ``"covariance_eigh"`` 1; ``"randomized"`` ``iterated_power + 1``
    (the first pass computes the mean, the trace and the first sketch together, its product
    centred on block means and corrected by the Chan term); ``"full"`` and ``"arpack"`` 1
    (they load X).
    Statistics accumulate in float64, so float32 input gives float64-accurate moments; the
    fitted attributes are float64 and transforms return the input's float dtype (float64
    for integer input, which is upcast).

    Data with missing values (NaN) are refused: use :class:`ddr.PPCA`.

    Feature weights (``fit(X, feature_weights=w)``, e.g. ``sqrt(cos(lat))`` area weights of
    EOF analysis) are applied as eofs and xeofs apply them: the model is the PCA of
    ``(X - mean_) * w``; ``transform`` weights new rows alike and ``inverse_transform``
    unweights (NaN at features of weight 0). They cost no pass: the covariance solver
    weights the covariance of its one pass, the randomized solver its basis products.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="neither"),
            StrOptions({"mle"}),
            None,
        ],
        "whiten": ["boolean"],
        "svd_solver": [
            StrOptions(set(_SOLVERS) | set(_RENAMED_SOLVERS), deprecated=set(_RENAMED_SOLVERS))
        ],
        "tol": [Interval(Real, 0, None, closed="left")],
        "iterated_power": [Interval(Integral, 0, None, closed="left"), StrOptions({"auto"})],
        "n_oversamples": [Interval(Integral, 0, None, closed="left")],
        "power_iteration_normalizer": [StrOptions({"auto", "QR"})],
        "random_state": ["random_state"],
    }
    _renamed_params: ClassVar[dict[str, str]] = {
        "solver": "svd_solver",
        "n_power_iter": "iterated_power",
    }
    _renamed_values: ClassVar[dict[str, dict[Any, Any]]] = {"svd_solver": _RENAMED_SOLVERS}

    def __init__(
        self,
        n_components: int | float | str | None = None,
        *,
        whiten: bool = False,
        svd_solver: str = "auto",
        tol: float = 0.0,
        iterated_power: int | str = 3,
        n_oversamples: int = 10,
        power_iteration_normalizer: str = "auto",
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.whiten = whiten
        self.svd_solver = svd_solver
        self.tol = tol
        self.iterated_power = iterated_power
        self.n_oversamples = n_oversamples
        self.power_iteration_normalizer = power_iteration_normalizer
        self.random_state = random_state

    # ------------------------------------------------------------------- tags
    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = self._passes
        tags.fit.statistics = self._widest_pass
        tags.fit.mergeable = self._mergeable
        tags.fit.solve_params = frozenset({"n_components", "whiten"})
        solver = self._param("svd_solver")
        tags.fit.loads_data = (
            f"svd_solver={solver!r} takes the SVD of the data in memory"
            if solver in ("full", "arpack")
            else None
        )
        if solver not in ("auto", "covariance_eigh"):
            # weights enter the Moments of the covariance solver only
            why = f"sample_weight needs the covariance solver, not svd_solver={solver!r}"
            tags.checks.expected_failed_checks = dict.fromkeys(SAMPLE_WEIGHT_CHECKS, why)
        elif self.n_components is None:
            tags.checks.expected_failed_checks = {
                "check_sample_weight_equivalence_on_dense_data": (
                    "n_components=None keeps components past the rank of the check's rows, "
                    "any orthonormal basis of their null space (tests/test_sample_weight.py "
                    "checks the weights on the components the data determine)"
                )
            }
        assert tags.transformer is not None
        tags.transformer.component_prefix = "PC"
        tags.transformer.n_components_limit = rank_limit
        tags.translation_invariant = "transform"
        tags.xarray_dims = {
            "components_": ("component", FEATURE),
            "mean_": (FEATURE,),
            "explained_variance_": ("component",),
            "explained_variance_ratio_": ("component",),
            "singular_values_": ("component",),
        }
        # unit rows (in the weighted space too); the variances are those of X_w
        tags.xarray_units = {
            "components_": 0,
            "mean_": 1,
            "explained_variance_": self._weighted_units(2),
            "explained_variance_ratio_": 0,
            "singular_values_": self._weighted_units(1),
        }
        if self._weights() is not None:
            tags.xarray_dims["feature_weights_"] = (FEATURE,)
            tags.xarray_units["feature_weights_"] = None  # their units are the user's
        return tags

    def _mergeable(self, n_samples: Any, n_features: Any) -> bool:
        """The covariance solver is one pass of Moments (``partial_fit`` merges them)."""
        return n_features is not None and self._resolve_solver(n_features) == "covariance_eigh"

    # ------------------------------------------------------------- parameters
    def _resolve_solver(self, n_features: int) -> str:
        """The solver used for ``n_features`` (``"auto"`` resolved, old names read as new)."""
        solver = self._param("svd_solver")
        if solver != "auto":
            return str(solver)
        if self.n_components == "mle" or n_features <= AUTO_COVARIANCE_MAX_FEATURES:
            return "covariance_eigh"
        return "randomized"

    def _iterated_power(self) -> int:
        """``iterated_power`` with ``"auto"`` resolved."""
        return AUTO_ITERATED_POWER if self.iterated_power == "auto" else int(self.iterated_power)

    def _check_param_combination(self) -> None:
        k, solver = self.n_components, self._param("svd_solver")
        if k == "mle" and solver in ("randomized", "arpack"):
            raise InvalidParameterError(
                f"The 'n_components' parameter of PCA cannot be 'mle' with "
                f"svd_solver={self.svd_solver!r}: Minka's estimate needs every eigenvalue; use "
                "svd_solver='covariance_eigh' (one pass), 'full' or 'auto'"
            )
        if solver == "arpack" and not (isinstance(k, Integral) and not isinstance(k, bool)):
            raise InvalidParameterError(
                "The 'n_components' parameter of PCA must be an int with svd_solver='arpack' "
                f"(ARPACK computes a given number of singular triplets); got {k!r}"
            )

    def _check_k(self, n: float, d: int, solver: str) -> None:
        """Reject an int n_components outside [1, min(n, d)] (n may be unknown: NaN)."""
        k = self.n_components
        if isinstance(k, Integral) and not isinstance(k, bool):
            limit = d if np.isnan(n) else min(int(n), d)
            if solver == "arpack" and not 1 <= k < limit:
                raise ValueError(
                    f"n_components={k} must be between 1 and min(n_samples, n_features) - 1 = "
                    f"{limit - 1} with svd_solver='arpack' (ARPACK computes fewer singular "
                    "triplets than the rank); use svd_solver='full' for all of them"
                )
            if not 1 <= k <= limit:
                raise ValueError(
                    f"n_components={k} must be between 1 and min(n_samples, n_features)="
                    f"{limit} with svd_solver={solver!r}"
                )
        if k == "mle" and not np.isnan(n) and n < d:
            raise ValueError(
                f"n_components='mle' is only supported if n_samples >= n_features (as in "
                f"scikit-learn); got n_samples={int(n)} < n_features={d}"
            )
        if not np.isnan(n) and n < 2:
            raise ValueError(
                f"PCA needs at least 2 samples to estimate a variance; got n_samples={int(n)} "
                "(1 sample)"
            )

    # -------------------------------------------------------------------- fit
    @fit_context
    def fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        feature_weights: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> PCA:
        """Fit the principal components of X.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            Complete data (no NaN); dask chunks must hold whole rows. Integers are upcast
            to float64.
        y : ignored
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Non-negative frequency weights (a weight of 2 gives the model of the row
            repeated, 0 the model without it; ``n_samples_`` is then their sum). The
            covariance solver only (``svd_solver="covariance_eigh"``, or ``"auto"`` up to
            ``AUTO_COVARIANCE_MAX_FEATURES`` features).
        feature_weights : array-like or DataArray of shape (n_features,), optional
            Non-negative weights of the features (e.g. ``sqrt(cos(lat))``), applied to the
            centred data before the decomposition: the model is the PCA of ``(X - mean) *
            feature_weights``. A 1-D array of ``n_features`` (for a grid: of the unmasked
            points, or of every point), or a DataArray on some of the feature dims,
            broadcast over the others; weights at masked points are ignored, and a weight
            of 0 leaves a feature out. Every solver; no extra pass.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        self
        """
        rows = self._validated_rows(X, sample_dim)
        w = fit_weights(self, feature_weights, rows, merging=False)
        solver = self._resolve_solver(rows.shape[1])
        if solver == "covariance_eigh":
            return self._covariance_plan(rows, sample_weight).run()
        if sample_weight is not None:
            raise ValueError(
                "sample_weight needs the covariance solver (svd_solver='covariance_eigh', or "
                f"'auto' with n_features <= {AUTO_COVARIANCE_MAX_FEATURES}); got "
                f"svd_solver={self.svd_solver!r} with n_features={rows.shape[1]}"
            )
        if solver in ("full", "arpack"):
            data = rows.data.compute() if is_dask(rows.data) else rows.data
            check_complete(data)
            self._check_k(data.shape[0], data.shape[1], solver)
            if solver == "arpack":
                spec = solve_arpack(
                    data,
                    int(self.n_components),
                    self.tol,
                    check_random_state(self.random_state),
                    w,
                )
            else:
                spec = solve_exact(data, self._n_top(data.shape[0], data.shape[1], solver), w)
            return self._set(spec, solver, passes=1, moments=None)
        return self._fit_randomized(rows)

    def _validated_rows(self, X: Any, sample_dim: Hashable | None) -> Any:
        rows = self._rows(X, reset=True, sample_dim=sample_dim, allow_nan=True)
        if not rows.is_lazy:
            check_complete(rows.data)
        return rows

    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        """Moments for the covariance solver; the randomized solver's passes hold a
        d x (k + n_oversamples) centred product."""
        if self._resolve_solver(n_features) != "randomized":
            return moments_pass(n_features)
        from ddr.stats.sketch import CentredProduct

        k = self.n_components if isinstance(self.n_components, Integral) else n_features
        width = min(n_features, int(k) + int(self.n_oversamples))
        basis = np.broadcast_to(0.0, (n_features, width))  # only its shape is read
        return [(CentredProduct.spec(basis=basis), n_features)]

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan | None:
        """One pass of Moments for the covariance solver; None (multi-pass) otherwise."""
        if self._param("svd_solver") not in ("auto", "covariance_eigh"):
            return None
        rows = self._validated_rows(X, fit_params.get("sample_dim"))
        if self._resolve_solver(rows.shape[1]) != "covariance_eigh":
            return None
        plan = self._covariance_plan(rows, fit_params.get("sample_weight"))
        return plan_with_weights(plan, self, fit_params.get("feature_weights"), rows)

    def _covariance_plan(self, rows: Any, sample_weight: Any = None) -> FitPlan:
        if sample_weight is None:  # with weights the solve checks their sum
            self._check_k(rows.shape[0], rows.shape[1], "covariance_eigh")
        stats = lazy(Moments, rows.data, None, sample_weight)
        return FitPlan.over(rows, stats, self._finish_moments, on_error=raise_missing)

    # what ddr.merge_fits asks (the covariance solver keeps its Moments; other solvers none)
    def _fit_statistics(self) -> Moments | None:
        return getattr(self, "moments_", None)

    def _solve_statistics(self, moments: Moments) -> PCA:
        return self._finish_moments(moments)

    def _finish_moments(self, moments: Moments) -> PCA:
        check_some_weight(moments.count, "PCA")
        n, d = moments.count, moments.n_features
        self._check_k(n, d, "covariance_eigh")
        spec = solve_covariance(moments, self._n_top(n, d, "covariance_eigh"), self._weights())
        return self._set(spec, "covariance_eigh", passes=1, moments=moments)

    def _fit_randomized(self, rows: Any) -> PCA:
        n, d = rows.shape
        k = self.n_components
        if k is None:
            raise ValueError(
                "n_components=None asks for all min(n_samples, n_features) components, which "
                "the randomized solver does not compute (it would form a d x d basis); give an "
                "int or a fraction in (0, 1), or use svd_solver='covariance_eigh'"
            )
        self._check_k(n, d, "randomized")
        spec, passes = solve_randomized(
            rows,
            self._n_top(n, d, "randomized"),
            n_oversamples=self.n_oversamples,
            n_power_iter=self._iterated_power(),
            random_state=check_random_state(self.random_state),
            on_error=raise_missing,
            weights=self._weights(),
        )
        self._check_k(spec.n_samples, d, "randomized")
        return self._set(spec, "randomized", passes=passes, moments=None)

    def _passes(self, n_samples: int, n_features: int) -> int | None:
        solver = self._resolve_solver(n_features)
        if solver != "randomized":
            return 1
        if self.n_components is None:  # fit refuses it
            return None
        n_top = self._n_top(float(n_samples), n_features, solver)
        width = min(int(n_top) + self.n_oversamples, n_features)
        return randomized_passes(n_features, width, self._iterated_power())

    def _n_top(self, n: float, d: int, solver: str) -> int | None:
        """How many leading eigenpairs the solver must compute (None: all)."""
        k = self.n_components
        if isinstance(k, Integral):
            return int(k)
        if k is None or k == "mle":
            return None
        if solver == "randomized":  # a fraction: sketch for a bounded number of components
            limit = d if np.isnan(n) else min(int(n), d)
            return min(FRACTION_MAX_COMPONENTS, limit)
        return None

    @available_if(_covariance_solver)
    @fit_context
    def partial_fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        feature_weights: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> PCA:
        """Merge the moments of a batch into the model and solve again (covariance solver).

        One pass over the batch. The model after any sequence of batches equals the model
        fitted on all of them at once (to round-off). Available with
        ``svd_solver="covariance_eigh"`` or ``"auto"`` (for ``n_features <=
        AUTO_COVARIANCE_MAX_FEATURES``).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Non-negative frequency weights (as for :meth:`fit`).
        feature_weights : array-like or DataArray of shape (n_features,), optional
            As for :meth:`fit`, given with the first batch; later batches may repeat the
            same weights or leave them out (other weights are an error: the moments merged
            so far are solved with one set of weights).
        sample_dim : hashable, optional

        Returns
        -------
        self
        """
        first = not hasattr(self, "moments_")
        rows = self._rows(X, reset=first, sample_dim=sample_dim, allow_nan=True)
        if not rows.is_lazy:
            check_complete(rows.data)
        solver = self._resolve_solver(rows.shape[1])
        if solver != "covariance_eigh":
            raise ValueError(
                "partial_fit accumulates the d x d covariance; it needs "
                f"svd_solver='covariance_eigh' (or 'auto' with n_features <= "
                f"{AUTO_COVARIANCE_MAX_FEATURES}); got svd_solver={self.svd_solver!r} with "
                f"n_features={rows.shape[1]}"
            )
        fit_weights(self, feature_weights, rows, merging=not first)
        try:
            (batch,) = dask.compute(lazy(Moments, rows.data, None, sample_weight))
        except ValueError as exc:
            raise_missing(exc)
            raise
        merged = batch if first else self.moments_.merge(batch)
        return self._finish_moments(merged)

    def _set(self, spec: Spectrum, solver: str, *, passes: int, moments: Moments | None) -> PCA:
        n, d = spec.n_samples, spec.mean.shape[0]
        k = self.n_components
        total = spec.total_variance
        ratio = spec.variances / total if total > 0 else np.zeros_like(spec.variances)
        if k is None:
            k_ = min(n, d)
        elif isinstance(k, Integral):
            k_ = int(k)
        elif k == "mle":
            k_ = mle_dimension(spec.variances, n)
        else:
            # scikit-learn's rule: the smallest k whose cumulated ratio is strictly above k
            cum = np.cumsum(ratio[: spec.n_reliable])
            k_ = int(np.searchsorted(cum, k, side="right")) + 1
            if k_ > spec.n_reliable:
                if spec.n_reliable < min(n, d):
                    raise ValueError(
                        f"n_components={k}: the top {spec.n_reliable} components explain only "
                        f"{cum[-1]:.4g} of the variance, and the randomized solver searches "
                        f"at most {FRACTION_MAX_COMPONENTS}; give an int n_components or use "
                        "solver='covariance'"
                    )
                k_ = spec.n_reliable
        ev = spec.variances[:k_]
        # frequency weights may sum to a fraction: keep it (an int for rows and integer weights)
        self.n_samples_ = int(n) if float(n).is_integer() else float(n)
        self.mean_ = spec.mean
        self.components_ = np.ascontiguousarray(spec.components[:k_])
        self.explained_variance_ = ev.copy()
        self.explained_variance_ratio_ = ratio[:k_].copy()
        self.singular_values_ = np.sqrt(ev * (n - 1))
        self.n_components_ = k_
        m = min(n, d)
        if k_ >= m:
            self.noise_variance_ = 0.0
        elif spec.variances.shape[0] >= m:  # every eigenvalue known: scikit-learn's mean
            self.noise_variance_ = float(spec.variances[k_:m].mean())
        else:  # randomized: the trace minus the leading ones
            self.noise_variance_ = float(max(total - ev.sum(), 0.0) / (m - k_))
        self.solver_ = solver
        self.n_passes_ = passes
        if moments is not None:
            self.moments_ = moments
        elif hasattr(self, "moments_"):
            del self.moments_
        return self

    # -------------------------------------------------------------- transforms
    def _scale(self) -> np.ndarray | None:
        if not self.whiten:
            return None
        scale = np.sqrt(self.explained_variance_)
        return np.maximum(scale, np.finfo(np.float64).eps)

    def _transform_rows(self, X: Any, sample_dim: Hashable | None) -> Rows:
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        if not rows.is_lazy:
            check_complete(rows.data)
        return rows

    def _projection(self, rows: Rows) -> Blockwise:
        """Scores ``(X - mean_) @ components_.T`` (divided by ``sqrt(explained_variance_)``
        when whitening), in the input's float dtype."""
        dtype = out_dtype(rows.data.dtype)
        projection = self._weighted_projection(self.components_)
        args = (self.mean_, projection, self._scale(), dtype)
        units = 0 if self.whiten else self._weighted_units(1)
        return Blockwise(
            transform_block, args, dtype, "pca-transform", hint=MISSING_HINT, units=units
        )

    def _reconstruction(self, rows: Rows) -> Blockwise:
        """``(Z * scale) @ components_ + mean_``: whitening undone (and the feature weights:
        ``components_ / w``, NaN where a weight is 0, so only the scores are checked)."""
        dtype = out_dtype(rows.data.dtype)
        args = (self.mean_, self._unweighted(self.components_), self._scale(), dtype)
        check = self._reconstruction_check()
        return Blockwise(inverse_block, args, dtype, "pca-inverse-transform", check=check, units=1)

    # ------------------------------------------------------ probabilistic PCA
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
