"""The training rows themselves as a (bounded) mergeable statistic, for exact kernel estimates.

Exact kernel density estimates need every training point; for small data the one pass that
computes the moments can also collect the rows. Merging concatenates, so the statistic is
exact; its size is capped (``max_rows``) so that it can never silently exhaust memory.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self

import numpy as np

from ddr.stats._checks import check_block, check_finite, check_labels, check_weights
from ddr.stats.base import Statistic
from ddr.stats.class_moments import union_classes

__all__ = ["ClassSamples"]


@dataclasses.dataclass(frozen=True, eq=False)
class ClassSamples(Statistic):
    """Rows grouped by class, with their weights.

    Parameters
    ----------
    classes : ndarray of shape (n_classes,)
    rows : ndarray of shape (n_rows, n_features)
        float64 rows, grouped by class in the order of ``classes``.
    bounds : ndarray of shape (n_classes + 1,)
        Rows of class ``k`` are ``rows[bounds[k]:bounds[k + 1]]``.
    weights : ndarray of shape (n_rows,)
    max_rows : int
        Merging beyond this many rows raises a ValueError.
    """

    classes: np.ndarray
    rows: np.ndarray
    bounds: np.ndarray
    weights: np.ndarray
    max_rows: int = 20_000

    needs_labels = True
    accepts_labels = True

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        max_rows: int = 20_000,
    ) -> Self:
        X = check_block(X)
        if y is None:
            raise ValueError("ClassSamples needs class labels y; got y=None")
        if X.dtype.kind == "f" and not np.isfinite(X).all():
            check_finite(X)
        y = check_labels(y, X.shape[0])
        w = check_weights(sample_weight, X.shape[0])
        classes, inverse = np.unique(y, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(classes)))])
        weights = np.ones(X.shape[0]) if w is None else w
        out = cls(classes, np.asarray(X, np.float64)[order], bounds, weights[order], max_rows)
        out._check_size()
        return out

    @classmethod
    def empty(cls, classes: np.ndarray, n_features: int, max_rows: int = 20_000) -> Self:
        classes = np.unique(check_labels(np.asarray(classes), len(classes), name="classes"))
        return cls(
            classes, np.zeros((0, n_features)), np.zeros(len(classes) + 1, np.int64),
            np.zeros(0), max_rows,
        )  # fmt: skip

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", np.asarray(self.classes))
        object.__setattr__(self, "rows", np.asarray(self.rows, dtype=np.float64))
        object.__setattr__(self, "bounds", np.asarray(self.bounds, dtype=np.int64))
        object.__setattr__(self, "weights", np.asarray(self.weights, dtype=np.float64))
        object.__setattr__(self, "max_rows", int(self.max_rows))

    def _check_size(self) -> None:
        if self.rows.shape[0] > self.max_rows:
            raise ValueError(
                f"exact kernel estimates keep the training rows in memory and are capped at "
                f"{self.max_rows} rows; got more. Use algorithm='binned' (or raise "
                "max_exact_samples)"
            )

    @property
    def counts(self) -> np.ndarray:
        """Total weight per class, shape (n_classes,)."""
        cs = np.concatenate([[0.0], np.cumsum(self.weights)])
        return cs[self.bounds[1:]] - cs[self.bounds[:-1]]

    def class_rows(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and weights of class ``k``."""
        s = slice(self.bounds[k], self.bounds[k + 1])
        return self.rows[s], self.weights[s]

    def merge(self, other: Self) -> Self:
        if not isinstance(other, ClassSamples):
            raise TypeError(f"cannot merge ClassSamples with {type(other).__name__}")
        classes = union_classes(self.classes, other.classes, "ClassSamples")
        parts_x, parts_w, sizes = [], [], []
        for c in classes.tolist():
            n = 0
            for s in (self, other):
                hit = np.flatnonzero(s.classes == c)
                if hit.size:
                    x, w = s.class_rows(int(hit[0]))
                    parts_x.append(x)
                    parts_w.append(w)
                    n += x.shape[0]
            sizes.append(n)
        d = self.rows.shape[1]
        out = type(self)(
            classes,
            np.concatenate(parts_x) if parts_x else np.zeros((0, d)),
            np.concatenate([[0], np.cumsum(sizes)]),
            np.concatenate(parts_w) if parts_w else np.zeros(0),
            min(self.max_rows, other.max_rows),
        )
        out._check_size()
        return out

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "classes": self.classes,
            "rows": self.rows,
            "bounds": self.bounds,
            "weights": self.weights,
        }

    def _scalars(self) -> dict[str, Any]:
        return {"max_rows": self.max_rows}
