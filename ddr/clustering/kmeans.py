"""k-means on data larger than memory: k-means++ on a sample, then Lloyd, one pass per iteration.

The estimator :class:`KMeans` and its blockwise maps (``predict``, ``transform``). Where it
starts is :mod:`ddr.clustering._init` (k-means++ on a uniform, blocking-independent sample of
the rows, drawn in one pass; ``init="random"``: rows of that sample; an array: the centres);
its iterations are :mod:`ddr.clustering.lloyd` (Lloyd's, one pass each, on :mod:`ddr.em`'s
driver).
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterator
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE, DDRMixin, fit_context, map_rows
from ddr.clustering._init import (
    best_sample_centres,
    default_init_size,
    draw_sample,
    initial_centres,
    row_ids,
)
from ddr.clustering.lloyd import LloydRun, lloyd, lloyd_update
from ddr.families import FitThenTransform
from ddr.stats import KMeansSums, RowSample, compute
from ddr.stats._centring import scratch
from ddr.stats._input import Rows, is_dask, is_xarray
from ddr.stats._tiled import centred_tiles
from ddr.stats.engine import aligned
from ddr.tags import DDRTags, unknown_passes

# the start and the iterations are kept importable from here (GaussianMixture's k-means
# start imports them from this module)
__all__ = [
    "KMeans",
    "LloydRun",
    "best_sample_centres",
    "default_init_size",
    "draw_sample",
    "initial_centres",
    "lloyd",
    "lloyd_update",
    "row_ids",
]


# ------------------------------------------------------------------- blockwise maps
def _distance_tiles(
    X: np.ndarray, centres: np.ndarray
) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """``(rows, Y, D)`` a cache-sized tile of rows at a time: the rows moved by the centres'
    mean (float64, :func:`~ddr.stats._tiled.centred_tiles`) and their squared distances to
    every centre less ``|y|^2``, computed as :func:`~ddr.stats.kmeans_sums.nearest_centres`
    computes them for the fit (so that predictions are the fit's assignments)."""
    X, centres = aligned((X, centres))
    shift = centres.mean(axis=0)
    local = centres - shift
    local_t = np.ascontiguousarray(local.T)
    local_sq = np.einsum("ij,ij->i", local, local)
    k = centres.shape[0]
    for rows, Y in centred_tiles(X, shift, k):
        D = np.matmul(Y, local_t, out=scratch("kmeans.distances", (Y.shape[0], k)))
        D *= -2.0
        D += local_sq
        yield rows, Y, D


def _labels_block(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """The nearest centre of each row of a block (as KMeansSums assigns it)."""
    out = np.empty(X.shape[0], dtype=np.int32)
    for rows, _, D in _distance_tiles(X, centres):
        out[rows] = np.argmin(D, axis=1)
    return out


def _transform_block(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Euclidean distances of each row of a block to every centre."""
    out = np.empty((X.shape[0], centres.shape[0]))
    for rows, Y, D in _distance_tiles(X, centres):
        D += np.einsum("ij,ij->i", Y, Y)[:, None]
        np.maximum(D, 0.0, out=D)
        np.sqrt(D, out=out[rows])
    return out


# ----------------------------------------------------------------------- estimator
def _n_clusters_width(n_clusters: Any) -> Any:
    width = int(n_clusters) if isinstance(n_clusters, Integral) else None

    def rule(n_samples: Any, n_features: Any) -> int | None:
        return width

    return rule


def _fitted_sizes(model: Any) -> np.ndarray:
    """The rows per cluster a fitted KMeans kept (its final pass's counts)."""
    return np.asarray(model.cluster_sizes_)


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
        scikit-learn's rule: stop when the centres' squared shift in an iteration, summed
        over the centres, is at most ``tol`` times the mean of the features' variances
        (which the first iteration's pass gives, exactly: no pass of its own). A fixed
        point (no row changes cluster) stops the fit whatever ``tol``; ``tol=0`` runs to
        one. The default, scikit-learn's, can stop short of the fixed point on data
        without clear clusters (measured: inertia 0.3 % above it on uniform data); from
        the same centres ddr stops at the same iteration as scikit-learn.
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
        Training rows per cluster at ``cluster_centers_`` (float64, whole numbers): the
        counts of the fit's last pass, which assigned the rows to these centres, so no pass
        of its own. A pipeline's ``sizes`` plot draws them. scikit-learn has no such
        attribute (``np.bincount(labels_)`` there).
    inertia_curve_ : ndarray of shape (n_iter,)
        The inertia at the centres each iteration started from (never increasing), one per
        iteration (``n_iter_`` of them).
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
        sample = "no pass for the start" if not isinstance(self.init, str) else "1 for a sample"
        tags.fit.passes_note = (
            f"{sample}, then per start one per Lloyd iteration (at most {self.max_iter}) and "
            "one at its final centres unless they are a fixed point"
        )
        tags.fit.statistics = self._widest_pass
        assert tags.transformer is not None
        tags.transformer.width = _n_clusters_width(self.n_clusters)
        tags.transformer.saved_width = _saved_n_clusters
        tags.transformer.component_prefix = "distance to cluster "
        tags.translation_invariant = "transform"
        tags.cluster_sizes = _fitted_sizes
        tags.xarray_dims = {
            "cluster_centers_": ("cluster", FEATURE),
            "cluster_sizes_": ("cluster",),
        }
        tags.xarray_units = {"cluster_centers_": 1, "cluster_sizes_": 0}
        tags.checks.params = {"n_clusters": 3, "random_state": 0}
        return tags

    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        k = int(self.n_clusters) if isinstance(self.n_clusters, Integral) else 8
        centres = np.broadcast_to(0.0, (k, n_features))  # shape only
        # the first Lloyd pass also sums the per-feature scatters (tol's variance)
        scatter = "diag" if not isinstance(self.tol, Real) or self.tol > 0 else None
        lloyd_pass = KMeansSums.spec(centres=centres, scatter=scatter)
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
            method="KMeans.transform", units=self._output_units(1),  # distances
        )  # fmt: skip

    def score(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> float:
        """Return minus the inertia of X at the fitted centres (one pass over dask input).

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
        return -float(compute(KMeansSums.spec(centres=self.cluster_centers_), rows.data).inertia)

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
