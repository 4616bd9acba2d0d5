"""Count, mean and centred scatter of rows: the statistic behind PCA, scaling and Gaussian fits.

Each block is centred on its own float64 mean before its scatter is formed, and blocks are
merged with the Chan/Golub/LeVeque update

    C = C_a + C_b + n_a n_b / n * d d^T,    d = mean_b - mean_a,

so the result has two-pass accuracy after one pass, whatever the offset of the data.
``X^T X - n mu mu^T`` is never formed: it loses every digit when features sit on a large
offset (see ``tests/test_moments.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal, Self

import numpy as np
from scipy.linalg.blas import dgemv, dger, dsyr, dsyrk
from sklearn.utils._param_validation import StrOptions

from ddr.stats._centring import Centring, scratch
from ddr.stats._checks import check_block, check_finite, check_weights
from ddr.stats.base import FEATURE_DIM, Statistic

__all__ = ["Moments"]

NanPolicy = Literal["raise", "omit"]
_NAN_POLICIES = ("raise", "omit")


def _sub_block_rows(n_features: int, diagonal: bool) -> int:
    # Centre and multiply about 1 MiB of float64 at a time so the copy stays in L2 between
    # the conversion and the product (`python -m benchmarks.per_block` times the result).
    # The full form rewrites its d x d sum once per sub-block, so wide data goes at least
    # 1024 rows at a time; the diagonal form needs no more than a few rows.
    return int(np.clip(2**17 // max(n_features, 1), 16 if diagonal else 1024, 8192))


#: rows whose mean is the shift the rows are centred on before their products
_SHIFT_ROWS = 64


def _centred_sums(
    X: np.ndarray, w: np.ndarray | None, diagonal: bool, rows: np.ndarray | None = None
) -> tuple[float, np.ndarray, np.ndarray]:
    """Weight, mean and centred scatter of a finite block (or of its ``rows``), in float64.

    Rows are centred on the mean of the block's first rows (close enough to the block
    mean that nothing cancels) and the exact mean is recovered from the column sums of the
    centred rows. Each sub-block is converted and centred into a buffer
    (:class:`~ddr.stats._centring.Centring`) and multiplied while it is still in cache. One
    read of the block from memory; with ``rows`` (indices into ``X``, e.g. one class's rows)
    only those rows are gathered, a sub-block at a time, so no copy of the selection is ever
    whole.
    """
    d = X.shape[1]
    if rows is not None:
        w = None if w is None else w[rows]
    n = X.shape[0] if rows is None else rows.shape[0]
    if n == 0:
        return 0.0, np.zeros(d), np.zeros(d) if diagonal else np.zeros((d, d))
    step = min(_sub_block_rows(d, diagonal), n)
    gathered = None if rows is None else scratch("moments.gathered", (step, d), X.dtype)

    def sub_block(start: int) -> np.ndarray:
        if rows is None:
            return X[start : start + step]
        picked = rows[start : start + step]
        return np.take(X, picked, axis=0, out=gathered[: picked.shape[0]], mode="clip")

    with np.errstate(over="ignore", invalid="ignore"):
        # a few rows place the shift within a fraction of a standard deviation of the mean,
        # which is all the correction needs (S - W r r^T loses about log10(1 + 1/64) digits);
        # the mean of a whole sub-block took 6 ms at d = 2000, once per class of a block
        head = X[:_SHIFT_ROWS] if rows is None else np.take(X, rows[:_SHIFT_ROWS], axis=0)
        shift = head.mean(axis=0, dtype=np.float64)
        k = head.shape[0]
        if w is not None and w[:k].sum() > 0:
            shift = (w[:k] @ head) / w[:k].sum()
    shift = np.where(np.isfinite(shift), shift, 0.0)  # non-finite input is reported below
    total = float(n) if w is None else float(w.sum())
    centre = Centring(shift, step)
    sums_weights = np.ones(step) if w is None else None
    resid = np.zeros(d)
    # not zeros: the first product writes the upper triangle (beta=0), and the lower one is
    # mirrored from it. A zeroed d x d buffer is mapped to the zero page and faulted twice
    # by the first product, which reads it and then writes it: 60 ms at d = 2000 against
    # a 26 ms product (five times per block of a 5-class statistic)
    scatter = np.zeros(d) if diagonal else np.empty((d, d), order="F")
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, n, step):
            out = centre(sub_block(start))
            m = out.shape[0]
            if w is None:
                resid = dgemv(1.0, out.T, sums_weights[:m], beta=1.0, y=resid, overwrite_y=1)
            else:
                root = np.sqrt(w[start : start + step])
                out *= root[:, None]
                resid = dgemv(1.0, out.T, root, beta=1.0, y=resid, overwrite_y=1)
            if diagonal:
                scatter += np.einsum("ij,ij->j", out, out)
            else:
                beta = 1.0 if start else 0.0
                scatter = dsyrk(1.0, out.T, beta=beta, c=scatter, trans=0, overwrite_c=1)
    # a finite diagonal bounds every other entry (|S_ij| <= sqrt(S_ii S_jj)); the lower
    # triangle is not set yet
    set_part = scatter if diagonal else np.diagonal(scatter)
    if not (np.isfinite(resid).all() and np.isfinite(set_part).all()):
        check_finite(X)
        raise ValueError("X has values too large to accumulate in float64")
    if total > 0:
        # the exact mean, and the scatter about it: S - W r r^T with r = mean - shift
        r = resid / total
        shift = shift + r
        if diagonal:
            scatter = scatter - total * (r * r)
        else:  # on the upper triangle dsyrk filled, in place: no d x d temporary
            scatter = dsyr(-total, r, a=scatter, lower=0, overwrite_a=1)
    if diagonal:
        return total, shift, scatter
    # symmetric: its transpose is the C-ordered matrix, without a copy
    return total, shift, _mirror_upper(scatter).T


def _mirror_upper(a: np.ndarray, panel: int = 256) -> np.ndarray:
    """``a`` (square, its upper triangle set) made symmetric in place, a panel of columns at
    a time: ``np.triu(a) + np.triu(a, 1).T`` made three d x d temporaries, a quarter of
    a class-moments block on 2000 features (five classes, five times)."""
    d = a.shape[0]
    for j in range(0, d, panel):
        k = min(j + panel, d)
        block = a[j:k, j:k]
        block[...] = np.triu(block) + np.triu(block, 1).T
        a[k:, j:k] = a[j:k, k:].T
    return a


def _omit_diagonal(
    X: np.ndarray, w: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-feature weight, mean and scatter of a block, ignoring NaN entries."""
    Xf = np.asarray(X, dtype=np.float64)
    observed = ~np.isnan(Xf)
    if np.isinf(Xf).any():
        check_finite(np.where(observed, Xf, 0.0), hint=" (nan_policy='omit' skips NaN only)")
    weights = observed.astype(np.float64) if w is None else observed * w[:, None]
    count = weights.sum(axis=0)
    filled = np.where(observed, Xf, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, (weights * filled).sum(axis=0) / count, 0.0)
    centred = np.where(observed, filled - mean, 0.0)
    scatter = (weights * centred * centred).sum(axis=0)
    return count, mean, scatter


@dataclasses.dataclass(frozen=True, eq=False)
class Moments(Statistic):
    """Count, mean and centred scatter of the rows of ``X``, in float64.

    Parameters
    ----------
    count : float or ndarray of shape (n_features,)
        Total sample weight (the number of rows when unweighted). Per feature for the
        diagonal form with ``nan_policy="omit"``.
    mean : ndarray of shape (n_features,)
        Weighted mean.
    scatter : ndarray of shape (n_features, n_features) or (n_features,)
        Centred sum of weighted outer products ``sum_i w_i (x_i - mean)(x_i - mean)^T``;
        only its diagonal in the diagonal form.
    n_rows : int
        Rows seen, whether or not they were used (rows with NaN are skipped in the full
        form with ``nan_policy="omit"``).

    Notes
    -----
    Build with :meth:`from_block` (options ``diagonal`` and ``nan_policy``) or through
    :func:`ddr.stats.compute`. Weights are frequency weights: ``covariance(ddof)`` divides by
    ``count - ddof``. With ``nan_policy="omit"`` the diagonal form counts each feature's
    observed entries; the full form keeps only complete rows (listwise deletion), which
    keeps the covariance positive semi-definite.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "diagonal": ["boolean"],
        "nan_policy": [StrOptions({"raise", "omit"})],
    }
    readouts: ClassVar[tuple[str, ...]] = (
        "count", "mean", "covariance", "variance", "std", "correlation", "total_variance",
    )  # fmt: skip
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "count": (),
        "mean": (FEATURE_DIM,),
        "covariance": (FEATURE_DIM, f"{FEATURE_DIM}_2"),
        "variance": (FEATURE_DIM,),
        "std": (FEATURE_DIM,),
        "correlation": (FEATURE_DIM, f"{FEATURE_DIM}_2"),
        "total_variance": (),
    }
    readout_units: ClassVar[dict[str, int | None]] = {
        "count": 0, "mean": 1, "covariance": 2, "variance": 2, "std": 1, "correlation": 0,
        "total_variance": 2,
    }  # fmt: skip
    check_invariant = ("count", "covariance", "variance", "n_rows")
    _fields_as: ClassVar[dict[str, str]] = {
        "count": "count", "mean": "float64", "scatter": "float64", "n_rows": "int",
    }  # fmt: skip

    count: float | np.ndarray
    mean: np.ndarray
    scatter: np.ndarray
    n_rows: int = 0

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        diagonal: bool = False,
        nan_policy: NanPolicy = "raise",
    ) -> Self:
        """Moments of one in-memory block.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
        y : ignored
        sample_weight : ndarray of shape (n_rows,), optional
        diagonal : bool
            Keep only per-feature variances (O(d) memory) instead of the d x d scatter.
        nan_policy : {"raise", "omit"}
        """
        X = check_block(X)
        if nan_policy not in _NAN_POLICIES:
            raise ValueError(f"nan_policy must be one of {_NAN_POLICIES}; got {nan_policy!r}")
        w = check_weights(sample_weight, X.shape[0])
        n_rows = X.shape[0]
        if nan_policy == "omit" and diagonal:
            # per-feature counts whatever the dtype: integer blocks (no NaN) merge with float
            # blocks of the same data
            if X.dtype.kind == "f":
                count, mean, scatter = _omit_diagonal(X, w)
                return cls(count, mean, scatter, n_rows)
            total, mean, scatter = _centred_sums(X, w, diagonal)
            return cls(np.full(X.shape[1], float(total)), mean, scatter, n_rows)
        if nan_policy == "omit" and X.dtype.kind == "f":
            complete = ~np.isnan(X).any(axis=1)
            if not complete.all():
                X = X[complete]
                w = None if w is None else w[complete]
        total, mean, scatter = _centred_sums(X, w, diagonal)
        return cls(total, mean, scatter, n_rows)

    @classmethod
    def empty(cls, n_features: int, *, diagonal: bool = False, per_feature: bool = False) -> Self:
        """The identity of :meth:`merge`: no rows seen.

        Parameters
        ----------
        n_features : int
            Width of the data.
        diagonal : bool, default False
            Per-feature variances only, as ``Moments.spec(diagonal=True)`` keeps them.
        per_feature : bool, default False
            Per-feature counts, as ``nan_policy="omit"`` with ``diagonal=True`` keeps them.

        Returns
        -------
        Moments
            Zero rows.
        """
        d = n_features
        count: float | np.ndarray = np.zeros(d) if per_feature else 0.0
        return cls(count, np.zeros(d), np.zeros(d) if diagonal else np.zeros((d, d)), 0)

    # ------------------------------------------------------------------ shape
    @property
    def n_features(self) -> int:
        return self.mean.shape[0]

    @property
    def diagonal(self) -> bool:
        return self.scatter.ndim == 1

    # ------------------------------------------------------------------ merge
    @classmethod
    def value_nbytes(
        cls, n_features: int, n_classes: int = 1, *, diagonal: bool = False, **options: Any
    ) -> int:
        """Memory estimate of one value: a d x d scatter, or three d-vectors if diagonal."""
        if diagonal:
            return 8 * n_classes * 3 * n_features
        return super().value_nbytes(n_features, n_classes)

    @classmethod
    def block_nbytes(
        cls,
        n_rows: int,
        n_features: int,
        n_classes: int = 1,
        *,
        nan_policy: str = "raise",
        **options: Any,
    ) -> int:
        """Memory estimate of ``from_block``'s temporaries: with ``nan_policy="omit"``, about
        six float64 arrays the size of the block (copy, mask, weights, filled, centred)."""
        if nan_policy == "omit":
            return 6 * 8 * n_rows * n_features
        return super().block_nbytes(n_rows, n_features, n_classes)

    def _merge(self, other: Self) -> Self:
        """Chan/Golub/LeVeque merge of the moments of two disjoint sets of rows."""
        if other.diagonal != self.diagonal:
            raise ValueError("cannot merge diagonal Moments with full Moments")
        na, nb = self.count, other.count
        n = na + nb
        delta = other.mean - self.mean
        with np.errstate(invalid="ignore", divide="ignore"):
            fb = np.where(n > 0, nb / np.where(n > 0, n, 1.0), 0.0)
            cross = np.where(n > 0, na * nb / np.where(n > 0, n, 1.0), 0.0)
        mean = self.mean + delta * fb
        if self.diagonal:
            scatter = self.scatter + other.scatter + cross * delta * delta
        else:
            # one d x d result, the Chan term added in place by BLAS (DGER of v = sqrt(cross)
            # delta: v_i v_j is v_j v_i, so the sum stays exactly symmetric, and DGER on the
            # transposed view of a symmetric matrix is the same update): the sum and
            # np.outer made four d x d temporaries, half a 5-class ClassMoments merge at
            # d = 2000 (118 ms against 61 ms)
            scatter = np.add(self.scatter, other.scatter)
            if cross > 0:
                v = np.sqrt(float(cross)) * delta
                scatter = dger(1.0, v, v, a=scatter.T, overwrite_a=1).T
        count = float(n) if np.ndim(n) == 0 else n
        return type(self)(count, mean, scatter, self.n_rows + other.n_rows)

    def _merge_many(self, others: list[Self]) -> Self:
        """All at once: ``S = sum_i S_i + sum_i n_i (m_i - m)(m_i - m)^T`` about the merged
        mean ``m``, the scatters added into one new d x d matrix (a merge after another
        made one per merge: a merge task of four 5-class partials at d = 2000 allocated
        fifteen 32 MB matrices, each faulted in page by page)."""
        parts = [self, *others]
        own = type(self)._merge is not Moments._merge  # a subclass's own merge decides
        if own or len(others) == 1 or any(p.diagonal or np.ndim(p.count) for p in parts):
            return super()._merge_many(others)
        counts = np.array([float(p.count) for p in parts])
        n = counts.sum()
        if n <= 0:
            return super()._merge_many(others)
        # the mean as a weighted sum of differences from the first: on a large offset the
        # differences are what is known to full precision
        base = self.mean
        mean = base + sum(c * (p.mean - base) for c, p in zip(counts, parts, strict=True)) / n
        scatter = np.add(self.scatter, others[0].scatter)
        for p in others[1:]:
            np.add(scatter, p.scatter, out=scatter)
        for c, p in zip(counts, parts, strict=True):
            if c > 0:  # DGER of v v^T keeps the sum exactly symmetric (see _merge)
                v = np.sqrt(c) * (p.mean - mean)
                scatter = dger(1.0, v, v, a=scatter.T, overwrite_a=1).T
        return type(self)(float(n), mean, scatter, sum(p.n_rows for p in parts))

    # --------------------------------------------------------------- read-outs
    def _denominator(self, ddof: float) -> float | np.ndarray:
        denom = self.count - ddof
        if np.ndim(denom) == 0:
            if denom <= 0:
                raise ValueError(
                    f"needs more than ddof={ddof} samples; only {self.count:g} were seen"
                )
            return float(denom)
        return np.where(denom > 0, denom, np.nan)

    def covariance(self, ddof: float = 0) -> np.ndarray:
        """Covariance matrix, shape (n_features, n_features); ``ddof=1`` gives ``np.cov``.

        Parameters
        ----------
        ddof : float, default 0
            Delta degrees of freedom: the divisor is ``count - ddof``.
        """
        if self.diagonal:
            raise ValueError(
                "covariance() needs the full form; these Moments are diagonal "
                "(variance() gives the diagonal, Moments.spec(diagonal=False) the full form)"
            )
        return self.scatter / self._denominator(ddof)

    def variance(self, ddof: float = 0) -> np.ndarray:
        """Per-feature variance, shape (n_features,); NaN where a feature has too few values.

        Parameters
        ----------
        ddof : float, default 0
            Delta degrees of freedom: the divisor is ``count - ddof``.
        """
        diag = self.scatter if self.diagonal else np.diagonal(self.scatter)
        return np.maximum(diag, 0.0) / self._denominator(ddof)

    def std(self, ddof: float = 0) -> np.ndarray:
        """Per-feature standard deviation, shape (n_features,).

        Parameters
        ----------
        ddof : float, default 0
            Delta degrees of freedom: the divisor is ``count - ddof``.
        """
        return np.sqrt(self.variance(ddof))

    def correlation(self) -> np.ndarray:
        """Correlation matrix, shape (n_features, n_features); NaN rows for constant features."""
        cov = self.covariance()
        s = np.sqrt(np.diagonal(cov))
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = cov / np.outer(s, s)
        corr[np.isinf(corr)] = np.nan
        np.fill_diagonal(corr, np.where(s > 0, 1.0, np.nan))
        return corr

    def gram(self) -> np.ndarray:
        """Uncentred ``X^T W X``, shape (n_features, n_features) (or its diagonal)."""
        if self.diagonal:
            return self.scatter + self.count * self.mean**2
        return self.scatter + self.count * np.outer(self.mean, self.mean)

    def total_variance(self, ddof: float = 0) -> float:
        """Trace of the covariance: the total variance PCA explains fractions of.

        Parameters
        ----------
        ddof : float, default 0
            Delta degrees of freedom: the divisor is ``count - ddof``.
        """
        return float(np.sum(self.variance(ddof)))

    # ---------------------------------------------------------- serialisation
    def __repr__(self) -> str:
        form = "diagonal" if self.diagonal else "full"
        count = self.count if np.ndim(self.count) == 0 else f"per-feature {self.count.min():g}.."
        return f"Moments({form}, n_features={self.n_features}, count={count})"
