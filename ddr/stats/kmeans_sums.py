"""One Lloyd iteration of k-means as a mergeable statistic: assignments, counts, means, inertia.

Each row goes to its nearest centre (squared Euclidean distance; ties to the lowest index, as
scikit-learn's ``argmin``). The distances are computed as ``|c'|^2 - 2 y.c' + |y|^2`` on rows
and centres moved by the same shift, the mean of the block's first rows (``y = x - shift``,
``c' = c - shift``): expanded about the origin (``|c|^2 - 2 x.c``) they would cancel every
digit of data far from it. The shift depends on the rows only, so the cluster means are a
function of the rows and their labels alone: an assignment that repeats gives the same centres
to the last bit, and Lloyd's fixed point is seen as one. (The blockwise maps of
:class:`ddr.KMeans` shift by the centres' mean instead, which makes each row's distances the
same in every block.)

Per cluster the statistic keeps the count and the mean of its rows (merged as Chan's means)
and, on request, their centred scatter (full or per feature: the start of a Gaussian mixture
from k-means labels); over all rows the inertia (the sum of squared distances to the nearest
centre) and the ``n_clusters - 1`` rows farthest from their centre, with their labels: what
scikit-learn's Lloyd iteration moves into clusters left empty.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np
from sklearn.utils._param_validation import StrOptions

from ddr.stats._centring import Centring
from ddr.stats._checks import check_block, check_finite
from ddr.stats.base import FEATURE_DIM, CheckData, Statistic
from ddr.stats.class_moments import group_rows
from ddr.stats.moments import _centred_sums

__all__ = ["KMeansSums", "nearest_centres"]

#: rows per sub-block: about 1 MiB of float64 rows (and their k distances) stays in cache
_SUB_BLOCK_BYTES = 2**20


def _sub_block_rows(n_features: int, n_clusters: int) -> int:
    return int(np.clip(_SUB_BLOCK_BYTES // (8 * max(n_features + n_clusters, 1)), 64, 8192))


def nearest_centres(
    Y: np.ndarray, local: np.ndarray, local_sq: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, squared distances to the nearest centre, and all distances, of shifted rows.

    Parameters
    ----------
    Y : ndarray of shape (m, d)
        Rows minus the shift (float64).
    local : ndarray of shape (k, d)
        Centres minus the same shift.
    local_sq : ndarray of shape (k,)
        ``|local|^2`` per centre.

    Returns
    -------
    labels : ndarray of int64, shape (m,)
    nearest : ndarray of shape (m,)
        Squared distance to the nearest centre (at least 0).
    distances : ndarray of shape (m, k)
        Squared distances to every centre, less ``|y|^2`` (what the labels minimise).
    """
    D = Y @ local.T
    D *= -2.0
    D += local_sq
    labels = np.argmin(D, axis=1)
    nearest = D[np.arange(D.shape[0]), labels] + np.einsum("ij,ij->i", Y, Y)
    np.maximum(nearest, 0.0, out=nearest)
    return labels, nearest, D


def _top(dist: np.ndarray, m: int) -> np.ndarray:
    """Indices of the ``m`` largest of ``dist``, largest first (ties: first index first)."""
    if m <= 0 or dist.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    if dist.shape[0] > m:
        part = np.argpartition(-dist, m - 1)[:m]
    else:
        part = np.arange(dist.shape[0])
    return part[np.lexsort((part, -dist[part]))]


@dataclasses.dataclass(frozen=True, eq=False)
class KMeansSums(Statistic):
    """Counts, means and inertia of the rows assigned to their nearest centres.

    Parameters
    ----------
    n_rows : int
        Rows seen.
    inertia : float
        Sum of the squared distances of the rows to their nearest centre.
    counts : ndarray of shape (k,)
        Rows per cluster.
    means : ndarray of shape (k, d)
        Mean of each cluster's rows (the centre itself for a cluster without rows).
    scatter : ndarray of shape (k, d, d), (k, d) or (0,)
        Each cluster's centred scatter ``sum (x - mean)(x - mean)^T`` (``scatter="full"``),
        its diagonal (``"diag"``), or nothing.
    far_distance : ndarray of shape (m,)
        The largest squared distances to the nearest centre, decreasing, ``m <= k - 1``.
    far_rows : ndarray of shape (m, d)
        Those rows.
    far_labels : ndarray of int64, shape (m,)
        Their clusters.
    """

    n_rows: int
    inertia: float
    counts: np.ndarray
    means: np.ndarray
    scatter: np.ndarray
    far_distance: np.ndarray
    far_rows: np.ndarray
    far_labels: np.ndarray

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "centres": ["array-like"],
        "scatter": [StrOptions({"full", "diag"}), None],
    }
    readouts: ClassVar[tuple[str, ...]] = ("counts", "means", "inertia")
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "counts": ("cluster",),
        "means": ("cluster", FEATURE_DIM),
        "inertia": (),
    }
    readout_units: ClassVar[dict[str, int | None]] = {"counts": 0, "means": 1, "inertia": 2}
    _fields_as: ClassVar[dict[str, str]] = {
        "n_rows": "int", "inertia": "float", "counts": "float64", "means": "float64",
        "scatter": "float64", "far_distance": "float64", "far_rows": "float64",
        "far_labels": "int64",
    }  # fmt: skip
    _merge_mismatch = "cannot merge KMeansSums of {a} with KMeansSums of {b} (clusters, features)"

    @property
    def loglik(self) -> float:
        """``-inertia``: what Lloyd's iterations increase (for :func:`ddr.em.fit_em`)."""
        return -self.inertia

    @property
    def n_clusters(self) -> int:
        return self.means.shape[0]

    @property
    def n_features(self) -> int:
        return self.means.shape[1]

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        # rows of the kind this statistic takes (the base class's docstring says more)
        data = super().check_data(rng, n_rows)
        centres = data.X[[0, 5, 11, 17]] + 0.1
        return CheckData(data.X, options={"centres": centres, "scatter": "full"})

    @classmethod
    def empty(cls, centres: np.ndarray, scatter: str | None = None) -> Self:
        """No rows: the identity of :meth:`merge` for these centres.

        Parameters
        ----------
        centres : ndarray of shape (k, d)
        scatter : {"full", "diag"} or None

        Returns
        -------
        KMeansSums
        """
        centres = np.asarray(centres, dtype=np.float64)
        k, d = centres.shape
        shapes = {"full": (k, d, d), "diag": (k, d), None: (0,)}
        return cls(
            0,
            0.0,
            np.zeros(k),
            centres.copy(),
            np.zeros(shapes[scatter]),
            np.zeros(0),
            np.zeros((0, d)),
            np.zeros(0, dtype=np.int64),
        )

    @classmethod
    def from_block(  # type: ignore[override]  # its options are keywords, not **options
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        centres: np.ndarray,
        scatter: str | None = None,
    ) -> Self:
        """Assign the rows of one block to their nearest centres and sum them.

        Parameters
        ----------
        X : ndarray of shape (n_rows, d)
        y, sample_weight : not supported (must be None)
        centres : ndarray of shape (k, d)
            The current centres.
        scatter : {"full", "diag"} or None, default None
            Also each cluster's centred scatter (one more read of the block, in memory).

        Returns
        -------
        KMeansSums
        """
        X = check_block(X)
        if sample_weight is not None:
            raise ValueError("KMeansSums does not support sample_weight")
        centres = np.asarray(centres, dtype=np.float64)
        n, d = X.shape
        k = centres.shape[0]
        if centres.ndim != 2 or centres.shape[1] != d:
            raise ValueError(f"X has {d} features but the centres have shape {centres.shape}")
        if n == 0:
            return cls.empty(centres, scatter)
        # rows and centres move by the mean of the block's first rows: the means then depend
        # on the rows and their labels only, so an assignment that repeats gives the same
        # centres to the last bit (a fixed point is seen as one)
        with np.errstate(over="ignore", invalid="ignore"):
            shift = np.asarray(X[: min(n, 256)], dtype=np.float64).mean(axis=0)
        shift = np.where(np.isfinite(shift), shift, 0.0)  # non-finite input is reported below
        local = centres - shift
        local_sq = np.einsum("ij,ij->i", local, local)
        step = min(_sub_block_rows(d, k), n)
        centre = Centring(shift, step)
        counts = np.zeros(k)
        sums = np.zeros((k, d))
        inertia = 0.0
        n_far = k - 1
        far_d = np.zeros(0)
        far_x = np.zeros((0, d))
        far_l = np.zeros(0, dtype=np.int64)
        labels_all = np.empty(n, dtype=np.int64) if scatter is not None else None
        with np.errstate(over="ignore", invalid="ignore"):
            for start in range(0, n, step):
                Y = centre(X[start : start + step])
                m = Y.shape[0]
                labels, nearest, _ = nearest_centres(Y, local, local_sq)
                inertia += float(nearest.sum())
                counts += np.bincount(labels, minlength=k)
                H = np.zeros((k, m))
                H[labels, np.arange(m)] = 1.0
                sums += H @ Y
                if labels_all is not None:
                    labels_all[start : start + m] = labels
                if n_far:
                    top = _top(nearest, n_far)
                    cand_d = np.concatenate([far_d, nearest[top]])
                    cand_x = np.concatenate([far_x, np.asarray(X[start + top], dtype=np.float64)])
                    cand_l = np.concatenate([far_l, labels[top]])
                    keep = _top(cand_d, n_far)
                    far_d, far_x, far_l = cand_d[keep], cand_x[keep], cand_l[keep]
        if not (np.isfinite(inertia) and np.isfinite(sums).all()):
            check_finite(X)
            raise ValueError("X has values too large to accumulate in float64")
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts[:, None] > 0, shift + sums / counts[:, None], centres)
        out_scatter = np.zeros(0)
        if scatter is not None:
            assert labels_all is not None
            out_scatter = np.zeros((k, d, d) if scatter == "full" else (k, d))
            classes, order, slices = group_rows(labels_all)
            for c, s in zip(classes.tolist(), slices, strict=True):
                _, mean_c, scatter_c = _centred_sums(X, None, scatter == "diag", rows=order[s])
                out_scatter[c] = scatter_c
                means[c] = mean_c  # the same mean, from the rows centred on their own
        return cls(n, inertia, counts, means, out_scatter, far_d, far_x, far_l)

    def _merge_key(self) -> tuple[int, int, tuple[int, ...]]:
        return (self.n_clusters, self.n_features, self.scatter.shape)

    def _merge(self, other: Self) -> Self:
        na, nb = self.counts, other.counts
        n = na + nb
        with np.errstate(invalid="ignore", divide="ignore"):
            fb = np.where(n > 0, nb / np.where(n > 0, n, 1.0), 0.0)
            cross = np.where(n > 0, na * nb / np.where(n > 0, n, 1.0), 0.0)
        delta = other.means - self.means
        means = self.means + fb[:, None] * delta
        scatter = self.scatter + other.scatter
        if scatter.ndim == 3:
            scatter = scatter + cross[:, None, None] * delta[:, :, None] * delta[:, None, :]
        elif scatter.ndim == 2:
            scatter = scatter + cross[:, None] * delta * delta
        far_d = np.concatenate([self.far_distance, other.far_distance])
        keep = _top(far_d, self.n_clusters - 1)
        return type(self)(
            self.n_rows + other.n_rows,
            self.inertia + other.inertia,
            n,
            means,
            scatter,
            far_d[keep],
            np.concatenate([self.far_rows, other.far_rows])[keep],
            np.concatenate([self.far_labels, other.far_labels])[keep],
        )

    @classmethod
    def value_nbytes(
        cls,
        n_features: int,
        n_classes: int = 1,
        *,
        centres: Any = None,
        scatter: str | None = None,
        **options: Any,
    ) -> int:
        """Memory estimate of one value: means and the farthest rows (and the scatter)."""
        k = 1 if centres is None else int(np.shape(centres)[0])
        d = n_features
        per = {"full": d * d, "diag": d, None: 0}[scatter]
        return 8 * (2 * k * (d + 2) + k * per)

    @classmethod
    def block_nbytes(
        cls,
        n_rows: int,
        n_features: int,
        n_classes: int = 1,
        *,
        centres: Any = None,
        scatter: str | None = None,
        **options: Any,
    ) -> int:
        """Memory estimate of ``from_block``'s temporaries: the shifted sub-block, its
        distances and assignment matrix (and, with ``scatter``, the block's labels and
        order)."""
        k = 1 if centres is None else int(np.shape(centres)[0])
        step = min(n_rows, _sub_block_rows(n_features, k))
        extra = 24 * n_rows if scatter is not None else 0
        return 8 * step * (n_features + 3 * k + 2) + extra

    def __repr__(self) -> str:
        return f"KMeansSums(n_clusters={self.n_clusters}, n_rows={self.n_rows})"
