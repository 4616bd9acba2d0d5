"""Float64 copies of centred sub-blocks, in one reused buffer that stays in cache.

Every statistic that multiplies centred rows converts a few hundred rows at a time to float64
and subtracts a shift before its GEMMs. Done naively (``np.subtract(xs, shift,
dtype=np.float64)``) that costs as much as the GEMMs at d = 100: the broadcast of the shift
over rows runs one inner loop per row of 100 values, and a mixed-dtype ufunc goes through a
cast buffer. Here the cast is one flat copy, and the shift is subtracted in place by a BLAS
rank-one update (``DGER`` with a vector of ones: the same single rounding as a subtraction,
2.5x faster than numpy's subtraction of a tiled shift, which reads a second array).

The buffers come from :func:`scratch`, a per-thread pool: dask's nanny starts workers with
``MALLOC_TRIM_THRESHOLD_`` set, which turns off glibc's adaptive mmap threshold, so every
fresh array of more than 128 KiB is a new mapping whose pages fault in on first touch. Reused
buffers measured 3-10 ms less per 100 000 x 100 block in such a process (5-15 % of the
statistic).
"""

from __future__ import annotations

import threading

import numpy as np
from scipy.linalg.blas import dger

__all__ = ["Centring", "scratch", "small_gemm_rows"]

# buffers above this are allocated per call (their page faults are small beside the work on
# them) so that one wide block cannot pin a large buffer to a worker thread for good
_POOLED_BYTES = 64 * 2**20
_pool = threading.local()


def scratch(
    key: str, shape: tuple[int, ...], dtype: np.typing.DTypeLike = np.float64
) -> np.ndarray:
    """An uninitialised array that the calling thread reuses for every request under ``key``.

    Parameters
    ----------
    key : str
        One per call site: the array is valid until the next request with the same key from
        the same thread, so a call site must not request again while it still uses it.
    shape : tuple of int
    dtype : dtype-like

    Returns
    -------
    ndarray of shape ``shape``
        C-contiguous; its memory is shared with earlier requests under ``key`` on this thread.
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes > _POOLED_BYTES:
        return np.empty(shape, dtype=dtype)
    buffers = _pool.__dict__.setdefault("buffers", {})
    raw = buffers.get(key)
    if raw is None or raw.nbytes < nbytes:
        # whole float64 words keep every view aligned
        raw = np.empty(-(-nbytes // 8), dtype=np.float64)
        buffers[key] = raw
    return raw.view(np.uint8)[:nbytes].view(dtype).reshape(shape)


class Centring:
    """Centre sub-blocks of at most ``rows`` rows on ``shift``, into a reused float64 buffer.

    Parameters
    ----------
    shift : ndarray of shape (n_features,)
        Subtracted from every row (float64).
    rows : int
        The largest sub-block that will be centred.

    Notes
    -----
    The array a call returns is a view of the buffer: the next call overwrites it, and so does
    the next ``Centring`` made on the same thread (one at a time per thread).
    """

    def __init__(self, shift: np.ndarray, rows: int) -> None:
        self._shift = np.ascontiguousarray(shift, dtype=np.float64)
        self._buf = scratch("centring.rows", (rows, self._shift.shape[0]))
        self._ones = np.ones(rows)

    def __call__(self, xs: np.ndarray) -> np.ndarray:
        """``xs - shift`` in float64, shape ``xs.shape``; a view of the buffer."""
        m = xs.shape[0]
        out = self._buf[:m]
        np.copyto(out, xs)
        if m == 0 or out.shape[1] == 0:
            return out
        # the (d, m) Fortran view of the C-ordered rows: DGER updates it in place
        return dger(-1.0, self._shift, self._ones[:m], a=out.T, overwrite_a=1).T


def small_gemm_rows(n_features: int, width: int, lo: int, hi: int) -> int:
    """Rows per sub-block for GEMMs of a (rows, n_features) block with a (n_features, width) one.

    OpenBLAS multiplies matrices with ``m n k`` up to about 10**6 in its small-matrix kernels,
    which skip packing: for the skinny products of the randomized PCA and PPCA E-steps
    (d = 100, width 11-21) sub-blocks just under that size measured 1.5-1.8x faster per block
    than 2 MiB ones. Wide data (large ``n_features``) gets ``lo`` rows, where the GEMMs are
    large and efficient anyway.
    """
    return int(np.clip(800_000 // max(n_features * width, 1), lo, hi))
