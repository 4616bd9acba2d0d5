"""The documented recipes of docs/user-guide/model-selection.md on small data: PCA's number
of components by held-out PPCA log-likelihood (against Minka's MLE), GaussianMixture's by
held-out log-likelihood and BIC on a hashed train/test split (BIC against scikit-learn's for
the same parameters); and the split itself (hash_train_test_split): HashKFold's fold 0,
chunk-invariant, lazy, every input kind, bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse
import xarray as xr
from sklearn.decomposition import PCA as SkPCA
from sklearn.mixture import GaussianMixture as SkGaussianMixture
from sklearn.model_selection import GridSearchCV as SkGridSearchCV

import ddr
from ddr.model_selection import GridSearchCV, HashKFold, hash_train_test_split
from ddr.testing import counting_dask_array

TOL = 1e-10


def _low_rank(n=3000, d=10, rank=3, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(rank, d)) * np.linspace(3, 1, rank)[:, None]
    return rng.normal(size=(n, rank)) @ W + 0.5 * rng.normal(size=(n, d))


def _clusters(n=4000, seed=1):
    rng = np.random.default_rng(seed)
    means = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    return means[rng.integers(0, 3, n)] + rng.normal(size=(n, 2)) * np.array([1.0, 0.7])


# ------------------------------------------------------------------- PCA's components
def test_pca_components_by_held_out_likelihood_recipe():
    Xn = _low_rank()
    X, counter = counting_dask_array(Xn, chunks=(500, 10))
    # the recipe (docs/user-guide/model-selection.md)
    cv = HashKFold(5, seed=0)
    with dask.config.set(scheduler="threads"):
        search = GridSearchCV(ddr.PCA(), {"n_components": list(range(1, 10))}, cv=cv).fit(X)
        k_cv = search.best_params_["n_components"]
        assert counter.passes == 2.0
        k_mle = ddr.PCA(n_components="mle").fit(X).n_components_
    assert k_cv == k_mle == 3  # the true rank
    assert SkPCA(n_components="mle").fit(Xn).n_components_ == 3
    theirs = SkGridSearchCV(SkPCA(), {"n_components": list(range(1, 10))}, cv=cv).fit(Xn)
    np.testing.assert_allclose(
        search.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], rtol=TOL
    )


# ---------------------------------------------------------- GaussianMixture's components
def _sklearn_mixture(gm):
    """scikit-learn's GaussianMixture holding ddr's fitted parameters."""
    sk = SkGaussianMixture(gm.n_components, covariance_type=gm.covariance_type)
    for name in ("weights_", "means_", "covariances_", "precisions_cholesky_", "precisions_"):
        setattr(sk, name, getattr(gm, name))
    return sk


def test_mixture_components_by_held_out_likelihood_and_bic_recipe():
    Xn = _clusters()
    X = da.from_array(Xn, chunks=(700, 2))
    # the recipe (docs/user-guide/model-selection.md)
    X_train, X_test = hash_train_test_split(X, test_size=0.2, seed=0)
    held_out, bic = {}, {}
    for k in range(1, 6):
        gm = ddr.GaussianMixture(k, random_state=0, tol=1e-4).fit(X_train)
        held_out[k] = gm.score(X_test)  # mean log-likelihood of a held-out row
        bic[k] = gm.bic(X_train)  # on the rows it was fitted to
        train, test = X_train.compute(), X_test.compute()
        sk = _sklearn_mixture(gm)
        assert abs(bic[k] - sk.bic(train)) <= TOL * abs(bic[k])
        assert abs(held_out[k] - sk.score(test)) <= TOL * abs(held_out[k])
    assert max(held_out, key=held_out.get) == 3
    assert min(bic, key=bic.get) == 3
    assert X_test.shape[0] == np.count_nonzero(HashKFold(5, seed=0).fold_of(np.arange(4000)) == 0)


# ------------------------------------------------------------------ the hashed split
def test_the_split_is_hashkfolds_fold_zero_in_row_order():
    X = np.arange(2000.0).reshape(1000, 2)
    y = np.arange(1000)
    X_train, X_test, y_train, y_test = hash_train_test_split(X, y, test_size=0.25, seed=5)
    folds = HashKFold(4, seed=5).fold_of(np.arange(1000))
    np.testing.assert_array_equal(y_test, np.flatnonzero(folds == 0))
    np.testing.assert_array_equal(y_train, np.flatnonzero(folds != 0))
    np.testing.assert_array_equal(X_test[:, 0], 2 * y_test)
    np.testing.assert_array_equal(X_train[:, 1], 2 * y_train + 1)
    # another seed, another split; a fraction that is not 1 / K
    assert not np.array_equal(hash_train_test_split(y, test_size=0.25, seed=6)[1], y_test)
    frac = hash_train_test_split(np.arange(100_000), test_size=0.3)[1].shape[0] / 100_000
    assert abs(frac - 0.3) < 0.005


def test_the_split_of_a_dask_array_is_lazy_and_does_not_depend_on_chunking():
    X = np.random.default_rng(2).normal(size=(1001, 3))
    want = hash_train_test_split(X, test_size=0.2, seed=1)
    for chunks in ((1001, 3), (100, 3), ((1000, 1), 3)):
        Xd, counter = counting_dask_array(X, chunks=chunks)
        X_train, X_test = hash_train_test_split(Xd, test_size=0.2, seed=1)
        assert counter.passes == 0  # sizes from the positions alone
        assert X_test.shape == want[1].shape and X_train.shape == want[0].shape
        got = dask.compute(X_train, X_test, scheduler="threads")
        assert counter.passes == 1.0  # both sides from one read
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_the_split_of_sparse_xarray_and_differently_chunked_labels():
    X = np.random.default_rng(3).poisson(1.0, size=(300, 4)).astype(float)
    want_train, want_test = hash_train_test_split(X, test_size=0.2)
    S_train, S_test = hash_train_test_split(scipy.sparse.csr_matrix(X), test_size=0.2)
    np.testing.assert_array_equal(S_test.toarray(), want_test)
    np.testing.assert_array_equal(S_train.toarray(), want_train)
    A = xr.DataArray(X.T, dims=("feature", "time"), coords={"time": np.arange(300) * 10})
    A_train, A_test = hash_train_test_split(A, test_size=0.2, sample_dim="time")
    np.testing.assert_array_equal(A_test.values.T, want_test)
    assert A_train.sizes["time"] == want_train.shape[0]
    np.testing.assert_array_equal(A_test["time"].values % 10, 0)
    y = da.from_array(np.arange(300), chunks=7)
    Xd = da.from_array(X, chunks=(50, 4))
    _, _, y_train, y_test = hash_train_test_split(Xd, y, test_size=0.2)
    np.testing.assert_array_equal(X[y_test.compute()], want_test)
    np.testing.assert_array_equal(X[y_train.compute()], want_train)


def test_the_split_refuses_bad_input():
    X = np.zeros((50, 2))
    with pytest.raises(ValueError, match="At least one array required"):
        hash_train_test_split()
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[50, 49\]"):
        hash_train_test_split(X, np.zeros(49))
    for bad in (0, 1.0, -0.1, True, "0.2", None):
        with pytest.raises(ValueError, match="test_size must be a float strictly between 0"):
            hash_train_test_split(X, test_size=bad)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed must be a non-negative int"):
            hash_train_test_split(X, seed=bad)
    with pytest.raises(ValueError, match="leaves the test rows of n_samples=1 empty"):
        hash_train_test_split(np.zeros((1, 2)), test_size=0.01)
    with pytest.raises(ValueError, match="leaves the train rows of n_samples=1 empty"):
        hash_train_test_split(np.zeros((1, 2)), test_size=0.99)
    unknown = da.from_array(np.arange(10.0), chunks=5)
    unknown = unknown[unknown > 3]
    with pytest.raises(ValueError, match="unknown chunk sizes; call compute_chunk_sizes"):
        hash_train_test_split(unknown)


# ------------------------------------------------------------- a kernel density's bandwidth
def test_kde_bandwidth_recipe_is_binned_and_narrower_than_silvermans_rule():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, 36_000), rng.normal(3, 0.5, 24_000)]
    X = da.from_array(x[rng.permutation(x.size), None], chunks=(10_000, 1))
    # the recipe (docs/user-guide/model-selection.md)
    grid = {"bandwidth": np.geomspace(0.005, 0.5, 20).tolist()}
    search = GridSearchCV(ddr.KernelDensity(), grid, cv=HashKFold(5, seed=0))
    assert search.plan(X).n_passes == 2
    search.fit(X)
    rule = ddr.KernelDensity(bandwidth="silverman").fit(X)
    silverman = rule.bandwidth_ * np.sqrt(rule.covariance_[0, 0])
    assert search.best_estimator_.algorithm_ == "binned"  # 60 000 rows: "auto" bins
    assert 0.2 * silverman < search.best_params_["bandwidth"] < 0.8 * silverman
