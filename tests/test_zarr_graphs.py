"""ddr.io.zarr_graphs: dask arrays opened the dask and xarray ways are read by ddr's reader when
that gives the same values bit for bit, and keep dask's graph otherwise."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import ddr.stats as st
from ddr.decomposition.pca import PCA
from ddr.io import CorruptChunkError, from_zarr, open_input
from ddr.io.zarr_graphs import with_ddr_reader, zarr_source
from ddr.naive_bayes.gaussian import GaussianNB
from ddr.pipeline._counting import CountingStore, count_key, read_counts, stored_bytes
from ddr.stats._input import as_rows

CHUNK = 20

pytestmark = [
    # zarr's note on consolidated metadata (xarray writes it) is not what is tested here
    pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning"),
    pytest.mark.filterwarnings("ignore:saving variable:UserWarning"),
]


def _ddr_read(x) -> bool:
    return x.name.startswith("ddr-from-zarr-")


@pytest.fixture
def stored(tmp_path, rng):
    """An xarray Dataset in Zarr: X (100 x 4, float32, on a large offset) and labels y, in
    chunks of 20 rows (every chunk written: random data has no chunk equal to the fill)."""
    X = (1e4 + rng.normal(size=(100, 4))).astype(np.float32)
    y = rng.integers(0, 3, size=100).astype(np.int64)
    ds = xr.Dataset({"X": (("sample", "feature"), X), "y": (("sample",), y)})
    path = str(tmp_path / "d.zarr")
    ds.to_zarr(path, encoding={"X": {"chunks": (CHUNK, 4)}, "y": {"chunks": (CHUNK,)}})
    return path, X, y


def _ways(path):
    return {
        "ddr.io.from_zarr": from_zarr(path, component="X"),
        "xr.open_zarr": xr.open_zarr(path)["X"],
        "xr.open_dataset": xr.open_dataset(path, engine="zarr", chunks={}, consolidated=False)["X"],
        "da.from_zarr": da.from_zarr(path, component="X"),
        "da.from_zarr(inline_array=True)": da.from_zarr(path, component="X", inline_array=True),
        "dtype-preserving astype": da.from_zarr(path, component="X").astype(np.float32),
    }


def test_every_way_of_opening_is_read_by_ddr_and_fits_the_same_bit_for_bit(stored, client):
    path, X, _ = stored
    fits = {}
    for way, x in _ways(path).items():
        data = as_rows(x).data
        assert _ddr_read(data), way
        np.testing.assert_array_equal(data.compute(), X)
        labels = da.from_zarr(path, component="y")
        pca = PCA(n_components=2, svd_solver="covariance_eigh").fit(x)
        nb = GaussianNB().fit(x, labels)
        moments = st.compute(st.Moments, x)
        fits[way] = (pca.components_, pca.explained_variance_, pca.mean_, nb.theta_, nb.var_)
        fits[way] += (moments.mean, moments.scatter)
    first, *others = fits.values()
    for way, got in zip(list(fits)[1:], others, strict=True):
        for a, b in zip(first, got, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=way)
    # and they are the right numbers (a float64 reference on the same rows)
    np.testing.assert_allclose(first[2], X.astype(np.float64).mean(axis=0), rtol=1e-6)


def test_one_pass_over_the_store_and_no_read_through_zarr_slicing(stored, monkeypatch):
    path = stored[0]
    key = count_key(path, "X")
    for way in ("xr.open_zarr", "da.from_zarr"):
        store = CountingStore(path, read_only=True)
        x = (
            xr.open_zarr(store)["X"]
            if way == "xr.open_zarr"
            else da.from_zarr(store, component="X")
        )
        before = read_counts().get(key, 0)
        with monkeypatch.context() as m, dask.config.set(scheduler="sync"):
            # ddr's reader: every chunk from its file; zarr's slicing would go through here
            m.setattr(zarr.Array, "__getitem__", None)
            PCA(n_components=2, svd_solver="covariance_eigh").fit(x)
        assert (read_counts()[key] - before) / stored_bytes(path, "X") == 1.0, way


def _cf_stored(tmp_path, rng, encoding):
    X = rng.normal(size=(60, 3)).astype(np.float32)
    ds = xr.Dataset({"X": (("sample", "feature"), X)})
    path = str(tmp_path / "cf.zarr")
    ds.to_zarr(path, encoding={"X": {"chunks": (CHUNK, 3), **encoding}})
    return path


@pytest.mark.parametrize(
    "encoding",
    [
        {"dtype": "int16", "scale_factor": 0.001, "_FillValue": -32768},
        {"dtype": "int16", "scale_factor": 0.001, "add_offset": 2.0},
        {"_FillValue": -9999.0},  # float data whose fill value is not NaN: masked
    ],
    ids=["scale_factor+_FillValue", "scale_factor+add_offset", "_FillValue"],
)
def test_cf_encoded_variables_are_decoded_by_xarray_exactly(tmp_path, rng, encoding):
    path = _cf_stored(tmp_path, rng, encoding)
    x = xr.open_zarr(path)["X"]
    data = as_rows(x).data
    assert not _ddr_read(data) and data.name == x.data.name  # xarray's graph, as it is
    decoded = x.values  # xarray's own decoding, in memory
    same = da.from_array(decoded, chunks=(CHUNK, -1))
    with dask.config.set(scheduler="sync"):
        ours = st.compute(st.Moments, x)
        ref = st.compute(st.Moments, same)
        np.testing.assert_array_equal(data.compute(), decoded)
    np.testing.assert_array_equal(ours.mean, ref.mean)
    np.testing.assert_array_equal(ours.scatter, ref.scatter)


def test_a_value_equal_to_the_fill_is_masked_as_xarray_masks_it(tmp_path, rng):
    path = _cf_stored(tmp_path, rng, {"_FillValue": -9999.0})
    z = zarr.open_array(path + "/X", mode="r+")
    z[5, 1] = -9999.0
    x = xr.open_zarr(path)["X"]
    data = as_rows(x).data
    assert not _ddr_read(data)
    got = data.compute(scheduler="sync")
    assert np.isnan(got[5, 1]) and np.isnan(got).sum() == 1  # masked, as xarray does
    assert not np.isnan(from_zarr(path + "/X").compute(scheduler="sync")[5, 1])  # raw: stored


def test_what_ddr_cannot_prove_equivalent_keeps_dasks_graph(stored, tmp_path, rng):
    path = stored[0]
    base = da.from_zarr(path, component="X")
    sharded = zarr.create_array(
        str(tmp_path / "s.zarr"), shape=(64, 4), chunks=(8, 4), shards=(32, 4), dtype="f4"
    )
    sharded[...] = rng.normal(size=(64, 4))
    cases = {
        "rechunked by dask": base.rechunk((40, 4)),
        "dask chunks other than the stored ones": da.from_zarr(path, component="X", chunks=50),
        "xarray chunks other than the stored ones": xr.open_zarr(path, chunks={"sample": 40})["X"],
        "arithmetic": base * 1,
        "another dtype": base.astype(np.float64),
        "a row selection": base[10:],
        "transposed twice": base.T.T,
        "sharded": da.from_zarr(sharded),
    }
    for case, x in cases.items():
        inner = x.data if isinstance(x, xr.DataArray) else x
        assert with_ddr_reader(inner) is inner, case
        data = as_rows(x).data
        assert data.name == inner.name, case
        np.testing.assert_array_equal(
            data.compute(scheduler="sync"), inner.compute(scheduler="sync"), err_msg=case
        )


def test_the_source_of_a_non_zarr_array_is_none(rng):
    assert zarr_source(da.from_array(rng.normal(size=(10, 2)), chunks=5)) is None
    assert zarr_source(da.ones((10, 2), chunks=5)) is None


def test_a_pipeline_input_opened_through_xarray_is_read_by_ddr(stored):
    # open_input opens the variable of an xarray Dataset with xr.open_zarr (coordinates, CF
    # decoding); the estimators the runner fits then read its chunks through ddr's reader
    path, X, _ = stored
    x = open_input(path, "X")
    assert not _ddr_read(x.data)
    data = as_rows(x).data
    assert _ddr_read(data)
    np.testing.assert_array_equal(data.compute(scheduler="sync"), X)


def test_a_corrupt_chunk_of_a_dask_input_names_the_array_and_the_chunk_key(stored):
    path = stored[0]
    chunk = f"{path}/X/c/1/0"
    with open(chunk, "r+b") as f:
        f.truncate(f.seek(0, 2) // 2)
    x = da.from_zarr(path, component="X")
    with pytest.raises(CorruptChunkError, match=r"^chunk c/1/0 of file://.*d\.zarr/X is corrupt"):
        PCA(n_components=2, svd_solver="covariance_eigh").fit(x)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_zarr_v2_and_other_dtypes_are_recognised_too(tmp_path, rng, dtype):
    X = (1e4 + 100 * rng.normal(size=(50, 3))).astype(dtype)
    ds = xr.Dataset({"X": (("sample", "feature"), X)})
    path = str(tmp_path / "v2.zarr")
    ds.to_zarr(path, zarr_format=2, encoding={"X": {"chunks": (CHUNK, 3)}})
    for way, x in _ways(path).items():
        if way == "dtype-preserving astype":
            x = da.from_zarr(path, component="X").astype(dtype)
        data = as_rows(x).data
        assert _ddr_read(data), way
        np.testing.assert_array_equal(data.compute(scheduler="sync"), X, err_msg=way)
