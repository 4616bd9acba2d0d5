"""Factor analysis: PPCA with a diagonal noise covariance (seed 004), at its maximum likelihood.

Model: ``x = W z + mu + e``, ``z ~ N(0, I_q)``, ``e ~ N(0, Psi)`` with ``Psi = diag(psi)``,
so ``x ~ N(mu, W W^T + Psi)``: each feature has a noise variance of its own, where PPCA pools
them into one ``sigma^2``.

The fit:

1. one pass of :class:`~ddr.stats.PairwiseMoments` (pairwise-complete when values are
   missing) gives the covariance ``S``. On the client, the profile likelihood of the noise
   variances (W at its best for each psi) is maximised by L-BFGS-B from the squared multiple
   correlations (and ``n_init - 1`` more starts when asked), within a floor on each psi
   (:data:`HEYWOOD_FLOOR` times its variance: Heywood cases stop there, with a warning naming
   the features): :func:`fit_profile`, d x d work per step;
2. EM (:func:`ddr.em.fit_em`, SQUAREM-accelerated, its stopping rule) from there. On complete
   data the likelihood depends on the data only through ``S``: EM's iterations are computed
   from it on the client (:meth:`~ddr.stats.ppca_sums.PPCASums.from_moments`), and the fit
   reads the data **once**, whatever the number of iterations. With missing values each
   iteration is ONE pass of :class:`~ddr.stats.ppca_sums.PPCASums` with a per-feature noise
   (each row's posterior from its observed entries only) and the M-step on the client: per
   feature, the regression of the feature on ``[E z; 1]`` over the rows that observe it
   gives its loadings, its mean and its noise variance; PX-EM then rescales W.

Fitted loadings are in canonical form (``W^T Psi^{-1} W`` diagonal and decreasing, as
scikit-learn's; largest loading of each factor positive), then optionally rotated (varimax
or quartimax, scikit-learn's ``rotation``).
"""

from __future__ import annotations

import logging
import time
import warnings
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg, optimize
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE
from ddr.decomposition._latent_gaussian import (
    DataMoments,
    LatentGaussianModel,
    user_stacklevel,
)
from ddr.em import EMState
from ddr.linalg.rotation import ORTHOMAX_GAMMA, orthomax
from ddr.linalg.signs import component_signs
from ddr.stats.pairwise_moments import PairwiseMoments
from ddr.stats.ppca_sums import PPCAParams
from ddr.tags import DDRTags

__all__ = ["HEYWOOD_FLOOR", "FactorAnalysis", "fit_profile"]

logger = logging.getLogger(__name__)

_LOG_2PI = float(np.log(2 * np.pi))
_ROTATIONS = ("varimax", "quartimax")
#: scikit-learn's iterations and tolerance of the rotation of the factors
_ROTATION_MAX_ITER, _ROTATION_TOL = 100, 1e-6
#: the smallest noise variance of a feature, relative to its variance: the bound a Heywood
#: case (a noise variance heading for 0, where the likelihood only tends to its supremum)
#: stops at, with a warning naming the feature
HEYWOOD_FLOOR = 1e-6
#: iterations of the quasi-Newton maximisation of the profile likelihood on the client
_PROFILE_MAX_ITER = 10_000


def fit_profile(
    S: np.ndarray, q: int, psi: np.ndarray, floor: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """Maximum-likelihood factor analysis of a covariance matrix, on the client.

    The likelihood is maximised over ``psi`` alone, W at its best for each ``psi`` (the
    profile likelihood; Joreskog 1967, R's ``factanal``): with ``(lambda_i, u_i)`` the
    eigenpairs of ``S~ = Psi^{-1/2} S Psi^{-1/2}`` and ``g_i = max(lambda_i, 1)`` for the q
    largest, ``W = Psi^{1/2} U_q (G - 1)^{1/2}`` and

        -2/n log L = d log 2 pi + sum log psi + sum_q (log g_i + lambda_i / g_i)
                     + sum_{rest} lambda_i,

    whose gradient in ``log psi_j`` is ``sum_i w_i u_ji^2`` with ``w_i = 1 - lambda_i``, 0 for
    the q largest where ``lambda_i > 1``. L-BFGS-B in ``log psi`` within ``[floor, diag S]``:
    quasi-Newton steps reach a noise variance at its floor (a Heywood case) in a few
    iterations, where EM creeps towards it over tens of thousands. One symmetric
    eigendecomposition per evaluation: d x d work, no pass over the data.

    Parameters
    ----------
    S : ndarray of shape (d, d)
        Covariance (ddof=0).
    q : int
        Number of factors, at most d.
    psi : ndarray of shape (d,)
        Starting noise variances (moved inside the bounds).
    floor : ndarray of shape (d,)
        Smallest noise variance of each feature.

    Returns
    -------
    W : ndarray of shape (d, q)
    psi : ndarray of shape (d,)
    value : float
        ``-2/n log L`` at the result, less ``d log 2 pi``.
    converged : bool
        Whether L-BFGS-B met its tolerances.
    """
    d = S.shape[0]
    var = np.maximum(np.diag(S), floor)
    lo, hi = np.log(floor), np.log(var)

    def parts(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sd = np.exp(0.5 * t)
        lam, U = linalg.eigh(S / np.outer(sd, sd))
        return lam, U

    def objective(t: np.ndarray) -> tuple[float, np.ndarray]:
        lam, U = parts(t)
        top = lam[d - q :]
        g = np.maximum(top, 1.0)
        value = float(t.sum() + np.log(g).sum() + (top / g).sum() + lam[: d - q].sum())
        w = 1.0 - lam
        w[d - q :][top > 1.0] = 0.0
        return value, (U * U) @ w

    t0 = np.clip(np.log(np.maximum(psi, floor)), lo, hi)
    res = optimize.minimize(
        objective,
        t0,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi, strict=True)),
        options={"maxiter": _PROFILE_MAX_ITER, "ftol": 1e-15, "gtol": 1e-10},
    )
    t = np.clip(res.x, lo, hi)
    lam, U = parts(t)
    sd = np.exp(0.5 * t)
    gain = np.maximum(lam[d - q :], 1.0)
    W = sd[:, None] * U[:, d - q :] * np.sqrt(gain - 1.0)
    value, _ = objective(t)
    return W[:, ::-1].copy(), np.exp(t), value, bool(res.success)


def _canonical(W: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """W rotated so that ``W^T Psi^{-1} W`` is diagonal and decreasing, signs fixed."""
    _, _, Vt = linalg.svd(W / np.sqrt(psi)[:, None], full_matrices=False)
    Wc = W @ Vt.T
    return Wc * component_signs(Wc, axis=0)


def _input_width(n_samples: Any, n_features: Any) -> Any:
    return n_features


def _factor_limit(n_samples: Any, n_features: Any) -> tuple[int, str] | None:
    """At most ``n_features`` factors, and fewer than ``n_samples``."""
    if not n_features:
        return None
    if n_samples and n_samples - 1 < n_features:
        return n_samples - 1, "n_samples - 1"
    return n_features, "n_features"


class FactorAnalysis(LatentGaussianModel, BaseEstimator):
    """Factor analysis: one pass on complete data, EM with missing values (NaN allowed).

    Parameters
    ----------
    n_components : int or None, default=None
        Number of factors q, ``1 <= q <= n_features`` and ``q < n_samples``. None means
        ``n_features``.
    tol : float, default=1e-9
        The stopping rule of :mod:`ddr.em`: EM stops when the log-likelihood's last gain and
        its estimated gain still to come are both below ``tol * |loglik|`` (relative, where
        scikit-learn's ``tol`` is absolute).
    max_iter : int, default=1000
        Maximum number of EM iterations: passes over the data with missing values, on the
        client on complete data.
    noise_variance_init : array-like of shape (n_features,) or None, default=None
        Starting noise variances of the first start. None starts from the squared multiple
        correlations, ``(1 - q / (2 d)) / diag(S^{-1})`` (R's ``factanal``; the variances of
        the features where S is singular).
    rotation : {"varimax", "quartimax"} or None, default=None
        Orthogonal rotation of the fitted factors (scikit-learn's, same criteria and
        settings, by :func:`ddr.linalg.rotation.orthomax`); it changes ``components_`` and
        ``transform``'s coordinates, not the model.
    warm_start : bool, default=False
        When already fitted, ``fit`` continues EM from the fitted model (its parameters,
        ``loglike_`` and ``n_iter_``) for at most ``max_iter`` more passes: a fit stopped by
        ``max_iter``, or saved and loaded, resumes where it stopped.
    n_init : int, default=1
        Starts of the maximisation of the likelihood of the covariance, the best kept: the
        first from ``noise_variance_init``, the others from noise variances drawn uniformly
        between 0.05 and 0.95 times each feature's variance. The likelihood of factor
        analysis has local maxima (more often with q close to d, or Heywood cases): more
        starts find the highest more surely. They cost no pass over the data (with missing
        values they are compared on the pairwise-complete covariance, and EM runs once).
    random_state : int, RandomState instance or None, default=None
        The draws of the starts after the first.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The loadings W^T (factors by decreasing ``W^T Psi^{-1} W``, largest loading
        positive, then rotated if asked).
    noise_variance_ : ndarray of shape (n_features,)
        psi, each feature's noise variance (at least ``HEYWOOD_FLOOR`` times its variance).
    mean_ : ndarray of shape (n_features,)
    loglike_ : ndarray of shape (n_iter,)
        Log-likelihood of the observed entries, summed over rows, at each EM iteration (the
        trace of :func:`ddr.em.fit_em`: never decreasing).
    n_iter_ : int
        EM iterations (on the client for complete data).
    n_components_, n_features_in_ : int

    Notes
    -----
    Passes over the data: **1 on complete data**, whatever the number of iterations: the
    first pass (pairwise-complete moments) gives the covariance S, on which the likelihood of
    complete data depends alone; the maximum is found on the client, first by L-BFGS-B on
    the profile likelihood of the noise variances (``fit_profile``), then by EM iterations
    computed from S (``PPCASums.from_moments``, accelerated, to the stopping rule of
    :mod:`ddr.em`). With missing values, that fit of
    the pairwise-complete covariance is the start, and each EM iteration is one pass
    (``n_iter_ + 1`` in all): exact per-row posteriors from the observed entries, as
    :class:`~ddr.PPCA`; :meth:`impute` gives the conditional expectations.

    A noise variance that reaches its floor, ``HEYWOOD_FLOOR`` (1e-6) times the feature's
    variance, is a Heywood case: the likelihood keeps rising as it goes to 0, the factors
    explaining all of that feature's variance. The fit stops at the floor and warns, naming
    the features. A feature with zero variance (constant) is refused.
    """

    _em_what: ClassVar[str] = "FactorAnalysis (EM)"
    _noise_floor: ClassVar[float] = HEYWOOD_FLOOR

    def __init__(
        self,
        n_components: int | None = None,
        *,
        tol: float = 1e-9,
        max_iter: int = 1000,
        noise_variance_init: Any = None,
        rotation: str | None = None,
        warm_start: bool = False,
        n_init: int = 1,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.tol = tol
        self.max_iter = max_iter
        self.noise_variance_init = noise_variance_init
        self.rotation = rotation
        self.warm_start = warm_start
        self.n_init = n_init
        self.random_state = random_state

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "noise_variance_init": ["array-like", None],
        "rotation": [StrOptions(set(_ROTATIONS)), None],
        "warm_start": ["boolean"],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        assert tags.transformer is not None
        if self.n_components is None:  # one factor per feature
            tags.transformer.width = _input_width
        tags.transformer.component_prefix = "F"
        tags.transformer.n_components_limit = _factor_limit
        tags.loglik_attribute = "loglike_"
        tags.xarray_dims = {
            "components_": ("component", FEATURE),
            "mean_": (FEATURE,),
            "noise_variance_": (FEATURE,),
        }
        # loadings: the data per unit of a factor z ~ N(0, 1)
        tags.xarray_units = {"components_": 1, "mean_": 1, "noise_variance_": 2}
        return tags

    # ---------------------------------------------------------------------- fit
    def _check_shape(self, n_samples: int, n_features: int) -> int:
        name = type(self).__name__
        if not np.isnan(n_samples) and n_samples < 2:
            raise ValueError(f"{name} needs at least 2 samples; got n_samples={n_samples}")
        q = n_features if self.n_components is None else int(self.n_components)
        return self._check_components(q, n_samples, n_features)

    def _noise_init(self, var: np.ndarray) -> np.ndarray | None:
        if self.noise_variance_init is None:
            return None
        psi = np.asarray(self.noise_variance_init, dtype=np.float64)
        if psi.shape != var.shape:
            raise ValueError(
                f"{type(self).__name__}: noise_variance_init must have one value per feature, "
                f"shape ({var.size},); got shape {psi.shape}"
            )
        if not (np.isfinite(psi).all() and (psi > 0).all()):
            raise ValueError(
                f"{type(self).__name__}: noise_variance_init must be positive and finite; got "
                f"{psi.tolist() if psi.size <= 10 else 'values outside (0, inf)'}"
            )
        return psi

    def _starts(self, S: np.ndarray, q: int) -> list[np.ndarray]:
        """The starting noise variances: ``noise_variance_init`` or the squared multiple
        correlations, then ``n_init - 1`` draws."""
        var = np.diag(S)
        d = var.size
        first = self._noise_init(var)
        if first is None:
            first = var.copy()
            try:  # squared multiple correlations, scaled as factanal does
                with warnings.catch_warnings():
                    warnings.simplefilter("error", linalg.LinAlgWarning)
                    smc = (1.0 - 0.5 * q / d) / np.diag(linalg.inv(S, check_finite=False))
                if np.all(np.isfinite(smc)) and np.all(smc > 0):
                    first = smc
            except (linalg.LinAlgError, linalg.LinAlgWarning, ValueError):
                pass  # singular (rank below d): the variances
        rng = check_random_state(self.random_state)
        return [first] + [var * rng.uniform(0.05, 0.95, d) for _ in range(self.n_init - 1)]

    def _start_from(
        self, pm: PairwiseMoments, q: int
    ) -> tuple[EMState, np.ndarray, DataMoments | None]:
        """The maximum likelihood of the covariance of the one pass of pairwise moments, on
        the client: the fit itself on complete data (the moments go back for EM's client-side
        iterations), EM's start with missing values."""
        started = time.perf_counter()
        self._check_columns(pm.count)
        S = np.nan_to_num(pm.covariance(), nan=0.0)
        var = np.diag(S).copy()
        constant = np.flatnonzero(var <= 0)
        if constant.size:
            raise ValueError(
                f"{type(self).__name__}: feature(s) {constant[:10].tolist()}"
                f"{' ...' if constant.size > 10 else ''} ({constant.size} in all) have zero "
                "variance; factor analysis gives every feature a noise variance of its own, "
                "which would be 0 there (an unbounded likelihood). Drop constant features "
                "before fitting"
            )
        complete = pm.complete
        if complete:
            self._check_rank(S, q)
        floor = HEYWOOD_FLOOR * var
        best: tuple[float, np.ndarray, np.ndarray] | None = None
        for psi0 in self._starts(S, q):
            W, psi, value, _ = fit_profile(S, q, psi0, floor)
            if best is None or value < best[0]:
                best = (value, W, psi)
        assert best is not None
        _, W, psi = best
        logger.info(
            "FactorAnalysis: the likelihood of the covariance of the pass of moments maximised "
            "on the client (%d start(s), %.2f s)%s",
            self.n_init,
            time.perf_counter() - started,
            "" if complete else "; EM goes on over the data (missing values)",
        )
        state = EMState(PPCAParams(W, pm.mean, psi))
        moments = DataMoments(pm.total_weight, pm.mean, S) if complete else None
        return state, var, moments

    def _check_rank(self, S: np.ndarray, q: int) -> None:
        """Warn when the data cannot identify q factors: q at least their rank."""
        lam = linalg.eigvalsh(S)
        rank = int(np.sum(lam > lam[-1] * S.shape[0] * np.finfo(np.float64).eps))
        if q >= rank:
            warnings.warn(
                f"{type(self).__name__}: n_components={q} is at least the rank of the data "
                f"({rank}): the factors can reproduce the data exactly and the noise variances "
                "are not identified (they go to their floor). Use fewer factors",
                UserWarning,
                stacklevel=user_stacklevel(),
            )

    def _check_fit(self, params: PPCAParams, problem: Any) -> None:
        """A Heywood case: warn, naming the features whose noise variance is at its floor."""
        floor = problem.floor_for(params)
        at = np.flatnonzero(np.asarray(params.s2) <= floor * (1.0 + 1e-6))
        if not at.size:
            return
        names = getattr(self, "feature_names_in_", None)
        shown = [str(names[j]) if names is not None else int(j) for j in at[:10]]
        warnings.warn(
            f"{type(self).__name__}: Heywood case: the noise variance of feature(s) {shown}"
            f"{' ...' if at.size > 10 else ''} ({at.size} in all) reached its floor "
            f"({HEYWOOD_FLOOR:g} times the feature's variance): the factors explain all of "
            "its variance, and the likelihood would rise further as the noise variance goes "
            "to 0. The fit is the maximum with that bound; fewer factors, or dropping these "
            "features, may give an interior maximum",
            UserWarning,
            stacklevel=user_stacklevel(),
        )

    def _set_model(self, params: PPCAParams) -> None:
        W = _canonical(params.W, params.s2)
        if self.rotation is not None:
            # scikit-learn's rotation: no Kaiser normalisation, its iterations and stopping rule
            W = orthomax(
                W,
                gamma=ORTHOMAX_GAMMA[self.rotation],
                normalize=False,
                max_iter=_ROTATION_MAX_ITER,
                tol=_ROTATION_TOL,
                stop="gain",
            ).loadings
            W = W * component_signs(W, axis=0)
        self.components_ = np.ascontiguousarray(W.T)
        self.noise_variance_ = np.asarray(params.s2, dtype=np.float64).copy()
        self.mean_ = params.mu.copy()
        self.n_components_ = int(W.shape[1])

    def _model(self) -> PPCAParams:
        return PPCAParams(self.components_.T, self.mean_, self.noise_variance_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags
