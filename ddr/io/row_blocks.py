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
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
from dask.utils import parse_bytes

from ddr.io.csr import MIN_BLOCKS
from ddr.io.zarr_chunks import StoredChunks
from ddr.stats._whole_rows import block_task_nbytes, task_budget

__all__ = ["RowBlocksLayer", "block_rows", "row_blocks"]


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
    regions = {
        index: tuple(
            (int(starts[a][i]), int(starts[a][i] + chunks[a][i])) for a, i in enumerate(index)
        )
        for index in itertools.product(*(range(len(c)) for c in chunks))
    }
    tasks = {(name, *index): (_read_block, source, region) for index, region in regions.items()}
    layer = RowBlocksLayer(tasks, source, regions)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=())
    meta = np.empty((0,) * source.ndim, dtype=source.dtype)
    return da.Array(graph, name, tuple(chunks), meta=meta)


class RowBlocksLayer(MaterializedLayer):
    """The tasks of :func:`row_blocks`, which also tell what each block reads: a task that
    puts the rows elsewhere (a Dataset's variables side by side,
    :mod:`ddr.stats._grid_blocks`) can then read the stored chunks itself
    (``source.pieces(regions[index])``) instead of copying the block this layer makes.

    Parameters
    ----------
    tasks : dict
        The layer's tasks, one per block.
    source : StoredChunks
        What every block is read from.
    regions : dict
        A block's index (its chunk coordinates) -> its ``[start, stop)`` per axis.
    """

    def __init__(
        self,
        tasks: dict[Any, Any],
        source: StoredChunks,
        regions: dict[tuple[int, ...], tuple[tuple[int, int], ...]],
    ):
        super().__init__(tasks)
        self.source = source
        self.regions = regions


def _spans(n: int, step: int) -> tuple[int, ...]:
    return tuple(min(step, n - s) for s in range(0, n, step)) or (0,)


def _read_block(source: StoredChunks, region: tuple[tuple[int, int], ...]) -> np.ndarray:
    """The values in ``region`` (on stored chunk bounds), read chunk by chunk through ddr's
    reader (:meth:`~ddr.io.zarr_chunks.StoredChunks.pieces`, decoded without zarr's copy)
    and placed in the block: the one copy a block made of several chunks needs."""
    shape = tuple(stop - start for start, stop in region)
    out = None
    for at, values in source.pieces(region):
        if out is None:
            if values.shape == shape:  # one chunk (or zarr's read of the region): as read
                return np.asarray(values)
            out = np.empty(shape, dtype=source.dtype)
        out[at] = values
    assert out is not None  # a region holds one chunk at least
    return out
