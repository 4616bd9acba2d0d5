"""The centred product statistic behind randomized PCA: ``S V`` without ever forming ``S``.

For the rows of a block and a fixed d x l matrix ``V`` (the *basis*), :class:`CentredProduct`
holds the count, the mean, the diagonal of the centred scatter and

    P = sum_i (x_i - mean)(x_i - mean)^T V = S V        (d x l),

the centred scatter ``S`` applied to ``V``. Each block is centred on a float64 shift (its own
mean, or a mean known from an earlier pass) before anything is multiplied, and blocks are merged
with the Chan/Golub/LeVeque update applied to ``S V``:

    S V = S_a V + S_b V + n_a n_b / n * d (d^T V),    d = mean_b - mean_a,

so one pass gives two-pass accuracy, whatever the offset of the data. The work per block is
two GEMMs, ``T^T = V^T X_c^T`` (l x rows) and ``T^T X_c`` (l x d; an extra row of ones in
``T^T`` gives the column sums for free), done a few hundred rows at a time (sized by
:func:`~ddr.stats._centring.small_gemm_rows`); nothing d x d is ever formed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np

from ddr.stats._centring import Centring, small_gemm_rows
from ddr.stats._checks import check_block, check_finite, check_weights
from ddr.stats.base import CheckData, Statistic

__all__ = ["CentredProduct"]


@dataclasses.dataclass(frozen=True, eq=False)
class CentredProduct(Statistic):
    """Count, mean, diagonal scatter and centred scatter times a basis, in float64.

    Parameters
    ----------
    count : float
        Total sample weight (the number of rows when unweighted).
    mean : ndarray of shape (n_features,)
    sq : ndarray of shape (n_features,) or (0,)
        Diagonal of the centred scatter, ``sum_i w_i (x_i - mean)**2``; its sum is the trace
        that explained-variance ratios are fractions of. Empty when built with
        ``diagonal=False``.
    product : ndarray of shape (n_features, n_basis)
        ``sum_i w_i (x_i - mean)(x_i - mean)^T V`` for the basis ``V`` of the pass.
    mean_proj : ndarray of shape (n_basis,)
        ``mean @ V``, which the merge needs to apply the Chan correction to ``S V``.
    n_rows : int
        Rows seen.

    Notes
    -----
    Build with :meth:`from_block` (options ``basis`` and ``center``) or through
    :func:`ddr.stats.compute` with ``CentredProduct.spec(basis=V, center=mu)``. The basis may be
    a ``dask.delayed`` value: the engine then ships it to each worker once instead of embedding
    it in every task. All partial statistics of one pass must use the same basis.
    """

    count: float
    mean: np.ndarray
    sq: np.ndarray
    product: np.ndarray
    mean_proj: np.ndarray
    n_rows: int = 0

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        # rows of the kind this statistic takes (the base class's docstring says more)
        data = super().check_data(rng, n_rows)
        basis = rng.standard_normal((data.X.shape[1], 2))
        invariant = ("count", "sq", "product", "n_rows")
        return CheckData(data.X, options={"basis": basis}, invariant=invariant)

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        basis: np.ndarray,
        center: np.ndarray | None = None,
        diagonal: bool = True,
    ) -> Self:
        """The statistic of one in-memory block.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
        y : ignored
        sample_weight : ndarray of shape (n_rows,), optional
        basis : ndarray of shape (n_features, n_basis)
            The matrix ``V`` the centred scatter is applied to.
        center : ndarray of shape (n_features,), optional
            A float64 shift to centre the rows on before multiplying, typically the mean from
            an earlier pass. Default: the mean of the block's first rows.
            The result does not depend on it beyond round-off.
        diagonal : bool
            Also accumulate the diagonal of the scatter (``sq``; the trace). Later passes of
            the randomized solver skip it (``sq`` is then empty).
        """
        X = check_block(X)
        V = np.asarray(basis, dtype=np.float64)
        n, d = X.shape
        if V.ndim != 2 or V.shape[0] != d:
            raise ValueError(
                f"basis must have shape (n_features={d}, n_basis); got shape {V.shape}"
            )
        w = check_weights(sample_weight, n)
        l_ = V.shape[1]
        if n == 0:
            sq0 = np.zeros(d if diagonal else 0)
            return cls(0.0, np.zeros(d), sq0, np.zeros((d, l_)), np.zeros(l_), 0)
        total = float(n) if w is None else float(w.sum())
        step = small_gemm_rows(d, l_ + 1, lo=16, hi=8192)
        if center is None:
            # the mean of the first sub-block: near enough to the block mean that nothing
            # cancels, and the exact mean follows from the centred column sums below (a mean
            # of the whole block would be an extra read of it, a quarter of this statistic)
            head = X[: max(step, 256)]
            wh = None if w is None else w[: head.shape[0]]
            with np.errstate(over="ignore", invalid="ignore"):
                if wh is None or wh.sum() == 0:
                    shift = head.mean(axis=0, dtype=np.float64)
                else:
                    shift = (wh @ head) / wh.sum()
        else:
            shift = np.asarray(center, dtype=np.float64)
            if shift.shape != (d,):
                raise ValueError(f"center must have shape ({d},); got shape {shift.shape}")
        shift = np.asarray(shift, dtype=np.float64)
        if not np.isfinite(shift).all():
            check_finite(X)
            raise ValueError("X has values too large to accumulate in float64")

        centre = Centring(shift, min(step, n))
        # T^T = [V^T x_c ; 1^T] per sub-block: one GEMM gives V^T x_c, the next both the product
        # (transposed, l x d) and, from the row of ones, the column sums of the centred rows.
        tbuf = np.ones((l_ + 1, min(step, n)), dtype=np.float64)
        acc = np.zeros((l_ + 1, d))
        sq = np.zeros(d if diagonal else 0)
        VT = np.ascontiguousarray(V.T)
        for start in range(0, n, step):
            out = centre(X[start : start + step])
            m = out.shape[0]
            t = tbuf[:, :m]
            if w is not None:
                sw = np.sqrt(w[start : start + step])
                t[l_] = sw  # the weighted column sums: sum_i w_i (x_i - shift)
                out *= sw[:, None]
            if diagonal:
                sq += np.einsum("ij,ij->j", out, out)
            np.matmul(VT, out.T, out=t[:l_])
            acc += t @ out
        prod = np.ascontiguousarray(acc[:l_].T)
        resid = acc[l_]
        if not np.isfinite(resid).all() or not np.isfinite(prod).all():
            check_finite(X)
            raise ValueError("X has values too large to accumulate in float64")
        if total > 0:
            # Re-centre from the shift onto the exact block mean: with r = mean - shift,
            # sum (x - mean)(x - mean)^T V = sum (x - shift)(x - shift)^T V - n r (r^T V).
            # r is the residual of a float64 mean, or the small offset of this block from the
            # mean of the whole data, so nothing cancels.
            r = resid / total
            shift = shift + r
            prod -= total * np.outer(r, r @ V)
            if diagonal:
                sq -= total * r * r
        return cls(total, shift, sq, prod, shift @ V, n)

    _fields_as: ClassVar[dict[str, str]] = {
        "count": "count",
        **dict.fromkeys(("mean", "sq", "product", "mean_proj"), "float64"),
        "n_rows": "int",
    }  # fmt: skip
    _merge_mismatch = (
        "cannot merge {cls} of shape {a} with one of shape {b}; both must use the same basis"
    )

    # ------------------------------------------------------------------ shape
    @property
    def n_features(self) -> int:
        return self.mean.shape[0]

    @property
    def n_basis(self) -> int:
        return self.product.shape[1]

    # ------------------------------------------------------------------ merge
    @classmethod
    def value_nbytes(
        cls, n_features: int, n_classes: int = 1, *, basis: Any = None, **options: Any
    ) -> int:
        """Memory estimate of one value: the d x l product and three d-vectors."""
        width = int(np.shape(basis)[1]) if basis is not None else 1
        return 8 * (n_features * width + 3 * n_features + width)

    @classmethod
    def block_nbytes(
        cls,
        n_rows: int,
        n_features: int,
        n_classes: int = 1,
        *,
        basis: Any = None,
        **options: Any,
    ) -> int:
        """Memory estimate of ``from_block``'s temporaries: the centring buffer and the
        l-wide projection of a sub-block."""
        width = int(np.shape(basis)[1]) if basis is not None else 1
        rows = min(n_rows, small_gemm_rows(n_features, width + 1, lo=16, hi=8192))
        return 8 * rows * (n_features + width + 1)

    def _merge_key(self) -> tuple[int, ...]:
        return self.product.shape

    def _merge(self, other: Self) -> Self:
        """Chan merge of two disjoint sets of rows sketched with the same basis."""
        na, nb = self.count, other.count
        n = na + nb
        if n == 0:
            return type(self)(
                0.0, self.mean, self.sq, self.product, self.mean_proj, self.n_rows + other.n_rows
            )
        delta = other.mean - self.mean
        delta_proj = other.mean_proj - self.mean_proj
        cross = na * nb / n
        fb = nb / n
        mean = self.mean + delta * fb
        mean_proj = self.mean_proj + delta_proj * fb
        if self.sq.size and other.sq.size:
            sq = self.sq + other.sq + cross * delta * delta
        else:  # computed without the diagonal
            sq = np.zeros(0)
        prod = self.product + other.product + cross * np.outer(delta, delta_proj)
        return type(self)(n, mean, sq, prod, mean_proj, self.n_rows + other.n_rows)

    # --------------------------------------------------------------- read-outs
    def total_variance(self, ddof: float = 0) -> float:
        """Trace of the covariance, ``sum(sq) / (count - ddof)``.

        Parameters
        ----------
        ddof : float, default 0
            Delta degrees of freedom: the divisor is ``count - ddof``.
        """
        if self.sq.size == 0:
            raise ValueError("total_variance needs the diagonal: build with diagonal=True")
        denom = self.count - ddof
        if denom <= 0:
            raise ValueError(f"needs more than ddof={ddof} samples; only {self.count:g} were seen")
        return float(np.maximum(self.sq, 0.0).sum() / denom)

    # ---------------------------------------------------------- serialisation
    def __repr__(self) -> str:
        return (
            f"CentredProduct(n_features={self.n_features}, n_basis={self.n_basis}, "
            f"count={self.count:g})"
        )
