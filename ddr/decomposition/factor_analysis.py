"""Factor analysis by distributed EM: PPCA with a diagonal noise covariance (seed 004).

Model: ``x = W z + mu + e``, ``z ~ N(0, I_q)``, ``e ~ N(0, Psi)`` with ``Psi = diag(psi)``,
so ``x ~ N(mu, W W^T + Psi)``: each feature has a noise variance of its own, where PPCA pools
them into one ``sigma^2``.

The fit:

1. one pass of :class:`~ddr.stats.PairwiseMoments` (pairwise-complete when values are
   missing) gives the covariance ``S``; on the client, scikit-learn's algorithm runs on it
   (Barber 2012, 21.2.2: ``W`` from the top eigenvectors of ``Psi^{-1/2} S Psi^{-1/2}``, then
   ``psi = diag(S - W W^T)``), d x d work per iteration and no pass over the data. On complete
   data the likelihood depends on the data only through ``S``, so this is already the
   maximum-likelihood fit;
2. EM (:func:`ddr.em.fit_em`), each iteration ONE pass of
   :class:`~ddr.stats.ppca_sums.PPCASums` with a per-feature noise (each row's posterior from
   its observed entries only) and the M-step on the client: per feature, the regression of
   the feature on ``[E z; 1]`` over the rows that observe it gives its loadings, its mean and
   its noise variance; PX-EM then rescales W. On complete data the first pass confirms the
   start (2 passes in all); with missing values EM continues from it.

Fitted loadings are in canonical form (``W^T Psi^{-1} W`` diagonal and decreasing, as
scikit-learn's; largest loading of each factor positive), then optionally rotated (varimax
or quartimax, scikit-learn's ``rotation``).
"""

from __future__ import annotations

import logging
import time
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator
from sklearn.decomposition._factor_analysis import _ortho_rotation
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE
from ddr.decomposition._latent_gaussian import (
    NOISE_FLOOR,
    LatentGaussianModel,
    loglik_from_moments,
)
from ddr.em import EMState
from ddr.linalg.signs import component_signs
from ddr.stats import compute
from ddr.stats._input import Rows
from ddr.stats.pairwise_moments import PairwiseMoments
from ddr.stats.ppca_sums import PPCAParams
from ddr.tags import DDRTags, n_components_limit

__all__ = ["FactorAnalysis", "fit_covariance"]

logger = logging.getLogger(__name__)

_LOG_2PI = float(np.log(2 * np.pi))
_ROTATIONS = ("varimax", "quartimax")
#: the covariance fit on the client stops at this fraction of EM's tol (see _start), or after
#: this many iterations (max_iter counts the passes over the data)
_CLIENT_TOL = 1e-3
_CLIENT_MAX_ITER = 10_000


def fit_covariance(
    S: np.ndarray, q: int, psi: np.ndarray, *, tol: float, max_iter: int, floor: np.ndarray
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Maximum-likelihood factor analysis of a covariance matrix (scikit-learn's algorithm).

    Each iteration: the top q eigenpairs ``(lambda, U)`` of ``Psi^{-1/2} S Psi^{-1/2}`` give
    ``W = Psi^{1/2} U (max(lambda, 1) - 1)^{1/2}`` (the best W for this Psi), then ``psi =
    max(diag(S) - diag(W W^T), floor)``; it stops when the log-likelihood per row rises by
    less than ``tol`` (relative) and keeps the best iterate.

    Parameters
    ----------
    S : ndarray of shape (d, d)
        Covariance (ddof=0).
    q : int
        Number of factors, at most d.
    psi : ndarray of shape (d,)
        Starting noise variances.
    tol : float
    max_iter : int
    floor : ndarray of shape (d,)
        Smallest noise variance of each feature.

    Returns
    -------
    W : ndarray of shape (d, q)
    psi : ndarray of shape (d,)
    converged : bool
    """
    d = S.shape[0]
    var = np.diag(S).copy()
    best: Any = None  # (W, psi, loglik) of the best iterate so far
    for _ in range(max_iter):
        sd = np.sqrt(psi)
        St = S / np.outer(sd, sd)
        lam, U = linalg.eigh(St, subset_by_index=(d - q, d - 1))
        gain = np.maximum(lam, 1.0)
        W = sd[:, None] * U * np.sqrt(gain - 1.0)
        # log|C| = sum log psi + sum log gain; tr(C^-1 S) = tr(St) - sum lam + sum lam / gain
        ll = -0.5 * float(
            d * _LOG_2PI
            + np.log(psi).sum()
            + np.log(gain).sum()
            + np.trace(St)
            - lam.sum()
            + (lam / gain).sum()
        )
        if best is not None and ll - best[2] <= tol * abs(ll):
            W, psi, _ = max(best, (W, psi, ll), key=lambda b: b[2])
            return W, psi, True
        best = (W, psi, ll)
        psi = np.maximum(var - np.einsum("ij,ij->i", W, W), floor)
    return best[0], best[1], False


def _canonical(W: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """W rotated so that ``W^T Psi^{-1} W`` is diagonal and decreasing, signs fixed."""
    _, _, Vt = linalg.svd(W / np.sqrt(psi)[:, None], full_matrices=False)
    Wc = W @ Vt.T
    return Wc * component_signs(Wc, axis=0)


def _input_width(n_samples: Any, n_features: Any) -> Any:
    return n_features


class FactorAnalysis(LatentGaussianModel, BaseEstimator):
    """Factor analysis fitted by distributed EM; missing values (NaN) allowed.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of factors q, ``1 <= q <= n_features``. None means ``n_features``.
    tol : float, default=1e-9
        Iterations stop when the log-likelihood rises by less than ``tol * |loglik|``
        (relative, where scikit-learn's ``tol`` is absolute), on the client as in EM.
    max_iter : int, default=1000
        Maximum number of EM iterations (each one pass over the data).
    noise_variance_init : array-like of shape (n_features,) or None, default=None
        Starting noise variances; None starts from the variances of the features.
    rotation : {"varimax", "quartimax"} or None, default=None
        Orthogonal rotation of the fitted factors (scikit-learn's, same criteria); it
        changes ``components_`` and ``transform``'s coordinates, not the model.
    warm_start : bool, default=False
        When already fitted, ``fit`` continues EM from the fitted model (its parameters,
        ``loglike_`` and ``n_iter_``) for at most ``max_iter`` more passes: a fit stopped by
        ``max_iter``, or saved and loaded, resumes where it stopped.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The loadings W^T (factors by decreasing ``W^T Psi^{-1} W``, largest loading
        positive, then rotated if asked).
    noise_variance_ : ndarray of shape (n_features,)
        psi, each feature's noise variance.
    mean_ : ndarray of shape (n_features,)
    loglike_ : ndarray of shape (n_iter,)
        Log-likelihood of the observed entries, summed over rows, at the start of each EM
        iteration.
    n_iter_ : int
        EM iterations (passes after the start).
    n_components_, n_features_in_ : int

    Notes
    -----
    Passes over the data: ``n_iter_ + 1`` (the pairwise moments of the start, one per EM
    iteration); 2 on complete data. Missing values are handled as in :class:`~ddr.PPCA`:
    exact per-row posteriors from the observed entries, :meth:`impute` for the conditional
    expectations. A feature with zero variance (constant) is refused: its noise variance
    would be 0 and the likelihood unbounded.
    """

    _em_what: ClassVar[str] = "FactorAnalysis (EM)"

    def __init__(
        self,
        n_components: int | None = None,
        *,
        tol: float = 1e-9,
        max_iter: int = 1000,
        noise_variance_init: Any = None,
        rotation: str | None = None,
        warm_start: bool = False,
    ) -> None:
        self.n_components = n_components
        self.tol = tol
        self.max_iter = max_iter
        self.noise_variance_init = noise_variance_init
        self.rotation = rotation
        self.warm_start = warm_start

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "noise_variance_init": ["array-like", None],
        "rotation": [StrOptions(set(_ROTATIONS)), None],
        "warm_start": ["boolean"],
    }

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        assert tags.transformer is not None
        if self.n_components is None:  # one factor per feature
            tags.transformer.width = _input_width
        tags.transformer.component_prefix = "F"
        tags.transformer.n_components_limit = n_components_limit("n_features")
        tags.loglik_attribute = "loglike_"
        tags.xarray_dims = {
            "components_": ("component", FEATURE),
            "mean_": (FEATURE,),
            "noise_variance_": (FEATURE,),
        }
        return tags

    # ---------------------------------------------------------------------- fit
    def _check_shape(self, n_samples: int, n_features: int) -> int:
        name = type(self).__name__
        if n_samples < 2:
            raise ValueError(f"{name} needs at least 2 samples; got n_samples={n_samples}")
        q = n_features if self.n_components is None else int(self.n_components)
        if q > n_features:
            raise ValueError(
                f"{name}: n_components must satisfy 1 <= n_components <= n_features="
                f"{n_features}; got n_components={q}"
            )
        return q

    def _noise_init(self, var: np.ndarray) -> np.ndarray:
        if self.noise_variance_init is None:
            return var.copy()
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

    def _start(self, rows: Rows, q: int) -> EMState:
        """ML factor analysis of the pairwise-complete covariance: one pass, then the client."""
        started = time.perf_counter()
        pm = compute(PairwiseMoments, rows.data)  # the one start pass
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
        # three digits beyond EM's tol: with a linear rate r the distance left to the
        # optimum is the last rise times r / (1 - r), under tol for rates up to 0.999, so
        # the EM pass that follows confirms the start instead of creeping on from it
        W, psi, converged = fit_covariance(
            S,
            q,
            self._noise_init(var),
            tol=_CLIENT_TOL * self.tol,
            max_iter=_CLIENT_MAX_ITER,
            floor=NOISE_FLOOR * var,
        )
        logger.info(
            "FactorAnalysis (EM): starting point from one pass of pairwise moments and the "
            "covariance fit on the client (%s; %.2f s)",
            "converged" if converged else f"not converged in max_iter={self.max_iter}",
            time.perf_counter() - started,
        )
        params = PPCAParams(W, pm.mean, psi)
        if not (converged and float(pm.pair_count.min()) == pm.n_rows):
            return EMState(params)
        # complete data: the covariance fit is the ML fit, and its likelihood from the
        # moments lets the first EM pass confirm convergence
        return EMState(
            params, start_loglik=loglik_from_moments(pm.n_rows, pm.covariance(), pm.mean, params)
        )

    def _set_model(self, params: PPCAParams) -> None:
        W = _canonical(params.W, params.s2)
        if self.rotation is not None:
            W = _ortho_rotation(W, method=self.rotation).T
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
