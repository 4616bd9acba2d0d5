"""Products of a block's centred rows with a small matrix, a cache-sized tile at a time.

What the blockwise maps of the linear models run (LDA's scores and projections, the
posterior means of PPCA and factor analysis, TruncatedSVD's and KMeans' products): ``(X -
shift) @ M`` of a float32 or float64 block, with ``M`` a few columns wide. Done on the whole
block, the float64 cast, the centred copy and the product are each an n-sized temporary that
leaves the cache (and, in a dask worker, faults its pages in anew: see
:mod:`ddr.stats._centring`); a 100 000 x 100 float32 block took 2-3 times the GEMM's time.
Here each tile of rows is cast and centred into one reused float64 buffer
(:class:`~ddr.stats._centring.Centring`: the same single rounding as ``X - shift`` in
float64) and multiplied in place of the output, in tiles of the size at which OpenBLAS's
small-matrix kernels skip packing (:func:`~ddr.stats._centring.small_gemm_rows`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ddr.stats._centring import Centring, scratch, small_gemm_rows

__all__ = ["centred_product", "centred_tiles"]


def centred_tiles(
    X: np.ndarray, shift: np.ndarray | None, width: int
) -> Iterator[tuple[slice, np.ndarray]]:
    """The block's rows a tile at a time: ``(rows, X[rows] - shift)`` in float64.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Any real dtype.
    shift : ndarray of shape (d,) or None
        Subtracted from every row (None: the rows are only cast).
    width : int
        Columns of the matrix the tiles will be multiplied by (sets the tile's rows).

    Yields
    ------
    rows : slice
        The tile's rows in ``X``.
    tile : ndarray of shape (rows, d), float64
        A view of this thread's reused buffer: valid until the next tile.
    """
    n, d = X.shape
    step = min(small_gemm_rows(d, width, 256, 4096), max(n, 1))
    if shift is None:
        buf = scratch("tiled.rows", (step, d))
        for start in range(0, n, step):
            xs = X[start : start + step]
            tile = buf[: xs.shape[0]]
            np.copyto(tile, xs, casting="unsafe")
            yield slice(start, start + xs.shape[0]), tile
        return
    centre = Centring(shift, step)
    for start in range(0, n, step):
        xs = X[start : start + step]
        yield slice(start, start + xs.shape[0]), centre(xs)


def centred_product(
    X: np.ndarray,
    M: np.ndarray,
    *,
    shift: np.ndarray | None = None,
    offset: np.ndarray | None = None,
    dtype: Any = np.float64,
) -> np.ndarray:
    """``(X - shift) @ M - offset`` of a block, computed in float64 a tile of rows at a time.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    M : ndarray of shape (d, k), float64
    shift : ndarray of shape (d,), optional
        Subtracted from the rows before the product (in float64).
    offset : ndarray of shape (k,), optional
        Subtracted from the product.
    dtype : dtype, default float64
        Of the result (a float32 result is rounded from the float64 product of each tile).

    Returns
    -------
    ndarray of shape (n, k)
    """
    n, k = X.shape[0], M.shape[1]
    out = np.empty((n, k), dtype=dtype)
    M = np.ascontiguousarray(M, dtype=np.float64)
    direct = out.dtype == np.float64
    for rows, tile in centred_tiles(X, shift, k):
        part = out[rows] if direct else scratch("tiled.product", (tile.shape[0], k))
        np.matmul(tile, M, out=part)
        if offset is not None:
            part -= offset
        if not direct:
            out[rows] = part
    return out
