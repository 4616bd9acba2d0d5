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
  (``loglik_curve_``); iterations stop when its relative increase falls below ``tol``.

Fitted components are put in canonical form: ``W = U diag(explained_variance_ -
noise_variance_)^{1/2}`` with orthonormal ``components_ = U^T`` (signs: largest loading
positive), so attributes compare one-to-one with scikit-learn's PCA (whose
``explained_variance_`` uses ddof=1; ours is the ML, ddof=0, value).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import dask.array as da
import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ddr.base import FEATURE, DDRMixin, FitPlan, fit_context, map_rows
from ddr.linalg.signs import component_signs
from ddr.progress import Passes
from ddr.stats import Moments, compute, lazy
from ddr.stats._input import is_dask, is_xarray
from ddr.stats.pairwise_moments import PairwiseMoments
from ddr.stats.ppca_sums import PPCAParams, PPCASums, complete_posterior, row_posterior

__all__ = ["PPCA"]

logger = logging.getLogger(__name__)

_SOLVERS = ("em", "closed_form")
_INITS = ("pca", "random")
# noise variance floor, relative to the mean variance of the data (exactly low-rank data
# would otherwise drive sigma^2 to 0 and the likelihood to infinity)
_S2_FLOOR = 1e-12
_LOG_2PI = float(np.log(2 * np.pi))


# ------------------------------------------------------------- blockwise maps
def _posterior_rows(
    X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None, np.ndarray, np.ndarray]:
    """Posteriors of some rows: means (n, q), the shared M^{-1} (q, q), the per-row M^{-1} of
    the rows with missing entries (their mask and (n_partial, q, q)) or None, the
    log-likelihoods (n,) and the NaN mask (n, d)."""
    params = PPCAParams(W, mu, s2)
    Y = np.subtract(X, mu, dtype=np.float64)
    nan = np.isnan(Y)
    partial = nan.any(axis=1)
    minv, logdet = params.shared_minv()
    n, q = Y.shape[0], params.q
    Ez = np.empty((n, q))
    ll = np.empty(n)
    minv_rows = None
    full = ~partial
    if full.any():
        Ez[full], ll[full] = complete_posterior(Y[full], params, minv, logdet)
    if partial.any():
        Yp = Y[partial]
        obs = (~nan[partial]).astype(np.float64)
        Ez[partial], minv_p, ll[partial] = row_posterior(
            np.where(nan[partial], 0.0, Yp), obs, params
        )
        minv_rows = (partial, minv_p)
    return Ez, minv, minv_rows, ll, nan


#: Rows per sub-block of the blockwise maps: bounds the (rows, q, q) temporaries of rows
#: with missing entries to a few MiB whatever the chunk size.
_MAP_ROWS = 4096


def _by_rows(fn: Any, X: np.ndarray, *args: Any) -> np.ndarray:
    if X.shape[0] <= _MAP_ROWS:
        return fn(X, *args)
    return np.concatenate(
        [fn(X[i : i + _MAP_ROWS], *args) for i in range(0, X.shape[0], _MAP_ROWS)], axis=0
    )


def _transform_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float) -> np.ndarray:
    return _posterior_rows(X, W, mu, s2)[0]


def _cov_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float) -> np.ndarray:
    _, minv, minv_rows, _, _ = _posterior_rows(X, W, mu, s2)
    cov = np.broadcast_to(s2 * minv, (X.shape[0], *minv.shape)).copy()
    if minv_rows is not None:
        cov[minv_rows[0]] = s2 * minv_rows[1]
    return cov


def _score_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float) -> np.ndarray:
    return _posterior_rows(X, W, mu, s2)[3]


def _impute_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float) -> np.ndarray:
    Ez, _, _, _, nan = _posterior_rows(X, W, mu, s2)
    out = np.array(X, dtype=X.dtype if X.dtype.kind == "f" else np.float64, copy=True)
    if nan.any():
        recon = Ez @ W.T + mu  # E[x_missing | x_observed] = mu_M + W_M E[z]
        out[nan] = recon[nan]
    return out


def _transform_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float) -> np.ndarray:
    """Posterior means of a block, shape (n, q)."""
    return _by_rows(_transform_rows, X, W, mu, s2)


def _cov_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float) -> np.ndarray:
    """Posterior covariances of a block, shape (n, q, q)."""
    return _by_rows(_cov_rows, X, W, mu, s2)


def _score_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float) -> np.ndarray:
    """Log-likelihood of each row's observed entries, shape (n,)."""
    return _by_rows(_score_rows, X, W, mu, s2)


def _impute_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float) -> np.ndarray:
    """The block with NaN replaced by their conditional expectations, shape (n, d)."""
    return _by_rows(_impute_rows, X, W, mu, s2)


def _inverse_block(Z: np.ndarray, W: np.ndarray, mu: np.ndarray) -> np.ndarray:
    return np.asarray(Z, dtype=np.float64) @ W.T + mu


# ------------------------------------------------------------------ the model
def _canonical(W: np.ndarray, s2: float) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal components (q, d) with fixed signs and the variances ``S^2 + s2``."""
    U, S, _ = linalg.svd(W, full_matrices=False)
    return (U * component_signs(U, axis=0)).T, S**2 + s2


def _loglik_from_moments(
    n: float, S: np.ndarray, mean: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: float
) -> float:
    """Gaussian log-likelihood of n rows with mean ``mean`` and covariance ``S`` (ddof=0)
    under ``N(mu, W W^T + s2 I)``: ``-n/2 [d log 2 pi + log|C| + tr(C^{-1} (S + e e^T))]``,
    ``e = mean - mu``, with the determinant lemma and Woodbury."""
    d, q = W.shape
    minv, logdet_m = PPCAParams(W, mu, s2).shared_minv()
    e = mean - mu
    T = S + np.outer(e, e)
    # tr(C^{-1} T) = (tr T - tr(M^{-1} W^T T W)) / s2
    trace = (np.trace(T) - np.sum(minv * (W.T @ T @ W))) / s2
    logdet = (d - q) * np.log(s2) + logdet_m
    return float(-0.5 * n * (d * _LOG_2PI + logdet + trace))


def _m_step(sums: PPCASums, mu: np.ndarray, floor: float) -> PPCAParams:
    """Joint update of W, mu and sigma^2 from the E-step sums, parameter-expanded.

    The regressions of every feature on ``[z; 1]`` over its observed rows give W, mu and
    sigma^2; the prior of z is then expanded to ``N(c, Sigma)`` with c and Sigma the moments
    of the posteriors, and mapped back (``mu += W c``, ``W <- W chol(Sigma)``): PX-EM (Liu,
    Rubin and Wu, 1998). Same fixed points and monotone likelihood as plain EM, but the mean
    and the scale of W no longer creep towards the optimum over hundreds of iterations.
    """
    q = sums.n_components
    if sums.has_missing:
        A = sums.feature_gram()
        try:
            Wt = np.linalg.solve(A, sums.yz[..., None])[..., 0]
        except np.linalg.LinAlgError:
            Wt = np.stack(
                [np.linalg.lstsq(a, b, rcond=None)[0] for a, b in zip(A, sums.yz, strict=True)]
            )
    else:
        Wt = linalg.solve(sums.zz_shared, sums.yz.T, assume_a="pos").T
    resid = sums.yy - np.einsum("jk,jk->j", Wt, sums.yz)
    s2 = max(float(np.maximum(resid, 0.0).sum()) / sums.n_obs, floor)
    W, mu = Wt[:, :q], mu + Wt[:, q]
    n = sums.zz_total[q, q]
    c = sums.zz_total[:q, q] / n
    sigma = sums.zz_total[:q, :q] / n - np.outer(c, c)
    try:
        chol = np.linalg.cholesky(sigma)
    except np.linalg.LinAlgError:  # degenerate posteriors: skip the expansion this step
        return PPCAParams(W, mu, s2)
    return PPCAParams(W @ chol, mu + W @ c, s2)


class PPCA(DDRMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Probabilistic PCA fitted by distributed EM (missing values allowed) or in closed form.

    Parameters
    ----------
    n_components : int or None, default=None
        Latent dimension q, with ``1 <= q < n_features`` (at least one discarded direction is
        needed to estimate the noise variance). None means ``n_features - 1``.
    max_iter : int, default=500
        Maximum number of EM iterations (each one pass over the data).
    tol : float, default=1e-9
        EM stops when the log-likelihood increases by less than ``tol * |loglik|``.
    solver : {"em", "closed_form"}, default="em"
        ``closed_form`` is one pass of Moments and an eigendecomposition (complete data only);
        ``em`` handles missing values (NaN) exactly.
    init : {"pca", "random"}, default="pca"
        EM start, each one pass. ``pca``: pairwise-complete moments and the closed-form
        solution of their covariance (on complete data this is already the ML solution: its
        likelihood, known from the moments, lets the first EM pass confirm convergence, so
        the fit reads the data twice). ``random``: Gaussian W at the data's scale, mu the
        data's mean, sigma^2 its mean variance (per-feature moments).
    random_state : int, default=0
        Seed of ``init="random"``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_features)
        Orthonormal principal axes of the model, by decreasing variance.
    explained_variance_ : ndarray of shape (n_components_,)
        Model variance along each axis (``|w_j|^2 + sigma^2``; ML, ddof=0).
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        Fractions of the model's total variance ``trace(C)``.
    noise_variance_ : float
        sigma^2.
    mean_ : ndarray of shape (n_features,)
    loglik_curve_ : ndarray of shape (n_iter_,)
        Log-likelihood of the observed entries, summed over rows, at the start of each EM
        iteration (closed form: the ML log-likelihood, one value).
    n_iter_ : int
        EM iterations (0 for the closed form).
    n_components_, n_features_in_ : int

    Notes
    -----
    Passes over the data: closed form 1; EM ``n_iter_ + 1`` (the start, then one per
    iteration). Missing values: each row's posterior uses only its
    observed features; rows with no observed value carry no information and are ignored by
    fit (with a warning), get the prior (zero) as posterior mean, the mean as imputation and
    log-likelihood 0; a feature with no observed value makes fit raise ValueError.
    """

    _component_prefix: ClassVar[str | None] = "PC"
    _xarray_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "components_": ("component", FEATURE),
        "mean_": (FEATURE,),
    }

    def __init__(
        self,
        n_components: int | None = None,
        *,
        max_iter: int = 500,
        tol: float = 1e-9,
        solver: str = "em",
        init: str = "pca",
        random_state: int = 0,
    ) -> None:
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.init = init
        self.random_state = random_state

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions(set(_SOLVERS))],
        "init": [StrOptions(set(_INITS))],
        "random_state": [Interval(Integral, 0, None, closed="left")],
    }

    @classmethod
    def _output_width(
        cls, params: dict[str, Any], n_samples: int | None, n_features: int | None
    ) -> int | None:
        if params.get("n_components") is None:
            return n_features - 1 if n_features else None
        return super()._output_width(params, n_samples, n_features)

    @classmethod
    def _n_components_limit(
        cls, n_samples: int | None, n_features: int | None
    ) -> tuple[int, str] | None:
        if not n_features:
            return None
        return n_features - 1, "n_features - 1"

    def _translation_invariant_output(self) -> str | None:
        return "transform"

    # --------------------------------------------------------------- validation
    def _check_shape(self, n_samples: int, n_features: int) -> int:
        """The latent dimension for data of this shape, or a ValueError."""
        name = type(self).__name__
        if n_features < 2:
            raise ValueError(
                f"{name} needs at least 2 features (one latent direction and noise); got "
                f"n_features={n_features}"
            )
        if n_samples < 2:
            raise ValueError(f"{name} needs at least 2 samples; got n_samples={n_samples}")
        q = n_features - 1 if self.n_components is None else int(self.n_components)
        if not q < n_features:
            raise ValueError(
                f"{name}: n_components must satisfy 1 <= n_components < n_features="
                f"{n_features} (sigma^2 is estimated from the discarded directions); got "
                f"n_components={q}"
            )
        return q

    # ---------------------------------------------------------------------- fit
    @fit_context
    def fit(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> PPCA:
        """Fit the model to the rows of X (NaN marks missing values with ``solver="em"``).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_dim : hashable, optional
            The sample dim of a DataArray X.

        Returns
        -------
        self
        """
        plan = self._fit_plan(X, y, sample_dim=sample_dim)
        if plan is not None:
            return plan.run()
        rows = self._rows(X, reset=True, sample_dim=sample_dim, allow_nan=True)
        q = self._check_shape(*rows.shape)
        self._fit_em(rows, q)
        return self

    def _pass_statistics(self, n_features: int) -> list[tuple[Any, int]]:
        """The E-step sums of an EM iteration (with missing entries, the widest case)."""
        q = self.n_components if isinstance(self.n_components, Integral) else n_features - 1
        q = max(1, min(int(q), n_features - 1))
        params = PPCAParams(np.zeros((n_features, q)), np.zeros(n_features), 1.0)
        return [(PPCASums.spec(params=params), n_features)]

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan | None:
        """The closed-form fit is one pass of Moments; EM is iterative (None)."""
        if self.solver != "closed_form":
            return None
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"), allow_nan=True)
        q = self._check_shape(*rows.shape)
        if not rows.is_lazy and np.isnan(rows.data).any():
            raise ValueError(self._closed_form_nan_message(int(np.isnan(rows.data).sum())))
        return FitPlan.over(
            rows,
            lazy(Moments, rows.data),
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
        S = mom.covariance(ddof=0)
        d = S.shape[0]
        lam, U = linalg.eigh(S)
        lam, U = lam[::-1], U[:, ::-1]
        floor = _S2_FLOOR * max(float(np.trace(S)) / d, np.finfo(float).tiny)
        s2 = max(float(np.maximum(lam[q:], 0).mean()), floor)
        W = U[:, :q] * np.sqrt(np.maximum(lam[:q] - s2, 0.0))
        self._set_model(PPCAParams(W, mom.mean, s2))
        self.n_iter_ = 0
        self.loglik_curve_ = np.array([self._gaussian_loglik(mom)])
        return self

    def _gaussian_loglik(self, mom: Moments) -> float:
        """Log-likelihood of the rows summarised by ``mom`` under the fitted model."""
        W = self._loadings()
        return _loglik_from_moments(
            mom.count, mom.covariance(ddof=0), mom.mean, W, self.mean_, self.noise_variance_
        )

    def _fit_em(self, rows: Any, q: int) -> None:
        d = rows.shape[1]
        curve: list[float] = []
        baseline = None
        passes = Passes(logger, "PPCA (EM)", unit="iteration")
        passes.start(
            f"at most {self.max_iter} iterations of one pass each, until the log-likelihood "
            f"rises by less than tol={self.tol:g} (relative)"
        )
        if self.init == "pca":
            start = time.perf_counter()
            pm = compute(PairwiseMoments, rows.data)  # the one init pass
            logger.info(
                "PPCA (EM): starting point from one pass of pairwise moments (%.2f s)",
                time.perf_counter() - start,
            )
            self._check_columns(pm.count)
            params, exact_ml = self._pca_start(pm, q)
            if exact_ml:
                # complete data: the start is the closed-form ML solution; its likelihood
                # from the moments lets the first EM pass confirm convergence
                baseline = _loglik_from_moments(
                    pm.n_rows, pm.covariance(), pm.mean, params.W, params.mu, params.s2
                )
        else:
            # a random W around the data's mean and at its scale, from one pass of diagonal
            # moments: a start at the origin is not translation-equivariant (on data at a 1e8
            # offset EM from mu = 0 cancels every digit of its first residuals and stalls)
            mom = compute(Moments.spec(diagonal=True, nan_policy="omit"), rows.data)
            self._check_columns(mom.count)
            scale = max(float(np.mean(mom.variance(0))), np.finfo(float).tiny)
            rng = np.random.default_rng(self.random_state)
            W = rng.standard_normal((d, q)) * np.sqrt(scale)
            params = PPCAParams(W, mom.mean.copy(), scale)
        floor = None
        converged = False
        n_iter = 0
        for n_iter in range(1, self.max_iter + 1):
            passes.begin()
            sums = compute(PPCASums.spec(params=params), rows.data)  # one pass
            if n_iter == 1:
                self._check_columns(sums.count)
                if sums.n_empty:
                    warnings.warn(
                        f"{type(self).__name__}: X has {sums.n_empty} row(s) with no observed "
                        "value (all NaN); they carry no information and are ignored by fit "
                        "(transform gives them the prior mean 0, impute the mean)",
                        UserWarning,
                        stacklevel=3,
                    )
                floor = _S2_FLOOR * max(
                    float((sums.yy / np.maximum(sums.count, 1)).mean()), np.finfo(float).tiny
                )
            curve.append(sums.loglik)
            params = _m_step(sums, params.mu, floor)
            previous = curve[-2] if len(curve) >= 2 else baseline
            passes.advance(_loglik_detail(curve[-1], previous))
            if previous is not None and curve[-1] - previous <= self.tol * abs(curve[-1]):
                converged = True
                break
        passes.finish(
            f"converged after {n_iter} iterations"
            if converged
            else f"stopped at max_iter={self.max_iter} without converging"
        )
        if not converged:
            warnings.warn(
                f"{type(self).__name__}: EM did not converge in max_iter={self.max_iter} "
                f"iterations (last relative log-likelihood change "
                f"{_rel_change(curve):.3g} > tol={self.tol}); increase max_iter",
                ConvergenceWarning,
                stacklevel=3,
            )
        self._set_model(params)
        self.n_iter_ = n_iter
        self.loglik_curve_ = np.asarray(curve)

    def _check_columns(self, count: np.ndarray) -> None:
        empty = np.flatnonzero(count == 0)
        if empty.size:
            shown = empty[:10].tolist()
            raise ValueError(
                f"{type(self).__name__}: feature(s) {shown}{' ...' if empty.size > 10 else ''} "
                f"({empty.size} in all) have no observed value (all NaN); their loadings and "
                "mean cannot be estimated. Drop these columns before fitting"
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
        complete = float(pm.pair_count.min()) == pm.n_rows
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
    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def _loadings(self) -> np.ndarray:
        """W in canonical form, shape (n_features, n_components_)."""
        return self.components_.T * np.sqrt(
            np.maximum(self.explained_variance_ - self.noise_variance_, 0.0)
        )

    def _args(self) -> tuple[np.ndarray, np.ndarray, float]:
        return self._loadings(), self.mean_, self.noise_variance_

    def get_covariance(self) -> np.ndarray:
        """Model covariance ``C = W W^T + sigma^2 I``, shape (n_features, n_features)."""
        check_is_fitted(self)
        W = self._loadings()
        return W @ W.T + self.noise_variance_ * np.eye(W.shape[0])

    def get_precision(self) -> np.ndarray:
        """Inverse of the model covariance (Woodbury), shape (n_features, n_features)."""
        check_is_fitted(self)
        W, s2 = self._loadings(), self.noise_variance_
        minv, _ = PPCAParams(W, self.mean_, s2).shared_minv()
        return (np.eye(W.shape[0]) - W @ minv @ W.T) / s2

    # ---------------------------------------------------------------- transforms
    def transform(
        self, X: Any, *, return_cov: bool = False, sample_dim: Hashable | None = None
    ) -> Any:
        """Posterior means ``E[z | observed entries of x]``, blockwise.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            NaN marks missing entries: each row uses its observed features only.
        return_cov : bool, default=False
            Also return the posterior covariances ``sigma^2 M_n^{-1}``.
        sample_dim : hashable, optional

        Returns
        -------
        Z : ndarray, dask array or DataArray of shape (n_samples, n_components_)
        cov : ndarray or dask array of shape (n_samples, n_components_, n_components_)
            Only with ``return_cov=True`` (a DataArray with dims (sample, component,
            component_) for xarray input).
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        Z = map_rows(
            rows,
            _transform_block,
            n_out=self.n_components_,
            dtype=np.float64,
            new_dim="component",
            name="ppca_transform",
            args=self._args(),
        )
        if not return_cov:
            return Z
        return Z, self._covariances(rows)

    def _covariances(self, rows: Any) -> Any:
        q = self.n_components_
        args = self._args()
        if rows.is_lazy:
            cov = rows.data.map_blocks(
                _cov_block,
                *args,
                new_axis=2,
                chunks=(rows.data.chunks[0], (q,), (q,)),
                dtype=np.float64,
                meta=np.empty((0, 0, 0)),
            )
        else:
            cov = _cov_block(rows.data, *args)
        if rows.kind != "xarray":
            return cov
        import xarray as xr

        sdim = rows.sample_dim
        coords = {sdim: rows.template.coords[sdim]} if sdim in rows.template.coords else {}
        return xr.DataArray(
            cov, dims=(sdim, "component", "component_"), coords=coords, name="posterior_covariance"
        )

    def inverse_transform(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """The model mean of x given z: ``z W^T + mu``, blockwise.

        Applied to posterior means this is the model's reconstruction (the values
        :meth:`impute` writes into missing entries).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_components_)

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, n_features_in_)
        """
        rows = self._component_rows(X, sample_dim=sample_dim)
        return map_rows(
            rows,
            _inverse_block,
            n_out=self.n_features_in_,
            dtype=np.float64,
            new_dim=getattr(self, "feature_dim_", None) or "feature",
            new_coords=getattr(self, "feature_coords_", None),
            name="ppca_inverse",
            args=(self._loadings(), self.mean_),
        )

    def impute(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """X with every NaN replaced by ``E[x_missing | x_observed]`` under the model, blockwise.

        Observed entries are returned unchanged. Lazy for dask input; a DataArray with the
        dims and coordinates of the input for xarray input.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)

        Returns
        -------
        same form and shape as X
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        dtype = rows.data.dtype if np.dtype(rows.data.dtype).kind == "f" else np.float64
        out = map_rows(
            rows,
            _impute_block,
            n_out=self.n_features_in_,
            dtype=dtype,
            new_dim=rows.feature_dim or "feature",
            name="ppca_impute",
            args=self._args(),
        )
        if rows.kind == "xarray":
            fdim = rows.feature_dim
            if fdim in rows.template.coords:
                out = out.assign_coords({fdim: rows.template.coords[fdim]})
            out = out.transpose(*X.dims)
        return out

    def score_samples(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Log-likelihood of each row's observed entries under the model, blockwise.

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples,)
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        return map_rows(
            rows,
            _score_block,
            n_out=None,
            dtype=np.float64,
            name="ppca_score_samples",
            args=self._args(),
        )

    def score(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> float:
        """Mean log-likelihood of the rows (of their observed entries)."""
        ll = self.score_samples(X, sample_dim=sample_dim)
        if is_xarray(ll):
            ll = ll.data
        if is_dask(ll):
            return float(da.mean(ll).compute())
        return float(np.mean(ll))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.solver == "em"
        return tags


def _loglik_detail(loglik: float, previous: float | None) -> str:
    """``log-likelihood L, change dL (relative r)`` for the progress record of an iteration."""
    if previous is None:
        return f"log-likelihood {loglik:.10g}"
    change = loglik - previous
    return (
        f"log-likelihood {loglik:.10g}, change {change:+.4g} "
        f"(relative {change / max(abs(loglik), np.finfo(float).tiny):+.2e})"
    )


def _rel_change(curve: list[float]) -> float:
    if len(curve) < 2:
        return float("inf")
    return (curve[-1] - curve[-2]) / abs(curve[-1])
