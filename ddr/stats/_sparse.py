"""Blocks of scipy.sparse CSR rows: float64 copies, per-column moments and checks, never dense.

Statistics that read sparse rows (``accepts_sparse = True``) use these on each block; every
operation here costs O(nnz + n_features), whatever the number of implicit zeros.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse

__all__ = ["as_csr64", "check_sparse_block", "column_moments", "negative_entries"]


def check_sparse_block(X: Any, name: str = "X") -> scipy.sparse.csr_matrix:
    """``X`` as a 2-D numeric CSR matrix with finite stored values, or raise naming what it
    was."""
    if len(X.shape) != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}")
    if np.dtype(X.dtype).kind not in "biuf":
        raise TypeError(f"{name} must have a numeric dtype; got dtype {X.dtype}")
    X = scipy.sparse.csr_matrix(X)
    if X.dtype.kind == "f" and not np.isfinite(X.data).all():
        n_nan = int(np.isnan(X.data).sum())
        n_inf = int(np.isinf(X.data).sum())
        raise ValueError(f"{name} contains {n_nan} NaN and {n_inf} infinite stored value(s)")
    return X


def as_csr64(X: Any) -> scipy.sparse.csr_matrix:
    """A checked CSR block with float64 values (the index arrays are shared, not copied)."""
    X = check_sparse_block(X)
    if X.dtype == np.float64:
        return X
    return scipy.sparse.csr_matrix(
        (X.data.astype(np.float64), X.indices, X.indptr), shape=X.shape, copy=False
    )


def column_moments(
    X: scipy.sparse.csr_matrix, w: np.ndarray | None = None
) -> tuple[float, np.ndarray, np.ndarray]:
    """Row count, column means and centred column sums of squares of a CSR block, in float64.

    The implicit zeros count: ``sq_j = sum_stored (x - m_j)^2 + (n - nnz_j) m_j^2``, summed
    over stored values only, so the cost is O(nnz + d). The mean is corrected by the residual
    of the centred sums (as the dense statistics do), so the result is exact to round-off.
    With frequency weights ``w`` (shape (n_rows,)) every row counts ``w`` times: ``n`` is
    their sum and the zeros' weight is ``n`` less the weight of the stored values.
    """
    rows, d = X.shape
    if rows == 0:
        return 0.0, np.zeros(d), np.zeros(d)
    data = np.asarray(X.data, dtype=np.float64)
    if w is None:
        n = float(rows)
        stored: np.ndarray = np.bincount(X.indices, minlength=d).astype(np.float64)
        wd = None
    else:
        n = float(w.sum())
        if n == 0:
            return 0.0, np.zeros(d), np.zeros(d)
        wd = np.repeat(np.asarray(w, dtype=np.float64), np.diff(X.indptr))
        stored = np.bincount(X.indices, weights=wd, minlength=d)
    mean = np.bincount(X.indices, weights=data if wd is None else data * wd, minlength=d) / n
    dev = data - mean[X.indices]
    wdev = dev if wd is None else dev * wd
    zeros = n - stored
    resid = (np.bincount(X.indices, weights=wdev, minlength=d) - zeros * mean) / n
    sq = np.bincount(X.indices, weights=wdev * dev, minlength=d) + zeros * mean * mean
    sq -= n * resid * resid
    return n, mean + resid, np.maximum(sq, 0.0)


def negative_entries(X: Any) -> np.ndarray:
    """The negative values of a block (dense or CSR), for messages about counts."""
    values = X.data if scipy.sparse.issparse(X) else np.asarray(X)
    return values[values < 0]
