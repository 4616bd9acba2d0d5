"""StandardScaler against scikit-learn: attributes, NaN handling, weights, partial_fit, one pass,
blockwise lazy transforms in the input's form, bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler as SkScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from ddr.preprocessing.scaler import StandardScaler
from ddr.testing import counting_dask_array


def data(rng, n=600, dtype=np.float64):
    X = rng.standard_normal((n, 5)) * [1.0, 2.0, 3.0, 0.0, 5.0] + [1e6, 0.0, 3.0, 7.0, -2.0]
    X[[3, 40, 41], [1, 2, 2]] = np.nan
    return X.astype(dtype)


def assert_same_fit(got, ref, rtol=1e-12):
    for name in ("mean_", "var_", "scale_"):
        a, b = getattr(got, name), getattr(ref, name)
        if b is None:
            assert a is None, name
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, err_msg=name)
    np.testing.assert_array_equal(got.n_samples_seen_, ref.n_samples_seen_)


@pytest.mark.parametrize("with_mean", [True, False])
@pytest.mark.parametrize("with_std", [True, False])
def test_equal_to_sklearn(rng, with_mean, with_std):
    X = data(rng)
    ref = SkScaler(with_mean=with_mean, with_std=with_std).fit(X)
    got = StandardScaler(with_mean=with_mean, with_std=with_std).fit(X)
    assert_same_fit(got, ref)
    np.testing.assert_allclose(got.transform(X), ref.transform(X), rtol=1e-12, atol=1e-12)
    Z = ref.transform(X)
    np.testing.assert_allclose(got.inverse_transform(Z), ref.inverse_transform(Z), rtol=1e-12)
    np.testing.assert_allclose(got.inverse_transform(got.transform(X)), X, rtol=1e-12)


def test_float32_and_weights(rng):
    X = data(rng, dtype=np.float32)
    w = rng.integers(0, 4, size=X.shape[0]).astype(np.float64)  # exact in float32 too
    ref = SkScaler().fit(X, sample_weight=w)
    got = StandardScaler().fit(X, sample_weight=w)
    assert_same_fit(got, ref, rtol=1e-10)
    lazy = StandardScaler().fit(da.from_array(X, chunks=(100, -1)), sample_weight=w)
    assert_same_fit(lazy, ref, rtol=1e-10)
    out = got.transform(X)
    assert out.dtype == np.float32
    # ddr centres in float64 before rounding to float32; scikit-learn first rounds the mean to
    # float32, which on the 1e6-offset column costs ~1e-2
    truth = (X.astype(np.float64) - got.mean_) / got.scale_
    np.testing.assert_allclose(out, truth, rtol=1e-6, atol=1e-6)
    assert np.nanmax(np.abs(ref.transform(X) - truth)) > 1e-3
    np.testing.assert_allclose(out[:, 1:], ref.transform(X)[:, 1:], rtol=1e-5, atol=1e-5)


def test_zero_variance_gets_scale_one(rng):
    X = np.column_stack([np.full(50, 1e6), rng.standard_normal(50), np.zeros(50)])
    got = StandardScaler().fit(da.from_array(X, chunks=(7, -1)))
    np.testing.assert_array_equal(got.scale_[[0, 2]], [1.0, 1.0])
    np.testing.assert_array_equal(got.var_[[0, 2]], [0.0, 0.0])
    np.testing.assert_allclose(got.transform(X)[:, 0], 0.0)


def test_one_pass_chunking_invariance_and_lazy_transform(rng):
    X = data(rng)
    ref = SkScaler().fit(X)
    for chunks in ((1, -1), (64, -1), ((10, 590), -1)):
        arr, counter = counting_dask_array(X, chunks=chunks)
        with dask.config.set(scheduler="threads"):
            got = StandardScaler().fit(arr)
        assert counter.passes == 1.0
        assert_same_fit(got, ref, rtol=1e-11)
        counter.reset()
        Z = got.transform(arr)
        back = got.inverse_transform(Z)
        assert isinstance(Z, da.Array) and isinstance(back, da.Array)
        assert counter.passes == 0 and Z.chunks == arr.chunks
        with dask.config.set(scheduler="threads"):
            np.testing.assert_allclose(Z.compute(), ref.transform(X), rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(back.compute(), X, rtol=1e-12)


def test_partial_fit_equals_fit_and_sklearn(rng):
    X = data(rng)
    ours, theirs = StandardScaler(), SkScaler()
    for part in np.array_split(X, 4):
        ours.partial_fit(part)
        theirs.partial_fit(part)
    ours.partial_fit(da.from_array(X[:30], chunks=(10, -1)))
    theirs.partial_fit(X[:30])
    # merging batch means that sit on a 1e6 offset (rounded to 1e-10 absolute) costs ~1e-11
    assert_same_fit(ours, theirs, rtol=1e-10)
    assert_same_fit(ours, StandardScaler().fit(np.vstack([X, X[:30]])), rtol=1e-10)


def test_xarray_keeps_coordinates(rng):
    X = data(rng, n=60)
    xa = xr.DataArray(
        X.T,
        dims=("band", "time"),
        coords={"band": list("abcde"), "time": np.arange(60) * 3},
    )
    sc = StandardScaler()
    Z = sc.fit_transform(xa, sample_dim="time")
    assert Z.dims == ("time", "band")
    assert list(Z["band"].values) == list("abcde")
    np.testing.assert_array_equal(Z["time"].values, np.arange(60) * 3)
    np.testing.assert_allclose(Z.values, SkScaler().fit_transform(X), rtol=1e-12, atol=1e-12)
    scale = sc.as_xarray("scale_")
    assert scale.dims == ("band",) and list(scale["band"].values) == list("abcde")
    back = sc.inverse_transform(Z.chunk({"time": 10}))
    assert isinstance(back.data, da.Array)
    np.testing.assert_allclose(back.values, X, rtol=1e-12)


def test_integer_input_is_upcast(rng):
    Xi = rng.integers(-10, 10, size=(100, 3))
    got = StandardScaler().fit(Xi)
    assert got.transform(Xi).dtype == np.float64
    np.testing.assert_allclose(got.transform(Xi), SkScaler().fit_transform(Xi), rtol=1e-12)


def test_bad_input(rng):
    X = data(rng, n=50)
    sc = StandardScaler().fit(X)
    with pytest.raises(ValueError, match="X has 2 features, but StandardScaler is expecting 5"):
        sc.transform(X[:, :2])
    with pytest.raises(ValueError, match="X has 2 features, but StandardScaler is expecting 5"):
        sc.inverse_transform(X[:, :2])
    with pytest.raises(NotFittedError, match="StandardScaler instance is not fitted yet"):
        StandardScaler().transform(X)
    with pytest.raises(TypeError, match="The 'with_mean' parameter of"):
        StandardScaler(with_mean="yes").fit(X)
    merged = StandardScaler().fit(da.from_array(X, chunks=(10, 2)))  # whole rows in the pass
    np.testing.assert_allclose(merged.scale_, StandardScaler().fit(X).scale_, rtol=1e-10)
    bad = X.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        StandardScaler().fit(bad)
    with pytest.raises(ValueError, match="infinite"):
        StandardScaler().fit(da.from_array(bad, chunks=(10, -1)))
    with pytest.raises(ValueError, match="Sample weights must contain at least one non-zero"):
        StandardScaler().fit(X, sample_weight=np.zeros(50))


def test_on_local_cluster(client, rng):
    X = data(rng, n=2000, dtype=np.float32)
    arr = da.from_array(X, chunks=(250, -1))
    got = StandardScaler().fit(arr)
    ref = SkScaler().fit(X)
    assert_same_fit(got, ref, rtol=1e-9)
    truth = (X.astype(np.float64) - ref.mean_) / ref.scale_
    np.testing.assert_allclose(got.transform(arr).compute(), truth, rtol=1e-6, atol=1e-6)


@parametrize_with_checks(
    [StandardScaler(with_mean=False), StandardScaler(with_std=False)]  # default: test_common
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_integer_dask_input_issue_15():
    """Issue 15: integer dask input raised IndexError (a 0-d row count)."""
    X = np.arange(20).reshape(10, 2)
    got = StandardScaler().fit(da.from_array(X, chunks=5))
    ref = SkScaler().fit(X)
    np.testing.assert_allclose(got.mean_, ref.mean_)
    np.testing.assert_allclose(got.var_, ref.var_)
    assert got.n_samples_seen_ == 10
