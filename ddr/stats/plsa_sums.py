"""The E-step sums of probabilistic latent semantic analysis (pLSA, Hofmann 1999).

pLSA models the count ``n(d, w)`` of word ``w`` in document ``d`` with
``P(w | d) = sum_z P(z | d) P(w | z)``: topics ``phi = P(w | z)`` (K x V, shared by all
documents) and document mixtures ``theta_d = P(z | d)`` (one per document). The mixtures are
per-row parameters, as many as there are documents, so ddr never keeps them between passes:
each block **profiles them out**. At the current topics, the mixture of every document of the
block is fitted by *folding in* (Hofmann's EM over ``theta_d`` with ``phi`` fixed, run to
convergence: the log-likelihood is concave in ``theta_d``, so this is its unique maximum), and
the block then contributes the expected topic-word counts at those mixtures,

    n(z, w) = sum_d n(d, w) theta_dz phi_zw / sum_z' theta_dz' phi_z'w,

and its log-likelihood ``sum_d sum_w n(d, w) log P(w | d)``. The M-step on the client is
``phi_zw = n(z, w) / sum_w n(z, w)``. This is EM on the profile likelihood
``L(phi) = max_theta L(phi, theta)``: the folding-in maximises over theta, the M-step raises
``L(phi, theta)`` at those theta, so ``L(phi)`` never decreases (up to the folding-in
tolerance). Blocks may be dense or scipy.sparse CSR; the cost is O(nnz K) per folding-in
iteration, words that a document does not hold cost nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse

from ddr.stats._sparse import as_csr64
from ddr.stats.base import Statistic

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
    n, k = X.shape[0], phi.shape[0]
    rows = np.repeat(np.arange(n), np.diff(X.indptr))
    phi_t = np.ascontiguousarray(phi.T)
    phi_e = phi_t[X.indices]  # (nnz, K)
    known = phi_e.sum(axis=1) > 0
    data = np.where(known, X.data, 0.0)
    length = np.bincount(rows, weights=data, minlength=n)
    live = length > 0
    theta = np.full((n, k), 1.0 / k)
    active = live.copy()  # each document iterates until its own mixture settles, so the
    for _ in range(FOLD_IN_MAX_ITER):  # result does not depend on the block it is in
        if not active.any():
            break
        denom = np.einsum("ek,ek->e", theta[rows], phi_e)
        ratio = _ratio(X, data, denom)
        new = theta * np.asarray(ratio @ phi_t)
        new[live] /= length[live, None]
        settled = np.abs(new - theta).max(axis=1) < FOLD_IN_TOL
        theta[active] = new[active]
        active &= ~settled
    denom = np.einsum("ek,ek->e", theta[rows], phi_e)
    with np.errstate(divide="ignore"):
        logp = np.where(data > 0, np.log(np.where(denom > 0, denom, 1.0)), 0.0)
    loglik = np.bincount(rows, weights=data * logp, minlength=n)
    return theta, _ratio(X, data, denom), loglik


def _ratio(X: scipy.sparse.csr_matrix, data: np.ndarray, denom: np.ndarray) -> Any:
    values = np.divide(data, denom, out=np.zeros_like(data), where=denom > 0)
    return scipy.sparse.csr_matrix((values, X.indices, X.indptr), shape=X.shape)


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
    readouts: ClassVar[tuple[str, ...]] = ("topic_word", "loglik", "n_docs", "n_tokens")

    topic_word: np.ndarray
    loglik: float
    n_docs: float
    n_tokens: float

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
        X = check_counts(X, "PLSA (input X)")
        if X.shape[1] != topics.shape[1]:
            raise ValueError(
                f"PLSASums: the block has {X.shape[1]} features, the topics {topics.shape[1]}"
            )
        if sample_weight is not None:  # a document counted w times
            X = scipy.sparse.csr_matrix(scipy.sparse.diags(np.asarray(sample_weight)) @ X)
        theta, ratio, loglik = fold_in(X, topics)
        topic_word = topics * np.asarray((ratio.T @ theta).T)
        return cls(topic_word, float(loglik.sum()), float(X.shape[0]), float(X.data.sum()))

    def __post_init__(self) -> None:
        object.__setattr__(self, "topic_word", np.asarray(self.topic_word, dtype=np.float64))
        for name in ("loglik", "n_docs", "n_tokens"):
            object.__setattr__(self, name, float(getattr(self, name)))

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

    def merge(self, other: Self) -> Self:
        if not isinstance(other, PLSASums):
            raise TypeError(f"cannot merge PLSASums with {type(other).__name__}")
        if self.topic_word.shape != other.topic_word.shape:
            raise ValueError(
                f"cannot merge PLSASums of shape {self.topic_word.shape} with "
                f"{other.topic_word.shape}"
            )
        return type(self)(
            self.topic_word + other.topic_word,
            self.loglik + other.loglik,
            self.n_docs + other.n_docs,
            self.n_tokens + other.n_tokens,
        )

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"topic_word": self.topic_word}

    def _scalars(self) -> dict[str, Any]:
        return {"loglik": self.loglik, "n_docs": self.n_docs, "n_tokens": self.n_tokens}

    def __repr__(self) -> str:
        k, v = self.topic_word.shape
        return f"PLSASums(n_topics={k}, n_features={v}, n_docs={self.n_docs:g})"
