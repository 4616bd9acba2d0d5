"""One :class:`Moments` per class, with the class set discovered across blocks.

The statistic behind Gaussian naive Bayes, QDA, LDA and the Fisher projection: class counts,
priors, per-class means and covariances, the pooled within-class covariance and the
between-class scatter all come from one pass.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self

import numpy as np

from ddr.stats._checks import check_block, check_labels, check_same_labels_kind
from ddr.stats.base import Statistic
from ddr.stats.moments import Moments, NanPolicy

__all__ = ["ClassMoments", "group_rows"]


def group_rows(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[slice]]:
    """Sorted classes of ``y``, a permutation grouping rows by class, and each class's slice."""
    classes, inverse = np.unique(y, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(classes)))])
    return classes, order, [slice(bounds[i], bounds[i + 1]) for i in range(len(classes))]


def union_classes(a: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
    """Sorted union of two class arrays of the same label kind."""
    check_same_labels_kind(a, b, what)
    return np.union1d(a, b)


@dataclasses.dataclass(frozen=True, eq=False)
class ClassMoments(Statistic):
    """Per-class :class:`Moments` of the rows of ``X`` grouped by labels ``y``.

    Parameters
    ----------
    classes : ndarray of shape (n_classes,)
        Sorted class labels (integer, float or unicode).
    moments : tuple of Moments
        ``moments[k]`` holds the rows whose label is ``classes[k]``.
    counts : ndarray of shape (n_classes,)
        Total sample weight of each class's rows, including rows that ``nan_policy="omit"``
        left out of the moments.

    Notes
    -----
    Classes may be declared before they are seen (:meth:`empty`), as ``partial_fit`` with
    ``classes=`` needs; such classes have a count of zero until rows arrive.
    """

    classes: np.ndarray
    moments: tuple[Moments, ...]
    counts: np.ndarray

    needs_labels = True
    accepts_labels = True

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
        """Class moments of one in-memory block; see :meth:`Moments.from_block` for options."""
        X = check_block(X)
        if y is None:
            raise ValueError("ClassMoments needs class labels y; got y=None")
        y = check_labels(y, X.shape[0])
        classes, order, slices = group_rows(y)
        Xs = X[order]
        ws = None if sample_weight is None else np.asarray(sample_weight, np.float64)[order]
        counts = np.array(
            [s.stop - s.start if ws is None else ws[s].sum() for s in slices], dtype=np.float64
        )
        moments = tuple(
            Moments.from_block(
                Xs[s],
                sample_weight=None if ws is None else ws[s],
                diagonal=diagonal,
                nan_policy=nan_policy,
            )
            for s in slices
        )
        return cls(classes, moments, counts)

    @classmethod
    def empty(
        cls,
        classes: np.ndarray,
        n_features: int,
        *,
        diagonal: bool = False,
        per_feature: bool = False,
    ) -> Self:
        """Declared classes with no rows yet: the identity of :meth:`merge` for those classes."""
        classes = np.asarray(classes)
        classes = check_labels(classes, classes.shape[0], name="classes")
        uniq = np.unique(classes)
        if uniq.shape[0] != classes.shape[0]:
            raise ValueError("classes must not contain duplicates")
        empty = Moments.empty(n_features, diagonal=diagonal, per_feature=per_feature)
        return cls(uniq, tuple(empty for _ in uniq), np.zeros(uniq.shape[0]))

    def __post_init__(self) -> None:
        classes = np.asarray(self.classes)
        counts = np.asarray(self.counts, dtype=np.float64)
        if len(self.moments) != classes.shape[0] or counts.shape != classes.shape:
            raise ValueError("ClassMoments: one Moments and one count per class are required")
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "moments", tuple(self.moments))
        object.__setattr__(self, "counts", counts)

    # ------------------------------------------------------------------ shape
    @property
    def n_classes(self) -> int:
        return self.classes.shape[0]

    @property
    def n_features(self) -> int:
        return self.moments[0].n_features if self.moments else 0

    @property
    def diagonal(self) -> bool:
        return bool(self.moments) and self.moments[0].diagonal

    # ------------------------------------------------------------------ merge
    def merge(self, other: Self) -> Self:
        if not isinstance(other, ClassMoments):
            raise TypeError(f"cannot merge ClassMoments with {type(other).__name__}")
        if self.n_classes and other.n_classes and self.n_features != other.n_features:
            raise ValueError(
                f"cannot merge ClassMoments of {self.n_features} features with ClassMoments of "
                f"{other.n_features} features"
            )
        classes = union_classes(self.classes, other.classes, "ClassMoments")
        mine = dict(zip(self.classes.tolist(), self.moments, strict=True))
        theirs = dict(zip(other.classes.tolist(), other.moments, strict=True))
        merged = []
        for c in classes.tolist():
            a, b = mine.get(c), theirs.get(c)
            merged.append(b if a is None else a if b is None else a.merge(b))
        counts = np.zeros(classes.shape[0])
        counts[np.searchsorted(classes, self.classes)] += self.counts
        counts[np.searchsorted(classes, other.classes)] += other.counts
        return type(self)(classes, tuple(merged), counts)

    # --------------------------------------------------------------- read-outs
    def priors(self) -> np.ndarray:
        """Empirical class priors, shape (n_classes,)."""
        counts = self.counts
        total = counts.sum()
        if total <= 0:
            raise ValueError("no samples seen: priors are undefined")
        return counts / total

    @property
    def means(self) -> np.ndarray:
        """Per-class means, shape (n_classes, n_features)."""
        return np.stack([m.mean for m in self.moments])

    def variances(self, ddof: float = 0) -> np.ndarray:
        """Per-class, per-feature variances, shape (n_classes, n_features)."""
        return np.stack([m.variance(ddof) for m in self.moments])

    def covariances(self, ddof: float = 0) -> np.ndarray:
        """Per-class covariance matrices, shape (n_classes, n_features, n_features)."""
        return np.stack([m.covariance(ddof) for m in self.moments])

    def total(self) -> Moments:
        """The moments of all rows regardless of class (an exact merge)."""
        acc = self.moments[0]
        for m in self.moments[1:]:
            acc = acc.merge(m)
        return acc

    def within_scatter(self) -> np.ndarray:
        """Within-class scatter ``S_W = sum_k scatter_k``, shape (d, d) (or (d,) if diagonal)."""
        return np.sum([m.scatter for m in self.moments], axis=0)

    def pooled_covariance(self, ddof: float = 0) -> np.ndarray:
        """Pooled within-class covariance ``S_W / (n - ddof * n_classes)``.

        ``ddof=0`` is the maximum-likelihood shared covariance of LDA; ``ddof=1`` the unbiased
        pooled estimate.
        """
        used = self._used_counts().sum(axis=0)
        denom = used - ddof * self.n_classes
        if np.any(denom <= 0):
            raise ValueError(
                f"pooled covariance with ddof={ddof} needs more than {ddof * self.n_classes:g} "
                f"samples; only {np.min(used):g} were seen"
            )
        return self.within_scatter() / (denom[0] if denom.shape == (1,) else denom)

    def between_scatter(self) -> np.ndarray:
        """Between-class scatter ``S_B = sum_k n_k (mu_k - mu)(mu_k - mu)^T``, shape (d, d)."""
        mu = self.total().mean
        diffs = self.means - mu
        return (diffs * self._used_counts()).T @ diffs

    def _used_counts(self) -> np.ndarray:
        """Weight behind each class's moments, shape (n_classes, 1) or (n_classes, d)."""
        return np.array([np.atleast_1d(m.count) for m in self.moments])

    # ---------------------------------------------------------- serialisation
    def _arrays(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {"classes": self.classes, "counts": self.counts}
        if self.moments:
            out["count"] = np.stack([np.asarray(m.count) for m in self.moments])
            out["mean"] = self.means
            out["scatter"] = np.stack([m.scatter for m in self.moments])
            out["n_rows"] = np.array([m.n_rows for m in self.moments], dtype=np.int64)
        return out

    def _scalars(self) -> dict[str, Any]:
        return {}

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Self:
        classes = np.asarray(fields["classes"])
        moments = tuple(
            Moments(
                fields["count"][k], fields["mean"][k], fields["scatter"][k], fields["n_rows"][k]
            )
            for k in range(classes.shape[0])
        )
        return cls(classes, moments, fields["counts"])

    def __repr__(self) -> str:
        return f"ClassMoments(classes={self.classes.tolist()}, n_features={self.n_features})"
