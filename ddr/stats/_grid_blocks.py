"""A Dataset as rows: each data variable is a block of features (its own grid, coordinates
and mask, :func:`ddr.stats._grid.grid_rows`), the blocks side by side in the order of the
Dataset's variables, all over the same sample dims. A multivariate EOF analysis of, e.g.,
sea-surface temperature and sea-level pressure on their own grids is one fit of such rows.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable
from typing import Any

import dask.array as da
import numpy as np

from ddr.stats._grid import FeatureLayout, GridRows, free_name, grid_rows

__all__ = ["FeatureBlocks", "dataset_rows"]


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureBlocks:
    """The feature blocks of a Dataset: one :class:`FeatureLayout` per data variable.

    Parameters
    ----------
    variables : tuple of str
        The data variables, in the order their features sit in the rows.
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
    variables = tuple(str(v) for v in X.data_vars)
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
        )
        for i, v in enumerate(variables)
    ]
    blocks = [p.data for p in parts]
    if any(isinstance(b, da.Array) for b in blocks):
        # one block of whole rows per row chunk: the variables' columns side by side
        data = da.concatenate([da.asarray(b) for b in blocks], axis=1).rechunk({1: -1})
    else:
        data = np.hstack(blocks)
    layout = FeatureBlocks(
        variables,
        tuple(p.layout for p in parts),
        free_name("feature", tuple(X.dims)),
    )
    template = X.transpose(*sample_dims, ...)
    return GridRows(data, tuple(sample_dims), parts[0].sample_dim, layout, template)
