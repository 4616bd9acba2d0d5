"""Feature weights of the decompositions (``fit(X, feature_weights=w)``): EOF analysis with
area weights ``sqrt(cos(lat))`` equal to xeofs's and eofs's, and to a numpy reference of the
weighted, stacked, masked SVD; chunk invariance, float32, passes, the unweighted maps,
validation, persistence, partial_fit, TruncatedSVD, RotatedPCA and the pipeline."""

from __future__ import annotations

import json

import dask
import numpy as np
import pytest
import xarray as xr

import ddr
from ddr.testing import counting_dask_array

T, NLAT, NLON, K = 60, 9, 12, 4


def grid(dtype=np.float64):
    """time x lat x lon: three spatial modes with seasonal cycles, noise, an offset and a
    land mask (NaN at fixed points)."""
    rng = np.random.default_rng(3)
    lat = np.linspace(-80.0, 80.0, NLAT)
    lon = np.arange(NLON) * 30.0
    t = np.arange(T)
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    modes = np.stack([np.cos(la) * np.sin(lo), np.sin(2 * la), np.cos(la) ** 2 * np.cos(2 * lo)])
    series = np.stack(
        [3 * np.sin(2 * np.pi * t / 12), 2 * np.cos(2 * np.pi * t / 30), np.sin(t / 5.0)], axis=1
    )
    values = np.einsum("tm,mij->tij", series, modes) + 0.3 * rng.standard_normal((T, NLAT, NLON))
    values += 280.0
    values[:, 3:5, 2:6] = np.nan  # land
    values[:, 7, 0] = np.nan
    X = xr.DataArray(
        values.astype(dtype),
        dims=("time", "lat", "lon"),
        coords={"time": t, "lat": lat, "lon": lon},
        name="sst",
    )
    return X


def coslat(X):
    return np.sqrt(np.cos(np.deg2rad(X.lat)))


def reference(X, w, k=K, centre=True):
    """The weighted, stacked, masked SVD in numpy (float64)."""
    flat = np.asarray(X.values, dtype=np.float64).reshape(X.sizes["time"], -1)
    keep = ~np.isnan(flat[0])
    Xk = flat[:, keep]
    wk = np.broadcast_to(np.asarray(w)[:, None], (NLAT, NLON)).reshape(-1)[keep]
    mean = Xk.mean(axis=0)
    Xw = ((Xk - mean) if centre else Xk) * wk
    U, s, Vt = np.linalg.svd(Xw, full_matrices=False)
    signs = np.sign(Vt[np.arange(k), np.argmax(np.abs(Vt[:k]), axis=1)])
    n = Xk.shape[0]
    return {
        "components": Vt[:k] * signs[:, None],
        "variance": s[:k] ** 2 / (n - 1),
        "ratio": s[:k] ** 2 / (s**2).sum(),
        "scores": U[:, :k] * s[:k] * signs,
        "mean": mean,
        "keep": keep,
        "w": wk,
        "singular": s[:k],
    }


def _sign_align(a, b, axis):
    """``a`` with each mode's sign flipped to ``b``'s (modes along ``axis``)."""
    a, b = np.asarray(a), np.asarray(b)
    other = tuple(i for i in range(a.ndim) if i != axis)
    dots = np.nansum(a * b, axis=other)
    shape = [1] * a.ndim
    shape[axis] = -1
    return a * np.sign(dots).reshape(shape)


# ------------------------------------------------------------ the numpy reference
@pytest.mark.parametrize("solver", ["covariance_eigh", "full", "randomized", "arpack"])
@pytest.mark.parametrize("chunks", [None, 7, 59])
def test_pca_equals_the_weighted_masked_svd(solver, chunks):
    X = grid()
    w = coslat(X)
    ref = reference(X, w)
    Xin = X if chunks is None else X.chunk({"time": chunks})
    pca = ddr.PCA(K, svd_solver=solver, random_state=0, iterated_power=8).fit(
        Xin, sample_dims="time", feature_weights=w
    )
    tol = 1e-10 if solver != "randomized" else 1e-8
    np.testing.assert_allclose(pca.components_, ref["components"], atol=tol)
    np.testing.assert_allclose(pca.explained_variance_, ref["variance"], rtol=tol)
    np.testing.assert_allclose(pca.explained_variance_ratio_, ref["ratio"], rtol=tol)
    np.testing.assert_allclose(pca.mean_, ref["mean"], rtol=1e-12)
    np.testing.assert_allclose(pca.feature_weights_, ref["w"], rtol=1e-15)
    scores = pca.transform(Xin)
    assert scores.dims == ("time", "component")
    np.testing.assert_allclose(scores.values, ref["scores"], atol=tol * 100)
    # the maps: NaN at the mask, the weighted components elsewhere
    maps = pca.as_xarray("components_")
    assert maps.dims == ("component", "lat", "lon")
    flat = maps.values.reshape(K, -1)
    assert np.isnan(flat[:, ~ref["keep"]]).all()
    np.testing.assert_allclose(flat[:, ref["keep"]], ref["components"], atol=tol)


def test_chunk_invariance_float32_and_one_pass():
    X = grid()
    w = coslat(X)
    fits = [
        ddr.PCA(K).fit(X.chunk({"time": c}), sample_dims="time", feature_weights=w)
        for c in (5, 17, 59, T)
    ]
    for other in fits[1:]:
        np.testing.assert_allclose(other.components_, fits[0].components_, atol=1e-12)
        np.testing.assert_allclose(
            other.explained_variance_, fits[0].explained_variance_, rtol=1e-12
        )
    X32 = grid(np.float32)
    ref = reference(X32, w)
    p32 = ddr.PCA(K).fit(X32.chunk({"time": 13}), sample_dims="time", feature_weights=w)
    # float32 values are exact in float64 and the moments accumulate in float64
    np.testing.assert_allclose(p32.components_, ref["components"], atol=1e-10)
    np.testing.assert_allclose(p32.explained_variance_, ref["variance"], rtol=1e-10)
    z = p32.transform(X32.chunk({"time": 13}))
    assert z.dtype == np.float32
    np.testing.assert_allclose(z.values, ref["scores"], rtol=1e-5, atol=1e-4)
    # the covariance solver: one pass (plus the first sample's chunk, where the mask is read)
    arr, counter = counting_dask_array(X.values, chunks=(10, -1, -1))
    with dask.config.set(scheduler="synchronous"):
        est = ddr.PCA(K).fit(X.copy(data=arr), sample_dims="time", feature_weights=w)
    assert counter.passes == 1 + 10 / T
    assert est.n_passes_ == 1
    # the randomized solver makes the passes it makes without weights
    arr, counter = counting_dask_array(X.values, chunks=(10, -1, -1))
    with dask.config.set(scheduler="synchronous"):
        est = ddr.PCA(K, svd_solver="randomized", iterated_power=2, random_state=0).fit(
            X.copy(data=arr), sample_dims="time", feature_weights=w
        )
    assert est.n_passes_ == 3
    assert counter.passes == 3 + 10 / T


# ------------------------------------------------------------------ xeofs and eofs
def test_pca_equals_xeofs():
    xe = pytest.importorskip("xeofs")
    X = grid()
    w = coslat(X)
    ref_w = w.broadcast_like(X.isel(time=0)).drop_vars("time", errors="ignore")
    pca = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=w)
    for model in (
        xe.single.EOF(n_modes=K, solver="full").fit(X, "time", weights=ref_w),
        xe.single.EOF(n_modes=K, use_coslat=True, solver="full").fit(X, "time"),
    ):
        comps = model.components().transpose("mode", "lat", "lon").values
        mine = pca.as_xarray("components_").values
        np.testing.assert_allclose(_sign_align(comps, mine, 0), mine, atol=1e-8)
        np.testing.assert_allclose(
            pca.explained_variance_, model.explained_variance().values, rtol=1e-8
        )
        np.testing.assert_allclose(
            pca.explained_variance_ratio_, model.explained_variance_ratio().values, rtol=1e-8
        )
        scores = model.scores().transpose("time", "mode").values
        mine_s = pca.transform(X).values
        np.testing.assert_allclose(_sign_align(scores, mine_s, 1), mine_s, atol=1e-8)
        # new data are weighted the same way
        new = X.isel(time=slice(0, 10)) * 1.5
        proj = model.transform(new).transpose("time", "mode").values
        np.testing.assert_allclose(
            _sign_align(proj, pca.transform(new).values, 1), pca.transform(new).values, atol=1e-8
        )


def test_pca_equals_eofs():
    pytest.importorskip("eofs")
    from eofs.xarray import Eof

    X = grid()
    w = coslat(X)
    solver = Eof(X, weights=np.broadcast_to(w.values[:, None], (NLAT, NLON)))
    pca = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=w)
    eofs = solver.eofs(neofs=K).transpose("mode", "lat", "lon").values
    mine = pca.as_xarray("components_").values
    assert np.array_equal(np.isnan(eofs), np.isnan(mine))
    np.testing.assert_allclose(_sign_align(eofs, mine, 0), mine, atol=1e-8)
    np.testing.assert_allclose(
        pca.explained_variance_, solver.eigenvalues(neigs=K).values, rtol=1e-8
    )
    np.testing.assert_allclose(
        pca.explained_variance_ratio_, solver.varianceFraction(neigs=K).values, rtol=1e-8
    )
    pcs = solver.pcs(npcs=K).transpose("time", "mode").values
    mine_s = pca.transform(X).values
    np.testing.assert_allclose(_sign_align(pcs, mine_s, 1), mine_s, atol=1e-8)
    # the reconstruction is unweighted as eofs's
    back = pca.inverse_transform(pca.transform(X))
    rec = solver.reconstructedField(K).transpose("time", "lat", "lon").values
    np.testing.assert_allclose(back.values - pca.as_xarray("mean_").values, rec, atol=1e-8)


def test_rotated_pca_equals_xeofs_rotation_of_the_weighted_eofs():
    xe = pytest.importorskip("xeofs")
    X = grid()
    w = coslat(X)
    rot = ddr.RotatedPCA(3).fit(X, sample_dims="time", feature_weights=w)
    model = xe.single.EOF(n_modes=3, use_coslat=True, solver="full").fit(X, "time")
    rotator = xe.single.EOFRotator(n_modes=3).fit(model)
    comps = rotator.components().transpose("mode", "lat", "lon").values
    mine = rot.as_xarray("components_").values
    np.testing.assert_allclose(_sign_align(comps, mine, 0), mine, atol=1e-8)
    np.testing.assert_allclose(
        rot.explained_variance_, rotator.explained_variance().values, rtol=1e-8
    )
    scores = rotator.scores().transpose("time", "mode").values
    mine_s = rot.transform(X).values
    np.testing.assert_allclose(_sign_align(scores, mine_s, 1), mine_s, atol=1e-8)
    np.testing.assert_allclose(rot.feature_weights_, rot.pca_.feature_weights_)


# ------------------------------------------------------------------ TruncatedSVD
@pytest.mark.parametrize("kind", ["one-pass", "randomized", "arpack"])
def test_truncated_svd_is_the_svd_of_the_weighted_data(kind):
    X = grid().fillna(0.0)  # no mask: TruncatedSVD of the raw weighted values
    w = coslat(X)
    ref = reference(X, w, centre=False)
    params = {
        "one-pass": {"n_oversamples": NLAT * NLON},
        "randomized": {"n_iter": 8},
        "arpack": {"algorithm": "arpack"},
    }[kind]
    svd = ddr.TruncatedSVD(K, random_state=0, **params).fit(
        X.chunk({"time": 11}), sample_dims="time", feature_weights=w
    )
    tol = 1e-10 if kind != "randomized" else 1e-8
    np.testing.assert_allclose(svd.singular_values_, ref["singular"], rtol=tol)
    np.testing.assert_allclose(svd.components_, ref["components"], atol=tol)
    Xw = X.values.reshape(T, -1) * ref["w"]
    z = svd.transform(X).values
    np.testing.assert_allclose(z, Xw @ ref["components"].T, atol=tol * 1e3)
    np.testing.assert_allclose(svd.explained_variance_, np.var(z, axis=0), rtol=1e-8)
    np.testing.assert_allclose(
        svd.explained_variance_ratio_, np.var(z, axis=0) / np.var(Xw, axis=0).sum(), rtol=1e-8
    )
    np.testing.assert_allclose(svd.mean_, X.values.reshape(T, -1).mean(axis=0), rtol=1e-12)


# --------------------------------------------------------------- unweighted maps
def test_unweighted_maps_and_the_reconstruction():
    X = grid()
    w = coslat(X).copy()
    w[0] = 0.0  # a row of latitudes left out
    pca = ddr.PCA(None, svd_solver="full").fit(X, sample_dims="time", feature_weights=w)
    weighted = pca.as_xarray("components_")
    unweighted = pca.as_xarray("components_", weighted=False)
    assert unweighted.dims == weighted.dims
    assert "unweighted" in unweighted.attrs["long_name"]
    expected = (weighted / w).where(w > 0)
    np.testing.assert_allclose(unweighted.values, expected.values, rtol=1e-14)
    assert np.isnan(unweighted.isel(lat=0)).all()  # weight 0: the data said nothing there
    assert np.isnan(unweighted.isel(lat=3, lon=3)).all()  # masked
    # every component: the reconstruction is the data, unweighted (NaN at weight 0)
    back = pca.inverse_transform(pca.transform(X))
    assert np.isnan(back.isel(lat=0)).all()
    np.testing.assert_allclose(back.isel(lat=slice(1, None)), X.isel(lat=slice(1, None)), atol=1e-9)
    # transform of new data weights it as the fit did
    new = X.isel(time=slice(0, 5)) + 1.0
    flat = new.values.reshape(5, -1)[:, ~np.isnan(X.values[0].ravel())]
    expected_scores = ((flat - pca.mean_) * pca.feature_weights_) @ pca.components_.T
    np.testing.assert_allclose(pca.transform(new).values, expected_scores, atol=1e-10)
    with pytest.raises(ValueError, match="only 'components_'"):
        pca.as_xarray("mean_", weighted=False)
    # without weights, weighted=False changes nothing
    plain = ddr.PCA(2).fit(X, sample_dims="time")
    assert plain.feature_weights_ is None
    xr.testing.assert_identical(
        plain.as_xarray("components_", weighted=False), plain.as_xarray("components_")
    )


def test_numpy_input_weights_and_full_grid_vector():
    X = grid()
    w = coslat(X)
    full = np.broadcast_to(w.values[:, None], (NLAT, NLON))
    a = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=w)
    b = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=full)  # the grid's shape
    c = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=full.ravel())  # every point
    d = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=a.feature_weights_)  # unmasked
    for other in (b, c, d):
        np.testing.assert_array_equal(other.components_, a.components_)
    # a 2-D numpy array: one weight per column; weight 1 everywhere is no weight at all
    flat = X.values.reshape(T, -1)[:, ~np.isnan(X.values[0].ravel())]
    ones = ddr.PCA(K).fit(flat, feature_weights=np.ones(flat.shape[1]))
    plain = ddr.PCA(K).fit(flat)
    np.testing.assert_allclose(ones.components_, plain.components_, atol=1e-13)
    # NaN or negative weights at masked points are ignored
    wn = full.copy()
    wn[3:5, 2:6] = np.nan
    wn[7, 0] = -1.0
    e = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=wn)
    np.testing.assert_array_equal(e.components_, a.components_)


# -------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("weights", "error", "match"),
    [
        (lambda X: -coslat(X), ValueError, "non-negative"),
        (lambda X: coslat(X).where(X.lat != 0), ValueError, "finite"),
        (lambda X: coslat(X) * np.inf, ValueError, "finite"),
        (lambda X: coslat(X) * 0, ValueError, "all zero"),
        (lambda X: np.ones(5), ValueError, "5 weights"),
        (lambda X: np.ones((2, 3)), ValueError, "1-D"),
        (lambda X: X.isel(lat=0, lon=0), ValueError, "not feature dims"),
        (lambda X: coslat(X).isel(lat=slice(1, None)), ValueError, "values along 'lat'"),
        (lambda X: coslat(X).assign_coords(lat=X.lat + 1), ValueError, "coordinate 'lat'"),
        (lambda X: np.array(["a"] * NLAT * NLON), TypeError, "real numbers"),
        (lambda X: xr.Dataset({"w": coslat(X)}), TypeError, "Dataset"),
    ],
)
def test_bad_weights_are_refused(weights, error, match):
    X = grid()
    with pytest.raises(error, match=match):
        ddr.PCA(2).fit(X, sample_dims="time", feature_weights=weights(X))


# ---------------------------------------------------------- persistence and merges
def test_weights_are_saved_and_loaded(tmp_path):
    X = grid()
    w = coslat(X)
    for est in (
        ddr.PCA(K),
        ddr.RotatedPCA(3),
        ddr.TruncatedSVD(K, random_state=0),
    ):
        data = X if not isinstance(est, ddr.TruncatedSVD) else X.fillna(0.0)
        est.fit(data, sample_dims="time", feature_weights=w)
        path = tmp_path / f"{type(est).__name__}.zarr"
        est.save(path)
        back = ddr.load(path)
        np.testing.assert_array_equal(back.feature_weights_, est.feature_weights_)
        np.testing.assert_array_equal(back.transform(data).values, est.transform(data).values)
        xr.testing.assert_identical(
            back.as_xarray("components_", weighted=False),
            est.as_xarray("components_", weighted=False),
        )


def test_partial_fit_keeps_the_weights_of_the_first_batch():
    X = grid()
    w = coslat(X)
    whole = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=w)
    inc = ddr.PCA(K)
    inc.partial_fit(X.isel(time=slice(0, 25)), sample_dim="time", feature_weights=w)
    inc.partial_fit(X.isel(time=slice(25, None)), sample_dim="time")
    np.testing.assert_allclose(inc.components_, whole.components_, atol=1e-12)
    with pytest.raises(ValueError, match="differ"):
        inc.partial_fit(X.isel(time=slice(0, 5)), sample_dim="time", feature_weights=w * 2)
    svd = ddr.TruncatedSVD(K, n_oversamples=NLAT * NLON)
    Xf = X.fillna(0.0)
    full = ddr.TruncatedSVD(K, n_oversamples=NLAT * NLON).fit(
        Xf, sample_dims="time", feature_weights=w
    )
    svd.partial_fit(Xf.isel(time=slice(0, 30)), sample_dims="time", feature_weights=w)
    svd.partial_fit(Xf.isel(time=slice(30, None)), sample_dims="time")
    np.testing.assert_allclose(svd.singular_values_, full.singular_values_, rtol=1e-9)
    a = ddr.TruncatedSVD(K, n_oversamples=NLAT * NLON).fit(
        Xf.isel(time=slice(0, 30)), sample_dims="time", feature_weights=w
    )
    b = ddr.TruncatedSVD(K, n_oversamples=NLAT * NLON).fit(
        Xf.isel(time=slice(30, None)), sample_dims="time", feature_weights=w
    )
    merged = ddr.merge_fits(a, b)
    np.testing.assert_allclose(merged.singular_values_, full.singular_values_, rtol=1e-9)
    c = ddr.TruncatedSVD(K, n_oversamples=NLAT * NLON).fit(
        Xf.isel(time=slice(30, None)), sample_dims="time"
    )
    with pytest.raises(ValueError, match="feature_weights"):
        ddr.merge_fits(a, c)


# ------------------------------------------------------------------------ pipeline
@pytest.mark.parametrize(
    ("op", "params"),
    [
        ("PCA", {"n_components": 3}),
        ("RotatedPCA", {"n_components": 3}),
        ("TruncatedSVD", {"n_components": 3, "n_oversamples": 6}),
    ],
)
def test_pipeline_fit_with_a_weights_input(tmp_path, monkeypatch, op, params):
    """The fit's feature_weights role takes an input along the features (planned without
    reading it; read after the pass), and the model equals the direct fit."""
    from ddr.pipeline import plan_pipeline, run_plan

    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6)) @ rng.standard_normal((6, 6)) + 5.0
    w = np.array([1.0, 0.5, 2.0, 1.0, 0.0, 0.3])
    xr.Dataset(
        {"X": (("time", "channel"), X), "w": (("channel",), w)},
    ).to_zarr(tmp_path / "data.zarr", consolidated=False)
    (tmp_path / "p.yaml").write_text(
        f"""
ddr: 1
name: weighted
inputs:
  X: {{path: data.zarr, array: X, dims: [time, channel]}}
  w: {{path: data.zarr, array: w, dims: [channel]}}
steps:
  fit: {{op: {op}.fit, inputs: {{X: X, feature_weights: w}}, with: {json.dumps(params)}}}
outputs:
  - {{kind: metrics, from: [fit.explained_variance_ratio_], path: m.json}}
"""
    )
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        summary = run_plan(plan_pipeline(tmp_path / "p.yaml", []))
    assert summary.passes == {"X": 1.0, "w": 1.0}  # one pass over X; the weights read once
    got = json.loads((tmp_path / "m.json").read_text())["fit.explained_variance_ratio_"]
    direct = getattr(ddr, op)(**params).fit(X, feature_weights=w)
    np.testing.assert_allclose(got, direct.explained_variance_ratio_, rtol=1e-12)
    plain = getattr(ddr, op)(**params).fit(X)
    assert not np.allclose(got, plain.explained_variance_ratio_)


# ------------------------------------------------------ Datasets and the PPCA model
def test_dataset_fit_takes_a_dataarray_or_a_dataset_of_weights():
    X = grid()
    stations = xr.DataArray(
        np.random.default_rng(1).standard_normal((T, 4)),
        dims=("time", "station"),
        coords={"time": X.time},
    )
    both = xr.Dataset({"sst": X, "gauge": stations})
    ws = xr.Dataset({"sst": coslat(X), "gauge": xr.DataArray([1.0, 2.0, 0.5, 1.0], dims="station")})
    pca = ddr.PCA(K).fit(both, sample_dims="time", feature_weights=ws)
    # the variables sit in the order of their names: gauge, then sst
    ref_w = np.concatenate([[1.0, 2.0, 0.5, 1.0], reference(X, coslat(X))["w"]])
    np.testing.assert_array_equal(pca.feature_weights_, ref_w)
    flat = np.hstack([stations.values, X.values.reshape(T, -1)[:, reference(X, coslat(X))["keep"]]])
    Xw = (flat - flat.mean(axis=0)) * ref_w
    _, s, Vt = np.linalg.svd(Xw, full_matrices=False)
    np.testing.assert_allclose(pca.explained_variance_, s[:K] ** 2 / (T - 1), rtol=1e-10)
    np.testing.assert_allclose(_sign_align(Vt[:K], pca.components_, 0), pca.components_, atol=1e-10)
    # numpy: one weight per grid point of each variable, masked points included
    every = np.concatenate(
        [[1.0, 2.0, 0.5, 1.0], np.broadcast_to(coslat(X).values[:, None], (NLAT, NLON)).ravel()]
    )
    again = ddr.PCA(K).fit(both, sample_dims="time", feature_weights=every)
    np.testing.assert_array_equal(again.feature_weights_, pca.feature_weights_)
    maps = pca.as_xarray("components_", weighted=False)
    assert set(maps.data_vars) == {"sst", "gauge"}
    assert "unweighted" in maps["gauge"].attrs["long_name"]
    # a DataArray on (lat,) applies to every variable with a lat: the gauges have none
    with pytest.raises(ValueError, match="not feature dims"):
        ddr.PCA(K).fit(
            both, sample_dims="time", feature_weights=xr.DataArray(np.ones(4), dims="station")
        )
    with pytest.raises(ValueError, match="without the variable 'gauge'"):
        ddr.PCA(K).fit(both, sample_dims="time", feature_weights=ws[["sst"]])


def test_probabilistic_model_is_that_of_the_weighted_data():
    from sklearn.decomposition import PCA as SkPCA

    X = grid()
    w = coslat(X)
    ref = reference(X, w)
    flat = X.values.reshape(T, -1)[:, ref["keep"]]
    pca = ddr.PCA(K).fit(X, sample_dims="time", feature_weights=w)
    sk = SkPCA(K).fit(flat * ref["w"])
    np.testing.assert_allclose(
        pca.score_samples(X).values, sk.score_samples(flat * ref["w"]), rtol=1e-9
    )
    np.testing.assert_allclose(pca.get_covariance(), sk.get_covariance(), atol=1e-10)
    # rotating a fitted weighted PCA keeps its weights and its weighted scores
    rot = ddr.RotatedPCA.from_pca(pca)
    np.testing.assert_array_equal(rot.feature_weights_, pca.feature_weights_)
    fitted = ddr.RotatedPCA(K).fit(X, sample_dims="time", feature_weights=w)
    np.testing.assert_allclose(rot.transform(X).values, fitted.transform(X).values, atol=1e-9)


def test_pipeline_eof_of_a_grid_with_area_weights(tmp_path, monkeypatch):
    """A grid input (``sample_dims:``) and its weights on (lat,): the maps written are the
    direct fit's, in the weighted space."""
    from ddr.pipeline import plan_pipeline, run_plan

    X = grid()
    xr.Dataset({"sst": X, "w": coslat(X).rename("w")}).to_zarr(
        tmp_path / "g.zarr", consolidated=False
    )
    (tmp_path / "eof.yaml").write_text(
        """
ddr: 1
name: weighted-eof
inputs:
  T: {path: g.zarr, array: sst, sample_dims: [time]}
  area: {path: g.zarr, array: w}
steps:
  eof: {op: PCA.fit, inputs: {X: T, feature_weights: area}, with: {n_components: 3}}
outputs:
  - {kind: zarr, from: {components: eof.components_}, path: eofs.zarr}
"""
    )
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        run_plan(plan_pipeline(tmp_path / "eof.yaml", []))
    direct = ddr.PCA(3).fit(X, sample_dims="time", feature_weights=coslat(X))
    with xr.open_zarr(tmp_path / "eofs.zarr", consolidated=False) as ds:
        np.testing.assert_allclose(
            ds["components"].values, direct.as_xarray("components_").values, atol=1e-12
        )


@pytest.mark.parametrize("algorithm", ["randomized", "arpack"])
def test_truncated_svd_weights_sparse_rows(algorithm):
    import scipy.sparse

    X = scipy.sparse.random(200, 30, density=0.2, format="csr", random_state=4) * 5
    w = np.random.default_rng(4).uniform(0.0, 2.0, 30)
    w[3] = 0.0
    svd = ddr.TruncatedSVD(5, algorithm=algorithm, n_iter=10, random_state=0).fit(
        X, feature_weights=w
    )
    _, s, _ = np.linalg.svd(X.toarray() * w, full_matrices=False)
    np.testing.assert_allclose(svd.singular_values_, s[:5], rtol=1e-8)
    np.testing.assert_allclose(svd.transform(X), (X.toarray() * w) @ svd.components_.T, atol=1e-10)
    back = svd.inverse_transform(svd.transform(X))
    assert np.isnan(back[:, 3]).all() and np.isfinite(np.delete(back, 3, axis=1)).all()
