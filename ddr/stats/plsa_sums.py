"""The E-step sums of probabilistic latent semantic analysis (pLSA, Hofmann 1999).

pLSA models the count ``n(d, w)`` of word ``w`` in document ``d`` with
``P(w | d) = sum_z P(z | d) P(w | z)``: topics ``phi = P(w | z)`` (K x V, shared by all
documents) and document mixtures ``theta_d = P(z | d)`` (one per document). Hofmann's EM
step, at the current ``(theta, phi)``, gives every stored count its posterior over the topics,
``q(z | d, w) = theta_dz phi_zw / sum_z' theta_dz' phi_z'w``, and from them

    theta_dz <- sum_w n(d, w) q(z | d, w) / n(d)          (per document: in its block)
    n(z, w)   = sum_d n(d, w) q(z | d, w)                  (summed over blocks: mergeable)
    phi_zw   <- n(z, w) / sum_w n(z, w)                    (on the client)

with the log-likelihood ``sum_d sum_w n(d, w) log P(w | d)`` at the step's start. The mixtures
are per-row parameters, as many as there are documents: :meth:`PLSASums.from_block_with_rows`
takes a block's mixtures and returns the new ones beside the block's sums, and the engine
(:func:`ddr.stats.compute_with_rows`) keeps them between passes next to the blocks of
X. One pass is then one EM step, of cost O(nnz K): words a document does not hold cost
nothing. EM never lowers the log-likelihood.

Without mixtures (:meth:`PLSASums.from_block`, the statistic on its own) each block instead
*folds in* its documents at the topics (:func:`fold_in`: the EM over ``theta_d`` with ``phi``
fixed, run to convergence; the log-likelihood is concave in ``theta_d``, so this is its
maximum) and sums at those mixtures: the E-step of the profile likelihood
``max_theta L(phi, theta)``, many times the cost of one step. Blocks may be dense or
scipy.sparse CSR.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse

from ddr.stats._sparse import as_csr64
from ddr.stats.base import FEATURE_DIM, CheckData, Statistic

__all__ = ["PLSASums", "check_counts", "fold_in"]

#: a document's folding-in stops when none of its mixture weights moved by more than this
FOLD_IN_TOL = 1e-6
#: ... or after this many iterations (each O(nnz K))
FOLD_IN_MAX_ITER = 500


def check_counts(X: Any, whom: str) -> scipy.sparse.csr_matrix:
    """A block of counts (dense or CSR) as float64 CSR, or a ValueError for negative or
    non-integer values."""
    X = as_csr64(scipy.sparse.csr_matrix(X) if not scipy.sparse.issparse(X) else X)
    values = X.data
    bad = values[values < 0]
    if bad.size:
        raise ValueError(
            f"Negative values in data passed to {whom}: counts must be >= 0; got {bad.size} "
            f"negative value(s), e.g. {bad[:3].tolist()}"
        )
    frac = values[values != np.round(values)]
    if frac.size:
        raise ValueError(
            f"{whom}: counts must be whole numbers (pLSA is a model of word occurrences); got "
            f"{frac.size} non-integer value(s), e.g. {frac[:3].tolist()}"
        )
    return X


def fold_in(
    X: scipy.sparse.csr_matrix, phi: np.ndarray
) -> tuple[np.ndarray, scipy.sparse.csr_matrix, np.ndarray]:
    """The mixtures ``P(z | d)`` of a block of documents at fixed topics ``phi``.

    Parameters
    ----------
    X : csr_matrix of shape (n, V)
        Checked float64 counts.
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
    _, ratio, loglik = block.step(theta)
    return theta, ratio, loglik


class _Entries:
    """A block of counts with its stored entries' topic columns, for EM steps over it."""

    def __init__(self, X: scipy.sparse.csr_matrix, phi: np.ndarray) -> None:
        self.X, self.phi = X, phi
        self.n, self.k = X.shape[0], phi.shape[0]
        self.per_row = np.diff(X.indptr)
        self.rows = np.repeat(np.arange(self.n), self.per_row)
        self.phi_t = np.ascontiguousarray(phi.T)
        self.phi_e = self.phi_t[X.indices]  # (nnz, K)
        # words no topic emits carry no information about the mixture: left out
        self.data = np.where((phi.sum(axis=0) > 0)[X.indices], X.data, 0.0)
        self.length = np.bincount(self.rows, weights=self.data, minlength=self.n)
        self.live = self.length > 0

    def take(self, rows: np.ndarray) -> _Entries:
        """The same for the documents ``rows`` of the block only."""
        return _Entries(self.X[rows], self.phi)

    def uniform(self) -> np.ndarray:
        return np.full((self.n, self.k), 1.0 / self.k)

    def step(self, theta: np.ndarray) -> tuple[np.ndarray, scipy.sparse.csr_matrix, np.ndarray]:
        """One EM step of the mixtures at fixed topics: (new theta, ratio, loglik at theta)."""
        # np.repeat copies each row's mixture to its entries 2x faster than theta[self.rows]
        denom = np.einsum("ek,ek->e", np.repeat(theta, self.per_row, axis=0), self.phi_e)
        values = np.divide(self.data, denom, out=np.zeros_like(self.data), where=denom > 0)
        ratio = scipy.sparse.csr_matrix((values, self.X.indices, self.X.indptr), shape=self.X.shape)
        new = theta * np.asarray(ratio @ self.phi_t)
        new[self.live] /= self.length[self.live, None]
        new[~self.live] = 1.0 / self.k  # an empty document keeps a uniform mixture
        with np.errstate(divide="ignore"):
            logp = np.where(self.data > 0, np.log(np.where(denom > 0, denom, 1.0)), 0.0)
        loglik = np.bincount(self.rows, weights=self.data * logp, minlength=self.n)
        return new, ratio, loglik


def _checked(X: Any, topics: np.ndarray) -> scipy.sparse.csr_matrix:
    X = check_counts(X, "PLSA (input X)")
    if X.shape[1] != topics.shape[1]:
        raise ValueError(
            f"PLSASums: the block has {X.shape[1]} features, the topics {topics.shape[1]}"
        )
    return X


@dataclasses.dataclass(frozen=True, eq=False)
class PLSASums(Statistic):
    """Expected topic-word counts and log-likelihood of documents at given topics.

    Computed with ``PLSASums.spec(topics=phi)``; see the module docstring for the model and
    the profiled mixtures.

    Parameters
    ----------
    topic_word : ndarray of shape (n_topics, n_features)
        ``n(z, w)``, the expected count of word ``w`` drawn from topic ``z``.
    loglik : float
        Log-likelihood of the documents (multinomial, without the coefficient).
    n_docs : float
        Documents (rows) summed.
    n_tokens : float
        Total count.
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
        X = rng.poisson(2.0, (n_rows, 5)).astype(float)
        topics = rng.dirichlet(np.ones(5), size=2)
        return CheckData(X, options={"topics": topics}, offset=False)  # counts

    @classmethod
    def from_block(
        cls,
        X: Any,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        topics: np.ndarray,
    ) -> Self:
        """The sums of one block of counts (numpy or CSR rows) at topics ``phi``.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n_rows, n_words)
            Counts (documents x words).
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
            Counts (documents x words).
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
        new, ratio, loglik = block.step(theta)
        return cls._summed(X, topics, theta, ratio, loglik), new

    @classmethod
    def _summed(
        cls, X: Any, topics: np.ndarray, theta: np.ndarray, ratio: Any, loglik: np.ndarray
    ) -> Self:
        topic_word = topics * np.asarray((ratio.T @ theta).T)
        return cls(topic_word, float(loglik.sum()), float(X.shape[0]), float(X.data.sum()))

    @classmethod
    def value_nbytes(cls, n_features: int, n_classes: int = 1, **options: Any) -> int:
        topics = options.get("topics")
        k = 1 if topics is None else int(np.shape(topics)[0])
        return 8 * k * n_features + 32

    @classmethod
    def block_nbytes(cls, n_rows: int, n_features: int, n_classes: int = 1, **options: Any) -> int:
        # the (nnz, K) topic columns and their products, bounded by a dense block's size
        topics = options.get("topics")
        k = 1 if topics is None else int(np.shape(topics)[0])
        return 8 * 4 * k * n_rows * min(n_features, 256)

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
