"""Blocks of scipy.sparse CSR rows: float64 copies, per-column moments, the Gram product and
checks, never dense.

Statistics that read sparse rows (``accepts_sparse = True``) use these on each block; every
operation here costs O(nnz + n_features) (O(nnz l + n_features l) for the Gram product),
whatever the number of implicit zeros.

The Gram product ``X^T diag(w) X V`` of float32 values runs in float32 (scipy's products of
float32 CSR and a float32 basis take about half the time of float64's: half the bytes of
values and of ``V``, whose rows every stored value gathers, and twice the SIMD width), with
every float32 sum bounded to :data:`F32_TERMS` terms: ``X V`` sums one row's stored values
(rows longer than that take the float64 products), and ``X^T U`` is taken over runs of
:data:`F32_TERMS` rows, whose (d, l) results are summed in float64. Measured on 1 000 000
documents x 20 000 words (98.6 M stored counts, k = 10, 5 power iterations): singular values
within 3.4e-9 relative of the float64 products', each singular vector within 5.2e-7 rad
(the subspace of the ten within 4.6e-7 rad), explained-variance ratios within 4.6e-7.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse
from sklearn.utils.sparsefuncs import mean_variance_axis

from ddr.stats._centring import scratch

try:  # the kernels behind scipy's ``csr @ dense`` and ``csc @ dense``, which add into an output
    from scipy.sparse._sparsetools import csc_matvecs as _csc_matvecs
    from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs
except ImportError:  # pragma: no cover  (a scipy that moved them: its public products)
    _csc_matvecs = _csr_matvecs = None

__all__ = [
    "F32_TERMS",
    "as_csr64",
    "check_sparse_block",
    "column_moments",
    "gram_product",
    "negative_entries",
]

#: the most terms a float32 sum of :func:`gram_product` adds up (rounding error grows with
#: the terms a sum has: 2048 float32 terms keep a product entry within about 1e-7 of float64's)
F32_TERMS = 2048


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
    over stored values only, so the cost is O(nnz + d), corrected by the residual of the
    centred sums (Chan, Golub and LeVeque's corrected two-pass algorithm), so the result is
    exact to round-off. scikit-learn's compiled ``mean_variance_axis`` computes it (two loops
    over the stored values, against six ``bincount`` and gather passes in numpy: 5-6x
    faster on a block of 8 M values). With frequency weights ``w`` (shape (n_rows,)) every
    row counts ``w`` times: ``n`` is their sum and the zeros' weight is ``n`` less the weight
    of the stored values.

    Parameters
    ----------
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        A checked block (:func:`check_sparse_block`); its values are summed in float64.
    w : ndarray of shape (n_rows,), optional
        Non-negative frequency weights.

    Returns
    -------
    n : float
        Rows (the sum of the weights).
    mean : ndarray of shape (n_features,)
    sq : ndarray of shape (n_features,)
        Centred sums of squares (``n`` times the variances).
    """
    rows, d = X.shape
    n = float(rows if w is None else np.sum(w, dtype=np.float64))
    if rows == 0 or n == 0:
        return 0.0, np.zeros(d), np.zeros(d)
    if X.dtype != np.float64:  # scikit-learn returns float32 moments of float32 values
        X = scipy.sparse.csr_matrix(
            (X.data.astype(np.float64), X.indices, X.indptr), shape=X.shape, copy=False
        )
    weights = None if w is None else np.asarray(w, dtype=np.float64)
    mean, var = mean_variance_axis(X, axis=0, weights=weights)
    return n, np.asarray(mean, dtype=np.float64), np.maximum(var * n, 0.0)


def gram_product(X: scipy.sparse.csr_matrix, V: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """``X^T diag(w) (X V)`` of a checked CSR block, in float64 (``w`` None: all ones).

    Float32 values are multiplied in float32, each sum bounded to :data:`F32_TERMS` terms
    (see the module's docstring); other values (and float32 rows longer than that) in
    float64, with the same results as scipy's ``X.T @ (X @ V)``, bit for bit.

    Parameters
    ----------
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        A checked block (:func:`check_sparse_block`).
    V : ndarray of shape (n_features, n_basis)
        The basis, float64.
    w : ndarray of shape (n_rows,), optional
        Non-negative frequency weights.

    Returns
    -------
    ndarray of shape (n_features, n_basis)
        float64.
    """
    n = X.shape[0]
    if X.dtype == np.float32 and n and np.diff(X.indptr).max() <= F32_TERMS:
        product = _products(X, V, w, np.float32, F32_TERMS)
        if np.isfinite(product).all():  # else a float32 sum overflowed: float64 decides
            return product
    return _products(as_csr64(X), V, w, np.float64, max(n, 1))


def _products(
    X: scipy.sparse.csr_matrix, V: np.ndarray, w: np.ndarray | None, dtype: Any, rows: int
) -> np.ndarray:
    """``X^T diag(w) (X V)``: products in ``dtype`` (that of ``X``'s values), ``X^T U`` over
    runs of ``rows`` rows whose results are summed in float64.

    scipy's kernels (``csr.T @ U``: a scatter into the (d, l) result, the fastest of scipy's
    forms, measured against ``(U^T X)^T`` and a CSC copy of the block) write into buffers this
    thread reuses (:func:`ddr.stats._centring.scratch`): in a dask worker (glibc's adaptive
    mmap threshold off: see :mod:`ddr.stats._centring`) each fresh (d, l) result of a run
    faulted its pages in, which doubled the cost of the float32 products.
    """
    n, d = X.shape
    width = V.shape[1]
    if dtype == np.float64:
        basis = np.ascontiguousarray(V, dtype=np.float64)
    else:
        basis = scratch("sparse.basis", (d, width), dtype)
        np.copyto(basis, V, casting="same_kind")
    U = scratch("sparse.xv", (n, width), dtype)  # (n, l): each entry sums one row's values
    U.fill(0)
    _accumulate("csr", (n, d), X.indptr, X.indices, X.data, basis, U)
    if w is not None:
        U *= w[:, None]
    out = np.zeros((d, width))
    single = dtype == np.float64 and rows >= n  # one float64 run: straight into the result
    run = out if single else scratch("sparse.run", (d, width), dtype)
    ptr = X.indptr
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        lo, hi = ptr[start], ptr[stop]
        if not single:
            run.fill(0)
        # the run's rows are the columns of a CSC X^T: views of the block's arrays
        part = (ptr[start : stop + 1] - lo, X.indices[lo:hi], X.data[lo:hi])
        _accumulate("csc", (d, stop - start), *part, U[start:stop], run)
        if not single:
            out += run
    return out


def _accumulate(
    kind: str,
    shape: tuple[int, int],
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    B: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out += A @ B`` for the CSR (``kind="csr"``) or CSC matrix ``A`` of ``shape`` given by
    its arrays (of one index dtype; ``data``, ``B`` and ``out`` of one float dtype, ``out``
    C-contiguous): scipy's compiled kernel in place, or its public product where the kernel
    cannot be imported."""
    n_vecs = B.shape[1]
    kernel = _csr_matvecs if kind == "csr" else _csc_matvecs
    if kernel is not None:
        kernel(shape[0], shape[1], n_vecs, indptr, indices, data, B.ravel(), out.reshape(-1))
        return
    make = scipy.sparse.csr_matrix if kind == "csr" else scipy.sparse.csc_matrix
    out += make((data, indices, indptr), shape=shape) @ B


def negative_entries(X: Any) -> np.ndarray:
    """The negative values of a block (dense or CSR), for messages about counts."""
    values = X.data if scipy.sparse.issparse(X) else np.asarray(X)
    return values[values < 0]
