"""The reduction engine: one pass for several statistics, numpy/dask/xarray input, clear errors."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from graph_support import task_nbytes

from ddr.stats import CategoricalCounts, ClassMoments, Histogram, Moments, compute, lazy
from ddr.testing import counting_dask_array


def data(rng, n=4000, d=5):
    X = rng.standard_normal((n, d)) * np.arange(1, d + 1) + 50
    y = rng.integers(0, 3, size=n)
    return X, y


def test_several_statistics_read_each_chunk_once(rng):
    """Acceptance: Moments, ClassMoments and CategoricalCounts of one dask array in ONE pass."""
    X, y = data(rng)
    Xc = np.abs(np.round(X)).astype(np.int64) % 6
    arr, counter = counting_dask_array(Xc, chunks=(500, -1))
    with dask.config.set(scheduler="threads"):
        m, cm, cc = compute([Moments, ClassMoments, CategoricalCounts], arr, y)
    assert counter.passes == 1.0
    assert counter.reads == 8
    np.testing.assert_allclose(m.covariance(), np.cov(Xc.T, ddof=0), rtol=1e-11)
    np.testing.assert_array_equal(cm.counts, np.bincount(y))
    assert cc.counts.sum() == Xc.size


def test_lazy_results_share_one_pass(rng):
    X, y = data(rng)
    arr, counter = counting_dask_array(X, chunks=(1000, -1))
    a = lazy(Moments, arr)
    b = lazy(ClassMoments.spec(diagonal=True), arr, y)
    c = lazy(Histogram, arr)
    with dask.config.set(scheduler="sync"):
        m, cm, h = dask.compute(a, b, c)
    assert counter.passes == 1.0
    assert isinstance(m, Moments) and isinstance(cm, ClassMoments) and isinstance(h, Histogram)
    assert lazy(Moments, arr).key == a.key  # deterministic graph names


def test_numpy_dask_xarray_agree(rng):
    X, y = data(rng)
    ref = compute(Moments, X)
    for chunks in ((4000, -1), (1, -1), (333, -1), ((100, 3900), -1)):
        got = compute(Moments, da.from_array(X, chunks=chunks), split_every=3)
        np.testing.assert_allclose(got.scatter, ref.scatter, rtol=1e-12)
    xa = xr.DataArray(X.T, dims=("feature", "time"), coords={"time": np.arange(len(X))})
    got = compute(ClassMoments, xa, xr.DataArray(y, dims="time"), sample_dim="time")
    np.testing.assert_allclose(got.total().scatter, ref.scatter, rtol=1e-12)
    chunked = xa.chunk({"time": 700})
    got = compute(Moments, chunked, sample_dim="time")
    np.testing.assert_allclose(got.scatter, ref.scatter, rtol=1e-12)


def test_labels_and_weights_rechunked_to_rows(rng):
    X, y = data(rng)
    w = rng.random(len(X))
    arr = da.from_array(X, chunks=(600, -1))
    got = compute(ClassMoments, arr, da.from_array(y, chunks=1000), da.from_array(w, chunks=77))
    ref = ClassMoments.from_block(X, y, w)
    np.testing.assert_allclose(got.within_scatter(), ref.within_scatter(), rtol=1e-11)


def test_unknown_chunk_sizes(rng):
    X, y = data(rng)
    arr = da.from_array(X, chunks=(1000, -1))
    filtered = arr[arr[:, 0] > -np.inf]  # unknown row chunks
    yd = da.from_array(y, chunks=1000)
    yf = yd[arr[:, 0] > -np.inf]
    got = compute(ClassMoments, filtered, yf)
    np.testing.assert_array_equal(got.counts, np.bincount(y))
    with pytest.raises(ValueError, match="X has unknown chunk sizes, so numpy y cannot be aligned"):
        compute(ClassMoments, filtered, y)


def test_on_local_cluster(client, rng):
    X, y = data(rng, n=20000)
    m, cm = compute(
        [Moments, ClassMoments], da.from_array(X, chunks=(2500, -1)), da.from_array(y, chunks=2500)
    )
    np.testing.assert_allclose(m.covariance(ddof=1), np.cov(X.T), rtol=1e-11)
    np.testing.assert_array_equal(cm.counts, np.bincount(y))


def test_bounded_memory_on_small_workers(client):
    """Data 4x larger than a worker's memory limit: no spilling and no worker restarts."""
    n, d = 2_000_000, 64  # 512 MB of float32, generated lazily on the workers
    before = {w["id"] for w in client.scheduler_info()["workers"].values()}
    rand = da.random.default_rng(0).standard_normal((n, d), chunks=(50_000, d), dtype=np.float32)
    m = compute(Moments, rand)
    assert m.count == n
    np.testing.assert_allclose(m.variance(), 1.0, atol=0.01)
    after = {w["id"] for w in client.scheduler_info()["workers"].values()}
    assert before == after  # no restarts
    spilled = client.run(
        lambda dask_worker: len(dask_worker.data.slow) if hasattr(dask_worker.data, "slow") else 0
    )
    assert sum(spilled.values()) == 0


def test_engine_errors(rng):
    X, y = data(rng)
    # chunks along features are merged into whole rows in the pass (was refused; where dask
    # cannot merge them chunk by chunk the refusal stays: tests/test_space_chunked.py)
    merged = compute(Moments, da.from_array(X, chunks=(1000, 3)))
    np.testing.assert_allclose(merged.covariance(), compute(Moments, X).covariance(), rtol=1e-12)
    with pytest.raises(
        ValueError,
        match=r"X must be 2-D \(n_samples, n_features\); got a dask "
        r"array with ndim=1",
    ):
        compute(Moments, da.ones(10))
    with pytest.raises(ValueError, match="y has 3999 entries but X has 4000 samples"):
        compute(ClassMoments, da.from_array(X, chunks=1000), y[:-1])
    with pytest.raises(ValueError, match=r"y has shape \(3999,\) but X has 4000 samples"):
        compute(ClassMoments, X, y[:-1])
    with pytest.raises(ValueError, match="X is empty: it has 0 samples"):
        compute(Moments, np.empty((0, 3)))
    with pytest.raises(ValueError, match="X is empty: it has 0 samples"):
        compute(Moments, da.from_array(X, chunks=1000)[X[:, 0] > np.inf])
    with pytest.raises(ValueError, match="X has 0 features"):
        compute(Moments, np.empty((3, 0)))
    with pytest.raises(ValueError, match=r"ClassMoments.spec\(\) need\(s\) class labels y"):
        compute([Moments, ClassMoments], X)
    with pytest.raises(TypeError, match="expected a Statistic class"):
        compute("moments", X)
    with pytest.raises(ValueError, match="split_every must be at least 2"):
        lazy(Moments, X, split_every=1)
    with pytest.raises(ValueError, match="sample_dim='row' is not a dimension of X"):
        compute(Moments, xr.DataArray(X, dims=("sample", "feature")), sample_dim="row")
    with pytest.raises(ValueError, match="y must be 1-D along 'sample'"):
        compute(
            ClassMoments, xr.DataArray(X, dims=("sample", "feature")), xr.DataArray(y, dims="other")
        )
    bad = X.copy()
    bad[1234, 2] = np.nan
    with pytest.raises(ValueError, match="X contains 1 NaN value"):
        compute(Moments, da.from_array(bad, chunks=1000))


def test_compute_with_rows_refuses_statistics_without_rows_and_other_blocks(rng):
    from ddr.stats import PLSASums
    from ddr.stats.engine import compute_with_rows

    X = rng.poisson(2.0, size=(60, 8)).astype(np.float64)
    refused = r"Moments keeps no per-row parameters between passes \(carries_rows is False\)"
    with pytest.raises(TypeError, match=refused + "; use ddr.stats.compute"):
        compute_with_rows(Moments, X)
    spec = PLSASums.spec(topics=np.full((2, 8), 1 / 8))
    _, rows = compute_with_rows(spec, da.from_array(X, chunks=(20, -1)))
    other = r"the per-row parameters are in 3 blocks and X in 2: pass the same X, in the same "
    with pytest.raises(ValueError, match=other + "blocks, on every pass"):
        compute_with_rows(spec, da.from_array(X, chunks=(30, -1)), rows)


def test_large_options_go_into_the_graph_once():
    """A statistic's large option is one key of the graph, not a copy in every block's
    task (distributed sends each task's arguments with it); the result is unchanged."""
    from ddr.stats import KMeansSums
    from ddr.stats.engine import SHIP_BYTES, shipped

    rng = np.random.default_rng(1)
    x = rng.standard_normal((400, 3))
    centres = rng.standard_normal((3000, 3))  # 72 000 bytes, above SHIP_BYTES
    assert centres.nbytes > SHIP_BYTES
    X = da.from_array(x, chunks=100)
    sizes = task_nbytes(lazy(KMeansSums.spec(centres=centres), X))
    blocks = [n for k, n in sizes.items() if "ddr-stats-block" in str(k)]
    assert len(blocks) == 4 and max(blocks) < SHIP_BYTES
    assert sum(n > centres.nbytes for n in sizes.values()) == 1  # the one key that holds them
    # small options stay in the tasks; numpy input is never wrapped
    small = centres[:10]
    assert shipped(small) is small and shipped(centres, lazy=False) is centres
    got = compute(KMeansSums.spec(centres=centres), X)
    want = compute(KMeansSums.spec(centres=centres), x)
    np.testing.assert_array_equal(got.counts, want.counts)
    np.testing.assert_allclose(got.means, want.means, rtol=1e-13)
