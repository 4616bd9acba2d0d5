"""Maximum covariance analysis (MCA) is ddr's PLSSVD: checked against xeofs 3's
``xeofs.cross.MCA`` on two fields (docs/user-guide/rotation.md gives the mapping).

xeofs's MCA without its PCA preprocessing (``use_pca=False``) is the SVD of the
cross-covariance of the centred fields, as PLSSVD's: the patterns are the weights and the
scores the same projections, up to one sign per mode (xeofs keeps the SVD's signs, ddr
makes the largest entry of each x pattern positive), and the singular values are the
covariances of the paired scores. With standardised fields xeofs divides by the population
standard deviation (ddof=0), ddr by the sample one (ddof=1), as scikit-learn's PLSSVD: the
patterns are the same, the scores differ by ``sqrt(n / (n - 1))``.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import xeofs as xe

import ddr

pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")


def _fields(n: int = 150, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two fields coupled through three shared time series, on an offset."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3)) * [3.0, 2.0, 1.0]
    X = z @ rng.standard_normal((3, 8)) + rng.standard_normal((n, 8))
    Y = z @ rng.standard_normal((3, 6)) + rng.standard_normal((n, 6)) + 5.0
    return X, Y


def _xeofs_mca(X: np.ndarray, Y: np.ndarray, k: int, standardize: bool) -> xe.cross.MCA:
    n = X.shape[0]
    time = {"time": np.arange(n)}
    dx = xr.DataArray(X, dims=("time", "x"), coords={**time, "x": np.arange(X.shape[1])})
    dy = xr.DataArray(Y, dims=("time", "y"), coords={**time, "y": np.arange(Y.shape[1])})
    mca = xe.cross.MCA(n_modes=k, use_pca=False, standardize=standardize, solver="full")
    return mca.fit(dx, dy, dim="time")


@pytest.mark.parametrize("standardize", [False, True])
def test_plssvd_is_xeofs_mca(standardize):
    X, Y = _fields()
    n, k = X.shape[0], 3
    mca = _xeofs_mca(X, Y, k, standardize)
    pls = ddr.PLSSVD(k, scale=standardize).fit(X, Y)
    px, py = (c.transpose(..., "mode").values for c in mca.components())
    signs = np.sign(np.einsum("ij,ij->j", pls.x_weights_, px))
    np.testing.assert_allclose(pls.x_weights_ * signs, px, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pls.y_weights_ * signs, py, rtol=0, atol=1e-12)
    # scores: the same projections (xeofs standardises with ddof=0, ddr with ddof=1)
    factor = np.sqrt(n / (n - 1)) if standardize else 1.0
    sx, sy = (s.transpose("time", "mode").values for s in mca.scores())
    tx, ty = pls.transform(X, Y)
    np.testing.assert_allclose(tx * signs * factor, sx, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ty * signs * factor, sy, rtol=0, atol=1e-10)
    # singular values: the covariance (ddof=1) of each pair of scores
    covariance = np.einsum("ij,ij->j", tx, ty) / (n - 1) * factor**2
    np.testing.assert_allclose(covariance, mca.data["singular_values"].values, rtol=1e-12)
    # new rows
    nx, _ = mca.transform(
        xr.DataArray(X[:10], dims=("time", "x"), coords={"time": np.arange(10), "x": np.arange(8)}),
        xr.DataArray(Y[:10], dims=("time", "y"), coords={"time": np.arange(10), "y": np.arange(6)}),
    )
    ux, _ = pls.transform(X[:10], Y[:10])
    np.testing.assert_allclose(ux * signs * factor, nx.transpose("time", "mode").values, atol=1e-10)


def test_squared_covariance_fraction_from_all_modes():
    """xeofs's squared covariance fraction of mode i is s_i^2 over the sum of all of them
    (the squared Frobenius norm of the cross-covariance): PLSSVD with every mode gives it."""
    X, Y = _fields(seed=1)
    n = X.shape[0]
    mca = _xeofs_mca(X, Y, 3, standardize=False)
    pls = ddr.PLSSVD(6, scale=False).fit(X, Y)
    tx, ty = pls.transform(X, Y)
    s = np.einsum("ij,ij->j", tx, ty) / (n - 1)
    scf = s**2 / np.sum(s**2)
    np.testing.assert_allclose(scf[:3], mca.squared_covariance_fraction().values, rtol=1e-10)


@pytest.mark.parametrize("standardize", [False, True])
def test_plssvd_maps_of_two_masked_grids_are_xeofs_mca(standardize):
    """Two N-D fields, each with its own mask (NaN at every time): PLSSVD's ``x_weights_``
    and ``y_weights_`` as maps on each field's grid (``as_xarray``) are xeofs's MCA patterns,
    NaN where each field is masked; the scores of both are xeofs's."""
    X, Y = _fields(seed=2)
    n, k = X.shape[0], 3
    xf, yf = np.full((n, 10), np.nan), np.full((n, 8), np.nan)
    xf[:, [0, 1, 2, 3, 5, 6, 7, 9]] = X
    yf[:, [0, 2, 3, 4, 5, 7]] = Y
    time = {"time": np.arange(n)}
    dx = xr.DataArray(
        xf.reshape(n, 2, 5), dims=("time", "lat", "lon"),
        coords={**time, "lat": [0.0, 1.0], "lon": np.arange(5.0)},
    )  # fmt: skip
    dy = xr.DataArray(
        yf.reshape(n, 4, 2), dims=("time", "level", "site"),
        coords={**time, "level": [1000, 850, 500, 200], "site": ["a", "b"]},
    )  # fmt: skip
    mca = xe.cross.MCA(n_modes=k, use_pca=False, standardize=standardize, solver="full")
    mca.fit(dx, dy, dim="time")
    pls = ddr.PLSSVD(k, scale=standardize).fit(dx.chunk({"time": 40}), dy, sample_dims="time")
    px, py = (c.transpose(..., "mode") for c in mca.components())
    mx, my = pls.as_xarray("x_weights_"), pls.as_xarray("y_weights_")
    assert mx.dims == ("lat", "lon", "component") and my.dims == ("level", "site", "component")
    assert my["site"].values.tolist() == ["a", "b"]
    signs = np.sign(
        np.einsum("ij,ij->j", pls.x_weights_, px.values.reshape(10, k)[~np.isnan(xf[0])])
    )
    for ours, theirs in ((mx, px), (my, py)):
        # xeofs gives its maps with sorted coordinates (level 200 first): ours are the input's
        theirs = theirs.sel({d: ours[d].values for d in ours.dims if d != "component"})
        np.testing.assert_array_equal(np.isnan(ours.values), np.isnan(theirs.values))
        np.testing.assert_allclose(ours.values * signs, theirs.values, rtol=0, atol=1e-12)
    factor = np.sqrt(n / (n - 1)) if standardize else 1.0
    sx, sy = (s.transpose("time", "mode").values for s in mca.scores())
    tx, ty = pls.transform(dx, dy)
    assert ty.dims == ("time", "component")
    np.testing.assert_allclose(tx.values * signs * factor, sx, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ty.values * signs * factor, sy, rtol=0, atol=1e-10)
