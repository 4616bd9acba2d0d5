"""Posterior moments of the latent factors of ``x = W z + mu + e``, row by row.

What the E-step of PPCA and factor analysis (:mod:`ddr.stats.ppca_sums`) needs of each row:
the posterior precision ``M = s2 I + W_O^T W_O`` over the row's observed features O, its
inverse and log-determinant, and the posterior mean. Complete rows share one ``M``; rows
with missing entries each have their own, solved for a whole sub-block at once (a batched
Cholesky of the small ``q x q`` matrices in packed storage), rows that share a missingness
pattern grouped when a sample shows that they do.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ddr.stats._centring import scratch


# ------------------------------------------------------------------ posteriors
def spd_inverse_logdet(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverses and log-determinants of a stack of symmetric positive definite matrices.

    LAPACK's Cholesky and triangular inverse per matrix (numpy's stacked gufuncs): a
    Cholesky written with numpy operations across the stack was faster on an idle machine
    for q <= 12 but 2-10x slower under load (hundreds of small calls per block), so it
    was dropped.

    Parameters
    ----------
    M : ndarray of shape (n, q, q)

    Returns
    -------
    inv : ndarray of shape (n, q, q)
    logdet : ndarray of shape (n,)
    """
    c = np.linalg.cholesky(M)
    cinv = np.linalg.inv(c)
    logdet = 2.0 * np.log(np.diagonal(c, axis1=1, axis2=2)).sum(axis=1)
    return np.matmul(np.swapaxes(cinv, 1, 2), cinv), logdet


# ------------------------------------------------------- batched small SPD matrices
@functools.lru_cache(maxsize=32)
def _packing(q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Packed storage of symmetric q x q matrices: the lower triangle column by column.

    Returns ``off`` (the packed index of each diagonal entry: column j's entries ``(j..q-1,
    j)`` are the contiguous rows ``off[j] : off[j] + q - j``), and the row and column of each
    packed entry.
    """
    rows, cols = np.tril_indices(q)
    order = np.lexsort((rows, cols))  # column by column, then down the column
    off = np.concatenate([[0], np.cumsum(np.arange(q, 1, -1))]).astype(np.intp)
    return off, rows[order], cols[order]


def _order(P: int) -> int:
    """q of packed q x q matrices of P = q (q + 1) / 2 entries."""
    return (math.isqrt(8 * P + 1) - 1) // 2


def packed_gram(W: np.ndarray) -> np.ndarray:
    """``w_j w_j^T`` of each row of W, packed: shape (d, q (q + 1) / 2)."""
    _, rows, cols = _packing(W.shape[1])
    return W[:, rows] * W[:, cols]


def unpack(packed: np.ndarray, q: int) -> np.ndarray:
    """Symmetric matrices from their packed lower triangles.

    Parameters
    ----------
    packed : ndarray of shape (..., q (q + 1) / 2)
    q : int

    Returns
    -------
    ndarray of shape (..., q, q)
    """
    _, rows, cols = _packing(q)
    out = np.empty((*packed.shape[:-1], q, q))
    out[..., rows, cols] = packed
    out[..., cols, rows] = packed
    return out


class BatchedPosterior:
    """The posterior systems of many rows with missing entries, solved at once.

    Each row n has its own ``M_n = s2 I + W_O^T W_O`` (O its observed features). The matrices
    are stored packed and transposed, shape (q (q + 1) / 2, rows): every step of the Cholesky
    factorisation, the triangular solves and the inverse is one numpy operation on contiguous
    vectors over all the rows, about 3 q^2 operations per sub-block whatever its number of
    rows. (LAPACK called once per matrix through numpy's stacked ``cholesky`` and ``inv``
    cost 2.5 us per row at q = 10, five times the E-step of a complete row; this costs 0.35
    us on sub-blocks of a few thousand rows.) ``M_n`` itself is one GEMM of the observation
    mask with the packed ``w_j w_j^T`` (:meth:`from_mask`).

    Parameters
    ----------
    L : ndarray of shape (q (q + 1) / 2, m)
        The Cholesky factors, packed (:func:`_packing`).
    logdet : ndarray of shape (m,)
        ``log|M_n|``.
    inv : ndarray of shape (q (q + 1) / 2, m), optional
        ``M_n^{-1}``, packed, when already known.
    scratch_key : str, optional
        Keep the inverse and its temporaries in this thread's scratch buffers under this key
        (:func:`ddr.stats._centring.scratch`): valid until the next use of the key.
    """

    def __init__(
        self,
        L: np.ndarray,
        logdet: np.ndarray,
        inv: np.ndarray | None = None,
        scratch_key: str | None = None,
    ) -> None:
        self.q = _order(L.shape[0])
        self.off = _packing(self.q)[0]
        self.L = L
        self.logdet = logdet
        self._inv = inv
        self._key = scratch_key
        self._rdiag: np.ndarray | None = None

    @property
    def rdiag(self) -> np.ndarray:
        """``1 / L_kk`` of every row, shape (q, m)."""
        if self._rdiag is None:
            self._rdiag = 1.0 / self.L[self.off]
        return self._rdiag

    def _buffer(self, name: str) -> np.ndarray:
        if self._key is None:
            return np.empty_like(self.L)
        return scratch(f"{self._key}.{name}", self.L.shape)

    @classmethod
    def from_mask(
        cls, obs: np.ndarray, gram: np.ndarray, s2: float, scratch_key: str | None = None
    ) -> BatchedPosterior:
        """Factor ``M_n`` of each row of an observation mask.

        Parameters
        ----------
        obs : ndarray of shape (m, d), float64
            1.0 where observed, 0.0 where missing.
        gram : ndarray of shape (d, q (q + 1) / 2)
            :func:`packed_gram` of the loadings.
        s2 : float
            The (isotropic) noise variance.
        scratch_key : str, optional
            Build in this thread's scratch buffers (see the class).

        Returns
        -------
        BatchedPosterior
        """
        shape = (gram.shape[1], obs.shape[0])
        L = np.empty(shape) if scratch_key is None else scratch(f"{scratch_key}.L", shape)
        np.matmul(gram.T, obs.T, out=L)  # sum_j o_nj w_j w_j^T, packed, one column per row
        q = _order(L.shape[0])
        off = _packing(q)[0]
        L[off] += s2
        # in-place Cholesky M = L L^T, right-looking: each column is scaled, then updates
        # the columns to its right (products into a reused buffer, reciprocals kept: a
        # division costs several multiplications)
        tmp = np.empty((q, shape[1]))
        rdiag = np.empty((q, shape[1]))
        for k in range(q):
            col = L[off[k] : off[k] + q - k]
            np.sqrt(col[0], out=col[0])
            np.divide(1.0, col[0], out=rdiag[k])
            if k + 1 == q:
                break
            col[1:] *= rdiag[k]
            for j in range(k + 1, q):
                t = np.multiply(col[j - k :], col[j - k], out=tmp[: q - j])
                target = L[off[j] : off[j] + q - j]
                np.subtract(target, t, out=target)
        post = cls(L, 2.0 * np.log(L[off]).sum(axis=0), scratch_key=scratch_key)
        post._rdiag = rdiag
        return post

    def take(self, index: np.ndarray) -> BatchedPosterior:
        """The systems of the rows ``index`` (rows that share a missingness pattern)."""
        inv = None if self._inv is None else self._inv[:, index]
        return type(self)(self.L[:, index], self.logdet[index], inv)

    def solve(self, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``M_n^{-1} b_n`` and ``b_n^T M_n^{-1} b_n`` of each row's ``b_n``.

        Parameters
        ----------
        B : ndarray of shape (q, m)
            One right-hand side per row (columns).

        Returns
        -------
        x : ndarray of shape (q, m)
        quad : ndarray of shape (m,)
        """
        q, off, L, rdiag = self.q, self.off, self.L, self.rdiag
        u = np.array(B, dtype=np.float64, order="C", copy=True)
        tmp = np.empty_like(u)
        for k in range(q):  # L u = b
            u[k] *= rdiag[k]
            if k + 1 < q:
                t = np.multiply(L[off[k] + 1 : off[k] + q - k], u[k], out=tmp[: q - k - 1])
                np.subtract(u[k + 1 :], t, out=u[k + 1 :])
        quad = np.einsum("km,km->m", u, u)
        for k in range(q - 1, -1, -1):  # L^T x = u
            if k + 1 < q:
                u[k] -= np.einsum("km,km->m", L[off[k] + 1 : off[k] + q - k], u[k + 1 :])
            u[k] *= rdiag[k]
        return u, quad

    def inverse(self) -> np.ndarray:
        """``M_n^{-1}`` of every row, packed: shape (q (q + 1) / 2, m)."""
        if self._inv is not None:
            return self._inv
        q, off, L = self.q, self.off, self.L
        rdiag = self.rdiag
        X = self._buffer("factor_inverse")  # L^{-1}, packed: its column j solves L x = e_j
        tmp = np.empty((q, L.shape[1]))
        for j in range(q):
            x = X[off[j] : off[j] + q - j]
            x[0] = rdiag[j]
            if j + 1 < q:
                np.multiply(L[off[j] + 1 : off[j] + q - j], -x[0], out=x[1:])
            for k in range(j + 1, q):
                x[k - j] *= rdiag[k]
                if k + 1 < q:
                    t = np.multiply(L[off[k] + 1 : off[k] + q - k], x[k - j], out=tmp[: q - k - 1])
                    np.subtract(x[k - j + 1 :], t, out=x[k - j + 1 :])
        inv = self._buffer("inverse")  # M^{-1}[a, b] = sum_{k >= a} L^{-1}[k, a] L^{-1}[k, b]
        for b in range(q):
            for a in range(b, q):
                inv[off[b] + a - b] = np.einsum(
                    "km,km->m", X[off[a] : off[a] + q - a], X[off[b] + a - b : off[b] + q - b]
                )
        self._inv = inv
        return inv


def missing_posterior(
    Ys: np.ndarray,
    obs: np.ndarray,
    W: np.ndarray,
    s2: float,
    gram: np.ndarray | None = None,
    scratch_key: str | None = None,
) -> tuple[BatchedPosterior, np.ndarray, np.ndarray]:
    """Posterior systems, means and quadratic forms of rows with missing entries.

    Parameters
    ----------
    Ys : ndarray of shape (m, d)
        Centred rows with the missing entries set to 0.
    obs : ndarray of shape (m, d), float64
        1.0 where observed, 0.0 where missing.
    W : ndarray of shape (d, q)
        The loadings; ``b_n = W^T y_n`` (with diagonal noise, the unit-noise loadings
        scaled back to the units of ``Ys``, and then ``gram`` is needed).
    s2 : float
    gram : ndarray of shape (d, q (q + 1) / 2), optional
        :func:`packed_gram` of the loadings of ``M_n`` (default: W's).
    scratch_key : str, optional
        Factor (and invert) in this thread's scratch buffers (:class:`BatchedPosterior`).

    Returns
    -------
    post : BatchedPosterior
        One ``M_n`` per row (rows that share a missingness pattern share its factorisation).
    Ez : ndarray of shape (q, m)
        Posterior means ``M_n^{-1} W_O^T y_O``, one column per row.
    bmb : ndarray of shape (m,)
        ``b_n^T M_n^{-1} b_n`` with ``b_n = W_O^T y_O``.
    """
    if gram is None:
        gram = packed_gram(W)
    shared = _shared_patterns(obs)
    if shared is None:
        post = BatchedPosterior.from_mask(obs, gram, s2, scratch_key)
    else:  # each pattern's M is factored (and inverted) once
        first, inverse = shared
        pattern = BatchedPosterior.from_mask(obs[first], gram, s2)
        pattern.inverse()
        post = pattern.take(inverse)
    Ez, bmb = post.solve(W.T @ Ys.T)
    return post, Ez, bmb


#: rows looked at to decide whether the rows of a sub-block share missingness patterns
_PATTERN_SAMPLE = 256


@functools.lru_cache(maxsize=8)
def _pattern_weights(d: int) -> np.ndarray:
    return np.random.default_rng(d).random(d)


def _shared_patterns(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(first, inverse)`` of :func:`_patterns` when at most a quarter of the rows have a
    pattern of their own (sensors that drop out together), else None.

    A sample of the rows decides first (a weighted sum of each row's mask, sorted: 2 % of the
    E-step), so that rows missing at random, all different, do not pay for the exact
    grouping (a sort of the packed masks: 15 % of the E-step).
    """
    n = obs.shape[0]
    sample = np.sort(obs[:_PATTERN_SAMPLE] @ _pattern_weights(obs.shape[1]))
    distinct = 1 + np.count_nonzero(sample[1:] != sample[:-1]) if sample.size else 0
    if distinct * 4 > sample.size:
        return None
    first, inverse = _patterns(obs)
    return (first, inverse) if first.size * 4 <= n else None


def _patterns(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First row of each distinct observation pattern, and each row's pattern index."""
    keys = np.packbits(obs > 0, axis=1)
    keys = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _missing_row_bytes(d: int, q: int) -> int:
    """Temporaries of one row with missing entries in :meth:`_Acc.add_missing`: the centred
    row, its mask (with a column of ones), bit mask and zeroed copy, and the packed system,
    factor, factor inverse, inverse and posterior moments of :class:`BatchedPosterior`."""
    packed, packed1 = q * (q + 1) // 2, (q + 1) * (q + 2) // 2
    return 8 * (4 * d + 1) + d + 8 * (4 * packed + packed1 + 4 * q)


def _missing_rows(d: int, q: int) -> int:
    """Rows per sub-block of rows with missing entries: about 16 MiB of temporaries, 4096
    rows at most (the batched posteriors cost about 3 q^2 numpy operations per sub-block,
    whatever its size: 4096 rows were 20 % faster than 1024 at d = 100, q = 10)."""
    return int(np.clip(16 * 2**20 // _missing_row_bytes(d, q), 256, 4096))


def _products(Y: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``B1 = [Y W, 1]`` and ``Y^T B1`` (the last column: the column sums of Y)."""
    B1 = np.empty((Y.shape[0], W.shape[1] + 1))
    np.matmul(Y, W, out=B1[:, :-1])
    B1[:, -1] = 1.0
    return B1, Y.T @ B1
