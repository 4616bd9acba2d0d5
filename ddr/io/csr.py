"""Sparse rows stored as CSR in Zarr (the AnnData on-disk layout), read as dask arrays of
scipy.sparse row blocks, and written the same way, never densified.

The layout (AnnData's ``csr_matrix`` encoding): a group whose attributes are
``encoding-type: "csr_matrix"``, ``encoding-version`` and ``shape: [n_rows, n_cols]``, holding
three 1-D arrays: ``data`` (the stored values, row after row), ``indices`` (their columns)
and ``indptr`` (``n_rows + 1`` offsets: row ``i`` is ``data[indptr[i]:indptr[i + 1]]``).
AnnData files keep their count matrix there (``X``), and the column names in the sibling
dataframe group ``var`` (its ``_index`` array).

:func:`open_csr` checks what the metadata can tell before anything is read (the attributes,
the arrays' shapes and dtypes, then ``indptr[0] == 0`` and ``indptr[-1] == len(data)`` from
two elements), and each block task checks its own rows as it assembles them (offsets that
never decrease and stay inside ``data``, column indices inside ``[0, n_cols)``). Each stored
chunk of ``indptr``, ``data`` and ``indices`` is read by one task, and a row block is
assembled from the chunks that hold its rows (the offsets at the block bounds are read on
the client when the graph is made, to know which): one pass reads every stored byte once,
whether or not blocks and chunks align. Chunks are read through
:class:`ddr.io.zarr_chunks.StoredChunks`, so a chunk that does not decode raises
:class:`ddr.io.CorruptChunkError` naming the array and the chunk's key. Groups are opened
through :mod:`ddr.io.locations`, so paths and URLs alike.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
import scipy.sparse
import zarr
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from ddr.io.stored_chunks import MissingChunks
from ddr.io.zarr_chunks import StoredChunks

__all__ = [
    "CSR_ENCODING",
    "CsrWriter",
    "csr_feature_names",
    "is_csr_group",
    "is_sparse_group",
    "open_csr",
    "open_csr_group",
]

logger = logging.getLogger("ddr.io.csr")

CSR_ENCODING = "csr_matrix"
CSR_VERSION = "0.1.0"
#: rows per dask block by default: about this many stored values per block (8 Mi values:
#: 64 MiB of float32 values and int32 columns)
TARGET_BLOCK_NNZ = 2**23
MIN_BLOCKS = 8


def is_csr_group(node: Any) -> bool:
    """Whether a zarr node is a group in the CSR encoding."""
    return isinstance(node, zarr.Group) and node.attrs.get("encoding-type") == CSR_ENCODING


def is_sparse_group(node: Any) -> bool:
    """Whether a zarr node is a group in one of AnnData's sparse encodings (CSR or CSC: only
    CSR is read, and a CSC group is refused with what to do)."""
    return isinstance(node, zarr.Group) and node.attrs.get("encoding-type") in (
        CSR_ENCODING,
        "csc_matrix",
    )


@dataclass(frozen=True)
class _Source:
    """The three arrays of a CSR group, read as :class:`~ddr.io.zarr_chunks.StoredChunks`
    (a stored chunk read whole is decoded by ddr without a copy; one that does not decode
    raises :class:`~ddr.io.CorruptChunkError` naming the array and the chunk's key), and
    what the block tasks check against (small and picklable: the arrays carry their store,
    not their data)."""

    data: StoredChunks
    indices: StoredChunks
    indptr: StoredChunks
    n_cols: int
    nnz: int
    where: str

    def __dask_tokenize__(self) -> Any:
        return (
            "ddr-csr",
            self.where,
            str(self.data.dtype),
            self.nnz,
            self.n_cols,
            self.data.missing,
        )


def _fail(where: str, message: str) -> ValueError:
    return ValueError(f"CSR group {where!r}: {message}")


def open_csr_group(
    group: zarr.Group, where: str, missing_chunks: MissingChunks = "error"
) -> tuple[_Source, tuple[int, int], np.dtype]:
    """Check a CSR group from its metadata (and two elements of ``indptr``); return what the
    block tasks need (a chunk not stored when it is read: ``missing_chunks``), the shape and
    the dtype of the values."""
    attrs = group.attrs.asdict()
    kind = attrs.get("encoding-type")
    if kind != CSR_ENCODING:
        hint = ""
        if kind == "csc_matrix":
            hint = " (CSC stores columns; ddr reads rows: convert it to CSR)"
        raise _fail(where, f"encoding-type is {kind!r}, not {CSR_ENCODING!r}{hint}")
    if "encoding-version" not in attrs:
        raise _fail(where, "the attribute 'encoding-version' is missing")
    shape = attrs.get("shape")
    if (
        not isinstance(shape, (list, tuple))
        or len(shape) != 2
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
    ):
        raise _fail(where, f"the attribute 'shape' must be two non-negative ints; got {shape!r}")
    n_rows, n_cols = shape
    arrays = {}
    for name in ("data", "indices", "indptr"):
        try:
            arr = group[name]
        except KeyError:
            raise _fail(where, f"the array {name!r} is missing") from None
        if not isinstance(arr, zarr.Array) or arr.ndim != 1:
            raise _fail(where, f"{name!r} must be a 1-D array")
        arrays[name] = arr
    data, indices, indptr = arrays["data"], arrays["indices"], arrays["indptr"]
    if np.dtype(data.dtype).kind not in "biuf":
        raise _fail(where, f"'data' must be numeric; got dtype {data.dtype}")
    for name in ("indices", "indptr"):
        if np.dtype(arrays[name].dtype).kind not in "iu":
            raise _fail(where, f"{name!r} must hold integers; got dtype {arrays[name].dtype}")
    if indptr.shape[0] != n_rows + 1:
        raise _fail(
            where,
            f"'indptr' has {indptr.shape[0]} entries; shape {shape} needs n_rows + 1 = "
            f"{n_rows + 1}",
        )
    if data.shape != indices.shape:
        raise _fail(
            where,
            f"'data' has {data.shape[0]} values and 'indices' {indices.shape[0]}; they must "
            "be equal",
        )
    nnz = int(data.shape[0])
    first, last = int(indptr[0]), int(indptr[n_rows])
    if first != 0 or last != nnz:
        raise _fail(
            where,
            f"'indptr' runs from {first} to {last}; it must run from 0 to len(data) = {nnz}",
        )
    parts = tuple(StoredChunks(a, missing_chunks) for a in (data, indices, indptr))
    return _Source(*parts, int(n_cols), nnz, where), (n_rows, n_cols), data.dtype


def _chunk_len(arr: StoredChunks) -> int:
    """Elements per read of a 1-D zarr array: its shard where it is sharded, else its chunk."""
    shards = getattr(arr.array, "shards", None)
    return int((shards or arr.chunks)[0])


def _read_chunk(arr: StoredChunks, start: int, stop: int) -> np.ndarray:
    """Elements ``[start, stop)`` of a 1-D array: one stored chunk (or shard), or a run of
    them."""
    return np.asarray(arr[(slice(start, stop),)])


def _gather(arr: Any, first: int, last: int, begins: list[int], parts: list[Any]) -> np.ndarray:
    """Elements ``[first, last)`` of a 1-D array from ``parts`` in order: each a chunk a
    shared task read (an array starting at element ``begins[i]``) or a ``slice`` of ``arr``
    to read here."""
    pieces = []
    for begin, part in zip(begins, parts, strict=True):
        values = _read_chunk(arr, part.start, part.stop) if isinstance(part, slice) else part
        pieces.append(values[max(first, begin) - begin : min(last, begin + len(values)) - begin])
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=arr.dtype)


def _assemble(
    src: _Source,
    start: int,
    stop: int,
    lo: int,
    hi: int,
    ptr_parts: list[Any],
    value_parts: list[Any],
    index_parts: list[Any],
) -> scipy.sparse.csr_matrix:
    """Rows ``[start, stop)`` as a CSR matrix, their values expected at ``[lo, hi)``, from the
    parts of ``indptr``, ``data`` and ``indices`` that hold them (see :func:`_gather`),
    checked as they are read."""
    ptr = _gather(src.indptr, start, stop + 1, *ptr_parts).astype(np.int64)
    step = np.diff(ptr)
    if (step < 0).any():
        row = start + int(np.flatnonzero(step < 0)[0])
        raise _fail(
            src.where,
            f"'indptr' decreases at row {row} ({ptr[row - start]} then "
            f"{ptr[row - start + 1]}); offsets must never decrease",
        )
    if ptr[0] < 0 or ptr[-1] > src.nnz:
        raise _fail(
            src.where, f"'indptr' for rows {start}..{stop} points outside data (0..{src.nnz})"
        )
    if ptr[0] != lo or ptr[-1] != hi:  # not what the graph was made from
        raise _fail(src.where, f"'indptr' for rows {start}..{stop} changed while it was read")
    cols = _gather(src.indices, lo, hi, *index_parts)
    if cols.size and (cols.min() < 0 or cols.max() >= src.n_cols):
        bad = cols[(cols < 0) | (cols >= src.n_cols)][:3].tolist()
        raise _fail(
            src.where,
            f"column indices {bad} in rows {start}..{stop} lie outside [0, n_cols={src.n_cols})",
        )
    values = _gather(src.data, lo, hi, *value_parts)
    return scipy.sparse.csr_matrix((values, cols, ptr - lo), shape=(stop - start, src.n_cols))


def default_chunk_rows(n_rows: int, nnz: int) -> int:
    """Rows per block: about :data:`TARGET_BLOCK_NNZ` stored values per block, and at least
    :data:`MIN_BLOCKS` blocks (so that small data is still read by several workers)."""
    if n_rows == 0:
        return 1
    per_row = max(nnz / n_rows, 1.0)
    return int(np.clip(min(TARGET_BLOCK_NNZ // per_row, -(-n_rows // MIN_BLOCKS)), 1, n_rows))


def _offsets_at(src: _Source, rows: list[int]) -> np.ndarray:
    """``indptr`` at the block bounds, read on the client (the chunks of ``indptr`` that hold
    them, once), clipped into ``[0, nnz]`` and made non-decreasing so that the graph is
    well formed: the blocks check the real offsets when they read them."""
    values = np.asarray(src.indptr.array.get_coordinate_selection(np.asarray(rows)), dtype=np.int64)
    return np.maximum.accumulate(np.clip(values, 0, src.nnz))


def csr_blocks(
    group: zarr.Group,
    where: str,
    chunk_rows: int | None = None,
    *,
    read: Callable[..., Any] | None = None,
    missing_chunks: MissingChunks = "error",
) -> da.Array:
    """The dask array of CSR row blocks of an opened CSR group (see :func:`open_csr`).

    Each block task reads the chunks (or shards) of ``indptr``, ``data`` and ``indices`` that
    only it needs; a chunk that two blocks share is read once by a task of its own and handed
    to both. So a pass reads every stored byte once whatever the blocks, and moves between
    workers only the shared chunks (about one per block). The offsets at the block bounds are
    read on the client when the graph is made. ``read``, when given, runs every reading task
    as ``read(function, *args)`` (the pipeline's counted reads:
    ``ddr.pipeline._counting.counted_call``). A chunk that is not stored when a block reads
    it raises :class:`~ddr.io.MissingChunksError` (``missing_chunks="error"``) or is read as
    the fill value (``"fill"``).
    """
    src, (n_rows, n_cols), dtype = open_csr_group(group, where, missing_chunks)
    if chunk_rows is not None and (isinstance(chunk_rows, bool) or int(chunk_rows) < 1):
        raise ValueError(f"chunk_rows must be a positive int; got {chunk_rows!r}")
    rows = int(chunk_rows) if chunk_rows is not None else default_chunk_rows(n_rows, src.nnz)
    starts = list(range(0, n_rows, rows)) or [0]
    bounds = [*starts, n_rows]
    offsets = _offsets_at(src, bounds)
    token = tokenize(src, rows, read)
    name = f"ddr-csr-{token}"
    spans = list(itertools.pairwise(bounds))
    # the elements of each array each block needs: [rows + 1] of indptr, [values) of the rest
    needs = {
        "indptr": (src.indptr, [(s, e + 1) for s, e in spans]),
        "data": (src.data, [(int(lo), int(hi)) for lo, hi in itertools.pairwise(offsets)]),
    }
    needs["indices"] = (src.indices, needs["data"][1])
    layer: dict[Any, Any] = {}
    parts: dict[str, list[list[Any]]] = {}
    for label, (arr, ranges) in needs.items():
        parts[label] = _parts(arr, ranges, f"ddr-csr-{label}-{token}", layer, read)
    for i, (s, e) in enumerate(spans):
        task = (_assemble, src, s, e, int(offsets[i]), int(offsets[i + 1]),
                parts["indptr"][i], parts["data"][i], parts["indices"][i])  # fmt: skip
        layer[(name, i, 0)] = task if read is None else (read, *task)
    chunks = (tuple(e - s for s, e in itertools.pairwise(bounds)), (n_cols,))
    meta = scipy.sparse.csr_matrix((0, 0), dtype=dtype)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=())
    return da.Array(graph, name, chunks, meta=meta)


def _parts(
    arr: Any,
    ranges: list[tuple[int, int]],
    label: str,
    layer: dict[Any, Any],
    read: Callable[..., Any] | None,
) -> list[list[Any]]:
    """For each block's element range of ``arr``, what :func:`_gather` takes: a chunk that
    several blocks need is read once by a task of its own (added to ``layer``) and handed to
    each; the chunks only one block needs are read by that block, as one slice per run."""
    size, total = _chunk_len(arr), int(arr.shape[0])
    users = collections.Counter(
        j
        for first, last in ranges
        if last > first
        for j in range(first // size, (last - 1) // size + 1)
    )
    out = []
    for first, last in ranges:
        begins: list[int] = []
        items: list[Any] = []
        for j in range(first // size, (last - 1) // size + 1) if last > first else ():
            lo, hi = max(first, j * size), min(last, (j + 1) * size, total)
            if users[j] > 1:
                key = (label, j)
                if key not in layer:
                    task = (_read_chunk, arr, j * size, min((j + 1) * size, total))
                    layer[key] = task if read is None else (read, *task)
                begins.append(j * size)
                items.append(key)
            elif items and isinstance(items[-1], slice) and items[-1].stop == lo:
                items[-1] = slice(items[-1].start, hi)  # one read for a run of chunks
            else:
                begins.append(lo)
                items.append(slice(lo, hi))
        out.append([begins, items])  # lists: dask substitutes the chunk keys in them
    return out


def open_csr(
    url: str | os.PathLike,
    component: str | None = None,
    *,
    chunk_rows: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> da.Array:
    """A CSR group in Zarr as a dask array of scipy.sparse CSR row blocks.

    Parameters
    ----------
    url : str or path-like
        The store: a local path or a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``,
        ``file://``, ``memory://``).
    component : str, optional
        The CSR group's path inside the store (``"X"`` for an AnnData file); None when the
        store's root is the CSR group.
    chunk_rows : int, optional
        Rows per block; by default about 8 Mi stored values per block, and at least 8
        blocks.
    storage_options : mapping, optional
        Options of the URL's filesystem.

    Returns
    -------
    dask.array.Array
        Shape ``(n_rows, n_cols)``, the dtype of ``data``, blocks of whole rows (one chunk
        along columns) that are ``scipy.sparse.csr_matrix``.

    Raises
    ------
    ValueError
        Metadata that do not describe a CSR matrix (encoding, shape, ``indptr`` length and
        ends, array dtypes); blocks whose offsets or column indices are inconsistent raise
        when they are read.
    """
    from ddr.io.locations import resolve

    loc = resolve(url, storage_options)
    where = loc.url if component is None else f"{loc.url}/{component}"
    with loc.errors("read"):
        node = zarr.open(store=loc.store(), path=component or "", mode="r")
        if not isinstance(node, zarr.Group):
            raise _fail(where, "this is an array, not a group of data, indices and indptr")
        return csr_blocks(node, where, chunk_rows)


def csr_feature_names(parent: zarr.Group, n_cols: int) -> np.ndarray | None:
    """Column names of a CSR matrix stored in ``parent`` as AnnData stores them (the ``var``
    dataframe's index), or None."""
    var = parent.get("var") if hasattr(parent, "get") else None
    if not isinstance(var, zarr.Group) or var.attrs.get("encoding-type") != "dataframe":
        return None
    index = var.get(str(var.attrs.get("_index", "_index")))
    if not isinstance(index, zarr.Array) or index.shape != (n_cols,):
        return None
    # numpy's StringDType (how Zarr v3 strings read) has no fixed width to cast to
    return np.array([str(v) for v in index[:]])


class CsrWriter:
    """Append CSR row blocks to a new CSR group, writing whole Zarr chunks as they fill.

    The number of stored values is known only at the end, so ``data`` and ``indices`` grow
    (a metadata update per chunk); every chunk is written once, whole, except the last.

    Parameters
    ----------
    parent : zarr.Group
        Where to create the group (opened for writing).
    name : str
        The group's name.
    n_cols : int
    dtype : dtype
        Of the stored values.
    chunk_nnz : int
        Values per Zarr chunk of ``data`` and ``indices`` (default 512 Ki: 2 MiB of float32).
        Row blocks need not align with them: the reader shares a chunk two blocks hold.
    """

    def __init__(
        self, parent: zarr.Group, name: str, n_cols: int, dtype: Any, chunk_nnz: int = 2**19
    ) -> None:
        self.group = parent.create_group(name)
        self.n_cols = int(n_cols)
        index_dtype = np.int32 if n_cols < 2**31 else np.int64
        self.data = self.group.create_array("data", shape=(0,), chunks=(chunk_nnz,), dtype=dtype)
        self.indices = self.group.create_array(
            "indices", shape=(0,), chunks=(chunk_nnz,), dtype=index_dtype
        )
        self._chunk = chunk_nnz
        self._values: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._buffered = 0
        self._written = 0
        self._ptr: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
        self.n_rows = 0

    def append(self, block: scipy.sparse.csr_matrix) -> None:
        """Append the rows of a CSR block (its columns must be ``n_cols``)."""
        block = scipy.sparse.csr_matrix(block)
        if block.shape[1] != self.n_cols:
            raise ValueError(f"block has {block.shape[1]} columns; expected {self.n_cols}")
        block.sort_indices()
        total = self._written + self._buffered
        self._ptr.append(total + block.indptr[1:].astype(np.int64))
        self.n_rows += block.shape[0]
        self._values.append(block.data.astype(self.data.dtype, copy=False))
        self._cols.append(block.indices.astype(self.indices.dtype, copy=False))
        self._buffered += block.nnz
        if self._buffered >= self._chunk:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        values = np.concatenate(self._values) if self._values else np.zeros(0)
        cols = np.concatenate(self._cols) if self._cols else np.zeros(0, dtype=np.int64)
        whole = len(values) if final else (len(values) // self._chunk) * self._chunk
        if whole:
            end = self._written + whole
            for arr, part in ((self.data, values), (self.indices, cols)):
                arr.resize((end,))
                arr[self._written : end] = part[:whole]
            self._written = end
        self._values, self._cols = [values[whole:]], [cols[whole:]]
        self._buffered = len(values) - whole

    def close(self, attrs: Mapping[str, Any] | None = None) -> None:
        """Write the rest of the values, ``indptr`` and the CSR attributes."""
        self._flush(final=True)
        indptr = np.concatenate(self._ptr)
        ptr = self.group.create_array(
            "indptr", shape=indptr.shape, chunks=(max(min(len(indptr), 2**22), 1),), dtype=np.int64
        )
        ptr[:] = indptr
        self.group.update_attributes(
            {
                "encoding-type": CSR_ENCODING,
                "encoding-version": CSR_VERSION,
                "shape": [int(self.n_rows), self.n_cols],
                **(attrs or {}),
            }
        )
        logger.debug(
            "wrote CSR group %s: %d x %d, %d values",
            self.group.path,
            self.n_rows,
            self.n_cols,
            self._written,
        )


def write_feature_names(parent: zarr.Group, names: Iterable[str]) -> None:
    """The column names as AnnData keeps them: a ``var`` dataframe group with an ``_index``
    string array."""
    names = np.asarray(list(names), dtype=str)
    var = parent.create_group("var")
    var.update_attributes(
        {
            "encoding-type": "dataframe",
            "encoding-version": "0.2.0",
            "_index": "_index",
            "column-order": [],
        }
    )
    idx = var.create_array("_index", shape=names.shape, dtype=str, chunks=(max(len(names), 1),))
    idx[:] = names
    idx.update_attributes({"encoding-type": "string-array", "encoding-version": "0.2.0"})
