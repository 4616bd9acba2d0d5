"""Read a stored Zarr chunk and decode it straight into a fresh numpy array.

For the codec chains most arrays of numbers are written with (native-endian bytes, then zstd,
blosc or no compression; Zarr v2 or v3), ddr does what zarr's codec pipeline does, minus two
costs that profiling a dask worker showed to be a third of reading a 40 MB zstd chunk:

- zarr's ``LocalStore`` reads a chunk file into a fresh ``bytes`` object: with dask's
  ``MALLOC_TRIM_THRESHOLD_`` every such buffer is a new mapping whose 4 KiB pages fault in
  one by one (27 ms for a 37 MB file on the benchmark machine). :func:`read_chunk_file` reads
  it into a buffer each thread reuses (10 ms).
- numcodecs decodes into a buffer it allocates the same way (25 ms of page faults for 40 MB).
  :meth:`ChunkDecoder.decode` decodes into an array numpy allocates, which on Linux asks for
  transparent huge pages (512 times fewer faults).

A trailing ``crc32c`` checksum (Zarr v3; what ddr writes its outputs and models with, see
``ddr.io.checksums``) is verified as zarr verifies it. Every other chain (other
compressors, filters, other checksums, big-endian data, strings, sharding) is left to zarr,
and so is any chunk whose header does not describe exactly the chunk expected (the caller
falls back to zarr's own read, which decodes it or raises zarr's error).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import weakref
from typing import Any, Literal

import numcodecs
import numpy as np
import zarr
from numcodecs import blosc as nc_blosc
from numcodecs import zstd as nc_zstd

from ddr.io.checksums import verified

__all__ = ["ChunkDecoder", "read_chunk_file", "zstd_content_size"]

Compressor = Literal["zstd", "blosc"] | None

_ZSTD_MAGIC = 0xFD2FB528
# Blosc1 header: version, versionlz, flags, typesize, then nbytes, blocksize, cbytes (uint32 LE)
_BLOSC_HEADER = 16
# Reused read buffers are kept per thread, at most this large each and this much in all (a
# threaded scheduler on a large node runs dozens of threads); other reads get a buffer of their
# own, which costs its page faults (~5 ms per 37 MB here) and nothing else.
_POOLED_BYTES = 128 * 2**20
_POOL_BUDGET = 512 * 2**20
_pool = threading.local()
_pool_lock = threading.Lock()
_pool_held = 0


def zstd_content_size(raw: np.ndarray) -> int | None:
    """Decompressed size recorded in the header of the zstd frame at the start of ``raw``.

    Parameters
    ----------
    raw : ndarray of uint8, shape (n_bytes,)

    Returns
    -------
    int or None
        None when ``raw`` does not start with a zstd frame or the frame does not record its
        size (RFC 8878, section 3.1.1.1).
    """
    head = raw[:18].tobytes()
    if len(head) < 6 or int.from_bytes(head[:4], "little") != _ZSTD_MAGIC:
        return None
    descriptor = head[4]
    size_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    width = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if width == 0 or len(head) < start + width:
        return None
    size = int.from_bytes(head[start : start + width], "little")
    return size + 256 if width == 2 else size


def _blosc_sizes(raw: np.ndarray) -> tuple[int, int] | None:
    """(decompressed, compressed) sizes from a Blosc1 header."""
    if raw.shape[0] < _BLOSC_HEADER:
        return None
    header = raw[:_BLOSC_HEADER].view("<u4")
    return int(header[1]), int(header[3])


def read_chunk_file(path: str | os.PathLike) -> np.ndarray | None:
    """The bytes of a chunk file, or None when there is no such file (a chunk never written).

    Parameters
    ----------
    path : path-like

    Returns
    -------
    ndarray of uint8, shape (file size,)
        A view of a buffer the calling thread reuses: valid until its next call.
    """
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            target = _read_buffer(size)
            view, got = memoryview(target), 0
            while got < size:
                n = f.readinto(view[got:])
                if not n:  # the file shrank while being read: what is left is what it holds
                    return target[:got]
                got += n
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return target


def _read_buffer(size: int) -> np.ndarray:
    """``size`` bytes of this thread's reused buffer, or of a fresh one when pooling it would
    exceed the per-buffer or the total limit."""
    global _pool_held
    pooled = getattr(_pool, "buffer", None)
    if pooled is not None and pooled.shape[0] >= size:
        return pooled[:size]
    held = 0 if pooled is None else pooled.shape[0]
    with _pool_lock:
        if size > _POOLED_BYTES or _pool_held - held + size > _POOL_BUDGET:
            return np.empty(size, dtype=np.uint8)
        _pool_held += size - held
    if pooled is not None:
        _pool.release.detach()  # its bytes were accounted for just above
    _pool.buffer = buffer = np.empty(size, dtype=np.uint8)
    _pool.release = weakref.finalize(buffer, _release, size)
    return buffer


def _release(size: int) -> None:
    """A pooled buffer went away with its thread: its bytes return to the budget."""
    global _pool_held
    with _pool_lock:
        _pool_held -= size


@dataclasses.dataclass(frozen=True)
class ChunkDecoder:
    """Decodes the chunks of one Zarr array into fresh arrays, for the chains ddr knows.

    Parameters
    ----------
    compressor : {"zstd", "blosc", None}
        The one bytes-to-bytes codec after the native-endian bytes codec (None: raw bytes).
    dtype : numpy dtype
        The array's (native byte order, fixed size).
    checksum : bool
        The chain ends with the ``crc32c`` codec: every chunk's checksum is verified.
    """

    compressor: Compressor
    dtype: np.dtype
    checksum: bool = False

    @classmethod
    def for_array(cls, z: zarr.Array) -> ChunkDecoder | None:
        """The decoder for ``z``'s chunks, or None when zarr must decode them."""
        dtype = np.dtype(z.dtype)
        if dtype.kind not in "biufc" or not dtype.isnative:
            return None
        meta = z.metadata
        if meta.zarr_format == 2:
            if getattr(meta, "filters", None) or getattr(meta, "order", "C") != "C":
                return None
            compressor = _v2_compressor(getattr(meta, "compressor", None))
            return None if compressor is False else cls(compressor, dtype)
        chain = _v3_chain(tuple(getattr(meta, "codecs", ())))
        return None if chain is False else cls(chain[0], dtype, chain[1])

    def decode(self, raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
        """The chunk of ``shape`` encoded in ``raw``; None unless ``raw``'s header says it
        holds exactly that many bytes.

        Parameters
        ----------
        raw : ndarray of uint8, shape (n_bytes,)
            The stored chunk (not kept: the result never shares its memory).
        shape : tuple of int
            The chunk's full shape.

        Returns
        -------
        ndarray of ``shape`` and the decoder's dtype, read-only, or None

        Raises
        ------
        ddr.io.checksums.ChecksumMismatch
            The chunk's checksum does not match its bytes.
        """
        if self.checksum:
            raw = verified(raw)
        out = np.empty(shape, dtype=self.dtype)
        target = out.reshape(-1).view(np.uint8)
        if self.compressor is None:
            if raw.shape[0] != target.shape[0]:
                return None
            target[:] = raw
        elif self.compressor == "zstd":
            if zstd_content_size(raw) != target.shape[0]:
                return None
            nc_zstd.decompress(raw, target)
        else:
            if _blosc_sizes(raw) != (target.shape[0], raw.shape[0]):
                return None
            nc_blosc.decompress(raw, target)
        out.flags.writeable = False
        return out


def _v3_chain(codecs: tuple[Any, ...]) -> tuple[Compressor, bool] | Literal[False]:
    """The compressor of a v3 chain ``bytes[, zstd | blosc][, crc32c]`` and whether it ends
    with the checksum; False for any other chain."""
    from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, ZstdCodec

    checksum = bool(codecs) and type(codecs[-1]) is Crc32cCodec
    if checksum:
        codecs = codecs[:-1]
    if not codecs or type(codecs[0]) is not BytesCodec or len(codecs) > 2:
        return False
    endian = getattr(codecs[0].endian, "value", codecs[0].endian)
    if endian not in (None, sys.byteorder):
        return False
    if len(codecs) == 1:
        return None, checksum
    compressor = {ZstdCodec: "zstd", BloscCodec: "blosc"}.get(type(codecs[1]), False)
    return False if compressor is False else (compressor, checksum)


def _v2_compressor(compressor: Any) -> Compressor | Literal[False]:
    """The v2 ``compressor`` as ddr decodes it; False for any other."""
    if compressor is None:
        return None
    return {numcodecs.Zstd: "zstd", numcodecs.Blosc: "blosc"}.get(type(compressor), False)
