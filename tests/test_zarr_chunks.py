"""ddr.io.zarr_chunks: dask arrays reading stored Zarr chunks as decoded, against zarr's slicing."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import ddr.stats as st
from ddr.io import MissingChunksError, open_input
from ddr.io.zarr_chunks import StoredChunks, from_zarr
from ddr.pipeline._counting import CountingStore, count_key, read_counts, stored_bytes


def _stored(tmp_path, data, chunks, **kw) -> zarr.Array:
    z = zarr.create_array(
        str(tmp_path / "a.zarr"), shape=data.shape, chunks=chunks, dtype=data.dtype, **kw
    )
    z[...] = data
    return z


def _direct(x: da.Array) -> bool:
    return x.name.startswith("ddr-from-zarr-")


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", ">f8"])
def test_equal_to_zarr_slicing_with_edge_chunks(tmp_path, rng, zarr_format, dtype):
    data = (rng.normal(size=(103, 7)) * 100).astype(dtype)
    z = _stored(tmp_path, data, (20, 7), zarr_format=zarr_format)
    x = from_zarr(z)
    assert _direct(x)
    assert x.chunks == ((20, 20, 20, 20, 20, 3), (7,))
    with dask.config.set(scheduler="sync"):
        got = x.compute()
    np.testing.assert_array_equal(got, z[...])
    assert got.dtype == da.from_zarr(z).dtype


def test_chunks_split_along_both_axes(tmp_path, rng):
    data = rng.normal(size=(50, 9))
    z = _stored(tmp_path, data, (16, 4))
    x = from_zarr(z)
    assert _direct(x) and x.chunks == ((16, 16, 16, 2), (4, 4, 1))
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)


@pytest.mark.parametrize(
    ("zarr_format", "dtype", "fill"),
    [
        (3, "f8", np.nan),
        (3, "f8", 0.0),
        (3, "f8", -7.5),
        (3, "i4", 3),
        (2, "f8", None),
        (2, "i4", None),
    ],
)
def test_chunks_never_written_read_as_zarr_reads_them(tmp_path, zarr_format, dtype, fill):
    z = zarr.create_array(
        str(tmp_path / "a.zarr"),
        shape=(30, 2),
        chunks=(10, 2),
        dtype=dtype,
        fill_value=fill,
        zarr_format=zarr_format,
    )
    z[10:20] = 1
    got = from_zarr(z, missing_chunks="fill").compute(scheduler="sync")
    np.testing.assert_array_equal(got, z[...])
    if fill is not None:
        np.testing.assert_array_equal(got[:10], np.full((10, 2), fill, dtype=dtype))
    # by default a chunk that is not stored is an error when it is read, naming it
    with pytest.raises(MissingChunksError) as info:
        from_zarr(z).compute(scheduler="sync")
    keys = {"c/0/0", "c/2/0"} if zarr_format == 3 else {"0.0", "2.0"}
    assert len(info.value.missing) == 1 and info.value.missing[0] in keys, info.value.missing
    assert "chunks of " in str(info.value) and "are missing" in str(info.value)


def test_string_labels(tmp_path):
    labels = np.array(["setosa", "versicolor", "virginica", "", "a" * 40] * 9)
    z = zarr.create_array(str(tmp_path / "y.zarr"), shape=labels.shape, chunks=(10,), dtype=str)
    z[...] = labels
    x = from_zarr(z)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), labels)


def test_blocks_are_read_only_views_of_the_decoded_chunk(tmp_path, rng):
    z = _stored(tmp_path, rng.normal(size=(40, 3)), (20, 3))
    block = StoredChunks(z)[(slice(0, 20), slice(0, 3))]
    with pytest.raises(ValueError, match="read-only"):
        block[0, 0] = 1.0


def test_keys_other_than_one_whole_chunk_are_sliced_by_zarr(tmp_path, rng):
    data = rng.normal(size=(45, 3))
    src = StoredChunks(_stored(tmp_path, data, (20, 3)))
    for key in [
        (slice(5, 25), slice(0, 3)),
        (slice(0, 20), slice(0, 2)),
        (slice(0, 40), slice(0, 3)),
        (slice(0, 20, 2), slice(0, 3)),
        (slice(40, 45), slice(None)),
        (3, slice(0, 3)),
        (slice(0, 20),),
    ]:
        np.testing.assert_array_equal(src[key], data[key])


def test_other_dask_chunks_fall_back_to_dask_from_zarr(tmp_path, rng):
    data = rng.normal(size=(60, 4))
    z = _stored(tmp_path, data, (20, 4))
    x = from_zarr(z, chunks=(30, 4))
    assert not _direct(x) and x.chunks == ((30, 30), (4,))
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)
    # the stored chunks spelled another way keep the direct path
    assert _direct(from_zarr(z, chunks=((20, 20, 20), (4,))))


def test_sharded_arrays_fall_back_to_dask_from_zarr(tmp_path, rng):
    data = rng.normal(size=(64, 4))
    z = _stored(tmp_path, data, (8, 4), shards=(32, 4))
    x = from_zarr(z)
    assert not _direct(x)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)


def test_names_are_deterministic_and_differ_between_arrays(tmp_path, rng):
    a = _stored(tmp_path, rng.normal(size=(30, 2)), (10, 2))
    b = zarr.create_array(str(tmp_path / "b.zarr"), shape=(30, 2), chunks=(10, 2), dtype="f8")
    assert from_zarr(a).name == from_zarr(zarr.open_array(str(tmp_path / "a.zarr"))).name
    assert from_zarr(a).name != from_zarr(b).name


def test_on_the_cluster_statistics_read_each_chunk_once(tmp_path, rng, client):
    data = rng.normal(size=(2000, 5)) + 1e3
    _stored(tmp_path, data, (250, 5))
    store = CountingStore(str(tmp_path / "a.zarr"), read_only=True)
    x = from_zarr(zarr.open_array(store=store, mode="r"))
    assert _direct(x)
    got = st.compute([st.Moments, st.Moments.spec(diagonal=True)], x)
    ref = st.Moments.from_block(data)
    np.testing.assert_allclose(got[0].covariance(), ref.covariance(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(got[1].mean, data.mean(axis=0), rtol=1e-13)
    key = count_key(str(store.root), "")
    read = sum(c.get(key, 0) for c in client.run(read_counts).values())
    assert read == stored_bytes(tmp_path / "a.zarr", "")


def test_open_input_reads_stored_chunks_directly(tmp_path, rng):
    _stored(tmp_path, rng.normal(size=(30, 2)).astype("f4"), (10, 2))
    arr = open_input(tmp_path / "a.zarr", protect=False)
    assert _direct(arr.data)


def test_store_paths_and_components_like_dask(tmp_path, rng):
    data = rng.normal(size=(30, 2))
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("X", shape=data.shape, chunks=(10, 2), dtype="f8")[...] = data
    for x in (from_zarr(tmp_path / "g.zarr", component="X"), from_zarr(str(tmp_path / "g.zarr/X"))):
        assert _direct(x)
        np.testing.assert_array_equal(x.compute(scheduler="sync"), data)


def test_component_with_an_array_is_refused(tmp_path, rng):
    z = _stored(tmp_path, rng.normal(size=(10, 2)), (5, 2))
    with pytest.raises(ValueError, match="component: give it with a store path"):
        from_zarr(z, component="X")
