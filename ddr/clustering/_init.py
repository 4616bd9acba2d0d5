"""Where k-means starts: k-means++ on a uniform sample of the rows, drawn in one pass.

One pass draws a uniform sample of ``init_size`` rows (:class:`ddr.stats.RowSample`: each
row's priority is a hash of its position and the seed, so the sample does not depend on the
blocks); k-means++ (scikit-learn's ``kmeans_plusplus``, on the sample moved to its mean) picks
the initial centres from it, and Lloyd's iterations on the sample, in memory, refine them.
``init="random"`` takes ``n_clusters`` rows of the sample (a uniform draw).

**Why a sample and not k-means||** (measured, ``benchmarks/results/clustering.md``):
k-means|| (Bahmani et al. 2012, dask-ml's default) reads the data once to price a first
centre, then once per oversampling round, about ``log(initial cost)`` rounds (18 on the
benchmark's S data, 200 000 x 100); dask-ml also reads the chosen rows back each round: 39.5
passes, and its unweighted candidates start 19.5 % above the best inertia found. The sample
costs one pass whatever the data (a start 0.9 % above there), and Lloyd's iterations on the
sample, which read nothing, bring the start close to the optimum of the full data, so the
full-data iterations that follow are few.
"""

from __future__ import annotations

import warnings
from typing import Any

import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ddr.stats import RowSample, compute
from ddr.stats._input import Rows

__all__ = [
    "best_sample_centres",
    "default_init_size",
    "draw_sample",
    "initial_centres",
    "row_ids",
]

#: Lloyd's iterations on the sample that refine the k-means++ start (in memory, no pass)
_SAMPLE_ITER = 100


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


def _sample_lloyd(sample: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, float]:
    """Lloyd's iterations on the sample (in memory) from ``centres``, to a fixed point: the
    centres and the sample's inertia at them."""
    from sklearn.cluster import KMeans as SkKMeans

    centre = sample.mean(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # duplicate rows in the sample
        km = SkKMeans(
            centres.shape[0], init=centres - centre, n_init=1, max_iter=_SAMPLE_ITER, tol=0.0
        ).fit(sample - centre)
    return km.cluster_centers_ + centre, float(km.inertia_)


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
    return _sample_lloyd(sample, centres)[0] if refine else centres


def best_sample_centres(
    sample: np.ndarray, k: int, rng: np.random.RandomState, starts: int
) -> np.ndarray:
    """The k-means centres of the sample: of ``starts`` runs (k-means++, then Lloyd's
    iterations on the sample to a fixed point), those of the lowest inertia on the sample.

    In memory, no pass. One run on a sample lands in a poor local optimum (two centres in
    one cluster, one between two) more often than on all rows: on 60 000 rows of 10
    Gaussian blobs, 4 of 10 seeds with one run, none with three
    (``benchmarks/results/clustering.md``).

    Parameters
    ----------
    sample : ndarray of shape (m, d)
        The sample's rows.
    k : int
        Clusters.
    rng : RandomState
        Seeds k-means++.
    starts : int
        Runs of k-means++ and Lloyd.

    Returns
    -------
    ndarray of shape (k, d)
    """
    best: tuple[float, np.ndarray] | None = None
    for _ in range(starts):
        centres, inertia = _sample_lloyd(sample, _kmeans_plusplus(sample, k, rng))
        if best is None or inertia < best[0]:
            best = (inertia, centres)
    assert best is not None
    return best[1]
