"""A kernel density's bandwidth grid in two passes: exact mode against scikit-learn's
GridSearchCV and a brute-force log-sum-exp, binned mode against ddr's binned fit per fold and
the exact scores, the passes counted, hashed folds' chunking invariance, "auto" decided once
for all folds, and what is refused."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.model_selection import GridSearchCV as SkGridSearchCV
from sklearn.model_selection import KFold
from sklearn.neighbors import KernelDensity as SkKernelDensity

import ddr
from ddr.model_selection import GridSearchCV, HashKFold, cross_validate
from ddr.tags import get_ddr_tags
from ddr.testing import counting_dask_array

TOL = 1e-10


def _mixture(n=400, d=1, seed=0):
    rng = np.random.default_rng(seed)
    k = n * 3 // 5
    return np.r_[rng.normal(size=(k, d)), rng.normal(3.0, 0.5, size=(n - k, d))]


def _splits(search):
    return np.array([search.cv_results_[f"split{k}_test_score"] for k in range(search.n_splits_)])


def _brute_total(train, test, h):
    """The Gaussian kernel density of ``train`` summed in log over ``test``, by numpy."""
    d = train.shape[1]
    d2 = ((test[:, None, :] - train[None, :, :]) ** 2).sum(axis=-1)
    log_norm = -np.log(train.shape[0]) - 0.5 * d * np.log(2 * np.pi) - d * np.log(h)
    return float(np.sum(logsumexp(-0.5 * d2 / h**2, axis=1) + log_norm))


# ------------------------------------------------------------------------ exact mode
@pytest.mark.parametrize("d", [1, 2])
def test_exact_bandwidth_grid_equals_scikit_learn(d):
    X = _mixture(d=d)
    grid = {"bandwidth": list(np.geomspace(0.3, 2.0, 6)), "kernel": ["gaussian", "exponential"]}
    ours = GridSearchCV(ddr.KernelDensity(), grid, cv=5).fit(X)
    theirs = SkGridSearchCV(SkKernelDensity(), grid, cv=KFold(5)).fit(X)
    np.testing.assert_allclose(_splits(ours), _splits(theirs), rtol=TOL, atol=0)
    np.testing.assert_allclose(
        ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], rtol=TOL
    )
    assert ours.best_params_ == theirs.best_params_
    assert ours.scoring_ == "total_log_likelihood"  # KernelDensity.score is a sum
    # bandwidth and kernel enter the solve: one statistic of each fold, two passes
    assert (ours.plan_.n_passes, ours.plan_.n_statistics) == (2, 1)
    np.testing.assert_allclose(ours.score(X), theirs.score(X), rtol=TOL)


def test_exact_scores_equal_a_brute_force_sum_where_scikit_learns_tree_prunes():
    """Narrow bandwidths put held-out points of the far tail beyond every kernel: scikit-
    learn's tree (atol=rtol=0) then prunes nodes and is off by up to 4% (measured); ddr's
    log-sum-exp is exact."""
    X = _mixture(d=2, seed=3)
    grid = {"bandwidth": [0.02, 0.05, 0.1]}
    for cv in (5, HashKFold(5, seed=4)):
        ours = GridSearchCV(ddr.KernelDensity(), grid, cv=cv).fit(X)
        splitter = KFold(5) if cv == 5 else cv
        for k, (train, test) in enumerate(splitter.split(X)):
            for i, h in enumerate(grid["bandwidth"]):
                want = _brute_total(X[train], X[test], h)
                assert abs(_splits(ours)[k, i] - want) <= TOL * abs(want)


def test_exact_search_reads_the_data_twice_and_keeps_the_rows_lazily():
    X = _mixture(n=1500, d=1)
    grid = {"bandwidth": [0.1, 0.2, 0.4, 0.8]}
    ref = _splits(GridSearchCV(ddr.KernelDensity(), grid, cv=5).fit(X))
    for cv in (5, HashKFold(5, seed=2)):
        Xd, counter = counting_dask_array(X, chunks=(137, 1))
        search = GridSearchCV(ddr.KernelDensity(), grid, cv=cv)
        search.plan(Xd)
        assert counter.passes == 0
        with dask.config.set(scheduler="threads"):
            search.fit(Xd)
        assert counter.passes == 2.0  # each fold's moments; every (fold, candidate) score
        best = search.best_estimator_
        assert isinstance(best.X_fit_, da.Array) and best.X_fit_.shape == X.shape
        assert counter.passes == 2.0  # the refit kept the rows, unread
        if cv == 5:
            np.testing.assert_allclose(_splits(search), ref, rtol=TOL)


# ----------------------------------------------------------------------- binned mode
def test_binned_grid_equals_binned_fits_per_fold_and_the_exact_scores_nearly():
    X = _mixture(n=3000, d=1)
    grid = {"bandwidth": [0.1, 0.2, 0.4, 0.8]}
    binned = GridSearchCV(ddr.KernelDensity(algorithm="binned"), grid, cv=5).fit(X)
    for k, (train, test) in enumerate(KFold(5).split(X)):
        for i, h in enumerate(grid["bandwidth"]):
            model = ddr.KernelDensity(algorithm="binned", bandwidth=h).fit(X[train])
            assert abs(_splits(binned)[k, i] - model.score(X[test])) <= TOL * abs(
                model.score(X[test])
            )
    exact = GridSearchCV(ddr.KernelDensity(algorithm="exact"), grid, cv=5).fit(X)
    # 4096 lattice points over ~6 units: > 600 spacings per bandwidth, error ~ (1/600)^2
    np.testing.assert_allclose(_splits(binned), _splits(exact), rtol=1e-5)
    assert binned.best_params_ == exact.best_params_
    assert binned.best_estimator_.histogram_.counts.sum() == pytest.approx(3000, rel=1e-12)


def test_binned_2d_grid_with_the_scaling_and_cv_bandwidth_in_the_solve():
    X = _mixture(n=2000, d=2, seed=5)
    grid = [
        {"bandwidth": [0.3, 0.6], "bandwidth_scaling": ["none", "covariance"]},
        {"bandwidth": ["cv"], "cv_bandwidths": [[0.2, 0.4, 0.8]]},
    ]
    est = ddr.KernelDensity(algorithm="binned", n_bins=64)
    search = GridSearchCV(est, grid, cv=4).fit(X)
    assert search.plan_.n_statistics == 1  # one lattice of each fold for all 5 candidates
    for k, (train, test) in enumerate(KFold(4).split(X)):
        for i, params in enumerate(search.cv_results_["params"]):
            model = ddr.KernelDensity(algorithm="binned", n_bins=64, **params).fit(X[train])
            want = model.score(X[test])
            assert abs(_splits(search)[k, i] - want) <= TOL * abs(want)


def test_binned_search_reads_twice_and_hashed_folds_do_not_depend_on_chunking():
    X = _mixture(n=4000, d=1, seed=6)
    grid = {"bandwidth": [0.05, 0.1, 0.2, 0.4]}
    est = ddr.KernelDensity(algorithm="binned")
    cv = HashKFold(5, seed=7)
    scores = []
    for chunks in ((1000, 1), (333, 1)):
        Xd, counter = counting_dask_array(X, chunks=chunks)
        with dask.config.set(scheduler="threads"):
            search = GridSearchCV(est, grid, cv=cv).fit(Xd)
        assert counter.passes == 2.0
        scores.append(_splits(search))
    # the lattice is fixed by the fold's range alone: the same counts for any chunking
    np.testing.assert_allclose(scores[0], scores[1], rtol=TOL)


def test_lattice_sizes_are_statistics_of_their_own_in_the_same_two_passes():
    X = _mixture(n=2000, d=1, seed=9)
    Xd, counter = counting_dask_array(X, chunks=(300, 1))
    grid = {"n_bins": [64, 256], "bandwidth": [0.2, 0.4]}
    search = GridSearchCV(ddr.KernelDensity(algorithm="binned"), grid, cv=4)
    assert search.plan(Xd).n_statistics == 2  # one lattice per n_bins, both in pass 1
    with dask.config.set(scheduler="threads"):
        search.fit(Xd)
    assert counter.passes == 2.0
    for i, params in enumerate(search.cv_results_["params"]):
        for k, (train, test) in enumerate(KFold(4).split(X)):
            model = ddr.KernelDensity(algorithm="binned", **params).fit(X[train])
            want = model.score(X[test])
            assert abs(_splits(search)[k, i] - want) <= TOL * abs(want)


def test_auto_is_decided_by_all_rows_for_every_fold():
    """60 000 rows are binned by "auto"; a fold's 12 000 alone would be exact."""
    X = _mixture(n=60_000, d=1, seed=8)
    grid = {"bandwidth": [0.1, 0.3]}
    auto = GridSearchCV(ddr.KernelDensity(), grid, cv=5).fit(X)
    binned = GridSearchCV(ddr.KernelDensity(algorithm="binned"), grid, cv=5).fit(X)
    np.testing.assert_array_equal(_splits(auto), _splits(binned))
    assert auto.best_estimator_.algorithm_ == "binned"
    assert auto.best_estimator_.algorithm == "binned"  # the decided parameter, fixed


# ------------------------------------------------------------------ tags and refusals
def test_tags_say_searchable_not_mergeable():
    tags = get_ddr_tags(ddr.KernelDensity(bandwidth=0.5))
    assert tags.fit.searchable(100, 3) and not tags.fit.mergeable(100, 3)
    assert {"bandwidth", "bandwidth_scaling"} <= tags.fit.solve_params
    assert "kernel" not in tags.fit.solve_params  # "auto" picks the mode by the kernel
    assert "kernel" in get_ddr_tags(ddr.KernelDensity(algorithm="exact")).fit.solve_params
    assert "n_bins" not in tags.fit.solve_params  # it changes the lattice
    assert tags.fit.decided_params(60_000, 1) == {"algorithm": "binned"}
    assert tags.fit.decided_params(60_000, 3) == {"algorithm": "exact"}
    assert get_ddr_tags(ddr.KernelDensity(algorithm="exact")).fit.decided_params(9, 1) == {}
    cv_tags = get_ddr_tags(ddr.KernelDensity(bandwidth="cv"))
    assert not cv_tags.fit.searchable(100, 1) and cv_tags.fit.searchable(60_000, 1)


def test_mean_scoring_and_cross_validate():
    X = _mixture(n=300, d=1)
    total = cross_validate(ddr.KernelDensity(bandwidth=0.4), X, cv=3)["test_score"]
    mean = cross_validate(ddr.KernelDensity(bandwidth=0.4), X, cv=3, scoring="mean_log_likelihood")[
        "test_score"
    ]
    np.testing.assert_allclose(mean * 100, total, rtol=TOL)  # folds of 100 rows
    total_named = cross_validate(
        ddr.KernelDensity(bandwidth=0.4), X, cv=3, scoring="total_log_likelihood"
    )["test_score"]
    np.testing.assert_array_equal(total_named, total)


def test_refuses_exact_cross_validated_bandwidth():
    X = _mixture(n=200, d=1)
    with pytest.raises(ValueError, match=r"KernelDensity\(bandwidth='cv'\) is not fitted by one"):
        GridSearchCV(ddr.KernelDensity(), {"bandwidth": ["cv", 0.5]}).fit(X)
    with pytest.raises(ValueError, match="not fitted by one pass"):
        cross_validate(ddr.KernelDensity(bandwidth="cv", algorithm="exact"), X)
