"""A Dataset as rows: each data variable is a block of features (its own grid, coordinates
and mask, :func:`ddr.stats._grid.grid_rows`), the blocks side by side in the order of the
variables' names, all over the same sample dims. A multivariate EOF analysis of, e.g.,
sea-surface temperature and sea-level pressure on their own grids is one fit of such rows.

Each variable is read as a DataArray is (:func:`ddr.stats._grid.grid_rows` through ddr's
reader): a variable of a Zarr store chunked along space comes in row blocks, one task per
block reading every stored chunk of its rows (:mod:`ddr.io.row_blocks`), so a pass reads
each stored byte once. The variables' row blocks are put side by side by one task per row
block (no rechunk of the columns), which also selects each variable's kept features (those
not masked) into its place and checks them (:func:`ddr.stats._grid_select.select_into`).
Where a variable's row blocks are those of the result, that task reads its stored chunks
itself and copies each chunk's kept features straight into place
(:func:`ddr.stats._grid_select.select_pieces`): one copy between the store's decoded chunk
and the statistics, where reading the variable's block first would make two. Where the
variables' row blocks differ (stored in other chunks along time, or grouped otherwise for
their widths) they are cut at the boundaries of all of them, and where the blocks side by
side would not fit one task of a worker (:func:`ddr.stats._whole_rows.task_budget`) they
are cut into smaller row blocks; a variable whose row blocks are cut is read by tasks of its
own, each still reading its stored chunks once.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from ddr._hooks import dask_reader
from ddr.stats._grid import FeatureLayout, GridRows, free_name, grid_rows
from ddr.stats._grid_select import select_into, select_pieces
from ddr.stats._whole_rows import check_row_blocks, rows_that_fit, task_budget

__all__ = ["FeatureBlocks", "dataset_rows"]


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureBlocks:
    """The feature blocks of a Dataset: one :class:`FeatureLayout` per data variable.

    Parameters
    ----------
    variables : tuple of str
        The data variables, in the order their features sit in the rows (sorted by name).
    layouts : tuple of FeatureLayout
        Each variable's feature grid and mask.
    name : str
        The dim of the stacked features of all variables (``feature_dim_``).
    """

    variables: tuple[str, ...]
    layouts: tuple[FeatureLayout, ...]
    name: str

    @property
    def n_features(self) -> int:
        """Features of all grids, masked ones included."""
        return sum(layout.n_features for layout in self.layouts)

    @property
    def n_kept(self) -> int:
        """Features the estimator sees."""
        return sum(layout.n_kept for layout in self.layouts)

    @property
    def dims(self) -> tuple[str, ...]:
        """Every feature dim of every variable, each once."""
        return tuple(dict.fromkeys(d for layout in self.layouts for d in layout.dims))

    def split(self, values: Any, axis: int) -> list[Any]:
        """``values`` (numpy or dask) cut along ``axis`` of ``n_kept`` features into each
        variable's part."""
        edges = np.cumsum([0] + [layout.n_kept for layout in self.layouts])
        index: list[Any] = [slice(None)] * values.ndim
        parts = []
        for lo, hi in itertools.pairwise(edges):
            index[axis] = slice(int(lo), int(hi))
            parts.append(values[tuple(index)])
        return parts


def dataset_rows(
    X: Any,
    sample_dims: tuple[Hashable, ...],
    *,
    name: str = "X",
    fitted: FeatureBlocks | None = None,
    masks: bool = True,
    missing_ok: bool = False,
) -> GridRows:
    """Stack the data variables of Dataset ``X`` into (n_samples, n_kept) rows, one block of
    columns per variable (see :func:`ddr.stats._grid.grid_rows` for each block).

    Parameters
    ----------
    X : xarray.Dataset
        Every data variable has all of ``sample_dims`` and at least one other dim.
    sample_dims : tuple of hashable
        The sample dims, shared by the variables.
    name : str
        What messages call ``X`` (a variable is ``X['sst']``).
    fitted : FeatureBlocks, optional
        The blocks of the fitted model: ``X`` must have its variables, each on its grid.
    masks, missing_ok : bool
        As for ``grid_rows``.

    Returns
    -------
    GridRows
        Its ``layout`` is a :class:`FeatureBlocks`.
    """
    # in the order of their names: zarr 3 lists a group's arrays in no fixed order, so the
    # Dataset's own order would make the same store give other columns from run to run
    variables = tuple(sorted(str(v) for v in X.data_vars))
    if not variables:
        raise ValueError(f"{name} is a Dataset without data variables")
    if fitted is not None:
        if set(variables) != set(fitted.variables):
            raise ValueError(
                f"{name} has the variables {variables}; the model was fitted on {fitted.variables}"
            )
        variables = fitted.variables
    parts = [
        grid_rows(
            X[v],
            sample_dims,
            name=f"{name}[{v!r}]",
            fitted=None if fitted is None else fitted.layouts[i],
            masks=masks,
            missing_ok=missing_ok,
            reader=dask_reader(),  # the chunk reader a DataArray gets (ddr._hooks)
            select=False,  # selected where the blocks are put side by side
        )
        for i, v in enumerate(variables)
    ]
    blocks = [p.data for p in parts]
    data: Any
    if any(isinstance(b, da.Array) for b in blocks):
        widths = [p.layout.n_kept if p.pending else int(p.data.shape[1]) for p in parts]
        data = _side_by_side(
            [da.asarray(b) for b in blocks],
            [p.pending for p in parts],
            widths,
            [_stored_reads(p) for p in parts],
        )
        # cut to fit a task where a row fits: what is left to refuse is a row too wide
        check_row_blocks(
            data, (0,), name,
            lambda rows: f"give each worker more memory for {rows} rows of all variables",
        )  # fmt: skip
    else:
        data = np.hstack(blocks)
    layout = FeatureBlocks(
        variables,
        tuple(p.layout for p in parts),
        free_name("feature", tuple(X.dims)),
    )
    template = X.transpose(*sample_dims, ...)
    return GridRows(data, tuple(sample_dims), parts[0].sample_dim, layout, template)


@dataclasses.dataclass(frozen=True)
class _StoredBlock:
    """A variable's row block as the stored chunks it is read from: ``source.pieces(region)``
    (``ddr.io.zarr_chunks.StoredChunks``), of a feature grid of sizes ``grid``."""

    source: Any
    region: tuple[tuple[int, int], ...]
    grid: tuple[int, ...]


def _stored_reads(part: GridRows) -> tuple[Any, tuple[int, ...], list[Any]] | None:
    """Where ddr's reader made a variable's rows one task per row block
    (``ddr.io.row_blocks.RowBlocksLayer``, over the array as stored, in the order of its
    rows): ``(source, row chunks, the region of each block)``, else None."""
    arr = part.template.data  # the reader's array, unless transposed to the rows' dim order
    if not isinstance(arr, da.Array) or len(part.sample_dims) != 1:
        return None
    graph = arr.__dask_graph__()
    layer = graph.layers.get(arr.name) if isinstance(graph, HighLevelGraph) else None
    source, regions = getattr(layer, "source", None), getattr(layer, "regions", None)
    if source is None or not isinstance(regions, dict):
        return None
    if any(len(c) != 1 for c in arr.chunks[1:]):
        return None
    rest = (0,) * (arr.ndim - 1)
    return source, arr.chunks[0], [regions[(i, *rest)] for i in range(len(arr.chunks[0]))]


def _side_by_side(
    blocks: list[da.Array],
    pending: list[tuple[Any, ...] | None],
    widths: list[int],
    stored: list[tuple[Any, tuple[int, ...], list[Any]] | None],
) -> da.Array:
    """The variables' rows (each whole along its columns) side by side: one task per row
    block, on row blocks common to all of them and small enough for one task, which selects
    each variable's kept columns where ``pending`` says (``GridRows.pending``) into its
    ``widths`` columns of the block. A variable whose row blocks ddr's reader makes from
    several stored chunks each (``stored``, :func:`_stored_reads`) is read by that task, its
    chunks copied straight into place, where its row blocks are those of the result: the
    one copy of its data between the store and the statistics."""
    dtype = np.result_type(*(b.dtype for b in blocks))
    rows = _common_rows([b.chunks[0] for b in blocks])
    width = sum(widths)
    budget = task_budget()
    if budget is not None:
        # the block as put together and the float64 copy the statistics work on
        fit = rows_that_fit(budget, width, max(b.dtype.itemsize for b in blocks))
        rows = _at_most(rows, fit)
    reads = [r if r is not None and r[1] == rows else None for r in stored]
    blocks = [b if b.chunks[0] == rows else b.rechunk({0: rows}) for b in blocks]
    blocks = [b if len(b.chunks[1]) == 1 else b.rechunk({1: -1}) for b in blocks]
    # the selections (masks, the messages' names and coordinates) once in the graph
    shared = dask.delayed(tuple(pending), pure=True)
    name = f"ddr-dataset-rows-{tokenize(*blocks, shared, dtype)}"
    starts = itertools.accumulate(rows, initial=0)
    layer: dict[Any, Any] = {}
    for i, start in zip(range(len(rows)), starts, strict=False):
        parts = [
            (b.name, i, 0)
            if r is None
            else _StoredBlock(r[0], r[2][i], tuple(int(n) for n in r[0].shape[1:]))
            for b, r in zip(blocks, reads, strict=True)
        ]
        layer[(name, i, 0)] = (_stack, parts, shared.key, start, widths, dtype)
    # collections, as dask's stubs do not say; a variable read in the task is none
    deps: list[Any] = [b for b, r in zip(blocks, reads, strict=True) if r is None] + [shared]
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    return da.Array(graph, name, (rows, (width,)), meta=np.empty((0, 0), dtype=dtype))


def _stack(
    parts: list[np.ndarray | _StoredBlock],
    pending: tuple[tuple[Any, ...] | None, ...],
    start: int,
    widths: list[int],
    dtype: np.dtype,
) -> np.ndarray:
    """One row block of every variable, side by side (the columns in the variables' order),
    each variable's kept columns selected and checked into its place."""
    first = parts[0]
    n = first.region[0][1] - first.region[0][0] if isinstance(first, _StoredBlock) else len(first)
    out = np.empty((n, sum(widths)), dtype=dtype)
    at = 0
    for part, selection, w in zip(parts, pending, widths, strict=True):
        view = out[:, at : at + w]
        if isinstance(part, _StoredBlock):
            select_pieces(part.source.pieces(part.region), part.grid, selection, start, view)
        elif selection is None:  # selected before (a variable in memory) or nothing to select
            np.copyto(view, part, casting="same_kind")
        else:
            kept, masked, where = selection
            select_into(np.asarray(part), kept, masked, where, start, out=view)
        at += w
    return out


def _common_rows(chunks: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Row chunks whose boundaries are those of every one of ``chunks``: the variables' row
    blocks cut where any of them ends (each stays a whole number of cut blocks)."""
    ends = sorted(set().union(*(itertools.accumulate(c) for c in chunks)))
    return tuple(int(b - a) for a, b in itertools.pairwise([0, *ends])) or (0,)


def _at_most(rows: tuple[int, ...], most: int) -> tuple[int, ...]:
    """``rows`` with every chunk larger than ``most`` cut into near-equal parts (at least
    one row each: a row that does not fit is the memory check's to refuse)."""
    most = max(most, 1)
    out: list[int] = []
    for c in rows:
        parts = -(-c // most) if c else 1
        out.extend(c // parts + (1 if i < c % parts else 0) for i in range(parts))
    return tuple(out)
