"""ddr.io.chunk_decode: ddr's own read and decode of stored chunks, against zarr's pipeline."""

from __future__ import annotations

import gc
import os
import pickle
import threading

import dask
import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    TransposeCodec,
    ZstdCodec,
)
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.storage import LocalStore, MemoryStore

from ddr.io import chunk_decode
from ddr.io.chunk_decode import ChunkDecoder, read_chunk_file, zstd_content_size
from ddr.io.zarr_chunks import CorruptChunkError, StoredChunks, from_zarr
from ddr.pipeline._counting import CountingStore, count_key, read_counts, stored_bytes


@pytest.fixture
def refuse_zarr_decode(monkeypatch):
    """Call it once the data is written: from then on any chunk decode by zarr's codec
    pipeline fails, so reads must be ddr's own (zarr 3.2+ decodes in writes too)."""

    async def refuse(self, *args, **kwargs):
        raise AssertionError("decoded by zarr's codec pipeline")

    return lambda: monkeypatch.setattr(BatchedCodecPipeline, "decode", refuse)


def _array(store, data, chunks, **kw) -> zarr.Array:
    z = zarr.create_array(store, shape=data.shape, chunks=chunks, dtype=data.dtype, **kw)
    z[...] = data
    return z


V3_CHAINS = {"zstd": [ZstdCodec()], "blosc": [BloscCodec(cname="lz4")], None: None}
V2_CHAINS = {"zstd": numcodecs.Zstd(level=3), "blosc": numcodecs.Blosc(cname="zstd"), None: None}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("compressor", ["zstd", "blosc", None])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "int64", "uint8", "complex128"])
def test_decodes_like_zarr_without_its_pipeline(tmp_path, rng, zarr_format, compressor, dtype):
    data = (rng.normal(size=(1030, 7)) * 100).astype(dtype)
    chains = V3_CHAINS if zarr_format == 3 else V2_CHAINS
    z = _array(
        str(tmp_path / "a.zarr"), data, (200, 7), zarr_format=zarr_format,
        compressors=chains[compressor],
    )  # fmt: skip
    expected = z[...]
    assert ChunkDecoder.for_array(z) == ChunkDecoder(compressor, np.dtype(dtype))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(BatchedCodecPipeline, "decode", None)  # any use of it would raise TypeError
        got = from_zarr(z).compute(scheduler="sync")
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == expected.dtype


def test_blocks_are_fresh_read_only_arrays(tmp_path, rng, refuse_zarr_decode):
    data = rng.normal(size=(40, 3))
    z = _array(str(tmp_path / "a.zarr"), data, (20, 3))
    refuse_zarr_decode()
    first = StoredChunks(z)[(slice(0, 20), slice(0, 3))]
    pooled = read_chunk_file(tmp_path / "a.zarr" / "c" / "1" / "0")
    assert not first.flags.writeable
    assert not np.shares_memory(first, pooled)
    np.testing.assert_array_equal(first, data[:20])  # the pool's reuse left the block intact


def test_other_stores_are_read_through_zarr_and_decoded_by_ddr(rng, refuse_zarr_decode):
    data = rng.normal(size=(50, 4))
    z = _array(MemoryStore(), data, (16, 4))
    refuse_zarr_decode()
    np.testing.assert_array_equal(from_zarr(z).compute(scheduler="sync"), data)


@pytest.mark.parametrize(
    ("kw", "zarr_format"),
    [
        ({"compressors": [GzipCodec()]}, 3),
        ({"compressors": [GzipCodec(), Crc32cCodec()]}, 3),
        ({"serializer": BytesCodec(endian="big")}, 3),
        ({"compressors": numcodecs.GZip()}, 2),
        ({"filters": [numcodecs.Delta(dtype="f8")]}, 2),
        ({"order": "F"}, 2),
        ({"filters": [TransposeCodec(order=(1, 0))]}, 3),
    ],
)
def test_other_codec_chains_are_left_to_zarr(tmp_path, rng, kw, zarr_format):
    data = rng.normal(size=(45, 3))
    z = _array(str(tmp_path / "a.zarr"), data, (20, 3), zarr_format=zarr_format, **kw)
    assert ChunkDecoder.for_array(z) is None
    np.testing.assert_array_equal(from_zarr(z).compute(scheduler="sync"), z[...])


@pytest.mark.parametrize("compressors", [[ZstdCodec(), Crc32cCodec()], [Crc32cCodec()]])
def test_crc32c_chains_are_decoded_by_ddr_and_verified(
    tmp_path, rng, compressors, refuse_zarr_decode
):
    """What ddr writes its outputs and models with (bytes, zstd or nothing, crc32c): read
    by ddr's decoder, its checksum checked; one flipped bit is a CorruptChunkError naming the
    chunk, by ddr's reader as by zarr's."""
    data = rng.normal(size=(45, 3))
    z = _array(str(tmp_path / "a.zarr"), data, (20, 3), compressors=compressors)
    assert ChunkDecoder.for_array(z).checksum
    np.testing.assert_array_equal(z[...], data)
    refuse_zarr_decode()
    np.testing.assert_array_equal(from_zarr(z).compute(scheduler="sync"), data)
    path = tmp_path / "a.zarr" / "c" / "1" / "0"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptChunkError) as err:
        from_zarr(z).compute(scheduler="sync")
    assert err.value.key == "c/1/0"
    assert "the CRC32C checksum of the chunk does not match its bytes" in str(err.value)


@pytest.mark.parametrize("dtype", [">f8", "<U3"])
def test_non_native_and_string_dtypes_are_left_to_zarr(tmp_path, dtype):
    data = np.array([1, 2, 3, 4], dtype="f8").astype(dtype)
    z = _array(str(tmp_path / "a.zarr"), data, (2,), zarr_format=2)
    assert ChunkDecoder.for_array(z) is None
    np.testing.assert_array_equal(from_zarr(z).compute(scheduler="sync"), data)


@pytest.mark.parametrize("n_bytes", [0, 1, 255, 256, 257, 65791, 65792, 2**20 + 3])
def test_zstd_content_size_of_numcodecs_frames(rng, n_bytes):
    raw = rng.integers(0, 4, size=n_bytes, dtype=np.uint8).tobytes()
    frame = np.frombuffer(numcodecs.Zstd(level=1).encode(raw), dtype=np.uint8)
    assert zstd_content_size(frame) == n_bytes


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        # descriptor 0x20: single segment, 1-byte size
        (bytes([0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x2A]), 42),
        # 0x60: single segment, 2-byte size (+256)
        (bytes([0x28, 0xB5, 0x2F, 0xFD, 0x60, 0x01, 0x00]), 257),
        # 0x81: window byte, 1-byte dictionary id, 4-byte size
        (bytes([0x28, 0xB5, 0x2F, 0xFD, 0x81, 0x50, 0x07, 0x10, 0x00, 0x00, 0x00]), 16),
        # 0xC2: window byte, 2-byte dictionary id, 8-byte size
        (bytes([0x28, 0xB5, 0x2F, 0xFD, 0xC2, 0x50, 1, 2]) + (2**40).to_bytes(8, "little"), 2**40),
        # 0x00: no size recorded (a streaming frame)
        (bytes([0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x50, 0, 0, 0, 0]), None),
        # not a zstd frame, and a header cut short
        (b"\x00" * 12, None),
        (bytes([0x28, 0xB5, 0x2F, 0xFD, 0xC0, 0x50, 1]), None),
    ],
)
def test_zstd_content_size_of_frame_headers(header, expected):
    assert zstd_content_size(np.frombuffer(header, dtype=np.uint8)) == expected


@pytest.mark.parametrize("compressor", ["zstd", "blosc", None])
def test_chunk_bytes_of_another_size_are_refused(compressor, rng):
    data = rng.normal(size=(10, 3))
    encoded = {
        "zstd": numcodecs.Zstd(level=1).encode(data.tobytes()),
        "blosc": numcodecs.Blosc().encode(data.tobytes()),
        None: data.tobytes(),
    }[compressor]
    raw = np.frombuffer(encoded, dtype=np.uint8)
    decoder = ChunkDecoder(compressor, np.dtype("f8"))
    np.testing.assert_array_equal(decoder.decode(raw, (10, 3)), data)
    assert decoder.decode(raw, (11, 3)) is None
    assert decoder.decode(raw, (9, 3)) is None
    if compressor == "zstd":  # the header survives the cut: numcodecs' error, as through zarr
        with pytest.raises(RuntimeError, match=r"[Zz]std"):
            decoder.decode(raw[:20], (10, 3))
    else:
        assert decoder.decode(raw[:20], (10, 3)) is None


def test_a_chunk_of_the_wrong_size_falls_back_to_zarr_and_its_error(tmp_path, rng):
    z = _array(str(tmp_path / "a.zarr"), rng.normal(size=(40, 3)), (20, 3))
    other = _array(str(tmp_path / "b.zarr"), rng.normal(size=(10, 3)), (10, 3))
    os.replace(tmp_path / "b.zarr" / "c" / "0" / "0", tmp_path / "a.zarr" / "c" / "1" / "0")
    assert other.shape == (10, 3)
    with pytest.raises(Exception) as theirs:
        z[...]
    with pytest.raises(type(theirs.value)):
        from_zarr(z).compute(scheduler="sync")


@pytest.mark.parametrize("damage", ["truncated", "random bytes", "wrong size"])
@pytest.mark.parametrize("path", ["ddr's reader", "zarr's slicing"])
def test_a_corrupt_chunk_names_the_array_and_the_chunk_key(tmp_path, rng, damage, path):
    z = _array(str(tmp_path / "a.zarr"), rng.normal(size=(60, 3)), (20, 3))
    chunk = tmp_path / "a.zarr" / "c" / "1" / "0"
    raw = chunk.read_bytes()
    if damage == "truncated":
        chunk.write_bytes(raw[:-40])
    elif damage == "random bytes":
        chunk.write_bytes(rng.integers(0, 256, len(raw), dtype=np.uint8).tobytes())
    else:  # a whole, valid zstd frame of another chunk shape
        other = _array(str(tmp_path / "b.zarr"), rng.normal(size=(10, 3)), (10, 3))
        chunk.write_bytes((tmp_path / "b.zarr" / "c" / "0" / "0").read_bytes())
        assert other.shape == (10, 3)
    # zarr's slicing: dask chunks that are not the stored ones (each spans two stored chunks)
    x = from_zarr(z) if path == "ddr's reader" else from_zarr(z, chunks=(30, 3))
    assert x.name.startswith("ddr-from-zarr-" if path == "ddr's reader" else "from-zarr-")
    with pytest.raises(CorruptChunkError, match=r"^chunk c/1/0 of .*a\.zarr is corrupt \(") as e:
        x.compute(scheduler="sync")
    assert e.value.key == "c/1/0" and str(tmp_path / "a.zarr") in e.value.array
    assert "Copy the array again from its source" in str(e.value)
    assert pickle.loads(pickle.dumps(e.value)).args == e.value.args


def _in_thread(fn):
    """``fn()`` run in a new thread (with no read buffer yet), its result."""
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def test_read_chunk_file_reuses_a_buffer_per_thread(tmp_path):
    (tmp_path / "a").write_bytes(b"abcdef")
    (tmp_path / "b").write_bytes(b"xyz")

    def reads():
        first = read_chunk_file(tmp_path / "a")
        assert first.tobytes() == b"abcdef"
        second = read_chunk_file(tmp_path / "b")
        assert second.tobytes() == b"xyz"
        missing = read_chunk_file(tmp_path / "missing"), read_chunk_file(tmp_path)
        return np.shares_memory(first, second), missing

    assert _in_thread(reads) == (True, (None, None))  # a directory holds no chunk either


def test_read_buffers_are_limited_in_size_and_in_all(tmp_path, monkeypatch):
    (tmp_path / "a").write_bytes(b"abcdef")

    def two_reads():
        first = read_chunk_file(tmp_path / "a").copy(), read_chunk_file(tmp_path / "a")
        second = read_chunk_file(tmp_path / "a")
        return first[0].tobytes(), np.shares_memory(first[1], second)

    gc.collect()  # buffers of threads gone earlier are released before the count is taken
    held = chunk_decode._pool_held
    monkeypatch.setattr(chunk_decode, "_POOLED_BYTES", 4)
    assert _in_thread(two_reads) == (b"abcdef", False)  # larger than a pooled buffer may be
    monkeypatch.setattr(chunk_decode, "_POOLED_BYTES", 100)
    monkeypatch.setattr(chunk_decode, "_POOL_BUDGET", held + 15)
    kept, done = [], threading.Barrier(3)

    def pooled_while_others_hold_theirs():
        raw = read_chunk_file(tmp_path / "a")
        pooled = np.shares_memory(raw, read_chunk_file(tmp_path / "a"))
        kept.append(pooled)
        done.wait()  # all three threads are alive, each holding what it was given
        return pooled

    threads = [threading.Thread(target=pooled_while_others_hold_theirs) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(kept) == [False, True, True]  # 6 + 6 bytes fit in 15, a third 6 do not
    gc.collect()
    assert chunk_decode._pool_held == held  # the threads' buffers went, and their bytes back


def test_many_threads_read_their_own_chunks(tmp_path, rng):
    data = rng.normal(size=(4000, 5))
    z = _array(str(tmp_path / "a.zarr"), data, (50, 5))
    with dask.config.set(scheduler="threads", num_workers=8):
        for _ in range(3):
            np.testing.assert_array_equal(from_zarr(z).compute(), data)


class _ObservedStore(LocalStore):
    seen: list

    def observe_read(self, key: str, n_bytes: int) -> None:
        self.seen.append((key, n_bytes))

    async def get(self, key, prototype=None, byte_range=None):
        if not key.endswith("zarr.json"):
            raise AssertionError("ddr reads this store's chunk files itself")
        return await super().get(key, prototype, byte_range)


class _GuardedStore(LocalStore):
    gets = 0

    async def get(self, key, prototype=None, byte_range=None):
        type(self).gets += 1
        return await super().get(key, prototype, byte_range)


def test_store_subclasses_are_read_by_their_get_unless_they_observe_reads(tmp_path, rng):
    data = rng.normal(size=(30, 2))
    _array(str(tmp_path / "g.zarr"), data, (10, 2), zarr_format=3)
    observed = _ObservedStore(str(tmp_path), read_only=True)
    observed.seen = []
    _GuardedStore.gets = 0
    x = from_zarr(zarr.open_array(store=_GuardedStore(str(tmp_path / "g.zarr")), mode="r"))
    _GuardedStore.gets = 0
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)
    assert _GuardedStore.gets == 3  # its get was respected, once per chunk
    # a store that observes reads gets told of every chunk file ddr read, by its key
    arr = zarr.open_array(store=observed, path="g.zarr", mode="r", zarr_format=3)
    np.testing.assert_array_equal(from_zarr(arr).compute(scheduler="sync"), data)
    sizes = {f"g.zarr/c/{i}/0": (tmp_path / "g.zarr" / "c" / str(i) / "0").stat().st_size
             for i in range(3)}  # fmt: skip
    assert sorted(observed.seen) == sorted(sizes.items())


def test_the_pipeline_counting_store_is_read_file_by_file_and_counts_it(tmp_path, rng):
    data = rng.normal(size=(60, 4))
    _array(str(tmp_path / "a.zarr"), data, (20, 4))
    store = CountingStore(str(tmp_path / "a.zarr"), read_only=True)
    z = zarr.open_array(store=store, mode="r")
    key = count_key(str(store.root), "")
    before = read_counts().get(key, 0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LocalStore, "get", None)  # chunks must not go through any store's get
        np.testing.assert_array_equal(from_zarr(z).compute(scheduler="sync"), data)
    assert read_counts()[key] - before == stored_bytes(tmp_path / "a.zarr", "")
