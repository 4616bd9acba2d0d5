"""The selection of a grid's kept features from its row blocks, and the checks that come
with it, with messages that name the feature and the sample (by their coordinates).

Each row block of a grid (:func:`ddr.stats._grid.grid_rows`) goes through
:func:`select_into` in the task that makes it: the masked features must be NaN at every row,
the kept ones (unless the estimator takes missing values) at none, and the kept columns are
copied out (into their place among a Dataset's variables, :mod:`ddr.stats._grid_blocks`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np

from ddr.stats._checks import block_start, sum_is_finite
from ddr.stats._columns import first_not_nan, place_columns, take_columns

__all__ = [
    "Where", "select_block", "select_into", "select_pieces", "show_value", "unravel_sample",
]  # fmt: skip


def unravel_sample(info: tuple[tuple[Hashable, ...], tuple[int, ...], dict], row: int) -> str:
    """Row ``row`` of the stacked samples by its coordinates: ``time=2000-01-03``."""
    sdims, shape, coords = info
    at = np.unravel_index(int(row), shape)
    return ", ".join(
        f"{d}={show_value(coords[d][i])}" if d in coords else f"{d}[{int(i)}]"
        for d, i in zip(sdims, at, strict=True)
    )


@dataclasses.dataclass(frozen=True)
class Where:
    """What messages about a block need: the names of features and samples."""

    name: str
    layout: Any  # the grid's FeatureLayout (ddr.stats._grid, which builds on this module)
    samples: tuple[tuple[Hashable, ...], tuple[int, ...], dict]
    fitted: bool
    missing_ok: bool
    known: bool = False  # the mask was given (SampleDims.mask), not read from the first sample

    def sample(self, row: int) -> str:
        return f"sample {row} ({unravel_sample(self.samples, row)})"

    def masked_has_value(self, j: int, row: int) -> str:
        feat = self.layout.describe(j)
        if self.fitted:
            return (
                f"{self.name}: the feature at {feat} is masked in the fitted model (NaN at every "
                f"sample it was fitted on) but has a value at {self.sample(row)}; {self.name} "
                "must have the mask the model was fitted with"
            )
        if self.known:
            return (
                f"{self.name}: the feature at {feat} is masked (NaN at every sample, as the "
                "grid's mask found before this fit says: for a pipeline input, the features "
                f"NaN at its first sample) but has a value at {self.sample(row)}. A grid's "
                "mask must be the same at every sample (rows appended to a grid included): a "
                "feature NaN at some samples only must be filled or dropped first"
            )
        first = unravel_sample(self.samples, 0)
        return (
            f"{self.name}: the feature at {feat} is NaN at the first sample ({first}), so it "
            f"was taken as masked (NaN at every sample), but it has a value at "
            f"{self.sample(row)}. For dask input ddr reads the mask from the first sample: "
            "a feature NaN at some samples only must be filled or dropped first"
            + (
                " (an estimator that takes missing values needs a value at the first sample "
                f"of every feature that is not masked; or load {self.name} into memory, where "
                "every sample is looked at)"
                if self.missing_ok
                else ""
            )
        )

    def partial_nan(self, j: int, row: int) -> str:
        feat = self.layout.describe(j)
        if self.fitted:
            return (
                f"{self.name}: the feature at {feat} is NaN at {self.sample(row)}, but it is "
                f"not masked in the fitted model; {self.name} must have the mask the model was "
                "fitted with (NaN at the same features at every sample)"
            )
        return (
            f"{self.name}: the feature at {feat} is NaN at some samples but not at every "
            f"sample (NaN at {self.sample(row)}); ddr leaves out only features NaN at every "
            f"sample (a mask). Fill or drop these NaN (e.g. {self.name}.fillna(...)), or use "
            "an estimator that takes missing values (PPCA, FactorAnalysis)"
        )


def select_block(
    block: np.ndarray,
    kept: np.ndarray | None,
    masked: np.ndarray,
    where: Where,
    block_info: dict[Any, Any] | None = None,
) -> np.ndarray:
    return select_into(block, kept, masked, where, block_start(block_info) or 0)


def select_into(
    block: np.ndarray,
    kept: np.ndarray | None,
    masked: np.ndarray,
    where: Where,
    start: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The kept columns of a row block (written into ``out`` when given), after checking
    that the masked ones are NaN at every row and, unless the estimator takes missing
    values, the kept ones at none; ``start`` is the row of ``block[0]`` (for messages)."""
    if masked.size and (found := first_not_nan(block, masked)) is not None:
        r, c = found
        raise ValueError(where.masked_has_value(int(masked[c]), start + r))
    if kept is not None:
        out = take_columns(block, kept, out)
    elif out is not None:
        np.copyto(out, block, casting="same_kind")
    else:
        out = block
    _check_kept(out, kept, where, start)
    return out


def select_pieces(
    pieces: Iterable[tuple[tuple[slice, ...], np.ndarray]],
    grid: tuple[int, ...],
    selection: tuple[np.ndarray | None, np.ndarray, Where] | None,
    start: int,
    out: np.ndarray,
) -> None:
    """:func:`select_into` of a row block given as the stored chunks it is read from: each
    chunk's kept features copied straight into their columns of ``out``, with the same
    checks and messages.

    Parameters
    ----------
    pieces : iterable of (tuple of slice, ndarray)
        The block's chunks: ``at`` (the chunk's rows in the block, then its place along each
        feature dim of ``grid``) and its values, of shape (rows, ...) (its sizes along them)
        (``ddr.io.zarr_chunks.StoredChunks.pieces``).
    grid : tuple of int
        The feature dims' sizes (C order over them gives the features).
    selection : tuple or None
        ``(kept, masked, where)`` as for :func:`select_into`; None: every feature, unchecked.
    start : int
        The row of the block's first row (for messages).
    out : ndarray of shape (n_rows, n_kept)
        Any strides; written whole.
    """
    kept, _, where = (None, None, None) if selection is None else selection
    ids = np.arange(math.prod(grid)).reshape(grid)
    if kept is None:
        column = ids.ravel()
    else:
        column = np.full(ids.size, -1, dtype=np.int64)
        column[kept] = np.arange(kept.size)
    first: tuple[int, int] | None = None  # (row, feature) of the first masked value
    for at, values in pieces:
        rows, features = at[0], ids[at[1:]].ravel()
        flat = values.reshape(values.shape[0], features.size)
        dest = column[features]
        index = np.flatnonzero(dest >= 0)
        if index.size < features.size and where is not None:
            lost = np.flatnonzero(dest < 0)
            if (found := first_not_nan(flat, lost)) is not None:
                here = (rows.start + found[0], int(features[lost[found[1]]]))
                first = here if first is None else min(first, here)
        place_columns(flat, index, out[rows], dest[index])
    if where is None:
        return
    if first is not None:
        raise ValueError(where.masked_has_value(first[1], start + first[0]))
    _check_kept(out, kept, where, start)


def _check_kept(out: np.ndarray, kept: np.ndarray | None, where: Where, start: int) -> None:
    """Unless the estimator takes missing values, no NaN in the kept columns ``out``."""
    if not where.missing_ok and not sum_is_finite(out):
        nan = np.isnan(out)
        if nan.any():  # infinity is the estimator's to refuse, with its own message
            c = int(np.flatnonzero(nan.any(axis=0))[0])
            r = int(np.flatnonzero(nan[:, c])[0])
            j = c if kept is None else int(kept[c])
            raise ValueError(where.partial_nan(j, start + r))


def show_value(v: Any) -> str:
    v = v.item() if isinstance(v, np.generic) and not isinstance(v, np.datetime64) else v
    if isinstance(v, np.datetime64):
        return str(v)
    return repr(v) if isinstance(v, str) else str(v)
