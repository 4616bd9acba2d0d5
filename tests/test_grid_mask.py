"""A grid's mask is read once (issue 32): a mask already known (``SampleDims(dims,
mask=...)``, what a pipeline hands every fit on its grid input after reading the first sample
while planning, and what a search hands its folds) is taken as it is, reading no sample,
and checked block by block in the fit's own pass; ``transform`` after ``fit`` reads no sample
to find a mask (the fitted layout has it). Reads counted on a Zarr store
(:class:`ddr.pipeline._counting.CountingStore`) and on counting dask arrays.
"""

from __future__ import annotations

from pathlib import Path

import dask
import numpy as np
import pytest
import xarray as xr

import ddr
from ddr.pipeline._counting import CountingStore, read_counts
from ddr.stats._grid import SampleDims, grid_rows
from ddr.testing import counting_dask_array

T, LAT, LON = 80, 3, 4
MASKED = [(0, 0), (1, 1), (2, 3)]


def field(seed: int = 0) -> tuple[xr.DataArray, np.ndarray, np.ndarray]:
    """(time, lat, lon), NaN at three points at every time step; the stacked kept columns
    and the mask (lat x lon, True where masked)."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((LAT, LON), dtype=bool)
    for i, j in MASKED:
        mask[i, j] = True
    kept = int((~mask).sum())
    mix = rng.standard_normal((kept, kept)) * 0.3 + np.diag(np.linspace(3, 1, kept))
    values = rng.standard_normal((T, kept)) @ mix + 15.0
    full = np.full((T, LAT * LON), np.nan)
    full[:, ~mask.ravel()] = values
    X = xr.DataArray(
        full.reshape(T, LAT, LON),
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(T), "lat": [-10.0, 0.0, 10.0], "lon": [0.0, 5.0, 10.0, 15.0]},
        name="sst",
    )
    return X, values, mask


def known(mask: np.ndarray, X: xr.DataArray) -> xr.DataArray:
    return xr.DataArray(mask, dims=("lat", "lon"), coords={"lat": X.lat, "lon": X.lon})


def stored_bytes(path: Path) -> int:
    """Bytes of the chunk files of the Zarr array at ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.name != "zarr.json")


def passes_of(path: Path, fn):
    """``fn()`` under the synchronous scheduler, and what it read of the Zarr array at
    ``path`` (opened through a CountingStore at its group) in passes over its chunks."""
    key = f"{path.parent}::{path.name}"
    before = read_counts().get(key, 0)
    with dask.config.set(scheduler="synchronous"):
        out = fn()
    return out, (read_counts().get(key, 0) - before) / stored_bytes(path)


@pytest.fixture
def stored(tmp_path):
    X, values, mask = field()
    X.to_dataset().chunk({"time": 20}).to_zarr(tmp_path / "g.zarr", consolidated=False)
    store = CountingStore(str(tmp_path / "g.zarr"), read_only=True)
    opened = xr.open_zarr(store, consolidated=False)
    return opened["sst"], tmp_path / "g.zarr" / "sst", values, mask


# ------------------------------------------------------------------------ fit, transform
def test_transform_after_fit_reads_no_sample_for_the_mask(stored):
    """fit reads every row once and the chunk of the first sample (its mask); transform
    builds lazily (nothing read) and computes in exactly one pass: the fitted layout has
    the mask, checked inside the task that stacks each block."""
    X, path, values, _ = stored
    est, read = passes_of(path, lambda: ddr.PCA(n_components=2).fit(X, sample_dims="time"))
    first = sum(f.stat().st_size for f in (path / "c" / "0").rglob("*") if f.is_file())
    assert read == pytest.approx(1 + first / stored_bytes(path), abs=1e-12)  # the first chunk
    out, read = passes_of(path, lambda: est.transform(X))
    assert read == 0
    scores, read = passes_of(path, lambda: out.compute())
    assert read == pytest.approx(1.0, abs=1e-12)
    ref = ddr.PCA(n_components=2).fit(values)
    np.testing.assert_allclose(scores.values, ref.transform(values), rtol=1e-10, atol=1e-10)


def test_a_known_mask_reads_no_sample(stored):
    """Given the mask, the fit reads every row once: no first-sample read, the same model."""
    X, path, values, mask = stored
    dims = SampleDims(("time",), mask=known(mask, X))
    est, read = passes_of(path, lambda: ddr.PCA(n_components=2).fit(X, sample_dim=dims))
    assert read == pytest.approx(1.0, abs=1e-12)
    ref = ddr.PCA(n_components=2).fit(values)
    np.testing.assert_allclose(est.components_, ref.components_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.isnan(est.as_xarray("components_").values[0]), mask)
    moments, read = passes_of(
        path, lambda: ddr.stats.compute([ddr.stats.Moments.spec()], X, sample_dim=dims)
    )
    assert read == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(moments[0].mean, values.mean(axis=0), rtol=1e-12)


def test_a_known_mask_is_the_mask_in_memory_and_on_dask():
    X, values, mask = field()
    for data in (X, X.chunk({"time": 7})):
        dims = SampleDims(("time",), mask=known(mask, X).transpose("lon", "lat"))
        g = grid_rows(data, dims)
        np.testing.assert_array_equal(np.asarray(g.data), values)
        np.testing.assert_array_equal(g.layout.mask().values, mask)
    arr, counter = counting_dask_array(X.values, chunks=(16, -1, -1))
    with dask.config.set(scheduler="synchronous"):
        est = ddr.GaussianNB().fit(
            X.copy(data=arr), np.arange(T) % 2, sample_dim=SampleDims(("time",), known(mask, X))
        )
    assert counter.passes == 1
    np.testing.assert_allclose(est.theta_[0], values[::2].mean(0), rtol=1e-12)


def test_a_layout_gives_its_mask_back():
    X, _, mask = field()
    layout = ddr.PCA(n_components=1).fit(X, sample_dims="time").feature_layout_
    m = layout.mask()
    assert m.dims == ("lat", "lon") and m.dtype == bool
    np.testing.assert_array_equal(m.values, mask)
    xr.testing.assert_equal(m.lat, X.lat)
    unmasked = ddr.PCA(n_components=1).fit(X.fillna(0.0), sample_dims="time").feature_layout_
    assert not unmasked.mask().values.any()


# ------------------------------------------------------------------ a wrong known mask
def test_a_value_where_the_known_mask_masks_is_refused_in_the_pass():
    """Rows with a value at a masked point (the mask changed: rows appended to a grid with
    another mask) are refused by the task that stacks them, naming the point and time."""
    X, _, mask = field()
    later = X.copy()
    later[50, 0, 0] = 1.0
    dims = SampleDims(("time",), mask=known(mask, X))
    with pytest.raises(
        ValueError,
        match=r"the feature at lat=-10.0, lon=0.0 is masked \(NaN at every sample, as the grid's "
        r"mask found before this fit says.*has a value at sample 50 \(time=50\)\. A grid's mask "
        r"must be the same at every sample",
    ):
        ddr.PCA(n_components=2).fit(later.chunk({"time": 20}), sample_dim=dims)
    hole = X.copy()
    hole[60, 0, 1] = np.nan  # a kept point NaN at one time step
    with pytest.raises(ValueError, match=r"lat=-10.0, lon=5.0 is NaN at some samples but not"):
        ddr.PCA(n_components=2).fit(hole.chunk({"time": 20}), sample_dim=dims)


@pytest.mark.parametrize(
    ("mask", "error", "message"),
    [
        (
            xr.DataArray(np.zeros(LAT, dtype=bool), dims=("lat",)),
            ValueError,
            r"X: the mask must be a boolean DataArray on its feature dims \('lat', 'lon'\); "
            r"got dims \('lat',\)",
        ),
        (
            np.zeros((LAT, LON), dtype=bool),
            ValueError,
            r"the mask must be a boolean DataArray on its feature dims .*; got ndarray",
        ),
        (
            xr.DataArray(np.zeros((LAT, LON + 1), dtype=bool), dims=("lat", "lon")),
            ValueError,
            r"X: the mask has sizes \{'lat': 3, 'lon': 5\}; its feature dims have "
            r"\{'lat': 3, 'lon': 4\}",
        ),
        (
            xr.DataArray(np.zeros((LAT, LON)), dims=("lat", "lon")),
            TypeError,
            r"X: the mask must be boolean; got dtype float64",
        ),
        (
            xr.DataArray(np.ones((LAT, LON), dtype=bool), dims=("lat", "lon")),
            ValueError,
            r"X: the mask masks every feature",
        ),
        (
            xr.DataArray(
                np.zeros((LAT, LON), dtype=bool), dims=("lat", "lon"), coords={"lat": [1, 2, 3]}
            ),
            ValueError,
            r"X: the mask's coordinate 'lat' differs from X's",
        ),
    ],
)
def test_a_bad_known_mask_is_refused(mask, error, message):
    X, _, _ = field()
    with pytest.raises(error, match=message):
        grid_rows(X.chunk({"time": 20}), SampleDims(("time",), mask=mask))


def test_a_known_mask_on_integers_that_masks_is_refused():
    X, _, mask = field()
    ints = X.fillna(0).astype(np.int64)
    with pytest.raises(
        ValueError, match=r"X has dtype int64, which holds no NaN, but the mask masks features "
        r"\(the first at lat=-10.0, lon=0.0\)"
    ):  # fmt: skip
        grid_rows(ints, SampleDims(("time",), mask=known(mask, X)))
    none = known(np.zeros_like(mask), X)
    g = grid_rows(ints, SampleDims(("time",), mask=none))
    assert g.layout.kept is None and g.data.shape == (T, LAT * LON)


def test_sample_dims_with_a_mask_are_the_dims():
    """Equality, hashing and tokens are the dims' alone; a copy keeps the mask."""
    import copy
    import pickle

    _, _, mask = field()
    dims = SampleDims(("time",), mask=xr.DataArray(mask, dims=("lat", "lon")))
    assert dims == ("time",) and hash(dims) == hash(("time",))
    assert dask.base.tokenize(dims) == dask.base.tokenize(SampleDims(("time",)))
    for again in (pickle.loads(pickle.dumps(dims)), copy.deepcopy(dims)):
        assert isinstance(again, SampleDims) and again == dims
        np.testing.assert_array_equal(again.mask.values, mask)
    assert SampleDims.of("time", ("time", "lat")).mask is None
