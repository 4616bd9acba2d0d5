"""PLSSVD: scikit-learn's PLSSVD to round-off from one pass, the seed's maximum covariance
(CCA with the variance terms dropped), forms, offsets, bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn.cross_decomposition import PLSSVD as SkPLSSVD

import ddr
from ddr.cross_decomposition.pls import PLSSVD
from ddr.testing import counting_dask_array


def views(rng, n=500, dx=6, dy=4, shared=3):
    """Two views of the same rows sharing a latent signal, features of different scales."""
    z = rng.standard_normal((n, shared))
    X = z @ rng.standard_normal((shared, dx)) + 0.5 * rng.standard_normal((n, dx))
    Y = z @ rng.standard_normal((shared, dy)) + 0.5 * rng.standard_normal((n, dy))
    return X * rng.uniform(0.1, 10.0, dx) + 3.0, Y * rng.uniform(0.1, 10.0, dy) - 2.0


@pytest.mark.parametrize("scale", [True, False])
def test_equals_sklearn(rng, scale):
    X, Y = views(rng)
    sk = SkPLSSVD(3, scale=scale).fit(X, Y)
    m = PLSSVD(3, scale=scale).fit(X, Y)
    np.testing.assert_allclose(m.x_weights_, sk.x_weights_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.y_weights_, sk.y_weights_, rtol=1e-10, atol=1e-12)
    xs, ys = m.transform(X, Y)
    xr_, yr_ = sk.transform(X, Y)
    np.testing.assert_allclose(xs, xr_, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ys, yr_, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.transform(X[:7]), sk.transform(X[:7]), rtol=1e-10, atol=1e-10)
    a, b = m.fit_transform(X, Y)
    np.testing.assert_allclose(a, xs)
    np.testing.assert_allclose(b, ys)
    # a 1-D Y is one feature
    sk1 = SkPLSSVD(1, scale=scale).fit(X, Y[:, 0])
    np.testing.assert_allclose(
        PLSSVD(1, scale=scale).fit(X, Y[:, 0]).x_weights_, sk1.x_weights_, rtol=1e-10
    )


def test_maximum_covariance_is_cca_without_the_variance_terms(rng):
    """Seed 004: maximum covariance = CCA with its variance terms dropped, i.e. ddr.CCA at
    reg=1; the pairs of scores have the singular values of Sxy as covariances."""
    X, Y = views(rng)
    pls = PLSSVD(3, scale=False).fit(X, Y)
    cca = ddr.CCA(3, reg=1.0).fit(X, Y)
    unit = cca.x_weights_ / np.linalg.norm(cca.x_weights_, axis=0)
    np.testing.assert_allclose(pls.x_weights_, unit, rtol=1e-9, atol=1e-12)
    xs, ys = pls.transform(X, Y)
    Sxy = np.cov(X.T, Y.T)[:6, 6:]
    s = np.linalg.svd(Sxy, compute_uv=False)[:3]
    np.testing.assert_allclose(np.mean((xs - xs.mean(0)) * (ys - ys.mean(0)), 0) * 500 / 499, s)


def test_one_pass_dask_xarray_and_offset(rng):
    X, Y = views(rng, n=1200)
    ref = PLSSVD(2).fit(X, Y)
    Xd, counter = counting_dask_array(X, chunks=(250, -1))
    Yd = da.from_array(Y, chunks=(400, -1))  # other chunks: aligned to X's
    with dask.config.set(scheduler="threads"):
        m = PLSSVD(2).fit(Xd, Yd)
        assert counter.passes == 1.0
        xs, ys = m.transform(Xd, Yd)
        assert isinstance(xs, da.Array) and isinstance(ys, da.Array)
        np.testing.assert_allclose(xs.compute(), ref.transform(X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.x_weights_, ref.x_weights_, rtol=1e-10, atol=1e-12)
    Xa = xr.DataArray(X, dims=("time", "pixel"), coords={"time": np.arange(1200)})
    Ya = xr.DataArray(Y, dims=("time", "word"), coords={"time": np.arange(1200)})
    ma = PLSSVD(2).fit(Xa, Ya.isel(time=slice(None, None, -1)))  # aligned by coordinate
    np.testing.assert_allclose(ma.y_weights_, ref.y_weights_, rtol=1e-10, atol=1e-12)
    assert ma.transform(Xa).dims == ("time", "component")
    assert ma.as_xarray("x_weights_").dims == ("pixel", "component")
    shifted = PLSSVD(2).fit(X + 1e8, Y - 1e8)
    np.testing.assert_allclose(shifted.x_weights_, ref.x_weights_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        shifted.transform(X[:50] + 1e8), ref.transform(X[:50]), rtol=1e-5, atol=1e-6
    )


def test_constant_feature_is_left_unscaled_as_sklearn(rng):
    X, Y = views(rng)
    X[:, 2] = 4.0
    sk = SkPLSSVD(2).fit(X, Y)
    m = PLSSVD(2).fit(X, Y)
    assert m.x_std_[2] == 1.0
    np.testing.assert_allclose(m.x_weights_, sk.x_weights_, rtol=1e-10, atol=1e-12)


def test_bad_input(rng):
    X, Y = views(rng, n=50)
    with pytest.raises(
        ValueError,
        match=r"PLSSVD: n_components must be at most min\(n_samples, n_features_x, "
        r"n_features_y\) = min\(50, 6, 4\) = 4 \(the rank of the cross-covariance\); got "
        r"n_components=5",
    ):
        PLSSVD(5).fit(X, Y)
    with pytest.raises(ValueError, match=r"min\(3, 6, 4\) = 3"):
        PLSSVD(4).fit(X[:3], Y[:3])
    with pytest.raises(ValueError, match="PLSSVD requires y to be passed"):
        PLSSVD(2).fit(X, None)
    with pytest.raises(ValueError, match="PLSSVD: X has 50 rows but Y has 49"):
        PLSSVD(2).fit(X, Y[:49])
    with pytest.raises(ValueError, match="The 'scale' parameter of PLSSVD"):
        PLSSVD(2, scale="yes").fit(X, Y)
    m = PLSSVD(2).fit(X, Y)
    with pytest.raises(ValueError, match="Y has 3 features, but PLSSVD was fitted with 4"):
        m.transform(X, Y[:, :3])
