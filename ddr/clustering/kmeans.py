"""k-means on data larger than memory: k-means++ on a sample, then Lloyd, one pass per iteration.

**Start** (``init="k-means++"``): one pass draws a uniform sample of ``init_size`` rows
(:class:`ddr.stats.RowSample`: each row's priority is a hash of its position and the seed, so
the sample does not depend on the blocks); k-means++ (scikit-learn's ``kmeans_plusplus``, on
the sample moved to its mean) picks the initial centres from it, and Lloyd's iterations on the
sample, in memory, refine them. ``init="random"`` takes the first ``n_clusters`` rows of the
sample (a uniform draw); an array gives the centres.

**Iterations** (:func:`lloyd`): :func:`ddr.em.fit_em` with the E-step statistic
:class:`ddr.stats.KMeansSums` (each row to its nearest centre; per cluster the count and the
mean; the inertia; the rows farthest from their centre) and the M-step of scikit-learn's
Lloyd iteration (the means, a cluster left empty moved to the farthest row, as scikit-learn
does). Its "log-likelihood" is minus the inertia, which Lloyd's iterations never raise, and
its stopping rule is ddr.em's on it; at a fixed point (no row changes cluster) the inertia
repeats exactly, which stops the fit whatever ``tol``. Without acceleration: SQUAREM's
extrapolated centres have no assignment to stand for.

**Why a sample and not k-means||** (measured, ``benchmarks/results/mixture.md``): k-means||
(Bahmani et al. 2012, dask-ml's default) reads the data once per oversampling round (dask-ml
runs about ``log(initial cost)`` rounds, 5 to 8 on the benchmark data, plus one to weigh the
candidates); the sample costs one pass whatever the data, and Lloyd's iterations on the
sample, which read nothing, bring the start close to the optimum of the full data, so the
full-data iterations that follow are few.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Hashable, Iterator
from numbers import Integral, Real
from typing import Any, ClassVar

import dask
import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE, DDRMixin, fit_context, map_rows
from ddr.em import EMState, fit_em
from ddr.families import FitThenTransform
from ddr.stats import KMeansSums, RowSample, compute
from ddr.stats._input import Rows, is_dask, is_xarray
from ddr.stats.engine import aligned
from ddr.stats.kmeans_sums import nearest_centres
from ddr.tags import DDRTags, unknown_passes

__all__ = [
    "KMeans",
    "LloydRun",
    "draw_sample",
    "initial_centres",
    "lloyd",
    "lloyd_update",
    "row_ids",
]

logger = logging.getLogger(__name__)

#: rows per sub-block of the blockwise maps (bounds the (rows, k) distances)
_MAP_ROWS = 8192
#: Lloyd's iterations on the sample that refine the k-means++ start (in memory, no pass)
_SAMPLE_ITER = 100
#: centres larger than this go into a dask graph once, as their own key
_DELAY_BYTES = 2**16


# ------------------------------------------------------------------------ the start
def default_init_size(n_samples: int, n_clusters: int) -> int:
    """The sample k-means++ starts from: ``max(3 * 1024, 100 * n_clusters)`` rows, at most
    ``n_samples``."""
    return int(min(n_samples, max(3 * 1024, 100 * n_clusters)))


def row_ids(rows: Rows) -> Any:
    """The rows' positions as an array blocked like the rows (the ids of
    :class:`~ddr.stats.RowSample`)."""
    n = rows.shape[0]
    if not rows.is_lazy:
        return np.arange(n, dtype=np.int64)
    chunks = rows.data.chunks[0]
    if any(np.isnan(c) for c in chunks):
        raise ValueError(
            "X has unknown chunk sizes; the k-means++ sample needs the rows' positions: "
            "call X.compute_chunk_sizes() first"
        )
    return da.arange(n, chunks=(chunks,), dtype=np.int64)


def draw_sample(rows: Rows, size: int, seed: int) -> RowSample:
    """One pass: a uniform sample of ``size`` rows, the same however the rows are blocked.

    Parameters
    ----------
    rows : Rows
        The validated rows.
    size : int
        Rows to draw.
    seed : int
        Seeds the rows' priorities.

    Returns
    -------
    RowSample
    """
    return compute(RowSample.spec(size=size, seed=seed), rows.data, row_ids(rows))


def _kmeans_plusplus(sample: np.ndarray, k: int, rng: np.random.RandomState) -> np.ndarray:
    """scikit-learn's k-means++ on the sample moved to its mean (distances keep their
    digits however far the data sit from the origin)."""
    from sklearn.cluster import kmeans_plusplus

    centre = sample.mean(axis=0)
    centres, _ = kmeans_plusplus(sample - centre, k, random_state=rng)
    return centres + centre


def _sample_lloyd(sample: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Lloyd's iterations on the sample (in memory) from ``centres``, to a fixed point."""
    from sklearn.cluster import KMeans as SkKMeans

    centre = sample.mean(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # duplicate rows in the sample
        km = SkKMeans(
            centres.shape[0], init=centres - centre, n_init=1, max_iter=_SAMPLE_ITER, tol=0.0
        ).fit(sample - centre)
    return km.cluster_centers_ + centre


def initial_centres(
    sample: np.ndarray, k: int, init: str, rng: np.random.RandomState, *, refine: bool = True
) -> np.ndarray:
    """Initial centres from the sample: k-means++ (refined by Lloyd on the sample) or
    ``k`` rows of it.

    Parameters
    ----------
    sample : ndarray of shape (m, d)
        The sample's rows (a uniform draw, in random order).
    k : int
        Clusters.
    init : {"k-means++", "random"}
    rng : RandomState
        Seeds k-means++ and the choice of rows.
    refine : bool, default True
        Lloyd's iterations on the sample after k-means++.

    Returns
    -------
    ndarray of shape (k, d)
    """
    if init == "random":
        return sample[np.sort(rng.choice(sample.shape[0], k, replace=False))].copy()
    centres = _kmeans_plusplus(sample, k, rng)
    return _sample_lloyd(sample, centres) if refine else centres


# --------------------------------------------------------------------- iterations
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


class _LloydProblem:
    """Lloyd's k-means for :func:`ddr.em.fit_em`: the parameters are the centres."""

    def __init__(self, lazy: bool, scatter: str | None = None) -> None:
        self.lazy = lazy
        self.scatter = scatter
        self.last: tuple[np.ndarray, KMeansSums, np.ndarray] | None = None

    def statistic(self, centres: np.ndarray) -> Any:
        return KMeansSums.spec(centres=_ship(centres, self.lazy))

    def m_step(self, stat: KMeansSums, centres: np.ndarray) -> np.ndarray:
        new = lloyd_update(stat, centres)
        self.last = (centres, stat, new)
        return new


def _ship(value: np.ndarray, lazy: bool) -> Any:
    """A large array goes into a dask graph once (a key every block task reads)."""
    if lazy and value.nbytes > _DELAY_BYTES:
        return dask.delayed(value, pure=True)
    return value


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
        Whether ddr.em's stopping rule was met (a fixed point meets it).
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
    lazy: bool,
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
        ddr.em's stopping rule on the inertia (relative); 0 runs to a fixed point.
    max_iter : int
        At most this many iterations (a ConvergenceWarning when they are not enough).
    lazy : bool
        Whether X is a dask array.
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
    problem = _LloydProblem(lazy)
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
        stat = compute(KMeansSums.spec(centres=_ship(final, lazy), scatter=scatter), X)
        passes += 1
    curve = -np.asarray(state.loglik, dtype=np.float64)
    return LloydRun(final, stat, state.n_iter, state.converged, passes, curve)


# ------------------------------------------------------------------- blockwise maps
def _by_rows(fn: Any, X: np.ndarray, *args: Any) -> np.ndarray:
    X, args = aligned((X, args))
    if X.shape[0] <= _MAP_ROWS:
        return fn(X, *args)
    return np.concatenate(
        [fn(X[i : i + _MAP_ROWS], *args) for i in range(0, X.shape[0], _MAP_ROWS)], axis=0
    )


def _distances(X: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    shift = centres.mean(axis=0)
    local = centres - shift
    Y = np.subtract(X, shift, dtype=np.float64)
    labels, _, D = nearest_centres(Y, local, np.einsum("ij,ij->i", local, local))
    D += np.einsum("ij,ij->i", Y, Y)[:, None]
    return labels, D


def _labels_rows(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    return _distances(X, centres)[0].astype(np.int32)


def _transform_rows(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    D = _distances(X, centres)[1]
    return np.sqrt(np.maximum(D, 0.0, out=D), out=D)


def _labels_block(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """The nearest centre of each row of a block (as KMeansSums assigns it)."""
    return _by_rows(_labels_rows, X, centres)


def _transform_block(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Euclidean distances of each row of a block to every centre."""
    return _by_rows(_transform_rows, X, centres)


# ----------------------------------------------------------------------- estimator
def _n_clusters_width(n_clusters: Any) -> Any:
    width = int(n_clusters) if isinstance(n_clusters, Integral) else None

    def rule(n_samples: Any, n_features: Any) -> int | None:
        return width

    return rule


def _saved_n_clusters(state: Any) -> int | None:
    centres = state.get("cluster_centers_")
    return None if centres is None else int(np.shape(centres)[0])


class KMeans(
    FitThenTransform,
    DDRMixin,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    BaseEstimator,
):
    """k-means clustering (Lloyd's algorithm) of data larger than memory, one pass per
    iteration.

    Parameters
    ----------
    n_clusters : int, default=8
        Clusters (at most ``n_samples``).
    init : {"k-means++", "random"} or array-like of shape (n_clusters, n_features), \
default="k-means++"
        ``"k-means++"``: k-means++ on a uniform sample of ``init_size`` rows (one pass),
        refined by Lloyd's iterations on the sample (in memory). ``"random"``:
        ``n_clusters`` rows of that sample. An array: the initial centres (no sample pass;
        one initialisation).
    n_init : "auto" or int, default="auto"
        Initialisations (the one with the lowest inertia is kept); ``"auto"`` is 1, or 10
        for ``init="random"`` (scikit-learn's rule). They share the sample: each costs its
        iterations.
    max_iter : int, default=300
        Lloyd's iterations (passes) per initialisation.
    tol : float, default=1e-4
        The stopping rule of :mod:`ddr.em` on the inertia: stop when its last decrease and
        the decrease still to come (estimated from the last ones) are both below ``tol``
        times the inertia. scikit-learn's ``tol`` bounds the centres' movement instead;
        both stop at a fixed point (no row changes cluster), and ``tol=0`` runs to one,
        as scikit-learn's ``tol=0`` does.
    init_size : int or None, default=None
        Rows of the sample k-means++ starts from; None: ``max(3 * 1024, 100 *
        n_clusters)`` (at most ``n_samples``). A merge task of the sample pass holds 16
        samples of ``init_size x n_features`` float64.
    random_state : int, RandomState or None, default=None
        Seeds the sample and k-means++.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
    labels_ : ndarray of shape (n_samples,), dask array or DataArray
        The cluster of each training row at the fitted centres. For in-memory X an
        ndarray; for dask or xarray X a lazy array of the same kind: computing it reads X
        once more, and saving the model leaves it out.
    inertia_ : float
        Sum of the squared distances of the training rows to their cluster's centre, at
        ``cluster_centers_``.
    cluster_sizes_ : ndarray of shape (n_clusters,)
        Training rows per cluster at ``cluster_centers_``.
    inertia_curve_ : ndarray of shape (n_iter_,)
        The inertia at the centres each iteration started from (never increasing).
    n_iter_ : int
        Lloyd's iterations of the kept initialisation.
    n_passes_ : int
        Passes over X in the fit.
    n_features_in_ : int

    Notes
    -----
    Passes: the sample (``init`` a string), then for each initialisation its iterations and
    one more pass at the final centres unless the last iteration found a fixed point (its
    pass was already at them). From the same initial centres the iterations assign every
    row as scikit-learn's Lloyd iterations do (distances on rows and centres moved by the
    centres' mean, so data far from the origin keep their digits) and give its centres and
    inertia to round-off. ``predict`` and ``transform`` are blockwise (lazy for dask input);
    ``score`` (minus the inertia) reads X once.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"k-means++", "random"}), "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "init_size": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: Any = "k-means++",
        n_init: Any = "auto",
        max_iter: int = 300,
        tol: float = 1e-4,
        init_size: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.init_size = init_size
        self.random_state = random_state

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = unknown_passes  # Lloyd's iterations run until a fixed point
        tags.fit.statistics = self._widest_pass
        assert tags.transformer is not None
        tags.transformer.width = _n_clusters_width(self.n_clusters)
        tags.transformer.saved_width = _saved_n_clusters
        tags.transformer.component_prefix = "distance to cluster "
        tags.translation_invariant = "transform"
        tags.xarray_dims = {
            "cluster_centers_": ("cluster", FEATURE),
            "cluster_sizes_": ("cluster",),
        }
        tags.checks.params = {"n_clusters": 3, "random_state": 0}
        return tags

    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        k = int(self.n_clusters) if isinstance(self.n_clusters, Integral) else 8
        centres = np.broadcast_to(0.0, (k, n_features))  # shape only
        lloyd_pass = KMeansSums.spec(centres=centres)
        if not isinstance(self.init, str):
            return [(lloyd_pass, n_features)]
        size = self.init_size or max(3 * 1024, 100 * k)
        sample = RowSample.spec(size=size, seed=0)
        wider = sample.value_nbytes(n_features) > lloyd_pass.value_nbytes(n_features)
        return [(sample if wider else lloyd_pass, n_features)]

    @property
    def _n_features_out(self) -> int:
        return int(self.cluster_centers_.shape[0])

    # --------------------------------------------------------------------------- fit
    def _n_starts(self) -> int:
        if self.n_init != "auto":
            return int(self.n_init)
        return 10 if isinstance(self.init, str) and self.init == "random" else 1

    def _check_init(self, d: int) -> np.ndarray:
        centres = np.asarray(self.init, dtype=np.float64)
        if centres.shape != (self.n_clusters, d):
            raise ValueError(
                f"The shape of the initial centers {centres.shape} does not match the "
                f"number of clusters {self.n_clusters} and features {d}: init must have "
                f"shape (n_clusters, n_features) = ({self.n_clusters}, {d})"
            )
        if not np.isfinite(centres).all():
            raise ValueError("init: the initial centers contain NaN or infinity")
        return centres

    @fit_context
    def fit(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> KMeans:
        """Cluster X: a sample pass for the start, then Lloyd's iterations, one pass each.

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
        rows = self._rows(X, reset=True, sample_dim=sample_dim)
        n, d = rows.shape
        k = int(self.n_clusters)
        if n < k:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
        rng = check_random_state(self.random_state)
        passes = 0
        n_init = self._n_starts()
        if isinstance(self.init, str):
            size = self.init_size or default_init_size(n, k)
            sample = draw_sample(rows, min(int(size), n), int(rng.randint(2**31 - 1)))
            passes += 1
            if sample.rows.shape[0] < k:
                raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
            starts: Iterator[np.ndarray] = (
                initial_centres(sample.rows, k, self.init, rng) for _ in range(n_init)
            )
        else:
            if self.n_init not in ("auto", 1):
                warnings.warn(
                    "Explicit initial center position passed: performing only one init in "
                    f"KMeans instead of n_init={self.n_init}.",
                    RuntimeWarning,
                    stacklevel=2,
                )
            starts = iter([self._check_init(d)])
            n_init = 1
        best: LloydRun | None = None
        for i, start in enumerate(starts):
            run = lloyd(
                rows.data,
                start,
                tol=float(self.tol),
                max_iter=int(self.max_iter),
                lazy=rows.is_lazy,
                what=f"KMeans (Lloyd, init {i + 1}/{n_init})",
                stacklevel=3,
            )
            passes += run.passes
            if best is None or run.inertia < best.inertia:
                best = run
        assert best is not None
        self.cluster_centers_ = best.centres
        self.inertia_ = best.inertia
        self.cluster_sizes_ = best.stat.counts.copy()
        self.inertia_curve_ = best.inertia_curve
        self.n_iter_ = int(best.n_iter)
        self.n_passes_ = passes
        distinct = int(np.count_nonzero(self.cluster_sizes_))
        if distinct < k:
            warnings.warn(
                f"Number of distinct clusters ({distinct}) found smaller than n_clusters ({k})."
                " Possibly due to duplicate points in X.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.labels_ = self._assign(rows)
        return self

    def fit_predict(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Any:
        """Fit, then the cluster of each training row (``labels_``).

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
        return self.fit(X, sample_dim=sample_dim).labels_

    # ----------------------------------------------------------------------- apply
    def _assign(self, rows: Rows) -> Any:
        return map_rows(
            rows, _labels_block, n_out=None, dtype=np.int32, name="kmeans-predict",
            args=(self.cluster_centers_,), method="KMeans.predict",
        )  # fmt: skip

    def predict(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """The nearest centre of each row (blockwise, lazy for dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        labels : same kind as X, shape (n_samples,), int32
        """
        return self._assign(self._rows(X, reset=False, sample_dim=sample_dim))

    def transform(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Euclidean distance of each row to every centre (blockwise, lazy for dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        distances : same kind as X, shape (n_samples, n_clusters)
            A DataArray has a ``cluster`` dim.
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim)
        k = self.cluster_centers_.shape[0]
        return map_rows(
            rows, _transform_block, n_out=k, dtype=np.float64, new_dim="cluster",
            new_coords=list(range(k)), name="kmeans-transform", args=(self.cluster_centers_,),
            method="KMeans.transform",
        )  # fmt: skip

    def score(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> float:
        """Minus the inertia of X at the fitted centres (one pass over dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        float
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim)
        centres = _ship(self.cluster_centers_, rows.is_lazy)
        return -float(compute(KMeansSums.spec(centres=centres), rows.data).inertia)

    # ---------------------------------------------------------------- persistence
    def _get_state(self) -> dict[str, Any]:
        params = self.get_params(deep=False)
        state = {k: v for k, v in vars(self).items() if k not in params}
        labels = state.get("labels_")
        if labels is not None and (is_dask(labels) or is_xarray(labels)):
            del state["labels_"]  # lazy: it would read the training data
        return state

    def _set_state(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, v)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags
