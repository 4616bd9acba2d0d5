"""Probabilistic PCA by distributed EM, with missing values handled exactly, and in closed form.

Model (Tipping and Bishop, 1999): ``x = W z + mu + e``, ``z ~ N(0, I_q)``,
``e ~ N(0, sigma^2 I_d)``, so ``x ~ N(mu, C)`` with ``C = W W^T + sigma^2 I``.

- ``solver="closed_form"``: one pass of :class:`~ddr.stats.Moments`; with the eigenvalues
  ``lambda`` of the (ddof=0) covariance, ``sigma^2`` is the mean of the ``d - q`` discarded
  ones and ``W = U_q (Lambda_q - sigma^2 I)^{1/2}``: the maximum-likelihood solution. Needs
  complete data.
- ``solver="em"``: each iteration is ONE pass computing :class:`~ddr.stats.ppca_sums.PPCASums`
  (posterior moments of every row from its observed entries only, summed per feature as in
  Ilin and Raiko, 2010) and an M-step on the client that updates W, mu and sigma^2 jointly.
  The log-likelihood of the observed entries comes out of the same pass
  (``loglik_curve_``); iterations stop by the rule of :mod:`ddr.em` (the last gain and the
  estimated gain still to come below ``tol``, relative), SQUAREM-accelerated. The loop is
  :func:`ddr.em.fit_em`; the model, the M-step and the read-outs are shared with factor
  analysis (:mod:`ddr.decomposition._latent_gaussian`). On complete data with
  ``init="pca"`` the one pass of the start is the whole fit: EM's iterations are computed
  from its moments on the client.

Fitted components are put in canonical form: ``W = U diag(explained_variance_ -
noise_variance_)^{1/2}`` with orthonormal ``components_ = U^T`` (signs: largest loading
positive), so attributes compare one-to-one with scikit-learn's PCA (whose
``explained_variance_`` uses ddof=1; ours is the ML, ddof=0, value).
"""

from __future__ import annotations

import logging
import warnings
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE, FitPlan, check_some_weight, fit_context
from ddr.decomposition._latent_gaussian import (
    NOISE_FLOOR,
    DataMoments,
    LatentGaussianModel,
    loglik_from_moments,
    user_stacklevel,
)
from ddr.em import EMState
from ddr.linalg.signs import component_signs
from ddr.stats import Moments, compute, lazy
from ddr.stats._input import Rows
from ddr.stats.engine import aligned
from ddr.stats.pairwise_moments import PairwiseMoments
from ddr.stats.ppca_sums import PPCAParams
from ddr.tags import DDRTags, always, fixed_passes

__all__ = ["PPCA"]

logger = logging.getLogger(__name__)

_SOLVERS = ("em", "closed_form")
_INITS = ("pca", "random")


def _canonical(W: np.ndarray, s2: float) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal components (q, d) with fixed signs and the variances ``S^2 + s2``."""
    U, S, _ = linalg.svd(W, full_matrices=False)
    return (U * component_signs(U, axis=0)).T, S**2 + s2


def _all_but_one(n_samples: Any, n_features: Any) -> int | None:
    """``n_components=None``: every direction but one (sigma^2 is the discarded one's)."""
    return n_features - 1 if n_features else None


def _all_but_one_limit(n_samples: Any, n_features: Any) -> tuple[int, str] | None:
    """Fewer components than features (sigma^2 is the discarded directions') and than
    samples."""
    if not n_features:
        return None
    if n_samples and n_samples - 1 < n_features - 1:
        return n_samples - 1, "n_samples - 1"
    return n_features - 1, "n_features - 1"


class PPCA(LatentGaussianModel, BaseEstimator):
    """Probabilistic PCA fitted by distributed EM (missing values allowed) or in closed form.

    Parameters
    ----------
    n_components : int or None, default=None
        Latent dimension q, with ``1 <= q < n_features`` (at least one discarded direction is
        needed to estimate the noise variance) and ``q < n_samples``. None means
        ``n_features - 1``.
    max_iter : int, default=500
        Maximum number of EM iterations (each one pass over the data, unless on the client).
    tol : float, default=1e-9
        The stopping rule of :mod:`ddr.em`: EM stops when the log-likelihood's last gain and
        its estimated gain still to come are both below ``tol * |loglik|``.
    solver : {"em", "closed_form"}, default="em"
        ``closed_form`` is one pass of Moments and an eigendecomposition (complete data only);
        ``em`` handles missing values (NaN) exactly.
    init : {"pca", "random"}, default="pca"
        EM start, each one pass. ``pca``: pairwise-complete moments and the closed-form
        solution of their covariance (on complete data this is already the ML solution, and
        EM's iterations, the first of which confirms it, are computed from the moments on
        the client: the fit reads the data once). ``random``: Gaussian W at the data's
        scale, mu the data's mean, sigma^2 its mean variance (per-feature moments), then EM
        over the data.
    random_state : int, default=0
        Seed of ``init="random"``.
    warm_start : bool, default=False
        EM only: when the estimator is already fitted, ``fit`` continues EM from the fitted
        model (its parameters, log-likelihood curve and iteration count) instead of starting
        afresh, for at most ``max_iter`` more iterations: a fit stopped by ``max_iter``, or
        saved and loaded, resumes where it stopped.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal principal axes of the model, by decreasing variance.
    explained_variance_ : ndarray of shape (n_components,)
        Model variance along each axis (``|w_j|^2 + sigma^2``; ML, ddof=0).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Fractions of the model's total variance ``trace(C)``.
    noise_variance_ : float
        sigma^2.
    mean_ : ndarray of shape (n_features,)
    loglik_curve_ : ndarray of shape (n_iter,)
        Log-likelihood of the observed entries, summed over rows, at each EM iteration (the
        trace of :func:`ddr.em.fit_em`: never decreasing; closed form: the ML
        log-likelihood, one value).
    n_iter_ : int
        EM iterations (0 for the closed form).
    n_components_, n_features_in_ : int

    Notes
    -----
    Passes over the data: closed form 1; EM with ``init="pca"`` on complete data 1 (its
    iterations run on the client), otherwise ``n_iter_ + 1`` (the start, then one per
    iteration). ``n_components >= n_samples`` is refused; data of rank at most
    ``n_components`` leave sigma^2 unidentified (it stops at its floor, with a warning).
    Missing values: each row's posterior uses only its
    observed features; rows with no observed value carry no information and are ignored by
    fit (with a warning), get the prior (zero) as posterior mean, the mean as imputation and
    log-likelihood 0; a feature with no observed value makes fit raise ValueError.
    """

    _em_what: ClassVar[str] = "PPCA (EM)"

    def __init__(
        self,
        n_components: int | None = None,
        *,
        max_iter: int = 500,
        tol: float = 1e-9,
        solver: str = "em",
        init: str = "pca",
        random_state: int = 0,
        warm_start: bool = False,
    ) -> None:
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.init = init
        self.random_state = random_state
        self.warm_start = warm_start

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions(set(_SOLVERS))],
        "init": [StrOptions(set(_INITS))],
        "random_state": [Interval(Integral, 0, None, closed="left")],
        "warm_start": ["boolean"],
    }

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        if self.solver == "closed_form":  # one pass of Moments
            tags.fit.passes = fixed_passes(1)
            tags.fit.mergeable = always
            tags.fit.solve_params = frozenset({"n_components"})
        assert tags.transformer is not None
        if self.n_components is None:
            tags.transformer.width = _all_but_one
        tags.transformer.component_prefix = "PC"
        tags.transformer.n_components_limit = _all_but_one_limit
        tags.loglik_attribute = "loglik_curve_"
        tags.xarray_dims = {"components_": ("component", FEATURE), "mean_": (FEATURE,)}
        tags.xarray_units = {"components_": 0, "mean_": 1}  # orthonormal axes
        return tags

    # --------------------------------------------------------------- validation
    def _check_shape(self, n_samples: int, n_features: int) -> int:
        """The latent dimension for data of this shape, or a ValueError."""
        name = type(self).__name__
        if n_features < 2:
            raise ValueError(
                f"{name} needs at least 2 features (one latent direction and noise); got "
                f"n_features={n_features}"
            )
        if not np.isnan(n_samples) and n_samples < 2:
            raise ValueError(f"{name} needs at least 2 samples; got n_samples={n_samples}")
        q = n_features - 1 if self.n_components is None else int(self.n_components)
        return self._check_components(q, n_samples, n_features)

    # ---------------------------------------------------------------------- fit
    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan | None:
        """The closed form: one pass of Moments. EM with ``init="pca"``: one pass of pairwise
        moments, then the iterations on the client (complete data) or over the data (missing
        values). EM with ``init="random"``: None (its start is a pass of its own)."""
        if self.solver != "closed_form":
            return super()._fit_plan(X, y, **fit_params)
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"), allow_nan=True)
        q = self._check_shape(*rows.shape)
        if not rows.is_lazy and np.isnan(rows.data).any():
            raise ValueError(self._closed_form_nan_message(int(np.isnan(rows.data).sum())))
        return FitPlan.over(
            rows,
            lazy(Moments, rows.data, None, fit_params.get("sample_weight")),
            lambda m: self._finish_closed_form(m, q),
            on_error=self._explain_nan,
        )

    def _explain_nan(self, exc: Exception) -> None:
        if isinstance(exc, ValueError) and "NaN" in str(exc):
            raise ValueError(self._closed_form_nan_message()) from exc

    def _closed_form_nan_message(self, n_nan: int | None = None) -> str:
        what = f"{n_nan} missing values (NaN)" if n_nan else "missing values (NaN)"
        return (
            f"{type(self).__name__}: solver='closed_form' needs complete data; X has {what}. "
            "Use solver='em', which handles missing values exactly"
        )

    def _finish_closed_form(self, mom: Moments, q: int) -> PPCA:
        mom = aligned(mom)  # as a message brought it: see ddr.stats.engine.aligned
        check_some_weight(mom.count, type(self).__name__)
        S = mom.covariance(ddof=0)
        d = S.shape[0]
        lam, U = linalg.eigh(S)
        lam, U = lam[::-1], U[:, ::-1]
        floor = NOISE_FLOOR * max(float(np.trace(S)) / d, np.finfo(float).tiny)
        s2 = max(float(np.maximum(lam[q:], 0).mean()), floor)
        W = U[:, :q] * np.sqrt(np.maximum(lam[:q] - s2, 0.0))
        self._set_model(PPCAParams(W, mom.mean, s2))
        self.n_iter_ = 0
        ll = loglik_from_moments(mom.count, mom.covariance(ddof=0), mom.mean, self._model())
        self.loglik_curve_ = np.array([ll])
        return self

    def _moments_start(self) -> bool:
        return self.init == "pca"

    def _start_from(
        self, pm: PairwiseMoments, q: int
    ) -> tuple[EMState, np.ndarray, DataMoments | None]:
        """The ``pca`` start from the pass of pairwise moments: their covariance's closed form.

        On complete data the moments go back with the start: EM's iterations then run on the
        client (the start is the closed-form optimum: the first confirms it).
        """
        self._check_columns(pm.count)
        params, exact_ml = self._pca_start(pm, q)
        cov = np.nan_to_num(pm.covariance(), nan=0.0)
        var = np.diag(cov).copy()
        if not pm.complete:  # missing values: EM over the data
            return EMState(params), var, None
        moments = DataMoments(pm.total_weight, pm.mean, cov)
        if not exact_ml:
            return EMState(params), var, moments
        # the closed-form ML solution: its likelihood from the moments lets the first
        # (client-side) iteration confirm convergence
        ll = loglik_from_moments(pm.total_weight, cov, pm.mean, params)
        return EMState(params, start_loglik=ll), var, moments

    def _start(
        self, rows: Rows, q: int, weight: Any = None
    ) -> tuple[EMState, np.ndarray, DataMoments | None]:
        """The EM start from one pass: ``pca`` (pairwise moments, :meth:`_start_from`) or
        ``random``."""
        if self.init == "pca":
            return super()._start(rows, q, weight)
        # a random W around the data's mean and at its scale, from one pass of diagonal
        # moments: a start at the origin is not translation-equivariant (on data at a 1e8
        # offset EM from mu = 0 cancels every digit of its first residuals and stalls)
        mom = compute(Moments.spec(diagonal=True, nan_policy="omit"), rows.data, None, weight)
        check_some_weight(mom.count, type(self).__name__)
        self._check_columns(mom.count)
        var = np.asarray(mom.variance(0), dtype=np.float64)
        scale = max(float(np.mean(var)), np.finfo(float).tiny)
        rng = np.random.default_rng(self.random_state)
        W = rng.standard_normal((rows.shape[1], q)) * np.sqrt(scale)
        return EMState(PPCAParams(W, mom.mean.copy(), scale)), var, None

    def _check_fit(self, params: PPCAParams, problem: Any) -> None:
        """Warn when sigma^2 is not identified: the data have rank at most q."""
        if float(params.s2) <= float(problem.floor_for(params)) * (1.0 + 1e-6):
            warnings.warn(
                f"{type(self).__name__}: the noise variance reached its floor "
                f"({NOISE_FLOOR:g} times the mean variance of the features): the data have rank "
                f"at most n_components={params.q}, so sigma^2 is not identified (the "
                "likelihood is unbounded as it goes to 0). Use fewer components",
                UserWarning,
                stacklevel=user_stacklevel(),
            )

    def _pca_start(self, pm: PairwiseMoments, q: int) -> tuple[PPCAParams, bool]:
        """Closed-form solution of the pairwise-complete covariance, and whether it is the
        exact ML solution (complete data, nothing floored)."""
        cov = np.nan_to_num(pm.covariance(), nan=0.0)
        d = cov.shape[0]
        lam, U = linalg.eigh(cov)
        lam, U = lam[::-1], U[:, ::-1]
        scale = max(float(np.trace(cov)) / d, np.finfo(float).tiny)
        s2_ml = float(np.maximum(lam[q:], 0).mean())
        s2 = max(s2_ml, 1e-3 * scale)
        # keep every column away from 0: W = 0 columns are fixed points of EM
        gap = lam[:q] - s2
        W = U[:, :q] * np.sqrt(np.maximum(gap, 1e-3 * s2))
        complete = pm.complete
        exact_ml = complete and s2 == s2_ml and bool(np.all(gap >= 1e-3 * s2))
        return PPCAParams(W, pm.mean, s2), exact_ml

    def _set_model(self, params: PPCAParams) -> None:
        comps, ev = _canonical(params.W, params.s2)
        d = params.W.shape[0]
        self.components_ = comps
        self.explained_variance_ = ev
        self.noise_variance_ = float(params.s2)
        self.mean_ = params.mu.copy()
        total = ev.sum() + (d - ev.size) * params.s2
        self.explained_variance_ratio_ = ev / total
        self.n_components_ = int(ev.size)

    # ----------------------------------------------------------------- read-outs
    def _loadings(self) -> np.ndarray:
        """W in canonical form, shape (n_features, n_components)."""
        return self.components_.T * np.sqrt(
            np.maximum(self.explained_variance_ - self.noise_variance_, 0.0)
        )

    def _model(self) -> PPCAParams:
        return PPCAParams(self._loadings(), self.mean_, self.noise_variance_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.solver == "em"
        return tags
