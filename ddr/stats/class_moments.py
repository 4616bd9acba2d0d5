"""One :class:`Moments` per class, with the class set discovered across blocks.

The statistic behind Gaussian naive Bayes, QDA, LDA and the Fisher projection: class counts,
priors, per-class means and covariances, the pooled within-class covariance and the
between-class scatter all come from one pass.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np
from scipy.linalg.blas import dgemm
from sklearn.utils._param_validation import StrOptions

from ddr.stats._centring import scratch
from ddr.stats._checks import (
    check_block,
    check_finite,
    check_labels,
    check_same_labels_kind,
    check_weights,
    unique_labels,
)
from ddr.stats.base import FEATURE_DIM, Statistic
from ddr.stats.moments import Moments, NanPolicy, _centred_sums

__all__ = ["ClassMoments", "group_rows"]


# the diagonal form reduces a block with class-indicator GEMMs up to this many classes (4 ms
# faster per 100 000 x 100 block than gathering each class's rows for 5 classes); their cost
# grows with the number of classes (1.6 s for 1000), the gather's does not (0.13 s)
_INDICATOR_CLASSES = 8


def group_rows(
    y: np.ndarray, labels: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray, list[slice]]:
    """Sorted classes of ``y``, a permutation grouping rows by class, and each class's slice.

    ``labels`` is ``unique_labels(y)`` when the caller has it already.
    """
    classes, inverse = unique_labels(y) if labels is None else labels
    # numpy's stable sort of 8- and 16-bit keys is a radix sort: 10x faster than of intp keys
    key = np.uint8 if classes.shape[0] <= 2**8 else np.uint16 if classes.shape[0] <= 2**16 else None
    order = np.argsort(inverse if key is None else inverse.astype(key), kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(classes)))])
    return classes, order, [slice(bounds[i], bounds[i + 1]) for i in range(len(classes))]


def _diagonal_class_sums(
    X: np.ndarray, inverse: np.ndarray, n_classes: int, w: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-class weight, mean and per-feature scatter of a finite block, in float64.

    One read of the block, no regrouping of its rows (a gather of the whole block costs as
    much as the statistic): each cache-sized sub-block is centred on its rows' class shifts
    (the class mean over the first sub-block, else one of the class's rows: close enough
    that nothing cancels) and reduced by two small GEMMs with the class indicator matrix (weights
    in place of ones when weighted). The exact class means follow from the centred sums.
    """
    n, d = X.shape
    # about 1 MiB of float64 per sub-block, so it stays in L2 across its two GEMMs (measured
    # 1.8x faster at d = 100 than 8 MiB sub-blocks)
    step = int(np.clip(2**17 // max(d, 1), 256, 8192))
    head = min(step, n)
    buf = scratch("class_sums.rows", (head, d))
    np.copyto(buf, X[:head])
    head_counts = np.bincount(inverse[:head], minlength=n_classes).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        shift = _indicator(inverse[:head], n_classes, None) @ buf
        shift /= np.maximum(head_counts, 1.0)[:, None]
        missing = head_counts == 0
        if missing.any():  # classes first seen further down: their first row (one sort)
            _, first = np.unique(inverse, return_index=True)
            shift[missing] = X[first[missing]]
    shift = np.where(np.isfinite(shift), shift, 0.0)  # non-finite input is reported below
    shift_t = np.asfortranarray(shift.T)
    sums = np.zeros((n_classes, d))
    sq = np.zeros((n_classes, d))
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, n, step):
            idx = inverse[start : start + step]
            out = buf[: idx.shape[0]]
            np.copyto(out, X[start : start + step])
            ones = _indicator(idx, n_classes, None)
            # out - indicator @ shift as one GEMM into the transposed (Fortran) view, in place
            # when BLAS can (a row gather of the shifts costs several times more)
            out = dgemm(-1.0, shift_t, ones, beta=1.0, c=out.T, overwrite_c=1).T
            H = ones if w is None else _indicator(idx, n_classes, w[start : start + step])
            sums += H @ out
            np.multiply(out, out, out=out)
            sq += H @ out
    if not (np.isfinite(sums).all() and np.isfinite(sq).all()):
        check_finite(X)
        raise ValueError("X has values too large to accumulate in float64")
    weight = np.bincount(inverse, weights=w, minlength=n_classes).astype(np.float64)
    r = sums / np.where(weight > 0, weight, 1.0)[:, None]
    return weight, shift + r, sq - weight[:, None] * r * r


def _indicator(idx: np.ndarray, n_classes: int, w: np.ndarray | None) -> np.ndarray:
    """The (n_classes, n_rows) class indicator matrix, with weights in place of ones."""
    H = np.zeros((n_classes, idx.shape[0]))
    H[idx, np.arange(idx.shape[0])] = 1.0 if w is None else w
    return H


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

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "diagonal": ["boolean"],
        "nan_policy": [StrOptions({"raise", "omit"})],
    }
    readouts: ClassVar[tuple[str, ...]] = (
        "classes", "counts", "priors", "means", "variances", "covariances",
        "pooled_covariance", "within_scatter", "between_scatter",
    )  # fmt: skip
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "classes": ("class",),
        "counts": ("class",),
        "priors": ("class",),
        "means": ("class", FEATURE_DIM),
        "variances": ("class", FEATURE_DIM),
        "covariances": ("class", FEATURE_DIM, f"{FEATURE_DIM}_2"),
        "pooled_covariance": (FEATURE_DIM, f"{FEATURE_DIM}_2"),
        "within_scatter": (FEATURE_DIM, f"{FEATURE_DIM}_2"),
        "between_scatter": (FEATURE_DIM, f"{FEATURE_DIM}_2"),
    }
    readout_units: ClassVar[dict[str, int | None]] = {
        "counts": 0, "priors": 0, "means": 1, "variances": 2, "covariances": 2,
        "pooled_covariance": 2, "within_scatter": 2, "between_scatter": 2,
    }  # fmt: skip
    check_invariant = (
        "classes", "counts", "covariances", "pooled_covariance", "between_scatter",
    )  # fmt: skip
    _fields_as: ClassVar[dict[str, str]] = {
        "classes": "labels", "moments": "tuple", "counts": "float64",
    }  # fmt: skip

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
        """Class moments of one in-memory block.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            The block.
        y : ndarray of shape (n_rows,)
            Class labels (required).
        sample_weight : ndarray of shape (n_rows,), optional
            Non-negative frequency weights.
        diagonal : bool, default False
            Per-feature variances only, as for :meth:`Moments.from_block`.
        nan_policy : {"raise", "omit"}, default "raise"
            As for :meth:`Moments.from_block`, per feature within each class.

        Returns
        -------
        ClassMoments
            One :class:`Moments` per class present in the block.
        """
        X = check_block(X)
        if y is None:
            raise ValueError("ClassMoments needs class labels y; got y=None")
        y = check_labels(y, X.shape[0])
        labels = None
        if diagonal and nan_policy == "raise" and X.shape[0] > 0:
            labels = unique_labels(y)
        if labels is not None and labels[0].shape[0] <= _INDICATOR_CLASSES:
            w = check_weights(sample_weight, X.shape[0])
            classes, inverse = labels
            weight, mean, scatter = _diagonal_class_sums(X, inverse, classes.shape[0], w)
            n_rows = np.bincount(inverse, minlength=classes.shape[0])
            moments = tuple(
                Moments(weight[c], mean[c], scatter[c], n_rows[c]) for c in range(len(classes))
            )
            return cls(classes, moments, weight)
        classes, order, slices = group_rows(y, labels)
        if nan_policy == "raise":
            # each class's rows are gathered a cache-sized sub-block at a time into the
            # centring buffer: a regrouped copy of the whole block costs a quarter of the fit
            w = check_weights(sample_weight, X.shape[0])
            sums = [_centred_sums(X, w, diagonal, rows=order[s]) for s in slices]
            moments = tuple(
                Moments(total, mean, scatter, s.stop - s.start)
                for (total, mean, scatter), s in zip(sums, slices, strict=True)
            )
            return cls(classes, moments, np.array([total for total, _, _ in sums]))
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
        """Declared classes with no rows yet: the identity of :meth:`merge` for those classes.

        Parameters
        ----------
        classes : ndarray of shape (n_classes,)
            The class labels, without duplicates.
        n_features : int
            Width of the data.
        diagonal : bool, default False
            Per-feature variances only.
        per_feature : bool, default False
            Per-feature counts (``nan_policy="omit"`` with ``diagonal=True``).

        Returns
        -------
        ClassMoments
            Zero rows in every class.
        """
        classes = np.asarray(classes)
        classes = check_labels(classes, classes.shape[0], name="classes")
        uniq = np.unique(classes)
        if uniq.shape[0] != classes.shape[0]:
            raise ValueError("classes must not contain duplicates")
        empty = Moments.empty(n_features, diagonal=diagonal, per_feature=per_feature)
        return cls(uniq, tuple(empty for _ in uniq), np.zeros(uniq.shape[0]))

    def _validate(self) -> None:
        if len(self.moments) != self.classes.shape[0] or self.counts.shape != self.classes.shape:
            raise ValueError("ClassMoments: one Moments and one count per class are required")

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
    @classmethod
    def value_nbytes(
        cls, n_features: int, n_classes: int = 1, *, diagonal: bool = False, **options: Any
    ) -> int:
        """Memory estimate of one value: one :class:`Moments` per class."""
        return Moments.value_nbytes(n_features, n_classes, diagonal=diagonal)

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
        """Memory estimate of ``from_block``'s temporaries: the centring buffer and the rows'
        class order; with ``nan_policy="omit"`` a regrouped copy of the block as well."""
        extra = 8 * n_rows * n_features if nan_policy == "omit" else 0
        return super().block_nbytes(n_rows, n_features, n_classes) + 8 * n_rows + extra

    def _merge_key(self) -> int | None:
        return self.n_features if self.n_classes else None  # no class yet: no width either

    def _merge(self, other: Self) -> Self:
        return self._merge_many([other])

    def _merge_many(self, others: list[Self]) -> Self:
        # each class's moments merged in one step (Moments.merge_many)
        parts = [self, *others]
        classes = self.classes
        for p in others:
            classes = union_classes(classes, p.classes, "ClassMoments")
        found: dict[Any, list[Moments]] = {c: [] for c in classes.tolist()}
        counts = np.zeros(classes.shape[0])
        for p in parts:
            for c, m in zip(p.classes.tolist(), p.moments, strict=True):
                found[c].append(m)
            counts[np.searchsorted(classes, p.classes)] += p.counts
        merged = tuple(ms[0].merge_many(ms[1:]) for ms in found.values())
        return type(self)(classes, merged, counts)

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
        """Per-class, per-feature variances, shape (n_classes, n_features).

        Parameters
        ----------
        ddof : float, default 0
            Delta degrees of freedom: the divisor is ``count - ddof``.
        """
        return np.stack([m.variance(ddof) for m in self.moments])

    def covariances(self, ddof: float = 0) -> np.ndarray:
        """Per-class covariance matrices, shape (n_classes, n_features, n_features).

        Parameters
        ----------
        ddof : float, default 0
            Delta degrees of freedom: the divisor is ``count - ddof``.
        """
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

        Parameters
        ----------
        ddof : float, default 0
            Delta degrees of freedom: the divisor is ``count - ddof``.
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
