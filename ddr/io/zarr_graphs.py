"""Dask arrays that only read a Zarr array, re-read through ddr's chunk reader.

``dask.array.from_zarr``, ``xarray.open_zarr`` and ``xarray.open_dataset(engine="zarr")``
give dask arrays whose tasks slice a Zarr array with zarr's ``__getitem__`` (a decode and a
copy per chunk; :mod:`ddr.io.zarr_chunks` reads the same chunks in about 0.65x the time).
:func:`with_ddr_reader` recognises such an array from its graph, through dask's public graph
types, and gives the same array read by :func:`ddr.io.zarr_chunks.from_zarr`.

It replaces a graph only when it can prove the values are the same, bit for bit:

- the array's graph is the one layer ``dask.array.from_array`` builds: a
  :class:`~dask.blockwise.Blockwise` layer calling dask's ``getter`` on a source object and
  an :class:`~dask.layers.ArraySliceDep` (plus the layer holding the source, when not
  inlined). Rechunking, arithmetic, ``where``, a transpose, any further step is another
  layer, so the graph stays as it is. (A dtype-preserving ``astype`` or a no-op ``rechunk``
  return the array itself in dask, so they pass.)
- the source is a :class:`zarr.Array`, or xarray's zarr backend array behind only its lazy
  indexing adapters (``ImplicitToExplicitIndexingAdapter``, ``CopyOnWriteArray``,
  ``MemoryCachedArray``, a ``LazilyIndexedArray`` selecting everything). CF decoding
  (``scale_factor``, ``add_offset``, a ``_FillValue`` mask, endianness or bool conversion)
  wraps the backend array in xarray's element-wise function arrays: not recognised, so
  xarray's decoding runs as usual.
- the dask array has the Zarr array's shape and dtype, its chunks are the stored chunks,
  and ddr reads that array's chunks itself (not sharded, C order, a zarr with what the
  reader needs: :func:`ddr.io.zarr_chunks.from_zarr` says).

Asked for whole rows (``whole_axes``: the feature axes) of such an array chunked along them,
or of an array :func:`ddr.io.zarr_chunks.from_zarr` made, it gives the same values in row
blocks, each read by one task from every stored chunk of its rows
(:func:`ddr.io.row_blocks.row_blocks`), whatever its dask chunks.

Anything else (an older dask without ``Blockwise.task``, an xarray whose adapters are not
found) keeps dask's graph: recognition is a speed-up, never a requirement.
"""

from __future__ import annotations

import logging
from typing import Any

import dask.array as da
import numpy as np
import zarr
from dask.highlevelgraph import HighLevelGraph

__all__ = ["with_ddr_reader", "zarr_source"]

logger = logging.getLogger(__name__)


def with_ddr_reader(x: da.Array, whole_axes: tuple[int, ...] = ()) -> da.Array:
    """``x`` read by ddr's chunk reader when ``x`` only reads a Zarr array (see the module
    docstring), else ``x`` itself.

    Parameters
    ----------
    x : dask.array.Array
    whole_axes : tuple of int
        Axes the caller needs in one chunk (the features of a row). When ``x`` is chunked
        along one of them and reads a Zarr array (through dask's or ddr's ``from_zarr``),
        the result is in row blocks read by one task each (:mod:`ddr.io.row_blocks`).

    Returns
    -------
    dask.array.Array
        Same shape, dtype and values as ``x``; same chunks, except whole along
        ``whole_axes`` where that was asked and done.
    """
    from ddr.io.row_blocks import row_blocks
    from ddr.io.zarr_chunks import StoredChunks, direct_readable, from_zarr

    if any(len(x.chunks[a]) > 1 for a in whole_axes):
        source = _stored_source(x)
        if source is None:
            return x
        logger.debug("dask array %s read in whole row blocks (axes %s whole)", x.name, whole_axes)
        return row_blocks(
            source if isinstance(source, StoredChunks) else StoredChunks(source), whole_axes
        )
    z = zarr_source(x)
    if z is None or not direct_readable(z):
        return x
    stored = da.core.normalize_chunks(tuple(z.chunks), z.shape, dtype=z.dtype)
    if x.chunks != stored:
        return x
    logger.debug("dask array %s reads %s: read through ddr's chunk reader", x.name, z.store_path)
    return from_zarr(z)


def _stored_source(x: da.Array) -> Any:
    """The Zarr array (or ddr's reader of one, :class:`~ddr.io.zarr_chunks.StoredChunks`)
    whose values ``x``'s only layer reads unchanged, else None."""
    from ddr.io.zarr_chunks import StoredChunks

    graph = x.__dask_graph__()
    if not isinstance(graph, HighLevelGraph) or len(x.__dask_layers__()) != 1:
        return None
    (name,) = x.__dask_layers__()
    source = _getter_source(graph, name, x.chunks)
    if isinstance(source, StoredChunks):
        held = source
        if held.shape != x.shape or np.dtype(held.dtype) != x.dtype:
            return None
        return held
    return zarr_source(x)


def zarr_source(x: da.Array) -> zarr.Array | None:
    """The Zarr array whose chunks ``x``'s only layer reads unchanged, else None.

    Parameters
    ----------
    x : dask.array.Array

    Returns
    -------
    zarr.Array or None
        Of ``x``'s shape and dtype.
    """
    graph = x.__dask_graph__()
    if not isinstance(graph, HighLevelGraph) or len(x.__dask_layers__()) != 1:
        return None
    (name,) = x.__dask_layers__()
    source = _getter_source(graph, name, x.chunks)
    z = _unwrap(source) if source is not None else None
    if z is None or tuple(z.shape) != x.shape or np.dtype(z.dtype) != x.dtype:
        return None
    return z


def _getter_source(graph: HighLevelGraph, name: str, chunks: tuple) -> Any:
    """The object ``dask.array.from_array``'s layer ``name`` slices, None for any other layer."""
    from dask.array.core import getter, getter_inline, getter_nofancy
    from dask.blockwise import Blockwise, blockwise_token
    from dask.layers import ArraySliceDep

    layer = graph.layers.get(name)
    task = getattr(layer, "task", None)  # Blockwise.task: dask 2025.1 onwards
    if not isinstance(layer, Blockwise) or task is None:
        return None
    if getattr(task, "func", None) not in (getter, getter_nofancy, getter_inline):
        return None
    # getter(source, slices): the layer's two inputs, in that order, and nothing else
    args = [getattr(a, "key", None) for a in getattr(task, "args", ())]
    if args != [blockwise_token(0), blockwise_token(1)]:
        return None
    if len(layer.indices) != 2 or len(layer.io_deps) != 1:
        return None
    (source, source_index), (dep_key, _) = layer.indices
    dep = layer.io_deps.get(dep_key)
    if source_index is not None or not isinstance(dep, ArraySliceDep) or dep.chunks != chunks:
        return None
    depends = set(graph.dependencies.get(name, ()))
    key = getattr(source, "key", None)  # a TaskRef when the source is not inlined
    if key is None:
        return source if not depends else None
    held = graph.layers.get(key)
    if depends != {key} or held is None or set(held.keys()) != {key}:
        return None
    return held[key]


def _unwrap(source: Any) -> zarr.Array | None:
    """The Zarr array behind ``source``: itself, or behind xarray's zarr backend and lazy
    indexing adapters only; None for anything else."""
    adapters = _xarray_adapters()
    while not isinstance(source, zarr.Array):
        if adapters is None:
            return None
        passthrough, lazy, backend = adapters
        if isinstance(source, passthrough):
            source = source.array
        elif isinstance(source, lazy) and _selects_all(source):
            source = source.array
        elif isinstance(source, backend):
            inner = source.get_array()
            return inner if isinstance(inner, zarr.Array) else None
        else:
            return None
    return source


def _selects_all(lazy: Any) -> bool:
    """Whether a ``LazilyIndexedArray`` selects its whole array (xarray's zarr backend
    always starts with one; ``isel`` on a chunked variable slices the dask array instead)."""
    key = getattr(getattr(lazy, "key", None), "tuple", None)
    shape = getattr(lazy.array, "shape", None)
    if key is None or shape is None or len(key) != len(shape):
        return False
    return all(
        isinstance(k, slice) and k.indices(n) == (0, n, 1) for k, n in zip(key, shape, strict=True)
    )


def _xarray_adapters() -> tuple[tuple[type, ...], type, type] | None:
    """xarray's value-preserving adapters, its lazy indexer and its zarr backend array;
    None when xarray is absent or they moved."""
    try:
        from xarray.backends.zarr import ZarrArrayWrapper
        from xarray.core.indexing import (
            CopyOnWriteArray,
            ImplicitToExplicitIndexingAdapter,
            LazilyIndexedArray,
            MemoryCachedArray,
        )
    except ImportError:
        return None
    passthrough = (ImplicitToExplicitIndexingAdapter, CopyOnWriteArray, MemoryCachedArray)
    return passthrough, LazilyIndexedArray, ZarrArrayWrapper
