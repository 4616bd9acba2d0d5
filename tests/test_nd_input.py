"""N-D DataArray input (issue 32, item 1): ``sample_dims=``, the other dims stacked into
features without a copy, masks (features NaN at every sample) left out and checked in the
fit's own pass, and every bad input refused with a message that says where.

Every fit on a grid is compared with the same estimator fitted on the numpy array a user
would build by hand: the grid transposed to its sample dims first, reshaped C-style, the
masked columns dropped.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
import xarray as xr
from sklearn.base import clone

import ddr
from ddr.tags import get_ddr_tags
from ddr.testing import counting_dask_array, exported_estimators, suite_instance
from ddr.testing.estimator_checks import output_method, suite_data, takes_y

T, LAT, LON = 96, 3, 4


def grid(dtype=np.float64, seed=0):
    """(time, lat, lon) with a land mask of three points, a mean, and correlated features;
    also the stacked reference (T, 9) of the kept points and the mask."""
    rng = np.random.default_rng(seed)
    kept = LAT * LON - 3
    mix = rng.standard_normal((kept, kept)) * 0.3 + np.eye(kept) * np.linspace(3, 1, kept)
    values = rng.standard_normal((T, kept)) @ mix + np.linspace(-2, 5, kept)
    mask = np.zeros(LAT * LON, dtype=bool)
    mask[[0, 5, 11]] = True
    full = np.full((T, LAT * LON), np.nan)
    full[:, ~mask] = values
    X = xr.DataArray(
        full.reshape(T, LAT, LON).astype(dtype),
        dims=("time", "lat", "lon"),
        coords={
            "time": np.arange(T) * 10,
            "lat": [-10.0, 0.0, 10.0],
            "lon": [-30.0, -20.0, -10.0, 0.0],
            "area": (("lat", "lon"), np.arange(LAT * LON, dtype=float).reshape(LAT, LON)),
        },
        name="sst",
    )
    return X, values.astype(dtype), mask


def labels():
    return np.arange(T) % 3


def chunked(X, how):
    return X if how is None else X.chunk({"time": how})


CHUNKINGS = [None, 25, 7]


def close(a, b, rtol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.max(np.abs(b[np.isfinite(b)]), initial=1.0)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


def tol(dtype):
    return 1e-4 if dtype == np.float32 else 1e-10


# ---------------------------------------------------------------- reference tests
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("how", CHUNKINGS)
def test_pca_on_a_grid_is_pca_of_the_stacked_kept_points(dtype, how):
    X, ref, _ = grid(dtype)
    est = ddr.PCA(n_components=4).fit(chunked(X, how), sample_dims="time")
    assert est.n_features_in_ == ref.shape[1]
    want = ddr.PCA(n_components=4).fit(ref)
    close(est.components_, want.components_, tol(dtype))
    close(est.explained_variance_, want.explained_variance_, tol(dtype))
    # numpy against numpy's own eigendecomposition of the stacked array
    C = np.cov(ref.astype(np.float64), rowvar=False)
    close(est.explained_variance_, np.linalg.eigvalsh(C)[::-1][:4], 1e-4)
    scores = est.transform(chunked(X, how))
    assert scores.dims == ("time", "component")
    np.testing.assert_array_equal(scores["time"].values, X["time"].values)
    close(scores.values, want.transform(ref), tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("how", CHUNKINGS)
def test_classifiers_on_a_grid_are_those_of_the_stacked_kept_points(dtype, how):
    X, ref, _ = grid(dtype)
    ref = ref + 2.0 * labels()[:, None]
    X = X + 2.0 * xr.DataArray(labels(), dims="time", coords={"time": X["time"]})
    y = xr.DataArray(labels(), dims="time", coords={"time": X["time"]})
    for cls in (
        ddr.GaussianNB,
        ddr.LinearDiscriminantAnalysis,
        ddr.QuadraticDiscriminantAnalysis,
    ):
        est = cls().fit(chunked(X, how), y, sample_dims="time")
        want = cls().fit(ref, labels())
        for attr in ("theta_", "var_", "means_"):
            if hasattr(want, attr):
                close(getattr(est, attr), getattr(want, attr), tol(dtype))
        proba = est.predict_proba(chunked(X, how))
        assert proba.dims == ("time", "class"), cls
        close(proba.values, want.predict_proba(ref), tol(dtype))
        pred = est.predict(chunked(X, how))
        np.testing.assert_array_equal(pred.values, want.predict(ref))
    # numpy: the class means and variances of GaussianNB
    nb = ddr.GaussianNB().fit(X, y, sample_dims="time")
    for k in range(3):
        close(nb.theta_[k], ref[labels() == k].astype(np.float64).mean(0), tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("how", CHUNKINGS)
def test_density_scaler_svd_and_kmeans_on_a_grid(dtype, how):
    X, ref, _ = grid(dtype)
    Xc = chunked(X, how)
    r64 = ref.astype(np.float64)

    dens = ddr.GaussianDensity().fit(Xc, sample_dims="time")
    close(dens.mean_, r64.mean(0), tol(dtype))
    close(dens.score_samples(Xc).values, ddr.GaussianDensity().fit(ref).score_samples(ref), 1e-4)

    sc = ddr.StandardScaler().fit(Xc, sample_dims="time")
    close(sc.mean_, r64.mean(0), tol(dtype))
    close(sc.var_, r64.var(0), tol(dtype))
    z = sc.transform(Xc)
    assert z.dims == X.dims and z.shape == X.shape
    assert np.isnan(z.values[:, 0, 0]).all() and not np.isnan(z.values[:, 0, 1]).any()
    close(
        z.values.reshape(T, -1)[:, [1, 2, 3, 4, 6, 7, 8, 9, 10]],
        (r64 - r64.mean(0)) / r64.std(0),
        tol(dtype),
    )
    back = sc.inverse_transform(z)
    close(back.values, X.values, tol(dtype))

    svd = ddr.TruncatedSVD(n_components=3, algorithm="arpack").fit(Xc, sample_dims="time")
    s = np.linalg.svd(r64, compute_uv=False)[:3]
    close(svd.singular_values_, s, tol(dtype))

    km = ddr.KMeans(n_clusters=3, random_state=0, n_init=1).fit(Xc, sample_dims="time")
    want = ddr.KMeans(n_clusters=3, random_state=0, n_init=1).fit(ref)
    close(km.cluster_centers_, want.cluster_centers_, tol(dtype))
    np.testing.assert_array_equal(km.predict(Xc).values, want.predict(ref))


def test_chunkings_agree_to_round_off():
    X, _, _ = grid()
    fits = [ddr.PCA(n_components=3).fit(chunked(X, how), sample_dims="time") for how in (25, 7)]
    close(fits[0].components_, fits[1].components_, 1e-12)
    maps = [f.as_xarray("components_") for f in fits]
    xr.testing.assert_allclose(maps[0], maps[1], rtol=1e-12)


# -------------------------------------------------------- every export, N-D == stacked
def _nd_of(X2):
    """A (year, month) x (lat, lon) grid of the suite's (n, 3) rows with a masked column
    after each kept one, stored as (lat, year, lon, month) so that the sample dims must be
    moved first; and its stacked kept columns (what the grid must equal)."""
    n, d = X2.shape
    years, months = 9, n // 9
    full = np.full((n, d, 2), np.nan)
    full[:, :, 0] = X2
    nd = full.reshape(years, months, d, 2).transpose(2, 0, 3, 1)
    coords = {
        "year": np.arange(years) + 2000,
        "month": np.arange(months),
        "lat": np.arange(d) * 5.0,
    }
    Xa = xr.DataArray(nd, dims=("lat", "year", "lon", "month"), coords=coords)
    return Xa, X2[: years * months]


@pytest.mark.parametrize("cls", exported_estimators(), ids=lambda c: c.__name__)
def test_every_export_fits_a_grid_as_its_stacked_rows(cls):
    est = suite_instance(cls)
    X2, y = suite_data(est)
    Xa, ref = _nd_of(X2)
    n = ref.shape[0]
    sd = ("year", "month")
    if y is not None:
        y = y[:n]
        y_nd = xr.DataArray(
            y.reshape(9, n // 9, *y.shape[1:]),
            dims=("year", "month", *(("target",) if y.ndim == 2 else ())),
            coords={"year": Xa["year"], "month": Xa["month"]},
        )
    want = clone(est)
    got = clone(est)
    if y is not None or takes_y(est):
        want.fit(ref, y)
        got.fit(Xa.chunk({"year": 3}), y_nd if y is not None else None, sample_dims=sd)
    else:
        want.fit(ref)
        got.fit(Xa.chunk({"year": 3}), sample_dims=sd)
    method = output_method(est)
    expected = getattr(want, method)(ref)
    out = getattr(got, method)(Xa)
    assert out.dims[:2] == sd, (method, out.dims)
    np.testing.assert_array_equal(out["year"].values, Xa["year"].values)
    if "lon" in out.dims:  # a same-width output is on the grid, NaN at its mask
        assert np.isnan(out.isel(lon=1).values).all()
        out = out.isel(lon=0).transpose("year", "month", "lat")
    values = out.values.reshape(n, *out.shape[2:])
    close(values, np.asarray(expected), 1e-8)
    for attr in get_ddr_tags(got).xarray_dims:
        if not hasattr(got, attr):  # declared for other parameters (KernelPCA's landmarks_)
            continue
        m = got.as_xarray(attr)
        assert m.attrs["ddr:estimator"] == cls.__name__
        if "lon" not in m.dims:
            continue
        # the masked half of the grid is NaN in every map; the kept half is the attribute
        assert np.isnan(m.isel(lon=1).values).all(), attr
        kept = m.isel({d: 0 for d in ("lon", "lon_2") if d in m.dims})
        close(kept.values, getattr(want, attr), 1e-8)


# ------------------------------------------------------------------------ masks
def test_a_mask_is_left_out_and_restored_in_every_map():
    X, _, mask = grid()
    est = ddr.PCA(n_components=3).fit(X.chunk({"time": 30}), sample_dims="time")
    comps = est.as_xarray("components_")
    assert comps.dims == ("component", "lat", "lon")
    np.testing.assert_array_equal(np.isnan(comps.values[0]).ravel(), mask)
    np.testing.assert_array_equal(comps["lon"].values, X["lon"].values)
    np.testing.assert_array_equal(comps["area"].values, X["area"].values)
    close(comps.values.reshape(3, -1)[:, ~mask], est.components_, 0)
    assert comps.attrs["ddr:attribute"] == "components_" and "long_name" in comps.attrs
    mean = est.as_xarray("mean_")
    assert mean.dims == ("lat", "lon") and np.isnan(mean.values.ravel()[mask]).all()
    back = est.inverse_transform(est.transform(X))
    assert back.dims == ("time", "lat", "lon")
    np.testing.assert_array_equal(np.isnan(back.values[0]).ravel(), mask)


@pytest.mark.parametrize("how", CHUNKINGS)
def test_a_feature_nan_at_some_samples_only_is_refused_naming_it(how):
    X, _, _ = grid()
    X = X.copy()
    X[40, 1, 2] = np.nan  # lat=0.0, lon=-10.0: NaN at time=400 only
    with pytest.raises(ValueError, match=r"feature at lat=0.0, lon=-10.0 is NaN at some samples"):
        ddr.PCA(n_components=2).fit(chunked(X, how), sample_dims="time")
    with pytest.raises(ValueError, match=r"NaN at sample 40 \(time=400\)"):
        ddr.GaussianNB().fit(chunked(X, how), labels(), sample_dims="time")


def test_a_masked_feature_with_a_value_later_is_refused_in_the_pass():
    X, _, _ = grid()
    X = X.copy()
    X[50, 0, 0] = 1.0  # masked at the first sample (lat=-10.0, lon=-30.0), a value at 50
    with pytest.raises(
        ValueError,
        match=r"lat=-10.0, lon=-30.0 is NaN at the first sample "
        r"\(time=0\), so it was taken as masked.*has a value at sample 50",
    ):
        ddr.PCA(n_components=2).fit(X.chunk({"time": 20}), sample_dims="time")
    # in memory every sample is looked at: the same feature is NaN at some samples only
    with pytest.raises(ValueError, match=r"lat=-10.0, lon=-30.0 is NaN at some samples"):
        ddr.PCA(n_components=2).fit(X, sample_dims="time")


def test_estimators_that_take_missing_values_get_them():
    X, ref, mask = grid()
    X = X.copy()
    X[40, 1, 2] = np.nan
    ppca = ddr.PPCA(n_components=2, solver="em", random_state=0, max_iter=5).fit(
        X, sample_dims="time"
    )
    assert ppca.n_features_in_ == 9  # the mask is left out, the missing value is kept
    assert np.isnan(ppca.as_xarray("components_").values[0].ravel()[mask]).all()
    sc = ddr.StandardScaler().fit(X.chunk({"time": 32}), sample_dims="time")
    ref = ref.copy()
    ref[40, 4] = np.nan
    close(sc.mean_, np.nanmean(ref, axis=0), 1e-12)


def test_transform_input_must_have_the_fitted_mask_and_grid():
    X, _, _ = grid()
    est = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    other = X.copy()
    other[3, 0, 0] = 2.0  # masked in the model
    with pytest.raises(ValueError, match=r"lat=-10.0, lon=-30.0 is masked in the fitted model"):
        est.transform(other.chunk({"time": 10})).compute()
    with pytest.raises(ValueError, match=r"lat=-10.0, lon=-30.0 is masked in the fitted model"):
        est.transform(other)
    hole = X.copy()
    hole[3, 2, 2] = np.nan
    with pytest.raises(
        ValueError,
        match=r"lat=10.0, lon=-10.0 is NaN at sample 3 \(time=30\), "
        "but it is not masked in the fitted model",
    ):
        est.transform(hole.chunk({"time": 10})).compute()
    shifted = X.assign_coords(lon=X["lon"] + 0.5)
    with pytest.raises(
        ValueError,
        match=r"feature coordinate 'lon' differs from the one the "
        r"model was fitted on \(first at position 0: -29.5 where it was -30.0\)",
    ):
        est.transform(shifted)
    with pytest.raises(ValueError, match=r"has feature dims \('lat',\).*fitted on feature dims"):
        est.transform(X.isel(lon=0))
    # the feature dims in another order are put in the fitted order
    close(est.transform(X.transpose("lon", "time", "lat")).values, est.transform(X).values, 0)


# ------------------------------------------------------------------------ passes
def test_the_mask_costs_no_pass():
    """The fit reads every row once plus the chunk of the first sample (where the mask is
    read); the check of the mask lives in the fit's own pass; transform is lazy and reads
    once."""
    X, _, _ = grid()
    arr, counter = counting_dask_array(X.values, chunks=(24, -1, -1))
    Xa = X.copy(data=arr)
    with dask.config.set(scheduler="synchronous"):
        est = ddr.PCA(n_components=2).fit(Xa, sample_dims="time")
        assert counter.passes == 1 + 24 / T
        counter.reset()
        out = est.transform(Xa)
        assert counter.passes == 0
        out.compute()
        assert counter.passes == 1
        counter.reset()
        ddr.GaussianNB().fit(Xa, labels(), sample_dims="time")
        assert counter.passes == 1 + 24 / T


# ---------------------------------------------------------------- several sample dims
def test_several_sample_dims_are_stacked_and_unstacked():
    X, ref, _ = grid()
    X4 = X.assign_coords(time=np.arange(T)).coarsen(time=12).construct(time=("year", "month"))
    X4 = X4.assign_coords(year=np.arange(8) + 1990, month=np.arange(12) + 1)
    est = ddr.PCA(n_components=2).fit(X4.chunk({"year": 3}), sample_dims=("year", "month"))
    close(est.components_, ddr.PCA(n_components=2).fit(ref).components_, 1e-10)
    assert est.sample_dims_ == ("year", "month")
    scores = est.transform(X4)  # the fitted sample dims by default
    assert scores.dims == ("year", "month", "component")
    np.testing.assert_array_equal(scores["month"].values, np.arange(12) + 1)
    back = est.inverse_transform(scores)
    assert back.dims == ("year", "month", "lat", "lon")
    lazy = est.transform(X4.chunk({"year": 2}))
    assert lazy.chunks is not None
    close(lazy.values, scores.values, 1e-12)


def test_the_old_sample_dim_keyword_still_works():
    X, _, _ = grid()
    a = ddr.PCA(n_components=2).fit(X, sample_dim="time")
    b = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    close(a.components_, b.components_, 0)
    assert a.as_xarray("components_").dims == ("component", "lat", "lon")


# ------------------------------------------------------------------------ bad input
def test_bad_input_is_refused_with_a_message():
    X, _, _ = grid()
    with pytest.raises(
        ValueError,
        match=r"sample_dims=\('day',\): 'day' is not a dimension of X "
        r"\(\('time', 'lat', 'lon'\)\)",
    ):
        ddr.PCA(n_components=2).fit(X, sample_dims="day")
    with pytest.raises(TypeError, match="give sample_dims or sample_dim, not both"):
        ddr.PCA(n_components=2).fit(X, sample_dim="time", sample_dims="time")
    # data chunked along a feature dim is read in whole rows: tests/test_space_chunked.py
    with pytest.raises(ValueError, match="X has no feature dims"):
        ddr.PCA(n_components=2).fit(X, sample_dims=("time", "lat", "lon"))
    with pytest.raises(ValueError, match="names a dim twice"):
        ddr.PCA(n_components=2).fit(X, sample_dims=("time", "time"))
    allnan = X.copy()
    allnan[0] = np.nan
    with pytest.raises(ValueError, match="every feature is NaN at the first sample"):
        ddr.PCA(n_components=2).fit(allnan.chunk({"time": 20}), sample_dims="time")
    y = xr.DataArray(labels(), dims="time")
    with pytest.raises(ValueError, match=r"must lie along X's sample dims \('year', 'month'\)"):
        X4 = X.coarsen(time=12).construct(time=("year", "month"))
        ddr.GaussianNB().fit(X4, y, sample_dims=("year", "month"))


def test_a_refit_on_other_data_forgets_the_grid():
    X, ref, _ = grid()
    est = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    est.fit(ref)
    assert not hasattr(est, "feature_layout_") and not hasattr(est, "sample_dims_")
    assert est.as_xarray("components_").dims == ("component", "feature")


def test_save_and_load_keep_the_grid(tmp_path):
    X, _, _ = grid()
    est = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    est.save(tmp_path / "m.zarr")
    back = ddr.load(tmp_path / "m.zarr")
    xr.testing.assert_identical(back.as_xarray("components_"), est.as_xarray("components_"))
    close(back.transform(X).values, est.transform(X).values, 0)


def test_a_zarr_grid_is_read_as_stored(tmp_path):
    """A grid written to Zarr (chunked along time) and opened with xarray or as a dask array
    of the Zarr array (ddr's chunk reader) fits as the array in memory."""
    X, ref, _ = grid()
    X.chunk({"time": 32}).to_dataset().to_zarr(tmp_path / "g.zarr")
    opened = xr.open_zarr(tmp_path / "g.zarr")["sst"]
    want = ddr.PCA(n_components=3).fit(ref)
    est = ddr.PCA(n_components=3).fit(opened, sample_dims="time")
    close(est.components_, want.components_, 1e-10)
    import zarr

    z = zarr.open_array(tmp_path / "g.zarr" / "sst", mode="r")
    raw = X.copy(data=dask.array.from_zarr(z))
    close(ddr.PCA(n_components=3).fit(raw, sample_dims="time").components_, want.components_, 1e-10)


def test_partial_fit_batches_stay_on_the_fitted_grid():
    """A batch merged by partial_fit is read with the fitted mask, not one of its own."""
    X, ref, _ = grid()
    est = ddr.GaussianDensity()
    for part in (slice(0, 40), slice(40, None)):
        est.partial_fit(X[part].chunk({"time": 16}), sample_dims="time")
    close(est.mean_, ref.mean(0), 1e-12)
    close(est.covariance_, np.cov(ref, rowvar=False, ddof=0), 1e-10)
    assert est.as_xarray("mean_").dims == ("lat", "lon")
    other = X[40:].copy()
    other[:, 0, 0] = 1.0  # the batch has a value where the model is masked
    with pytest.raises(ValueError, match=r"lat=-10.0, lon=-30.0 is masked in the fitted model"):
        est.partial_fit(other.chunk({"time": 16}), sample_dims="time")


# ------------------------------------------------------------------------ Datasets
def two_fields():
    """A Dataset of a (time, lat, lon) field with its mask and a (time, station) one with a
    station that never reported; and the stacked kept columns, slp's first (the variables
    sit in the order of their names)."""
    X, ref, _ = grid()
    rng = np.random.default_rng(5)
    slp = rng.standard_normal((T, 5)) * 3 + 1000 + ref[:, :1]
    slp[:, 2] = np.nan
    ds = xr.Dataset({"sst": X, "slp": (("time", "station"), slp)})
    return ds, np.hstack([slp[:, [0, 1, 3, 4]], ref])


@pytest.mark.parametrize("how", CHUNKINGS)
def test_a_dataset_is_its_variables_side_by_side(how):
    ds, ref = two_fields()
    X = ds if how is None else ds.chunk({"time": how})
    est = ddr.PCA(n_components=3).fit(X, sample_dims="time")
    want = ddr.PCA(n_components=3).fit(ref)
    close(est.components_, want.components_, 1e-10)
    maps = est.as_xarray("components_")
    assert isinstance(maps, xr.Dataset)
    assert maps["sst"].dims == ("component", "lat", "lon")
    assert maps["slp"].dims == ("component", "station")
    assert np.isnan(maps["slp"].values[:, 2]).all() and np.isnan(maps["sst"].values[:, 0, 0]).all()
    close(maps["slp"].values[:, [0, 1, 3, 4]], want.components_[:, :4], 1e-10)
    scores = est.transform(X)
    assert scores.dims == ("time", "component")
    back = est.inverse_transform(scores)
    assert isinstance(back, xr.Dataset) and back["sst"].dims == ("time", "lat", "lon")
    close(
        back["slp"].values[:, [0, 1, 3, 4]],
        want.inverse_transform(want.transform(ref))[:, :4],
        1e-8,
    )


def test_a_dataset_fit_reads_each_variable_once():
    ds, _ = two_fields()
    a, ca = counting_dask_array(ds["sst"].values, chunks=(24, -1, -1))
    b, cb = counting_dask_array(ds["slp"].values, chunks=(24, -1))
    X = xr.Dataset({"sst": ds["sst"].copy(data=a), "slp": (("time", "station"), b)})
    with dask.config.set(scheduler="synchronous"):
        ddr.GaussianDensity().fit(X, sample_dims="time")
    assert ca.passes == cb.passes == 1 + 24 / T  # one pass and the chunk of the first sample


def test_bad_dataset_input_is_refused():
    ds, _ = two_fields()
    with pytest.raises(ValueError, match="X is a Dataset: name its sample dims with sample_dims="):
        ddr.PCA(n_components=2).fit(ds)
    est = ddr.PCA(n_components=2).fit(ds, sample_dims="time")
    with pytest.raises(ValueError, match=r"X has the variables \('sst',\); the model was fitted"):
        est.transform(ds[["sst"]])
    with pytest.raises(ValueError, match="X is a DataArray; the model was fitted on a Dataset"):
        est.transform(ds["sst"])
    holey = ds.copy(deep=True)
    holey["slp"][7, 1] = np.nan
    with pytest.raises(ValueError, match=r"X\['slp'\]: the feature at station\[1\] is NaN at some"):
        ddr.PCA(n_components=2).fit(holey, sample_dims="time")
    lda = ddr.LinearDiscriminantAnalysis(store_covariance=True)
    lda.fit(ds, labels(), sample_dims="time")
    assert lda.as_xarray("means_")["sst"].dims == ("class", "lat", "lon")
    with pytest.raises(ValueError, match="covariance_ has 2 feature axes; fitted on a Dataset"):
        lda.as_xarray("covariance_")


def test_a_saved_dataset_fit_keeps_its_blocks(tmp_path):
    ds, _ = two_fields()
    est = ddr.PCA(n_components=2).fit(ds, sample_dims="time")
    est.save(tmp_path / "m.zarr")
    back = ddr.load(tmp_path / "m.zarr")
    xr.testing.assert_identical(back.as_xarray("components_"), est.as_xarray("components_"))


def test_a_grid_given_to_a_model_fitted_on_numpy_is_stacked_lazily():
    X, _, _ = grid()
    est = ddr.PCA(n_components=2).fit(np.nan_to_num(X.values.reshape(T, -1)))
    arr, counter = counting_dask_array(np.nan_to_num(X.values), chunks=(24, -1, -1))
    with dask.config.set(scheduler="synchronous"):
        out = est.transform(X.copy(data=arr), sample_dims="time")
        assert counter.passes == 0  # nothing read before the output is computed
        close(out.values, est.transform(np.nan_to_num(X.values.reshape(T, -1))), 1e-12)
