"""Expectation-maximisation on data larger than memory: one pass over the rows per iteration.

Every EM fit in ddr (:class:`~ddr.PPCA`, :class:`~ddr.FactorAnalysis`, pLSA) is this loop,
and only this loop:

1. **E-step**, one pass: a mergeable statistic (:mod:`ddr.stats`) of the row blocks at the
   current parameters, computed by the engine (:func:`ddr.stats.compute`): each block's
   posterior expectations summed, the sums tree-merged. The statistic also carries the
   log-likelihood of the data at those parameters (``stat.loglik``), for free. A model with
   per-row parameters (pLSA's document mixtures) updates them in the same pass, beside the
   blocks (:func:`ddr.stats.compute_with_rows`); they travel in the state's ``rows``.
2. **M-step**, on the client: new parameters from the merged statistic (small arrays).
3. Stop when the log-likelihood rose by less than ``tol * |loglik|`` (relative), or after
   ``max_iter`` iterations with a :class:`~sklearn.exceptions.ConvergenceWarning`.

An estimator describes its model as an :class:`EMProblem` (the statistic to compute at given
parameters, and the M-step) and calls :func:`fit_em` with an :class:`EMState` to start from.
The state is small and plain (parameters, the log-likelihood curve, the iteration count), so a
fit can be resumed from it: a fitted estimator rebuilds its state from its fitted attributes
(which ``save`` stores and :func:`ddr.load` restores), and ``warm_start=True`` continues
from there. Each iteration is reported through the estimator's logger as a progress record
(``ddr.progress``) with its log-likelihood and its change::

    class Problem:
        def statistic(self, params):              # the E-step statistic at params
            return PPCASums.spec(params=params)

        def m_step(self, stat, params):           # the merged statistic -> new params
            return ...

    state = fit_em(X, Problem(), EMState(start), tol=1e-9, max_iter=500,
                   logger=logger, what="PPCA (EM)", owner="PPCA")
    state.params, state.loglik, state.n_iter, state.converged
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ddr.progress import Passes
from ddr.stats import compute, compute_with_rows
from ddr.stats.base import StatSpec
from ddr.stats.engine import BlockRows

__all__ = ["EMProblem", "EMState", "fit_em", "loglik_detail"]

P = TypeVar("P")


class EMProblem(Protocol[P]):
    """What :func:`fit_em` needs to know of a model.

    ``statistic(params)`` is the E-step: a :class:`~ddr.stats.base.StatSpec` whose statistic,
    computed over all rows in one pass, has a float ``loglik`` (the log-likelihood of the rows
    at ``params``) and whatever the M-step needs. ``m_step(stat, params)`` returns the new
    parameters; it runs on the client and may raise ValueError for data the model cannot fit
    (it sees the first merged statistic before anything else does).
    """

    def statistic(self, params: P) -> StatSpec: ...

    def m_step(self, stat: Any, params: P) -> P: ...


@dataclasses.dataclass(frozen=True)
class EMState(Generic[P]):
    """Where an EM fit stands: resumable by passing it back to :func:`fit_em`.

    Parameters
    ----------
    params : object
        The current parameters (what the next E-step uses).
    loglik : tuple of float
        The log-likelihood at the start of each iteration so far (at the parameters its
        E-step used), one per iteration: never decreasing, up to round-off.
    n_iter : int
        Iterations done so far.
    converged : bool
        Whether the last iteration met the tolerance.
    start_loglik : float, optional
        The log-likelihood of ``params`` when it is known without a pass (a closed-form
        start computed from moments); the first E-step is then compared with it, so a start
        that is already the optimum stops after one pass.
    rows : BlockRows, optional
        Per-row parameters, for a model whose E-step statistic ``carries_rows`` (pLSA's
        document mixtures): updated in each pass beside the blocks of X
        (:func:`ddr.stats.compute_with_rows`), None before the first.
    """

    params: P
    loglik: tuple[float, ...] = ()
    n_iter: int = 0
    converged: bool = False
    start_loglik: float | None = None
    rows: BlockRows | None = None

    @property
    def previous(self) -> float | None:
        """What the next iteration's log-likelihood is compared with."""
        return self.loglik[-1] if self.loglik else self.start_loglik

    def relative_change(self) -> float:
        """The last rise of the log-likelihood relative to its value (inf before two)."""
        if len(self.loglik) < 2:
            return float("inf")
        return (self.loglik[-1] - self.loglik[-2]) / max(abs(self.loglik[-1]), _TINY)


_TINY = np.finfo(np.float64).tiny


def fit_em(
    X: Any,
    problem: EMProblem[P],
    state: EMState[P],
    *,
    tol: float,
    max_iter: int,
    logger: logging.Logger,
    what: str,
    owner: str,
    stacklevel: int = 2,
    warm_start: bool = True,
) -> EMState[P]:
    """Run EM from ``state`` until the log-likelihood rises by less than ``tol`` (relative).

    Parameters
    ----------
    X : ndarray, dask array or DataArray of shape (n_samples, n_features)
        The data; each iteration reads it once (:func:`ddr.stats.compute`, under the active
        dask scheduler).
    problem : EMProblem
        The model's E-step statistic and M-step.
    state : EMState
        Where to start: fresh parameters, or the state of an earlier fit to resume.
    tol : float
        Stop when ``loglik - previous <= tol * |loglik|``.
    max_iter : int
        At most this many iterations in this call (each one pass).
    logger : logging.Logger
        The estimator's logger; one progress record per iteration.
    what : str
        The progress records' prefix, e.g. ``"PPCA (EM)"``.
    owner : str
        The estimator's name, for the ConvergenceWarning.
    stacklevel : int
        Of the ConvergenceWarning, counted from the caller of ``fit_em``.
    warm_start : bool, default=True
        Whether the estimator has ``warm_start`` to continue a fit (the warning suggests it).

    Returns
    -------
    EMState
        The parameters after the last M-step, the whole log-likelihood curve (the resumed
        state's and this call's), the total iteration count, and whether EM converged.
    """
    passes = Passes(logger, what, unit="iteration")
    resumed = f", resumed after {state.n_iter}" if state.n_iter else ""
    passes.start(
        f"at most {max_iter} iterations of one pass each{resumed}, until the log-likelihood "
        f"rises by less than tol={tol:g} (relative)"
    )
    params, rows = state.params, state.rows
    curve = list(state.loglik)
    previous = state.previous
    converged = False
    done = 0
    while done < max_iter:
        done += 1
        passes.begin()
        spec = problem.statistic(params)  # the one pass of this iteration:
        if spec.cls.carries_rows:
            stat, rows = compute_with_rows(spec, X, rows)
        else:
            stat = compute(spec, X)
        loglik = float(stat.loglik)
        curve.append(loglik)
        params = problem.m_step(stat, params)
        passes.advance(loglik_detail(loglik, previous))
        if previous is not None and loglik - previous <= tol * abs(loglik):
            converged = True
            break
        previous = loglik
    result = EMState(params, tuple(curve), state.n_iter + done, converged, rows=rows)
    passes.finish(
        f"converged after {result.n_iter} iterations"
        if converged
        else f"stopped at max_iter={max_iter} without converging"
    )
    if not converged:
        warnings.warn(
            f"{owner}: EM did not converge in max_iter={max_iter} iterations (last relative "
            f"log-likelihood change {result.relative_change():.3g} > tol={tol}); increase "
            f"max_iter{', or continue this fit with warm_start=True' if warm_start else ''}",
            ConvergenceWarning,
            stacklevel=stacklevel + 1,
        )
    return result


def loglik_detail(loglik: float, previous: float | None) -> str:
    """Describe an iteration: ``log-likelihood L, change dL (relative r)``.

    Parameters
    ----------
    loglik : float
        The iteration's log-likelihood.
    previous : float or None
        The previous iteration's (None for the first).

    Returns
    -------
    str
        The detail of the iteration's progress record.
    """
    if previous is None:
        return f"log-likelihood {loglik:.10g}"
    change = loglik - previous
    return (
        f"log-likelihood {loglik:.10g}, change {change:+.4g} "
        f"(relative {change / max(abs(loglik), _TINY):+.2e})"
    )
