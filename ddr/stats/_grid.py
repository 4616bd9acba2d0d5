"""N-D DataArrays as rows: the sample dims become the rows, every other dim the features.

Gridded data (time x lat x lon, a land or ocean mask of NaN at fixed grid points) is read as
a 2-D array of rows without a copy of the data: the DataArray is transposed to its sample
dims first and reshaped, one dask reshape per row block when it is chunked only along its
sample dims. Features are ordered C-style over the feature dims in the DataArray's order
(after the sample dims are moved first).

The mask
--------
Features NaN at every sample are *masked*: left out of the rows the estimator sees and put
back as NaN in every feature-shaped result (:meth:`FeatureLayout.expand`). Which features
they are is found without a pass over the data of its own:

- data in memory: every sample is looked at (``isnan`` over the array);
- dask data: the features NaN at the **first sample** are the mask (a read of one sample),
  and every row block is checked in the pass that reads it for the fit (the task that
  stacks the block): a masked feature with a value, or a kept feature with NaN, is an error
  naming the feature's coordinates and the sample;
- a mask already known (:class:`SampleDims` with a ``mask``: a pipeline reads its grid
  input's first sample once while planning, a search once for all its folds) is taken as
  it is, and checked block by block the same way: nothing is read to find it.

A feature NaN at some samples only is an error naming where, except for estimators that
take missing values (scikit-learn's ``input_tags.allow_nan``: PPCA with ``solver="em"``,
FactorAnalysis, StandardScaler), which are given those NaN. ``transform``/``predict`` input
must have the fitted mask and feature coordinates, checked the same way.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Iterable
from typing import Any

import dask
import dask.array as da
import numpy as np

from ddr._hooks import DaskReader
from ddr.stats._grid_select import Where, select_block, show_value, unravel_sample
from ddr.stats._whole_rows import check_row_blocks, merge_feature_chunks

__all__ = [
    "FeatureLayout",
    "GridRows",
    "SampleDims",
    "free_name",
    "grid_rows",
    "unravel_sample",
]


class SampleDims(tuple):
    """The sample dims a caller named with ``sample_dims=`` (a tuple of dim names).

    Methods pass it on as their ``sample_dim`` argument, so that an estimator written for
    ``sample_dim=`` carries it through unchanged; :func:`ddr.stats._input.as_rows` reads it
    as "stack these dims into rows, everything else into features, with masks".

    Parameters
    ----------
    dims : iterable of hashable
        The sample dims.
    mask : xarray.DataArray of bool, optional
        The grid's mask where it is already known (True at the masked features, on the
        feature dims in any order): the fit reads no sample to find it and checks each row
        block against it, as always. None: the fit finds it (see the module's notes).
        Equality, hashing and tokens are the dims' alone.
    """

    mask: Any

    def __new__(cls, dims: Iterable[Hashable] = (), mask: Any = None) -> SampleDims:
        self = super().__new__(cls, dims)
        self.mask = mask
        return self

    @classmethod
    def of(cls, value: Hashable | tuple[Hashable, ...], dims: tuple[Hashable, ...]) -> SampleDims:
        """``value`` (a dim name, or a tuple or list of names) as sample dims; a tuple that is
        itself one of ``dims`` is that one dim (xarray allows tuples as names)."""
        if isinstance(value, (tuple, list)) and not (isinstance(value, tuple) and value in dims):
            return cls(value)
        return cls((value,))


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureLayout:
    """Where the columns of the rows sit in the feature dims of an N-D DataArray.

    Parameters
    ----------
    dims : tuple of str
        The feature dims, in the order the features are stacked (C order).
    shape : tuple of int
        Their sizes; ``prod(shape)`` features in all.
    coords : dict
        Coordinates on the feature dims only: name -> (dims, values).
    kept : ndarray of int64 of shape (n_kept,) or None
        The stacked features the estimator sees (those not masked), in increasing order;
        None when none is masked.
    name : str
        The dim of the stacked features (``feature_dim_``): the one feature dim, or a name
        that is none of the DataArray's dims.
    """

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    coords: dict[str, tuple[tuple[str, ...], np.ndarray]]
    kept: np.ndarray | None
    name: str

    @property
    def n_features(self) -> int:
        """Features of the grid, masked ones included."""
        return math.prod(self.shape)

    @property
    def n_kept(self) -> int:
        """Features the estimator sees."""
        return self.n_features if self.kept is None else int(self.kept.size)

    @property
    def masked(self) -> np.ndarray:
        """The stacked positions of the masked features (int64, increasing)."""
        if self.kept is None:
            return np.empty(0, dtype=np.int64)
        keep = np.zeros(self.n_features, dtype=bool)
        keep[self.kept] = True
        return np.flatnonzero(~keep)

    def mask(self) -> Any:
        """The mask as :class:`SampleDims` takes it: a bool DataArray on the feature dims
        (True at the masked features), with their coordinates."""
        import xarray as xr

        values = np.zeros(self.n_features, dtype=bool)
        values[self.masked] = True
        return xr.DataArray(values.reshape(self.shape), dims=self.dims, coords=self.coords)

    def describe(self, j: int) -> str:
        """Stacked feature ``j`` by its coordinates: ``lat=10.0, lon=-30.0``."""
        at = np.unravel_index(int(j), self.shape)
        parts = []
        for dim, i in zip(self.dims, at, strict=True):
            coord = self.coords.get(dim)
            parts.append(f"{dim}={show_value(coord[1][i])}" if coord else f"{dim}[{int(i)}]")
        return ", ".join(parts)

    def expand(self, values: Any, axis: int) -> Any:
        """``values`` (numpy or dask) with its ``axis`` of ``n_kept`` features put back on the
        grid: that axis becomes ``len(dims)`` axes of ``shape``, NaN at the masked features."""
        values = _as_float(values)
        axis = axis % values.ndim
        if self.kept is not None:
            if isinstance(values, da.Array):
                chunks = tuple(
                    (self.n_features,) if i == axis else c for i, c in enumerate(values.chunks)
                )
                values = da.map_blocks(
                    _expand_block, values, self.kept, self.n_features, axis, chunks=chunks,
                    dtype=values.dtype,
                )  # fmt: skip
            else:
                values = _expand_block(values, self.kept, self.n_features, axis)
        new_shape = values.shape[:axis] + self.shape + values.shape[axis + 1 :]
        return values.reshape(new_shape)

    def xr_coords(self, suffix: str = "") -> dict[str, Any]:
        """The feature coordinates as ``{name: (dims, values)}`` for a DataArray, every name
        and dim with ``suffix`` (the second feature axis of a d x d matrix)."""
        return {
            f"{name}{suffix}": (tuple(f"{d}{suffix}" for d in dims), values)
            for name, (dims, values) in self.coords.items()
        }

    def check_same(self, other: FeatureLayout, name: str) -> None:
        """Refuse ``other`` (the layout of new input) unless its grid and coordinates are
        this (fitted) one's, naming the first difference."""
        if other.shape != self.shape:
            raise ValueError(
                f"{name}'s feature dims {dict(zip(other.dims, other.shape, strict=True))} do "
                f"not have the sizes fitted: {dict(zip(self.dims, self.shape, strict=True))}"
            )
        for cname, (dims, values) in self.coords.items():
            given = other.coords.get(cname)
            if given is None or given[0] != dims:
                continue  # a coordinate the input lacks pairs features by position
            if given[1].shape != values.shape or not _same_values(given[1], values):
                where = np.flatnonzero(np.asarray(given[1] != values).ravel())
                first = int(where[0]) if where.size else 0
                raise ValueError(
                    f"{name}'s feature coordinate {cname!r} differs from the one the model was "
                    f"fitted on (first at position {first}: "
                    f"{show_value(given[1].ravel()[first])} where it was "
                    f"{show_value(values.ravel()[first])}); give {name} on the fitted grid "
                    f"(e.g. {name}.sel({cname}=model.as_xarray(...).{cname}) or interp)"
                )


@dataclasses.dataclass(frozen=True)
class GridRows:
    """What :func:`grid_rows` makes of an N-D DataArray."""

    data: Any
    sample_dims: tuple[Hashable, ...]
    sample_dim: Hashable
    #: a FeatureLayout; for a Dataset, ddr.stats._grid_blocks.FeatureBlocks
    layout: Any
    template: Any
    #: with ``select=False``: (kept, masked, where) of :func:`select_into`, for the caller's
    #: tasks to select and check the kept columns of each block of ``data`` (every column)
    pending: tuple[Any, ...] | None = None


def grid_rows(
    X: Any,
    sample_dims: tuple[Hashable, ...],
    *,
    name: str = "X",
    fitted: FeatureLayout | None = None,
    masks: bool = True,
    missing_ok: bool = False,
    reader: DaskReader | None = None,
    select: bool = True,
) -> GridRows:
    """Stack DataArray ``X`` into (n_samples, n_kept) rows over its ``sample_dims``.

    Parameters
    ----------
    X : xarray.DataArray
        Any number of dims; ``sample_dims`` index the samples, the others the features.
    sample_dims : tuple of hashable
        The sample dims (C order over them gives the rows).
    name : str
        What messages call ``X``.
    fitted : FeatureLayout, optional
        The layout of the fitted model: ``X`` must have its feature dims (in any order: they
        are put in the fitted order), sizes, coordinates and mask.
    masks : bool
        Find and leave out masked features (False: every feature is kept, nothing checked:
        the component scores ``inverse_transform`` reads). Where ``sample_dims`` is a
        :class:`SampleDims` with a ``mask``, that is the mask: no sample is read to find it.
    missing_ok : bool
        Kept features may hold NaN (estimators that take missing values).
    reader : DaskReader, optional
        What dask data is read through (:func:`ddr._hooks.dask_reader`), asked for whole
        feature dims: a Zarr array chunked along them comes in row blocks, each read by one
        task. Data still chunked along them is merged by dask's ``rechunk`` where that keeps
        one read per chunk, else refused (:mod:`ddr.stats._whole_rows`); either way a row
        block that a worker's task cannot hold is refused before anything is read.
    select : bool
        False: dask rows keep every feature, and the selection of the kept ones (with its
        checks) is left to the caller's tasks (``GridRows.pending``): a Dataset's variables
        are selected into the block that puts them side by side, with no copy between.

    Returns
    -------
    GridRows
    """
    dims = tuple(X.dims)
    sdims = tuple(sample_dims)
    for d in sdims:
        if d not in dims:
            raise ValueError(f"sample_dims={sdims!r}: {d!r} is not a dimension of {name} ({dims})")
    if len(set(sdims)) != len(sdims):
        raise ValueError(f"sample_dims={sdims!r} names a dim twice")
    fdims = tuple(d for d in dims if d not in sdims)
    if fitted is not None:
        if set(fdims) != set(fitted.dims):
            raise ValueError(
                f"{name} has feature dims {fdims} (all dims but sample_dims={sdims}); the model "
                f"was fitted on feature dims {fitted.dims}"
            )
        fdims = fitted.dims
    if not fdims:
        raise ValueError(
            f"{name} has no feature dims: its dims {dims} are all sample_dims; a single "
            f"feature is a dim of size 1 ({name}.expand_dims('feature', axis=-1))"
        )
    Xt = X.transpose(*sdims, *fdims)
    arr = Xt.data
    if np.dtype(arr.dtype).kind not in "biuf":
        raise TypeError(f"{name} must have a numeric dtype; got dtype {arr.dtype}")
    ns = len(sdims)
    if isinstance(arr, da.Array):
        split = {d: len(c) for d, c in zip(fdims, arr.chunks[ns:], strict=True) if len(c) > 1}
        if reader is not None:  # as stored, before the transpose: what a reader recognises
            whole = tuple(i for i, d in enumerate(dims) if d not in sdims)
            Xt = X.copy(data=reader(X.data, whole_axes=whole if split else ())).transpose(
                *sdims, *fdims
            )
            arr = Xt.data
        if split:
            arr = _whole_grid_rows(arr, ns, name, split, Xt)
    n = math.prod(arr.shape[:ns])
    layout = _layout(Xt, sdims, fdims, kept=None)
    if fitted is not None:
        fitted.check_same(layout, name)
    rows = arr.reshape(n, layout.n_features)
    known = getattr(sample_dims, "mask", None) if fitted is None and masks else None
    where = Where(
        name, layout, _sample_info(Xt, sdims), fitted is not None, missing_ok, known is not None
    )
    if fitted is not None:
        kept = fitted.kept
    elif not masks:
        kept = None
    elif known is not None:  # found before (a pipeline's planning, a search): nothing read
        kept = _kept_known(known, Xt, ns, where)
    elif isinstance(rows, da.Array):
        # the first sample, sliced from the DataArray as stored (through the reader's chunk
        # tasks, not its row blocks: a row block may hold many stored chunks along time):
        # the chunks that hold it are read once more (not a pass; tests count it)
        stored = X if reader is None else X.copy(data=reader(X.data))
        first = stored.isel({d: 0 for d in sdims}).transpose(*fdims).data
        kept = _kept_from(np.asarray(first.compute()), where)
    else:
        kept = _kept_in_memory(rows, where)
    layout = dataclasses.replace(layout, kept=kept)
    where = dataclasses.replace(where, layout=layout)
    if masks and np.dtype(rows.dtype).kind == "f":
        masked = layout.masked
        if isinstance(rows, da.Array) and not select:
            pending = (kept, masked, where)
            return GridRows(rows, sdims, _sample_dim(sdims, dims), layout, Xt, pending)
        if isinstance(rows, da.Array):
            # the check lives in the task that stacks the block, so it costs no read
            rows = da.map_blocks(
                select_block, rows, kept, masked, dask.delayed(where, pure=True),
                chunks=(rows.chunks[0], (layout.n_kept,)), dtype=rows.dtype,
                meta=np.empty((0, 0), dtype=rows.dtype),
            )  # fmt: skip
        else:
            rows = select_block(rows, kept, masked, where)
    elif kept is not None:
        rows = rows[:, kept]
    return GridRows(rows, sdims, _sample_dim(sdims, dims), layout, Xt)


def _sample_dim(sdims: tuple[Hashable, ...], dims: tuple[Hashable, ...]) -> Hashable:
    return sdims[0] if len(sdims) == 1 else free_name("sample", dims)


# ------------------------------------------------------------------------ internals
def _layout(
    Xt: Any, sdims: tuple[Hashable, ...], fdims: tuple[Hashable, ...], kept: np.ndarray | None
) -> FeatureLayout:
    shape = tuple(int(s) for s in Xt.shape[len(sdims) :])
    on_features = set(fdims)
    coords = {
        str(cname): (tuple(str(d) for d in c.dims), np.asarray(c.values))
        for cname, c in Xt.coords.items()
        if c.dims and set(c.dims) <= on_features
    }
    name = str(fdims[0]) if len(fdims) == 1 else free_name("feature", tuple(Xt.dims))
    return FeatureLayout(tuple(str(d) for d in fdims), shape, coords, kept, name)


def _sample_info(Xt: Any, sdims: tuple[Hashable, ...]) -> tuple:
    shape = tuple(int(s) for s in Xt.shape[: len(sdims)])
    coords = {d: np.asarray(Xt.indexes[d]) for d in sdims if d in Xt.indexes}
    return sdims, shape, coords


def free_name(base: str, dims: tuple[Hashable, ...]) -> str:
    """``base``, with underscores added until it is none of ``dims``."""
    name = base
    while name in dims:
        name += "_"
    return name


def _kept_from(first: np.ndarray, where: Where) -> np.ndarray | None:
    """The features not NaN at the first sample (None: all of them)."""
    if first.dtype.kind != "f":
        return None
    nan = np.isnan(first.ravel())
    if nan.all():
        raise ValueError(
            f"{where.name}: every feature is NaN at the first sample "
            f"({unravel_sample(where.samples, 0)}); ddr reads the mask (the features NaN at "
            "every sample) from the first sample: drop the samples that are all NaN first"
        )
    return np.flatnonzero(~nan) if nan.any() else None


def _kept_known(mask: Any, Xt: Any, ns: int, where: Where) -> np.ndarray | None:
    """The features not masked by a known ``mask`` (a bool DataArray on the feature dims of
    ``Xt``, True where masked; None: all of them), after checking that it is one of them."""
    fdims = tuple(Xt.dims[ns:])
    dims = tuple(getattr(mask, "dims", ()))
    if not hasattr(mask, "transpose") or len(dims) != len(fdims) or set(dims) != set(fdims):
        raise ValueError(
            f"{where.name}: the mask must be a boolean DataArray on its feature dims {fdims}; "
            f"got {'dims ' + str(dims) if dims else type(mask).__name__}"
        )
    mask = mask.transpose(*fdims)
    if tuple(mask.shape) != tuple(Xt.shape[ns:]):
        raise ValueError(
            f"{where.name}: the mask has sizes {dict(mask.sizes)}; its feature dims have "
            f"{dict(zip(fdims, Xt.shape[ns:], strict=True))}"
        )
    for cname, coord in mask.coords.items():
        ours = Xt.coords.get(cname)
        if ours is not None and ours.dims == coord.dims and not _same_values(ours, coord):
            raise ValueError(
                f"{where.name}: the mask's coordinate {cname!r} differs from {where.name}'s; "
                "a mask pairs with the grid point by point"
            )
    values = np.asarray(mask.values)
    if values.dtype != bool:
        raise TypeError(f"{where.name}: the mask must be boolean; got dtype {values.dtype}")
    if values.all():
        raise ValueError(f"{where.name}: the mask masks every feature")
    if values.any() and np.dtype(Xt.dtype).kind != "f":
        j = int(np.flatnonzero(values.ravel())[0])
        raise ValueError(
            f"{where.name} has dtype {Xt.dtype}, which holds no NaN, but the mask masks "
            f"features (the first at {where.layout.describe(j)})"
        )
    return np.flatnonzero(~values.ravel()) if values.any() else None


def _kept_in_memory(rows: np.ndarray, where: Where) -> np.ndarray | None:
    """The features not NaN at every sample, looked at in all of them; a feature NaN at some
    samples only is refused unless the estimator takes missing values."""
    if rows.dtype.kind != "f":
        return None
    nan = np.isnan(rows)
    every = nan.all(axis=0)
    if every.all():
        raise ValueError(f"{where.name}: every feature is NaN at every sample")
    if not where.missing_ok:
        some = nan.any(axis=0) & ~every
        if some.any():
            j = int(np.flatnonzero(some)[0])
            raise ValueError(where.partial_nan(j, int(np.flatnonzero(nan[:, j])[0])))
    return np.flatnonzero(~every) if every.any() else None


def _expand_block(values: np.ndarray, kept: np.ndarray, n: int, axis: int) -> np.ndarray:
    shape = list(values.shape)
    shape[axis] = n
    out = np.full(shape, np.nan, dtype=values.dtype)
    index: list[Any] = [slice(None)] * values.ndim
    index[axis] = kept
    out[tuple(index)] = values
    return out


def _as_float(values: Any) -> Any:
    """``values`` in a dtype that holds NaN (the masked features)."""
    if np.dtype(values.dtype).kind in "fc":
        return values
    return values.astype(np.float64)


def _same_values(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    try:
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    except TypeError:
        return bool(np.array_equal(a, b))


def _whole_grid_rows(
    arr: da.Array, ns: int, name: str, split: dict[Hashable, int], Xt: Any
) -> da.Array:
    """``arr`` (sample dims first) with its feature dims whole: as read, or merged by dask
    where that keeps one read per chunk, else refused; then checked to fit a task."""
    fdims = tuple(Xt.dims[ns:])
    if any(len(c) > 1 for c in arr.chunks[ns:]):
        merged = merge_feature_chunks(arr, tuple(range(ns, arr.ndim)))
        if merged is None:
            raise ValueError(_feature_chunk_message(name, split))
        arr = merged
    sdims = tuple(Xt.dims[:ns])
    inner = math.prod(int(s) for s in arr.shape[1:ns])

    def rechunk(rows: int) -> str:
        outer = rows // max(inner, 1)
        if outer < 1:
            return (
                f"chunk it along its sample dims {sdims} so that a block holds at most "
                f"{rows} samples, and whole along {fdims}"
            )
        spec = ", ".join([f"{sdims[0]!r}: {outer}", *(f"{d!r}: -1" for d in fdims)])
        return (
            f"{name}.chunk({{{spec}}}) (or store the Zarr array with chunks of at most "
            f"{outer} along {sdims[0]!r})"
        )

    check_row_blocks(arr, tuple(range(ns)), name, rechunk)
    return arr


def _feature_chunk_message(name: str, split: dict[Hashable, int]) -> str:
    said = ", ".join(f"{d!r}: {k} chunks" for d, k in split.items())
    rechunk = ", ".join(f"{d!r}: -1" for d in split)
    return (
        f"{name} is chunked along its feature dims ({said}); ddr reads whole rows (every "
        f"feature of a sample in one block). Rechunk with {name}.chunk({{{rechunk}}}) (or "
        "store the Zarr array with chunks that hold whole grids, split along the sample dims)"
    )
