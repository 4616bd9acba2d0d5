"""ddr.KMeans: from the same initial centres each Lloyd iteration is scikit-learn's (the same
labels, its centres and inertia to round-off, empty clusters moved as it moves them), a fixed
point costs no extra pass, the k-means++ sample does not depend on the blocks, data far from the
origin keep their digits, and data five times a worker's memory cluster in bounded memory."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import pairwise_distances_argmin

import ddr
from ddr.clustering._init import default_init_size, draw_sample
from ddr.stats import KMeansSums, RowSample, compute
from ddr.stats._input import as_rows
from ddr.testing import counting_dask_array


def _blobs(n=3000, d=5, k=6, seed=2, std=2.0):
    X, _ = make_blobs(n, d, centers=k, random_state=seed, cluster_std=std)
    return X


def _start(X, k, seed=0):
    return X[np.random.default_rng(seed).choice(len(X), k, replace=False)]


def _sklearn(X, init, max_iter, tol=0.0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SkKMeans(init.shape[0], init=init, n_init=1, max_iter=max_iter, tol=tol).fit(X)


def _ours(X, init, max_iter, tol=0.0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return ddr.KMeans(init.shape[0], init=init, max_iter=max_iter, tol=tol).fit(X)


def _computed(a):
    return np.asarray(a.compute() if hasattr(a, "compute") else a)


@pytest.mark.parametrize("form", ["numpy", "dask"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_lloyd_iteration_is_scikit_learns(form, seed):
    X = _blobs(seed=seed)
    init = _start(X, 6, seed)
    data = X if form == "numpy" else da.from_array(X, chunks=(377, -1))
    for it in range(1, 6):
        sk, ours = _sklearn(X, init, it), _ours(data, init, it)
        np.testing.assert_array_equal(_computed(ours.labels_), sk.labels_)
        np.testing.assert_allclose(ours.cluster_centers_, sk.cluster_centers_, rtol=1e-12, atol=0)
        assert ours.inertia_ == pytest.approx(sk.inertia_, rel=1e-10)


@pytest.mark.parametrize("seed", [0, 3])
def test_to_the_fixed_point_as_scikit_learn_with_tol_0(seed):
    X = _blobs(n=5000, seed=seed)
    init = _start(X, 6, seed)
    sk, ours = _sklearn(X, init, 300), _ours(X, init, 300)
    np.testing.assert_array_equal(ours.labels_, sk.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, sk.cluster_centers_, rtol=1e-12, atol=0)
    assert ours.inertia_ == pytest.approx(sk.inertia_, rel=1e-10)
    # both stop when the labels repeat (then no centre moves): the same iteration, and its
    # pass was at the final centres (no pass for the inertia, which scikit-learn computes
    # after its loop)
    assert ours.n_iter_ == sk.n_iter_
    assert ours.n_passes_ == ours.n_iter_


@pytest.mark.parametrize("tol", [1e-4, 1e-2, 1e-6])
@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_tol_is_scikit_learns_rule_on_the_centres_shift(tol, offset):
    """tol is scikit-learn's: the centres' squared shift, summed, against tol times the mean
    variance of the features. On data without clusters (where it stops Lloyd early) both
    stop at the same iteration with the same labels, centres and inertia, on data far from
    the origin too; the variance comes from the first pass (no pass of its own), and the
    final centres get one more pass unless they are a fixed point."""
    X = np.random.default_rng(11).uniform(size=(6000, 4)) + offset
    for seed in range(3):
        init = _start(X, 7, seed)
        sk = _sklearn(X, init, 300, tol=tol)
        arr, counter = counting_dask_array(X, chunks=(1000, -1))
        with dask.config.set(scheduler="sync"):
            ours = _ours(arr, init, 300, tol=tol)
        passes = counter.passes  # before labels_, which reads X again
        assert ours.n_iter_ == sk.n_iter_
        np.testing.assert_array_equal(_computed(ours.labels_), sk.labels_)
        np.testing.assert_allclose(ours.cluster_centers_, sk.cluster_centers_, rtol=1e-12)
        assert ours.inertia_ == pytest.approx(sk.inertia_, rel=1e-10)
        fixed = ours.inertia_curve_[-1] == ours.inertia_
        assert passes == ours.n_passes_ == ours.n_iter_ + (0 if fixed else 1)


def test_the_variance_of_the_tolerance_is_exact_far_from_the_origin():
    from ddr.clustering.lloyd import mean_variance

    X = np.random.default_rng(3).standard_normal((5000, 6)) * [1, 2, 3, 4, 5, 6] + 1e8
    centres = X[:5] + 0.5
    stat = compute(KMeansSums.spec(centres=centres, scatter="diag"), da.from_array(X, 700))
    # the cluster means at 1e8 hold about 1e-8 of absolute round-off: the between-cluster
    # part of the variance carries it (a sum of squares about the origin would lose all)
    assert mean_variance(stat) == pytest.approx(np.var(X - 1e8, axis=0).mean(), rel=1e-8)


def test_a_fixed_point_is_found_to_the_last_bit_and_costs_no_extra_pass():
    X = _blobs(n=4000, seed=5)
    init = _start(X, 6, 5)
    arr, counter = counting_dask_array(X, chunks=(500, -1))
    with dask.config.set(scheduler="sync"):
        km = ddr.KMeans(6, init=init, tol=0.0).fit(arr)
    assert counter.passes == km.n_passes_ == km.n_iter_
    curve = km.inertia_curve_
    assert np.all(np.diff(curve) <= 0)
    assert km.inertia_ == curve[-1]  # the last pass was at the final centres
    # a fixed point to the last bit: one more iteration from it moves no centre at all
    with dask.config.set(scheduler="sync"):
        again = ddr.KMeans(6, init=km.cluster_centers_, tol=0.0).fit(arr)
    assert again.n_iter_ == again.n_passes_ == 1
    np.testing.assert_array_equal(again.cluster_centers_, km.cluster_centers_)
    assert again.inertia_ == km.inertia_


def test_stopped_by_tol_reads_once_more_at_the_final_centres():
    X = _blobs(n=4000, seed=5)
    arr, counter = counting_dask_array(X, chunks=(500, -1))
    with dask.config.set(scheduler="sync"):
        km = ddr.KMeans(6, init=_start(X, 6, 5), tol=1e-2).fit(arr)
    assert km.n_passes_ == km.n_iter_ + 1 == counter.passes
    # inertia_ and labels_ are those of the final centres
    nearest = pairwise_distances_argmin(X, km.cluster_centers_)
    assert km.inertia_ == pytest.approx(((X - km.cluster_centers_[nearest]) ** 2).sum(), 1e-10)
    np.testing.assert_array_equal(_computed(km.labels_), nearest)


def test_empty_clusters_take_the_farthest_rows_as_in_scikit_learn():
    X = _blobs(n=2000, seed=7)
    init = _start(X, 6, 7)
    init[[1, 4]] = X.max(axis=0) + 100.0  # two centres no row is nearest to
    for it in (1, 2, 3):
        sk, ours = _sklearn(X, init, it), _ours(da.from_array(X, chunks=(300, -1)), init, it)
        np.testing.assert_array_equal(_computed(ours.labels_), sk.labels_)
        np.testing.assert_allclose(ours.cluster_centers_, sk.cluster_centers_, rtol=1e-12)


def test_more_clusters_than_distinct_rows_warns_as_scikit_learn():
    X = np.repeat(np.arange(3.0)[:, None], 10, axis=0) * np.ones((1, 2))
    with pytest.warns(ConvergenceWarning, match=r"Number of distinct clusters \(3\) found"):
        km = ddr.KMeans(5, random_state=0).fit(X)
    assert sorted(np.unique(km.labels_).tolist()) == sorted(set(km.labels_.tolist()))
    assert km.inertia_ == 0.0


def test_the_sample_does_not_depend_on_the_blocks():
    X = np.random.default_rng(0).standard_normal((1000, 3))
    ids = np.arange(1000)
    whole = RowSample.from_block(X, ids, size=50, seed=4)
    for chunks in ((1000,), (7, 500, 493), (999, 1), (100,) * 10):
        got = compute(
            RowSample.spec(size=50, seed=4),
            da.from_array(X, chunks=(chunks, -1)),
            da.from_array(ids, chunks=(chunks,)),
        )
        np.testing.assert_array_equal(got.ids, whole.ids)
        np.testing.assert_array_equal(got.rows, whole.rows)
    # a uniform draw: every row about equally often over seeds
    counts = np.zeros(1000)
    for seed in range(200):
        counts[RowSample.from_block(X, ids, size=50, seed=seed).ids] += 1
    assert counts.sum() == 200 * 50
    assert abs(counts.mean() - 10) < 1e-12 and counts.std() < 5  # binomial sd ~ 3.1
    assert draw_sample(as_rows(X), 50, 4).ids.tolist() == whole.ids.tolist()


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_the_model_does_not_depend_on_the_blocks_or_the_offset(init):
    X = _blobs(n=3000, seed=11)
    km = ddr.KMeans(6, init=init, random_state=3).fit(X)
    for chunks in ((3000,), (7, 1500, 1493), (2999, 1)):
        other = ddr.KMeans(6, init=init, random_state=3).fit(da.from_array(X, chunks=(chunks, -1)))
        np.testing.assert_allclose(other.cluster_centers_, km.cluster_centers_, rtol=1e-12)
        assert other.inertia_ == pytest.approx(km.inertia_, rel=1e-12)
    shift = 1e8 * np.array([1.0, -2.0, 0.5, 3.0, -1.0])
    far = ddr.KMeans(6, init=init, random_state=3).fit(da.from_array(X + shift, chunks=(777, -1)))
    np.testing.assert_allclose(far.cluster_centers_ - shift, km.cluster_centers_, atol=1e-6)
    # inputs at 3e8 keep ~8 of their 16 digits; so do the squared distances
    assert far.inertia_ == pytest.approx(km.inertia_, rel=1e-6)
    np.testing.assert_array_equal(_computed(far.labels_), km.labels_)


def test_k_means_plus_plus_on_the_sample_finds_scikit_learns_optimum():
    X = _blobs(n=20000, d=8, k=10, seed=1, std=1.0)
    sk = SkKMeans(10, n_init=10, random_state=0).fit(X)
    for seed in range(3):
        km = ddr.KMeans(10, random_state=seed).fit(da.from_array(X, chunks=(3000, -1)))
        assert km.inertia_ <= sk.inertia_ * (1 + 1e-9)
        assert km.n_passes_ <= 1 + km.n_iter_ + 1
        assert km.n_iter_ <= 3  # the sample's Lloyd iterations did the rest


def test_predict_transform_and_score_of_the_fitted_centres():
    X = _blobs(n=2000, seed=4)
    km = ddr.KMeans(6, random_state=0).fit(X)
    sk = _sklearn(X, km.cluster_centers_, 1)  # its labels and distances at these centres
    sk.cluster_centers_ = km.cluster_centers_
    Q = X[:500] + 0.3
    np.testing.assert_array_equal(km.predict(Q), sk.predict(Q))
    np.testing.assert_allclose(km.transform(Q), sk.transform(Q), rtol=1e-10)
    assert km.score(Q) == pytest.approx(sk.score(Q), rel=1e-10)
    Qd = da.from_array(Q, chunks=(128, -1))
    assert isinstance(km.predict(Qd), da.Array) and isinstance(km.transform(Qd), da.Array)
    assert km.score(Qd) == pytest.approx(sk.score(Q), rel=1e-10)
    out = km.transform(xr.DataArray(Q, dims=("row", "feature")))
    assert out.dims == ("row", "cluster")
    np.testing.assert_array_equal(km.fit_transform(X), km.transform(X))
    np.testing.assert_array_equal(ddr.KMeans(6, random_state=0).fit_predict(X), km.labels_)
    assert km.get_feature_names_out().tolist() == [f"kmeans{i}" for i in range(6)]


def test_labels_of_dask_input_are_lazy_and_not_saved():
    X = _blobs(n=1000, seed=4)
    km = ddr.KMeans(4, random_state=0).fit(da.from_array(X, chunks=(300, -1)))
    assert isinstance(km.labels_, da.Array)
    ref = ddr.KMeans(4, random_state=0).fit(X)
    np.testing.assert_array_equal(km.labels_.compute(), ref.labels_)
    with tempfile.TemporaryDirectory() as tmp:
        km.save(Path(tmp) / "km.zarr")
        back = ddr.load(Path(tmp) / "km.zarr")
    assert not hasattr(back, "labels_")
    np.testing.assert_array_equal(back.cluster_centers_, km.cluster_centers_)
    np.testing.assert_array_equal(back.cluster_sizes_, km.cluster_sizes_)
    labels = ddr.KMeans(4, random_state=0).fit(xr.DataArray(X, dims=("s", "f"))).labels_
    assert isinstance(labels, xr.DataArray) and labels.dims == ("s",)


def test_n_init_keeps_the_lowest_inertia_and_shares_the_sample():
    X = _blobs(n=3000, k=8, seed=9, std=3.0)
    arr, counter = counting_dask_array(X, chunks=(1000, -1))
    with dask.config.set(scheduler="sync"):
        km = ddr.KMeans(8, n_init=4, init="random", random_state=0).fit(arr)
    one = [ddr.KMeans(8, n_init=1, init="random", random_state=s).fit(X).inertia_ for s in range(4)]
    assert km.inertia_ <= min(one) * (1 + 1e-3)
    assert counter.passes == km.n_passes_
    assert ddr.KMeans(8, init="random")._n_starts() == 10  # scikit-learn's "auto"
    assert ddr.KMeans(8)._n_starts() == 1


def test_refusals():
    X = _blobs(n=50)
    with pytest.raises(ValueError, match=r"n_samples=50 should be >= n_clusters=51"):
        ddr.KMeans(51).fit(X)
    with pytest.raises(ValueError, match=r"shape of the initial centers \(2, 5\) does not match"):
        ddr.KMeans(3, init=X[:2]).fit(X)
    with pytest.warns(RuntimeWarning, match="performing only one init"):
        ddr.KMeans(3, init=X[:3], n_init=3).fit(X)
    bad = X.copy()
    bad[17, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ddr.KMeans(3, random_state=0).fit(da.from_array(bad, chunks=(20, -1)))
    assert default_init_size(10**6, 8) == 3072 and default_init_size(10**6, 100) == 10_000
    assert default_init_size(500, 100) == 500


def test_the_lloyd_statistic_keeps_digits_at_an_offset():
    X = _blobs(n=3000, seed=2)
    centres = _start(X, 6)
    ref = KMeansSums.from_block(X, centres=centres)
    shift = 1e8
    far = compute(
        KMeansSums.spec(centres=centres + shift), da.from_array(X + shift, chunks=(250, -1))
    )
    np.testing.assert_array_equal(far.counts, ref.counts)
    np.testing.assert_allclose(far.means - shift, ref.means, atol=1e-6)
    assert far.inertia == pytest.approx(ref.inertia, rel=1e-7)


# ------------------------------------------------------------- larger than memory
#: one worker of this memory limit (its two threads are the whole cluster)
WORKER_MEMORY = 400 * 2**20


@pytest.fixture(scope="module")
def small_cluster():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=True,
            memory_limit=WORKER_MEMORY,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


def _peak_rss_mib() -> float:
    """The worker process's own peak RSS: /proc's VmHWM (of its memory since exec), not
    ru_maxrss, which Linux carries over exec from the forked parent's image (a pytest
    process grown to 1 GiB by earlier tests made every fresh worker look that big)."""
    import resource

    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _generated(n: int, d: int, chunk: int) -> da.Array:
    """``n x d`` float32 rows made on the workers, chunk by chunk: four clusters of uniform
    noise around ``10 j`` (rows repeat every 4096, which k-means does not mind)."""

    def rows(carrier, block_info=None):  # a closure: cloudpickle ships it by value
        start = block_info[0]["array-location"][0][0]
        m = carrier.shape[0]
        table = np.random.default_rng(7).random((4096, d), dtype=np.float32)
        first = start % 4096
        out = np.tile(table, (-(-m // 4096) + 1, 1))[first : first + m]
        out += (10 * ((start + np.arange(m)) % 4)).astype(np.float32)[:, None]
        return out

    carrier = da.zeros((n, 1), chunks=(chunk, 1), dtype=np.float32)
    return carrier.map_blocks(rows, chunks=(carrier.chunks[0], (d,)), dtype=np.float32)


def test_data_five_times_the_cluster_memory_in_bounded_memory(small_cluster):
    """2 GiB of float32 rows made on the worker (5x its memory_limit, which is the whole
    cluster's): fitted with no spilling, no restart, the worker's peak RSS below where dask
    pauses it, and the four clusters found."""
    client = small_cluster
    d = 16
    n = 5 * WORKER_MEMORY // (4 * d)
    X = _generated(n, d, 125_000)
    assert X.nbytes == 5 * WORKER_MEMORY
    before = {w["id"] for w in client.scheduler_info()["workers"].values()}
    with dask.config.set(scheduler=client):
        km = ddr.KMeans(4, random_state=0).fit(X)
    order = np.argsort(km.cluster_centers_[:, 0])
    table = np.random.default_rng(7).random((4096, d), dtype=np.float32).astype(np.float64)
    truth = np.stack([table[c::4].mean(axis=0) + 10 * c for c in range(4)])
    np.testing.assert_allclose(km.cluster_centers_[order], truth, atol=1e-5)
    np.testing.assert_array_equal(km.cluster_sizes_[order], n // 4)
    assert km.n_passes_ <= 4  # the sample, then Lloyd to its fixed point
    after = {w["id"] for w in client.scheduler_info()["workers"].values()}
    assert before == after  # no restart
    spilled = client.run(
        lambda dask_worker: len(dask_worker.data.slow) if hasattr(dask_worker.data, "slow") else 0
    )
    assert sum(spilled.values()) == 0
    peak = max(client.run(_peak_rss_mib).values())
    assert peak * 2**20 < 0.8 * WORKER_MEMORY, peak  # below where dask pauses a worker
