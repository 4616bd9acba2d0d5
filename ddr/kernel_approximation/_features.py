"""Nystroem features of row blocks: the kernel as one GEMM and an elementwise map, in tiles.

``phi(X) = k(X, L) @ N`` for m landmarks ``L`` and the (m, m) normalization ``N``. At m = 1000
the product with ``N`` is 2 m^2 flops a row, ten times the kernel's 2 m d at d = 100, so the
map runs at the speed of that GEMM when the rest stays out of its way:

- the kernels that are functions of inner products (rbf, linear, poly, sigmoid, cosine) are
  one GEMM of a tile of rows with a matrix made once from the landmarks, then an elementwise
  map in place. For rbf the tile is augmented with each row's squared norm and a column of
  ones, and the landmarks with ``-gamma`` and ``-gamma |c|^2``, so that the GEMM gives the
  exponent ``-gamma |x - c|^2`` itself (of rows and landmarks moved by the landmarks' mean,
  which keeps the expansion from cancelling digits on offset data); then ``min(., 0)`` and
  ``exp``, two passes over the tile;
- tiles of rows small enough that the (rows, m) kernel tile stays in a core's cache between
  the GEMM that makes it and the GEMM that uses it, in the thread's reused buffers
  (:func:`~ddr.stats._centring.scratch`); the output is the only (n, m) array;
- float32 rows with the rbf kernel are computed in float32 end to end (single-precision
  GEMMs run at twice the speed; scikit-learn's ``Nystroem`` also multiplies by the
  normalization in float32 for float32 input). Measured against the float64 features of the
  same rows (``benchmarks/results/transform-floors.md``), the error is that of
  scikit-learn's float32 features on the benchmark data (5.5e-6 against 6.8e-6, features up
  to 0.87, m = 1000), up to 5x it on small low-dimensional sets, where scikit-learn's
  distances, computed in float64, are the larger part of its error (3e-6 against 6e-7 on
  400 x 5 rows, m = 60): the exponent is formed in float32 from the rows' own float32
  values. The kernels that are not translation invariant (linear, poly, sigmoid, cosine)
  lose most digits in float32 on data away from the origin, and the laplacian kernel and
  callables are not a GEMM: they are computed in float64 and rounded to float32 at the end.
  Other input is computed and returned in float64.

The laplacian kernel and callables are evaluated by :func:`ddr.linalg.kernels.pairwise_kernel`,
a tile at a time, before the same product.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ddr.families import out_dtype
from ddr.linalg.kernels import KernelSpec, pairwise_kernel
from ddr.stats._centring import scratch

__all__ = ["FeatureMap", "compute_dtype", "feature_map", "nystroem_block", "tile_rows"]

#: bytes of the (rows, m) kernel tile: it stays in a core's L2 cache between the two GEMMs
#: (products of 256 to 4096 rows with a (1000, 1000) normalization measured within the
#: noise of each other on one core; 128 rows 10-25 % slower)
TILE_BYTES = 2**20
#: kernels computed as one GEMM and an elementwise map
GEMM_KERNELS = frozenset({"rbf", "linear", "poly", "sigmoid", "cosine"})


def tile_rows(m: int, itemsize: int) -> int:
    """Rows of a tile whose (rows, m) kernel block holds about :data:`TILE_BYTES`.

    At least 256 rows, so that each GEMM with the (m, m) normalization reads (and packs) that
    matrix once for many rows; at most 2048, which bounds the work on the padding of a small
    block (:func:`nystroem_block`).

    Parameters
    ----------
    m : int
        Landmarks.
    itemsize : int
        Bytes of an entry (4 for float32, 8 for float64).

    Returns
    -------
    int
    """
    return int(np.clip(TILE_BYTES // (itemsize * max(m, 1)), 256, 2048))


def compute_dtype(dtype: Any, kernel: KernelSpec) -> np.dtype:
    """What a block of ``dtype`` is computed in: float32 for float32 rows and the rbf kernel,
    float64 otherwise (see the module's notes)."""
    single = np.dtype(dtype) == np.float32 and kernel.kernel == "rbf"
    return np.dtype(np.float32 if single else np.float64)


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureMap:
    """What the features of a block need besides the block, in the dtype they are computed in.

    Made by :func:`feature_map` on the client; its arrays travel to the workers as separate
    arguments of :func:`nystroem_block` (the (m, m) normalization as one graph key, not a
    copy in every task).

    Parameters
    ----------
    right : ndarray of shape (n_cols, m)
        The right factor of the kernel GEMM: ``[2 gamma (L - s)^T; -gamma; -gamma |L - s|^2]``
        for rbf (``n_cols = n_features + 2``), ``gamma L^T`` for poly and sigmoid, ``L^T``
        for linear, the unit landmarks' transpose for cosine; for the kernels that
        :func:`~ddr.linalg.kernels.pairwise_kernel` evaluates, the landmarks ``L`` (m, d).
    shift : ndarray of shape (n_features,)
        Subtracted from the rows before an rbf GEMM (the landmarks' mean); zeros otherwise.
    normalization_t : ndarray of shape (m, m_out)
        ``normalization_.T``.
    kernel : KernelSpec
    out_dtype : numpy dtype
        Of the features: float32 for float32 rows, float64 otherwise.
    """

    right: np.ndarray
    shift: np.ndarray
    normalization_t: np.ndarray
    kernel: KernelSpec
    out_dtype: np.dtype

    @property
    def args(self) -> tuple[Any, ...]:
        """The arguments of :func:`nystroem_block` after the block."""
        return (self.right, self.shift, self.normalization_t, self.kernel, self.out_dtype)


def feature_map(
    landmarks: np.ndarray, normalization: np.ndarray, kernel: KernelSpec, dtype: Any
) -> FeatureMap:
    """The fitted map prepared for blocks of ``dtype`` (see :class:`FeatureMap`).

    Parameters
    ----------
    landmarks : ndarray of shape (m, n_features)
        Float64.
    normalization : ndarray of shape (m_out, m)
        ``normalization_``: the features are ``k(X, landmarks) @ normalization.T``.
    kernel : KernelSpec
    dtype : dtype
        Of the blocks to map.

    Returns
    -------
    FeatureMap
    """
    dt = compute_dtype(dtype, kernel)
    L = np.asarray(landmarks, dtype=np.float64)
    m, d = L.shape
    shift = np.zeros(d)
    name = kernel.kernel if isinstance(kernel.kernel, str) else None
    g = 1.0 if kernel.gamma is None else float(kernel.gamma)
    if name == "rbf":
        # the shift rounded to dt, used as rounded for rows and landmarks alike (distances do
        # not depend on it): a float32 row minus it is exact when the two are close
        shift = L.mean(axis=0).astype(dt).astype(np.float64)
        C = L - shift
        right = np.empty((d + 2, m))
        right[:d] = 2.0 * g * C.T
        right[d] = -g
        right[d + 1] = -g * np.einsum("ij,ij->i", C, C)
    elif name in ("poly", "sigmoid"):
        right = g * L.T
    elif name == "linear":
        right = L.T
    elif name == "cosine":
        norms = np.sqrt(np.einsum("ij,ij->i", L, L))
        right = (L / np.where(norms == 0, 1.0, norms)[:, None]).T  # zero rows stay zero
    else:  # the laplacian kernel, callables: pairwise_kernel's own path
        right = L
    return FeatureMap(
        np.ascontiguousarray(right, dtype=dt),
        shift.astype(dt),
        np.ascontiguousarray(np.asarray(normalization).T, dtype=dt),
        kernel,
        out_dtype(dtype),
    )


def nystroem_block(
    X: np.ndarray,
    right: np.ndarray,
    shift: np.ndarray,
    normalization_t: np.ndarray,
    kernel: KernelSpec,
    dtype: Any,
) -> np.ndarray:
    """Nystroem features ``k(X, L) @ normalization.T`` of a block, in tiles of rows.

    Every GEMM is of a whole tile: the last, partial tile of the block is padded with rows of
    zeros. A BLAS picks its kernels by the shape of a product (OpenBLAS multiplies products
    of up to about 10^6 multiply-adds with other kernels than larger ones, and the rows of a
    product past its last whole panel with others again), and each kernel rounds in its own
    order: with one shape for every tile, the features of a row are the same bits however
    the rows are chunked.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        Finite rows (``map_rows`` checks them).
    right, shift, normalization_t, kernel
        The fields of a :class:`FeatureMap` (:func:`feature_map` for this block's dtype);
        the dtype of ``normalization_t`` is the one the block is computed in.
    dtype : dtype
        Of the features returned.

    Returns
    -------
    ndarray of shape (n, m_out)
    """
    dt = normalization_t.dtype
    n, d = X.shape
    m, m_out = normalization_t.shape
    out = np.empty((n, m_out), dtype=dtype)
    name = kernel.kernel if isinstance(kernel.kernel, str) else ""
    gemm = name in GEMM_KERNELS
    step = tile_rows(m, dt.itemsize)
    K = scratch("nystroem.kernel", (step, m), dt)
    A = scratch("nystroem.rows", (step, right.shape[0]), dt) if gemm else K
    if name == "rbf":
        A[:, d + 1] = 1.0
    direct = out.dtype == dt  # the product can be written into the output itself
    for start in range(0, n, step):
        xs = X[start : start + step]
        t = xs.shape[0]
        if gemm:
            _kernel_tile(xs, A, K, right, shift, name, kernel)
        else:  # the laplacian kernel, callables: evaluated as they are
            K[:t] = pairwise_kernel(xs, right, kernel)
            K[t:] = 0.0
        if t == step and direct:
            np.matmul(K, normalization_t, out=out[start : start + t])
        else:
            full = np.matmul(K, normalization_t, out=scratch("nystroem.out", (step, m_out), dt))
            out[start : start + t] = full[:t]
    return out


def _kernel_tile(
    xs: np.ndarray,
    A: np.ndarray,
    K: np.ndarray,
    right: np.ndarray,
    shift: np.ndarray,
    name: str,
    kernel: KernelSpec,
) -> None:
    """The kernel of the rows ``xs`` and the landmarks into ``K`` (all its rows: those past
    ``len(xs)`` are of rows of zeros), through the left GEMM factor ``A``."""
    t, d = xs.shape
    if name == "rbf":
        rows = A[:, :d]
        np.subtract(xs, shift, out=rows[:t], casting="unsafe")
        rows[t:] = 0.0
        np.einsum("ij,ij->i", rows, rows, out=A[:, d])
    else:
        np.copyto(A[:t], xs, casting="unsafe")
        A[t:] = 0.0
        if name == "cosine":
            norms = np.sqrt(np.einsum("ij,ij->i", A, A))
            norms[norms == 0] = 1.0  # zero rows stay zero (scikit-learn's normalize)
            A /= norms[:, None]
    np.matmul(A, right, out=K)
    if name == "rbf":  # the exponent -gamma |x - c|^2, at most 0 (distances clipped at 0)
        np.minimum(K, 0.0, out=K)
        np.exp(K, out=K)
    elif name == "poly":
        K += kernel.coef0
        K **= kernel.degree
    elif name == "sigmoid":
        K += kernel.coef0
        np.tanh(K, out=K)
