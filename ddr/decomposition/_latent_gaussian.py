"""What PPCA and factor analysis share: the model ``x = W z + mu + e`` and its EM fit.

``z ~ N(0, I_q)`` and ``e ~ N(0, Psi)``, so ``x ~ N(mu, C)`` with ``C = W W^T + Psi``: PPCA has
``Psi = sigma^2 I``, factor analysis a diagonal ``Psi`` (seed 004). Both are fitted by the EM
driver of :mod:`ddr.em` with the E-step sums :class:`~ddr.stats.ppca_sums.PPCASums` (posterior
moments of every row from its observed entries only) and the M-step :func:`m_step`, and both
apply the fitted model blockwise with the functions here: posterior means and covariances,
log-likelihoods of the observed entries, imputation, reconstruction.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Hashable
from numbers import Integral
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
import sklearn
from scipy import linalg
from sklearn.utils.validation import check_is_fitted

from ddr.base import FitPlan, check_some_weight, fit_context, map_rows
from ddr.decomposition._latent_blocks import (
    cov_block,
    impute_block,
    inverse_block,
    score_block,
    transform_block,
)
from ddr.em import EMState, fit_em
from ddr.families import Blockwise, ComponentTransformer, LogLikelihoodScore
from ddr.stats import compute, lazy
from ddr.stats._input import Rows
from ddr.stats.engine import aligned
from ddr.stats.pairwise_moments import PairwiseMoments
from ddr.stats.ppca_sums import PPCAParams, PPCASums
from ddr.tags import DDRTags, get_ddr_tags, unknown_passes

__all__ = [
    "DataMoments",
    "LatentGaussianModel",
    "loglik_from_moments",
    "m_step",
    "user_stacklevel",
]

logger = logging.getLogger(__name__)

_LOG_2PI = float(np.log(2 * np.pi))
#: noise variance floor, relative to the variance of the data (exactly low-rank data would
#: otherwise drive the noise to 0 and the likelihood to infinity)
NOISE_FLOOR = 1e-12

_LIBRARIES = (str(Path(__file__).resolve().parents[1]), str(Path(sklearn.__file__).parent))


def user_stacklevel() -> int:
    """The ``stacklevel`` for a warning its caller raises that names the first frame outside
    ddr and scikit-learn: the user's call of ``fit``, however deep the fit's path (a plan's
    finish, EM's iterations) runs."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARIES):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


# ------------------------------------------------------------- blockwise maps
def loglik_from_moments(n: float, S: np.ndarray, mean: np.ndarray, params: PPCAParams) -> float:
    """Gaussian log-likelihood of n rows with mean ``mean`` and covariance ``S`` (ddof=0)
    under ``N(mu, W W^T + Psi)``: ``-n/2 [d log 2 pi + log|C| + tr(C^{-1} (S + e e^T))]``,
    ``e = mean - mu``, with the determinant lemma and Woodbury (on the rows scaled to unit
    noise when Psi is diagonal)."""
    unit, inv_sd = params.whitened()
    W, s2 = unit.W, unit.s2
    d, q = W.shape
    minv, logdet_m = unit.shared_minv()
    e = mean - params.mu
    T = S + np.outer(e, e)
    logdet = (d - q) * np.log(s2) + logdet_m
    if inv_sd is not None:
        T = T * np.outer(inv_sd, inv_sd)
        logdet += float(np.log(params.s2).sum())
    # tr(C^{-1} T) = (tr T - tr(M^{-1} W^T T W)) / s2
    trace = (np.trace(T) - np.sum(minv * (W.T @ T @ W))) / s2
    return float(-0.5 * n * (d * _LOG_2PI + logdet + trace))


def m_step(
    sums: PPCASums, mu: np.ndarray, floor: float | np.ndarray, *, diagonal: bool
) -> PPCAParams:
    """Joint update of W, mu and the noise from the E-step sums, parameter-expanded.

    The regressions of every feature on ``[z; 1]`` over its observed rows give W, mu and the
    residual variances (pooled: PPCA's sigma^2; per feature with ``diagonal``: factor
    analysis's Psi, each at least ``floor``); the prior of z is then expanded to ``N(c,
    Sigma)`` with c and Sigma the moments of the posteriors, and mapped back (``mu += W c``,
    ``W <- W chol(Sigma)``): PX-EM (Liu, Rubin and Wu, 1998). Same fixed points and monotone
    likelihood as plain EM, but the mean and the scale of W no longer creep towards the
    optimum over hundreds of iterations.
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
    resid = np.maximum(sums.yy - np.einsum("jk,jk->j", Wt, sums.yz), 0.0)
    if diagonal:
        noise: float | np.ndarray = np.maximum(resid / np.maximum(sums.count, 1.0), floor)
    else:
        noise = max(float(resid.sum()) / sums.n_obs, float(floor))
    W, mu = Wt[:, :q], mu + Wt[:, q]
    n = sums.zz_total[q, q]
    c = sums.zz_total[:q, q] / n
    sigma = sums.zz_total[:q, :q] / n - np.outer(c, c)
    try:
        chol = np.linalg.cholesky(sigma)
    except np.linalg.LinAlgError:  # degenerate posteriors: skip the expansion this step
        return PPCAParams(W, mu, noise)
    return PPCAParams(W @ chol, mu + W @ c, noise)


def checked_weight(pm: PairwiseMoments, owner: Any) -> PairwiseMoments:
    """``pm``, refused when its rows' weights sum to zero (no model of no rows)."""
    check_some_weight(pm.total_weight, type(owner).__name__)
    return pm


class DataMoments(NamedTuple):
    """What the first pass over complete data leaves: all the E-step ever needs."""

    n: float
    mean: np.ndarray  # (d,)
    covariance: np.ndarray  # (d, d), ddof=0


class _EMProblem:
    """The EM problem of :class:`LatentGaussianModel` for :func:`ddr.em.fit_em`.

    Over the data, the E-step is one pass of :class:`PPCASums`; on complete data, given their
    ``moments``, it is :meth:`PPCASums.from_moments` on the client. ``var`` (each feature's
    variance, from the start's pass; else from the first sums) sets the floor of the noise
    variances (``floor`` times it) and the units of the vectors SQUAREM extrapolates: loadings
    and mean over the features' standard deviations, log noise variances.
    """

    def __init__(
        self,
        model: LatentGaussianModel,
        *,
        floor: float,
        var: np.ndarray | None = None,
        moments: DataMoments | None = None,
    ) -> None:
        self.model = model
        self.relative_floor = floor
        self.moments = moments
        self.sd: np.ndarray | None = None
        self.checked = False
        if var is not None:
            self._set_scale(var)

    def _set_scale(self, var: np.ndarray) -> None:
        tiny = np.finfo(np.float64).tiny
        var = np.maximum(np.asarray(var, dtype=np.float64), tiny)
        self.var = var
        self.sd = np.sqrt(var)
        self._floors = (
            self.relative_floor * var,
            self.relative_floor * max(float(var.mean()), tiny),
        )

    def floor_for(self, params: PPCAParams) -> float | np.ndarray:
        """The smallest noise variance(s) of parameters like ``params``."""
        assert self.sd is not None
        return self._floors[1] if params.isotropic else self._floors[0]

    def statistic(self, params: PPCAParams) -> Any:
        return PPCASums.spec(params=params)

    def expectation(self, params: PPCAParams) -> PPCASums:
        assert self.moments is not None
        n, mean, cov = self.moments
        return PPCASums.from_moments(n, mean, cov, params=params)

    def m_step(self, sums: PPCASums, params: PPCAParams) -> PPCAParams:
        if not self.checked:  # the first sums of this fit: check what the data allow
            self.checked = True
            self.model._check_columns(sums.count)
            if sums.n_empty:
                warnings.warn(
                    f"{type(self.model).__name__}: X has {sums.n_empty} row(s) with no observed "
                    "value (all NaN); they carry no information and are ignored by fit "
                    "(transform gives them the prior mean 0, impute the mean)",
                    UserWarning,
                    stacklevel=user_stacklevel(),
                )
            if self.sd is None:
                self._set_scale(sums.yy / np.maximum(sums.count, 1))
        floor = self.floor_for(params)
        return m_step(sums, params.mu, floor, diagonal=not params.isotropic)

    # --------------------------------------------- SQUAREM's coordinates (ddr.em)
    def to_vector(self, params: PPCAParams) -> np.ndarray:
        assert self.sd is not None
        sd = self.sd
        noise = np.log(
            np.asarray(params.s2, dtype=np.float64)
            / (self.var if not params.isotropic else self.var.mean())
        )
        return np.concatenate(
            [(params.W / sd[:, None]).ravel(), params.mu / sd, np.atleast_1d(noise)]
        )

    def from_vector(self, vector: np.ndarray, params: PPCAParams) -> PPCAParams | None:
        assert self.sd is not None
        d, q = params.W.shape
        sd = self.sd
        W = vector[: d * q].reshape(d, q) * sd[:, None]
        mu = vector[d * q : d * q + d] * sd
        if params.isotropic:
            s2: float | np.ndarray = float(np.exp(vector[-1]) * self.var.mean())
        else:
            s2 = np.exp(vector[d * q + d :]) * self.var
        s2 = np.maximum(s2, self.floor_for(params))  # the floor is a bound: project onto it
        if not (np.isfinite(W).all() and np.isfinite(mu).all() and np.all(np.isfinite(s2))):
            return None
        return PPCAParams(W, mu, s2)


class LatentGaussianModel(
    LogLikelihoodScore,
    ComponentTransformer,
    # transform takes return_cov (a tuple out): not wrapped by scikit-learn's set_output,
    # as before this base was a transformer
    auto_wrap_output_keys=None,
):
    """Fit by EM and read-outs of ``x = W z + mu + e`` (PPCA and factor analysis).

    Subclasses hold the model in their own fitted attributes and define four methods:
    ``_model() -> PPCAParams`` (the fitted model back from them), ``_set_model(params)``
    (store a fitted model in them), ``_check_shape(n_samples, n_features) -> q`` (the number
    of components, or a ValueError; :meth:`_check_components` checks it against the tags'
    ``n_components_limit``) and ``_start_from(pairwise_moments, q) -> (EMState, var,
    moments)`` (where EM starts, from the one pass of pairwise moments of :meth:`_fit_plan`:
    the state, each feature's variance, and on complete data the :class:`DataMoments` from
    which EM's iterations are then computed on the client, else None; ``_start(rows, q)``
    may start otherwise, from a pass of its own); ``_check_fit(params, problem)`` may warn
    about the fitted model. Everything
    else is here. Their tags' ``loglik_attribute`` names the fitted attribute that holds the
    log-likelihood trace of EM; ``_em_what`` prefixes the progress records; ``_noise_floor``
    is the smallest noise variance relative to the data's variance. ``tol``, ``max_iter``
    and ``warm_start`` are their parameters.
    """

    _abstract_estimator = True
    _em_what: ClassVar[str] = "EM"
    #: the smallest noise variance, relative to the variance of the data
    _noise_floor: ClassVar[float] = NOISE_FLOOR

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = unknown_passes  # EM stops when it converges
        tags.fit.statistics = self._widest_pass
        tags.translation_invariant = "transform"
        tags.checks.expected_failed_checks = {
            "check_sample_weight_equivalence_on_dense_data": (
                "the check's default n_components (n_features - 1) exceeds the rows of its "
                "weighted data less one, and is refused there (not identified), while its "
                "repeated rows pass the limit with no more rank (weights equal repeated rows "
                "at identified sizes: tests/test_sample_weight.py)"
            )
        }
        return tags

    @property
    def _curve_name(self) -> str:
        """The fitted attribute of the log-likelihood per EM iteration."""
        name = self.__ddr_tags__().loglik_attribute
        assert name is not None
        return name

    # ---------------------------------------------------------------------- fit
    @fit_context
    def fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> Any:
        """Fit the model to the rows of X (NaN marks missing values; PPCA's closed form needs
        complete data).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like, dask array or DataArray of shape (n_samples,), optional
            Non-negative frequency weights: a row of weight ``w`` counts as ``w`` copies of
            it in every statistic and in the log-likelihood (0: as if it were not there).
        sample_dim : hashable, optional
            The sample dim of a DataArray X.

        Returns
        -------
        self
        """
        plan = self._fit_plan(X, y, sample_weight=sample_weight, sample_dim=sample_dim)
        if plan is not None:  # one pass of moments first (see _fit_plan)
            return plan.run()
        resume = self._resume_state()
        rows = self._rows(X, reset=True, sample_dim=sample_dim, allow_nan=True)
        q = self._check_shape(*rows.shape)
        self._fit_em(rows, q, resume, sample_weight)
        return self

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan | None:
        """One pass of pairwise-complete moments, then the rest on the client: the whole fit
        on complete data, EM's start with missing values (its passes follow in the finish).

        A plan, so that a pipeline reads X in the pass it shares with the other one-pass fits
        of the same input. None when ``warm_start`` continues a fitted model (EM over the
        data from it, no start pass).
        """
        if not self._moments_start() or self._resume_state() is not None:
            return None
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"), allow_nan=True)
        q = self._check_shape(*rows.shape)
        weight = fit_params.get("sample_weight")
        return FitPlan.over(
            rows,
            lazy(PairwiseMoments, rows.data, None, weight),
            lambda pm: self._finish_plan(rows, q, pm, weight),
        )

    def _finish_plan(self, rows: Rows, q: int, pm: PairwiseMoments, weight: Any) -> Any:
        state, var, moments = self._start_from(checked_weight(aligned(pm), self), q)
        self._run_em(rows, state, var, moments, weight)
        return self

    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        """The widest of the passes: the start's pairwise moments (d x d) or the E-step sums
        of an EM iteration (with missing entries, d x (q+1)^2)."""
        q = self.n_components if isinstance(self.n_components, Integral) else n_features
        q = max(1, min(int(q), n_features))
        params = PPCAParams(np.zeros((n_features, q)), np.zeros(n_features), 1.0)
        specs = [PPCASums.spec(params=params)]
        if self._moments_start():
            specs.append(PairwiseMoments.spec())
        widest = max(specs, key=lambda spec: spec.value_nbytes(n_features))
        return [(widest, n_features)]

    def _moments_start(self) -> bool:
        """Whether the fit starts from one pass of pairwise moments (:meth:`_fit_plan`)."""
        return True

    def _resume_state(self) -> EMState | None:
        """With ``warm_start=True`` and a fitted model: that model as an EM state to continue
        from (take it before the new data reset ``n_features_in_``); else None."""
        if not (getattr(self, "warm_start", False) and hasattr(self, "n_iter_")):
            return None
        curve = tuple(float(v) for v in np.asarray(getattr(self, self._curve_name)))
        return EMState(self._model(), curve, int(self.n_iter_))

    def _fit_em(self, rows: Rows, q: int, resume: EMState | None, weight: Any = None) -> None:
        """EM from ``resume`` or from :meth:`_start`; sets the fitted attributes.

        On complete data (the start's pass saw no missing value) EM runs on the client from
        the moments of that pass: no further pass, whatever the number of iterations.
        """
        if resume is not None and resume.params.W.shape != (rows.shape[1], q):
            d, k = resume.params.W.shape
            raise ValueError(
                f"{type(self).__name__}: warm_start=True continues the fitted model of {d} "
                f"features and {k} components; this fit has {rows.shape[1]} features and asks "
                f"for {q} components. Set warm_start=False to fit afresh"
            )
        if resume is None:
            state, var, moments = self._start(rows, q, weight)
        else:
            state, var, moments = resume, None, None
        self._run_em(rows, state, var, moments, weight)

    def _start(
        self, rows: Rows, q: int, weight: Any = None
    ) -> tuple[EMState, np.ndarray, DataMoments | None]:
        """Where EM starts, from one pass over the data (default: pairwise moments)."""
        pm = compute(PairwiseMoments, rows.data, None, weight)
        return self._start_from(checked_weight(pm, self), q)

    def _run_em(
        self,
        rows: Rows,
        state: EMState,
        var: np.ndarray | None,
        moments: DataMoments | None,
        weight: Any = None,
    ) -> None:
        """EM from ``state`` (on the client when ``moments`` are given; over the data, with
        the rows' weights, otherwise); sets the fitted attributes."""
        problem = _EMProblem(self, floor=self._noise_floor, var=var, moments=moments)
        state = fit_em(
            None if moments is not None else rows.data,
            problem,
            state,
            tol=self.tol,
            max_iter=self.max_iter,
            logger=logging.getLogger(type(self).__module__),
            what=self._em_what,
            owner=type(self).__name__,
            stacklevel=user_stacklevel(),
            sample_weight=None if moments is not None else weight,
        )
        self._set_model(state.params)
        self.n_iter_ = state.n_iter
        setattr(self, self._curve_name, np.asarray(state.loglik))
        self._check_fit(state.params, problem)

    def _check_fit(self, params: PPCAParams, problem: _EMProblem) -> None:
        """Warnings about the fitted model (none by default)."""

    def _check_components(self, q: int, n_samples: Any, n_features: int) -> int:
        """``q`` if 1 <= q <= the tags' ``n_components_limit`` for data of this shape (the
        limit ``ddr plan`` checks), else a ValueError saying why."""
        n = None if n_samples is None or np.isnan(n_samples) else int(n_samples)
        transformer = get_ddr_tags(self).transformer
        assert transformer is not None
        limit = transformer.n_components_limit(n, n_features)
        if q < 1 or (limit is not None and q > limit[0]):
            bound = "" if limit is None else f" <= {limit[1]} = {limit[0]}"
            raise ValueError(
                f"{type(self).__name__}: n_components must satisfy 1 <= n_components{bound}; "
                f"got n_components={q}. More components than that are not identified by "
                "data of this shape"
            )
        return q

    def _check_columns(self, count: np.ndarray) -> None:
        empty = np.flatnonzero(count == 0)
        if empty.size:
            shown = empty[:10].tolist()
            raise ValueError(
                f"{type(self).__name__}: feature(s) {shown}{' ...' if empty.size > 10 else ''} "
                f"({empty.size} in all) have no observed value (all NaN); their loadings and "
                "mean cannot be estimated. Drop these columns before fitting"
            )

    # ----------------------------------------------------------------- read-outs
    def _args(self) -> tuple[np.ndarray, np.ndarray, Any]:
        params = self._model()
        return params.W, params.mu, params.s2

    def get_covariance(self) -> np.ndarray:
        """Model covariance ``C = W W^T + Psi``, shape (n_features, n_features)."""
        check_is_fitted(self)
        W, _, s2 = self._args()
        C = W @ W.T
        C.flat[:: C.shape[0] + 1] += s2
        return C

    def get_precision(self) -> np.ndarray:
        """Inverse of the model covariance (Woodbury), shape (n_features, n_features)."""
        check_is_fitted(self)
        unit, inv_sd = self._model().whitened()
        minv, _ = unit.shared_minv()
        P = (np.eye(unit.W.shape[0]) - unit.W @ minv @ unit.W.T) / unit.s2
        return P if inv_sd is None else P * np.outer(inv_sd, inv_sd)

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
            Also return the posterior covariances (``sigma^2 M_n^{-1}`` for PPCA,
            ``(I + W_O^T Psi_O^{-1} W_O)^{-1}`` for factor analysis).
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        Z : ndarray, dask array or DataArray of shape (n_samples, ``n_components_``)
            The posterior means.
        cov : ndarray or dask array of shape (n_samples, ``n_components_``, ``n_components_``)
            Only with ``return_cov=True`` (a DataArray with dims ``(sample, component,
            component_)`` for xarray input).
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        Z = self._project(rows, self._projection(rows))
        if not return_cov:
            return Z
        return Z, self._covariances(rows)

    def _projection(self, rows: Rows) -> Blockwise:
        """The posterior means' blockwise map (each row with its observed features)."""
        name = f"{self._key_prefix()}_transform"
        # posterior means of the latent z ~ N(0, I): dimensionless
        return Blockwise(
            transform_block, self._args(), np.float64, name, coords=False, allow_nan=True,
            units=0,
        )  # fmt: skip

    def _key_prefix(self) -> str:
        return type(self).__name__.lower()

    def _covariances(self, rows: Rows) -> Any:
        q = self.n_components_
        args = self._args()
        if rows.is_lazy:
            cov = rows.data.map_blocks(
                cov_block,
                *args,
                new_axis=2,
                chunks=(rows.data.chunks[0], (q,), (q,)),
                dtype=np.float64,
                meta=np.empty((0, 0, 0)),
            )
        else:
            cov = cov_block(rows.data, *args)
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
        X : array-like, dask array or DataArray of shape (n_samples, ``n_components_``)
            Values of the latent variables, e.g. posterior means from :meth:`transform`.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, ``n_features_in_``)
            The model means.
        """
        rows = self._component_rows(X, sample_dim=sample_dim)
        W, mu, _ = self._args()
        name = f"{self._key_prefix()}_inverse"
        block = Blockwise(inverse_block, (W, mu), np.float64, name, units=1)
        return self._reconstruct(rows, block)

    def impute(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """X with every NaN replaced by ``E[x_missing | x_observed]`` under the model, blockwise.

        Observed entries are returned unchanged. Lazy for dask input; a DataArray with the
        dims and coordinates of the input for xarray input.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            NaN marks the entries to fill.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        same form and shape as X
            X with its missing entries filled.
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        dtype = rows.data.dtype if np.dtype(rows.data.dtype).kind == "f" else np.float64
        out = map_rows(
            rows,
            impute_block,
            n_out=self.n_features_in_,
            dtype=dtype,
            new_dim=rows.feature_dim or "feature",
            name=f"{self._key_prefix()}_impute",
            args=self._args(),
            check="output",
            allow_nan=True,
            method=f"{type(self).__name__}.impute",
            units=self._output_units(1),
        )
        if rows.kind == "xarray":
            fdim = rows.feature_dim
            if fdim in rows.template.coords:
                out = out.assign_coords({fdim: rows.template.coords[fdim]})
            out = out.transpose(*X.dims)
        return out

    def score_samples(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Log-likelihood of each row's observed entries under the model, blockwise.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            NaN marks missing entries.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples,)
            One log-likelihood per row.
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        return map_rows(
            rows,
            score_block,
            n_out=None,
            dtype=np.float64,
            name=f"{self._key_prefix()}_score_samples",
            args=self._args(),
            check="output",
            allow_nan=True,
            method=f"{type(self).__name__}.score_samples",
        )
