"""ddr.stats._columns: a block's chosen columns by runs, against numpy's fancy indexing."""

from __future__ import annotations

import numpy as np
import pytest

from ddr.stats._columns import column_runs, first_not_nan, place_columns, take_columns

RNG = np.random.default_rng(0)


def _long_runs(d: int) -> np.ndarray:
    keep = np.ones((30, d // 30), dtype=bool)
    keep[10:, :40] = False  # a continent: long runs of kept columns
    return np.flatnonzero(keep.ravel())


def _short_runs(d: int) -> np.ndarray:
    return np.flatnonzero(RNG.random(d) < 0.6)  # a ragged coastline: runs of a few columns


@pytest.mark.parametrize("index", [_long_runs(3000), _short_runs(3000), np.arange(3000)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_take_columns_equals_fancy_indexing_into_a_view_or_a_new_array(index, dtype):
    block = RNG.standard_normal((17, 3000)).astype(dtype)
    want = block[:, index]
    np.testing.assert_array_equal(take_columns(block, index), want)
    wide = np.full((17, index.size + 9), -1.0)  # float64: the values are cast into it
    got = take_columns(block, index, out=wide[:, 4 : 4 + index.size])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(wide[:, 4 : 4 + index.size], want)
    assert (wide[:, :4] == -1).all() and (wide[:, 4 + index.size :] == -1).all()


def test_column_runs_rebuild_the_index():
    for index in (_long_runs(3000), _short_runs(3000), np.array([5]), np.array([], dtype=int)):
        starts, stops = column_runs(index)
        parts = [np.arange(a, b) for a, b in zip(starts, stops, strict=True)]
        rebuilt = np.concatenate(parts) if parts else np.array([], dtype=int)
        np.testing.assert_array_equal(rebuilt, index)
        assert (starts[1:] > stops[:-1]).all()  # runs are maximal


def test_first_not_nan_is_the_lowest_row_then_column():
    block = np.full((6, 50), np.nan)
    index = np.r_[3:10, 20:30]
    assert first_not_nan(block, index) is None
    block[4, 25] = 1.0  # in the second run
    block[5, 4] = 1.0  # in the first, but a later row
    assert first_not_nan(block, index) == (4, 7 + 5)
    block[:, 15] = 0.0  # not among the columns asked about
    assert first_not_nan(block, np.r_[3:10]) == (5, 1)


@pytest.mark.parametrize("index", [_long_runs(3000), _short_runs(3000), np.arange(3000)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_place_columns_equals_fancy_assignment_into_a_strided_view(index, dtype):
    """``out[:, at] = block[:, index]`` into a float64 view of a wider block: ``at`` breaks
    the runs of ``index`` (every 100th column skipped), so long runs are copied run by run
    and short ones by fancy indexing."""
    block = RNG.standard_normal((17, 3000)).astype(dtype)
    at = np.flatnonzero(np.arange(index.size * 2) % 100 != 3)[: index.size]
    want = np.full((17, 2 * index.size + 5), -1.0)
    want[:, 5:][:, at] = block[:, index]
    got = np.full_like(want, -1.0)
    place_columns(block, index, got[:, 5:], at)
    np.testing.assert_array_equal(got, want)
    place_columns(block, index[:0], got[:, 5:], at[:0])  # nothing to place
    np.testing.assert_array_equal(got, want)
