"""The uncentred product statistic behind truncated SVD (LSA): ``X^T X V`` without ``X^T X``.

For the rows of a block and a fixed d x l matrix ``V`` (the *basis*), :class:`GramProduct`
holds

    P = sum_i x_i x_i^T V = X^T (X V)        (d x l),

the uncentred Gram matrix applied to ``V``, and (when asked, on the first pass) the count,
column means and centred column sums of squares, whose sum is the total variance that
explained-variance ratios are fractions of. Nothing is centred in ``P``: truncated SVD
decomposes ``X`` itself, so the sums are plain sums and merge by addition; the column moments
merge with the Chan update. Blocks may be dense (two GEMMs, a few hundred rows at a time in
float64) or scipy.sparse CSR (two sparse products, O(nnz l); the block is never densified;
float32 values are multiplied in float32 with every float32 sum bounded and the results of
runs of rows summed in float64: :func:`ddr.stats._sparse.gram_product`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse

from ddr.stats._centring import scratch, small_gemm_rows
from ddr.stats._checks import check_block, check_finite, check_weights
from ddr.stats._sparse import check_sparse_block, column_moments, gram_product
from ddr.stats.base import CheckData, Statistic
from ddr.stats.moments import Moments

__all__ = ["GramProduct"]


@dataclasses.dataclass(frozen=True, eq=False)
class GramProduct(Statistic):
    """Count, column moments and the uncentred Gram matrix times a basis, in float64.

    Parameters
    ----------
    count : float
        Rows seen.
    mean : ndarray of shape (n_features,) or (0,)
        Column means (empty when built with ``moments=False``).
    sq : ndarray of shape (n_features,) or (0,)
        Centred column sums of squares ``sum_i (x_ij - mean_j)^2`` (empty with
        ``moments=False``).
    product : ndarray of shape (n_features, n_basis)
        ``X^T X V`` for the basis ``V`` of the pass.

    Notes
    -----
    Build with :meth:`from_block` (options ``basis`` and ``moments``) or through
    :func:`ddr.stats.compute` with ``GramProduct.spec(basis=V)``. The basis may be a
    ``dask.delayed`` value, shipped to each worker once. All partial statistics of one pass
    must use the same basis. Takes no sample weights.
    """

    accepts_sparse = True

    count: float
    mean: np.ndarray
    sq: np.ndarray
    product: np.ndarray

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        # rows of the kind this statistic takes (the base class's docstring says more)
        data = super().check_data(rng, n_rows)
        basis = rng.standard_normal((data.X.shape[1], 2))
        return CheckData(data.X, options={"basis": basis}, invariant=("count", "sq"))

    @classmethod
    def from_block(
        cls,
        X: Any,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        basis: np.ndarray,
        moments: bool = True,
    ) -> Self:
        """The statistic of one in-memory block.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n_rows, n_features)
        y : ignored
        sample_weight : ndarray of shape (n_rows,), optional
            Non-negative frequency weights: ``X^T diag(w) X V`` and the weighted column
            moments (a row of weight ``w`` counts as ``w`` copies of it).
        basis : ndarray of shape (n_features, n_basis)
            The matrix ``V`` the Gram matrix is applied to.
        moments : bool
            Also accumulate the column means and centred sums of squares (the first pass of
            the randomized solver; later passes skip them).
        """
        w = check_weights(sample_weight, X.shape[0])
        V = np.asarray(basis, dtype=np.float64)
        d = X.shape[1]
        if V.ndim != 2 or V.shape[0] != d:
            raise ValueError(
                f"basis must have shape (n_features={d}, n_basis); got shape {V.shape}"
            )
        if scipy.sparse.issparse(X):
            Xs = check_sparse_block(X)
            product = gram_product(Xs, V, w)
            if moments:
                count, mean, sq = column_moments(Xs, w)
            else:
                count = float(Xs.shape[0] if w is None else w.sum())
                mean, sq = np.zeros(0), np.zeros(0)
            return cls(count, mean, sq, product)
        X = check_block(X)
        product = _dense_product(X, V, w)
        if not np.isfinite(product).all():
            check_finite(X)
            raise ValueError("X has values too large to accumulate in float64")
        if moments:
            m = Moments.from_block(X, sample_weight=w, diagonal=True)
            return cls(float(m.count), m.mean, m.scatter, product)
        count = float(X.shape[0] if w is None else w.sum())
        return cls(count, np.zeros(0), np.zeros(0), product)

    _fields_as: ClassVar[dict[str, str]] = {
        "count": "count", **dict.fromkeys(("mean", "sq", "product"), "float64"),
    }  # fmt: skip
    _merge_mismatch = (
        "cannot merge {cls} of shape {a} with one of shape {b}; both must use the same basis"
    )

    # ------------------------------------------------------------------ shape
    @property
    def n_features(self) -> int:
        return self.product.shape[0]

    @property
    def n_basis(self) -> int:
        return self.product.shape[1]

    @classmethod
    def value_nbytes(
        cls, n_features: int, n_classes: int = 1, *, basis: Any = None, **options: Any
    ) -> int:
        """Memory estimate of one value: the d x l product and two d-vectors."""
        width = int(np.shape(basis)[1]) if basis is not None else 1
        return 8 * n_features * (width + 2)

    @classmethod
    def block_nbytes(
        cls, n_rows: int, n_features: int, n_classes: int = 1, *, basis: Any = None, **options: Any
    ) -> int:
        """Memory estimate of ``from_block``'s temporaries for a dense block: a float64
        sub-block and its l-wide projection (a sparse block needs ``n_rows x l`` floats)."""
        width = int(np.shape(basis)[1]) if basis is not None else 1
        rows = min(n_rows, small_gemm_rows(n_features, width, lo=16, hi=8192))
        return 8 * rows * (n_features + width)

    # ------------------------------------------------------------------ merge
    def _merge_key(self) -> tuple[int, ...]:
        return self.product.shape

    def _merge(self, other: Self) -> Self:
        """Sum of the products, Chan merge of the column moments."""
        product = self.product + other.product
        na, nb = self.count, other.count
        n = na + nb
        if not (self.mean.size and other.mean.size):
            return type(self)(n, np.zeros(0), np.zeros(0), product)
        if na == 0 or nb == 0:
            src = other if na == 0 else self
            return type(self)(n, src.mean, src.sq, product)
        delta = other.mean - self.mean
        mean = self.mean + delta * (nb / n)
        sq = self.sq + other.sq + (na * nb / n) * delta * delta
        return type(self)(n, mean, sq, product)

    # --------------------------------------------------------------- read-outs
    def total_variance(self, ddof: float = 0) -> float:
        """Sum of the column variances, ``sum(sq) / (count - ddof)``.

        Parameters
        ----------
        ddof : float, default=0
            Delta degrees of freedom.

        Returns
        -------
        float
            The total variance.
        """
        if self.sq.size == 0:
            raise ValueError("total_variance needs the column moments: build with moments=True")
        denom = self.count - ddof
        if denom <= 0:
            raise ValueError(f"needs more than ddof={ddof} samples; only {self.count:g} were seen")
        return float(self.sq.sum() / denom)

    # ---------------------------------------------------------- serialisation
    def __repr__(self) -> str:
        return (
            f"GramProduct(n_features={self.n_features}, n_basis={self.n_basis}, "
            f"count={self.count:g})"
        )


def _dense_product(X: np.ndarray, V: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """``X^T diag(w) (X V)`` in float64, a sub-block of rows at a time (converted into a
    buffer the thread reuses, multiplied while it is in cache); ``w`` None: all ones."""
    n, d = X.shape
    out = np.zeros((d, V.shape[1]))
    if n == 0:
        return out
    step = min(small_gemm_rows(d, V.shape[1], lo=16, hi=8192), n)
    buf = scratch("gram.rows", (step, d))
    for start in range(0, n, step):
        xs = buf[: min(step, n - start)]
        np.copyto(xs, X[start : start + step])
        if w is not None:  # (sqrt(w) x)(sqrt(w) x)^T = w x x^T
            xs *= np.sqrt(w[start : start + xs.shape[0]])[:, None]
        out += xs.T @ (xs @ V)
    return out
