"""Whole row blocks of a Zarr array chunked along its feature axes, one task per block.

Stores made for maps are chunked along space (time x lat/4 x lon/4, or one time step per
chunk); ddr reads rows (every feature of a sample). dask's ``rechunk`` would give them, at
the cost of a task per stored chunk, a task per merge and every chunk moved between workers.
:func:`row_blocks` gives one task per row block instead, which reads every stored chunk of
its rows across the feature axes (ddr's reader, :class:`~ddr.io.zarr_chunks.StoredChunks`:
decoded without zarr's copy) into the block it returns. Each stored chunk belongs to one
block, so a pass reads each stored byte once, as the CSR reader does
(:func:`ddr.io.csr.csr_blocks`).

Row blocks follow the stored chunks along the first sample axis. Where those are thin (a
few time steps of a whole grid in several chunks) consecutive ones are grouped, up to dask's
``array.chunk-size`` per block (what dask aims a chunk at; 128 MiB by default), into no fewer
than :data:`~ddr.io.csr.MIN_BLOCKS` blocks, and never beyond what one task of a worker can
hold (:func:`ddr.stats._whole_rows.task_budget`). Whether the smallest block fits is
checked where the rows are made (:func:`ddr.stats._whole_rows.check_row_blocks`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from dask.utils import parse_bytes

from ddr.io.csr import MIN_BLOCKS
from ddr.io.zarr_chunks import StoredChunks
from ddr.stats._whole_rows import block_task_nbytes, task_budget

__all__ = ["block_rows", "row_blocks"]


def block_rows(stored: int, n: int, row_bytes: int, target: int, cap: int | None = None) -> int:
    """Rows per block along an axis of ``n`` stored in chunks of ``stored``: a whole number
    of stored chunks, about ``target`` bytes (``row_bytes`` a row) and at least
    :data:`~ddr.io.csr.MIN_BLOCKS` blocks, and at most ``cap`` rows when given (one stored
    chunk at least, whatever the cap: a chunk is never split between tasks).

    Parameters
    ----------
    stored, n : int
        The stored chunk and the axis length.
    row_bytes : int
        Bytes of one row across the features (as stored).
    target : int
        Bytes aimed at per block.
    cap : int, optional
        The most rows one task can hold.
    """
    n_chunks = -(-n // stored)
    group = max(target // max(stored * row_bytes, 1), 1)
    group = min(group, max(n_chunks // MIN_BLOCKS, 1))
    if cap is not None:
        group = min(group, max(cap // stored, 1))
    return stored * group


def row_blocks(source: StoredChunks, whole_axes: tuple[int, ...]) -> da.Array:
    """A dask array over ``source`` with one chunk along ``whole_axes``, each block read by
    one task from every stored chunk it covers.

    Parameters
    ----------
    source : StoredChunks
        ddr's reader of a Zarr array (its missing-chunk policy is kept).
    whole_axes : tuple of int
        The feature axes; every other axis indexes samples. Blocks follow the stored chunks
        along the sample axes, grouped along the first of them (see the module docstring).

    Returns
    -------
    dask.array.Array
        The Zarr array's shape and dtype; one chunk along each axis of ``whole_axes``.
    """
    shape, stored = source.shape, source.chunks
    whole = tuple(sorted(a % source.ndim for a in whole_axes))
    sample = [a for a in range(source.ndim) if a not in whole]
    itemsize = np.dtype(source.dtype).itemsize
    width = math.prod(shape[a] for a in whole)
    chunks: list[tuple[int, ...]] = []
    for a in range(source.ndim):
        if a in whole:
            chunks.append((shape[a],))
            continue
        step = stored[a]
        if sample and a == sample[0]:
            # rows per unit of the first sample axis: a block of it holds the inner ones whole
            inner = math.prod(stored[b] for b in sample[1:])
            budget = task_budget()
            per_unit = block_task_nbytes(inner, width, itemsize)
            cap = None if budget is None else budget.per_task // max(per_unit, 1)
            target = parse_bytes(dask.config.get("array.chunk-size"))
            step = block_rows(stored[a], shape[a], inner * width * itemsize, target, cap)
        chunks.append(_spans(shape[a], step))
    token = tokenize(source, tuple(chunks))
    name = f"ddr-row-blocks-{token}"
    starts = [np.cumsum((0, *c[:-1])).tolist() for c in chunks]
    layer: dict[Any, Any] = {}
    for index in itertools.product(*(range(len(c)) for c in chunks)):
        region = tuple(
            (int(starts[a][i]), int(starts[a][i] + chunks[a][i])) for a, i in enumerate(index)
        )
        layer[(name, *index)] = (_read_block, source, region)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=())
    meta = np.empty((0,) * source.ndim, dtype=source.dtype)
    return da.Array(graph, name, tuple(chunks), meta=meta)


def _spans(n: int, step: int) -> tuple[int, ...]:
    return tuple(min(step, n - s) for s in range(0, n, step)) or (0,)


def _read_block(source: StoredChunks, region: tuple[tuple[int, int], ...]) -> np.ndarray:
    """The values in ``region`` (``[start, stop)`` per axis, on stored chunk bounds), read
    chunk by chunk: each through ddr's reader, which decodes it without zarr's copy, and
    placed in the block (the one copy a block made of several chunks needs)."""
    shape = tuple(stop - start for start, stop in region)
    whole = tuple(slice(start, stop) for start, stop in region)
    if not source.direct:
        # zarr's own slicing reads each chunk (or shard) the region covers once
        return np.asarray(source[whole])
    grid = [
        range(start // c, -(-stop // c))
        for (start, stop), c in zip(region, source.chunks, strict=True)
    ]
    cells = list(itertools.product(*grid))
    if len(cells) == 1:
        return np.asarray(source[whole])
    out = np.empty(shape, dtype=source.dtype)
    for coords in cells:
        key = tuple(
            slice(i * c, min((i + 1) * c, n))
            for i, c, n in zip(coords, source.chunks, source.shape, strict=True)
        )
        at = tuple(
            slice(k.start - start, k.stop - start)
            for k, (start, _) in zip(key, region, strict=True)
        )
        out[at] = source[key]
    return out
