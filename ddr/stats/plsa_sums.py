"""The E-step sums of probabilistic latent semantic analysis (pLSA, Hofmann 1999).

pLSA models the weight ``n(d, w)`` of word ``w`` in document ``d`` (a count, or any
non-negative weight such as tf-idf) with ``P(w | d) = sum_z P(z | d) P(w | z)``: topics
``phi = P(w | z)`` (K x V, shared by all documents) and document mixtures
``theta_d = P(z | d)`` (one per document). Hofmann's EM step, at the current
``(theta, phi)``, gives every stored weight its posterior over the topics,
``q(z | d, w) = theta_dz phi_zw / sum_z' theta_dz' phi_z'w``, and from them

    theta_dz <- sum_w n(d, w) q(z | d, w) / n(d)          (per document: in its block)
    n(z, w)   = sum_d n(d, w) q(z | d, w)                  (summed over blocks: mergeable)
    phi_zw   <- n(z, w) / sum_w n(z, w)                    (on the client)

with the log-likelihood ``sum_d sum_w n(d, w) log P(w | d)`` at the step's start. Nothing in
the step needs whole numbers: it maximises ``sum n(d, w) log P(w | d)``, which is (up to a
constant) minus the generalised Kullback-Leibler divergence of the weights from the
factorisation ``n(d) theta phi``, the loss scikit-learn's ``NMF(beta_loss="kullback-leibler")``
minimises. The mixtures are per-row parameters, as many as there are documents:
:meth:`PLSASums.from_block_with_rows` takes a block's mixtures and returns the new ones beside
the block's sums, and the engine (:func:`ddr.stats.compute_with_rows`) keeps them between
passes next to the blocks of X. One pass is then one EM step, of cost O(nnz K): words a
document does not hold cost nothing. EM never lowers the log-likelihood.

The step at stored entries: ``P(w | d)`` of each stored ``(d, w)`` (a dot product of a row
of ``theta`` and a column of ``phi``: a sampled product no sparse library offers) is
computed a few thousand entries at a time, so its (entries x K) temporaries stay in the
core's cache (written whole they cost 4x more: the step is memory-bound); then
``R = n(d, w) / P(w | d)`` at the stored entries gives both sums as sparse-dense products
(``R phi^T`` and ``R^T theta``, scipy's compiled kernels).

Without mixtures (:meth:`PLSASums.from_block`, the statistic on its own) each block instead
*folds in* its documents at the topics (:func:`fold_in`: the EM over ``theta_d`` with ``phi``
fixed, run to convergence; the log-likelihood is concave in ``theta_d``, so this is its
maximum) and sums at those mixtures: the E-step of the profile likelihood
``max_theta L(phi, theta)``, many times the cost of one step. Blocks may be dense or
scipy.sparse CSR.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse

from ddr.stats._sparse import as_csr64, check_sparse_block
from ddr.stats.base import FEATURE_DIM, CheckData, Statistic

__all__ = ["PLSASums", "check_weights", "fold_in"]

#: a document's folding-in stops when none of its mixture weights moved by more than this
FOLD_IN_TOL = 1e-6
#: ... or after this many iterations (each O(nnz K))
FOLD_IN_MAX_ITER = 500
#: bytes of one (entries x K) float64 temporary of the step: within a core's L2 cache
#: (measured on 590 000 entries, K = 10: 5.9 ms at 320 KiB, 10 ms at 1.3 MiB, 23 ms whole)
_CHUNK_BYTES = 320 * 1024


def check_weights(X: Any, whom: str) -> scipy.sparse.csr_matrix:
    """A block of weights (dense or CSR) as CSR, or a ValueError for negative values.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_rows, n_words)
        Counts or other non-negative weights (tf-idf).
    whom : str
        Who reads them, for the message (``"PLSA (input X)"``).

    Returns
    -------
    csr_matrix of shape (n_rows, n_words)
        Float32 values kept as they are (every product with them is float64: the same
        numbers as a float64 copy, without the copy), other dtypes as float64; NaN and
        infinity are refused (:func:`~ddr.stats._sparse.check_sparse_block`).
    """
    X = check_sparse_block(scipy.sparse.csr_matrix(X) if not scipy.sparse.issparse(X) else X)
    if X.dtype not in (np.float32, np.float64):
        X = as_csr64(X)
    if X.data.size and X.data.min() < 0:
        bad = X.data[X.data < 0]
        raise ValueError(
            f"Negative values in data passed to {whom}: pLSA models non-negative weights "
            f"(counts or tf-idf); got {bad.size} negative value(s), e.g. {bad[:3].tolist()}"
        )
    return X


def fold_in(
    X: scipy.sparse.csr_matrix, phi: np.ndarray
) -> tuple[np.ndarray, scipy.sparse.csr_matrix, np.ndarray]:
    """The mixtures ``P(z | d)`` of a block of documents at fixed topics ``phi``.

    Parameters
    ----------
    X : csr_matrix of shape (n, V)
        Checked weights (:func:`check_weights`: float32 or float64).
    phi : ndarray of shape (K, V)
        Topics, rows summing to 1.

    Returns
    -------
    theta : ndarray of shape (n, K)
        The maximum-likelihood mixtures (uniform for an empty document, or one whose words
        no topic emits: such words carry no information and are left out).
    ratio : csr_matrix of shape (n, V)
        ``n(d, w) / P(w | d)`` at ``theta`` on the stored entries (0 where ``P(w | d) = 0``).
    loglik : ndarray of shape (n,)
        ``sum_w n(d, w) log P(w | d)`` per document (over the words some topic emits).
    """
    block = _Entries(X, phi)
    theta = block.uniform()
    # each document iterates until its own mixture settles, so the result does not depend on
    # the block it is in; the steps run over the documents still moving only (re-gathered
    # when half have settled: most settle in tens of steps, a few take hundreds)
    idx = np.flatnonzero(block.live)
    moving, active = block.take(idx), np.ones(idx.size, dtype=bool)
    for _ in range(FOLD_IN_MAX_ITER):
        if not active.any():
            break
        if 2 * active.sum() < active.size:
            idx, active = idx[active], active[active]
            moving = block.take(idx)
        old = theta[idx]
        new = moving.step(old)[0]
        settled = np.abs(new - old).max(axis=1) < FOLD_IN_TOL
        theta[idx[active]] = new[active]
        active &= ~settled
    _, ratio, loglik = block.step(theta, per_document=True)
    return theta, ratio, loglik


class _Entries:
    """A block of weights and the topics, for EM steps over its stored entries.

    Parameters
    ----------
    X : csr_matrix of shape (n, V)
        Checked weights (:func:`check_weights`).
    phi : ndarray of shape (K, V)
        Topics.
    """

    def __init__(self, X: scipy.sparse.csr_matrix, phi: np.ndarray) -> None:
        self.X, self.phi = X, phi
        self.n, self.k = X.shape[0], phi.shape[0]
        self.indptr, self.indices = X.indptr, X.indices
        self.per_row = np.diff(X.indptr)
        self.phi_t = np.ascontiguousarray(phi.T)  # (V, K): a word's topics are contiguous
        emits = phi.sum(axis=0) > 0
        # words no topic emits carry no information about the mixture: left out
        self.data = X.data if emits.all() else np.where(emits[X.indices], X.data, 0.0)
        self.length = _row_sums(self.data, self.indptr)  # n(d), shape (n,)
        self.live = self.length > 0
        self.step_entries = max(1, _CHUNK_BYTES // (8 * self.k))
        self.chunks = _chunks(self.indptr, self.step_entries)

    def take(self, rows: np.ndarray) -> _Entries:
        """The same for the documents ``rows`` of the block only."""
        return _Entries(self.X[rows], self.phi)

    def uniform(self) -> np.ndarray:
        return np.full((self.n, self.k), 1.0 / self.k)

    def predicted(self, theta: np.ndarray) -> np.ndarray:
        """``P(w | d) = theta_d . phi_w`` at each stored entry, shape (nnz,).

        A chunk of whole rows at a time (:func:`_chunks`): the gathered rows of ``phi^T``
        and ``theta`` (entries x K) stay in cache, where whole they would be written to
        memory and read back; a row longer than a chunk is taken in pieces.
        """
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        indptr, indices, per_row, phi_t = self.indptr, self.indices, self.per_row, self.phi_t
        out = np.empty(indices.size)
        ones = np.ones(self.k)
        step = self.step_entries
        # a chunk of rows holds at most 2 step entries (see _chunks)
        buf = np.empty((min(2 * step, indices.size), self.k))
        for r0, r1 in self.chunks:
            s, e = int(indptr[r0]), int(indptr[r1])
            if r1 - r0 > 1 or e - s <= step:
                g = np.take(phi_t, indices[s:e], axis=0, out=buf[: e - s], mode="clip")
                g *= np.repeat(theta[r0:r1], per_row[r0:r1], axis=0)
                np.dot(g, ones, out=out[s:e])
            else:  # one long row (r1 = r0 + 1): one mixture for all its pieces
                for a in range(s, e, step):
                    b = min(a + step, e)
                    g = np.take(phi_t, indices[a:b], axis=0, out=buf[: b - a], mode="clip")
                    np.dot(g, theta[r0], out=out[a:b])
        return out

    def step(
        self, theta: np.ndarray, *, per_document: bool = False
    ) -> tuple[np.ndarray, scipy.sparse.csr_matrix, np.ndarray]:
        """One EM step of the mixtures at fixed topics.

        Parameters
        ----------
        theta : ndarray of shape (n, K)
            The mixtures the step starts from.
        per_document : bool, default=False
            Whether to return the log-likelihood of each document, or only their sum.

        Returns
        -------
        new : ndarray of shape (n, K)
            The mixtures after the step (rows sum to 1; uniform for empty documents).
        ratio : csr_matrix of shape (n, V)
            ``n(d, w) / P(w | d)`` at ``theta`` on the stored entries (0 where it is 0).
        loglik : ndarray of shape (n,) or ()
            ``sum_w n(d, w) log P(w | d)`` at ``theta``, per document or summed.
        """
        data = self.data
        denom = self.predicted(theta)
        positive = denom > 0
        # in place where possible: each fresh (nnz,) array costs its page faults
        if positive.all():
            contrib = np.log(denom)
            contrib *= data
            values = np.divide(data, denom, out=denom)
        else:
            # P(w | d) = 0 only where no topic of the document emits w: with a weight of 0
            # (a word no topic emits) it contributes 0 log 0 = 0; EM never gets there with a
            # positive weight (that entry is left out, as the word would be)
            contrib = np.log(denom, out=np.zeros_like(denom), where=positive)
            contrib *= data
            values = np.divide(data, denom, out=np.zeros_like(denom), where=positive)
        ratio = scipy.sparse.csr_matrix((values, self.indices, self.indptr), shape=self.X.shape)
        new = theta * np.asarray(ratio @ self.phi_t)
        new[self.live] /= self.length[self.live, None]
        new[~self.live] = 1.0 / self.k  # an empty document keeps a uniform mixture
        loglik = _row_sums(contrib, self.indptr) if per_document else np.asarray(contrib.sum())
        return new, ratio, loglik


def _chunks(indptr: np.ndarray, step: int) -> list[tuple[int, int]]:
    """Row ranges ``[r0, r1)`` of at most ``2 step`` stored entries each, for the E-step's
    cached temporaries; a row of more than ``step`` entries is a range of its own.

    A range starts at the first row starting at or after a multiple of ``step``: it holds
    less than ``step`` entries plus its last row, itself at most ``step`` long.
    """
    n = indptr.size - 1
    nnz = int(indptr[-1])
    # cut at the first row reaching each multiple of step, and around each long row
    cuts = np.searchsorted(indptr, np.arange(step, nnz, step), side="left")
    long_rows = np.flatnonzero(np.diff(indptr) > step)
    cuts = np.unique(np.concatenate([[0, n], cuts, long_rows, long_rows + 1]))
    cuts = cuts[(cuts >= 0) & (cuts <= n)].tolist()
    return list(itertools.pairwise(cuts))


def _row_sums(values: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """The sum of each CSR row's stored ``values``, shape (n_rows,) (0 for an empty row)."""
    n = indptr.size - 1
    sums = np.zeros(n)
    # reduceat sums values[indptr[i]:indptr[i+1]] for the rows that start before the end
    # (the last of them runs to the end); an empty row's "sum" would be one value: zeroed
    m = int(np.searchsorted(indptr[:-1], values.size, side="left"))
    if m:
        sums[:m] = np.add.reduceat(values, indptr[:m], dtype=np.float64)
    sums[indptr[:-1] == indptr[1:]] = 0.0
    return sums


def _checked(X: Any, topics: np.ndarray) -> scipy.sparse.csr_matrix:
    X = check_weights(X, "PLSA (input X)")
    if X.shape[1] != topics.shape[1]:
        raise ValueError(
            f"PLSASums: the block has {X.shape[1]} features, the topics {topics.shape[1]}"
        )
    return X


@dataclasses.dataclass(frozen=True, eq=False)
class PLSASums(Statistic):
    """Expected topic-word weights and log-likelihood of documents at given topics.

    Computed with ``PLSASums.spec(topics=phi)``; see the module docstring for the model and
    the profiled mixtures.

    Parameters
    ----------
    topic_word : ndarray of shape (n_topics, n_features)
        ``n(z, w)``, the expected weight of word ``w`` drawn from topic ``z``.
    loglik : float
        Log-likelihood ``sum n(d, w) log P(w | d)`` of the documents (multinomial, without
        the coefficient).
    n_docs : float
        Documents (rows) summed.
    n_tokens : float
        Total weight (the token count, for counts).
    """

    accepts_sparse = True
    carries_rows = True
    readouts: ClassVar[tuple[str, ...]] = ("topic_word", "loglik", "n_docs", "n_tokens")
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "topic_word": ("topic", FEATURE_DIM),
        "loglik": (),
        "n_docs": (),
        "n_tokens": (),
    }
    readout_units: ClassVar[dict[str, int | None]] = {
        "topic_word": 0, "loglik": None, "n_docs": 0, "n_tokens": 0,
    }  # fmt: skip
    _fields_as: ClassVar[dict[str, str]] = {
        "topic_word": "float64", "loglik": "float", "n_docs": "float", "n_tokens": "float",
    }  # fmt: skip
    _merge_mismatch = "cannot merge {cls} of shape {a} with {b}"

    topic_word: np.ndarray
    loglik: float
    n_docs: float
    n_tokens: float

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        # rows of the kind this statistic takes (the base class's docstring says more)
        # non-negative weights: counts scaled per word, as tf-idf is (not whole numbers)
        X = rng.poisson(2.0, (n_rows, 5)) * np.array([1.0, 0.5, 1.7, 2.25, 0.3])
        topics = rng.dirichlet(np.ones(5), size=2)
        return CheckData(X, options={"topics": topics}, offset=False)  # a shift makes them < 0

    @classmethod
    def from_block(
        cls,
        X: Any,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        topics: np.ndarray,
    ) -> Self:
        """The sums of one block of weights (numpy or CSR rows) at topics ``phi``.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n_rows, n_words)
            Non-negative weights, counts or tf-idf (documents x words).
        y : None
            Ignored.
        sample_weight : ndarray of shape (n_rows,), optional
            A document counted w times.
        topics : ndarray of shape (n_topics, n_words)
            ``P(word | topic)`` at which the block's mixtures are folded in.

        Returns
        -------
        PLSASums
            The statistic of the block.
        """
        X = _checked(X, topics)
        if sample_weight is not None:  # a document counted w times
            X = scipy.sparse.csr_matrix(scipy.sparse.diags(np.asarray(sample_weight)) @ X)
        theta, ratio, loglik = fold_in(X, topics)
        return cls._summed(X, topics, theta, ratio, loglik)

    @classmethod
    def from_block_with_rows(
        cls, X: Any, rows: np.ndarray | None, *, topics: np.ndarray
    ) -> tuple[Self, np.ndarray]:
        """One EM step over a block: its sums at its mixtures, and their new values.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n_rows, n_words)
            Non-negative weights, counts or tf-idf (documents x words).
        rows : ndarray of shape (n_rows, n_topics) or None
            The documents' mixtures ``P(topic | document)`` (uniform when None: the start).
        topics : ndarray of shape (n_topics, n_words)
            ``P(word | topic)``.

        Returns
        -------
        stat : PLSASums
            Expected topic-word counts and log-likelihood at ``(rows, topics)``.
        new_rows : ndarray of shape (n_rows, n_topics)
            The mixtures after the step (rows sum to 1; uniform for empty documents).
        """
        X = _checked(X, topics)
        block = _Entries(X, topics)
        theta = block.uniform() if rows is None else rows
        if theta.shape != (block.n, block.k):
            raise ValueError(
                f"PLSASums: the block has {block.n} documents and {block.k} topics, its "
                f"mixtures shape {theta.shape}"
            )
        new, ratio, loglik = block.step(np.asarray(theta, dtype=np.float64))
        return cls._summed(X, topics, theta, ratio, loglik), new

    @classmethod
    def _summed(
        cls, X: Any, topics: np.ndarray, theta: np.ndarray, ratio: Any, loglik: np.ndarray
    ) -> Self:
        topic_word = topics * np.asarray((ratio.T @ theta).T)
        total = float(X.data.sum(dtype=np.float64))
        return cls(topic_word, float(loglik.sum()), float(X.shape[0]), total)

    @classmethod
    def value_nbytes(cls, n_features: int, n_classes: int = 1, **options: Any) -> int:
        topics = options.get("topics")
        k = 1 if topics is None else int(np.shape(topics)[0])
        return 8 * k * n_features + 32

    @classmethod
    def block_nbytes(cls, n_rows: int, n_features: int, n_classes: int = 1, **options: Any) -> int:
        # per stored value (at most a dense block's, or 256 a row): the float64 copy, the
        # ratio, P(w | d), its log and products (about 48 bytes); per row: the mixtures and
        # the (n, K) products; the step's chunk of (entries x K) temporaries
        topics = options.get("topics")
        k = 1 if topics is None else int(np.shape(topics)[0])
        return 48 * n_rows * min(n_features, 256) + 8 * 4 * k * n_rows + 2 * _CHUNK_BYTES

    def _merge_key(self) -> tuple[int, ...]:
        return self.topic_word.shape

    def _merge(self, other: Self) -> Self:
        return type(self)(
            self.topic_word + other.topic_word,
            self.loglik + other.loglik,
            self.n_docs + other.n_docs,
            self.n_tokens + other.n_tokens,
        )

    def __repr__(self) -> str:
        k, v = self.topic_word.shape
        return f"PLSASums(n_topics={k}, n_features={v}, n_docs={self.n_docs:g})"
