"""Pairwise-complete means and covariances of rows with missing values (NaN), mergeable.

For every pair of features (i, j) the statistic keeps, over the rows where both are observed,
the count ``N_ij``, the sum ``S1_ij`` of ``x_i - c_i`` and the sum ``S2_ij`` of
``(x_i - c_i)(x_j - c_j)``, all about a float64 shift ``c`` (a block's own means, so that the
products are formed on centred numbers). Merging moves both operands to a common shift with

    S1'_ij = S1_ij + delta_i N_ij
    S2'_ij = S2_ij + delta_j S1_ij + delta_i S1_ji + delta_i delta_j N_ij,

``delta = c_old - c_new``, and adds. The covariance read-out is

    cov_ij = (S2_ij - S1_ij S1_ji / N_ij) / N_ij,

the covariance over the rows observing both (pairwise deletion). It is not positive
semi-definite in general: it is a starting point (PPCA's ``init="pca"`` with missing values),
not a model. On complete data it equals :class:`~ddr.stats.Moments`' covariance.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Self

import numpy as np
from scipy.linalg.blas import dsyrk

from ddr.stats._centring import Centring
from ddr.stats._checks import check_block, check_finite, check_weights
from ddr.stats.base import FEATURE_DIM, Statistic

__all__ = ["PairwiseMoments"]


def _sub_block_rows(n_features: int) -> int:
    return int(np.clip(2**21 // max(n_features, 1), 256, 8192))


@dataclasses.dataclass(frozen=True, eq=False)
class PairwiseMoments(Statistic):
    """Pairwise-complete counts and centred sums of the rows of ``X`` (NaN = missing).

    Parameters
    ----------
    shift : ndarray of shape (n_features,)
    pair_count : ndarray of shape (n_features, n_features)
        ``N_ij``: rows observing both i and j (its diagonal: rows observing i).
    s1 : ndarray of shape (n_features, n_features)
        ``S1_ij = sum (x_i - shift_i)`` over the rows observing i and j.
    s2 : ndarray of shape (n_features, n_features)
        ``S2_ij = sum (x_i - shift_i)(x_j - shift_j)`` over the rows observing i and j.
    n_rows : int
    weight : float or None
        The total weight of the rows (``n_rows`` without weights; None in a statistic saved
        before weights existed, read as ``n_rows``): with :attr:`count` it says whether any
        row had a missing entry.
    """

    readouts: ClassVar[tuple[str, ...]] = ("count", "mean", "covariance")
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "count": (FEATURE_DIM,),
        "mean": (FEATURE_DIM,),
        "covariance": (FEATURE_DIM, f"{FEATURE_DIM}_2"),
    }
    readout_units: ClassVar[dict[str, int | None]] = {"count": 0, "mean": 1, "covariance": 2}
    check_invariant = ("count", "covariance")
    _fields_as: ClassVar[dict[str, str]] = {
        "shift": "float64", "pair_count": "float64", "s1": "float64", "s2": "float64",
        "n_rows": "int", "weight": "float",
    }  # fmt: skip

    shift: np.ndarray
    pair_count: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    n_rows: int = 0
    weight: float | None = None

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> Self:
        """Pairwise sums of one block (NaN entries are missing; infinities are refused).

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            The block.
        y : ndarray of shape (n_rows,), optional
            Ignored (pairwise moments take no labels).
        sample_weight : ndarray of shape (n_rows,), optional
            Non-negative frequency weights: a row of weight ``w`` counts as ``w`` rows in
            every count and sum (``N_ij`` becomes the weight of the rows observing both).

        Returns
        -------
        PairwiseMoments
            The sums of this block.
        """
        X = check_block(X)
        n, d = X.shape
        w = check_weights(sample_weight, n)
        step = _sub_block_rows(d)
        # the shift: the per-feature mean of the first sub-block (any value near the data
        # keeps the products centred; 0 where a feature is not observed there)
        head = np.asarray(X[:step], dtype=np.float64)
        seen = ~np.isnan(head)
        cnt = seen.sum(axis=0)
        shift = np.where(cnt > 0, np.where(seen, head, 0.0).sum(axis=0) / np.maximum(cnt, 1), 0.0)
        unseen = np.flatnonzero(cnt == 0)
        if unseen.size and n > step:  # rare: look further down the block for those features
            rest = np.asarray(X[:, unseen], dtype=np.float64)
            ok = ~np.isnan(rest)
            c = ok.sum(axis=0)
            shift[unseen] = np.where(
                c > 0, np.where(ok, rest, 0.0).sum(axis=0) / np.maximum(c, 1), 0.0
            )
        if not np.isfinite(shift).all():
            check_finite(np.where(seen, head, 0.0), hint=" (NaN marks missing values)")
        N = np.zeros((d, d))
        s1 = np.zeros((d, d))
        s2 = np.zeros((d, d), order="F")
        colsum = np.zeros(d)
        m_complete = 0.0
        centre = Centring(shift, min(step, n))
        for start in range(0, n, step):
            A = centre(X[start : start + step])
            ws = None if w is None else w[start : start + A.shape[0]]
            sums = A.sum(axis=0)
            if np.isfinite(sums).all():  # no NaN, no inf: the shared path, one SYRK
                if ws is None:
                    m_complete += A.shape[0]
                    colsum += sums
                else:  # w x x^T as (sqrt(w) x)(sqrt(w) x)^T: still one SYRK
                    m_complete += float(ws.sum())
                    colsum += ws @ A
                    A *= np.sqrt(ws)[:, None]
                s2 = dsyrk(1.0, A.T, beta=1.0, c=s2, trans=0, overwrite_c=1)
                continue
            nan = np.isnan(A)
            if np.isinf(A).any():
                check_finite(np.where(nan, 0.0, A), hint=" (NaN marks missing values)")
            of = (~nan).astype(np.float64)
            A[nan] = 0.0
            weighted_of = of if ws is None else of * ws[:, None]
            N += of.T @ weighted_of
            s1 += A.T @ weighted_of
            part = A.T @ (A if ws is None else A * ws[:, None])
            s2 += np.triu(part)  # s2 holds the upper triangle until the end
        s2 = np.triu(s2)
        s2 = s2 + np.triu(s2, 1).T
        N += m_complete
        s1 += colsum[:, None]
        weight = float(n if w is None else w.sum())
        return cls(shift, N, s1, np.ascontiguousarray(s2), n, weight)

    @property
    def n_features(self) -> int:
        return self.shift.shape[0]

    def _moved(self, new_shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        delta = self.shift - new_shift
        s1 = self.s1 + delta[:, None] * self.pair_count
        s2 = (
            self.s2
            + self.s1 * delta[None, :]
            + self.s1.T * delta[:, None]
            + self.pair_count * np.outer(delta, delta)
        )
        return s1, s2

    def _merge(self, other: Self) -> Self:
        """Combine the sums of two disjoint sets of rows, about a count-weighted shift."""
        na, nb = np.diagonal(self.pair_count), np.diagonal(other.pair_count)
        tot = na + nb
        with np.errstate(invalid="ignore", divide="ignore"):
            shift = np.where(
                tot > 0, (na * self.shift + nb * other.shift) / np.maximum(tot, 1), 0.0
            )
        s1a, s2a = self._moved(shift)
        s1b, s2b = other._moved(shift)
        return type(self)(
            shift,
            self.pair_count + other.pair_count,
            s1a + s1b,
            s2a + s2b,
            self.n_rows + other.n_rows,
            self.total_weight + other.total_weight,
        )

    # --------------------------------------------------------------- read-outs
    @property
    def total_weight(self) -> float:
        """The rows' total weight (their number without weights)."""
        return float(self.n_rows if self.weight is None else self.weight)

    @property
    def complete(self) -> bool:
        """Whether every row of positive weight observed every feature."""
        return bool(self.pair_count.size == 0 or self.pair_count.min() == self.total_weight)

    @property
    def count(self) -> np.ndarray:
        """Observed entries per feature, shape (n_features,)."""
        return np.diagonal(self.pair_count).copy()

    @property
    def mean(self) -> np.ndarray:
        """Per-feature mean over its observed entries (NaN where never observed)."""
        cnt = self.count
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(cnt > 0, self.shift + np.diagonal(self.s1) / cnt, np.nan)

    def covariance(self) -> np.ndarray:
        """Pairwise-complete covariance (ddof=0); NaN where a pair is never observed together."""
        N = self.pair_count
        with np.errstate(invalid="ignore", divide="ignore"):
            cov = (self.s2 - self.s1 * self.s1.T / N) / N
        cov[N == 0] = np.nan
        return 0.5 * (cov + cov.T)

    # ---------------------------------------------------------- serialisation
    def __repr__(self) -> str:
        return f"PairwiseMoments(n_features={self.n_features}, n_rows={self.n_rows})"
