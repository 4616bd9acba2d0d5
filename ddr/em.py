"""Expectation-maximisation on data larger than memory: one pass over the rows per iteration.

Every EM fit in ddr (:class:`~ddr.PPCA`, :class:`~ddr.FactorAnalysis`, pLSA; mixtures and
k-means to come) is this loop, and only this loop:

1. **E-step**, one pass: a mergeable statistic (:mod:`ddr.stats`) of the row blocks at the
   current parameters, computed by the engine (:func:`ddr.stats.compute`): each block's
   posterior expectations summed, the sums tree-merged. The statistic also carries the
   log-likelihood of the data at those parameters (``stat.loglik``), for free. A model with
   per-row parameters (pLSA's document mixtures) updates them in the same pass, beside the
   blocks (:func:`ddr.stats.compute_with_rows`); they travel in the state's ``rows``. A model
   whose E-step needs only statistics already on the client (factor analysis of complete
   data: the covariance) gives ``X=None`` and an ``expectation(params)`` method: its
   iterations read nothing.
2. **M-step**, on the client: new parameters from the merged statistic (small arrays).
3. **Stop** by the rule below, or after ``max_iter`` iterations with a
   :class:`~sklearn.exceptions.ConvergenceWarning`.

**The stopping rule.** Write ``L`` for the log-likelihood. EM checks it at its *progress
points*: every iteration of plain EM; with SQUAREM (below) each cycle's start ``x0``. With
``L_0, ..., L_k`` the log-likelihoods at the progress points so far and ``g = L_k - L_{k-1}``:

- for each window of ``m = 1, 2, 4, ..., 64`` points that fits twice (``2 m <= k``), the
  gains over the last two windows, ``S1 = L_{k-m} - L_{k-2m}`` and ``S2 = L_k - L_{k-m}``,
  give the rate of convergence over m points, ``r_m = S2 / S1``, and the gain still to come,
  the geometric remainder ``S2 r_m / (1 - r_m)`` (infinite when ``r_m >= 1``; a window whose
  ``S1`` is below round-off, ``100 eps |L|``, counts as no progress when ``S2`` is too, and
  as infinite otherwise);
- with SQUAREM, the rate of each window is also measured on the *plain steps*: ``P_j``, the
  gain of the plain EM step from point j (``L(x1) - L(x0)`` of its cycle, evaluated
  anyway), gives ``q_m`` = (``P`` summed over the last m points) / (over the m before) and
  the remainder ``S2 q_m / (1 - q_m)`` (the same conventions). The rule is then applied
  when the last point's plain step has been evaluated, one iteration after the point;
- ``delta``, the estimate of what is left, is the largest over the windows (Aitken's
  estimate, over windows: the sums smooth gains that oscillate around their trend, where a
  single ratio of two gains would have to be known to 1e-4 at a rate of 0.999);
- EM has **converged** when ``g <= tol |L_k|`` and ``delta <= tol |L_k|`` (at least three
  points), or when ``-tol |L_k| <= g <= 0``: progress points rise in exact arithmetic, so a
  gain at or below zero means the log-likelihood's round-off now hides what EM still moves.

A rule on ``g`` alone (the usual one) stops slow linear convergence far from the optimum: at
a rate of 0.999 the gap is 500 times the last gain. With ``start_loglik`` (a start whose
log-likelihood is known without a pass), the first iteration compares its log-likelihood
with it: no rise above ``tol`` means the start was the optimum.

**Plateaus.** Near a saddle (a mixture's two components still one) EM's gains fall, then
rise again. The progress between SQUAREM's points falls fastest there (the extrapolations
race along the directions that converge); the plain step from each point shrinks only as
the point nears a stationary point, and stays level or grows while the way out grows
(``q_m >= 1``): measured in ``benchmarks/results/em-passes.md``. A saddle neared so closely
that the way out is below round-off still looks like a maximum (``n_init`` is the remedy).

**Acceleration** (``accelerate=True`` and a problem with ``to_vector``/``from_vector``, and
no per-row parameters): SQUAREM (Varadhan and Roland, 2008, scheme S3). From ``x0``, two
iterations give ``x1 = F(x0)`` and ``x2 = F(x1)`` (two passes); with ``r = x1 - x0``, ``v = x2 -
2 x1 + x0`` and the step length ``a = max(1, min(a_max, |r| / |v|))``, the next point is
``x' = x0 + 2 a r + a^2 v`` (``a = 1`` gives ``x2``, the plain step). Its pass gives ``L(x')``
and ``F(x')``: it is kept when ``L(x') >= L(x1)`` (the log-likelihood never falls) and starts
the next cycle, ``x0 = x'``; otherwise EM falls back to the plain step ``x2`` (that pass is
lost, ``a_max`` is divided by 4). ``a_max`` starts at 1 and is multiplied by 4 each time a
kept step used all of it (the package's defaults). A point that ``from_vector`` refuses
(outside the parameter space) is pulled back towards ``x2`` first, without a pass.

An estimator describes its model as an :class:`EMProblem` (the statistic to compute at given
parameters, and the M-step) and calls :func:`fit_em` with an :class:`EMState` to start from.
The state is small and plain (parameters, the log-likelihood trace, the iteration count), so
a fit can be resumed from it: a fitted estimator rebuilds it from its fitted attributes and
``warm_start=True`` continues (a state from :func:`fit_em` also carries the acceleration's
cycle: the same iterations as one longer call). Each iteration is a progress record
(``ddr.progress``) of the estimator's logger, with its log-likelihood and its change::

    class Problem:
        def statistic(self, params):              # the E-step statistic at params
            return PPCASums.spec(params=params)

        def m_step(self, stat, params):           # the merged statistic -> new params
            return ...

        # optional, for SQUAREM (unit-free, unconstrained coordinates):
        def to_vector(self, params): ...          # params -> 1-d float array
        def from_vector(self, vector, params): ...  # -> params, or None if invalid

    state = fit_em(X, Problem(), EMState(start), tol=1e-9, max_iter=500,
                   logger=logger, what="PPCA (EM)", owner="PPCA")
    state.params, state.loglik, state.n_iter, state.converged
"""

from __future__ import annotations

import dataclasses
import logging
import time
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

_TINY = np.finfo(np.float64).tiny
#: SQUAREM's step length bounds: a_max starts at 1 and grows by this factor (Varadhan and
#: Roland's ``mstep``) when a kept step used all of it
_STEP_FACTOR = 4.0
#: times a refused point (``from_vector`` gives None) is pulled halfway back to the plain step
_BACKTRACKS = 4
#: the stopping rule's longest window, in progress points
_WINDOW_MAX = 64
#: a change of the log-likelihood below this, relative, is round-off: nothing left to gain
_RESOLVED = 100 * np.finfo(np.float64).eps
#: client-side iterations (``X=None``) report progress at most this often, in seconds
_CLIENT_REPORT_S = 1.0


class EMProblem(Protocol[P]):
    """What :func:`fit_em` needs to know of a model.

    ``statistic(params)`` is the E-step: a :class:`~ddr.stats.base.StatSpec` whose statistic,
    computed over all rows in one pass, has a float ``loglik`` (the log-likelihood of the rows
    at ``params``) and whatever the M-step needs. ``m_step(stat, params)`` returns the new
    parameters; it runs on the client and may raise ValueError for data the model cannot fit
    (it sees the first merged statistic before anything else does).

    Optional methods (looked up with ``hasattr``):

    - ``to_vector(params) -> ndarray`` and ``from_vector(vector, params) -> params or None``:
      the parameters as one float vector (in coordinates where steps compare: unit-free,
      unconstrained, e.g. log-variances) and back (None for a vector outside the parameter
      space); they enable SQUAREM. ``from_vector`` is only called with vectors that
      ``to_vector`` made or their extrapolations.
    - ``expectation(params) -> statistic``: the E-step computed on the client (for
      ``fit_em(None, ...)``).
    - ``stopping(params, new_params, stat) -> (bool, str)``: the problem's own stopping rule
      after each M-step, in place of the log-likelihood's (k-means: scikit-learn's centre
      shift): whether it is met, and where it stands (for the progress records and the
      warning); ``stopping_rule`` (str) says what it is. Plain EM; the result is the last
      M-step.
    """

    def statistic(self, params: P) -> StatSpec: ...

    def m_step(self, stat: Any, params: P) -> P: ...


@dataclasses.dataclass(frozen=True)
class _Cycle:
    """Where the acceleration and the stopping rule stand between two iterations."""

    #: the point the next iteration evaluates
    next: Any
    #: what it is: "base" (a progress point: the start, a kept x', or the plain step after a
    #: refused one; the x0 of a cycle), "second" (x1 = F(x0)) or "extrapolated" (x')
    phase: str = "base"
    #: x0 of the current cycle: (vector, log-likelihood)
    x0: tuple[np.ndarray, float] | None = None
    #: in phase "extrapolated": x1 (vector, log-likelihood) and x2 = F(x1), the fallback
    x1: tuple[np.ndarray, float] | None = None
    x2: Any = None
    #: whether x' used the largest step length
    at_max: bool = False
    #: SQUAREM's largest step length
    step_max: float = 1.0
    #: the log-likelihoods at the last progress points (at most ``2 * _WINDOW_MAX + 1``)
    points: tuple[float, ...] = ()
    #: with SQUAREM, the gain of the plain step from each of those points, ``L(x1) - L(x0)``
    #: (one fewer than ``points`` between a cycle's start and its plain step)
    plain: tuple[float, ...] = ()
    #: the best log-likelihood evaluated, and the M-step of its point
    best: tuple[float, Any] | None = None


@dataclasses.dataclass(frozen=True)
class EMState(Generic[P]):
    """Where an EM fit stands: resumable by passing it back to :func:`fit_em`.

    Parameters
    ----------
    params : object
        The current parameters: what the next E-step uses. After :func:`fit_em`, the M-step
        of the best log-likelihood evaluated (the fitted model; of points within round-off,
        ``100 eps |L|``, of the best, the last).
    loglik : tuple of float
        The log-likelihood trace, one value per iteration: the log-likelihood of the
        parameters that iteration's E-step used, or, for an extrapolated step that was
        refused (it lowered the likelihood), the best value before it. Never decreasing,
        up to round-off.
    n_iter : int
        Iterations done so far (E-steps: passes over the data, unless ``X`` is None).
    converged : bool
        Whether the stopping rule was met.
    start_loglik : float, optional
        The log-likelihood of ``params`` when it is known without a pass (a closed-form
        start computed from moments); the first E-step is then compared with it, so a start
        that is already the optimum stops after one pass.
    rows : BlockRows, optional
        Per-row parameters, for a model whose E-step statistic ``carries_rows`` (pLSA's
        document mixtures): updated in each pass beside the blocks of X
        (:func:`ddr.stats.compute_with_rows`), None before the first.
    remaining : float, optional
        The stopping rule's last estimate of the log-likelihood still to gain (``delta``),
        when it was made.
    n_refused : int
        Extrapolated steps refused so far (each cost one iteration).
    cycle : object, optional
        The acceleration's and the stopping rule's state (private); None starts afresh.
    """

    params: P
    loglik: tuple[float, ...] = ()
    n_iter: int = 0
    converged: bool = False
    start_loglik: float | None = None
    rows: BlockRows | None = None
    remaining: float | None = None
    n_refused: int = 0
    cycle: _Cycle | None = None

    @property
    def previous(self) -> float | None:
        """What the next iteration's log-likelihood is compared with."""
        return self.loglik[-1] if self.loglik else self.start_loglik

    def relative_change(self) -> float:
        """The last rise of the log-likelihood relative to its value (inf before two)."""
        if len(self.loglik) < 2:
            return float("inf")
        return (self.loglik[-1] - self.loglik[-2]) / max(abs(self.loglik[-1]), _TINY)


def _norm(v: np.ndarray) -> float:
    return float(np.sqrt(np.dot(v, v)))


def _remaining(points: tuple[float, ...], plain: tuple[float, ...] = ()) -> float:
    """The log-likelihood still to gain after the progress points ``points`` (at least 3).

    For each window of ``m = 1, 2, 4, ...`` progress points that fits twice: the gains over
    the last two windows ``S1`` and ``S2``, their ratio ``r_m = S2 / S1`` (the rate of
    convergence over m points), and the geometric remainder ``|S2| r_m / (1 - r_m)``
    (infinite when ``r_m >= 1``); the largest over the windows. Sums over windows smooth the
    gains of EM iterations that oscillate around their trend (one gain ratio is then useless:
    at a rate of 0.999 it must be known to 1e-4). Gains below round-off count as none.

    With ``plain`` (SQUAREM: the gain of the plain EM step from each progress point, as
    many as ``points``), each window's rate is also measured on those: ``q_m``, the ratio of
    the plain gains summed over the last m points to those over the m before, gives the
    remainder ``S2 q_m / (1 - q_m)`` too. A plain step's gain measures where the point is
    (it shrinks as the point nears a maximum), where the progress between points mixes in
    the extrapolations' luck: on a plateau, where EM crawls past a saddle, the progress
    falls while the plain gains stay level (``q_m`` near 1).
    """
    last = points[-1]
    floor = _RESOLVED * abs(last)
    worst = 0.0
    m = 1
    while 2 * m < len(points) and m <= _WINDOW_MAX:
        s2 = last - points[-1 - m]
        s1 = points[-1 - m] - points[-1 - 2 * m]
        if s1 <= floor:  # no resolvable progress over the earlier window
            if abs(s2) > floor:
                return float("inf")
        elif s2 > floor:
            rate = s2 / s1
            if rate >= 1.0:
                return float("inf")
            worst = max(worst, s2 * rate / (1.0 - rate))
        if len(plain) >= 2 * m:  # the same window's rate, measured on the plain steps
            before, after = sum(plain[-2 * m : -m]), sum(plain[-m:])
            if before <= floor:
                if after > floor:
                    return float("inf")
            elif after > floor:
                rate = after / before
                if rate >= 1.0:
                    return float("inf")
                worst = max(worst, max(s2, 0.0) * rate / (1.0 - rate))
        m *= 2
    return worst


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
    accelerate: bool = True,
    sample_weight: Any = None,
) -> EMState[P]:
    """Run EM from ``state`` until the stopping rule of :mod:`ddr.em` is met.

    Parameters
    ----------
    X : ndarray, dask array or DataArray of shape (n_samples, n_features), or None
        The data; each iteration reads it once (:func:`ddr.stats.compute`, under the active
        dask scheduler). None: the E-step is ``problem.expectation(params)`` on the client,
        and nothing is read.
    problem : EMProblem
        The model's E-step statistic and M-step (and, optionally, its parameters as vectors).
    state : EMState
        Where to start: fresh parameters, or the state of an earlier fit to resume.
    tol : float
        The stopping rule's tolerance, relative to ``|loglik|``: the last gain and the
        estimated gain still to come both at most ``tol * |loglik|``.
    max_iter : int
        At most this many iterations in this call (each one E-step).
    logger : logging.Logger
        The estimator's logger; one progress record per iteration over the data (client-side
        iterations: at most one a second).
    what : str
        The progress records' prefix, e.g. ``"PPCA (EM)"``.
    owner : str
        The estimator's name, for the ConvergenceWarning.
    stacklevel : int
        Of the ConvergenceWarning, counted from the caller of ``fit_em``.
    warm_start : bool, default=True
        Whether the estimator has ``warm_start`` to continue a fit (the warning suggests it).
    accelerate : bool, default=True
        SQUAREM, when the problem has ``to_vector`` and ``from_vector`` and no per-row
        parameters (otherwise plain EM).
    sample_weight : array-like or dask array of shape (n_samples,), optional
        Frequency weights of the rows of ``X``, given to every E-step's statistic (one
        without per-row parameters).

    Returns
    -------
    EMState
        The parameters of the M-step of the best log-likelihood evaluated (the last within
        round-off of it), the whole log-likelihood trace (the resumed state's and this
        call's), the total iteration count, whether EM converged, and what a later call
        needs to resume.
    """
    on_client = X is None
    vectors = hasattr(problem, "to_vector") and hasattr(problem, "from_vector")
    passes = Passes(logger, what, unit="iteration")
    resumed = f", resumed after {state.n_iter}" if state.n_iter else ""
    each = "on the client (no pass over the data)" if on_client else "of one pass each"
    until = getattr(problem, "stopping_rule", None) if hasattr(problem, "stopping") else None
    if until is None:
        until = (
            "the log-likelihood's last gain and its estimated remaining gain are below "
            f"tol={tol:g} (relative)"
        )
    passes.start(f"at most {max_iter} iterations {each}{resumed}, until {until}")
    run = _Run(X, problem, state, tol, vectors, accelerate, sample_weight)
    reported = time.perf_counter()
    done = 0
    while done < max_iter and not run.converged:
        done += 1
        passes.begin()
        detail = run.iterate()
        if not on_client or done == max_iter or run.converged:
            passes.advance(detail)
        elif time.perf_counter() - reported >= _CLIENT_REPORT_S:
            passes.done = done - 1  # client iterations are reported at most once a second
            passes.advance(detail)
            reported = time.perf_counter()
        if on_client:
            passes.done = done
    result = run.result(state.n_iter + done)
    if result.converged:
        passes.finish(f"converged after {result.n_iter} iterations{run.refused_note()}")
    else:
        passes.finish(f"stopped at max_iter={max_iter} without converging{run.refused_note()}")
        left = (
            f", estimated gain still to come {result.remaining:.3g}"
            if result.remaining is not None and np.isfinite(result.remaining)
            else ""
        )
        where = (
            f"{run.stop_note}"
            if run.stop_note is not None
            else f"last relative log-likelihood change {result.relative_change():.3g}{left}"
        )
        warnings.warn(
            f"{owner}: EM did not converge in max_iter={max_iter} iterations ({where}, "
            f"tol={tol}); increase max_iter"
            f"{', or continue this fit with warm_start=True' if warm_start else ''}",
            ConvergenceWarning,
            stacklevel=stacklevel + 1,
        )
    return result


class _Run:
    """One call of :func:`fit_em`: the iterations, the acceleration and the stopping rule."""

    def __init__(
        self,
        X: Any,
        problem: Any,
        state: EMState,
        tol: float,
        vectors: bool,
        accelerate: bool,
        sample_weight: Any = None,
    ) -> None:
        self.X, self.problem, self.tol, self.vectors = X, problem, tol, vectors
        self.sample_weight = sample_weight
        self.accelerate = accelerate and vectors
        self.rows = state.rows
        self.curve = list(state.loglik)
        self.cycle = state.cycle if state.cycle is not None else _Cycle(state.params)
        # a start whose log-likelihood is known: the first iteration compares with it
        self.start_loglik = state.start_loglik if state.cycle is None else None
        self.converged = False
        self.remaining = state.remaining
        self.n_refused = state.n_refused
        self.refused_now = 0
        # the problem's own stopping rule replaces the log-likelihood's
        self.own_rule = hasattr(problem, "stopping")
        self.stop_note: str | None = None
        if self.own_rule:
            self.accelerate = False

    def _e_step(self, params: Any) -> Any:
        if self.X is None:
            return self.problem.expectation(params)
        spec = self.problem.statistic(params)  # the one pass of this iteration
        if spec.cls.carries_rows:
            if self.sample_weight is not None:
                raise TypeError(f"{spec.cls.__name__} carries per-row parameters: no weights")
            self.accelerate = False  # per-row parameters cannot be extrapolated
            stat, self.rows = compute_with_rows(spec, self.X, self.rows)
            return stat
        return compute(spec, self.X, None, self.sample_weight)

    def _vector(self, params: Any) -> np.ndarray | None:
        if not self.vectors:
            return None
        return np.asarray(self.problem.to_vector(params), dtype=np.float64).ravel()

    def iterate(self) -> str:
        """One E-step and M-step; returns the detail of its progress record."""
        c = self.cycle
        x = c.next
        stat = self._e_step(x)
        loglik = float(stat.loglik)
        fx = self.problem.m_step(stat, x)
        previous = self.curve[-1] if self.curve else self.start_loglik
        if self.own_rule:  # the problem's rule, on the step just made
            self.converged, self.stop_note = self.problem.stopping(x, fx, stat)
            self.curve.append(loglik)
            self.cycle = dataclasses.replace(c, next=fx, phase="base", best=(loglik, fx))
            return f"{loglik_detail(loglik, previous)}, {self.stop_note}"
        note = ""
        if c.phase == "extrapolated":
            assert c.x1 is not None
            if not loglik >= c.x1[1]:  # lower (or NaN): back to the plain step x2 = F(x1)
                self.n_refused += 1
                self.refused_now += 1
                self.curve.append(self.curve[-1])
                self.cycle = dataclasses.replace(
                    c,
                    next=c.x2,
                    phase="base",
                    x1=None,
                    x2=None,
                    step_max=max(1.0, c.step_max / _STEP_FACTOR),
                )
                return (
                    f"log-likelihood {loglik:.10g} at an extrapolated step, lower than "
                    f"{c.x1[1]:.10g}: refused, back to the plain step"
                )
            grow = _STEP_FACTOR if c.at_max else 1.0
            c = dataclasses.replace(c, phase="base", x1=None, x2=None, step_max=c.step_max * grow)
            note = ", extrapolated step kept"
        self.curve.append(loglik)
        # the best so far; a later point within round-off of it is as good and more converged
        # (which of two such points is higher is round-off: numpy and dask input would differ)
        if c.best is None or loglik >= c.best[0] - _RESOLVED * abs(loglik):
            c = dataclasses.replace(c, best=(loglik, fx))
        if c.phase == "base" or not self.accelerate:  # a progress point: the stopping rule
            c = self._check(c, loglik)
        elif c.phase == "second":  # SQUAREM's plain step from the last progress point
            assert c.x0 is not None
            c = self._check(c, loglik, plain_gain=loglik - c.x0[1])
        self.cycle = self._advance(c, x, loglik, fx)
        return loglik_detail(loglik, previous) + note

    def _check(self, c: _Cycle, loglik: float, plain_gain: float | None = None) -> _Cycle:
        """The stopping rule (see :mod:`ddr.em`): at a progress point, or, with SQUAREM,
        once the plain step from it has been evaluated (``plain_gain``)."""
        if plain_gain is not None:  # SQUAREM: the rule, with the plain steps' rates
            plain = (*c.plain[-2 * _WINDOW_MAX :], plain_gain)
            c = dataclasses.replace(c, plain=plain)
            if len(c.points) >= 3:
                bound = self.tol * abs(c.points[-1])
                self.remaining = _remaining(c.points, plain)
                gain = c.points[-1] - c.points[-2]
                self.converged = gain <= bound and self.remaining <= bound
            return c
        points = (*c.points[-2 * _WINDOW_MAX :], loglik)
        c = dataclasses.replace(c, points=points)
        if self.start_loglik is not None:  # the start's log-likelihood, known: same point
            self.converged = loglik - self.start_loglik <= self.tol * abs(loglik)
            self.remaining = 0.0 if self.converged else self.remaining
            self.start_loglik = None
            return c
        if len(points) < 3:
            return c
        gain = points[-1] - points[-2]
        bound = self.tol * abs(loglik)
        if gain <= 0.0:
            # no rise between progress points (which rise in exact arithmetic): the
            # log-likelihood's round-off now hides what EM still moves
            self.converged, self.remaining = gain >= -bound, 0.0
            return c
        if not self.accelerate:  # plain EM: every iteration is a progress point
            self.remaining = _remaining(points)
            self.converged = gain <= bound and self.remaining <= bound
        return c

    def _advance(self, c: _Cycle, x: Any, loglik: float, fx: Any) -> _Cycle:
        """The cycle after evaluating x: the point the next iteration evaluates."""
        plain = dataclasses.replace(c, next=fx, phase="base")
        if not self.accelerate:
            return plain
        if c.phase == "base":  # x is x0: its plain step x1 comes next
            return dataclasses.replace(c, next=fx, phase="second", x0=(self._vector(x), loglik))
        # x is x1 = F(x0), fx is x2: extrapolate (SQUAREM, S3)
        assert c.x0 is not None
        vx, vfx = self._vector(x), self._vector(fx)
        assert vx is not None and vfx is not None
        v0 = c.x0[0]
        r = vx - v0
        v = vfx - 2.0 * vx + v0
        nv = _norm(v)
        a = c.step_max if nv == 0 else max(1.0, min(c.step_max, _norm(r) / nv))
        if a <= 1.0:  # the plain step used all of a_max = 1: allow longer ones from now
            return dataclasses.replace(plain, step_max=c.step_max * _STEP_FACTOR)
        for _ in range(_BACKTRACKS + 1):
            candidate = self.problem.from_vector(v0 + 2.0 * a * r + a * a * v, x)
            if candidate is not None:
                return dataclasses.replace(
                    c,
                    next=candidate,
                    phase="extrapolated",
                    x1=(vx, loglik),
                    x2=fx,
                    at_max=a >= c.step_max,
                )
            a = 0.5 * (a + 1.0)  # outside the parameter space: halfway back to x2
        return plain

    def refused_note(self) -> str:
        if not self.refused_now:
            return ""
        return f" ({self.refused_now} extrapolated step(s) refused)"

    def result(self, n_iter: int) -> EMState:
        c = self.cycle
        params = c.best[1] if c.best is not None else c.next
        return EMState(
            params,
            tuple(self.curve),
            n_iter,
            self.converged,
            rows=self.rows,
            remaining=self.remaining,
            n_refused=self.n_refused,
            cycle=c,
        )


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
