"""A train/test split of rows by a hash of each row's position: lazy and chunk-invariant.

scikit-learn's ``train_test_split`` draws a permutation of all rows and gathers them, which
a lazy dask array cannot do without reading it. Here row ``i`` is a test row when the top 32
bits of ``splitmix64(i, seed)`` (the hash :class:`~ddr.model_selection.HashKFold` uses) fall
below ``test_size * 2**32``: a decision of the position alone, so each block keeps its own
rows (a blockwise selection whose sizes the client knows from the positions, without
reading anything), the order of the rows is kept, and every chunking of the same rows gives
the same split. With ``test_size = 1 / K`` the test rows are fold 0 of
``HashKFold(K, seed=seed)``.

This is for fits that are not one pass of statistics (EM for a Gaussian mixture, k-means,
factor analysis), where :class:`~ddr.model_selection.GridSearchCV` does not apply: fit on
the training rows, score on the held-out rows (docs/user-guide/model-selection.md).
"""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any

import dask.array as da
import numpy as np

from ddr.model_selection._split import _splitmix64, select_rows
from ddr.stats._input import is_dask, is_sparse, is_xarray

__all__ = ["hash_train_test_split"]


def _in_test(start: int, size: int, test_size: float, seed: int) -> np.ndarray:
    """Whether each of the rows ``start .. start + size - 1`` is a test row."""
    h = _splitmix64(np.arange(start, start + size), seed) >> np.uint64(32)
    # h * K < 2**32 is HashKFold's fold 0 for test_size = 1 / K: compare exactly in floats
    return h.astype(np.float64) < test_size * 2.0**32


def _check(test_size: Any, seed: Any) -> tuple[float, int]:
    if (
        isinstance(test_size, bool)
        or not isinstance(test_size, Real)
        or not 0 < float(test_size) < 1
    ):
        raise ValueError(
            f"test_size must be a float strictly between 0 and 1 (the fraction of rows held "
            f"out); got {test_size!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")
    return float(test_size), int(seed)


def _n_rows(a: Any, sample_dim: Hashable | None) -> int:
    if is_xarray(a):
        return int(a.sizes[sample_dim if sample_dim is not None else a.dims[0]])
    if is_dask(a) and np.isnan(a.shape[0]):
        raise ValueError(
            "an array has unknown chunk sizes; call compute_chunk_sizes() first (the split is "
            "fixed by row positions)"
        )
    return int(a.shape[0]) if hasattr(a, "shape") else len(a)


def hash_train_test_split(
    *arrays: Any,
    test_size: float = 0.2,
    seed: int = 0,
    sample_dim: Hashable | None = None,
) -> list[Any]:
    """Split arrays into train and test rows by a hash of each row's position, lazily.

    Like scikit-learn's ``train_test_split(*arrays, shuffle=True)``, but the split of row
    ``i`` depends on ``i`` and ``seed`` alone: a dask array is split without being read (each
    block keeps its own rows, in their order), and any chunking of the same rows gives the
    same split. The test fraction is ``test_size`` to within binomial noise.

    Parameters
    ----------
    *arrays : numpy arrays, scipy.sparse matrices, dask arrays or DataArrays
        Row-aligned, each of shape (n_samples, ...). A dask array keeps its chunks (blocks
        left without rows are dropped).
    test_size : float, default 0.2
        The expected fraction of rows held out, in (0, 1). ``1 / K`` holds out fold 0 of
        ``HashKFold(K, seed=seed)``.
    seed : int, default 0
        A non-negative integer: each seed gives another split.
    sample_dim : hashable, optional
        The sample dim of DataArrays (default: each one's first dim).

    Returns
    -------
    list
        ``[a_train, a_test, b_train, b_test, ...]``: for each array its training rows and
        its test rows, of the array's kind (dask arrays lazily).

    Raises
    ------
    ValueError
        No arrays, arrays of different numbers of rows, ``test_size`` outside (0, 1), a
        negative ``seed``, unknown dask chunk sizes, or a split that leaves the train or the
        test rows empty (too few rows).

    Examples
    --------
    >>> import numpy as np
    >>> from ddr.model_selection import hash_train_test_split
    >>> X_train, X_test = hash_train_test_split(np.arange(10).reshape(5, 2), test_size=0.4)
    >>> X_test
    array([[6, 7]])
    """
    if not arrays:
        raise ValueError("At least one array required as input")
    test_size, seed = _check(test_size, seed)
    sizes = [_n_rows(a, sample_dim) for a in arrays]
    if len(set(sizes)) != 1:
        raise ValueError(
            f"Found input variables with inconsistent numbers of samples: {sizes}; the arrays "
            "must be row-aligned"
        )
    n = sizes[0]
    n_test = int(sum(_in_test(s, min(2**20, n - s), test_size, seed).sum()
                     for s in range(0, n, 2**20)))  # fmt: skip
    if n_test in (0, n):
        side = "test" if n_test == 0 else "train"
        raise ValueError(
            f"hash_train_test_split(test_size={test_size}, seed={seed}) leaves the {side} rows "
            f"of n_samples={n} empty: too few rows; give more rows or another test_size"
        )
    out: list[Any] = []
    for a in arrays:
        out.extend(_split(a, test_size, seed, sample_dim))
    return out


def _split(a: Any, test_size: float, seed: int, sample_dim: Hashable | None) -> list[Any]:
    """``[train, test]`` rows of one array."""
    if is_dask(a):
        return [_dask_rows(a, test_size, seed, keep) for keep in (False, True)]
    if is_xarray(a):
        dim = sample_dim if sample_dim is not None else a.dims[0]
        test = _in_test(0, int(a.sizes[dim]), test_size, seed)
        return [a.isel({dim: np.flatnonzero(~test)}), a.isel({dim: np.flatnonzero(test)})]
    data = a if is_sparse(a) else np.asarray(a)
    test = _in_test(0, data.shape[0], test_size, seed)
    return [data[np.flatnonzero(~test)], data[np.flatnonzero(test)]]


def _dask_rows(a: da.Array, test_size: float, seed: int, test: bool) -> da.Array:
    """The train (or test) rows of a dask array: a blockwise selection, sizes known."""
    sizes, start = [], 0
    for size in a.chunks[0]:
        sizes.append(int(_on_side(start, size, test_size, seed, test).sum()))
        start += size
    return select_rows(a, sizes, "ddr-hash-split", _on_side, test_size, seed, test)


def _on_side(start: int, n: int, test_size: float, seed: int, test: bool) -> np.ndarray:
    """Whether each of the rows ``start .. start + n - 1`` is on ``test``'s side."""
    return _in_test(start, n, test_size, seed) == test
