"""Count how often the data is read.

A *pass* is a read of every row of the input once. Wrap an in-memory array in
:class:`CountingArray`, build a dask array from it, run the code under a local scheduler
(threads or synchronous: the counter lives in this process) and read :attr:`passes`.
"""

from __future__ import annotations

import threading
from typing import Any

import dask.array as da
import numpy as np

__all__ = ["CountingArray", "counting_dask_array"]


class CountingArray:
    """An array-like that counts the rows read through ``__getitem__``.

    Parameters
    ----------
    data : ndarray of shape (n_rows, ...)
    """

    def __init__(self, data: Any) -> None:
        # scipy.sparse rows stay sparse (the dask array's blocks are then CSR matrices)
        self.data = data if _is_sparse(data) else np.asarray(data)
        self.shape = self.data.shape
        self.dtype = self.data.dtype
        self.ndim = self.data.ndim
        self._lock = threading.Lock()
        self.rows_read = 0
        self.reads = 0

    def __getitem__(self, key: Any) -> np.ndarray:
        out = self.data[key]
        if 0 in out.shape:  # dask probes empty slices for metadata: not a read of the data
            return out
        with self._lock:
            self.reads += 1
            self.rows_read += out.shape[0] if out.ndim else 1
        return out

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def passes(self) -> float:
        """Rows read divided by rows held: 1.0 after one full pass."""
        return self.rows_read / self.shape[0]

    def reset(self) -> None:
        with self._lock:
            self.rows_read = 0
            self.reads = 0


def counting_dask_array(data: Any, chunks: Any) -> tuple[da.Array, CountingArray]:
    """A dask array over ``data`` and the counter of its reads.

    The array is built so that every task reads its own chunk from the counter (no task
    fusion can hide a read): ``passes`` is exact.

    Parameters
    ----------
    data : ndarray or scipy.sparse matrix of shape (n_rows, ...)
        The rows (a sparse matrix gives CSR blocks).
    chunks : tuple
        dask chunks.

    Returns
    -------
    array : dask.array.Array
    counter : CountingArray
    """
    counter = CountingArray(data)
    sparse = _is_sparse(counter.data)
    arr = da.from_array(
        counter,
        chunks=chunks,
        asarray=not sparse,
        inline_array=False,
        fancy=False,
        meta=counter.data[:0, :0] if sparse else None,
    )
    return arr, counter


def _is_sparse(data: Any) -> bool:
    from ddr.stats._input import is_sparse

    return is_sparse(data)
