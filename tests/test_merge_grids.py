"""merge_fits of models fitted on grids (issue 32 with the federated fit): the merged model
keeps the grid, coordinates, mask and units the fits had, so its maps, scores and outputs are
those of one fit on all the rows; models fitted on other grids, masks or units are refused."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import ddr

T = 40


def _field(seed: int = 0, units: str = "K") -> xr.DataArray:
    """(time, lat, lon) with a land mask of three points, a rank-2 signal and noise."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((T, 2)) * [3.0, 1.5]
    values = (z @ rng.standard_normal((2, 30)) + rng.standard_normal((T, 30))).reshape(T, 5, 6)
    values[:, 0, :3] = np.nan
    return xr.DataArray(
        values + 280.0,
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(T), "lat": np.linspace(-40, 40, 5), "lon": np.arange(6.0)},
        attrs={"units": units},
    )


def _halves(X):
    return X.isel(time=slice(0, 17)), X.isel(time=slice(17, None))


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("chunked", [False, True])
def test_pca_of_a_grid_merged_is_the_fit_on_every_row_with_its_maps(chunked):
    X = _field()
    data = X.chunk({"time": 10}) if chunked else X
    a, b = (ddr.PCA(n_components=2).fit(h, sample_dims="time") for h in _halves(data))
    merged = ddr.merge_fits(a, b)
    full = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    close(merged.components_, full.components_)
    close(merged.explained_variance_, full.explained_variance_)
    maps = merged.as_xarray("components_")
    assert maps.dims == ("component", "lat", "lon") and maps.attrs["units"] == "1"
    assert np.isnan(maps.values[:, 0, :3]).all() and not np.isnan(maps.values[:, 1:]).any()
    xr.testing.assert_allclose(maps, full.as_xarray("components_"))
    assert merged.as_xarray("mean_").attrs["units"] == "K"
    scores = merged.transform(X)  # the fitted sample dims and grid, by default
    assert scores.dims == ("time", "component")
    close(scores, full.transform(X))
    back = merged.inverse_transform(scores)
    assert back.dims == ("time", "lat", "lon") and np.isnan(back.values[:, 0, :3]).all()


def test_a_dataset_fit_merged_keeps_its_variables():
    ds = xr.Dataset({"t": _field(0), "p": _field(1, units="hPa")})
    a, b = (ddr.PCA(n_components=2).fit(h, sample_dims="time") for h in _halves(ds))
    merged = ddr.merge_fits(a, b)
    full = ddr.PCA(n_components=2).fit(ds, sample_dims="time")
    close(merged.components_, full.components_)
    maps = merged.as_xarray("mean_")
    assert list(maps.data_vars) == ["p", "t"]
    assert {v: maps[v].attrs["units"] for v in maps.data_vars} == {"p": "hPa", "t": "K"}


def test_two_views_on_grids_merged_keep_both_grids():
    X, Y = _field(0), _field(3).isel(lon=slice(0, 4))
    halves = zip(_halves(X), _halves(Y), strict=True)
    a, b = (ddr.CCA(n_components=2, reg=0.1).fit(x, y, sample_dims="time") for x, y in halves)
    merged = ddr.merge_fits(a, b)
    full = ddr.CCA(n_components=2, reg=0.1).fit(X, Y, sample_dims="time")
    close(merged.x_weights_, full.x_weights_)
    close(merged.y_weights_, full.y_weights_)
    assert {"lat", "lon"} <= set(merged.as_xarray("y_weights_").dims)
    xr.testing.assert_allclose(merged.as_xarray("y_weights_"), full.as_xarray("y_weights_"))


def test_models_on_other_grids_masks_or_units_are_refused():
    X = _field()
    a = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    fit = ddr.PCA(n_components=2).fit
    other_mask = X.copy()
    other_mask[:, 0, 0] = 280.0  # the same number of features kept, but not the same ones
    other_mask[:, 4, 5] = np.nan
    with pytest.raises(
        ValueError,
        match=r"^merge_fits: model 1's X has another mask than model 0's: the feature at "
        r"lat=-40.0, lon=0.0 is in model 0's mask but not in its own; merged statistics need "
        r"the same features kept$",
    ):
        ddr.merge_fits(a, fit(other_mask, sample_dims="time"))
    moved = X.assign_coords(lat=X.lat + 1.0)
    with pytest.raises(
        ValueError,
        match=r"^merge_fits: model 1's X's feature coordinate 'lat' differs from the one the "
        r"model was fitted on \(first at position 0: -39.0 where it was -40.0\).* \(model 0's\)$",
    ):
        ddr.merge_fits(a, fit(moved, sample_dims="time"))
    with pytest.raises(
        ValueError, match=r"^merge_fits: model 1's X is in units 'degC', model 0's in 'K'$"
    ):
        ddr.merge_fits(a, fit(X.assign_attrs(units="degC"), sample_dims="time"))
    rows = X.values.reshape(T, -1)
    plain = fit(rows[:, ~np.isnan(rows[0])])  # the same 27 features, as a 2-D array
    with pytest.raises(
        ValueError,
        match=r"^merge_fits: model 1's X was not fitted as a grid \(an N-D DataArray or a "
        r"Dataset\) and model 0's was; merge fits on the same grid$",
    ):
        ddr.merge_fits(a, plain)
    ds = xr.Dataset({"t": X, "p": X.copy()})
    other = xr.Dataset({"t": X, "q": X.copy()})
    d = ddr.PCA(n_components=2).fit(ds, sample_dims="time")
    with pytest.raises(
        ValueError,
        match=r"^merge_fits: model 1's X has the variables \('q', 't'\), model 0's \('p', 't'\)$",
    ):
        ddr.merge_fits(d, ddr.PCA(n_components=2).fit(other, sample_dims="time"))


def test_grid_fits_saved_at_two_sites_merge_after_loading(tmp_path):
    X = _field()
    for k, half in enumerate(_halves(X)):
        ddr.PCA(n_components=2).fit(half, sample_dims="time").save(tmp_path / f"site{k}.zarr")
    merged = ddr.merge_fits(*(ddr.load(tmp_path / f"site{k}.zarr") for k in range(2)))
    full = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    xr.testing.assert_allclose(merged.as_xarray("components_"), full.as_xarray("components_"))
    close(merged.transform(X), full.transform(X))
