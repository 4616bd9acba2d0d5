"""ddr.io: opening inputs in every supported form, and outputs that never look complete early."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

from ddr.io import open_input, output_status, read_attrs, write_zarr
from ddr.io.outputs import FINGERPRINT_ATTR, STATUS_ATTR


@pytest.fixture
def arr(rng):
    return rng.standard_normal((100, 4)).astype(np.float32)


def test_open_zarr_v3_array_and_group(tmp_path, arr):
    z = zarr.create_array(
        str(tmp_path / "a.zarr"),
        shape=arr.shape,
        chunks=(30, 4),
        dtype=arr.dtype,
        dimension_names=("time", "band"),
    )
    z[:] = arr
    x = open_input(tmp_path / "a.zarr")
    assert x.dims == ("time", "band") and x.chunks == ((30, 30, 30, 10), (4,))
    np.testing.assert_array_equal(x.values, arr)

    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("X", data=arr, chunks=(50, 4))  # no dim names: defaults
    g.create_group("sub").create_array("Y", data=arr[:, :2], chunks=(10, 2))
    x = open_input(tmp_path / "g.zarr", "X")
    assert x.dims == ("sample", "feature") and x.chunks[0] == (50, 50)
    assert open_input(tmp_path / "g.zarr", "sub/Y").shape == (100, 2)
    rechunked = open_input(tmp_path / "g.zarr", "X", chunks={"sample": 25})
    assert rechunked.chunks[0] == (25, 25, 25, 25)


def test_open_zarr_v2_and_xarray_dataset_with_coords(tmp_path, arr):
    g = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    g.create_array("X", data=arr, chunks=(40, 4))
    x = open_input(tmp_path / "v2.zarr", "X")
    np.testing.assert_array_equal(x.values, arr)

    ds = xr.Dataset(
        {"X": (("time", "band"), arr)},
        coords={"time": np.arange(100) * 10, "band": np.array(["a", "b", "c", "d"], dtype=object)},
    )
    ds.to_zarr(tmp_path / "ds.zarr", zarr_format=3, consolidated=False)
    x = open_input(tmp_path / "ds.zarr", "X")
    assert x.dims == ("time", "band")
    np.testing.assert_array_equal(x["time"].values, np.arange(100) * 10)
    assert list(x["band"].values) == ["a", "b", "c", "d"]
    ds.to_zarr(tmp_path / "ds2.zarr", zarr_format=2)
    assert open_input(tmp_path / "ds2.zarr", "X").dims == ("time", "band")


def test_open_netcdf(tmp_path, arr):
    ds = xr.Dataset({"X": (("sample", "feature"), arr), "y": (("sample",), np.arange(100))})
    ds.to_netcdf(tmp_path / "d.nc")
    x = open_input(tmp_path / "d.nc", "X")
    np.testing.assert_array_equal(x.values, arr)
    with pytest.raises(
        ValueError,
        match=r"holds several variables; name one with name=\.\.\. "
        r"\(variables: \['X', 'y'\]\)",
    ):
        open_input(tmp_path / "d.nc")
    with pytest.raises(KeyError, match="no variable 'Z'"):
        open_input(tmp_path / "d.nc", "Z")


def test_open_errors(tmp_path, arr):
    with pytest.raises(FileNotFoundError, match="no Zarr store or netCDF file at"):
        open_input(tmp_path / "missing.zarr")
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("X", data=arr)
    g.create_array("y", data=np.arange(100))
    with pytest.raises(
        ValueError,
        match=r"is a Zarr group, not an array; name one of its arrays "
        r"with name=\.\.\. \(arrays: \['X', 'y'\]\)",
    ):
        open_input(tmp_path / "g.zarr")
    with pytest.raises(KeyError, match="no array 'Z' in the Zarr group"):
        open_input(tmp_path / "g.zarr", "Z")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="is neither a Zarr store"):
        open_input(tmp_path / "plain")
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=(3,), dtype="i4")
    assert z.shape == (3,)
    with pytest.raises(ValueError, match="is a Zarr array; name='X' is only for groups"):
        open_input(tmp_path / "a.zarr", "X")


def test_write_marks_complete_last_and_roundtrips(tmp_path, arr):
    data = xr.DataArray(
        da.from_array(arr, chunks=(30, 4)),
        dims=("sample", "feature"),
        coords={"sample": np.arange(100)},
        name="scores",
    )
    write_zarr(data, tmp_path / "out.zarr", fingerprint="abc", provenance={"step": "pca"})
    assert output_status(tmp_path / "out.zarr") == "complete"
    attrs = read_attrs(tmp_path / "out.zarr")
    assert attrs[FINGERPRINT_ATTR] == "abc" and attrs["ddr:provenance"] == {"step": "pca"}
    assert "history" in attrs
    back = open_input(tmp_path / "out.zarr", "scores", protect=False)
    np.testing.assert_array_equal(back.values, arr)
    np.testing.assert_array_equal(back["sample"].values, np.arange(100))
    # irregular dask chunks are made regular so each maps onto one Zarr chunk
    irregular = da.from_array(arr, chunks=((10, 50, 40), (4,)))
    write_zarr(irregular, tmp_path / "irr.zarr")
    np.testing.assert_array_equal(
        open_input(tmp_path / "irr.zarr", "data", protect=False).values, arr
    )


def test_mark_complete_writes_the_attributes_and_the_marker_in_one_put(tmp_path):
    """zarr's ``attrs.update`` writes the metadata once per key (a PUT each on an object
    store, the marker alone in the last); ddr writes them together, then consolidates."""
    import json

    from zarr.storage import LocalStore

    from ddr.io.outputs import mark_complete

    written: list[dict] = []

    class Recording(LocalStore):
        async def set(self, key, value):
            if key == "zarr.json":
                written.append(json.loads(value.to_bytes()).get("attributes", {}))
            return await super().set(key, value)

    group = zarr.open_group(Recording(str(tmp_path / "g.zarr")), mode="w", zarr_format=3)
    written.clear()
    mark_complete(group, {"a": 1, "b": [2], "c": "three"})
    assert len(written) == 2, written  # the attributes with the marker, then consolidated
    assert written[0] == {"a": 1, "b": [2], "c": "three", STATUS_ATTR: "complete"}
    assert output_status(tmp_path / "g.zarr") == "complete"


def _explode(block, block_info=None):
    if block_info[None]["chunk-location"][0] == 2:
        raise RuntimeError("worker died")
    return block


def test_crash_leaves_incomplete_then_if_exists(tmp_path, arr):
    out = tmp_path / "out.zarr"
    bad = da.from_array(arr, chunks=(25, 4)).map_blocks(_explode, dtype=arr.dtype)
    with pytest.raises(RuntimeError, match="worker died"):
        write_zarr(bad, out)
    assert output_status(out) == "incomplete"
    assert read_attrs(out)[STATUS_ATTR] == "incomplete"
    with pytest.raises(FileExistsError, match="exists but is INCOMPLETE"):
        write_zarr(arr, out)
    write_zarr(arr, out, if_exists="skip-if-complete", fingerprint="f1")  # rewrites it
    assert output_status(out) == "complete"
    with pytest.raises(FileExistsError, match="already exists and is complete"):
        write_zarr(arr, out)
    pending = write_zarr(arr * 0, out, if_exists="skip-if-complete", fingerprint="f1")
    assert pending.skipped
    np.testing.assert_array_equal(open_input(out, "data", protect=False).values, arr)
    write_zarr(arr * 0, out, if_exists="skip-if-complete", fingerprint="f2")  # changed: rewrite
    assert float(abs(open_input(out, "data", protect=False)).max()) == 0.0
    write_zarr(arr, out, if_exists="overwrite")
    np.testing.assert_array_equal(open_input(out, "data", protect=False).values, arr)


def test_deferred_outputs_finalize_after_compute(tmp_path, arr):
    import dask

    a = write_zarr(da.from_array(arr, chunks=50), tmp_path / "a.zarr", compute=False)
    b = write_zarr(da.from_array(arr, chunks=50) * 2, tmp_path / "b.zarr", compute=False)
    assert output_status(tmp_path / "a.zarr") == "incomplete"
    dask.compute(a.delayed, b.delayed)
    a.finalize()
    b.finalize()
    assert output_status(tmp_path / "b.zarr") == "complete"


def test_refuses_to_write_into_an_input(tmp_path, arr):
    g = zarr.open_group(str(tmp_path / "in.zarr"), mode="w")
    g.create_array("X", data=arr)
    x = open_input(tmp_path / "in.zarr", "X")
    with pytest.raises(
        ValueError, match=r"refusing to write the output .* it would overwrite the input"
    ):
        write_zarr(x, tmp_path / "in.zarr", if_exists="overwrite")
    with pytest.raises(ValueError, match="refusing to write the output"):
        write_zarr(x, tmp_path / "in.zarr" / "inside")
    other = tmp_path / "elsewhere.zarr"
    with pytest.raises(ValueError, match="refusing to write the output"):
        write_zarr(arr, other, inputs=[other])
    (tmp_path / "notes.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="exists and is not a ddr output"):
        write_zarr(arr, tmp_path / "notes.txt", if_exists="overwrite")
    assert (tmp_path / "notes.txt").read_text() == "precious"
    with pytest.raises(ValueError, match="if_exists must be one of"):
        write_zarr(arr, tmp_path / "x.zarr", if_exists="replace")


def _consolidated(path) -> dict | None:
    import json

    return json.loads((path / "zarr.json").read_text()).get("consolidated_metadata")


def test_outputs_open_with_consolidated_metadata_only_once_complete(tmp_path, arr):
    import warnings

    import dask

    from ddr.io.models import save_model

    out = tmp_path / "out.zarr"
    data = xr.DataArray(da.from_array(arr, chunks=(25, 4)), dims=("sample", "feature"))
    pending = write_zarr(data, out, name="x", compute=False)
    assert _consolidated(out) is None  # being written: nothing says it is whole
    dask.compute(pending.delayed)
    assert _consolidated(out) is None and output_status(out) == "incomplete"
    pending.finalize()
    meta = _consolidated(out)
    assert set(meta["metadata"]) == {"x"} and output_status(out) == "complete"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "failed to open with consolidated metadata"
        with xr.open_zarr(out) as ds:
            np.testing.assert_array_equal(ds["x"].values, arr)
            assert ds.attrs[STATUS_ATTR] == "complete"
    # a crash leaves none, and a rewrite first removes the old one
    bad = da.from_array(arr, chunks=(25, 4)).map_blocks(_explode, dtype=arr.dtype)
    with pytest.raises(RuntimeError, match="worker died"):
        write_zarr(bad, out, if_exists="overwrite")
    assert _consolidated(out) is None and output_status(out) == "incomplete"
    # saved models too
    from ddr.preprocessing.scaler import StandardScaler

    save_model(StandardScaler().fit(arr), tmp_path / "m.zarr")
    assert _consolidated(tmp_path / "m.zarr") is not None
    assert output_status(tmp_path / "m.zarr") == "complete"
