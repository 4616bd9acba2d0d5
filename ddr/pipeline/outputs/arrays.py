"""How values become what outputs hold: DataArrays with named dims, statistics as their
read-outs, and the raw chunk writes that let all outputs of a run share one read of each input.

:func:`raw_writes` pairs each lazy variable of a dataset that ``ddr.io.write_zarr`` has
created (metadata only, ``compute=False``) with the Zarr array it goes to, so the runner can
store every output of the stream phase with ONE ``da.store``: the graphs ``write_zarr``
returns are built separately (each would read the input again).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "as_dataarray",
    "consistent_rows",
    "data_of",
    "grid_coord_attrs",
    "grid_layout",
    "lazy_row_numbers",
    "raw_writes",
    "regular_chunks",
    "rename_dims",
    "sample_dim_of",
    "statistic_dataset",
    "statistic_maps",
    "statistic_readouts",
    "variable_strings",
]


def variable_strings(ds: Any) -> Any:
    """Lazy fixed-width strings (string class labels) as numpy's variable-length StringDType:
    xarray writes those lazily to Zarr v3 strings, where object arrays would be computed
    first to find their type (an extra pass over the input)."""
    import dask.array as da

    out = {}
    for name, var in ds.variables.items():
        if isinstance(var.data, da.Array) and var.dtype.kind == "U":
            out[name] = var.copy(data=var.data.astype(np.dtypes.StringDType()))
    return ds.assign(out) if out else ds


def regular_chunks(ds: Any) -> Any:
    """Dask variables rechunked so every chunk but the last has the size of the first (what
    ``ddr.io.write_zarr`` also does), so each dask chunk is exactly one Zarr chunk."""
    import dask.array as da

    out = {}
    for name, var in ds.variables.items():
        data = var.data
        if isinstance(data, da.Array) and not any(np.isnan(c) for cs in data.chunks for c in cs):
            target = tuple(max(c) if c else 1 for c in data.chunks)
            regular = all(
                all(x == t for x in c[:-1]) and (not c or c[-1] <= t)
                for c, t in zip(data.chunks, target, strict=True)
            )
            if not regular:
                out[name] = var.copy(data=data.rechunk(target))
    return ds.assign(out) if out else ds


def raw_writes(store: Any, ds: Any) -> list[tuple[Any, Any]] | None:
    """``(dask source, zarr target)`` for every lazy variable of ``ds`` that can be stored
    as it is into the arrays ``write_zarr`` created in ``store`` (the pending output's: it
    checks the run's claim at every write; same dtype, one dask chunk per Zarr chunk, no CF
    encoding); None if any cannot (then xarray's graph writes them)."""
    import dask.array as da
    import zarr

    pairs = []
    for name, var in ds.variables.items():
        data = var.data
        if not isinstance(data, da.Array):
            continue
        enc = var.encoding
        if any(k in enc for k in ("scale_factor", "add_offset", "units", "calendar")):
            return None
        if data.dtype.kind not in "biufUOT":
            return None
        if any(np.isnan(c) for cs in data.chunks for c in cs):
            return None
        try:
            # every chunk is written, also one equal to the fill value, or the output could
            # never be complete; zarr 3.1's open_array ignores `config` for an existing array
            # (3.4 takes it), with_config works in both
            target = zarr.open_array(store=store, path=str(name), mode="r+").with_config(
                {"write_empty_chunks": True}
            )
        except Exception:
            return None
        if data.dtype.kind in "UOT":
            if target.dtype.kind not in "OUT" and "str" not in str(target.dtype).lower():
                return None
            data = data.astype(object)
        elif np.dtype(target.dtype) != data.dtype:
            return None
        if tuple(target.chunks) != tuple(c[0] for c in data.chunks) or target.shape != data.shape:
            return None
        pairs.append((data, target))
    return pairs


def consistent_rows(variables: dict[str, Any]) -> dict[str, Any]:
    """The variables of one output, their sample coordinates made to agree.

    Row numbers ddr gave an input without a coordinate (:data:`ROW_NUMBERS_ATTR
    <ddr.stats._input.ROW_NUMBERS_ATTR>`) pair rows by position: where the variables' sample
    coordinates differ, those numbers are dropped (the variables are then paired by
    position, or aligned by the coordinates that were stored, as xarray aligns), so test
    scores written beside labels stored elsewhere are not spread over the union of both
    numberings. Where they agree, every variable keeps them.
    """
    from ddr.stats._input import has_row_numbers

    along: dict[Any, list[str]] = {}
    for name, var in variables.items():
        if getattr(var, "ndim", 0) and var.dims[0] in var.indexes:
            along.setdefault(var.dims[0], []).append(name)
    out = dict(variables)
    for dim, names in along.items():
        first = out[names[0]].indexes[dim]
        if all(out[n].indexes[dim].equals(first) for n in names[1:]):
            continue
        for n in names:
            if has_row_numbers(out[n], dim):
                out[n] = out[n].drop_vars(dim)
    return out


def lazy_row_numbers(ds: Any) -> Any:
    """``ds`` with each sample coordinate that is a range (row numbers, a pandas
    ``RangeIndex``) as a lazy dask range chunked as the first lazy variable along it, so
    the workers write it with the data and the client never holds one number per row."""
    import dask.array as da
    import pandas as pd
    import xarray as xr

    for dim, index in list(ds.indexes.items()):
        if not isinstance(index, pd.RangeIndex):
            continue
        chunks = next(
            (
                var.data.chunks[var.dims.index(dim)]
                for var in ds.data_vars.values()
                if dim in var.dims and isinstance(var.data, da.Array)
            ),
            None,
        )
        if chunks is None:
            continue
        values = da.arange(index.start, index.stop, index.step, chunks=(chunks,), dtype=np.int64)
        attrs = dict(ds[dim].attrs)
        coord = xr.Coordinates({dim: xr.Variable(dim, values, attrs)}, indexes={})
        ds = ds.drop_indexes(dim).drop_vars(dim).assign_coords(coord)
    return ds


def grid_coord_attrs(ds: Any, inputs: list[Any]) -> Any:
    """``ds`` with the attributes of the coordinates of the grid inputs (``sample_dims:``;
    ``units``, ``standard_name``, ... of ``lat``, ``lon``, ``time``) on its coordinates of
    the same name and shape that have none: the maps and time series of a model fitted on a
    grid keep its coordinates' values, not their CF attributes."""
    from ddr.pipeline.fitplans import SAMPLE_DIMS_ATTR
    from ddr.stats._input import ROW_NUMBERS_ATTR

    found: dict[Any, Any] = {}
    for arr in inputs:
        if not arr.attrs.get(SAMPLE_DIMS_ATTR):
            continue
        for name, coord in arr.coords.items():
            if coord.attrs and ROW_NUMBERS_ATTR not in coord.attrs:
                found.setdefault(name, coord)
    for name, coord in found.items():
        if name in ds.coords and not ds[name].attrs and ds[name].shape == coord.shape:
            ds = ds.assign_coords({name: ds[name].copy().assign_attrs(coord.attrs)})
    return ds


def as_dataarray(value: Any, name: str) -> Any:
    """``value`` as a DataArray named ``name``: lazy 2-D arrays get ``(sample, feature)``
    dims, other arrays ``NAME_dim_i``."""
    import xarray as xr

    if isinstance(value, xr.DataArray):
        return value.rename(name)
    if isinstance(value, (int, float, np.generic)) or np.ndim(value) == 0:
        return xr.DataArray(np.asarray(value), name=name)
    arr = value if hasattr(value, "chunks") else np.asarray(value)
    dims = (
        ("sample", "feature")[: arr.ndim]
        if arr.ndim <= 2
        else tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
    )
    if not hasattr(value, "chunks"):
        dims = tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
    return xr.DataArray(arr, dims=dims, name=name)


def rename_dims(arr: Any, dims: list[str]) -> Any:
    """``arr`` with its dims renamed, in order, to ``dims``."""
    return arr.rename(dict(zip(arr.dims, dims, strict=True)))


def sample_dim_of(ds: Any) -> str | None:
    """The first dim of the first lazy variable of ``ds`` (the samples), or None."""
    for var in ds.data_vars.values():
        if var.ndim >= 1 and hasattr(var.data, "chunks") and var.data.chunks is not None:
            return str(var.dims[0])
    return None


def statistic_readouts(stat: Any, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A statistic's read-outs by name: those that apply (else its ``to_dict()``), or the
    ``names`` chosen (a pipeline's ``step.NAME``; one that does not apply raises)."""
    out: dict[str, Any] = {}
    for readout in type(stat).readouts if names is None else names:
        try:
            attr = getattr(stat, readout)
            out[readout] = attr() if callable(attr) else attr
        except Exception:  # a read-out that does not apply (e.g. covariance of a diagonal)
            if names is not None:
                raise
            continue
    if not out:
        out = {k: v for k, v in stat.to_dict().items() if k != "type"}
    return out


def statistic_dataset(
    stat: Any, feature_dim: str, units: str | None = None, names: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """A statistic's read-outs (those that apply, or the ``names`` chosen) as DataArrays
    with named dims (``feature_dim``, ``class``), each with its ``units`` where the data's
    (``units``) are known (``readout_units``)."""
    import xarray as xr

    from ddr.stats._units import units_of, with_units

    out = {}
    for name, value in statistic_readouts(stat, names).items():
        arr = np.asarray(value)
        dims = type(stat).dims_of(name, arr.ndim, feature_dim)  # as the statistic declares
        if arr.dtype.kind == "U":
            arr = arr.astype(object)
        attrs = with_units({}, units_of(type(stat).readout_units.get(name), units))
        out[name] = xr.DataArray(arr, dims=dims, name=name, attrs=attrs)
    if "variance" in out and "covariance" in out and out["covariance"].ndim != 2:
        del out["covariance"]
    return out


def grid_layout(arr: Any, sample_dims: tuple[str, ...], mask: np.ndarray) -> Any:
    """Where the features of a grid input (``sample_dims:``) sit on its grid: its feature
    dims, their coordinates, and the features left out where ``mask`` (its features NaN at
    the first sample, what a fit or statistic on it finds) is set
    (:class:`ddr.stats._grid.FeatureLayout`)."""
    from ddr.stats._grid import FeatureLayout, free_name

    fdims = tuple(str(d) for d in arr.dims if d not in sample_dims)
    coords = {
        str(name): (tuple(str(d) for d in c.dims), np.asarray(c.values))
        for name, c in arr.coords.items()
        if c.dims and set(map(str, c.dims)) <= set(fdims)
    }
    name = fdims[0] if len(fdims) == 1 else free_name("feature", tuple(arr.dims))
    kept = np.flatnonzero(~mask.ravel()) if mask.any() else None
    return FeatureLayout(fdims, tuple(int(arr.sizes[d]) for d in fdims), coords, kept, name)


def statistic_maps(
    stat: Any, layout: Any, units: str | None = None, names: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """A statistic's read-outs (those that apply, or the ``names`` chosen), computed on the
    rows of a grid, on the grid: each feature axis its feature dims and coordinates, NaN at
    the masked features (a mean map; a covariance of ``(lat, lon, lat_2, lon_2)``), in their
    units where the data's (``units``) are known. Read-outs not over the grid's features
    are as :func:`statistic_dataset` gives them."""
    import xarray as xr

    from ddr.stats._grid_out import fitted_dataarray
    from ddr.stats._units import units_of, with_units
    from ddr.tags import FEATURE

    out = {}
    for name, value in statistic_readouts(stat, names).items():
        arr = np.asarray(value)
        dims = type(stat).dims_of(name, arr.ndim, FEATURE)
        axes = [i for i, d in enumerate(dims) if d.startswith(FEATURE)]
        said = units_of(type(stat).readout_units.get(name), units)
        if arr.dtype.kind not in "biuf" or any(arr.shape[i] != layout.n_kept for i in axes):
            plain = [d.replace(FEATURE, layout.name) for d in dims]
            out[name] = xr.DataArray(
                arr.astype(object) if arr.dtype.kind == "U" else arr, dims=plain, name=name,
                attrs=with_units({}, said),
            )  # fmt: skip
            continue
        out[name] = fitted_dataarray(
            arr, dims, feature_token=FEATURE, feature_dim=layout.name, feature_coords=None,
            layout=layout, coords={}, name=name,
            attrs={"long_name": f"{name} of {type(stat).__name__}"}, units=said,
        )  # fmt: skip
    if "variance" in out and "covariance" in out and np.ndim(stat.covariance()) != 2:
        del out["covariance"]  # a diagonal statistic: its covariance is the variance
    return out


def data_of(value: Any) -> Any:
    """The array inside a DataArray (other values as they are)."""
    return value.data if hasattr(value, "dims") and hasattr(value, "data") else value
