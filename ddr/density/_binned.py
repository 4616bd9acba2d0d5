"""Binned kernel density estimation: linear binning on a dyadic lattice, convolution with the
kernel by FFT, interpolation at the queries, and exact sums in the tails.

The data are replaced by weights on a lattice (linear binning: a point between two lattice
points splits its weight in proportion to its distance; bilinear in 2-D), which preserves the
total weight and the mean of every cell pair, so the binning error of a smooth kernel estimate
is O((delta / h)^2) for lattice spacing ``delta`` and bandwidth ``h``. The sums
``f(g) = sum_g' c_g' K(|W (x_g - x_g')| / h)`` at every lattice point are one FFT convolution;
at a query the density is interpolated linearly (bilinearly) between the lattice points
around it, another O((delta / h)^2) relative error.

Where the FFT result cannot be trusted relatively (below 1e-8 of its maximum, where FFT
round-off dominates: the tails) and outside the lattice, the query is evaluated directly as
a log-sum-exp over the non-empty lattice points, so log-densities stay accurate far into the
tails (classification in naive Bayes compares tails).

:class:`LatticeHistogram` is the one-pass statistic (1-D or 2-D, unlabelled) on the same
mergeable dyadic lattice as :class:`ddr.stats.Histogram` (which bins each feature separately
and is used for 1-D per-class estimates).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Self

import numpy as np
from scipy.signal import fftconvolve

from ddr.density._kernels import log_kernel, log_kernel_sums
from ddr.stats._checks import check_block, check_finite, check_weights
from ddr.stats.base import Statistic
from ddr.stats.histogram import _coarsen, _refine, lattice_exponent, union_exponent

__all__ = [
    "LatticeHistogram",
    "binned_log_sums",
    "grid_sums",
    "lattice_tail",
    "loo_grid_scores",
]

_EMPTY = -(1 << 20)
_MIN_EXPONENT = -1000
#: below this fraction of the largest lattice sum, FFT round-off may dominate: sum directly
RELIABLE = 1e-8


def _coarsen_axis(counts: np.ndarray, start: int, steps: int, axis: int) -> tuple[np.ndarray, int]:
    moved = np.moveaxis(counts, axis, -1)
    shape = moved.shape
    flat, new_start = _coarsen(moved.reshape(-1, shape[-1]), start, steps)
    return np.moveaxis(flat.reshape(shape), -1, axis), new_start


def _extent_axis(counts: np.ndarray, axis: int) -> int:
    other = tuple(a for a in range(counts.ndim) if a != axis)
    nz = np.flatnonzero(counts.any(axis=other) if other else counts != 0)
    return int(nz[-1]) + 1 if nz.size else 0


@dataclasses.dataclass(frozen=True, eq=False)
class LatticeHistogram(Statistic):
    """Multilinearly binned weights of 1-D or 2-D rows on a dyadic lattice.

    Parameters
    ----------
    counts : ndarray of shape (n_bins,) * n_features
        Weight at lattice point ``((start[a] + i_a) * 2**exponent[a])_a``.
    start : ndarray of shape (n_features,)
    exponent : ndarray of shape (n_features,)
        Spacing ``2**exponent[a]`` along axis ``a``; merging coarsens by exact halving.
    lo, hi : ndarray of shape (n_features,)
        The range of the data binned: it alone fixes the spacing (as for
        :class:`ddr.stats.Histogram`), so chunking does not change the lattice.
    """

    counts: np.ndarray
    start: np.ndarray
    exponent: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: Any = None,
        sample_weight: np.ndarray | None = None,
        *,
        n_bins: int = 256,
    ) -> Self:
        X = check_block(X)
        n, d = X.shape
        if d not in (1, 2):
            raise ValueError(f"LatticeHistogram bins 1-D or 2-D rows; got {d} features")
        if n_bins < 16:
            raise ValueError(f"n_bins must be at least 16; got {n_bins}")
        if X.dtype.kind == "f" and not np.isfinite(X).all():
            check_finite(X, hint="; kernel density estimation needs finite values")
        w = check_weights(sample_weight, n)
        if n == 0:
            return cls.empty(d, n_bins)
        Xf = np.asarray(X, dtype=np.float64)
        lo, hi = Xf.min(axis=0), Xf.max(axis=0)
        exponent = np.array([lattice_exponent(lo[a], hi[a], n_bins) for a in range(d)])
        t = np.ldexp(Xf, -exponent)
        g = np.floor(t)
        frac = t - g
        start = np.floor(np.ldexp(lo, -exponent)).astype(np.int64)
        idx = g.astype(np.int64) - start
        counts = np.zeros(n_bins**d)
        for bits in itertools.product((0, 1), repeat=d):
            b = np.array(bits)
            weight = np.prod(np.where(b, frac, 1.0 - frac), axis=1)
            if w is not None:
                weight = weight * w
            flat = np.ravel_multi_index(tuple((idx + b).T), (n_bins,) * d)
            counts += np.bincount(flat, weight, n_bins**d)
        return cls(counts.reshape((n_bins,) * d), start, exponent, lo, hi)

    @classmethod
    def empty(cls, n_features: int, n_bins: int = 256) -> Self:
        d = n_features
        return cls(
            np.zeros((n_bins,) * d),
            np.zeros(d, np.int64),
            np.full(d, _EMPTY, dtype=np.int64),
            np.full(d, np.inf),
            np.full(d, -np.inf),
        )

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", np.asarray(self.counts, dtype=np.float64))
        object.__setattr__(self, "start", np.asarray(self.start, dtype=np.int64))
        object.__setattr__(self, "exponent", np.asarray(self.exponent, dtype=np.int64))
        object.__setattr__(self, "lo", np.asarray(self.lo, dtype=np.float64))
        object.__setattr__(self, "hi", np.asarray(self.hi, dtype=np.float64))

    @property
    def n_features(self) -> int:
        return self.counts.ndim

    @property
    def n_bins(self) -> int:
        return self.counts.shape[0]

    def merge(self, other: Self) -> Self:
        if not isinstance(other, LatticeHistogram):
            raise TypeError(f"cannot merge LatticeHistogram with {type(other).__name__}")
        if self.counts.shape != other.counts.shape:
            raise ValueError(
                f"cannot merge LatticeHistograms of shapes {self.counts.shape} and "
                f"{other.counts.shape}"
            )
        parts = [h for h in (self, other) if (h.exponent != _EMPTY).all()]
        if len(parts) < 2:
            return parts[0] if parts else self
        B, d = self.n_bins, self.n_features
        state = [[h.counts, h.start.copy(), h.exponent.copy()] for h in parts]
        for a in range(d):
            e = union_exponent([(h.lo[a], h.hi[a], int(h.exponent[a])) for h in parts], B)
            for s in state:
                if s[2][a] > e:  # a single value along this axis, binned at its resolution
                    s[1][a] = _refine(int(s[1][a]), int(s[2][a] - e))
                else:
                    s[0], s[1][a] = _coarsen_axis(s[0], int(s[1][a]), int(e - s[2][a]), a)
                s[2][a] = e
        start = np.array([min(s[1][a] for s in state) for a in range(d)], dtype=np.int64)
        counts = np.zeros((B,) * d)
        for c, s0, _ in state:
            used = tuple(_extent_axis(c, a) for a in range(d))
            dst = tuple(
                slice(int(s0[a] - start[a]), int(s0[a] - start[a]) + used[a]) for a in range(d)
            )
            counts[dst] += c[tuple(slice(0, u) for u in used)]
        lo = np.minimum(parts[0].lo, parts[1].lo)
        hi = np.maximum(parts[0].hi, parts[1].hi)
        return type(self)(counts, start, state[0][2], lo, hi)

    @property
    def spacing(self) -> np.ndarray:
        return np.ldexp(1.0, self.exponent)

    @property
    def origin(self) -> np.ndarray:
        return np.ldexp(self.start.astype(np.float64), self.exponent)

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "counts": self.counts,
            "start": self.start,
            "exponent": self.exponent,
            "lo": self.lo,
            "hi": self.hi,
        }

    def _scalars(self) -> dict[str, Any]:
        return {}


# ------------------------------------------------------------------------ evaluation
def _offset_kernel(
    kernel: str, spacing: np.ndarray, shape: tuple[int, ...], W: np.ndarray, h: float
) -> np.ndarray:
    """Unnormalised kernel at every lattice offset, shape (2 n_a - 1)_a."""
    axes = [np.arange(-(n - 1), n) * spacing[a] for a, n in enumerate(shape)]
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    z = mesh @ W.T
    r2 = np.einsum("...i,...i->...", z, z) / (h * h)
    return np.exp(log_kernel(kernel, r2))


def grid_sums(
    counts: np.ndarray, spacing: np.ndarray, W: np.ndarray, h: float, kernel: str
) -> np.ndarray:
    """``f(g) = sum_g' c_g' K(|W (x_g - x_g')| / h)`` at every lattice point, by FFT.

    Parameters
    ----------
    counts : ndarray of shape (n_bins,) * d
    spacing : ndarray of shape (d,)
    W : ndarray of shape (d, d)
        Whitening: scaled distance ``|W u| / h``.
    h : float
    kernel : str

    Returns
    -------
    ndarray of shape (n_bins,) * d, non-negative
    """
    kern = _offset_kernel(kernel, spacing, counts.shape, W, h)
    full = fftconvolve(counts, kern, mode="full")
    sl = tuple(slice(n - 1, 2 * n - 1) for n in counts.shape)
    return np.maximum(full[sl], 0.0)


def _lattice_points(counts: np.ndarray, origin: np.ndarray, spacing: np.ndarray):
    nz = np.nonzero(counts)
    points = origin + np.stack(nz, axis=1) * spacing
    return points, np.log(counts[nz])


def lattice_tail(
    counts: np.ndarray, origin: np.ndarray, spacing: np.ndarray, W: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The non-empty lattice points in the kernel's whitened coordinates and their log
    weights: what :func:`binned_log_sums` sums directly for the queries where the lattice
    sums are not reliable. Made once per fitted lattice (finding them scans the whole
    lattice: 25 ms for 1024 x 1024), not once per block.

    Returns
    -------
    points : ndarray of shape (n_nonempty, d)
    log_counts : ndarray of shape (n_nonempty,)
    """
    points, log_c = _lattice_points(counts, origin, spacing)
    return points @ W.T, log_c


def binned_log_sums(
    Xq: np.ndarray,
    counts: np.ndarray | None,
    f_grid: np.ndarray,
    origin: np.ndarray,
    spacing: np.ndarray,
    W: np.ndarray,
    h: float,
    kernel: str,
    tail: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """``log sum_g c_g K(|W (x - x_g)| / h)`` at each query row (unnormalised), binned.

    Interpolates ``f_grid`` (from :func:`grid_sums`) where every surrounding lattice sum is
    reliable; sums over the non-empty lattice points directly elsewhere (tails, outside):
    ``tail`` (:func:`lattice_tail`), or found here from ``counts`` when None (``counts`` is
    not needed otherwise: a block's task need not carry the lattice's weights).

    Returns
    -------
    ndarray of shape (n_queries,)
    """
    Xq = np.asarray(Xq, dtype=np.float64)
    m, d = Xq.shape
    shape = f_grid.shape
    # one contiguous row per axis: numpy reduces the short axis of an (m, d) array row by
    # row, and indexes a lattice with d index arrays; here the corners' weights are products
    # of whole columns and their sums one gather each from the flat lattice
    t = ((Xq - origin) / spacing).T.copy()
    inside = np.ones(m, dtype=bool)
    flat = np.zeros(m, dtype=np.int64)
    frac, comp = [], []
    strides = [int(np.prod(shape[a + 1 :])) for a in range(d)]  # of the C-ordered lattice
    for a in range(d):
        inside &= (t[a] >= 0) & (t[a] <= shape[a] - 1)
        i0 = np.clip(np.floor(t[a]), 0, shape[a] - 2).astype(np.int64)
        flat += i0 * strides[a]
        f = np.clip(t[a] - i0, 0.0, 1.0)
        frac.append(f)
        comp.append(1.0 - f)
    value = np.zeros(m)
    reliable = inside
    floor = RELIABLE * f_grid.max() if f_grid.size else 0.0
    f_flat = np.ravel(f_grid)
    for bits in itertools.product((0, 1), repeat=d):
        fc = np.take(f_flat, flat + sum(b * k for b, k in zip(bits, strides, strict=True)))
        reliable &= fc > floor
        weight = frac[0] if bits[0] else comp[0]
        for a in range(1, d):
            weight = weight * (frac[a] if bits[a] else comp[a])
        value += weight * fc
    out = np.empty(m)
    with np.errstate(divide="ignore"):
        out[reliable] = np.log(value[reliable])
    rest = np.flatnonzero(~reliable)
    if rest.size:
        if tail is None:
            if counts is None:
                raise ValueError("binned_log_sums needs the lattice counts or its tail points")
            tail = lattice_tail(counts, origin, spacing, W)
        points, log_c = tail
        out[rest] = log_kernel_sums(Xq[rest] @ W.T, points, log_c, kernel, h)
    return out


def self_kernel(spacing: np.ndarray, W: np.ndarray, h: float, kernel: str) -> float:
    """Mean kernel value between a lattice point and its upper neighbours (one per axis
    direction and the diagonal): where the other shares of a linearly binned point sit."""
    d = spacing.shape[0]
    offsets = [np.array(b) * spacing for b in itertools.product((0, 1), repeat=d) if any(b)]
    z = np.stack(offsets) @ W.T
    return float(np.mean(np.exp(log_kernel(kernel, np.einsum("ij,ij->i", z, z) / (h * h)))))


def loo_grid_scores(
    counts: np.ndarray,
    f_grid: np.ndarray,
    unit_weight: float,
    neighbour_kernel: float,
    origin: np.ndarray,
    spacing: np.ndarray,
    W: np.ndarray,
    h: float,
    kernel: str,
) -> float:
    """Binned leave-one-out log-likelihood sum, unnormalised: ``sum_g c_g log(f_g - s_g)``.

    Each lattice weight is treated as points of weight ``unit_weight``; removing one removes
    its own contribution to ``f_g``: its share at ``g`` (``m = min(c_g, unit_weight)``) times
    ``K(0) = 1``, and its shares at the neighbouring lattice points,
    ``(unit_weight - m) * neighbour_kernel`` (:func:`self_kernel`). Where that remainder is
    too small for the FFT sums to resolve (isolated points in the tails), the others'
    contribution is summed directly in log space over the lattice points beyond the point's
    own cell. An approximation of the exact leave-one-out score, good for bandwidths of a
    few lattice spacings or more; ``-inf`` if some weight has no other point within a
    compact kernel.
    """
    used = counts > 0
    m = np.minimum(counts[used], unit_weight)
    rest = f_grid[used] - m - (unit_weight - m) * neighbour_kernel
    ok = rest > RELIABLE * f_grid.max()
    with np.errstate(divide="ignore"):
        total = float(np.sum(counts[used][ok] * np.log(rest[ok])))
    if ok.all():
        return total
    idx = np.stack(np.nonzero(used), axis=1)
    weak, others = idx[~ok], idx
    log_c = np.log(counts[used])
    Zw = (origin + weak * spacing) @ W.T
    Zo = (origin + others * spacing) @ W.T
    for start in range(0, weak.shape[0], 256):
        q = slice(start, start + 256)
        d2 = np.sum((Zw[q, None, :] - Zo[None, :, :]) ** 2, axis=-1) / (h * h)
        lk = log_kernel(kernel, d2) + log_c[None, :]
        near = np.max(np.abs(weak[q, None, :] - others[None, :, :]), axis=-1) <= 1
        lk[near] = -np.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            lse = np.logaddexp.reduce(lk, axis=1)
        total += float(np.sum(counts[used][~ok][q] * lse))
    return total
