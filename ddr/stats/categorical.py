"""Counts per (class, feature, category): the statistic behind categorical and Bernoulli models."""

from __future__ import annotations

import dataclasses
from numbers import Integral
from typing import Any, ClassVar, Self

import numpy as np
from sklearn.utils._param_validation import Interval

from ddr.stats._checks import check_block, check_weights, class_index
from ddr.stats.base import FEATURE_DIM, CheckData, Statistic
from ddr.stats.class_moments import union_classes

__all__ = ["CategoricalCounts"]

#: Largest category code accepted by default: the counts are dense, n_classes x d x n_categories.
MAX_CATEGORIES = 1 << 16


def check_categories(X: np.ndarray, max_categories: int = MAX_CATEGORIES) -> np.ndarray:
    """Return ``X`` as non-negative int64 category codes, or raise naming the offending values."""
    if X.dtype.kind == "f":
        if not np.isfinite(X).all():
            raise ValueError("categorical X contains NaN or infinite values")
        if (X != np.floor(X)).any():
            bad = X[X != np.floor(X)][:3]
            raise ValueError(
                f"categorical X must hold integer category codes; got non-integer values such "
                f"as {bad.tolist()}"
            )
    elif X.dtype.kind not in "biu":
        raise TypeError(f"categorical X must be integer-coded; got dtype {X.dtype}")
    if X.size and X.min() < 0:
        raise ValueError(
            f"categorical X must hold non-negative category codes 0, 1, 2, ...; got {X.min():g}"
        )
    if X.size and X.max() >= max_categories:
        raise ValueError(
            f"categorical X has category code {X.max():g}, above max_categories={max_categories}; "
            "re-code the categories as 0..K-1 or raise max_categories"
        )
    return X.astype(np.int64, copy=False)


@dataclasses.dataclass(frozen=True, eq=False)
class CategoricalCounts(Statistic):
    """Weighted counts of each category of each feature, per class.

    Parameters
    ----------
    classes : ndarray of shape (n_classes,) or None
        Sorted class labels; ``None`` when counted without labels (one implicit class).
    counts : ndarray of shape (n_classes, n_features, n_categories)
        ``counts[k, j, c]`` is the total weight of rows of class ``k`` whose feature ``j``
        equals ``c``. ``n_categories`` is one more than the largest code seen in any feature.
    n_categories : ndarray of shape (n_features,)
        One more than the largest code seen per feature (the categories discovered so far).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "max_categories": [Interval(Integral, 1, None, closed="left")],
    }
    readouts: ClassVar[tuple[str, ...]] = ("classes", "counts", "class_counts")
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "classes": ("class",),
        "counts": ("class", FEATURE_DIM, "category"),
        "class_counts": ("class",),
    }
    readout_units: ClassVar[dict[str, int | None]] = {"counts": 0, "class_counts": 0}
    _fields_as: ClassVar[dict[str, str]] = {
        "counts": "float64", "n_categories": "int64", "classes": "labels",
    }  # fmt: skip
    _labels_field = "classes"

    classes: np.ndarray | None
    counts: np.ndarray
    n_categories: np.ndarray

    accepts_labels = True

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        # rows of the kind this statistic takes (the base class's docstring says more)
        X = ((rng.integers(0, 3, (n_rows, 3)) + np.arange(n_rows)[:, None]) % 4).astype(float)
        return CheckData(X, np.arange(n_rows) % 3, offset=False)  # codes

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        max_categories: int = MAX_CATEGORIES,
    ) -> Self:
        """Counts of one in-memory block of integer category codes.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            The block of non-negative integer codes.
        y : ndarray of shape (n_rows,), optional
            Class labels: one statistic per class when given.
        sample_weight : ndarray of shape (n_rows,), optional
            Non-negative frequency weights.
        max_categories : int
            Refuse codes at or above this (a guard against continuous data given by
            mistake, which would allocate a count per distinct value).

        Returns
        -------
        CategoricalCounts
            Per class, feature and category, the (weighted) counts.
        """
        X = check_categories(check_block(X), max_categories)
        n, d = X.shape
        w = check_weights(sample_weight, n)
        classes, inverse, k = class_index(y, n)
        n_cat = (X.max(axis=0) + 1) if n else np.zeros(d, dtype=np.int64)
        c = int(n_cat.max()) if d and n else 0
        flat = (inverse[:, None] * d + np.arange(d)) * c + X
        weights = None if w is None else np.repeat(w, d)
        counts = np.bincount(flat.ravel(), weights=weights, minlength=k * d * c)
        return cls(classes, counts.reshape(k, d, c).astype(np.float64), n_cat)

    def _validate(self) -> None:
        if self.counts.ndim != 3:
            raise ValueError("CategoricalCounts.counts must be 3-D (class, feature, category)")

    @property
    def n_features(self) -> int:
        return self.counts.shape[1]

    def _merge(self, other: Self) -> Self:
        c = max(self.counts.shape[2], other.counts.shape[2])
        if self.classes is None:
            counts = self._padded(c) + other._padded(c)
            classes = None
        else:
            classes = union_classes(self.classes, other.classes, "CategoricalCounts")
            counts = np.zeros((classes.shape[0], self.n_features, c))
            counts[np.searchsorted(classes, self.classes)] += self._padded(c)
            counts[np.searchsorted(classes, other.classes)] += other._padded(c)
        return type(self)(classes, counts, np.maximum(self.n_categories, other.n_categories))

    def _padded(self, c: int) -> np.ndarray:
        extra = c - self.counts.shape[2]
        return np.pad(self.counts, ((0, 0), (0, 0), (0, extra))) if extra else self.counts

    # --------------------------------------------------------------- read-outs
    @property
    def class_counts(self) -> np.ndarray:
        """Total weight per class, shape (n_classes,)."""
        if self.counts.shape[2] == 0:
            return np.zeros(self.counts.shape[0])
        return self.counts[:, 0, :].sum(axis=1)

    def frequencies(self, alpha: float = 0.0, n_categories: np.ndarray | None = None) -> list:
        """Smoothed category frequencies per feature.

        ``(count + alpha) / (class count + alpha * n_categories_j)``: the multinomial MLE for
        ``alpha=0`` and the posterior mean under a symmetric Dirichlet(alpha) prior.

        Parameters
        ----------
        alpha : float, default 0.0
            Additive (Laplace/Lidstone) smoothing.
        n_categories : ndarray of shape (n_features,), optional
            Categories per feature (default: those seen), e.g. to include codes that
            appear only at prediction time.

        Returns
        -------
        list of ndarray
            Over features, arrays of shape (n_classes, n_categories_j).
        """
        cats = self.n_categories if n_categories is None else np.asarray(n_categories)
        out = []
        for j in range(self.n_features):
            cj = int(cats[j])
            cnt = self._padded(max(cj, self.counts.shape[2]))[:, j, :cj]
            denom = cnt.sum(axis=1, keepdims=True) + alpha * cj
            with np.errstate(invalid="ignore", divide="ignore"):
                out.append((cnt + alpha) / denom)
        return out
