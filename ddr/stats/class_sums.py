"""Weighted row counts and feature sums per class: the statistic behind multinomial naive Bayes.

For labels ``y`` and weights ``w`` the statistic holds, per class ``c``,

    count_c = sum_{i: y_i = c} w_i,        sums_c = sum_{i: y_i = c} w_i x_i,

plain sums in float64 that merge by addition (on the union of the classes). Blocks may be
dense (a one-hot GEMM a sub-block at a time) or scipy.sparse CSR (one sparse product,
O(nnz)); word counts are never densified.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse

from ddr.stats._centring import scratch
from ddr.stats._checks import check_block, check_finite, check_weights, class_index
from ddr.stats._sparse import as_csr64
from ddr.stats.base import FEATURE_DIM, Statistic
from ddr.stats.class_moments import union_classes

__all__ = ["ClassSums"]


@dataclasses.dataclass(frozen=True, eq=False)
class ClassSums(Statistic):
    """Total weight and weighted feature sums of the rows of each class.

    Parameters
    ----------
    classes : ndarray of shape (n_classes,) or None
        Sorted class labels; None when summed without labels (one implicit class).
    counts : ndarray of shape (n_classes,)
        Total sample weight per class.
    sums : ndarray of shape (n_classes, n_features)
        Weighted feature sums per class (``feature_count_`` of multinomial naive Bayes).
    """

    accepts_labels = True
    accepts_sparse = True
    readouts: ClassVar[tuple[str, ...]] = ("classes", "counts", "sums", "class_counts")
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "classes": ("class",),
        "counts": ("class",),
        "sums": ("class", FEATURE_DIM),
        "class_counts": ("class",),
    }
    readout_units: ClassVar[dict[str, int | None]] = {"counts": 0, "sums": 1, "class_counts": 0}
    check_invariant = ("classes", "counts")
    _fields_as: ClassVar[dict[str, str]] = {
        "counts": "float64", "sums": "float64", "classes": "labels",
    }  # fmt: skip
    _labels_field = "classes"

    classes: np.ndarray | None
    counts: np.ndarray
    sums: np.ndarray

    @classmethod
    def from_block(
        cls,
        X: Any,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> Self:
        """The sums of one in-memory block (numpy or scipy.sparse rows).

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n_rows, n_features)
            The rows.
        y : ndarray of shape (n_rows,)
            Their classes.
        sample_weight : ndarray of shape (n_rows,), optional
            Row weights.

        Returns
        -------
        ClassSums
            The statistic of the block.
        """
        sparse = scipy.sparse.issparse(X)
        X = as_csr64(X) if sparse else check_block(X)
        n = X.shape[0]
        w = check_weights(sample_weight, n)
        classes, inverse, k = class_index(y, n)
        weights = np.ones(n) if w is None else w
        counts = np.bincount(inverse, weights=weights, minlength=k)
        if sparse:
            onehot = scipy.sparse.csr_matrix((weights, (inverse, np.arange(n))), shape=(k, n))
            sums = np.asarray((onehot @ X).toarray())
        else:
            sums = _dense_sums(X, inverse, weights, k)
        if not np.isfinite(sums).all():
            if not sparse:
                check_finite(X)
            raise ValueError("X has values too large to accumulate in float64")
        return cls(classes, counts, sums)

    @classmethod
    def empty(cls, classes: np.ndarray, n_features: int) -> Self:
        """The identity of :meth:`merge` for declared classes and no rows.

        Parameters
        ----------
        classes : ndarray of shape (n_classes,)
            The declared classes.
        n_features : int
            The width of the rows.

        Returns
        -------
        ClassSums
            Zero counts and sums.
        """
        k = len(classes)
        return cls(np.asarray(classes), np.zeros(k), np.zeros((k, n_features)))

    def _validate(self) -> None:
        if self.sums.ndim != 2:
            raise ValueError("ClassSums.sums must be 2-D (class, feature)")

    @property
    def n_features(self) -> int:
        return self.sums.shape[1]

    @property
    def class_counts(self) -> np.ndarray:
        """Total weight per class, shape (n_classes,)."""
        return self.counts

    @classmethod
    def value_nbytes(cls, n_features: int, n_classes: int = 1, **options: Any) -> int:
        return 8 * n_classes * (n_features + 1)

    def _merge(self, other: Self) -> Self:
        if self.classes is None:
            return type(self)(None, self.counts + other.counts, self.sums + other.sums)
        classes = union_classes(self.classes, other.classes, "ClassSums")
        counts = np.zeros(classes.shape[0])
        sums = np.zeros((classes.shape[0], self.n_features))
        for part in (self, other):
            at = np.searchsorted(classes, part.classes)
            counts[at] += part.counts
            sums[at] += part.sums
        return type(self)(classes, counts, sums)

    def __repr__(self) -> str:
        k = self.counts.shape[0]
        return f"ClassSums(n_classes={k}, n_features={self.n_features})"


def _dense_sums(X: np.ndarray, inverse: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """``onehot(inverse, weights) @ X`` in float64, a sub-block of rows at a time (converted
    into a buffer the thread reuses)."""
    n, d = X.shape
    sums = np.zeros((k, d))
    if n == 0:
        return sums
    step = int(np.clip(2**17 // max(d, 1), 16, 8192))
    step = min(step, n)
    buf = scratch("class_sums.rows", (step, d))
    onehot = np.zeros((k, step))
    cols = np.arange(step)
    for start in range(0, n, step):
        m = min(step, n - start)
        xs = buf[:m]
        np.copyto(xs, X[start : start + m])
        onehot[:, :m] = 0.0
        onehot[inverse[start : start + m], cols[:m]] = weights[start : start + m]
        sums += onehot[:, :m] @ xs
    return sums
