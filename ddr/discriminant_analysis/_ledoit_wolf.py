"""Ledoit-Wolf shrinkage from one pass: a mergeable statistic of centred fourth cross-moments.

The Ledoit-Wolf shrinkage intensity of data ``Z`` (n rows, d features, centred) needs

- ``delta_ = ||Z^T Z / n||_F^2``: from the scatter (second moments), and
- ``beta_ = sum_{j,l} sum_i z_ij^2 z_il^2``: the sum of the entries of ``(Z o Z)^T (Z o Z)``,
  a *fourth* cross-moment, which ordinary moments do not carry.

scikit-learn's ``shrinkage="auto"`` applies Ledoit-Wolf to each class's *standardised* data
(centred by the class mean, scaled by the class standard deviation), so the fourth moments
must be taken about the class mean, which is only known at the end of the pass.
:class:`ClassFourthMoments` keeps, per class and about that class's mean of the rows seen,

    M2[j, l] = sum_i c_ij c_il,   M3[j, l] = sum_i c_ij^2 c_il,   M4[j, l] = sum_i c_ij^2 c_il^2

(``c = x - mean``) and merges two sets of rows by moving both to the merged mean exactly:
with ``c' = c - delta`` and ``sum_i c_i = 0``,

    M2' = M2 + n delta delta^T
    M3'[j,l] = M3[j,l] - delta_l M2[j,j] - 2 delta_j M2[j,l] - n delta_j^2 delta_l
    M4'[j,l] = M4[j,l] - 2 delta_l M3[j,l] - 2 delta_j M3[l,j] + delta_l^2 M2[j,j]
               + delta_j^2 M2[l,l] + 4 delta_j delta_l M2[j,l] + n delta_j^2 delta_l^2

(the same shift as Chan's update, one order higher). Each block costs two extra GEMMs of
(d x n) by (n x d); memory is 3 d^2 numbers per class.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self

import numpy as np

from ddr.stats._checks import check_block, check_finite, check_labels, check_weights
from ddr.stats.base import Statistic
from ddr.stats.class_moments import group_rows, union_classes

__all__ = ["ClassFourthMoments", "ledoit_wolf_covariance", "shrunk_covariance"]


def _block_sums(X: np.ndarray, w: np.ndarray | None) -> tuple[float, np.ndarray, ...]:
    Xf = np.asarray(X, dtype=np.float64)
    d = Xf.shape[1]
    if Xf.shape[0] == 0:
        z = np.zeros((d, d))
        return 0.0, np.zeros(d), z, z.copy(), z.copy()
    n = float(Xf.shape[0]) if w is None else float(w.sum())
    if n <= 0:
        z = np.zeros((d, d))
        return 0.0, np.zeros(d), z, z.copy(), z.copy()
    mean = Xf.mean(axis=0) if w is None else (w @ Xf) / n
    C = Xf - mean
    C2 = C * C
    if w is not None:
        Cw, C2w = C * w[:, None], C2 * w[:, None]
    else:
        Cw, C2w = C, C2
    return n, mean, Cw.T @ C, C2w.T @ C, C2w.T @ C2


def _shift(
    n: float, m2: np.ndarray, m3: np.ndarray, m4: np.ndarray, delta: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sums about ``mean + delta`` from sums about ``mean`` (see the module docstring)."""
    a20 = np.diagonal(m2)
    dj, dl = delta[:, None], delta[None, :]
    m2n = m2 + n * np.outer(delta, delta)
    m3n = m3 - dl * a20[:, None] - 2.0 * dj * m2 - n * dj**2 * dl
    m4n = (
        m4
        - 2.0 * dl * m3
        - 2.0 * dj * m3.T
        + dl**2 * a20[:, None]
        + dj**2 * a20[None, :]
        + 4.0 * dj * dl * m2
        + n * dj**2 * dl**2
    )
    return m2n, m3n, m4n


def _merge_one(a: tuple, b: tuple) -> tuple:
    na, mua, *sa = a
    nb, mub, *sb = b
    if na <= 0:
        return b
    if nb <= 0:
        return a
    n = na + nb
    mean = mua + (mub - mua) * (nb / n)
    pa = _shift(na, *sa, mean - mua)
    pb = _shift(nb, *sb, mean - mub)
    return (n, mean, *(x + y for x, y in zip(pa, pb, strict=True)))


@dataclasses.dataclass(frozen=True, eq=False)
class ClassFourthMoments(Statistic):
    """Per-class count, mean and centred second, third and fourth cross-moment sums.

    Parameters
    ----------
    classes : ndarray of shape (n_classes,)
    counts : ndarray of shape (n_classes,)
        Total sample weight per class.
    means : ndarray of shape (n_classes, n_features)
    m2, m3, m4 : ndarray of shape (n_classes, n_features, n_features)
        ``sum c_j c_l``, ``sum c_j^2 c_l`` and ``sum c_j^2 c_l^2`` about the class mean.
    """

    classes: np.ndarray
    counts: np.ndarray
    means: np.ndarray
    m2: np.ndarray
    m3: np.ndarray
    m4: np.ndarray

    needs_labels = True
    accepts_labels = True

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> Self:
        X = check_block(X)
        if y is None:
            raise ValueError("ClassFourthMoments needs class labels y; got y=None")
        if X.dtype.kind == "f" and not np.isfinite(X).all():
            check_finite(X)
        y = check_labels(y, X.shape[0])
        w = check_weights(sample_weight, X.shape[0])
        classes, order, slices = group_rows(y)
        Xs = X[order]
        ws = None if w is None else w[order]
        parts = [_block_sums(Xs[s], None if ws is None else ws[s]) for s in slices]
        return cls._from_parts(classes, parts, X.shape[1])

    @classmethod
    def _from_parts(cls, classes: np.ndarray, parts: list[tuple], d: int) -> Self:
        if not parts:
            z = np.zeros((0, d, d))
            return cls(classes, np.zeros(0), np.zeros((0, d)), z, z, z)
        return cls(
            classes,
            np.array([p[0] for p in parts]),
            np.stack([p[1] for p in parts]),
            *(np.stack([p[i] for p in parts]) for i in (2, 3, 4)),
        )

    @classmethod
    def empty(cls, classes: np.ndarray, n_features: int) -> Self:
        """Declared classes with no rows: the identity of :meth:`merge`."""
        classes = np.unique(check_labels(np.asarray(classes), len(classes), name="classes"))
        d = n_features
        parts = [(0.0, np.zeros(d), np.zeros((d, d)), np.zeros((d, d)), np.zeros((d, d)))] * len(
            classes
        )
        return cls._from_parts(classes, parts, d)

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", np.asarray(self.classes))
        for name in ("counts", "means", "m2", "m3", "m4"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))

    @property
    def n_features(self) -> int:
        return self.means.shape[1]

    def _part(self, k: int) -> tuple:
        return (float(self.counts[k]), self.means[k], self.m2[k], self.m3[k], self.m4[k])

    def merge(self, other: Self) -> Self:
        if not isinstance(other, ClassFourthMoments):
            raise TypeError(f"cannot merge ClassFourthMoments with {type(other).__name__}")
        if other.n_features != self.n_features:
            raise ValueError(
                f"cannot merge ClassFourthMoments of {self.n_features} features with "
                f"{other.n_features} features"
            )
        classes = union_classes(self.classes, other.classes, "ClassFourthMoments")
        mine = {c: k for k, c in enumerate(self.classes.tolist())}
        theirs = {c: k for k, c in enumerate(other.classes.tolist())}
        parts = []
        for c in classes.tolist():
            a = self._part(mine[c]) if c in mine else None
            b = other._part(theirs[c]) if c in theirs else None
            parts.append(b if a is None else a if b is None else _merge_one(a, b))
        return self._from_parts(classes, parts, self.n_features)

    def total(self) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """``(count, mean, M2, M4)`` of all rows regardless of class (an exact merge)."""
        acc = self._part(0)
        for k in range(1, len(self.classes)):
            acc = _merge_one(acc, self._part(k))
        return acc[0], acc[1], acc[2], acc[4]

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "classes": self.classes,
            "counts": self.counts,
            "means": self.means,
            "m2": self.m2,
            "m3": self.m3,
            "m4": self.m4,
        }

    def _scalars(self) -> dict[str, Any]:
        return {}


def _constant_features(var: np.ndarray, mean: np.ndarray, n: float) -> np.ndarray:
    # scikit-learn's StandardScaler test for a feature indistinguishable from a constant
    eps = np.finfo(np.float64).eps
    return var <= n * eps * var + (n * mean * eps) ** 2


def ledoit_wolf_covariance(
    n: float, mean: np.ndarray, m2: np.ndarray, m4: np.ndarray
) -> tuple[np.ndarray, float]:
    """scikit-learn's ``shrinkage="auto"`` covariance from moments: Ledoit-Wolf on
    standardised data, scaled back.

    Parameters
    ----------
    n : float
        Number of rows.
    mean : ndarray of shape (d,)
    m2, m4 : ndarray of shape (d, d)
        Centred second and fourth cross-moment sums (see the module docstring).

    Returns
    -------
    covariance : ndarray of shape (d, d)
    shrinkage : float
        The Ledoit-Wolf intensity on the standardised data.
    """
    d = m2.shape[0]
    var = np.diagonal(m2) / n
    scale = np.sqrt(var)
    scale[_constant_features(var, mean, n)] = 1.0
    if d == 1:
        return np.atleast_2d(var), 0.0
    S = np.outer(scale, scale)
    emp = m2 / n / S
    trace = np.diagonal(emp)
    mu = trace.sum() / d
    delta_ = np.sum(emp**2)
    beta_ = np.sum(m4 / (S * S))
    beta = (beta_ / n - delta_) / (d * n)
    delta = (delta_ - 2.0 * mu * trace.sum() + d * mu**2) / d
    beta = min(beta, delta)
    shrinkage = 0.0 if beta == 0 else beta / delta
    shrunk = (1.0 - shrinkage) * emp
    shrunk[np.diag_indices(d)] += shrinkage * mu
    return scale[:, None] * shrunk * scale[None, :], float(shrinkage)


def shrunk_covariance(cov: np.ndarray, shrinkage: float) -> np.ndarray:
    """``(1 - s) C + s (trace(C) / d) I``, scikit-learn's ``shrunk_covariance``."""
    d = cov.shape[0]
    out = (1.0 - shrinkage) * cov
    out[np.diag_indices(d)] += shrinkage * np.trace(cov) / d
    return out
