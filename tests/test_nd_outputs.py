"""Outputs in the shape of a grid input (issue 32, item 2): fitted attributes as maps
(``as_xarray``), outputs on the sample dims, feature-shaped outputs on the feature dims,
attributes that say what each is; and the examples of docs/user-guide/gridded-data.md run.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import ddr

DOC = Path(__file__).resolve().parents[1] / "docs" / "user-guide" / "gridded-data.md"


def field(seed=0, n=120):
    """(time, lat, lon) of three classes with a mask at two points, and its labels."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    values = rng.standard_normal((n, 2, 3)) + y[:, None, None] * np.array([1.0, -1.0])[:, None]
    values[:, 0, 1] = np.nan
    values[:, 1, 2] = np.nan
    X = xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(n), "lat": [5.0, 15.0], "lon": [100.0, 110.0, 120.0]},
    )
    return X, xr.DataArray(y, dims="time", coords={"time": X["time"]})


def test_the_page_examples_run():
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    ns: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), ns)
    eofs = ns["eofs"]
    assert eofs.dims == ("component", "lat", "lon")
    land = ns["land"].values
    assert np.isnan(eofs.values[:, land]).all() and not np.isnan(eofs.values[:, ~land]).any()
    assert ns["scores"].dims == ("time", "member", "component")


def test_a_d_by_d_attribute_has_two_sets_of_feature_dims():
    X, y = field()
    lda = ddr.LinearDiscriminantAnalysis(store_covariance=True).fit(X, y, sample_dims="time")
    cov = lda.as_xarray("covariance_")
    assert cov.dims == ("lat", "lon", "lat_2", "lon_2")
    np.testing.assert_array_equal(cov["lon_2"].values, X["lon"].values)
    kept = ~np.isnan(X.values[0].ravel())
    flat = cov.values.reshape(6, 6)
    np.testing.assert_array_equal(flat[np.ix_(kept, kept)], lda.covariance_)
    assert np.isnan(flat[~kept]).all() and np.isnan(flat[:, ~kept]).all()
    means = lda.as_xarray("means_")
    assert means.dims == ("class", "lat", "lon")
    np.testing.assert_array_equal(means["class"].values, [0, 1, 2])


def test_outputs_say_what_they_are():
    X, y = field()
    nb = ddr.GaussianNB().fit(X.chunk({"time": 50}), y, sample_dims="time")
    proba = nb.predict_proba(X)
    assert proba.attrs == {
        "long_name": "predict_proba output of GaussianNB",
        "ddr:estimator": "GaussianNB",
        "ddr:method": "predict_proba",
    }
    theta = nb.as_xarray("theta_")
    assert theta.attrs == {
        "long_name": "theta of GaussianNB",
        "ddr:estimator": "GaussianNB",
        "ddr:attribute": "theta_",
    }
    assert theta.dims == ("class", "lat", "lon") and np.isnan(theta.values[:, 0, 1]).all()
    # 2-D input keeps its one feature dim, and says the same
    X2 = X.isel(lat=0, lon=[0, 2])
    sc = ddr.StandardScaler().fit(X2)
    assert sc.as_xarray("mean_").dims == ("lon",)
    assert sc.as_xarray("mean_").attrs["ddr:attribute"] == "mean_"


def test_a_mixture_on_pca_scores_names_its_own_component_dim_apart():
    X, _ = field()
    scores = ddr.PCA(n_components=2).fit(X, sample_dims="time").transform(X)
    gm = ddr.GaussianMixture(n_components=2, random_state=0).fit(scores)
    means = gm.as_xarray("means_")
    assert means.dims == ("gaussianmixture_component", "component")
    # the mixture's dim is one dim in every attribute
    assert gm.as_xarray("weights_").dims == ("gaussianmixture_component",)


def test_labels_on_several_sample_dims_are_aligned_by_coordinate():
    X, y = field()
    X4 = X.coarsen(time=12).construct(time=("year", "month"))
    X4 = X4.assign_coords(year=np.arange(10) + 2000, month=np.arange(12) + 1)
    y4 = xr.DataArray(
        y.values.reshape(10, 12),
        dims=("year", "month"),
        coords={"year": X4.year, "month": X4.month},
    )
    ref = ddr.GaussianNB().fit(X4, y4, sample_dims=("year", "month"))
    shuffled = y4.isel(month=np.arange(12)[::-1]).transpose("month", "year")
    got = ddr.GaussianNB().fit(X4.chunk({"year": 4}), shuffled, sample_dims=("year", "month"))
    np.testing.assert_allclose(got.theta_, ref.theta_, rtol=1e-12)
    pred = got.predict(X4)
    assert pred.dims == ("year", "month")
    np.testing.assert_array_equal(pred["month"].values, np.arange(12) + 1)
    dec = ddr.LinearDiscriminantAnalysis().fit(X4, y4, sample_dims=("year", "month"))
    dec = dec.decision_function(X4)
    assert dec.dims == ("year", "month", "class")
    with pytest.raises(ValueError, match="'month' coordinate does not match X's"):
        ddr.GaussianNB().fit(
            X4, y4.assign_coords(month=y4.month + 20), sample_dims=("year", "month")
        )


def test_impute_gives_the_grid_back():
    X, _ = field()
    X = X.copy()
    X[7, 0, 0] = np.nan  # a missing value, not a mask
    ppca = ddr.PPCA(n_components=1, solver="em", random_state=0).fit(X, sample_dims="time")
    filled = ppca.impute(X)
    assert filled.dims == X.dims
    assert np.isfinite(filled.values[7, 0, 0])
    assert np.isnan(filled.values[:, 0, 1]).all()  # the mask stays NaN
    np.testing.assert_array_equal(filled.values[8], X.values[8])


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_covariances_are_maps_of_every_covariance_type(covariance_type):
    X, _ = field()
    gm = ddr.GaussianMixture(n_components=2, covariance_type=covariance_type, random_state=0)
    gm.fit(X, sample_dims="time")
    cov = gm.as_xarray("covariances_")
    value = np.asarray(gm.covariances_)
    n_feature_axes = sum(d in ("lat", "lon", "lat_2", "lon_2") for d in cov.dims) // 2
    assert cov.ndim == value.ndim + n_feature_axes
    kept = ~np.isnan(X.values[0].ravel())
    if covariance_type == "diag":
        np.testing.assert_array_equal(cov.values.reshape(2, 6)[:, kept], value)
    if covariance_type == "tied":
        np.testing.assert_array_equal(cov.values.reshape(6, 6)[np.ix_(kept, kept)], value)
    dens = ddr.GaussianDensity().fit(X, sample_dims="time").as_xarray("covariance_")
    assert dens.dims == ("lat", "lon", "lat_2", "lon_2")
