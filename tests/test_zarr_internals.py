"""ddr.io.zarr_internals: what ddr's reader takes from the installed zarr, and what it says
when that zarr lacks it. Runs on every zarr the CI installs (3.1 on Python 3.11, the newest
on Python 3.12): the direct path must be taken on each, never given up silently."""

from __future__ import annotations

import logging

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.buffer import default_buffer_prototype
from zarr.codecs import GzipCodec

from ddr.io import zarr_internals
from ddr.io.zarr_chunks import StoredChunks, from_zarr


@pytest.fixture(autouse=True)
def fresh_warnings():
    """Each test sees the once-per-process warnings afresh."""
    zarr_internals.warn_once.cache_clear()
    yield
    zarr_internals.warn_once.cache_clear()


def _stored(tmp_path, data, chunks, name="a.zarr", **kw) -> zarr.Array:
    z = zarr.create_array(
        str(tmp_path / name), shape=data.shape, chunks=chunks, dtype=data.dtype, **kw
    )
    z[...] = data
    return z


def _direct(x) -> bool:
    return x.name.startswith("ddr-from-zarr-")


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_the_installed_zarr_has_everything_the_reader_needs(tmp_path, rng, caplog, zarr_format):
    z = _stored(tmp_path, rng.normal(size=(25, 3)), (10, 3), zarr_format=zarr_format)
    assert zarr_internals.direct_unavailable(z) is None
    assert zarr_internals.pipeline_unavailable(z) is None
    with caplog.at_level(logging.DEBUG, logger="ddr"):
        x = from_zarr(z)
    assert _direct(x)
    assert _warnings(caplog) == []
    np.testing.assert_array_equal(x.compute(scheduler="sync"), z[...])


def test_arrays_read_by_dask_for_their_layout_are_no_reason_to_warn(tmp_path, rng, caplog):
    data = rng.normal(size=(64, 4))
    sharded = _stored(tmp_path, data, (8, 4), "s.zarr", shards=(32, 4))
    fortran = _stored(tmp_path, data, (8, 4), "f.zarr", zarr_format=2, order="F")
    with caplog.at_level(logging.DEBUG, logger="ddr"):
        xs = [from_zarr(sharded), from_zarr(fortran), from_zarr(tmp_path / "s.zarr", chunks=16)]
    assert not any(_direct(x) for x in xs)
    assert _warnings(caplog) == []


def _zarrs_own_chunk_spec(z: zarr.Array, coords: tuple[int, ...]):
    """The ArraySpec zarr itself reads the chunk at ``coords`` with: ``get_chunk_spec`` on
    the metadata up to zarr 3.1, ``zarr.core.array._get_chunk_spec`` from zarr 3.2."""
    import zarr.core.array as core

    inner, prototype = z.async_array, default_buffer_prototype()
    if hasattr(z.metadata, "get_chunk_spec"):
        return z.metadata.get_chunk_spec(coords, inner.config, prototype)
    if hasattr(core, "_get_chunk_spec"):
        return core._get_chunk_spec(z.metadata, inner._chunk_grid, coords, inner.config, prototype)
    pytest.fail(f"zarr {zarr.__version__} builds chunk specs some new way: update this test")


@pytest.mark.parametrize(
    ("zarr_format", "dtype", "fill"),
    [(3, "f4", 0.0), (3, "i2", -3), (3, "c16", 1 + 2j), (2, "f8", None), (2, "u1", 7)],
)
def test_chunk_specs_are_the_ones_zarr_builds(tmp_path, zarr_format, dtype, fill):
    z = zarr.create_array(
        str(tmp_path / "a.zarr"), shape=(25, 3), chunks=(10, 3), dtype=dtype,
        fill_value=fill, zarr_format=zarr_format,
    )  # fmt: skip
    ours = zarr_internals._chunk_spec(z)
    for coords in [(0, 0), (2, 0)]:  # the last chunk (an edge chunk) is decoded full size too
        theirs = _zarrs_own_chunk_spec(z, coords)
        for field in ("shape", "dtype", "config", "prototype"):
            assert getattr(ours, field) == getattr(theirs, field), field
        assert repr(ours.fill_value) == repr(theirs.fill_value)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_metadata_without_chunk_keys_is_named(tmp_path, rng, zarr_format):
    z = _stored(tmp_path, rng.normal(size=(5, 2)), (5, 2), zarr_format=zarr_format)
    with pytest.MonkeyPatch.context() as mp:  # zarr's own reads need it: only detection here
        mp.delattr(type(z.metadata), "encode_chunk_key")
        reason = zarr_internals.direct_unavailable(z)
    assert reason == f"ArrayV{zarr_format}Metadata has no encode_chunk_key"


@pytest.mark.parametrize(
    ("lack", "reason"),
    [
        (
            lambda mp: mp.setattr(zarr.Array, "store_path", property(lambda self: None)),
            "zarr.Array.store_path is not a StorePath",
        ),
        (lambda mp: mp.setattr(zarr_internals, "sync", None), "zarr.core.sync.sync is gone"),
    ],
)
def test_a_zarr_without_the_direct_path_warns_once_and_reads_through_dask(
    tmp_path, rng, caplog, monkeypatch, lack, reason
):
    data = rng.normal(size=(25, 3))
    z = _stored(tmp_path, data, (10, 3))
    lack(monkeypatch)
    assert zarr_internals.direct_unavailable(z) == reason
    with caplog.at_level(logging.WARNING, logger="ddr"):
        xs = [from_zarr(z), from_zarr(tmp_path / "a.zarr"), from_zarr(z, chunks=(10, 3))]
        blocks = StoredChunks(z)[(slice(0, 10), slice(0, 3))]  # zarr's slice, not ddr's read
    assert not any(_direct(x) for x in xs)
    for x in xs:
        np.testing.assert_array_equal(x.compute(scheduler="sync"), data)
    np.testing.assert_array_equal(blocks, data[:10])
    (message,) = _warnings(caplog)  # once, however many arrays
    assert caplog.records[0].name.startswith("ddr.")
    assert message == (
        f"ddr's direct Zarr chunk reader is not available with zarr {zarr.__version__} "
        f"({reason}): every chunk is read through dask.array.from_zarr, 1.4-1.6x slower. "
        f"Supported and tested: zarr {zarr_internals.TESTED_ZARR}."
    )


def _array_spec_without_prototype(shape, dtype, fill_value, config):
    """An ArraySpec constructor of another signature (as a future zarr might have)."""


@pytest.mark.parametrize(
    ("lack", "reason"),
    [
        (
            lambda mp: mp.setattr(zarr_internals, "ArraySpec", None),
            "zarr.core.array_spec.ArraySpec is gone",
        ),
        (
            lambda mp: mp.setattr(zarr_internals, "ArraySpec", _array_spec_without_prototype),
            "a chunk's ArraySpec cannot be built (TypeError: _array_spec_without_prototype() "
            "got an unexpected keyword argument 'prototype')",
        ),
    ],
)
def test_a_zarr_whose_codec_pipeline_ddr_cannot_call_warns_once_where_it_is_needed(
    tmp_path, rng, caplog, monkeypatch, lack, reason
):
    data = rng.normal(size=(25, 3))
    gzip = _stored(tmp_path, data, (10, 3), "gzip.zarr", compressors=[GzipCodec()])
    zstd = _stored(tmp_path, data, (10, 3), "zstd.zarr", zarr_format=2,
                   compressors=numcodecs.Zstd())  # fmt: skip
    lack(monkeypatch)
    assert zarr_internals.pipeline_unavailable(gzip) == reason
    with caplog.at_level(logging.WARNING, logger="ddr"):
        x = from_zarr(zstd)  # ddr decodes zstd itself: nothing to say
        assert _warnings(caplog) == []
        y, y_again = from_zarr(gzip), from_zarr(gzip)
    assert _direct(x) and _direct(y) and _direct(y_again)
    for arr in (x, y, y_again):
        np.testing.assert_array_equal(arr.compute(scheduler="sync"), data)
    (message,) = _warnings(caplog)
    assert message == (
        f"ddr's direct Zarr chunk reader is not available with zarr {zarr.__version__} "
        f"({reason}): chunks of codec chains other than bytes, then zstd, blosc or nothing, "
        "are read through zarr's slicing, with its copy. Supported and tested: zarr "
        f"{zarr_internals.TESTED_ZARR}."
    )
