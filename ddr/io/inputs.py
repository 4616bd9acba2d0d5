"""Open input arrays lazily: a Zarr array (v2 or v3), an array or variable in a Zarr group, or a
variable of a netCDF file, as a dask-backed DataArray with its dims, coords and chunks.

Paths may be URLs (:mod:`ddr.io.locations`). Every location opened here is remembered for the
life of the process, and :mod:`ddr.io.outputs` refuses to write into any of them: a pipeline
never overwrites its own input. A Zarr array with chunks that are not stored is refused
(:mod:`ddr.io.stored_chunks`) unless it is opened with ``missing_chunks="fill"``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Mapping
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr
import zarr

from ddr.io.consolidated import check_consolidated
from ddr.io.csr import csr_blocks, csr_feature_names, is_sparse_group
from ddr.io.locations import Location, redact, resolve
from ddr.io.stored_chunks import (
    MissingChunks,
    check_chunks,
    chunk_size_problem,
    unreadable_metadata,
)
from ddr.io.zarr_chunks import from_zarr

__all__ = ["describe_input", "open_input", "opened_inputs"]

_NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf", ".h5", ".hdf5", ".cdf")
_OPENED: set[Location] = set()
_OPENED_LOCK = threading.Lock()


def opened_inputs() -> frozenset[Location]:
    """Return the locations of every input opened in this process."""
    with _OPENED_LOCK:
        return frozenset(_OPENED)


def _remember(loc: Location) -> None:
    with _OPENED_LOCK:
        _OPENED.add(loc)


def _is_netcdf(loc: Location) -> bool:
    if os.path.splitext(loc.path)[1].lower() in _NETCDF_SUFFIXES:
        return True
    if loc.is_local and os.path.isfile(loc.path):
        with open(loc.path, "rb") as fh:
            head = fh.read(8)
        return head.startswith(b"CDF") or head.startswith(b"\x89HDF")
    return False


def missing_message(loc: Location, shown: str, what: str) -> str:
    """Why nothing is at ``loc``: its bucket does not exist, or nothing is there."""
    bucket = loc.bucket
    if (
        bucket is not None
        and not resolve(f"{loc.protocol}://{bucket}", loc.storage_options).exists()
    ):
        return loc.missing_bucket()
    return f"no {what} at {shown!r}"


def _array_dims(arr: zarr.Array) -> tuple[str, ...]:
    names = None
    if arr.metadata.zarr_format == 3:
        names = arr.metadata.dimension_names
    else:
        names = arr.attrs.get("_ARRAY_DIMENSIONS")
    if names and all(n is not None for n in names):
        return tuple(names)
    if arr.ndim == 2:
        return ("sample", "feature")
    if arr.ndim == 1:
        return ("sample",)
    return tuple(f"dim_{i}" for i in range(arr.ndim))


def _has_dim_names(arr: zarr.Array) -> bool:
    if arr.metadata.zarr_format == 3:
        names = arr.metadata.dimension_names
        return bool(names) and all(n is not None for n in names)
    return "_ARRAY_DIMENSIONS" in arr.attrs


def _from_zarr_array(
    arr: zarr.Array, name: str | None, missing_chunks: MissingChunks
) -> xr.DataArray:
    attrs = {k: v for k, v in arr.attrs.asdict().items() if k != "_ARRAY_DIMENSIONS"}
    data = from_zarr(arr, missing_chunks=missing_chunks)
    return xr.DataArray(data, dims=_array_dims(arr), attrs=attrs, name=name)


def _list_arrays(group: zarr.Group) -> list[str]:
    return sorted(name for name, _ in group.arrays())


def open_input(
    path: str | os.PathLike | Location,
    name: str | None = None,
    *,
    chunks: dict[str, int] | None = None,
    protect: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    missing_chunks: MissingChunks = "error",
) -> xr.DataArray:
    """Open an input array lazily.

    Parameters
    ----------
    path : str, path-like or Location
        A Zarr array or a Zarr group (v2 or v3), as a local path or a URL (``s3://``,
        ``gs://``, ``az://``, ``http(s)://``, ``file://``, ``memory://``), or a local netCDF
        file. A CSR group (AnnData's ``csr_matrix`` encoding, e.g. the ``X`` of an AnnData
        file) is read as scipy.sparse row blocks (``ddr.io.csr``).
    name : str, optional
        The array or variable inside a group or netCDF file (``"a/b"`` for nested groups).
        Required for groups; not allowed for a bare Zarr array.
    chunks : dict, optional
        Rechunk by dim name, e.g. ``{"sample": 200_000, "feature": -1}``. By default the
        stored chunks are used as dask chunks.
    protect : bool
        Remember ``path`` as an input for the rest of the process, so that
        :func:`ddr.io.write_zarr` refuses to write into it (default). Pass ``False`` to read an
        output back without protecting it.
    storage_options : mapping, optional
        Options of the URL's filesystem (credentials, ``endpoint_url``, ...); by default
        credentials and endpoints come from the environment and the usual config files.
    missing_chunks : {"error", "fill"}
        A Zarr array with chunks that are not stored (found from one listing of its store,
        before any data is read) raises :class:`ddr.io.MissingChunksError` naming them
        (default); ``"fill"`` reads them as the fill value, for arrays sparse on purpose.
        Not used for netCDF files.

    Returns
    -------
    xarray.DataArray
        Dask-backed, with the stored dims (or ``("sample", "feature")`` for a 2-D array
        without dim names), coordinates when the group is an xarray Dataset, and attributes.
        A CSR group gives dims ``("sample", "feature")``, blocks of about 8 Mi stored values,
        and the AnnData ``var`` index beside it as the feature coordinate.
    """
    loc = resolve(path, storage_options)
    shown = redact(str(path)) if not isinstance(path, Location) else loc.url
    if not loc.exists():
        raise FileNotFoundError(missing_message(loc, shown, "Zarr store or netCDF file"))
    if _is_netcdf(loc):
        if not loc.is_local:
            raise ValueError(
                f"{shown!r}: netCDF inputs are read from local files; store the data as Zarr "
                "to read it from a URL"
            )
        out = _open_netcdf(loc.path, shown, name)
    elif loc.is_zarr():
        target = repr(shown) if name is None else f"array {name!r} of {shown!r}"
        with loc.errors("read"), unreadable_metadata(target):
            out = _open_zarr(loc, shown, name, missing_chunks)
    else:
        raise ValueError(
            f"{shown!r} is neither a Zarr store (no zarr.json, .zgroup or .zarray) nor a "
            "netCDF file"
        )
    if protect:
        _remember(loc)
    if chunks:
        for dim, size in chunks.items():
            if (problem := chunk_size_problem(size)) is not None:
                raise ValueError(f"chunks[{dim!r}]: {problem}")
        unknown = set(chunks) - set(out.dims)
        if unknown:
            raise ValueError(f"chunks names dims {sorted(unknown)} not in {out.dims}")
        out = out.chunk(chunks)
    return out


def _open_zarr(
    loc: Location, shown: str, name: str | None, missing_chunks: MissingChunks
) -> xr.DataArray:
    store = loc.store(read_only=True)
    node = zarr.open(store=store, mode="r")
    if name is None and is_sparse_group(node):
        _check_csr_consolidated(store, "", shown)
        return _from_csr_group(node, None, shown, loc.name.removesuffix(".zarr"), missing_chunks)
    if isinstance(node, zarr.Array):
        if name is not None:
            raise ValueError(f"{shown!r} is a Zarr array; name={name!r} is only for groups")
        check_chunks(node, f"the array {shown!r}", missing_chunks)
        return _from_zarr_array(node, loc.name.removesuffix(".zarr"), missing_chunks)
    if name is None:
        raise ValueError(
            f"{shown!r} is a Zarr group, not an array; name one of its arrays with "
            f"name=... (arrays: {_list_arrays(node)})"
        )
    try:
        target = node[name]
    except KeyError:
        raise KeyError(
            f"no array {name!r} in the Zarr group {shown!r}; arrays: {_list_arrays(node)}"
        ) from None
    parent_path, _, leaf = name.rpartition("/")
    parent = node[parent_path] if parent_path else node
    if is_sparse_group(target):
        _check_csr_consolidated(store, name, shown)
        return _from_csr_group(target, parent, f"{shown}/{name}", leaf, missing_chunks)
    if isinstance(target, zarr.Group):
        raise ValueError(
            f"{name!r} in {shown!r} is a group, not an array; arrays in it: {_list_arrays(target)}"
        )
    check_consolidated(store, name, repr(shown))
    target = zarr.open_array(store=store, path=name, mode="r")  # its own metadata
    check_chunks(target, f"array {name!r} of {shown!r}", missing_chunks)
    if all(_has_dim_names(a) for _, a in parent.arrays()):
        # an xarray Dataset: open through xarray for its coordinates and CF decoding
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            ds = xr.open_zarr(
                store,
                group=parent_path or None,
                chunks={},
                consolidated=False,
                drop_variables=_unrelated(parent, leaf),
            )
        return ds[leaf]
    return _from_zarr_array(target, leaf, missing_chunks)


def _check_csr_consolidated(store: Any, name: str, shown: str) -> None:
    """:func:`check_consolidated` for the arrays of the CSR group at ``name``."""
    for part in ("data", "indices", "indptr"):
        path = f"{name}/{part}" if name else part
        with contextlib.suppress(FileNotFoundError, KeyError, zarr.errors.ArrayNotFoundError):
            check_consolidated(store, path, repr(shown))


def _unrelated(group: zarr.Group, leaf: str) -> list[str]:
    """The arrays of an xarray Dataset that are neither ``leaf`` nor its coordinates (the
    arrays named by its dims or its CF ``coordinates`` attribute, and their dims): another
    variable of a different length along a shared dim is no problem of this input."""
    arrays = dict(group.arrays())
    keep = {leaf}
    todo = [leaf]
    while todo:
        arr = arrays[todo.pop()]
        for name in (*_array_dims(arr), *str(arr.attrs.get("coordinates", "")).split()):
            if name in arrays and name not in keep:
                keep.add(name)
                todo.append(name)
    return sorted(set(arrays) - keep)


def _from_csr_group(
    group: zarr.Group,
    parent: zarr.Group | None,
    where: str,
    name: str,
    missing_chunks: MissingChunks,
) -> xr.DataArray:
    """A CSR group (AnnData's layout) as a DataArray of scipy.sparse row blocks, dims
    ``("sample", "feature")``, with the column names of an AnnData ``var`` beside it as the
    feature coordinate."""
    for part in ("data", "indices", "indptr"):
        if isinstance(group.get(part), zarr.Array):
            check_chunks(group[part], f"array {part!r} of the CSR group {where!r}", missing_chunks)
    data = csr_blocks(group, where, missing_chunks=missing_chunks)
    coords = {}
    names = None if parent is None else csr_feature_names(parent, data.shape[1])
    if names is not None:
        coords["feature"] = names
    attrs = {k: v for k, v in group.attrs.asdict().items() if k != "shape"}
    return xr.DataArray(data, dims=("sample", "feature"), coords=coords, attrs=attrs, name=name)


def _open_netcdf(path: str, shown: str, name: str | None) -> xr.DataArray:
    ds = xr.open_dataset(path, chunks={})
    if name is None:
        if len(ds.data_vars) != 1:
            raise ValueError(
                f"{shown!r} holds several variables; name one with name=... "
                f"(variables: {sorted(map(str, ds.data_vars))})"
            )
        name = str(next(iter(ds.data_vars)))
    if name not in ds.data_vars:
        raise KeyError(
            f"no variable {name!r} in {shown!r}; variables: {sorted(map(str, ds.data_vars))}"
        )
    return ds[name]


def describe_input(arr: xr.DataArray) -> dict[str, Any]:
    """Metadata that identifies an input without reading its values (for fingerprints).

    Parameters
    ----------
    arr : DataArray
        An input as :func:`open_input` returns it.

    Returns
    -------
    dict
        ``name``, ``dims``, ``shape``, ``dtype`` and ``chunks``.
    """
    data = arr.data
    chunks = data.chunks if isinstance(data, da.Array) else None
    return {
        "name": None if arr.name is None else str(arr.name),
        "dims": [str(d) for d in arr.dims],
        "shape": [int(s) for s in arr.shape],
        "dtype": np.dtype(arr.dtype).str,
        "chunks": None if chunks is None else [[int(c) for c in cs] for cs in chunks],
    }
