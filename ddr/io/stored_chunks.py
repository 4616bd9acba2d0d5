"""Whether an input array's metadata is usable and which of its chunks are stored, from its
metadata and one listing of its store (no chunk is read).

Zarr reads a chunk that is not stored as the array's fill value. For ddr's inputs a missing
chunk is almost always a broken copy or an interrupted write, and reading it as zeros (or
NaN) trains a model on wrong data that looks right. :func:`check_chunks` lists the array's
keys once through zarr's store API (``list_prefix``: a directory walk on local files, a
paginated listing on an object store; nothing is read) and refuses an array with missing
chunks, naming them. Arrays that are sparse on purpose are opened with
``missing_chunks="fill"``. The work is in proportion to the keys stored, not to the chunks
the metadata describes: metadata that claims 10^11 rows costs what the stored keys cost.

Before that, metadata that ddr cannot use is refused whatever ``missing_chunks`` says
(:class:`InputMetadataError`): a chunk size of 0 (zarr 3.1 opens it; zarr 3.4 reads it as 1
and warns), and more than :data:`MAX_INPUT_CHUNKS` chunks (each chunk is a task in every
pass: a graph that size would take the client's memory before anything is read). What zarr
itself cannot parse (a fill value that does not fit the data type, a shape that is not a
list of integers, an unknown codec) is reported the same way by :func:`unreadable_metadata`.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import re
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import zarr

__all__ = [
    "MAX_INPUT_CHUNKS",
    "InputMetadataError",
    "MissingChunks",
    "MissingChunksError",
    "check_chunks",
    "chunk_size_problem",
    "check_metadata",
    "missing_chunk_keys",
    "unreadable_metadata",
]

MissingChunks = Literal["error", "fill"]
_SHOWN = 5  # keys named in the message; the rest are counted
_KEPT = 1000  # keys kept in MissingChunksError.missing
#: the most chunks an input array may have: every chunk is a task in every pass over it
MAX_INPUT_CHUNKS = 1_000_000
_NUMBER = re.compile(r"\d+")


class InputMetadataError(ValueError):
    """An input array's metadata is corrupt, or describes an array ddr cannot read.

    Parameters
    ----------
    where : str
        The array as the message names it (its URL, secrets redacted).
    problem : str
        What is wrong, and what to do.
    """

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.where, self.problem)


@contextlib.contextmanager
def unreadable_metadata(where: str) -> Iterator[None]:
    """Turn what zarr raises while parsing metadata (a ``TypeError`` for a NaN fill value
    of an int array, a ``ValueError`` for an unknown data type, ...) into
    :class:`InputMetadataError` naming ``where``. Only errors raised inside zarr (or its
    codecs) are translated: ddr's own errors, and storage errors, pass unchanged."""
    try:
        yield
    except (ValueError, TypeError, ArithmeticError, MemoryError, AttributeError) as exc:
        if isinstance(exc, InputMetadataError) or not _raised_in_zarr(exc):
            raise
        detail = str(exc) or type(exc).__name__
        raise InputMetadataError(
            where,
            f"its Zarr metadata is corrupt or not readable by this zarr {zarr.__version__} "
            f"({type(exc).__name__}: {detail}); nothing was read",
        ) from None


def _raised_in_zarr(exc: BaseException) -> bool:
    tb = exc.__traceback__
    module = ""
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        tb = tb.tb_next
    return module.split(".")[0] in ("zarr", "numcodecs")


class MissingChunksError(ValueError):
    """Chunks of an input array are not stored.

    Parameters
    ----------
    where : str
        The array as the message names it (its URL, secrets redacted).
    array : str
        The array's path in its store.
    missing : list of str
        The store keys of the missing chunks (or shards), in order: all of them, or the
        first ones when ``n_missing`` says how many there are.
    n_chunks : int
        The number of chunks (or shards) the array has.
    n_missing : int, optional
        How many are missing (default: as many as ``missing`` names).

    Attributes
    ----------
    array, missing, n_chunks, n_missing
        The parameters of those names.
    """

    def __init__(
        self,
        where: str,
        array: str,
        missing: list[str],
        n_chunks: int,
        n_missing: int | None = None,
    ) -> None:
        self.where = where
        self.array = array
        self.missing = missing
        self.n_chunks = n_chunks
        self.n_missing = len(missing) if n_missing is None else n_missing
        shown = ", ".join(missing[:_SHOWN])
        extra = self.n_missing - min(len(missing), _SHOWN)
        more = f" and {extra:,} more" if extra > 0 else ""
        super().__init__(
            f"{self.n_missing:,} of {n_chunks:,} chunks of {where} are missing ({shown}{more}): a "
            "broken copy or an interrupted write? Zarr would read them as the fill value. If "
            "the array is sparse on purpose (zarr stores no chunk equal to the fill value "
            "unless written with write_empty_chunks=True), open it with "
            "missing_chunks='fill' (in a pipeline, `missing_chunks: fill` on the input)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # raised in a worker (a chunk gone at read time), unpickled in the client
        return type(self), (self.where, self.array, self.missing, self.n_chunks, self.n_missing)


def chunk_size_problem(size: Any) -> str | None:
    """Why ``size`` cannot be a chunk size along a dim (an int of at least 1, or -1 for the
    whole dim), or None. A bool is not a size; forms dask reads itself (``"auto"``, a tuple
    of sizes) are left to dask. The one rule for ``open_input(chunks=...)`` and a pipeline
    input's ``chunks:`` (where 0 was a ZeroDivisionError)."""
    if isinstance(size, (bool, np.bool_)):
        return f"must be an integer, not a boolean; got {size!r}"
    if isinstance(size, numbers.Integral) and size < 1 and size != -1:
        return (
            "a chunk size must be a positive number of elements, or -1 for the whole dim; "
            f"got {size}"
        )
    return None


def _stored_grid(arr: zarr.Array) -> tuple[int, ...]:
    """How many stored objects (chunks, or shards for a sharded array) along each dim."""
    shards = getattr(arr, "shards", None)
    per_key = shards if shards is not None else arr.chunks
    return tuple(math.ceil(s / c) for s, c in zip(arr.shape, per_key, strict=True))


def check_metadata(arr: zarr.Array, where: str) -> None:
    """Refuse metadata ddr cannot read an array with (no chunk is read).

    Raises :class:`InputMetadataError` for a chunk size below 1 (as stored: zarr 3.4 reads
    a stored 0 as 1, with a warning, so the chunks on disk no longer match their keys) and
    for more than :data:`MAX_INPUT_CHUNKS` chunks.
    """
    chunks = tuple(int(c) for c in arr.chunks)
    stored = getattr(arr.metadata, "_stored_document", None)  # zarr 3.4: read as repaired
    if any(c < 1 for c in chunks) or stored is not None:
        said = _stored_chunk_shape(stored) if stored is not None else list(chunks)
        raise InputMetadataError(
            where,
            f"its Zarr metadata is corrupt: the chunk shape is {said} (shape "
            f"{list(arr.shape)}); every chunk must have at least 1 element along each dim. "
            "Nothing was read",
        )
    n_chunks = math.prod(math.ceil(s / c) for s, c in zip(arr.shape, chunks, strict=True))
    if n_chunks > MAX_INPUT_CHUNKS:
        raise InputMetadataError(
            where,
            f"its metadata describes {n_chunks:,} chunks (shape {list(arr.shape)} in chunks "
            f"of {list(chunks)}); ddr reads at most {MAX_INPUT_CHUNKS:,} chunks of one input, "
            "each a task in every pass. If that shape is right, store the array in larger "
            "chunks; if not, its metadata is corrupt. Nothing was read",
        )


def _stored_chunk_shape(document: Any) -> Any:
    try:
        if "chunk_grid" in document:
            return document["chunk_grid"]["configuration"]["chunk_shape"]
        return document["chunks"]
    except (KeyError, TypeError):
        return "not readable"


def _missing(arr: zarr.Array, limit: int | None) -> tuple[list[str], int, int]:
    """The store keys of the first ``limit`` (all, for None) chunks (shards, if sharded) of
    ``arr`` that are not stored, how many are missing, and how many it has.

    One ``list_prefix`` of its store; each listed key is mapped back to its grid position
    (its numbers, checked by encoding them again), so the work follows the keys stored and
    the keys named, never the size of the grid."""
    from zarr.core.sync import sync  # zarr's own loop, the one its stores are bound to

    grid = _stored_grid(arr)
    n_chunks = math.prod(grid)
    if n_chunks == 0:
        return [], 0, 0
    base = arr.store_path.path
    prefix = f"{base}/" if base else ""

    async def listed() -> set[str]:
        return {key async for key in arr.store.list_prefix(prefix)}

    encode = arr.metadata.encode_chunk_key
    present: set[tuple[int, ...]] = set()
    for key in sync(listed()):
        rel = key[len(prefix) :]
        coords = tuple(int(n) for n in _NUMBER.findall(rel))[: len(grid)]
        if (
            len(coords) == len(grid)
            and all(c < g for c, g in zip(coords, grid, strict=True))
            and encode(coords) == rel
        ):
            present.add(coords)
    n_missing = n_chunks - len(present)
    keys: list[str] = []
    if n_missing and limit != 0:
        # in C order, lazily (itertools.product would first hold every range as a tuple)
        for flat in range(n_chunks):
            coords = _unravel(flat, grid)
            if coords not in present:
                keys.append(prefix + encode(coords))
                if len(keys) == limit or len(keys) == n_missing:
                    break
    return keys, n_missing, n_chunks


def _unravel(flat: int, grid: tuple[int, ...]) -> tuple[int, ...]:
    """The grid position of the ``flat``-th chunk in C order."""
    coords = []
    for n in reversed(grid):
        flat, i = divmod(flat, n)
        coords.append(i)
    return tuple(reversed(coords))


def missing_chunk_keys(arr: zarr.Array, limit: int | None = None) -> tuple[list[str], int]:
    """The store keys of ``arr``'s chunks (shards, if sharded) that are not stored, in
    order (the first ``limit`` of them, if given), and how many chunks it has; from one
    ``list_prefix`` of its store, in time that follows the stored keys and ``limit``."""
    keys, _, n_chunks = _missing(arr, limit)
    return keys, n_chunks


def check_chunks(arr: zarr.Array, where: str, missing_chunks: MissingChunks = "error") -> None:
    """Refuse an array ddr cannot read (:func:`check_metadata`), then raise
    :class:`MissingChunksError` naming the chunks of ``arr`` (described as ``where`` in the
    message) that are not stored, unless ``missing_chunks="fill"``."""
    if missing_chunks not in ("error", "fill"):
        raise ValueError(f"missing_chunks must be 'error' or 'fill'; got {missing_chunks!r}")
    check_metadata(arr, where)
    if missing_chunks == "fill":
        return
    keys, n_missing, n_chunks = _missing(arr, _KEPT)
    if n_missing:
        raise MissingChunksError(where, arr.store_path.path, keys, n_chunks, n_missing)
