"""Nystrom feature maps computed out-of-core: landmarks, the K_LL eigensystem, blockwise maps.

With m landmark rows L, the Nystrom map is

    phi(x) = k(x, L) U_r S_r^{-1/2}        (r <= m columns)

where ``K_LL = U S U^T`` and only the eigenvalues above a rank tolerance are kept, so that
``phi(x)^T phi(y) = k(x, L) K_LL^+ k(L, y)``: the kernel is exact between any point and a
landmark, and approximated elsewhere. With every row a landmark the map reproduces the kernel
on the data exactly, which is why Nystrom kernel PCA with ``m = n`` equals exact kernel PCA.

Everything that touches the data is blockwise:

- :func:`sample_rows` (:func:`lazy_rows`, lazily) reads only the rows it needs (for dask
  input, only the chunks that hold them: at most one pass, counted as one);
- :class:`NystromMoments` is the :class:`~ddr.stats.Moments` of the mapped rows, computed per
  row block in sub-blocks so the (rows x m) kernel block stays a few MiB;
- :func:`kernel_scores` evaluates ``k(X, C) @ coef - offset`` in sub-blocks (projections of
  new data, pre-images), a module-level function that dask ships to the workers.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, Literal, Self

import dask
import numpy as np
from scipy.linalg import eigh

from ddr.linalg.kernels import KernelNotPSDWarning, KernelSpec, pairwise_kernel
from ddr.stats._checks import check_block, check_finite, check_weights
from ddr.stats._input import is_dask
from ddr.stats.moments import Moments

__all__ = [
    "NystromMap",
    "NystromMoments",
    "clip_psd_eigenvalues",
    "fit_nystrom",
    "kernel_scores",
    "lazy_rows",
    "sample_rows",
    "select_landmarks",
]

LandmarkMethod = Literal["uniform", "kmeans++"]
LANDMARK_METHODS = ("uniform", "kmeans++")

#: Eigenvalues below ``max * n * eps`` are numerically zero (the matrix_rank rule).
_EPS = np.finfo(np.float64).eps
#: A negative eigenvalue below ``-_NEG_RATIO * max`` is a real failure of positive
#: semi-definiteness, not rounding; it is clipped with a warning.
_NEG_RATIO = 1e-8
#: The (rows x m) kernel sub-block held at once, in float64 entries (32 MiB).
_SUBBLOCK_ENTRIES = 4 * 2**20


def _sub_rows(width: int) -> int:
    return int(np.clip(_SUBBLOCK_ENTRIES // max(width, 1), 64, 16384))


# --------------------------------------------------------------------------- sampling
def lazy_rows(X: Any, indices: np.ndarray) -> tuple[Any, Callable[[Any], np.ndarray]]:
    """The rows ``X[indices]`` to compute, and what turns the computed value into them.

    Parameters
    ----------
    X : ndarray or dask.array.Array of shape (n_samples, n_features)
    indices : ndarray of int, unique
        In any order: the rows come back in this order.

    Returns
    -------
    selection : dask Delayed or ndarray
        For dask input, the selected rows in row order, lazy: computing it reads only the
        chunks that hold them, each at most once, and its chunk tasks are not fused, so a
        ``dask.compute`` that also computes other work over X shares their reads.
    finish : callable
        Maps the computed selection to float64 rows in the order of ``indices`` (raising
        ValueError for non-finite values).
    """
    indices = np.asarray(indices)
    order = np.argsort(indices, kind="stable")
    if is_dask(X):
        parts = X[indices[order]].to_delayed(optimize_graph=False).ravel().tolist()
        selection = dask.delayed(np.concatenate, pure=True)(parts, axis=0)
    else:
        selection = np.asarray(X)[indices[order]]
    back = np.argsort(order, kind="stable")

    def finish(value: Any) -> np.ndarray:
        rows = np.asarray(value, dtype=np.float64)[back]
        if not np.isfinite(rows).all():
            check_finite(rows, hint=" (in the rows sampled as landmarks)")
        return rows

    return selection, finish


def sample_rows(X: Any, indices: np.ndarray) -> np.ndarray:
    """Read rows ``X[indices]`` as float64 numpy, only the chunks that hold them.

    Parameters
    ----------
    X : ndarray or dask.array.Array of shape (n_samples, n_features)
        The data.
    indices : ndarray of int, unique
        In any order: the rows come back in this order.

    Returns
    -------
    ndarray of shape (len(indices), n_features)
        For dask input the selection is computed under the active scheduler; dask reads only
        the chunks that contain a selected row (:func:`lazy_rows`).
    """
    selection, finish = lazy_rows(X, indices)
    (value,) = dask.compute(selection)
    return finish(value)


def select_landmarks(
    X: Any,
    n_landmarks: int,
    method: LandmarkMethod,
    random_state: np.random.Generator,
    *,
    sample_size: int | None = None,
) -> np.ndarray:
    """Choose m landmark rows without loading the data.

    Parameters
    ----------
    X : ndarray or dask.array.Array of shape (n_samples, n_features)
    n_landmarks : int
        m, at most n_samples.
    method : {"uniform", "kmeans++"}
        ``uniform``: m rows drawn without replacement (Kumar, Mohri and Talwalkar, 2012, find
        it competitive). ``kmeans++``: k-means++ seeding (Arthur and Vassilvitskii, 2007) on a
        uniform sample of ``sample_size`` rows (default ``min(n, max(5 m, 1000))``): spreads
        the landmarks over the data, which helps when it is clustered (Zhang, Tsang and Kwok,
        2008).
    random_state : numpy Generator
        Draws the rows.
    sample_size : int, optional
        Rows of the uniform sample ``kmeans++`` seeds from (see ``method``).

    Returns
    -------
    ndarray of shape (m, n_features), float64
        The landmarks, in row order for ``uniform``, in seeding order for ``kmeans++``.
    """
    n = X.shape[0]
    if method == "uniform":
        idx = np.sort(random_state.choice(n, size=n_landmarks, replace=False))
        return sample_rows(X, idx)
    if method == "kmeans++":
        from sklearn.cluster import kmeans_plusplus

        s = n if sample_size is None else int(sample_size)
        s = min(n, max(5 * n_landmarks, 1000) if sample_size is None else s)
        s = max(s, n_landmarks)
        idx = np.sort(random_state.choice(n, size=s, replace=False))
        sample = sample_rows(X, idx)
        seed = int(random_state.integers(2**31 - 1))
        # seeding compares squared distances (expanded: |x|^2 + |c|^2 - 2 x.c); centred rows
        # keep them exact when the data sit on a large offset
        _, chosen = kmeans_plusplus(sample - sample.mean(axis=0), n_landmarks, random_state=seed)
        return sample[chosen]
    raise ValueError(f"landmarks must be one of {LANDMARK_METHODS}; got {method!r}")


# ------------------------------------------------------------------ eigensystems
def clip_psd_eigenvalues(
    eigenvalues: np.ndarray,
    *,
    size: int,
    kernel: KernelSpec,
    what: str,
    smallest: float | None = None,
    stacklevel: int = 2,
) -> tuple[np.ndarray, np.ndarray]:
    """Clip an eigenvalue spectrum of a kernel matrix to its numerically positive part.

    Parameters
    ----------
    eigenvalues : ndarray
        Eigenvalues (any order).
    size : int
        Order of the matrix (sets the rank tolerance ``max * size * eps``).
    kernel : KernelSpec
        For the warning message; kernels that are not PSD by construction are checked.
    what : str
        The matrix, for the message (e.g. "the landmark kernel matrix K_LL").
    smallest : float, optional
        The smallest eigenvalue when ``eigenvalues`` is only a subset of the spectrum.
    stacklevel : int
        Of the warning, so that it points at the caller's code.

    Returns
    -------
    clipped : ndarray
        Eigenvalues with negatives and numerically zero values set to 0.
    keep : ndarray of bool
        Which eigenvalues are positive after clipping.
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    top = float(lam.max()) if lam.size else 0.0
    low = float(lam.min()) if smallest is None else min(float(smallest), float(lam.min()))
    if top <= 0:
        why = (
            "the rows are identical in the kernel's feature space (constant data?)"
            if top > -np.finfo(np.float64).tiny or low == top == 0
            else "the kernel is not positive semi-definite on these data"
        )
        raise ValueError(
            f"{what} has no positive eigenvalue (largest {top:.3g}) for kernel "
            f"{kernel.name!r}: {why}"
        )
    if low < -_NEG_RATIO * top:
        count = (
            ""
            if smallest is not None
            else (f"; {int((lam < -_NEG_RATIO * top).sum())} of {lam.size} eigenvalues")
        )
        warnings.warn(
            f"kernel {kernel.name!r} is not positive semi-definite: {what} has negative "
            f"eigenvalues (smallest {low:.3g}, {-low / top:.2g} of the largest{count}). They "
            "were clipped to zero, i.e. the fit uses the nearest positive semi-definite kernel "
            "matrix.",
            KernelNotPSDWarning,
            stacklevel=stacklevel,
        )
    tol = top * max(size, 1) * _EPS
    clipped = np.where(lam > tol, lam, 0.0)
    return clipped, clipped > 0


@dataclasses.dataclass(frozen=True, eq=False)
class NystromMap:
    """The Nystrom feature map ``phi(x) = k(x, L) @ normalization``.

    Parameters
    ----------
    landmarks : ndarray of shape (m, n_features)
    normalization : ndarray of shape (m, r)
        ``U_r S_r^{-1/2}`` from the kept part of the eigensystem of K_LL.
    eigenvalues : ndarray of shape (r,)
        The kept eigenvalues of K_LL, descending.
    kernel : KernelSpec
    """

    landmarks: np.ndarray
    normalization: np.ndarray
    eigenvalues: np.ndarray
    kernel: KernelSpec

    @property
    def n_features_out(self) -> int:
        return self.normalization.shape[1]

    def symmetric(self) -> NystromMap:
        """Return the same map in the landmarks' basis: ``k(x, L) K_LL^{+1/2}``.

        One column per landmark (scikit-learn's Nystroem features), ``normalization``
        ``U_r S_r^{-1/2} U_r^T``. Inner products of the features are unchanged (a rotation).

        Returns
        -------
        NystromMap
            The rotated map.
        """
        U = self.normalization * np.sqrt(self.eigenvalues)
        return NystromMap(self.landmarks, self.normalization @ U.T, self.eigenvalues, self.kernel)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Map rows to their Nystrom features ``phi(X)``, in float64 (sub-blocked).

        Parameters
        ----------
        X : ndarray of shape (n, n_features)
            Rows in memory.

        Returns
        -------
        ndarray of shape (n, r)
            Their features.
        """
        return kernel_scores(X, self.landmarks, self.normalization, None, self.kernel)

    def __dask_tokenize__(self) -> Any:
        from dask.base import tokenize

        return ("NystromMap", tokenize(self.landmarks, self.normalization, self.kernel))


def fit_nystrom(landmarks: np.ndarray, kernel: KernelSpec, *, stacklevel: int = 2) -> NystromMap:
    """Eigendecompose K_LL, clip its tiny and negative eigenvalues, and build the map.

    Eigenvalues at or below ``max * m * eps`` are dropped (their directions carry no
    information the arithmetic can resolve, and ``S^{-1/2}`` would amplify rounding). A
    kernel that is not PSD on the landmarks gets a
    :class:`~ddr.linalg.kernels.KernelNotPSDWarning`.

    Parameters
    ----------
    landmarks : ndarray of shape (m, n_features)
        The landmark rows.
    kernel : KernelSpec
        The kernel, from :func:`~ddr.linalg.kernels.make_kernel`.
    stacklevel : int, default 2
        Of the warning, so that it points at the caller's caller.

    Returns
    -------
    NystromMap
        The feature map.
    """
    L = np.ascontiguousarray(landmarks, dtype=np.float64)
    K = pairwise_kernel(L, None, kernel)
    K = 0.5 * (K + K.T)  # exact symmetry for eigh; callables may round asymmetrically
    s, U = eigh(K, driver="evd")
    s, U = s[::-1], U[:, ::-1]
    clipped, keep = clip_psd_eigenvalues(
        s,
        size=L.shape[0],
        kernel=kernel,
        what="the landmark kernel matrix K_LL",
        stacklevel=stacklevel + 1,
    )
    s_kept = clipped[keep]
    norm = U[:, keep] / np.sqrt(s_kept)
    return NystromMap(L, np.ascontiguousarray(norm), s_kept, kernel)


# ----------------------------------------------------------------- blockwise maps
def kernel_scores(
    X: np.ndarray,
    centres: np.ndarray,
    coef: np.ndarray,
    offset: np.ndarray | None,
    kernel: KernelSpec,
    row_mean_coef: np.ndarray | None = None,
) -> np.ndarray:
    """``k(X, C) @ coef - offset [- rowmean(k(X, C)) * row_mean_coef]`` in sub-blocks.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        One row block (any float dtype; the kernel is evaluated in float64).
    centres : ndarray of shape (m, n_features)
    coef : ndarray of shape (m, k)
    offset : ndarray of shape (k,) or None
    kernel : KernelSpec
    row_mean_coef : ndarray of shape (k,), optional
        For kernel centring against the training rows (exact kernel PCA): subtracts the row
        mean of the kernel block times this vector.

    Returns
    -------
    ndarray of shape (n, k), float64
    """
    X = check_block(X)
    n = X.shape[0]
    out = np.empty((n, coef.shape[1]), dtype=np.float64)
    step = _sub_rows(centres.shape[0])
    for start in range(0, n, step):
        xs = np.asarray(X[start : start + step], dtype=np.float64)
        if not np.isfinite(xs).all():
            check_finite(xs)
        K = pairwise_kernel(xs, centres, kernel)
        res = K @ coef
        if row_mean_coef is not None:
            res -= K.mean(axis=1)[:, None] * row_mean_coef[None, :]
        if offset is not None:
            res -= offset
        out[start : start + xs.shape[0]] = res
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class NystromMoments(Moments):
    """:class:`~ddr.stats.Moments` of the Nystrom features ``phi(x)`` of the rows.

    ``from_block`` maps the block in sub-blocks and merges their moments (Chan update), so the
    (rows x m) kernel block is never held whole. Merge and read-outs are those of Moments:
    ``covariance()`` is the covariance of the mapped features, whose eigensystem is the
    centred kernel PCA of the approximate kernel.

    Parameters
    ----------
    count, mean, scatter, n_rows
        As for :class:`~ddr.stats.Moments`, of the mapped features.
    """

    @classmethod
    def from_block(  # type: ignore[override]
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        feature_map: NystromMap,
    ) -> Self:
        """Moments of ``feature_map.transform(X)``, computed in sub-blocks of rows.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
        y : ignored
        sample_weight : ndarray of shape (n_rows,), optional
        feature_map : NystromMap
        """
        X = check_block(X)
        w = check_weights(sample_weight, X.shape[0])
        r = feature_map.n_features_out
        acc = Moments.empty(r)
        step = _sub_rows(max(feature_map.landmarks.shape[0], r))
        for start in range(0, X.shape[0], step):
            phi = feature_map.transform(X[start : start + step])
            ws = None if w is None else w[start : start + step]
            acc = acc.merge(Moments.from_block(phi, sample_weight=ws))
        return cls(acc.count, acc.mean, acc.scatter, X.shape[0])
