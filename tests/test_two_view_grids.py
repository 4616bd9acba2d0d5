"""CCA and PLSSVD on two grids (issue 32, item 5): Y is read as X is (its own feature dims,
coordinates and mask, on X's sample dims), kept at fit, and its maps come back on its grid
(``as_xarray("y_weights_")``, NaN at Y's mask); ``transform(X, Y)`` reads Y on that grid and
gives Y's scores on the sample dims. Checked against numpy on the stacked masked arrays and
against xeofs's ``CCA`` (its patterns are ``cov(Y, variate)``: ``Syy @ y_weights_``, with its
variates of unit population variance).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import xarray as xr
import xeofs as xe

import ddr
from ddr.pipeline import plan_pipeline, run_plan

pytestmark = pytest.mark.filterwarnings(
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning"
)

N = 150
X_KEPT = [0, 1, 2, 4, 5, 7]  # of (lat 2 x lon 4): two land points
Y_KEPT = [0, 1, 2, 3, 5, 6, 7, 8]  # of (south 3 x east 3): one


def fields(n: int = N, seed: int = 0, dtype=np.float64) -> tuple[xr.DataArray, xr.DataArray]:
    """X on (lat, lon) in K and Y on (south, east) in hPa, coupled through three time
    series, each with its own mask (NaN at every time)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3)) * [3.0, 2.0, 1.0]
    x = z @ rng.standard_normal((3, 6)) + rng.standard_normal((n, 6)) + 280.0
    y = z @ rng.standard_normal((3, 8)) + rng.standard_normal((n, 8)) + 1000.0
    xf, yf = np.full((n, 8), np.nan), np.full((n, 9), np.nan)
    xf[:, X_KEPT], yf[:, Y_KEPT] = x, y
    time = {"time": np.arange(n)}
    X = xr.DataArray(
        xf.reshape(n, 2, 4).astype(dtype),
        dims=("time", "lat", "lon"),
        coords={**time, "lat": [-5.0, 5.0], "lon": [0.0, 10.0, 20.0, 30.0]},
        attrs={"units": "K"},
    )
    Y = xr.DataArray(
        yf.reshape(n, 3, 3).astype(dtype),
        dims=("time", "south", "east"),
        coords={**time, "south": [0, 1, 2], "east": [5, 6, 7]},
        attrs={"units": "hPa"},
    )
    return X, Y


def stacked(F: xr.DataArray) -> np.ndarray:
    """The grid as (time, kept points) in float64: the masked array stacked."""
    flat = F.values.reshape(F.sizes["time"], -1).astype(np.float64)
    return flat[:, ~np.isnan(flat[0])]


def numpy_cca(x: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The closed form: ``Kx Sxy Ky = P s Q^T``, ``wx = Kx P``, ``wy = Ky Q`` (ddof=1), the
    largest |wx| of each pair positive."""
    n = x.shape[0]
    xc, yc = x - x.mean(0), y - y.mean(0)

    def inv_sqrt(S):
        lam, U = np.linalg.eigh(S)
        return (U / np.sqrt(lam)) @ U.T

    Kx, Ky = inv_sqrt(xc.T @ xc / (n - 1)), inv_sqrt(yc.T @ yc / (n - 1))
    P, _, Qt = np.linalg.svd(Kx @ (xc.T @ yc / (n - 1)) @ Ky)
    wx, wy = Kx @ P[:, :k], Ky @ Qt[:k].T
    signs = np.sign(wx[np.argmax(np.abs(wx), axis=0), np.arange(k)])
    return wx * signs, wy * signs


def on_grid(F: xr.DataArray, values: np.ndarray) -> np.ndarray:
    """``values`` (kept points x k) on F's grid (points x k), NaN at the mask."""
    flat = F.values[0].ravel()
    out = np.full((flat.size, values.shape[1]), np.nan)
    out[~np.isnan(flat)] = values
    return out


# ------------------------------------------------------------------------ CCA
@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-9), (np.float32, 2e-4)])
@pytest.mark.parametrize("chunked", [False, True])
def test_cca_maps_of_both_grids_equal_numpy(dtype, rtol, chunked):
    X, Y = fields(dtype=dtype)
    if chunked:  # the views in other row chunks: Y is aligned to X's
        X, Y = X.chunk({"time": 40}), Y.chunk({"time": 25})
    cca = ddr.CCA(n_components=3).fit(X, Y, sample_dims="time")
    wx, wy = numpy_cca(stacked(X), stacked(Y), 3)
    scale = np.abs(wy).max()
    np.testing.assert_allclose(cca.x_weights_, wx, rtol=rtol, atol=rtol * np.abs(wx).max())
    np.testing.assert_allclose(cca.y_weights_, wy, rtol=rtol, atol=rtol * scale)
    ymap = cca.as_xarray("y_weights_")
    assert ymap.dims == ("south", "east", "component")
    np.testing.assert_array_equal(ymap["east"].values, [5, 6, 7])
    flat = ymap.values.reshape(9, 3)
    assert np.isnan(flat[4]).all()  # Y's land point, not X's
    np.testing.assert_array_equal(flat[Y_KEPT], cca.y_weights_)
    assert ymap.attrs["ddr:attribute"] == "y_weights_" and ymap.attrs["units"] == "hPa-1"
    xmap = cca.as_xarray("x_weights_")
    assert xmap.dims == ("lat", "lon", "component") and xmap.attrs["units"] == "K-1"
    assert np.isnan(xmap.values.reshape(8, 3)[[3, 6]]).all()
    ymean = cca.as_xarray("y_mean_")
    assert ymean.dims == ("south", "east") and ymean.attrs["units"] == "hPa"
    ycov = cca.as_xarray("y_covariance_")
    assert ycov.dims == ("south", "east", "south_2", "east_2") and ycov.attrs["units"] == "hPa2"
    assert cca.as_xarray("correlations_").attrs["units"] == "1"
    # Y's scores on the sample dims, in Y's form
    xs, ys = cca.transform(X, Y)
    assert ys.dims == ("time", "component") and ys.attrs["units"] == "1"
    np.testing.assert_array_equal(ys["time"].values, np.arange(N))
    ref = (stacked(Y) - stacked(Y).mean(0)) @ wy
    np.testing.assert_allclose(ys.values, ref, rtol=rtol, atol=rtol * np.abs(ref).max())
    assert xs.dims == ("time", "component")


def test_cca_equals_xeofs_on_two_masked_grids():
    """xeofs 3's CCA without PCA preprocessing: its scores are ddr's canonical variates with
    unit population variance (ddof=0), and its patterns ``cov(view, variate)``, put on each
    grid with NaN at the mask."""
    X, Y = fields(seed=1)
    k = 3
    cca = ddr.CCA(n_components=k).fit(X, Y, sample_dims="time")
    ref = xe.cross.CCA(n_modes=k, use_pca=False, solver="full").fit(X, Y, dim="time")
    factor = np.sqrt(N / (N - 1))  # ddof=1 against ddof=0
    sx, sy = (s.transpose("time", "mode").values for s in ref.scores())
    xs, ys = cca.transform(X, Y)
    signs = np.sign(np.einsum("ij,ij->j", xs.values, sx))
    np.testing.assert_allclose(xs.values * signs * factor, sx, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ys.values * signs * factor, sy, rtol=0, atol=1e-9)
    px, py = (c.transpose(..., "mode") for c in ref.components())
    for F, pattern, weights, cov in (
        (X, px, cca.x_weights_, cca.x_covariance_),
        (Y, py, cca.y_weights_, cca.y_covariance_),
    ):
        expected = on_grid(F, cov @ weights * signs / factor)
        got = pattern.values.reshape(-1, k)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
    corr = [np.corrcoef(sx[:, j], sy[:, j])[0, 1] for j in range(k)]
    np.testing.assert_allclose(cca.correlations_, corr, rtol=1e-10)


# ------------------------------------------------------------------------ Y's samples
def test_y_is_paired_with_x_by_coordinate_on_every_sample_dim():
    X, Y = fields()
    X4 = X.coarsen(time=10).construct(time=("year", "day"))
    Y4 = Y.coarsen(time=10).construct(time=("year", "day"))
    coords = {"year": np.arange(15) + 2000, "day": np.arange(10)}
    X4, Y4 = X4.assign_coords(coords), Y4.assign_coords(coords)
    ref = ddr.CCA(n_components=2).fit(X4, Y4, sample_dims=("year", "day"))
    # Y's days in another order and its dims transposed: aligned, the same model
    shuffled = Y4.isel(day=np.arange(10)[::-1]).transpose("east", "day", "south", "year")
    got = ddr.CCA(n_components=2).fit(X4, shuffled.chunk({"day": 5}), sample_dims=("year", "day"))
    ref_map = ref.as_xarray("y_weights_")
    got_map = got.as_xarray("y_weights_").transpose(*ref_map.dims)  # features east-major
    np.testing.assert_allclose(got_map.values, ref_map.values, rtol=1e-10)
    _, ys = got.transform(X4, shuffled)
    assert ys.dims == ("year", "day", "component")
    np.testing.assert_allclose(ys.values, ref.transform(X4, Y4)[1].values, rtol=1e-10)
    with pytest.raises(ValueError, match=r"^Y's 'day' coordinate does not match X's: 7 label"):
        ddr.CCA(n_components=2).fit(
            X4, Y4.assign_coords(day=np.arange(10) + 7), sample_dims=("year", "day")
        )


def test_transform_reads_y_on_its_fitted_grid():
    X, Y = fields()
    cca = ddr.CCA(n_components=2).fit(X, Y, sample_dims="time")
    other = Y.copy()
    other[:, 1, 1] = 1000.0  # Y's land point with values
    with pytest.raises(
        ValueError,
        match=r"^Y: the feature at south=1, east=6 is masked in the fitted model .* Y must have "
        r"the mask the model was fitted with$",
    ):
        cca.transform(X, other)
    with pytest.raises(ValueError, match=r"^Y's feature coordinate 'east' differs from the one"):
        cca.transform(X, Y.assign_coords(east=[5, 6, 8]))
    with pytest.raises(ValueError, match=r"^Y's feature dims \{'south': 2, 'east': 3\} do not"):
        cca.transform(X, Y.isel(south=slice(2)))
    with pytest.raises(ValueError, match=r"^Y has feature dims \('south',\) .* fitted on feature"):
        cca.transform(X, Y.isel(east=0))
    # lazily: the check is in the blocks, as the scores are computed
    _, ys = cca.transform(X.chunk({"time": 50}), other.chunk({"time": 50}))
    with pytest.raises(ValueError, match=r"is masked in the fitted model"):
        ys.compute()


def test_bad_y_grids_are_refused_naming_y():
    X, Y = fields()
    with pytest.raises(
        ValueError, match=r"^sample_dims=\('time',\): 'time' is not a dimension of Y"
    ):
        ddr.CCA(n_components=2).fit(X, Y.rename(time="t"), sample_dims="time")
    holey = Y.copy()
    holey[7, 0, 0] = np.nan  # a missing value, not a mask
    with pytest.raises(
        ValueError,
        match=r"^Y: the feature at south=0, east=5 is NaN at some samples but not at every "
        r"sample \(NaN at sample 7 \(time=7\)\)",
    ):
        ddr.PLSSVD(n_components=2).fit(X, holey, sample_dims="time")
    with pytest.raises(ValueError, match=r"^CCA: X has 150 rows but Y has 100; the two views"):
        ddr.CCA(n_components=2).fit(
            X, Y.isel(time=slice(100)).drop_vars("time"), sample_dims="time"
        )


def test_a_dataset_as_y_gives_a_dataset_of_maps():
    X, Y = fields()
    Yds = xr.Dataset({"slp": Y, "gauge": (Y.isel(south=0) * 0.1).assign_attrs(units="m")})
    pls = ddr.PLSSVD(n_components=2).fit(X, Yds, sample_dims="time")
    maps = pls.as_xarray("y_weights_")
    assert set(maps.data_vars) == {"slp", "gauge"}
    assert maps["slp"].dims == ("south", "east", "component")
    assert maps["gauge"].dims == ("east", "component")
    assert (
        maps["slp"].attrs["units"] == "1" and pls.as_xarray("y_std_")["gauge"].attrs["units"] == "m"
    )
    ref = ddr.PLSSVD(n_components=2).fit(
        stacked(X), np.hstack([Yds["gauge"].values, stacked(Y)]), sample_dims=None
    )
    np.testing.assert_allclose(pls.y_weights_, ref.y_weights_, rtol=1e-10, atol=1e-12)


def test_a_saved_model_keeps_y_grid(tmp_path):
    X, Y = fields()
    cca = ddr.CCA(n_components=2).fit(X, Y, sample_dims="time")
    cca.save(tmp_path / "cca.zarr")
    loaded = ddr.load(tmp_path / "cca.zarr")
    xr.testing.assert_identical(loaded.as_xarray("y_weights_"), cca.as_xarray("y_weights_"))
    np.testing.assert_array_equal(loaded.transform(X, Y)[1].values, cca.transform(X, Y)[1].values)


def test_partial_fit_merges_batches_on_the_fitted_y_grid():
    X, Y = fields()
    whole = ddr.PLSSVD(n_components=2).fit(X, Y, sample_dims="time")
    parts = ddr.PLSSVD(n_components=2)
    for sl in (slice(0, 60), slice(60, None)):
        parts.partial_fit(X.isel(time=sl), Y.isel(time=sl), sample_dims="time")
    np.testing.assert_allclose(parts.y_weights_, whole.y_weights_, rtol=1e-10)
    xr.testing.assert_allclose(parts.as_xarray("y_weights_"), whole.as_xarray("y_weights_"))
    other = Y.isel(time=slice(0, 30)).copy()
    other[:, 1, 1] = 3.0
    with pytest.raises(ValueError, match=r"^Y: the feature at south=1, east=6 is masked"):
        parts.partial_fit(X.isel(time=slice(0, 30)), other, sample_dims="time")


def test_y_of_two_dims_keeps_its_feature_dim_and_coordinate():
    X, Y = fields()
    Y2 = Y.isel(south=0).rename(east="station")
    cca = ddr.CCA(n_components=2).fit(X.isel(lat=1, lon=[0, 1, 3]), Y2)
    ymap = cca.as_xarray("y_weights_")
    assert ymap.dims == ("station", "component")
    np.testing.assert_array_equal(ymap["station"].values, [5, 6, 7])
    assert cca.transform(X.isel(lat=1, lon=[0, 1, 3]), Y2)[1].dims == ("time", "component")


# ------------------------------------------------------------------------ pipelines
def test_a_pipeline_writes_y_maps_of_a_grid_input(tmp_path, monkeypatch):
    """Y a grid input (``sample_dims:``) of a CCA step: its maps written on its grid, its
    scores on the time axis, as the direct fit gives them."""
    monkeypatch.chdir(tmp_path)
    X, Y = fields()
    xr.Dataset({"t": X, "p": Y}).chunk({"time": 50}).to_zarr("f.zarr", consolidated=False)
    text = textwrap.dedent(
        """\
        ddr: 1
        name: two-grids
        inputs:
          X: {path: f.zarr, array: t, sample_dims: time}
          Y: {path: f.zarr, array: p, sample_dims: time}
        steps:
          cca: {op: CCA.fit, inputs: {X: X, y: Y}, with: {n_components: 2}}
          v: {op: CCA.transform, inputs: {model: cca, X: X, y: Y}}
        outputs:
          - {kind: zarr, from: {y_weights: cca.y_weights_, y_mean: cca.y_mean_}, path: y.zarr}
          - {kind: zarr, from: {x_weights: cca.x_weights_}, path: x.zarr}
          - {kind: zarr, from: {xs: v, ys: v.y_data}, path: v.zarr}
        """
    )
    (tmp_path / "p.yaml").write_text(text)
    plan = plan_pipeline("p.yaml", [])
    summary = run_plan(plan)
    data = xr.open_zarr("f.zarr", consolidated=False)
    est = ddr.CCA(n_components=2).fit(data["t"], data["p"], sample_dims="time")
    ymaps = xr.open_zarr("y.zarr", consolidated=False)
    assert ymaps["y_weights"].dims == ("south", "east", "component")
    np.testing.assert_allclose(
        ymaps["y_weights"].values, est.as_xarray("y_weights_").values, rtol=1e-10
    )
    assert ymaps["y_weights"].attrs["units"] == "hPa-1" and ymaps["y_mean"].attrs["units"] == "hPa"
    assert np.isnan(ymaps["y_weights"].values[1, 1]).all()
    xmaps = xr.open_zarr("x.zarr", consolidated=False)
    assert xmaps["x_weights"].dims == ("lat", "lon", "component")
    v = xr.open_zarr("v.zarr", consolidated=False)
    assert v["ys"].dims == ("time", "component") and v["ys"].attrs["units"] == "1"
    np.testing.assert_allclose(
        v["ys"].values, est.transform(data["t"], data["p"])[1].values, rtol=1e-9
    )
    # Y's mask was read while planning, as X's: each read once per pass (fit, scores)
    planned = {name: float(p) for name, p in plan.passes().items()}
    assert planned == {"X": 2.0, "Y": 2.0}
    assert summary.passes == pytest.approx(planned, abs=0.01)


def test_the_maps_plot_draws_y_weights_on_y_grid():
    from ddr.pipeline.outputs.plots import draw_maps

    X, Y = fields()
    cca = ddr.CCA(n_components=2).fit(X, Y.rename(south="level", east="site"), sample_dims="time")
    fig = draw_maps(cca, None, "y_weights_", 2)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert len(panels) == 2
    mesh = panels[0].collections[0]
    assert panels[0].get_xlabel() == "site" and panels[0].get_ylabel() == "level"
    blank = np.ma.getmaskarray(mesh.get_array()).reshape(3, 3)
    assert blank.tolist() == np.isnan(Y.values[0]).tolist()
    assert fig.axes[-1].get_ylabel() == "y_weights (hPa-1)"  # the colour bar: what it is in
    xfig = draw_maps(cca, None, "x_weights_", 2)
    assert [ax.get_xlabel() for ax in xfig.axes if ax.get_title()][:1] == ["lon"]


def test_a_grid_y_beside_a_plain_x_in_a_pipeline_takes_the_mask_read_while_planning(
    tmp_path, monkeypatch
):
    """X a 2-D input (time, feature), Y a grid input: Y's mask was read while planning, so
    neither the fit nor the transform reads Y's first sample again (each input read once a
    pass), and Y's maps are the direct fit's."""
    monkeypatch.chdir(tmp_path)
    X, Y = fields()
    flat = xr.DataArray(stacked(X), dims=("time", "feature"), coords={"time": X.time})
    xr.Dataset({"t": flat, "p": Y}).chunk({"time": 50}).to_zarr("f.zarr", consolidated=False)
    text = textwrap.dedent(
        """\
        ddr: 1
        name: plain-x-grid-y
        inputs:
          X: {path: f.zarr, array: t}
          Y: {path: f.zarr, array: p, sample_dims: time}
        steps:
          cca: {op: CCA.fit, inputs: {X: X, y: Y}, with: {n_components: 2}}
          v: {op: CCA.transform, inputs: {model: cca, X: X, y: Y}}
        outputs:
          - {kind: zarr, from: {y_weights: cca.y_weights_}, path: y.zarr}
          - {kind: zarr, from: {xs: v, ys: v.y_data}, path: v.zarr}
        """
    )
    (tmp_path / "p.yaml").write_text(text)
    plan = plan_pipeline("p.yaml", [])
    summary = run_plan(plan)
    data = xr.open_zarr("f.zarr", consolidated=False)
    est = ddr.CCA(n_components=2).fit(data["t"], data["p"])
    ymaps = xr.open_zarr("y.zarr", consolidated=False)
    assert ymaps["y_weights"].dims == ("south", "east", "component")
    np.testing.assert_allclose(
        ymaps["y_weights"].values, est.as_xarray("y_weights_").values, rtol=1e-10
    )
    v = xr.open_zarr("v.zarr", consolidated=False)
    np.testing.assert_allclose(
        v["ys"].values, est.transform(data["t"], data["p"])[1].values, rtol=1e-9
    )
    planned = {name: float(p) for name, p in plan.passes().items()}
    assert planned == {"X": 2.0, "Y": 2.0}
    assert summary.passes == pytest.approx(planned, abs=0.01)
