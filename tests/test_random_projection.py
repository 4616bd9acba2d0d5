"""Random projections: the same matrices as scikit-learn, no pass to fit, blockwise lazy
transforms, the Johnson-Lindenstrauss bound, persistence and bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn import random_projection as skrp
from sklearn.exceptions import DataDimensionalityWarning, NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

import ddr
from ddr.projection.random_projection import (
    GaussianRandomProjection,
    SparseRandomProjection,
    johnson_lindenstrauss_min_dim,
)
from ddr.testing import counting_dask_array


def dense(c):
    return c.toarray() if hasattr(c, "toarray") else np.asarray(c)


def test_jl_min_dim_identical_to_sklearn():
    for n in (1, 2, 100, 1e4, 1e6, [1e4, 1e5, 1e6], np.array([7, 70_000])):
        for eps in (0.01, 0.1, 0.5, 0.99, [0.5, 0.1, 0.01]):
            if np.ndim(n) and np.ndim(eps):
                continue
            got = johnson_lindenstrauss_min_dim(n, eps=eps)
            ref = skrp.johnson_lindenstrauss_min_dim(n, eps=eps)
            np.testing.assert_array_equal(got, ref)
            assert np.asarray(got).dtype == np.int64
    assert johnson_lindenstrauss_min_dim(1e6, eps=0.1) == 11841
    with pytest.raises(ValueError, match=r"The JL bound is defined for eps in \]0, 1\[, got"):
        johnson_lindenstrauss_min_dim(100, eps=1.0)
    with pytest.raises(ValueError, match="The JL bound is defined for n_samples greater than zero"):
        johnson_lindenstrauss_min_dim(0, eps=0.5)
    with pytest.raises(TypeError, match="n_samples and eps must be numbers"):
        johnson_lindenstrauss_min_dim("many")


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (GaussianRandomProjection, skrp.GaussianRandomProjection),
        (SparseRandomProjection, skrp.SparseRandomProjection),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_same_matrix_as_sklearn(rng, ours, theirs, dtype):
    X = rng.standard_normal((300, 4000)).astype(dtype)
    for kwargs in ({"eps": 0.5}, {"n_components": 25}, {"eps": 0.3}):
        for seed in (0, 42):
            a = ours(random_state=seed, **kwargs).fit(X)
            b = theirs(random_state=seed, **kwargs).fit(X)
            assert a.n_components_ == b.n_components_
            np.testing.assert_array_equal(dense(a.components_), dense(b.components_))
            assert a.components_.dtype == b.components_.dtype == dtype
            np.testing.assert_allclose(a.transform(X), b.transform(X), rtol=1e-6)
    for density in (1 / 3, 1.0, 0.05):
        a = SparseRandomProjection(30, density=density, random_state=3).fit(X)
        b = skrp.SparseRandomProjection(30, density=density, random_state=3).fit(X)
        np.testing.assert_array_equal(dense(a.components_), dense(b.components_))
    assert SparseRandomProjection(5).fit(X).density_ == pytest.approx(1 / np.sqrt(4000))


def test_fit_reads_nothing_and_transform_is_blockwise(rng):
    X = rng.standard_normal((1000, 300))
    arr, counter = counting_dask_array(X, chunks=(250, -1))
    with dask.config.set(scheduler="threads"):
        for cls in (GaussianRandomProjection, SparseRandomProjection):
            rp = cls(20, random_state=0).fit(arr)
            assert counter.passes == 0  # only the shape was used
            Z = rp.transform(arr)
            assert isinstance(Z, da.Array) and Z.chunks == ((250,) * 4, (20,))
            assert counter.passes == 0
            np.testing.assert_allclose(Z.compute(), X @ dense(rp.components_).T, rtol=1e-12)
            assert counter.passes == 1.0
            counter.reset()


def test_reproducible_from_random_state(rng):
    X = rng.standard_normal((50, 200))
    a = GaussianRandomProjection(10, random_state=5).fit(X).components_
    b = GaussianRandomProjection(10, random_state=5).fit(da.from_array(X)).components_
    c = GaussianRandomProjection(10, random_state=6).fit(X).components_
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_auto_preserves_distances(rng):
    """The eps-embedding the JL dimension promises, checked on every pair."""
    X = rng.standard_normal((60, 5000))
    for cls in (GaussianRandomProjection, SparseRandomProjection):
        rp = cls(eps=0.5, random_state=0).fit(X)
        assert rp.n_components_ == johnson_lindenstrauss_min_dim(60, eps=0.5)
        Z = rp.transform(X)
        i, j = np.triu_indices(60, 1)
        ratio = ((Z[i] - Z[j]) ** 2).sum(1) / ((X[i] - X[j]) ** 2).sum(1)
        assert 0.5 < ratio.min() and ratio.max() < 1.5


def test_inverse_transform_matches_sklearn(rng):
    X = rng.standard_normal((100, 40))
    for cls, skcls in (
        (GaussianRandomProjection, skrp.GaussianRandomProjection),
        (SparseRandomProjection, skrp.SparseRandomProjection),
    ):
        for inv in (False, True):
            a = cls(15, compute_inverse_components=inv, random_state=1).fit(X)
            b = skcls(15, compute_inverse_components=inv, random_state=1).fit(X)
            Z = a.transform(X)
            np.testing.assert_allclose(a.inverse_transform(Z), b.inverse_transform(Z), atol=1e-12)
            lazy = a.inverse_transform(da.from_array(Z, chunks=(30, -1)))
            np.testing.assert_allclose(lazy.compute(), b.inverse_transform(Z), atol=1e-12)


def test_xarray_in_xarray_out(rng):
    X = rng.standard_normal((30, 50))
    xa = xr.DataArray(X, dims=("t", "f"), coords={"t": np.arange(30) + 100})
    rp = GaussianRandomProjection(4, random_state=0)
    Z = rp.fit_transform(xa)
    assert Z.dims == ("t", "component")
    np.testing.assert_array_equal(Z["t"].values, np.arange(30) + 100)
    np.testing.assert_allclose(Z.values, X @ rp.components_.T)
    assert rp.as_xarray("components_").dims == ("component", "f")
    assert list(rp.get_feature_names_out())[:2] == [
        "gaussianrandomprojection0",
        "gaussianrandomprojection1",
    ]


def test_save_and_load(tmp_path, rng):
    X = rng.standard_normal((40, 500))
    for i, rp in enumerate(
        [
            GaussianRandomProjection(7, random_state=2),
            SparseRandomProjection(9, random_state=2),
            SparseRandomProjection(9, density=1.0, compute_inverse_components=True),
        ]
    ):
        rp.fit(X)
        rp.save(str(tmp_path / f"rp{i}.zarr"))
        back = ddr.load(str(tmp_path / f"rp{i}.zarr"))
        assert type(back) is type(rp)
        np.testing.assert_array_equal(dense(back.components_), dense(rp.components_))
        np.testing.assert_array_equal(back.transform(X), rp.transform(X))


def test_bad_input(rng):
    X = rng.standard_normal((20, 30))
    with pytest.raises(ValueError, match="The 'n_components' parameter of"):
        GaussianRandomProjection(0).fit(X)
    with pytest.raises(ValueError, match="The 'n_components' parameter of"):
        SparseRandomProjection("all").fit(X)
    for density in (0.0, 1.5):
        with pytest.raises(ValueError, match="The 'density' parameter of"):
            SparseRandomProjection(3, density=density).fit(X)
    with pytest.raises(ValueError, match="The 'eps' parameter of"):
        GaussianRandomProjection(eps=-1).fit(X)
    with pytest.raises(ValueError, match="which is larger than the original space with n_feat"):
        GaussianRandomProjection(eps=0.1).fit(X)
    with pytest.warns(DataDimensionalityWarning, match="n_features < n_components"):
        GaussianRandomProjection(40).fit(X)
    arr = da.from_array(X, chunks=(5, -1))
    with pytest.raises(ValueError, match="n_components='auto' needs the number of samples"):
        GaussianRandomProjection(eps=0.9).fit(arr[arr[:, 0] > -np.inf])
    rp = GaussianRandomProjection(3).fit(X)
    with pytest.raises(ValueError, match="X has 29 features, but GaussianRandomProjection is exp"):
        rp.transform(X[:, 1:])
    with pytest.raises(ValueError, match=r"is expecting 3 \(one per component\)"):
        rp.inverse_transform(X)
    with pytest.raises(NotFittedError):
        SparseRandomProjection(3).transform(X)
    bad = X.copy()
    bad[2, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rp.transform(da.from_array(bad, chunks=(5, -1))).compute()


def test_on_local_cluster(client, rng):
    X = rng.standard_normal((2000, 300)).astype(np.float32)
    rp = SparseRandomProjection(16, random_state=0).fit(da.from_array(X, chunks=(500, -1)))
    Z = rp.transform(da.from_array(X, chunks=(500, -1))).compute()
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z, X @ dense(rp.components_).T, rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.DataDimensionalityWarning")
@parametrize_with_checks(
    [
        GaussianRandomProjection(3, random_state=0),
        SparseRandomProjection(3, random_state=0),
        SparseRandomProjection(3, density=1.0, compute_inverse_components=True, random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
