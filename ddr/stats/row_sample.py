"""A uniform sample of rows without replacement, in one pass, independent of the blocks.

Every row gets a pseudo-random priority from its id and a seed (a counter-based hash,
splitmix64: no generator state travels between blocks) and the sample is the ``size`` rows
of smallest priority, a *bottom-k sample*. Merging keeps the smallest priorities of the union,
so the sample is the same however the rows are cut into blocks and merged, and each set of
``size`` rows is equally likely. The ids are the rows' positions (``ddr.clustering`` passes
``arange(n_samples)`` as ``y``): an id must name one row, never a block.

k-means++ on such a sample starts :class:`ddr.KMeans` and :class:`ddr.GaussianMixture`; its
first rows are a uniform draw of any smaller size (``init="random"``).
"""

from __future__ import annotations

import dataclasses
from numbers import Integral
from typing import Any, ClassVar, Self

import numpy as np
from sklearn.utils._param_validation import Interval

from ddr.stats._checks import check_block, check_finite
from ddr.stats.base import CheckData, Statistic

__all__ = ["RowSample", "row_priorities"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def row_priorities(ids: np.ndarray, seed: int) -> np.ndarray:
    """The priority of each row id under ``seed``: splitmix64 of ``id + (seed + 1) * phi``.

    Parameters
    ----------
    ids : ndarray of int, shape (n,)
        Row ids.
    seed : int
        Any non-negative integer.

    Returns
    -------
    ndarray of int64, shape (n,)
        Uniform on ``[0, 2**63)`` (the hash's top 63 bits), the same for the same id and seed
        in every block and process.
    """
    z = np.asarray(ids, dtype=np.int64).astype(np.uint64)
    key = np.uint64((int(seed) + 1) * int(_GOLDEN) % 2**64)
    with np.errstate(over="ignore"):
        z = z * _GOLDEN + key  # arrays wrap modulo 2**64
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(1)).astype(np.int64)


@dataclasses.dataclass(frozen=True, eq=False)
class RowSample(Statistic):
    """The ``size`` rows of smallest priority (a uniform sample without replacement).

    Parameters
    ----------
    n_rows : int
        Rows seen.
    priority : ndarray of int64, shape (m,)
        The kept rows' priorities, increasing (ties, which need equal hashes, by id).
    ids : ndarray of int64, shape (m,)
        Their ids.
    rows : ndarray of float64, shape (m, n_features)
        The rows themselves, ``m = min(size, n_rows)``.
    size : int
        How many rows the sample keeps.

    Notes
    -----
    ``y`` of :meth:`from_block` holds the rows' ids (required: the sample depends on them,
    never on how the rows are blocked). A merge task holds ``split_every`` samples of ``size
    x n_features`` float64.
    """

    n_rows: int
    priority: np.ndarray
    ids: np.ndarray
    rows: np.ndarray
    size: int

    needs_labels = True
    accepts_labels = True
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "size": [Interval(Integral, 1, None, closed="left")],
        "seed": [Interval(Integral, 0, None, closed="left")],
    }
    check_invariant = ("priority", "ids", "n_rows")
    _fields_as: ClassVar[dict[str, str]] = {
        "n_rows": "int", "priority": "int64", "ids": "int64", "rows": "float64", "size": "int",
    }  # fmt: skip
    _merge_mismatch = "cannot merge RowSample of {a} with RowSample of {b} (features, size)"

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        # rows of the kind this statistic takes (the base class's docstring says more)
        data = super().check_data(rng, n_rows)
        ids = np.arange(n_rows) + 1000
        return CheckData(data.X, ids, {"size": 25, "seed": 3}, invariant=cls.check_invariant)

    @classmethod
    def from_block(  # type: ignore[override]  # its options are keywords, not **options
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        size: int,
        seed: int = 0,
    ) -> Self:
        """The sample of one block of rows.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
        y : ndarray of int, shape (n_rows,)
            The rows' ids (required).
        sample_weight : not supported (must be None)
        size : int
            Rows to keep.
        seed : int, default 0
            Seeds the priorities.

        Returns
        -------
        RowSample
        """
        X = check_block(X)
        if y is None:
            raise ValueError("RowSample needs the rows' ids as y; got y=None")
        if sample_weight is not None:
            raise ValueError("RowSample does not support sample_weight")
        ids = np.asarray(y)
        if ids.shape != (X.shape[0],) or ids.dtype.kind not in "iu":
            raise ValueError(
                f"RowSample: y must hold one integer id per row, shape ({X.shape[0]},); got "
                f"dtype {ids.dtype} and shape {ids.shape}"
            )
        ids = ids.astype(np.int64)
        priority = row_priorities(ids, seed)
        if ids.shape[0] > size:
            keep = np.argpartition(priority, size - 1)[:size]
            ids, priority = ids[keep], priority[keep]
        else:
            keep = None
        order = np.lexsort((ids, priority))
        picked = order if keep is None else keep[order]
        rows = np.asarray(X[picked], dtype=np.float64)
        if not np.isfinite(rows).all():
            check_finite(rows)
        if X.dtype.kind == "f" and not np.isfinite(X).all():
            check_finite(X)
        return cls(X.shape[0], priority[order], ids[order], rows, int(size))

    def _merge_key(self) -> tuple[int, int]:
        return (self.rows.shape[1], self.size)

    def _merge(self, other: Self) -> Self:
        priority = np.concatenate([self.priority, other.priority])
        ids = np.concatenate([self.ids, other.ids])
        order = np.lexsort((ids, priority))[: self.size]
        rows = np.concatenate([self.rows, other.rows])[order]
        return type(self)(self.n_rows + other.n_rows, priority[order], ids[order], rows, self.size)

    @property
    def n_features(self) -> int:
        return self.rows.shape[1]

    @classmethod
    def value_nbytes(
        cls, n_features: int, n_classes: int = 1, *, size: int = 1, **options: Any
    ) -> int:
        """Memory estimate of one value: ``size`` rows and their ids and priorities."""
        return 8 * int(size) * (n_features + 2)

    @classmethod
    def block_nbytes(cls, n_rows: int, n_features: int, n_classes: int = 1, **options: Any) -> int:
        """Memory estimate of ``from_block``'s temporaries: the block's ids and priorities."""
        return 24 * n_rows

    def __repr__(self) -> str:
        return f"RowSample(size={self.size}, rows={self.rows.shape[0]} of {self.n_rows})"
