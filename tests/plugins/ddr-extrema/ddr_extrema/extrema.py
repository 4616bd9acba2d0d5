"""``Extrema``: the largest absolute value of each feature, a mergeable statistic."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np

from ddr.stats import FEATURE_DIM, Statistic

__all__ = ["Extrema"]


@dataclasses.dataclass(frozen=True, eq=False)
class Extrema(Statistic):
    """The largest absolute value of each feature over the rows, and their total weight.

    ``merge`` takes the element-wise maximum and adds the weights: associative and
    commutative, exact in any order; the statistic of no rows (zeros) is its identity.
    Rows of weight 0 do not count.

    Parameters
    ----------
    max_abs : ndarray of shape (n_features,)
        ``max |x_j|`` over the rows (0 for no rows).
    count : float
        Total weight of the rows.
    """

    readouts: ClassVar[tuple[str, ...]] = ("max_abs", "count")
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {"max_abs": (FEATURE_DIM,), "count": ()}
    check_invariant: ClassVar[tuple[str, ...]] = ("count",)
    _fields_as: ClassVar[dict[str, str]] = {"max_abs": "float64", "count": "float"}

    max_abs: np.ndarray
    count: float

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> Self:
        """The statistic of one block of rows.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            The rows (finite).
        y : ignored
        sample_weight : ndarray of shape (n_rows,), optional
            Non-negative weights; rows of weight 0 do not count.

        Returns
        -------
        Extrema
        """
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"Extrema: X must be 2-D (rows, features); got shape {X.shape}")
        absolute = np.abs(X.astype(np.float64, copy=False))
        if not np.isfinite(absolute).all():
            raise ValueError("Extrema: X contains NaN or infinity")
        if sample_weight is None:
            count = float(X.shape[0])
        else:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.shape != (X.shape[0],) or (w < 0).any():
                raise ValueError("Extrema: sample_weight must be non-negative, one per row")
            absolute, count = absolute[w > 0], float(w.sum())
        return cls(absolute.max(axis=0, initial=0.0), count)

    def _merge(self, other: Self) -> Self:
        return type(self)(np.maximum(self.max_abs, other.max_abs), self.count + other.count)

    @property
    def n_features(self) -> int:
        return int(self.max_abs.shape[0])

    @classmethod
    def value_nbytes(cls, n_features: int, n_classes: int = 1, **options: Any) -> int:
        return 8 * (n_features + 1)
