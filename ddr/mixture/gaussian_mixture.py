"""Gaussian mixtures fitted by EM on data larger than memory: one pass per iteration.

The model and its parameters are scikit-learn's ``GaussianMixture``'s: mixing weights, means,
and full, tied, diagonal or spherical covariances with ``reg_covar`` added to their
diagonals; the precisions are kept as Cholesky factors. The fit is :func:`ddr.em.fit_em` with
the E-step statistic :class:`ddr.stats.GaussianMixtureSums` (responsibility-weighted counts,
means and centred scatters per component, merged with the Chan update, and the
log-likelihood) and scikit-learn's M-step (``m_step``), so that each iteration from the
same parameters is scikit-learn's to round-off; SQUAREM accelerates it, in coordinates where
every step stays a mixture (log-weights, means in units of the data's spread, and the
log-diagonal and off-diagonal entries of each covariance's Cholesky factor), and never lets
the log-likelihood fall. This module is the estimator and its starts; the parameters'
arithmetic (M-step, precisions, the blockwise read-outs) is in ``_gaussian_math``, the EM
problem with SQUAREM's coordinates in ``_gaussian_em``, the starts in ``_gaussian_starts``.

Starts (``init_params``), as scikit-learn's, in one pass (two for ``"kmeans"``) or none:

- ``"kmeans"``: k-means of a uniform sample of rows (the one pass for the sample: three runs
  of k-means++ and Lloyd's iterations to a fixed point, in memory, the lowest inertia
  kept), then one pass of every row's cluster at those centres and the clusters' counts,
  means and scatters: the components start as the clusters of a k-means labelling of all
  rows (scikit-learn's start, whose k-means runs Lloyd over all rows: 19 to 76 passes on
  the demo data, for no higher final log-likelihood; ``benchmarks/results/clustering.md``);
- ``"k-means++"``: k-means++ on a uniform sample of rows (one pass for the sample); each
  component starts on one chosen row with covariance ``reg_covar`` (scikit-learn's
  one-row responsibilities), so its first E-step is a nearest-row assignment;
- ``"random_from_data"``: the same from ``n_components`` rows of the sample;
- ``"random"``: random responsibilities of the sample's rows (scikit-learn draws them for
  every row; a sample of uniform draws gives the same start up to sampling noise).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ddr.base import FEATURE, DDRMixin, fit_context, map_rows
from ddr.clustering.kmeans import default_init_size, draw_sample
from ddr.em import EMState, fit_em
from ddr.families import LogLikelihoodScore
from ddr.mixture._gaussian_em import MixtureEM, MixtureModel
from ddr.mixture._gaussian_math import (
    covariances_of,
    m_step,
    n_parameters,
    prec_chol_of,
    precision_cholesky,
    precisions_of,
    predict_block,
    proba_block,
    score_block,
)
from ddr.mixture._gaussian_starts import check_inits, from_init_params
from ddr.stats import GaussianMixtureSums, KMeansSums, RowSample
from ddr.stats._input import Rows
from ddr.stats.mixture_sums import COVARIANCE_TYPES, GaussianMixtureParams
from ddr.tags import DDRTags, unknown_passes

__all__ = ["GaussianMixture", "MixtureShape", "m_step", "precision_cholesky"]

logger = logging.getLogger(__name__)

#: the dims of ``covariances_`` per covariance type (scikit-learn's shapes), for as_xarray
_COVARIANCE_DIMS: dict[str, tuple[str, ...]] = {
    "full": ("component", FEATURE, FEATURE + "_2"),
    "tied": (FEATURE, FEATURE + "_2"),
    "diag": ("component", FEATURE),
    "spherical": ("component",),
}


@dataclasses.dataclass(frozen=True)
class MixtureShape:
    """The shape of a mixture's parameters: what memory estimates need of them.

    Parameters
    ----------
    n_components : int
    n_features : int
    covariance_type : str
    """

    n_components: int
    n_features: int
    covariance_type: str


# ----------------------------------------------------------------------- estimator
class GaussianMixture(LogLikelihoodScore, DDRMixin, DensityMixin, BaseEstimator):
    """A Gaussian mixture fitted by EM on data larger than memory, one pass per iteration.

    Parameters
    ----------
    n_components : int, default=1
        Mixture components (at most ``n_samples``).
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Each component's own full covariance, one shared full covariance, a diagonal one
        each, or one variance each.
    tol : float, default=1e-6
        The stopping rule of :mod:`ddr.em`: EM stops when the log-likelihood's last gain
        and its estimated gain still to come are both below ``tol`` times its magnitude
        (scikit-learn's ``tol=1e-3`` bounds the last gain of the mean log-likelihood per
        row, which stops slow EM far from the optimum).
    reg_covar : float, default=1e-6
        Added to the diagonal of every covariance.
    max_iter : int, default=100
        EM iterations (passes) per initialisation.
    n_init : int, default=1
        Initialisations; the fit with the highest log-likelihood is kept.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        The start (see the user guide's Gaussian mixtures): the clusters of every row at the
        k-means centres of a sample (two passes: the sample, the labels), k-means++ rows of
        a sample, rows of a sample, or random responsibilities of a sample's rows (one pass
        for the sample).
    weights_init : array-like of shape (n_components,), default=None
    means_init : array-like of shape (n_components, n_features), default=None
    precisions_init : array-like, default=None
        The inverse covariances: (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
        Given all three, the fit starts from them with no pass; given some, the others
        come from ``init_params`` (as in scikit-learn).
    random_state : int, RandomState or None, default=None
        Seeds the start.
    warm_start : bool, default=False
        When fitted already, start from the fitted parameters (one initialisation).

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
    means_ : ndarray of shape (n_components, n_features)
    covariances_ : ndarray
        (k, d, d) full, (d, d) tied, (k, d) diag, (k,) spherical.
    precisions_ : ndarray
        Their inverses.
    precisions_cholesky_ : ndarray
        Cholesky factors of the precisions (scikit-learn's convention).
    converged_ : bool
    n_iter_ : int
        EM iterations of the kept initialisation.
    lower_bound_ : float
        Mean log-likelihood per row of the kept fit at the last parameters its E-step used
        (scikit-learn's meaning).
    lower_bounds_ : ndarray of shape (n_iter,)
        The same at each iteration (never decreasing), ``n_iter_`` of them.
    n_passes_ : int
        Passes over X in the fit (the start's and every initialisation's iterations).
    n_samples_ : int
        Rows of the X the fit read (what :meth:`information_criteria` counts).
    n_features_in_ : int

    Notes
    -----
    From the same weights, means and precisions each EM iteration is scikit-learn's (its
    E-step and M-step, to round-off); SQUAREM then takes fewer iterations to the optimum
    and the stopping rule does not stop slow EM early, so the final log-likelihood is at
    least scikit-learn's from the same start. Rows and means are moved by the components'
    weighted mean before they are multiplied, so data far from the origin keep their
    digits. ``predict``, ``predict_proba`` and ``score_samples`` are blockwise (lazy for
    dask input); ``score``, ``bic`` and ``aic`` read X once. Missing values are not
    supported.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "covariance_type": [StrOptions(set(COVARIANCE_TYPES))],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "reg_covar": [Interval(Real, 0.0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_params": [StrOptions({"kmeans", "k-means++", "random", "random_from_data"})],
        "weights_init": ["array-like", None],
        "means_init": ["array-like", None],
        "precisions_init": ["array-like", None],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
    }

    def __init__(
        self,
        n_components: int = 1,
        *,
        covariance_type: str = "full",
        tol: float = 1e-6,
        reg_covar: float = 1e-6,
        max_iter: int = 100,
        n_init: int = 1,
        init_params: str = "kmeans",
        weights_init: Any = None,
        means_init: Any = None,
        precisions_init: Any = None,
        random_state: Any = None,
        warm_start: bool = False,
    ) -> None:
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.random_state = random_state
        self.warm_start = warm_start

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = unknown_passes  # EM runs until it converges
        tags.fit.passes_note = self._passes_note()
        tags.fit.statistics = self._widest_pass
        tags.translation_invariant = "predict_proba"
        tags.loglik_attribute = "lower_bounds_"
        tags.xarray_dims = {
            "means_": ("component", FEATURE),
            "weights_": ("component",),
            "covariances_": _COVARIANCE_DIMS.get(str(self.covariance_type), ("component",)),
        }
        tags.xarray_units = {"means_": 1, "weights_": 0, "covariances_": 2}
        tags.checks.params = {"n_components": 2, "random_state": 0}
        return tags

    def _passes_note(self) -> str:
        """The passes known before the fit: the start's, and EM's at most."""
        given = all(v is not None for v in (self.weights_init, self.means_init,
                                             self.precisions_init))  # fmt: skip
        n_init = 1 if self.warm_start else self.n_init
        per = "" if n_init == 1 else f" per start ({n_init} starts)"
        em = f"one per EM iteration, at most {self.max_iter}{per}"
        if given:
            return f"no pass for the start, then {em}"
        if self.init_params == "kmeans":
            labels = "1 per start" if n_init != 1 else "1"
            return f"1 for a sample of rows and {labels} for its k-means labels, then {em}"
        return f"1 for a sample of rows, then {em}"

    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        """The widest of the fit's passes: an EM iteration's sums, or the start's sample
        of rows, or its k-means labelling (per-cluster scatters), by the size of a value."""
        k = int(self.n_components) if isinstance(self.n_components, Integral) else 1
        ct = str(self.covariance_type)
        passes = [GaussianMixtureSums.spec(params=MixtureShape(k, n_features, ct))]
        given = (self.weights_init, self.means_init, self.precisions_init)
        if not all(v is not None for v in given):
            passes.append(RowSample.spec(size=max(3 * 1024, 100 * k), seed=0))
            if self.init_params == "kmeans":
                centres = np.broadcast_to(0.0, (k, n_features))  # shape only
                scatter = "full" if ct in ("full", "tied") else "diag"
                passes.append(KMeansSums.spec(centres=centres, scatter=scatter))
        widest = max(passes, key=lambda spec: spec.value_nbytes(n_features))
        return [(widest, n_features)]

    # ------------------------------------------------------------------ the start
    def _check_inits(self, d: int) -> tuple[Any, Any, Any]:
        return check_inits(
            int(self.n_components), d, self.covariance_type, self.weights_init,
            self.means_init, self.precisions_init,
        )  # fmt: skip

    def _start(
        self, rows: Rows, rng: np.random.RandomState, sample: Any, inits: tuple[Any, Any, Any]
    ) -> tuple[MixtureModel, int]:
        """The start of one initialisation, and the passes it read."""
        weights, means, precisions = inits
        ct = self.covariance_type
        passes = 0
        if weights is not None and means is not None and precisions is not None:
            w0, m0, cov0 = weights, means, covariances_of(precisions, ct)
        else:
            w0, m0, cov0, passes = from_init_params(
                self.init_params, ct, int(self.n_components), float(self.reg_covar), rows,
                rng, sample,
            )  # fmt: skip
            w0 = w0 if weights is None else weights
            m0 = m0 if means is None else means
            cov0 = cov0 if precisions is None else covariances_of(precisions, ct)
        if precisions is None:
            prec = precision_cholesky(cov0, ct)
        else:
            prec = prec_chol_of(precisions, ct)
        return MixtureModel(GaussianMixtureParams(w0, m0, prec, ct), cov0), passes

    # --------------------------------------------------------------------------- fit
    @fit_context
    def fit(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Any:
        """Fit the mixture by EM: ``n_init`` starts of at most ``max_iter`` passes each.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        self
        """
        warm = self.warm_start and hasattr(self, "precisions_cholesky_")
        rows = self._rows(X, reset=not warm, sample_dim=sample_dim)
        n, d = rows.shape
        k = int(self.n_components)
        if n < 2:
            raise ValueError(
                f"Expected n_samples >= 2 but got n_samples = {n} (a mixture needs at least 2 "
                "samples)"
            )
        if n < k:
            raise ValueError(
                f"Expected n_samples >= n_components but got n_components = {k}, n_samples = {n}"
            )
        inits = self._check_inits(d)
        rng = check_random_state(self.random_state)
        passes = 0
        sample = None
        if not (warm or all(v is not None for v in inits)):  # a sample for every start
            size = default_init_size(n, k)
            sample = draw_sample(rows, size, int(rng.randint(2**31 - 1)))
            passes += 1
        n_init = 1 if warm else int(self.n_init)
        best: EMState | None = None
        for i in range(n_init):
            if warm:
                start = self._fitted_model()
            else:
                start, used = self._start(rows, rng, sample, inits)
                passes += used
            problem = MixtureEM(self.covariance_type, float(self.reg_covar), start)
            state = fit_em(
                rows.data,
                problem,
                EMState(start),
                tol=float(self.tol),
                max_iter=int(self.max_iter),
                logger=logger,
                what=f"GaussianMixture (EM, init {i + 1}/{n_init})",
                owner="GaussianMixture",
                stacklevel=2,
            )
            passes += state.n_iter
            if best is None or state.loglik[-1] > best.loglik[-1]:
                best = state
        assert best is not None
        model: MixtureModel = best.params
        p = model.params
        self.weights_ = p.weights
        self.means_ = p.means
        self.covariances_ = model.covariances
        self.precisions_cholesky_ = p.precisions_cholesky
        self.precisions_ = precisions_of(p.precisions_cholesky, self.covariance_type)
        self.converged_ = bool(best.converged)
        self.n_iter_ = int(best.n_iter)
        self.lower_bounds_ = np.asarray(best.loglik, dtype=np.float64) / n
        self.lower_bound_ = float(self.lower_bounds_[-1])
        self.n_passes_ = passes
        self.n_samples_ = int(n)
        return self

    def fit_predict(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Any:
        """Fit, then the most probable component of each training row.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        labels : same kind as X, shape (n_samples,)
        """
        return self.fit(X, sample_dim=sample_dim).predict(X, sample_dim=sample_dim)

    # ----------------------------------------------------------------------- apply
    def _params(self) -> GaussianMixtureParams:
        check_is_fitted(self)
        return GaussianMixtureParams(
            self.weights_, self.means_, self.precisions_cholesky_, self.covariance_type
        )

    def _fitted_model(self) -> MixtureModel:
        return MixtureModel(self._params(), np.asarray(self.covariances_))

    def _map(self, X: Any, sample_dim: Hashable | None, fn: Any, method: str, **kw: Any) -> Any:
        rows = self._rows(X, reset=False, sample_dim=sample_dim)
        return map_rows(
            rows, fn, args=(self._params(), ), name=f"gmm-{method.replace('_', '-')}",
            method=f"GaussianMixture.{method}", **kw,
        )  # fmt: skip

    def predict(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """The most probable component of each row (blockwise, lazy for dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        labels : same kind as X, shape (n_samples,)
        """
        return self._map(X, sample_dim, predict_block, "predict", n_out=None, dtype=np.int64)

    def predict_proba(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Each component's posterior probability for each row (blockwise).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        proba : same kind as X, shape (n_samples, n_components)
            A DataArray has a ``component`` dim.
        """
        k = int(self.means_.shape[0]) if hasattr(self, "means_") else None
        return self._map(
            X, sample_dim, proba_block, "predict_proba", n_out=k, dtype=np.float64,
            new_dim="component", new_coords=None if k is None else list(range(k)),
            units=self._output_units(0),
        )  # fmt: skip

    def score_samples(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Log-density ``log p(x)`` of each row (blockwise).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        log_density : same kind as X, shape (n_samples,)
        """
        return self._map(X, sample_dim, score_block, "score_samples", n_out=None, dtype=np.float64)

    def _n_parameters(self) -> int:
        """Free parameters of the model (scikit-learn's count)."""
        k, d = self.means_.shape
        return n_parameters(k, d, self.covariance_type)

    def information_criteria(self) -> dict[str, float]:
        """BIC and AIC of the fit on its own training rows, from what the fit kept: no pass.

        The log-likelihood is ``lower_bound_ * n_samples_``, the one the fit's last E-step
        computed, at the parameters before its last M-step (scikit-learn's ``lower_bound_``).
        The fitted parameters are that M-step's, whose log-likelihood is at least as high
        (EM never lowers it), so these criteria are at least :meth:`bic` and :meth:`aic`
        of the training rows, by twice the last iteration's gain: below ``2 tol |log L|``
        for a converged fit. This is what a pipeline's ``plot: bic`` draws to choose the
        number of components, with no pass over X per model.

        Returns
        -------
        dict
            ``n_components``, ``n_parameters`` (free parameters, scikit-learn's count),
            ``n_samples``, ``log_likelihood`` (the total over the rows), ``bic``
            (``-2 log L + p log n``) and ``aic`` (``-2 log L + 2 p``).
        """
        check_is_fitted(self)
        n = int(self.n_samples_)
        loglik = float(self.lower_bound_) * n
        p = self._n_parameters()
        return {
            "n_components": int(self.means_.shape[0]),
            "n_parameters": p,
            "n_samples": n,
            "log_likelihood": loglik,
            "bic": -2.0 * loglik + p * float(np.log(n)),
            "aic": -2.0 * loglik + 2.0 * p,
        }

    def bic(self, X: Any, *, sample_dim: Hashable | None = None) -> float:
        """Bayesian information criterion ``-2 log L + p log n`` on X (lower is better).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        float
        """
        total, n = self._total_log_likelihood(X, sample_dim)
        return -2.0 * total + self._n_parameters() * np.log(n)

    def aic(self, X: Any, *, sample_dim: Hashable | None = None) -> float:
        """Akaike information criterion ``-2 log L + 2 p`` on X (lower is better).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        float
        """
        total, _ = self._total_log_likelihood(X, sample_dim)
        return -2.0 * total + 2.0 * self._n_parameters()

    def sample(self, n_samples: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Draw rows from the fitted mixture (in memory), as scikit-learn does.

        Parameters
        ----------
        n_samples : int, default 1

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        y : ndarray of shape (n_samples,)
            The component of each row.
        """
        check_is_fitted(self)
        if isinstance(n_samples, bool) or not isinstance(n_samples, Integral) or n_samples < 1:
            raise ValueError(
                f"Invalid value for 'n_samples': {n_samples!r}. The sampling requires at "
                "least one sample."
            )
        rng = check_random_state(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        ct = self.covariance_type
        parts = []
        for j, (mean, c) in enumerate(zip(self.means_, counts, strict=True)):
            if ct == "full":
                cov = self.covariances_[j]
            elif ct == "tied":
                cov = self.covariances_
            elif ct == "diag":
                cov = np.diag(self.covariances_[j])
            else:
                cov = self.covariances_[j] * np.eye(mean.shape[0])
            parts.append(rng.multivariate_normal(mean, cov, c))
        labels = np.repeat(np.arange(len(counts)), counts)
        return np.vstack(parts), labels
