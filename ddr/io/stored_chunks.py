"""Which chunks of a Zarr array are stored, from one listing of its store (metadata only).

Zarr reads a chunk that is not stored as the array's fill value. For ddr's inputs a missing
chunk is almost always a broken copy or an interrupted write, and reading it as zeros (or
NaN) trains a model on wrong data that looks right. :func:`check_chunks` lists the array's
keys once through zarr's store API (``list_prefix``: a directory walk on local files, a
paginated listing on an object store; nothing is read) and refuses an array with missing
chunks, naming them. Arrays that are sparse on purpose are opened with
``missing_chunks="fill"``.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Literal

import zarr

__all__ = ["MissingChunks", "MissingChunksError", "check_chunks", "missing_chunk_keys"]

MissingChunks = Literal["error", "fill"]
_SHOWN = 5  # keys named in the message; the rest are counted


class MissingChunksError(ValueError):
    """Chunks of an input array are not stored.

    Parameters
    ----------
    where : str
        The array as the message names it (its URL, secrets redacted).
    array : str
        The array's path in its store.
    missing : list of str
        The store keys of the missing chunks (or shards).
    n_chunks : int
        The number of chunks (or shards) the array has.

    Attributes
    ----------
    array, missing, n_chunks
        The parameters of those names.
    """

    def __init__(self, where: str, array: str, missing: list[str], n_chunks: int) -> None:
        self.where = where
        self.array = array
        self.missing = missing
        self.n_chunks = n_chunks
        shown = ", ".join(missing[:_SHOWN])
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        super().__init__(
            f"{len(missing)} of {n_chunks} chunks of {where} are missing ({shown}{more}): a "
            "broken copy or an interrupted write? Zarr would read them as the fill value. If "
            "the array is sparse on purpose (zarr stores no chunk equal to the fill value "
            "unless written with write_empty_chunks=True), open it with "
            "missing_chunks='fill' (in a pipeline, `missing_chunks: fill` on the input)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # raised in a worker (a chunk gone at read time), unpickled in the client
        return type(self), (self.where, self.array, self.missing, self.n_chunks)


def _stored_grid(arr: zarr.Array) -> tuple[int, ...]:
    """How many stored objects (chunks, or shards for a sharded array) along each dim."""
    shards = getattr(arr, "shards", None)
    per_key = shards if shards is not None else arr.chunks
    return tuple(math.ceil(s / c) for s, c in zip(arr.shape, per_key, strict=True))


def missing_chunk_keys(arr: zarr.Array) -> tuple[list[str], int]:
    """The store keys of ``arr``'s chunks (shards, if sharded) that are not stored, in
    order, and how many it has; from one ``list_prefix`` of its store."""
    from zarr.core.sync import sync  # zarr's own loop, the one its stores are bound to

    grid = _stored_grid(arr)
    n_chunks = math.prod(grid)
    if n_chunks == 0:
        return [], 0
    base = arr.store_path.path
    prefix = f"{base}/" if base else ""

    async def listed() -> set[str]:
        return {key async for key in arr.store.list_prefix(prefix)}

    present = sync(listed())
    encode = arr.metadata.encode_chunk_key
    missing = [
        key
        for coords in itertools.product(*(range(n) for n in grid))
        if (key := prefix + encode(coords)) not in present
    ]
    return missing, n_chunks


def check_chunks(arr: zarr.Array, where: str, missing_chunks: MissingChunks = "error") -> None:
    """Raise :class:`MissingChunksError` naming the chunks of ``arr`` (described as
    ``where`` in the message) that are not stored, unless ``missing_chunks="fill"``."""
    if missing_chunks not in ("error", "fill"):
        raise ValueError(f"missing_chunks must be 'error' or 'fill'; got {missing_chunks!r}")
    if missing_chunks == "fill":
        return
    missing, n_chunks = missing_chunk_keys(arr)
    if missing:
        raise MissingChunksError(where, arr.store_path.path, missing, n_chunks)
