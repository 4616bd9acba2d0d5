"""Dask arrays over Zarr arrays whose tasks read and decode each stored chunk once, no copy.

``zarr.Array.__getitem__`` decodes a chunk into a fresh buffer and then copies it into the
output array it allocated (zarr-python issues 2904 and 3429: there is no public way yet to
decode into the caller's buffer). :func:`from_zarr` returns the decoded chunk itself. For the
codec chains most numeric arrays use (native-endian bytes, then zstd, blosc or nothing) ddr
reads and decodes the chunk itself (:mod:`ddr.io.chunk_decode`: local chunk files into a
reused buffer, decoded into an array numpy allocates); any other chain goes through zarr's
own store and codec pipeline, so every codec zarr reads is read the same way. Per 100 000 x
100 float32 zstd chunk in a dask worker's environment: ~100 ms through ``__getitem__``,
~88 ms through zarr's pipeline without the copy, ~62 ms decoded by ddr. Arrays where none of
this applies (sharded arrays, v2 arrays in Fortran order, dask chunks other than the stored
ones) are read by zarr's slicing, as :func:`dask.array.from_zarr` reads them, and so is every
array with a zarr that lacks what the reader needs (:mod:`ddr.io.zarr_internals`), after a
warning that says so.

A chunk that cannot be decoded (random bytes, a truncated file, a frame of the wrong size)
raises :class:`CorruptChunkError` naming the array (its redacted location) and the chunk's
store key, on either path.

The blocks of such an array are read-only: operations produce new arrays as usual, only
in-place writes into a block are refused.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr
from dask.base import tokenize
from zarr.storage import LocalStore

from ddr.io import zarr_internals
from ddr.io.chunk_decode import ChunkDecoder, read_chunk_file
from ddr.io.redaction import redact
from ddr.io.stored_chunks import MissingChunks, MissingChunksError

__all__ = ["CorruptChunkError", "StoredChunks", "direct_readable", "from_zarr"]

# what numcodecs and zarr raise for bytes that do not decode to the chunk (storage errors are
# OSErrors and pass through untouched)
_DECODE_ERRORS = (RuntimeError, ValueError, TypeError)


class CorruptChunkError(ValueError):
    """A stored chunk of an input array could not be decoded.

    Parameters
    ----------
    array : str
        The array's location (redacted).
    key : str
        The chunk's store key, relative to the array.
    detail : str
        What the decoder said.

    Attributes
    ----------
    array : str
        The array's location (redacted).
    key : str
        The chunk's store key, relative to the array.
    """

    def __init__(self, array: str, key: str, detail: str) -> None:
        self.array = array
        self.key = key
        self.detail = detail
        super().__init__(
            f"chunk {key} of {array} is corrupt ({detail}): a truncated or damaged copy? "
            "Copy the array again from its source"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # raised in a worker, unpickled in the client: rebuilt from its parts, not its message
        return type(self), (self.array, self.key, self.detail)


def direct_readable(z: zarr.Array) -> bool:
    """Whether ddr reads ``z``'s stored chunks itself: an unsharded array in C order, with a
    zarr that has what the reader needs (else a warning, once, says what it lacks)."""
    # zarr's pipeline hands back a v2 Fortran-order chunk in storage order; its reads reorder it
    if getattr(z.metadata, "order", "C") != "C" or getattr(z, "shards", None) is not None:
        return False
    reason = zarr_internals.direct_unavailable(z)
    if reason is not None:
        zarr_internals.warn_once(
            reason, "every chunk is read through dask.array.from_zarr, 1.4-1.6x slower"
        )
    return reason is None


def _pipeline_supported(z: zarr.Array, needed: bool) -> bool:
    """Whether zarr's codec pipeline can decode ``z``'s chunks for ddr; when it cannot and
    ``needed`` (ddr does not decode ``z``'s codec chain itself), a warning says so, once."""
    reason = zarr_internals.pipeline_unavailable(z)
    if reason is not None and needed:
        zarr_internals.warn_once(
            reason,
            "chunks of codec chains other than bytes, then zstd, blosc or nothing, are read "
            "through zarr's slicing, with its copy",
        )
    return reason is None


class StoredChunks:
    """Array-like view of a Zarr array for :func:`dask.array.from_array`: a key that selects
    exactly one stored chunk returns that chunk as decoded; any other key is zarr's slice.

    Parameters
    ----------
    array : zarr.Array
        A Zarr array (v2 or v3).
    missing_chunks : {"error", "fill"}
        A chunk that is not stored when it is read (deleted since the array was checked)
        raises :class:`~ddr.io.MissingChunksError` (default), or reads as the fill value.
    """

    def __init__(self, array: zarr.Array, missing_chunks: MissingChunks = "error"):
        if missing_chunks not in ("error", "fill"):
            raise ValueError(f"missing_chunks must be 'error' or 'fill'; got {missing_chunks!r}")
        self.array = array
        self.missing = missing_chunks
        self.shape = tuple(array.shape)
        self.dtype = array.dtype
        self.ndim = len(self.shape)
        self.chunks = tuple(array.chunks)
        self.direct = direct_readable(array)
        # whether chunk keys can be looked up in the store (what ddr's reader needs of zarr);
        # without it a chunk deleted after the array was checked is zarr's fill value
        self.keyed = zarr_internals.direct_unavailable(array) is None
        self.decoder = ChunkDecoder.for_array(array) if self.direct else None
        self.pipeline = self.direct and _pipeline_supported(array, needed=self.decoder is None)

    def __dask_tokenize__(self) -> Any:
        return ("ddr-stored-chunks", tokenize(self.array), self.missing)

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            return self._read(key)
        except MissingChunksError:
            raise
        except _DECODE_ERRORS as e:
            raise self._corrupt(key, e) from e

    def pieces(
        self, region: tuple[tuple[int, int], ...]
    ) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
        """The values in ``region`` (``[start, stop)`` per axis, on stored chunk bounds), one
        stored chunk at a time, as decoded (no copy): ``(at, values)``, ``at`` the slices of
        ``values`` in the region. An array ddr's reader cannot read chunk by chunk (see
        :func:`direct_readable`) gives the region whole, read by zarr."""
        if not self.direct:
            yield (
                tuple(slice(0, stop - start) for start, stop in region),
                self[tuple(slice(start, stop) for start, stop in region)],
            )
            return
        grid = [
            range(start // c, -(-stop // c))
            for (start, stop), c in zip(region, self.chunks, strict=True)
        ]
        for coords in itertools.product(*grid):
            key = tuple(
                slice(i * c, min((i + 1) * c, n))
                for i, c, n in zip(coords, self.chunks, self.shape, strict=True)
            )
            at = tuple(
                slice(k.start - start, k.stop - start)
                for k, (start, _) in zip(key, region, strict=True)
            )
            yield at, self[key]

    def _read(self, key: Any) -> np.ndarray:
        coords = self._chunk_of(key) if self.direct else None
        if coords is None:
            return self._sliced(key)
        chunk = _read_chunk(self.array, coords, self.decoder, self.pipeline)
        if chunk is _MISSING:
            if self.missing == "error":
                raise self._missing([zarr_internals.chunk_key(self.array, coords)])
            return self.array[key]
        if chunk is None:
            return self._sliced(key)
        edge = zip(coords, self.chunks, self.shape, strict=True)
        return chunk[tuple(slice(0, min(c, s - i * c)) for i, c, s in edge)]

    def _sliced(self, key: Any) -> np.ndarray:
        """zarr's slice of ``key``; with ``missing="error"``, refused if a chunk (or shard)
        it covers is not stored. The chunks are looked up after the read: one found then
        was there when zarr read it."""
        out = self.array[key]
        if self.missing == "error" and self.keyed:
            covered = self._covered(key)
            absent = [
                k
                for coords in covered or ()
                if not zarr_internals.stored(
                    self.array.store_path, k := zarr_internals.chunk_key(self.array, coords)
                )
            ]
            if absent:
                raise self._missing(absent)
        return out

    def _missing(self, keys: list[str]) -> MissingChunksError:
        path = self.array.store_path.path
        where = redact(_location(self.array.store_path))
        per_key = getattr(self.array, "shards", None) or self.chunks
        n_keys = math.prod(math.ceil(s / c) for s, c in zip(self.shape, per_key, strict=True))
        prefix = f"{path}/" if path else ""
        return MissingChunksError(where, path, [prefix + k for k in keys], n_keys)

    def _covered(self, key: Any) -> list[tuple[int, ...]] | None:
        """The grid coordinates of the chunks (shards, for a sharded array) a selection of
        slices covers; None for another kind of key."""
        if not isinstance(key, tuple) or not all(isinstance(k, slice) for k in key):
            return None
        if len(key) > self.ndim:
            return None
        key = key + (slice(None),) * (self.ndim - len(key))
        per_key = getattr(self.array, "shards", None) or self.chunks
        grid = []
        for sl, c, s in zip(key, per_key, self.shape, strict=True):
            start, stop, _ = sl.indices(s)
            if stop <= start:
                return []
            grid.append(range(start // c, (stop - 1) // c + 1))
        return list(itertools.product(*grid))

    def _corrupt(self, key: Any, cause: BaseException) -> CorruptChunkError:
        """The error naming the chunk of ``key`` that does not decode: the one it selects,
        or the first of those it covers that zarr fails to read alone (a shard, for a
        sharded array: its store key)."""
        where = redact(_location(self.array.store_path))
        covered = self._covered(key)
        if not covered:
            return CorruptChunkError(where, f"selection {key}", _detail(cause))  # not from dask
        per_key = getattr(self.array, "shards", None) or self.chunks
        for coords in covered if len(covered) > 1 else ():
            one = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, per_key, strict=True))
            try:
                self.array[one]
            except _DECODE_ERRORS as e:
                return CorruptChunkError(
                    where, zarr_internals.chunk_key(self.array, coords), _detail(e)
                )
        return CorruptChunkError(
            where, zarr_internals.chunk_key(self.array, covered[0]), _detail(cause)
        )

    def _chunk_of(self, key: Any) -> tuple[int, ...] | None:
        """The coordinates of the stored chunk ``key`` selects whole, else None."""
        if not isinstance(key, tuple) or len(key) != self.ndim:
            return None
        coords = []
        for sl, c, s in zip(key, self.chunks, self.shape, strict=True):
            if not isinstance(sl, slice) or sl.step not in (None, 1):
                return None
            start, stop, _ = sl.indices(s)
            if start % c or stop != min(start + c, s):
                return None
            coords.append(start // c)
        return tuple(coords)


def _location(store_path: Any) -> str:
    """Where an array is, as a URL: zarr's own words for it, except for an fsspec store,
    which zarr names by its repr."""
    store = store_path.store
    fs, root = getattr(store, "fs", None), getattr(store, "path", None)
    if fs is not None and isinstance(root, str) and hasattr(fs, "unstrip_protocol"):
        inner = store_path.path
        return fs.unstrip_protocol(f"{root.rstrip('/')}/{inner}" if inner else root)
    return str(store_path)


def _detail(cause: BaseException) -> str:
    return f"{type(cause).__name__}: {redact(str(cause))}"


#: what :func:`_read_chunk` returns for a chunk that is not stored
_MISSING: Any = object()


def _read_chunk(
    z: zarr.Array, coords: tuple[int, ...], decoder: ChunkDecoder | None, pipeline: bool
) -> Any:
    """The stored chunk at ``coords``, full chunk shape; :data:`_MISSING` when it is not
    stored, None when ddr cannot give exactly what zarr's own read would: the caller then
    slices with zarr.

    With a ``decoder`` (see :mod:`ddr.io.chunk_decode`) ddr reads and decodes the chunk
    itself; a chunk it cannot decode is read again through zarr's store and, with
    ``pipeline``, decoded by zarr's codec pipeline.
    """
    key = zarr_internals.chunk_key(z, coords)
    if decoder is not None:
        raw = _stored_bytes(z.store_path, key)
        if raw is None:
            return _MISSING
        chunk = decoder.decode(raw, tuple(z.chunks))
        if chunk is not None:
            return chunk
    if not pipeline:
        return None
    raw = zarr_internals.fetch(z.store_path, key)
    return _MISSING if raw is None else zarr_internals.pipeline_decode(z, raw)


def _stored_bytes(store_path: Any, key: str) -> np.ndarray | None:
    """The bytes stored under ``key`` (uint8), None if there are none: from the chunk file
    itself for local stores that allow it (see :func:`_local_file`), else from the store."""
    path = _local_file(store_path, key)
    if path is None:
        buf = zarr_internals.fetch(store_path, key)
        return None if buf is None else buf.as_numpy_array()
    raw = read_chunk_file(path)
    observe = getattr(store_path.store, "observe_read", None)
    if raw is not None and observe is not None:
        observe(_store_key(store_path, key), raw.shape[0])
    return raw


def _store_key(store_path: Any, key: str) -> str:
    return f"{store_path.path}/{key}" if store_path.path else key


def _local_file(store_path: Any, key: str) -> Path | None:
    """The file a local store keeps ``key`` in, if ddr may read it itself: the store is a
    :class:`zarr.storage.LocalStore` whose ``get`` is LocalStore's own, or a subclass that
    overrides ``get`` only to observe reads and says so with an ``observe_read(key, n_bytes)``
    method (ddr calls it for every chunk it reads from the file)."""
    store = store_path.store
    if not isinstance(store, LocalStore):
        return None
    if type(store).get is not LocalStore.get and not hasattr(store, "observe_read"):
        return None
    return Path(store.root) / _store_key(store_path, key)


def from_zarr(
    url: zarr.Array | str | os.PathLike,
    component: str | None = None,
    chunks: Sequence[Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    getitem: Any = None,
    missing_chunks: MissingChunks = "error",
) -> da.Array:
    """A dask array over a Zarr array whose tasks decode the stored chunks without a copy.

    A drop-in for :func:`dask.array.from_zarr` given a Zarr array, a store path or a URL.

    Parameters
    ----------
    url : zarr.Array, str or path-like
        The array, or the store holding it (v2 or v3): a local path or a URL (``s3://``,
        ``gs://``, ``az://``, ``http(s)://``, ``file://``, ``memory://``).
    component : str, optional
        The array's path inside the store when ``url`` is a group.
    chunks : sequence, optional
        Dask chunks (as for :func:`dask.array.from_zarr`); the stored chunks by default.
        Chunks other than the stored ones are read by zarr's slicing.
    storage_options : mapping, optional
        Options of the URL's filesystem (credentials, ``endpoint_url``, ...); by default
        they come from the environment and the usual config files.
    getitem : callable, optional
        The function each block's task reads with, as :func:`dask.array.from_array` takes
        it (default: dask's getter). It is called with the array-like and the block's slices.
    missing_chunks : {"error", "fill"}
        A chunk that is not stored when a task reads it raises
        :class:`~ddr.io.MissingChunksError` naming its key (default: zarr would read it as
        the fill value, and a broken copy or a chunk deleted during a run would look like
        data), or is read as the fill value (``"fill"``, for arrays sparse on purpose).

    Returns
    -------
    dask.array.Array
        Shape and dtype of the Zarr array.
    """
    if isinstance(url, zarr.Array):
        if component is not None:
            raise ValueError("component: give it with a store path, not with a zarr.Array")
        z = url
    else:
        from ddr.io.locations import resolve

        loc = resolve(url, storage_options)
        with loc.errors("read"):
            z = zarr.open_array(store=loc.store(), path=component or "", mode="r")
    stored = da.core.normalize_chunks(tuple(z.chunks), z.shape, dtype=z.dtype)
    normal = stored if chunks is None else da.core.normalize_chunks(chunks, z.shape, dtype=z.dtype)
    source = StoredChunks(z, missing_chunks)
    # dask's from_zarr's prefix when zarr slices every chunk, as it would
    prefix = "ddr-from-zarr-" if source.direct and normal == stored else "from-zarr-"
    name = prefix + tokenize(source, normal, getitem)
    kwargs = {} if getitem is None else {"getitem": getitem}
    return da.from_array(source, chunks=normal, name=name, asarray=False, fancy=False, **kwargs)
