"""KernelDensity's blockwise functions (module-level: dask ships them to workers) and the
lattice sums a fitted binned model keeps for its later calls.

- :func:`exact_log_sums_block`: the exact estimate of a block of queries against a block
  of training points (log-sum-exp merged across training blocks, :func:`lse_columns`);
- :func:`binned_block`: the binned estimate of a block of queries from the lattice sums;
- :func:`cv_block`: the leave-one-out scores of a block at every candidate bandwidth.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from scipy.special import logsumexp

from ddr.density._binned import LatticeHistogram, binned_log_sums, grid_sums, lattice_tail
from ddr.density._kernels import log_kernel_sums

__all__ = [
    "LATTICE_SUMS",
    "binned_block",
    "cv_block",
    "exact_log_sums_block",
    "exact_query",
    "lattice_sums",
    "lse_columns",
    "whiten",
]


def whiten(X: np.ndarray, center: np.ndarray, W: np.ndarray) -> np.ndarray:
    return (np.asarray(X, dtype=np.float64) - center) @ W.T


def exact_log_sums_block(
    Xq: np.ndarray,
    T: np.ndarray,
    w: np.ndarray | None,
    center: np.ndarray,
    W: np.ndarray,
    h: float,
    kernel: str,
    log_norm: float,
) -> np.ndarray:
    """``log_norm + log sum_i w_i K(|W (x - t_i)| / h)`` of a query block against a training
    block, shape (n_queries, 1) (one column per training block, merged by log-sum-exp).

    The queries are whitened a tile of rows at a time, where their sums are made
    (:func:`~ddr.density._kernels.log_kernel_sums`): no float64 copy of the block, no
    centred or whitened copy.
    """
    log_w = None
    if w is not None:
        with np.errstate(divide="ignore"):  # a zero weight: log 0 = -inf, no term
            log_w = np.log(np.asarray(w, dtype=np.float64))
    out = log_kernel_sums(Xq, whiten(T, center, W), log_w, kernel, h, whiten=(center, W))
    return (out + log_norm)[:, None]


def exact_query(
    Xq: np.ndarray,
    T: np.ndarray,
    w: np.ndarray | None,
    center: np.ndarray,
    W: np.ndarray,
    h: float,
    kernel: str,
    log_norm: float,
) -> np.ndarray:
    """:func:`exact_log_sums_block` of queries in memory, shape (n_queries,)."""
    return exact_log_sums_block(Xq, T, w, center, W, h, kernel, log_norm)[:, 0]


def lse_columns(parts: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return logsumexp(parts, axis=1)


def binned_block(
    Xq: np.ndarray,
    counts: np.ndarray | None,
    f_grid: np.ndarray,
    origin: np.ndarray,
    spacing: np.ndarray,
    W: np.ndarray,
    h: float,
    kernel: str,
    log_norm: float,
    tail_points: np.ndarray | None = None,
    tail_log_counts: np.ndarray | None = None,
) -> np.ndarray:
    """Binned log-density of a query block, shape (n_queries,); ``tail_*`` the lattice's
    :func:`~ddr.density._binned.lattice_tail` (found per block when None)."""
    Xq = np.asarray(Xq, dtype=np.float64)
    tail = None
    if tail_points is not None and tail_log_counts is not None:
        tail = (tail_points, tail_log_counts)
    return binned_log_sums(Xq, counts, f_grid, origin, spacing, W, h, kernel, tail) + log_norm


#: the lattice sums of a fitted histogram at a bandwidth (one FFT convolution of the
#: lattice: about a second for a 1024 x 1024 lattice) and its non-empty points (a scan of
#: the lattice), kept while the histogram lives, for the later calls of score_samples of the
#: same model: a dask graph per call waited for them on the client, and every block of it
#: scanned the lattice again
LATTICE_SUMS: weakref.WeakKeyDictionary[LatticeHistogram, dict[tuple, Any]] = (
    weakref.WeakKeyDictionary()
)


def lattice_sums(
    H: LatticeHistogram, W: np.ndarray, h: float, kernel: str
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """:func:`~ddr.density._binned.grid_sums` and :func:`~ddr.density._binned.lattice_tail`
    of ``H``, computed once per bandwidth, kernel and whitening."""
    cached = LATTICE_SUMS.setdefault(H, {})
    key = (float(h), kernel, np.asarray(W, dtype=np.float64).tobytes())
    if key not in cached:
        cached[key] = (
            grid_sums(H.counts, H.spacing, W, h, kernel),
            lattice_tail(H.counts, H.origin, H.spacing, W),
        )
    return cached[key]


def cv_block(
    Q: np.ndarray,
    idx: np.ndarray,
    T: np.ndarray,
    w: np.ndarray | None,
    offset: int,
    center: np.ndarray,
    W: np.ndarray,
    cands: np.ndarray,
    kernel: str,
) -> np.ndarray:
    """Leave-one-out log kernel sums of the whitened held-out rows ``Q`` (global training
    indices ``idx``) against a training block starting at row ``offset``, shape
    (n_candidates, n_held)."""
    log_w = None if w is None else np.log(np.asarray(w, dtype=np.float64))
    Tz = whiten(T, center, W)
    return log_kernel_sums(Q, Tz, log_w, kernel, cands, exclude=idx, t_offset=offset)
