"""numpy, dask and xarray inputs as one thing: a 2-D array of rows, plus what is needed to give
results back in the caller's form."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any, Literal

import dask.array as da
import numpy as np

from ddr._hooks import dask_reader
from ddr.stats._grid import FeatureLayout, SampleDims, grid_rows
from ddr.stats._grid_blocks import FeatureBlocks, dataset_rows
from ddr.stats._whole_rows import check_row_blocks, merge_feature_chunks

__all__ = [
    "ROW_NUMBERS_ATTR",
    "Rows",
    "SampleDims",
    "align_by_coordinate",
    "align_to_rows",
    "as_rows",
    "has_row_numbers",
    "has_sparse_blocks",
    "is_dask",
    "is_sparse",
    "is_xarray",
    "row_chunk_message",
]

Kind = Literal["numpy", "dask", "xarray"]

#: Attribute of a sample coordinate that holds row numbers ddr gave an input without a
#: coordinate (its rows' positions, from 0; the value is the input's name), so that results
#: computed from a selection of its rows say which rows they are. Such numbers pair rows by
#: position, never by value (:func:`align_by_coordinate`), as rows without a coordinate do.
ROW_NUMBERS_ATTR = "ddr:row_numbers_of"


def has_row_numbers(v: Any, dim: Hashable) -> bool:
    """Whether DataArray ``v``'s coordinate along ``dim`` is row numbers ddr gave its input."""
    coord = v.coords.get(dim) if hasattr(v, "coords") else None
    return coord is not None and ROW_NUMBERS_ATTR in coord.attrs


def is_dask(x: Any) -> bool:
    return isinstance(x, da.Array)


def is_xarray(x: Any) -> bool:
    # xarray is imported lazily: plain numpy users never pay for it.
    return type(x).__module__.startswith("xarray.") and hasattr(x, "dims")


def is_sparse(x: Any) -> bool:
    """Whether ``x`` is an in-memory scipy.sparse matrix or array."""
    # scipy is imported only when something that may be sparse shows up
    if not type(x).__module__.startswith("scipy.sparse"):
        return False
    import scipy.sparse

    return scipy.sparse.issparse(x)


def has_sparse_blocks(x: Any) -> bool:
    """Whether ``x`` (numpy, scipy.sparse, dask or xarray) holds sparse rows: an in-memory
    sparse matrix, or a dask array whose blocks are scipy.sparse matrices."""
    if is_xarray(x):
        x = x.data
    if is_dask(x):
        return is_sparse(getattr(x, "_meta", None))
    return is_sparse(x)


@dataclasses.dataclass(frozen=True)
class Rows:
    """A 2-D (n_samples, n_features) numpy or dask array and where it came from.

    ``template`` is the original DataArray for xarray input (transposed to sample-first), so
    outputs can carry its sample coordinate and feature coordinate. ``data`` may hold sparse
    rows (a scipy.sparse CSR matrix, or a dask array of CSR blocks); the kind is still that of
    the output (numpy in memory).

    A DataArray read with ``sample_dims=`` or with more than two dims (:mod:`ddr.stats._grid`)
    also has ``sample_dims`` (the dims stacked into rows; ``sample_dim`` is the one of them,
    or the name of the stacked rows when there are several) and ``layout``: the feature
    dims, coordinates and mask that feature-shaped outputs are put back on (for component
    rows, the fitted model's layout).
    """

    data: Any
    kind: Kind
    sample_dim: Hashable | None = None
    feature_dim: Hashable | None = None
    template: Any = None
    sample_dims: tuple[Hashable, ...] | None = None
    layout: FeatureLayout | FeatureBlocks | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.data.shape

    def with_data(self, data: Any) -> Rows:
        """The same rows with ``data`` in place of theirs (a transformed copy)."""
        return dataclasses.replace(self, data=data)

    @property
    def is_lazy(self) -> bool:
        """Whether the data is a dask array (xarray input may hold either)."""
        return is_dask(self.data)

    @property
    def is_sparse(self) -> bool:
        """Whether the rows are scipy.sparse (in memory, or the blocks of a dask array)."""
        return has_sparse_blocks(self.data)


def row_chunk_message(chunks: tuple[tuple[int, ...], ...], name: str = "X") -> str:
    return (
        f"{name} is chunked along features (column chunks {chunks[1]}); ddr reads whole rows. "
        f"Rechunk with {name}.rechunk({{1: -1}}) (or store the Zarr array with chunks that hold "
        "complete rows, e.g. chunks=(100_000, n_features))"
    )


def as_rows(
    X: Any,
    *,
    sample_dim: Hashable | None = None,
    name: str = "X",
    allow_column_chunks: bool = False,
    fitted: FeatureLayout | FeatureBlocks | None = None,
    masks: bool = True,
    missing_ok: bool = False,
) -> Rows:
    """Normalise ``X`` to :class:`Rows`.

    Parameters
    ----------
    X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
        A DataArray may have any number of dims when read as a grid (below); a Dataset is
        read as grids side by side, one block of features per data variable
        (:func:`ddr.stats._grid_blocks.dataset_rows`).
    sample_dim : hashable or SampleDims, optional
        For a DataArray, the dimension that indexes samples (default: its first dimension).
        :class:`SampleDims` (what ``sample_dims=`` gives), or a DataArray with more than two
        dims, reads it as a grid (:func:`ddr.stats._grid.grid_rows`): the sample dims
        stacked into rows, the other dims into features, masked features left out.
    allow_column_chunks : bool
        Keep dask arrays chunked along features as they are (only for blockwise maps that do
        not need whole rows). Otherwise they are made into whole-row blocks: a Zarr array
        through ddr's reader (one task per row block, :mod:`ddr.io.row_blocks`), any other
        by dask's merge where it keeps one read per chunk, else refused; a row block that a
        worker's task cannot hold is refused before anything is read
        (:mod:`ddr.stats._whole_rows`).
    fitted, masks, missing_ok
        For a grid: the fitted model's feature layout (input must match it), whether to
        find masked features, whether kept features may hold NaN (see ``grid_rows``).
    """
    if is_xarray(X) and hasattr(X, "data_vars"):
        return _dataset_rows(X, sample_dim, name, fitted, masks, missing_ok)
    if is_xarray(X):
        if not hasattr(X, "variable"):
            raise TypeError(f"{name}: expected an xarray.DataArray, got {type(X).__name__}")
        if isinstance(sample_dim, SampleDims) or X.ndim > 2 or fitted is not None:
            if isinstance(fitted, FeatureBlocks):
                raise ValueError(
                    f"{name} is a DataArray; the model was fitted on a Dataset of the variables "
                    f"{fitted.variables}: give a Dataset of them"
                )
            sdims = (
                sample_dim
                if isinstance(sample_dim, SampleDims)
                else SampleDims.of(X.dims[0] if sample_dim is None else sample_dim, X.dims)
            )
            g = grid_rows(
                X, sdims, name=name, fitted=fitted, masks=masks, missing_ok=missing_ok,
                reader=dask_reader(),  # the chunk reader a 2-D array gets (ddr._hooks)
            )  # fmt: skip
            return Rows(
                g.data, "xarray", g.sample_dim, g.layout.name, g.template, g.sample_dims, g.layout
            )
        if X.ndim != 2:
            raise ValueError(
                f"{name} must be 2-D (n_samples, n_features); got a DataArray with dims {X.dims}"
            )
        sdim = X.dims[0] if sample_dim is None else sample_dim
        if sdim not in X.dims:
            raise ValueError(f"sample_dim={sdim!r} is not a dimension of {name} (dims {X.dims})")
        fdim = next(d for d in X.dims if d != sdim)
        X = X.transpose(sdim, fdim)
        inner = as_rows(X.data, name=name, allow_column_chunks=allow_column_chunks)
        return Rows(inner.data, "xarray", sdim, fdim, X)
    if is_dask(X):
        if X.ndim != 2:
            raise ValueError(
                f"{name} must be 2-D (n_samples, n_features); got a dask array with ndim={X.ndim} "
                f"and shape {X.shape}"
            )
        _check_numeric(X.dtype, name)
        if len(X.chunks[1]) > 1 and not allow_column_chunks:
            return Rows(_whole_rows(X, name), "dask")
        # an array that only reads a Zarr array is re-read by ddr.io's chunk reader, which
        # the package root registers (ddr._hooks): stats does not import the I/O layer
        return Rows(dask_reader()(X), "dask")
    if is_sparse(X):
        if len(X.shape) != 2:
            raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}")
        _check_numeric(X.dtype, name)
        return Rows(_as_csr(X), "numpy")
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features); got an array with ndim={X.ndim} "
            f"and shape {X.shape}"
        )
    _check_numeric(X.dtype, name)
    return Rows(X, "numpy")


def _whole_rows(X: da.Array, name: str) -> da.Array:
    """2-D dask ``X`` chunked along features in whole-row blocks: a Zarr array read a row
    block per task by ddr's reader, any other array merged by dask where that keeps one read
    per chunk (:mod:`ddr.stats._whole_rows`), else refused; then checked to fit a task."""
    rows = dask_reader()(X, whole_axes=(1,))
    if len(rows.chunks[1]) > 1:
        merged = merge_feature_chunks(X, (1,))
        if merged is None:
            raise ValueError(row_chunk_message(X.chunks, name))
        rows = merged

    def rechunk(n: int) -> str:
        return (
            f"{name}.rechunk({{0: {n}, 1: -1}}) (or store the Zarr array with chunks of at "
            f"most {n} rows, e.g. chunks=({n}, {X.shape[1]}))"
        )

    check_row_blocks(rows, (0,), name, rechunk)
    return rows


def _dataset_rows(
    X: Any,
    sample_dim: Hashable | None,
    name: str,
    fitted: FeatureLayout | FeatureBlocks | None,
    masks: bool,
    missing_ok: bool,
) -> Rows:
    """A Dataset's rows: one block of features per data variable."""
    if sample_dim is None:
        raise ValueError(
            f"{name} is a Dataset: name its sample dims with sample_dims= (a Dataset's dims "
            "have no order to take the first of)"
        )
    if isinstance(fitted, FeatureLayout):
        raise ValueError(f"{name} is a Dataset; the model was fitted on one DataArray")
    sdims = (
        sample_dim
        if isinstance(sample_dim, SampleDims)
        else SampleDims.of(sample_dim, tuple(X.dims))
    )
    g = dataset_rows(X, sdims, name=name, fitted=fitted, masks=masks, missing_ok=missing_ok)
    return Rows(g.data, "xarray", g.sample_dim, g.layout.name, g.template, g.sample_dims, g.layout)


def _as_csr(X: Any) -> Any:
    """A scipy.sparse matrix or array as a CSR matrix (rows are what ddr reads)."""
    import scipy.sparse

    return scipy.sparse.csr_matrix(X)


def _check_numeric(dtype: np.dtype, name: str) -> None:
    if np.dtype(dtype).kind not in "biuf":
        raise TypeError(f"{name} must have a numeric dtype; got dtype {dtype}")


def align_by_coordinate(v: Any, rows: Rows, name: str) -> Any:
    """A DataArray ``v`` along the rows' sample dim, put in the order of the rows' sample
    coordinate (as xarray aligns): labels in another order are reordered; labels that do not
    match refuse with a message. Without a coordinate on either side the order is the
    position, and so it is where either side's coordinate is the row numbers ddr gave an
    input that had none (:data:`ROW_NUMBERS_ATTR`). Never pairs a row of X with the label
    of another row."""
    sdim = rows.sample_dim
    if rows.kind != "xarray" or sdim is None or sdim not in v.dims:
        return v
    ours, theirs = rows.template.indexes.get(sdim), v.indexes.get(sdim)
    if ours is None or theirs is None or ours.equals(theirs):
        return v
    if has_row_numbers(rows.template, sdim) or has_row_numbers(v, sdim):
        return v  # numbers ddr gave rows without a coordinate: paired by position
    if len(theirs) == len(ours) and theirs.is_unique and theirs.isin(ours).all():
        return v.sel({sdim: ours})
    missing = ours.difference(theirs)
    raise ValueError(
        f"{name}'s {sdim!r} coordinate does not match X's: {len(missing)} sample(s) of X have "
        f"no {name} (e.g. {list(missing[:3])}); give {name} for exactly X's samples (xarray "
        f"aligns by coordinate, and so does ddr: {name}.sel({sdim}=X.{sdim}))"
    )


def align_to_rows(v: Any, rows: Rows, name: str) -> Any:
    """A 1-D per-sample vector (labels or weights) in the form of ``rows``.

    For dask rows the result is a dask array with the same row chunks; for numpy rows a numpy
    array. A DataArray must lie along the rows' sample dim; it is aligned to X by the sample
    coordinate (:func:`align_by_coordinate`), then taken by value.
    """
    if v is None:
        return None
    if is_xarray(v) and rows.sample_dims is not None and len(rows.sample_dims) > 1:
        v = _stacked_samples(v, rows, name)
    elif is_xarray(v):
        if rows.sample_dim is not None and v.dims != (rows.sample_dim,):
            raise ValueError(
                f"{name} must be 1-D along {rows.sample_dim!r}; got a DataArray with dims {v.dims}"
            )
        v = align_by_coordinate(v, rows, name).data
    n = rows.shape[0]
    if not rows.is_lazy:
        v = np.asarray(v.compute() if is_dask(v) else v)
        if v.ndim == 2 and v.shape[1] == 1:
            v = v[:, 0]
        if v.ndim != 1 or v.shape[0] != n:
            raise ValueError(
                f"{name} has shape {v.shape} but X has {n} samples; expected shape ({n},)"
            )
        return v
    row_chunks = rows.data.chunks[0]
    if is_dask(v):
        if v.ndim != 1:
            raise ValueError(f"{name} must be 1-D (n_samples,); got shape {v.shape}")
        if any(np.isnan(c) for c in row_chunks) or any(np.isnan(c) for c in v.chunks[0]):
            if v.numblocks[0] != len(row_chunks):
                raise ValueError(
                    f"X has unknown chunk sizes and {name} has a different number of blocks; "
                    "call X.compute_chunk_sizes() first"
                )
            return v
        if v.shape[0] != n:
            raise ValueError(
                f"{name} has {v.shape[0]} entries but X has {n} samples; they must be equal"
            )
        return v if v.chunks[0] == row_chunks else v.rechunk((row_chunks,))
    v = np.asarray(v)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_samples,); got shape {v.shape}")
    if any(np.isnan(c) for c in row_chunks):
        raise ValueError(
            f"X has unknown chunk sizes, so numpy {name} cannot be aligned with it; "
            "call X.compute_chunk_sizes() first"
        )
    if v.shape[0] != n:
        raise ValueError(
            f"{name} has {v.shape[0]} entries but X has {n} samples; they must be equal"
        )
    return da.from_array(v, chunks=(row_chunks,))


def _stacked_samples(v: Any, rows: Rows, name: str) -> Any:
    """A per-sample DataArray over several sample dims as a 1-D array in the rows' order
    (C order over the sample dims), its coordinates aligned to X's first."""
    sdims = rows.sample_dims or ()
    if set(v.dims) != set(sdims):
        raise ValueError(
            f"{name} must lie along X's sample dims {tuple(sdims)}; got a DataArray with dims "
            f"{v.dims}"
        )
    for d in sdims:
        ours, theirs = rows.template.indexes.get(d), v.indexes.get(d)
        if ours is not None and theirs is not None and not ours.equals(theirs):
            if len(theirs) != len(ours) or not theirs.isin(ours).all():
                raise ValueError(
                    f"{name}'s {d!r} coordinate does not match X's: give {name} for exactly "
                    f"X's samples ({name}.sel({d}=X.{d}))"
                )
            v = v.sel({d: ours})
    v = v.transpose(*sdims)
    return v.data.reshape(-1)
