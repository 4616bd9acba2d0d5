"""Lloyd's iterations over data larger than memory, one pass each, on :mod:`ddr.em`'s driver.

:func:`lloyd` runs :func:`ddr.em.fit_em` with the E-step statistic
:class:`ddr.stats.KMeansSums` (each row to its nearest centre; per cluster the count and the
mean; the inertia; the rows farthest from their centre) and the M-step of scikit-learn's
Lloyd iteration (:func:`lloyd_update`: the means, a cluster left empty moved to the farthest
row, as scikit-learn does). Its "log-likelihood" is minus the inertia, which Lloyd's
iterations never raise (the trace ``inertia_curve_``). The stopping rule is scikit-learn's,
not ddr.em's on the likelihood: Lloyd stops when the centres' squared shift in an iteration,
summed over the centres, is at most ``tol`` times the mean of the features' variances (the
first pass sums each cluster's per-feature scatter, which gives that variance exactly: no
pass of its own). A repeated assignment gives the same centres to the last bit (a shift of
0), so a fixed point stops the fit whatever ``tol``, at the iteration where scikit-learn
sees its labels repeat. Without acceleration: SQUAREM's extrapolated centres have no
assignment to stand for.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from ddr.em import EMState, fit_em
from ddr.stats import KMeansSums, compute

__all__ = ["LloydRun", "lloyd", "lloyd_update", "mean_variance"]

logger = logging.getLogger(__name__)


def lloyd_update(stat: KMeansSums, centres: np.ndarray) -> np.ndarray:
    """The centres after one Lloyd iteration: scikit-learn's, from the merged sums.

    Each cluster's new centre is the mean of its rows. Clusters left without rows take the
    rows farthest from their centres, the farthest first, and those rows leave their
    clusters (scikit-learn's ``_relocate_empty_clusters``); when every row sits on its
    centre (more clusters than distinct rows) an empty cluster takes the place of the
    largest one, as scikit-learn's ``_average_centers`` does.

    Parameters
    ----------
    stat : KMeansSums
        At ``centres``, over all rows.
    centres : ndarray of shape (k, d)

    Returns
    -------
    ndarray of shape (k, d)
    """
    counts = stat.counts.copy()
    new = stat.means.copy()
    empty = np.flatnonzero(counts == 0)
    if not empty.size:
        return new
    far = stat.far_distance
    if far.size and float(far.max()) > 0:
        shift = centres.mean(axis=0)
        sums = counts[:, None] * (stat.means - shift)
        moved: set[int] = set()
        for idx, cluster in enumerate(empty[: far.size]):
            x = stat.far_rows[idx] - shift
            old = int(stat.far_labels[idx])
            sums[old] -= x
            counts[old] -= 1.0
            sums[cluster] = x
            counts[cluster] = 1.0
            moved.update((old, int(cluster)))
        for c in moved:
            if counts[c] > 0:
                new[c] = shift + sums[c] / counts[c]
    left = counts <= 0
    if left.any():
        new[left] = new[int(np.argmax(counts))]
    return new


def mean_variance(stat: KMeansSums) -> float:
    """The mean over the features of the rows' variances (``ddof=0``), from a statistic that
    holds each cluster's per-feature scatter: the within-cluster scatters plus the clusters'
    counts times their means' squared distances to the overall mean (no cancellation).

    Parameters
    ----------
    stat : KMeansSums
        Over all rows, with ``scatter="diag"``.

    Returns
    -------
    float
        What scikit-learn's ``_tolerance`` multiplies ``tol`` by: ``np.mean(np.var(X, 0))``.
    """
    n = float(stat.counts.sum())
    centre = stat.counts @ stat.means / n
    between = stat.counts @ ((stat.means - centre) ** 2)
    return float((stat.scatter.sum(axis=0) + between).sum() / (n * stat.n_features))


class _LloydProblem:
    """Lloyd's k-means for :func:`ddr.em.fit_em`: the parameters are the centres, the
    stopping rule scikit-learn's (see :func:`lloyd`)."""

    def __init__(self, tol: float) -> None:
        self.tol = tol
        # scikit-learn's absolute tolerance: tol times the mean variance of the features,
        # known after the first pass (0 for tol=0: no scatter needed)
        self.bound: float | None = 0.0 if tol == 0 else None
        bound = "0 (a fixed point)" if tol == 0 else f"tol={tol:g} times the mean variance"
        self.stopping_rule = f"the centres' squared shift in an iteration is at most {bound}"
        self.last: tuple[np.ndarray, KMeansSums, np.ndarray] | None = None

    def statistic(self, centres: np.ndarray) -> Any:
        # the first pass also sums each cluster's per-feature scatter: the data's variance
        scatter = "diag" if self.bound is None else None
        return KMeansSums.spec(centres=centres, scatter=scatter)

    def m_step(self, stat: KMeansSums, centres: np.ndarray) -> np.ndarray:
        if self.bound is None:
            self.bound = self.tol * mean_variance(stat)
        new = lloyd_update(stat, centres)
        self.last = (centres, stat, new)
        return new

    def stopping(self, centres: np.ndarray, new: np.ndarray, stat: KMeansSums) -> tuple[bool, str]:
        """scikit-learn's rule: the sum over the centres of their squared shift at most the
        bound (a repeated assignment moves no centre: a fixed point meets it for any tol)."""
        assert self.bound is not None
        shift = float(np.sum((new - centres) ** 2))
        return shift <= self.bound, f"centre shift {shift:.3g} (at most {self.bound:.3g})"


@dataclasses.dataclass(frozen=True)
class LloydRun:
    """The result of :func:`lloyd`.

    Parameters
    ----------
    centres : ndarray of shape (k, d)
        The final centres.
    stat : KMeansSums
        At ``centres``, over all rows: their inertia, cluster sizes (and scatters).
    n_iter : int
        Lloyd's iterations (passes).
    converged : bool
        Whether the stopping rule was met (a fixed point meets it).
    passes : int
        Passes over X: the iterations, and one more when the last did not end at a fixed
        point (or the scatters were asked for).
    inertia_curve : ndarray of shape (n_iter,)
        The inertia at the centres each iteration started from.
    """

    centres: np.ndarray
    stat: KMeansSums
    n_iter: int
    converged: bool
    passes: int
    inertia_curve: np.ndarray

    @property
    def inertia(self) -> float:
        return float(self.stat.inertia)


def lloyd(
    X: Any,
    centres: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    what: str = "KMeans (Lloyd)",
    owner: str = "KMeans",
    scatter: str | None = None,
    stacklevel: int = 2,
) -> LloydRun:
    """Lloyd's iterations from ``centres``, one pass each, by :func:`ddr.em.fit_em`.

    Parameters
    ----------
    X : ndarray or dask array of shape (n_samples, n_features)
    centres : ndarray of shape (k, d)
        Where to start.
    tol : float
        scikit-learn's: stop when the sum of the centres' squared shifts in an iteration is
        at most ``tol`` times the mean of the features' variances; 0 runs to a fixed point.
    max_iter : int
        At most this many iterations (a ConvergenceWarning when they are not enough).
    what, owner : str
        Progress records' prefix; the estimator named in warnings.
    scatter : {"full", "diag"} or None
        Also each cluster's scatter about its mean at the final centres.
    stacklevel : int
        Of the ConvergenceWarning, counted from the caller of ``lloyd``.

    Returns
    -------
    LloydRun
    """
    problem = _LloydProblem(float(tol))
    state = fit_em(
        X,
        problem,
        EMState(np.asarray(centres, dtype=np.float64)),
        tol=tol,
        max_iter=max_iter,
        logger=logger,
        what=what,
        owner=owner,
        warm_start=False,
        accelerate=False,
        stacklevel=stacklevel + 1,
    )
    final = state.params
    last = problem.last
    passes = state.n_iter
    if (
        scatter is None
        and last is not None
        and final is last[2]
        and np.array_equal(last[0], last[2])
    ):
        stat = last[1]  # a fixed point: the last pass was at the final centres
    else:
        stat = compute(KMeansSums.spec(centres=final, scatter=scatter), X)
        passes += 1
    curve = -np.asarray(state.loglik, dtype=np.float64)
    return LloydRun(final, stat, state.n_iter, state.converged, passes, curve)
