"""Open the inputs of a pipeline lazily, from metadata only, and fingerprint them.

Each input is opened with :func:`ddr.io.open_input` (which also protects it from being
written to), transposed sample-first, given its row numbers as the sample coordinate when
it has none (so results of a selection of rows map back to them), selected (``isel``) and
rechunked (``chunks``). Zarr inputs whose stored values are what xarray gives are re-read
through :class:`ddr.pipeline._counting.CountingStore` (local) or ``CountingWrapper`` (URLs),
so the runner can report measured passes. The fingerprint comes from metadata (the normalised
location, selection, dims, shape, dtype, chunks and the Zarr metadata documents, or a netCDF
file's size and modification time), never from values, and never from ``storage_options``.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ddr.io.locations import Location, LocationError, resolve
from ddr.io.stored_chunks import MissingChunks
from ddr.pipeline.fitplans import mark_sample_dims
from ddr.pipeline.plan import InputPlan, ValueMeta, _sha
from ddr.pipeline.recorded_masks import recorded_mask
from ddr.pipeline.spec_types import InputSpec

if TYPE_CHECKING:
    from ddr.pipeline._counting import BlockReads
    from ddr.pipeline.run_state import RunState

__all__ = ["first_sample_mask", "metadata_fingerprint", "open_pipeline_input"]


def open_pipeline_input(
    name: str,
    spec: InputSpec,
    problem: Callable[[tuple[Any, ...], str], None],
    *,
    check_chunks: bool = True,
    last: RunState | None = None,
) -> InputPlan | None:
    """Open input ``name`` lazily; report problems through ``problem(path, message)``.

    With ``check_chunks`` (an input something reads), a Zarr array with chunks that are not
    stored is a problem unless the input says ``missing_chunks: fill``, and a grid input's
    mask is found: the one ``last`` (the state the last run left, for ``--update``)
    recorded where it still holds (:func:`~ddr.pipeline.recorded_masks.recorded_mask`),
    else by reading its first sample (:func:`first_sample_mask`).

    Returns the input's plan (its lazy sample-first DataArray, fingerprint and, for Zarr
    inputs, the counted store root and stored bytes), or None when it cannot be used.
    """
    from ddr.io import InputMetadataError, MissingChunksError, describe_input, open_input
    from ddr.io.inputs import missing_message

    where = ("inputs", name)
    try:
        loc = resolve(spec.path, spec.storage_options)
        arr = open_input(
            loc, spec.array, missing_chunks=spec.missing_chunks if check_chunks else "fill"
        )
    except LocationError as exc:
        problem((*where, "path"), f"input {name}: {exc}")
        return None
    except (MissingChunksError, InputMetadataError) as exc:
        problem((*where, "array" if spec.array else "path"), f"input {name}: {exc}")
        return None
    except FileNotFoundError:
        problem(
            (*where, "path"),
            f"input {name}: {missing_message(loc, spec.path, 'Zarr store or netCDF file')}",
        )
        return None
    except (KeyError, ValueError, OSError, ImportError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        field = "array" if spec.array and isinstance(exc, KeyError) else "path"
        problem((*where, field), f"input {name}: {msg}")
        return None
    if spec.dims is not None and list(arr.dims) != list(spec.dims):
        problem(
            (*where, "dims"),
            f"input {name} has dims {list(map(str, arr.dims))}; the pipeline expects {spec.dims}",
        )
        return None
    grid = _grid_sample_dims(name, spec, arr, problem)
    if grid is False:
        return None
    sdim = grid[0] if grid else spec.sample_dim or str(arr.dims[0])
    if sdim not in arr.dims:
        problem(
            (*where, "sample_dim"),
            f"input {name}: sample_dim {sdim!r} is not one of its dims {list(map(str, arr.dims))}",
        )
        return None
    arr = arr.transpose(*(grid or (sdim,)), ...)
    if 0 in arr.shape:
        sizes = ", ".join(f"{d}: {n}" for d, n in zip(arr.dims, arr.shape, strict=True))
        problem(
            (*where, "array" if spec.array else "path"),
            f"input {name} is empty ({sizes}); ddr needs at least one sample and one feature",
        )
        return None
    root, stored, reads = None, None, None
    try:
        counted = _counted(
            arr,
            loc,
            spec.array,
            spec.missing_chunks if check_chunks else "fill",
            spec.selection() if spec.isel else None,
        )
    except OSError as exc:  # the store stopped answering since the input was opened
        problem((*where, "path"), f"input {name}: {exc}")
        return None
    if counted is not None:
        arr, root, stored, reads = counted
    for dim in grid or (sdim,):
        arr = _with_row_numbers(arr, dim, name)
    if spec.isel:
        unknown = sorted(set(spec.isel) - {str(d) for d in arr.dims})
        if unknown:
            problem(
                (*where, "isel"),
                f"input {name}: isel names dims {unknown} that it does not have (dims "
                f"{list(map(str, arr.dims))})",
            )
            return None
        try:
            arr = arr.isel(spec.selection())
        except (IndexError, ValueError) as exc:
            problem((*where, "isel"), f"input {name}: isel {spec.isel}: {exc}")
            return None
        if 0 in arr.shape:
            problem(
                (*where, "isel"),
                f"input {name}: isel {spec.isel} selects nothing (shape {tuple(arr.shape)})",
            )
            return None
    if spec.chunks:
        unknown = sorted(set(spec.chunks) - {str(d) for d in arr.dims})
        if unknown:
            problem(
                (*where, "chunks"),
                f"input {name}: chunks names dims {unknown} "
                f"that it does not have (dims {list(map(str, arr.dims))})",
            )
            return None
        arr = arr.chunk(spec.chunks)
    # feature chunks are the estimators' to read: whole rows assembled inside the pass (or a
    # refusal that says how to rechunk, where that cannot be done)
    desc = describe_input(arr)
    what = {
        "path": loc.url,
        "array": spec.array,
        "isel": spec.isel,
        "meta": desc,
        "store": metadata_fingerprint(loc, spec.array),
    }
    if grid:  # another reading of the same array (left out otherwise: fingerprints stay)
        what["sample_dims"] = list(grid)
    fp = _sha(what)
    mask, listing = None, None
    if grid:
        if check_chunks and last is not None:  # --update: no sample read where it holds
            shape = tuple(int(arr.sizes[d]) for d in arr.dims if d not in grid)
            mask, listing = recorded_mask(last, name, loc, spec, sdim, shape)
        if check_chunks and mask is None:  # something reads it: its mask decides its features
            try:
                mask = first_sample_mask(arr, grid)
            except (OSError, ValueError) as exc:
                problem((*where, "path"), f"input {name}: reading its first sample: {exc}")
                return None
        # every fit on it is handed this mask: the first sample is read once, here
        known = None if mask is None else _mask_dataarray(arr, grid, mask)
        arr = mark_sample_dims(arr, grid, known)
        meta = _grid_meta(arr, grid, name, mask)
    else:
        meta = ValueMeta(
            "array",
            tuple(int(s) for s in arr.shape),
            tuple(str(d) for d in arr.dims),
            np.dtype(arr.dtype),
            frozenset([name]),
        )
    return InputPlan(
        name, spec, loc.url, arr, sdim, fp, root, stored, meta, loc, reads, mask, listing
    )


def first_sample_mask(arr: Any, grid: tuple[str, ...]) -> Any:
    """The mask of a grid input: its features NaN at the first sample (bool, the shape of
    the feature dims in their order). Planning reads the chunks of that sample once (not
    counted in the run's passes: it is read before the run; an update takes the mask the
    last run recorded instead, where the first sample's stored chunks are as they were,
    :mod:`ddr.pipeline.recorded_masks`); the input is marked with it
    (:func:`~ddr.pipeline.fitplans.mark_sample_dims`), so that every fit and search on it
    takes this mask without reading a sample again, and what the plan says (the features
    a fit sees, hence its solver and passes) is what the run does."""
    first = arr.isel({d: 0 for d in grid})
    values = np.asarray(first.values)
    return np.isnan(values) if values.dtype.kind in "fc" else np.zeros(values.shape, dtype=bool)


def _mask_dataarray(arr: Any, grid: tuple[str, ...], mask: np.ndarray) -> Any:
    """``mask`` (of :func:`first_sample_mask`) on its feature dims, as fits take it."""
    import xarray as xr

    return xr.DataArray(mask, dims=[d for d in arr.dims if d not in grid])


def _grid_sample_dims(
    name: str, spec: InputSpec, arr: Any, problem: Callable[[tuple[Any, ...], str], None]
) -> tuple[str, ...] | Literal[False] | None:
    """The input's ``sample_dims`` (None: not a grid), or False after reporting why they
    cannot be: given with ``sample_dim``, not dims of the array, repeated, or every dim
    (a grid needs a feature dim)."""
    grid = spec.grid_sample_dims()
    if grid is None:
        return None
    where = ("inputs", name, "sample_dims")
    dims = [str(d) for d in arr.dims]
    if spec.sample_dim is not None:
        problem(
            where,
            f"input {name}: give sample_dims or sample_dim, not both (sample_dims "
            f"{list(grid)}, sample_dim {spec.sample_dim!r})",
        )
        return False
    unknown = [d for d in grid if d not in dims]
    if unknown:
        problem(where, f"input {name}: sample_dims {unknown} are not dims of it (dims {dims})")
        return False
    if len(set(grid)) != len(grid):
        problem(where, f"input {name}: sample_dims names a dim twice: {list(grid)}")
        return False
    if set(grid) == set(dims):
        problem(
            where,
            f"input {name}: sample_dims {list(grid)} are all of its dims; the other dims are "
            "the features, so at least one must be left",
        )
        return False
    return grid


def _grid_meta(arr: Any, grid: tuple[str, ...], name: str, mask: Any) -> ValueMeta:
    """What the planner knows of a grid input: the 2-D rows the estimators read (the sample
    dims stacked into rows, every other dim into features, the masked ones left out where
    the ``mask`` is known)."""
    n = math.prod(int(arr.sizes[d]) for d in grid)
    d = math.prod(int(arr.sizes[f]) for f in arr.dims if f not in grid)
    if mask is not None:
        d -= int(np.count_nonzero(mask))
    return ValueMeta(
        "array",
        (n, d),
        (grid[0] if len(grid) == 1 else None, None),
        np.dtype(arr.dtype),
        frozenset([name]),
    )


def _counted(
    arr: Any,
    loc: Location,
    name: str | None,
    missing_chunks: MissingChunks,
    selection: dict[str, Any] | None = None,
) -> tuple[Any, str, int, BlockReads | None] | None:
    """``arr`` read through a counting store when the stored values are what xarray gives
    (no scale/offset, no fill-value masking that changes values), else None. A chunk that
    is not stored when it is read is an error unless ``missing_chunks`` is ``"fill"``.

    With a ``selection`` (the input's ``isel``), also what it reads of the stored array
    (:class:`~ddr.pipeline._counting.BlockReads`: the planned passes' unit); None: all."""
    import dask.array as da
    import zarr

    from ddr.io.zarr_chunks import from_zarr
    from ddr.pipeline._counting import (
        BlockReads,
        block_nbytes,
        blocks_selected,
        counted_getter,
        stored_bytes,
        stored_objects,
    )
    from ddr.stats._input import has_sparse_blocks

    if not isinstance(arr.data, da.Array) or not loc.is_zarr():
        return None
    if has_sparse_blocks(arr.data):
        return _counted_csr(arr, loc, name, missing_chunks, selection)
    enc = arr.encoding
    if "scale_factor" in enc or "add_offset" in enc:
        return None
    fill = enc.get("_FillValue")
    if fill is not None and not (isinstance(fill, float) and math.isnan(fill)):
        return None
    try:
        store, root = _counting_store(loc)
        z = zarr.open_array(store=store, path=name or "", mode="r")
    except Exception:
        return None
    if np.dtype(z.dtype) != np.dtype(arr.dtype) or z.shape != arr.transpose(*arr.dims).shape:
        return None
    dims_stored = _stored_dims(z, arr)
    if dims_stored is None:
        return None
    chunks = _chunks_for(arr, dims_stored)
    data = from_zarr(z, chunks=chunks, getitem=counted_getter, missing_chunks=missing_chunks)
    counted = arr.transpose(*dims_stored).copy(data=data).transpose(*arr.dims)
    if selection is None:
        return counted, root, stored_bytes(loc, name or ""), None
    objects = list(stored_objects(loc, name or ""))  # one listing: the total and each block
    total = sum(size for _, size in objects)
    try:
        nbytes = block_nbytes(objects, tuple(z.shards or z.chunks), chunks)
        masks = [
            blocks_selected(c, selection.get(d)) for d, c in zip(dims_stored, chunks, strict=True)
        ]
        reads = BlockReads(nbytes, functools.reduce(np.multiply.outer, masks), total)
    except (ValueError, IndexError, TypeError):  # planned passes then count the whole array
        reads = None
    return counted, root, total, reads


def _with_row_numbers(arr: Any, sdim: str, name: str) -> Any:
    """``arr`` with its rows' numbers (0, 1, ...) as the sample coordinate when it has none,
    so that what is computed from a selection of its rows (``isel``) is written with the
    rows it came from. A pandas ``RangeIndex``: nothing of the input's length is built (it
    stays a range through slicing). Marked :data:`~ddr.stats._input.ROW_NUMBERS_ATTR`: such
    numbers pair rows by position, as rows without a coordinate did."""
    import pandas as pd

    from ddr.stats._input import ROW_NUMBERS_ATTR

    if sdim in arr.coords:
        return arr
    attrs = {"long_name": f"row number in input {name}", ROW_NUMBERS_ATTR: name}
    return arr.assign_coords({sdim: (sdim, pd.RangeIndex(arr.sizes[sdim]), attrs)})


def _counting_store(loc: Location) -> tuple[Any, str]:
    """A store that counts the chunk bytes read from ``loc``, and its count root."""
    from ddr.pipeline._counting import CountingStore, CountingWrapper

    if loc.is_local:
        store = CountingStore(loc.path, read_only=True)
        return store, str(store.root)
    return CountingWrapper(loc.store(), loc.url), loc.url


def _counted_csr(
    arr: Any,
    loc: Location,
    name: str | None,
    missing_chunks: MissingChunks,
    selection: dict[str, Any] | None = None,
) -> tuple[Any, str, int, BlockReads | None] | None:
    """A CSR group's row blocks (``ddr.io.csr``) read through a counting store, each block
    task publishing its bytes (the ``data``, ``indices`` and ``indptr`` chunks it reads).
    What a ``selection`` of rows reads is counted by its blocks' rows (the stored values
    of a row are not known before they are read)."""
    import zarr

    from ddr.io.csr import csr_blocks
    from ddr.pipeline._counting import BlockReads, blocks_selected, counted_call, stored_bytes

    try:
        store, root = _counting_store(loc)
        group = zarr.open_group(store=store, path=name or "", mode="r")
        where = loc.url if name is None else f"{loc.url}/{name}"
        data = csr_blocks(
            group, where, arr.data.chunks[0][0], read=counted_call, missing_chunks=missing_chunks
        )
    except Exception:
        return None
    if data.chunks != arr.data.chunks:
        return None
    total = stored_bytes(loc, name or "")
    reads = None
    if selection is not None:
        rows = data.chunks[0]
        nbytes = np.asarray(rows, dtype=np.float64) * (total / max(sum(rows), 1))
        mask = blocks_selected(rows, selection.get(str(arr.dims[0])))
        reads = BlockReads(nbytes, mask, total)
    return arr.copy(data=data), root, total, reads


def _stored_dims(z: Any, arr: Any) -> tuple[str, ...] | None:
    names = getattr(z.metadata, "dimension_names", None) or z.attrs.get("_ARRAY_DIMENSIONS")
    if names and all(n is not None for n in names) and set(names) == {str(d) for d in arr.dims}:
        return tuple(names)
    return tuple(str(d) for d in arr.dims) if arr.ndim == 1 else None


def _chunks_for(arr: Any, dims: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    by_dim = dict(zip((str(d) for d in arr.dims), arr.data.chunks, strict=True))
    return tuple(by_dim[d] for d in dims)


def metadata_fingerprint(loc: Location, name: str | None) -> Any:
    """What identifies a stored input without reading its values: the Zarr metadata
    documents of the store root and the array (attributes, shape, chunks, codecs), or the
    size and modification time (an object's ETag) of a single file. On an object store these
    are a few small GETs, never a listing of chunks."""
    if not loc.is_zarr():
        return loc.stat_token()
    docs = {}
    for base in {loc, loc.joinpath(name)} if name else {loc}:
        for fname in ("zarr.json", ".zarray", ".zattrs", ".zgroup"):
            f = base.joinpath(fname)
            try:
                data = f.read_bytes()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue
            docs[f.relative_to(loc)] = hashlib.sha256(data).hexdigest()
    return docs
