"""Open the inputs of a pipeline lazily, from metadata only, and fingerprint them.

Each input is opened with :func:`ddr.io.open_input` (which also protects it from being
written to), transposed sample-first, selected (``isel``) and rechunked (``chunks``). Zarr
inputs whose stored values are what xarray gives are re-read through
:class:`ddr.pipeline._counting.CountingStore`, so the runner can report measured passes.
The fingerprint comes from metadata (path, selection, dims, shape, dtype, chunks and the
Zarr metadata documents, or a netCDF file's size and modification time), never from values.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ddr.pipeline.plan import InputPlan, ValueMeta, _abspath, _sha
from ddr.pipeline.schema import InputSpec

__all__ = ["metadata_fingerprint", "open_pipeline_input"]


def open_pipeline_input(
    name: str, spec: InputSpec, problem: Callable[[tuple[Any, ...], str], None]
) -> InputPlan | None:
    """Open input ``name`` lazily; report problems through ``problem(path, message)``.

    Returns the input's plan (its lazy sample-first DataArray, fingerprint and, for Zarr
    inputs, the counted store root and stored bytes), or None when it cannot be used.
    """
    from ddr.io import describe_input, open_input

    path = _abspath(spec.path)
    where = ("inputs", name)
    try:
        arr = open_input(path, spec.array)
    except FileNotFoundError:
        problem((*where, "path"), f"input {name}: no Zarr store or netCDF file at {spec.path!r}")
        return None
    except (KeyError, ValueError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        problem((*where, "array" if spec.array else "path"), f"input {name}: {msg}")
        return None
    if spec.dims is not None and list(arr.dims) != list(spec.dims):
        problem(
            (*where, "dims"),
            f"input {name} has dims {list(map(str, arr.dims))}; the pipeline expects {spec.dims}",
        )
        return None
    sdim = spec.sample_dim or str(arr.dims[0])
    if sdim not in arr.dims:
        problem(
            (*where, "sample_dim"),
            f"input {name}: sample_dim {sdim!r} is not one of its dims {list(map(str, arr.dims))}",
        )
        return None
    arr = arr.transpose(sdim, ...)
    root, stored = None, None
    counted = _counted(arr, path, spec.array)
    if counted is not None:
        arr, root, stored = counted
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
    if arr.ndim == 2 and hasattr(arr.data, "chunks") and len(arr.data.chunks[1]) > 1:
        fdim = str(arr.dims[1])
        problem(
            (*where, "chunks") if spec.chunks else (*where, "path"),
            f"input {name} is chunked along {fdim!r} ({len(arr.data.chunks[1])} "
            f"chunks); ddr reads whole rows: add `chunks: {{{fdim}: -1}}`",
        )
        return None
    desc = describe_input(arr)
    fp = _sha(
        {
            "path": path,
            "array": spec.array,
            "isel": spec.isel,
            "meta": desc,
            "store": metadata_fingerprint(path, spec.array),
        }
    )
    meta = ValueMeta(
        "array",
        tuple(int(s) for s in arr.shape),
        tuple(str(d) for d in arr.dims),
        np.dtype(arr.dtype),
        frozenset([name]),
    )
    return InputPlan(name, spec, path, arr, sdim, fp, root, stored, meta)


def _counted(arr: Any, path: str, name: str | None) -> tuple[Any, str, int] | None:
    """``arr`` read through a :class:`CountingStore` when the stored values are what xarray
    gives (no scale/offset, no fill-value masking that changes values), else None."""
    import dask.array as da
    import zarr

    from ddr.io.inputs import is_zarr_store
    from ddr.io.zarr_chunks import from_zarr
    from ddr.pipeline._counting import CountingStore, stored_bytes

    if not is_zarr_store(path) or not isinstance(arr.data, da.Array):
        return None
    enc = arr.encoding
    if "scale_factor" in enc or "add_offset" in enc:
        return None
    fill = enc.get("_FillValue")
    if fill is not None and not (isinstance(fill, float) and math.isnan(fill)):
        return None
    try:
        store = CountingStore(path, read_only=True)
        z = zarr.open_array(store=store, path=name or "", mode="r")
    except Exception:
        return None
    if np.dtype(z.dtype) != np.dtype(arr.dtype) or z.shape != arr.transpose(*arr.dims).shape:
        return None
    dims_stored = _stored_dims(z, arr)
    if dims_stored is None:
        return None
    data = from_zarr(z, chunks=_chunks_for(arr, dims_stored))
    counted = arr.transpose(*dims_stored).copy(data=data).transpose(*arr.dims)
    return counted, str(store.root), stored_bytes(path, name or "")


def _stored_dims(z: Any, arr: Any) -> tuple[str, ...] | None:
    names = getattr(z.metadata, "dimension_names", None) or z.attrs.get("_ARRAY_DIMENSIONS")
    if names and all(n is not None for n in names) and set(names) == {str(d) for d in arr.dims}:
        return tuple(names)
    return tuple(str(d) for d in arr.dims) if arr.ndim == 1 else None


def _chunks_for(arr: Any, dims: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    by_dim = dict(zip((str(d) for d in arr.dims), arr.data.chunks, strict=True))
    return tuple(by_dim[d] for d in dims)


def metadata_fingerprint(path: str, name: str | None) -> Any:
    """What identifies a stored input without reading its values: the Zarr metadata
    documents of the store root and the array (attributes, shape, chunks, codecs), or the
    size and modification time of a netCDF file."""
    p = Path(path)
    if p.is_file():
        st = p.stat()
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    docs = {}
    for base in {p, p / name} if name else {p}:
        for fname in ("zarr.json", ".zarray", ".zattrs", ".zgroup"):
            f = base / fname
            if f.is_file():
                docs[str(f.relative_to(p))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return docs
