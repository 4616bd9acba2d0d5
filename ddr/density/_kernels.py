"""Smoothing kernels of kernel density estimation: values, normalisation in d dimensions,
sampling, and the exact log-sum of kernels between two sets of points.

The kernels are scikit-learn's (same names, same shapes) as functions of ``r = |u| / h``:

    gaussian      exp(-r^2 / 2)
    tophat        1                    for r < 1
    epanechnikov  1 - r^2              for r < 1
    exponential   exp(-r)
    linear        1 - r                for r < 1
    cosine        cos(pi r / 2)        for r < 1

normalised so that the density integrates to 1 in d dimensions. scikit-learn's normalisation
of the cosine kernel is wrong for even d >= 2 (it integrates to 0.36 in 2-D); ddr uses the
exact constant ``S_{d-1} int_0^1 r^(d-1) cos(pi r / 2) dr`` (tests check every kernel
integrates to 1).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from ddr.stats._centring import Centring
from ddr.stats._tiled import centred_product

__all__ = [
    "BINNED_KERNELS",
    "COMPACT_KERNELS",
    "KERNELS",
    "kernel_radius",
    "log_kernel",
    "log_kernel_norm",
    "log_kernel_sums",
    "sample_kernel",
]

KERNELS = ("gaussian", "tophat", "epanechnikov", "exponential", "linear", "cosine")
COMPACT_KERNELS = frozenset({"tophat", "epanechnikov", "linear", "cosine"})
#: Kernels whose binned estimate meets the documented bulk bound ``2 d (spacing / h)^2``
#: (measured in tests/test_kde.py); ``algorithm="auto"`` bins only these. The others are not
#: smooth (the tophat jumps; epanechnikov, linear and cosine have kinks at the edge of their
#: support, exponential at 0), which makes linear binning's error first order, within
#: ``spacing / h`` (measured on a normal sample: the tophat 0.4 of it, the others < 0.01).
BINNED_KERNELS = frozenset({"gaussian"})

# Beyond these radii (in bandwidths) a kernel is below exp(-40) ~ 4e-18 of its peak.
_TAIL_RADIUS = {"gaussian": np.sqrt(80.0), "exponential": 40.0}


def kernel_radius(kernel: str) -> float:
    """Radius (in bandwidths) outside which the kernel is zero or below exp(-40) of its peak."""
    return _TAIL_RADIUS.get(kernel, 1.0)


def log_kernel(kernel: str, r2: np.ndarray) -> np.ndarray:
    """Unnormalised log-kernel of squared scaled distances ``r2 = |u|^2 / h^2``.

    Compact kernels are ``-inf`` at ``r >= 1`` (scikit-learn's strict ``dist < h``).
    """
    r2 = np.asarray(r2, dtype=np.float64)
    if kernel == "gaussian":
        return -0.5 * r2
    if kernel == "exponential":
        return -np.sqrt(r2)
    inside = r2 < 1.0
    out = np.full(r2.shape, -np.inf)
    if kernel == "tophat":
        out[inside] = 0.0
    elif kernel == "epanechnikov":
        out[inside] = np.log1p(-r2[inside])
    elif kernel == "linear":
        out[inside] = np.log1p(-np.sqrt(r2[inside]))
    elif kernel == "cosine":
        out[inside] = np.log(np.cos(0.5 * np.pi * np.sqrt(r2[inside])))
    else:  # pragma: no cover - names are checked on entry
        raise ValueError(f"unknown kernel {kernel!r}")
    return out


def _log_sphere_surface(d: int) -> float:
    """log of the surface area of the unit sphere in R^d, ``2 pi^(d/2) / Gamma(d/2)``."""
    return np.log(2.0) + 0.5 * d * np.log(np.pi) - gammaln(0.5 * d)


def _log_unit_ball(d: int) -> float:
    return 0.5 * d * np.log(np.pi) - gammaln(0.5 * d + 1.0)


def _cosine_radial_integral(d: int) -> float:
    """``int_0^1 r^(d-1) cos(pi r / 2) dr`` by the exact recursion of integration by parts."""
    a = 0.5 * np.pi
    i_prev = 1.0 / a  # I_0 = sin(a)/a
    j_prev = 1.0 / a  # J_0 = (1 - cos(a))/a, with sin a = 1, cos a = 0
    for n in range(1, d):
        i_n = 1.0 / a - (n / a) * j_prev  # I_n = sin(a)/a - (n/a) J_{n-1}
        j_n = (n / a) * i_prev  # J_n = -cos(a)/a + (n/a) I_{n-1}
        i_prev, j_prev = i_n, j_n
    return i_prev


def log_kernel_norm(kernel: str, d: int) -> float:
    """log of the constant ``c`` with ``int c K(|u|) du = 1`` over R^d (bandwidth 1).

    For bandwidth ``h`` (scaled distances ``|u| / h``) subtract ``d log h``.
    """
    if kernel == "gaussian":
        return -0.5 * d * np.log(2.0 * np.pi)
    if kernel == "tophat":
        return -_log_unit_ball(d)
    if kernel == "epanechnikov":
        return -(_log_unit_ball(d) + np.log(2.0 / (d + 2.0)))
    if kernel == "exponential":
        return -(_log_sphere_surface(d) + gammaln(d))
    if kernel == "linear":
        return -(_log_unit_ball(d) - np.log(d + 1.0))
    if kernel == "cosine":
        return -(_log_sphere_surface(d) + np.log(_cosine_radial_integral(d)))
    raise ValueError(f"unknown kernel {kernel!r}")  # pragma: no cover


def sample_kernel(kernel: str, d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws from the normalised kernel density in R^d (bandwidth 1), shape (n, d).

    Radially symmetric: a uniform direction times a radius with density ``r^(d-1) K(r)``:
    Beta(d, 1) (tophat), sqrt(Beta(d/2, 2)) (epanechnikov), Gamma(d) (exponential),
    Beta(d, 2) (linear), and rejection from Beta(d, 1) with acceptance ``cos(pi r / 2)``
    (cosine).
    """
    if kernel == "gaussian":
        return rng.standard_normal((n, d))
    direction = rng.standard_normal((n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    if kernel == "tophat":
        r = rng.beta(d, 1.0, size=n)
    elif kernel == "epanechnikov":
        r = np.sqrt(rng.beta(0.5 * d, 2.0, size=n))
    elif kernel == "exponential":
        r = rng.gamma(d, 1.0, size=n)
    elif kernel == "linear":
        r = rng.beta(d, 2.0, size=n)
    elif kernel == "cosine":
        r = np.empty(n)
        filled = 0
        while filled < n:
            m = max(2 * (n - filled), 16)
            cand = rng.beta(d, 1.0, size=m)
            keep = cand[rng.uniform(size=m) < np.cos(0.5 * np.pi * cand)]
            take = min(keep.shape[0], n - filled)
            r[filled : filled + take] = keep[:take]
            filled += take
    else:  # pragma: no cover
        raise ValueError(f"unknown kernel {kernel!r}")
    return direction * r[:, None]


def _squared_distances(Q: np.ndarray, T: np.ndarray, qn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    """Squared distances by one GEMM, with close pairs (where the expansion cancels) exact."""
    d2 = qn[:, None] + tn[None, :]
    scale = d2.copy()
    d2 -= 2.0 * (Q @ T.T)
    # |q|^2 + |t|^2 - 2 q.t loses relative accuracy when q and t are close; recompute
    # those pairs directly (few: near-duplicates), so kernels of r (not r^2) stay exact.
    close = np.nonzero(d2 < 1e-4 * scale)
    if close[0].size:
        diff = Q[close[0]] - T[close[1]]
        d2[close] = np.einsum("ij,ij->i", diff, diff)
    np.maximum(d2, 0.0, out=d2)
    return d2


def _row_logsumexp(a: np.ndarray) -> np.ndarray:
    """Log-sum-exp of each row (in place on ``a``); ``-inf`` for rows of ``-inf``."""
    m = a.max(axis=1)
    shift = np.where(np.isfinite(m), m, 0.0)
    a -= shift[:, None]
    np.exp(a, out=a)
    return np.log(a.sum(axis=1)) + shift


def log_kernel_sums(
    Q: np.ndarray,
    T: np.ndarray,
    log_w: np.ndarray | None,
    kernel: str,
    h: float | np.ndarray,
    *,
    exclude: np.ndarray | None = None,
    t_offset: int = 0,
    tile: int = 2048,
    whiten: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """``log sum_i w_i K(|q - t_i| / h)`` for every query row (unnormalised kernel), exactly.

    Parameters
    ----------
    Q : ndarray of shape (n_queries, d)
    T : ndarray of shape (n_train, d)
        Points in the same (whitened, centred) coordinates as ``Q``.
    log_w : ndarray of shape (n_train,), optional
        Log-weights of the training points (0 if None).
    kernel : str
    h : float or ndarray of shape (n_bandwidths,)
        Bandwidth(s); with an array the result has one row per bandwidth (the distances are
        computed once and reused, as bandwidth cross-validation needs).
    exclude : ndarray of shape (n_queries,), optional
        Global training index to leave out for each query (leave-one-out); ``t_offset`` is
        the global index of ``T[0]``.
    tile : int
        Rows per tile in both sets (bounds the temporaries to tile^2 numbers).
    whiten : (center, W), optional
        The queries are the rows of ``Q`` mapped to ``W (q - center)`` (``T``'s coordinates),
        a tile at a time where the gaussian's sums take them so (no mapped copy of ``Q``).

    Returns
    -------
    ndarray of shape (n_queries,) or (n_bandwidths, n_queries)
        ``-inf`` where no training point is within a compact kernel's support.
    """
    T = np.asarray(T, dtype=np.float64)
    if kernel == "gaussian" and np.ndim(h) == 0 and exclude is None:
        return _gaussian_log_sums(np.asarray(Q), T, log_w, float(h), whiten)
    if whiten is not None:
        Q = centred_product(np.asarray(Q), whiten[1].T, shift=whiten[0])
    Q = np.asarray(Q, dtype=np.float64)
    hs = np.atleast_1d(np.asarray(h, dtype=np.float64))
    out = np.full((hs.shape[0], Q.shape[0]), -np.inf)
    qn_all = np.einsum("ij,ij->i", Q, Q)
    tn_all = np.einsum("ij,ij->i", T, T)
    with np.errstate(divide="ignore", invalid="ignore"):
        for q0 in range(0, Q.shape[0], tile):
            qs = slice(q0, q0 + tile)
            for t0 in range(0, T.shape[0], tile):
                ts = slice(t0, t0 + tile)
                d2 = _squared_distances(Q[qs], T[ts], qn_all[qs], tn_all[ts])
                mask = None
                if exclude is not None:
                    rows = np.flatnonzero(
                        (exclude[qs] >= t_offset + t0) & (exclude[qs] < t_offset + t0 + d2.shape[1])
                    )
                    mask = (rows, exclude[qs][rows] - t_offset - t0)
                for b, hb in enumerate(hs):
                    lk = log_kernel(kernel, d2 / (hb * hb))
                    if log_w is not None:
                        lk += log_w[ts][None, :]
                    if mask is not None:
                        lk[mask] = -np.inf
                    out[b, qs] = np.logaddexp(out[b, qs], _row_logsumexp(lk))
    return out[0] if np.ndim(h) == 0 else out


#: bytes of a (queries, training points) tile of the gaussian sums: it stays in a core's
#: cache from the GEMM that makes it to the sums that read it
_TILE_BYTES = 2**20


def _gaussian_log_sums(
    Q: np.ndarray,
    T: np.ndarray,
    log_w: np.ndarray | None,
    h: float,
    whiten: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """:func:`log_kernel_sums` of the gaussian kernel at one bandwidth, by tiles of pairs.

    The exponent ``-|q - t|^2 / (2 h^2) + log w_t`` of a tile comes out of one GEMM of the
    queries augmented with ``|q|^2`` and a column of ones against the training points
    augmented likewise (scaled by ``-1 / (2 h^2)``); it is clipped at ``log w_t`` (distances
    at 0) and summed by log-sum-exp in place, a tile small enough to stay in cache (the
    general path makes a dozen temporaries of 2048 x 2048 pairs). Pairs so close that the
    expansion of ``|q - t|^2`` cancels are not recomputed: an error ``eps (|q|^2 + |t|^2)``
    in a squared distance moves the gaussian's log by that over ``2 h^2`` (1e-13 for
    whitened data in 100 dimensions at a bandwidth of 0.5), where kernels of ``r`` itself
    would lose the relative accuracy of small ``r``; both sets are first moved to the
    training points' mean, so ``|q|`` and ``|t|`` are distances from it.
    """
    n = Q.shape[0]
    m, d = T.shape
    out = np.full(n, -np.inf)
    if n == 0 or m == 0:
        return out
    c = -0.5 / (h * h)
    # both sets about the training points' mean: the expansion of |q - t|^2 cancels only
    # the spread of the points, not their distance from the origin (1-D features of kernel
    # naive Bayes come in raw units, possibly at a large offset)
    ref = T.mean(axis=0)
    T = T - ref
    right = np.empty((d + 2, m))
    right[:d] = -2.0 * c * T.T
    right[d] = c
    right[d + 1] = c * np.einsum("ij,ij->i", T, T)
    # every exponent is at most max(log w): with it subtracted no exp overflows, and no
    # pass for each row's largest exponent is needed but where a sum underflows (a query far
    # from every point)
    lw = None if log_w is None else log_w - np.max(log_w)
    base = 0.0 if log_w is None else float(np.max(log_w))
    tt = min(m, 4096)
    # each query tile reads the whole (d + 2, tt) training tile again: on wide data at
    # least d / 8 query rows a tile keep the GEMM bound by arithmetic, not by that read
    # (10 000 x 4 000 pairs in 2 000 dims, one core: 3.1 s with tiles of 32 rows, 2.25 s,
    # the plain GEMM's time, with 250)
    tq = int(np.clip(max(_TILE_BYTES // (8 * tt), d // 8), 16, max(n, 16)))
    left = np.empty((min(tq, n), d + 2))
    left[:, d + 1] = 1.0
    E = np.empty((left.shape[0], tt))
    if whiten is not None:
        centre, Wt = Centring(whiten[0], left.shape[0]), np.ascontiguousarray(whiten[1].T)
    # where most queries are far from every point (wide data, whose whitened distances
    # dwarf a rule-of-thumb bandwidth) their sums underflow and each would take a second
    # GEMM: once that is seen, the tiles are summed about each row's largest exponent
    # (one more pass over the tile, no second GEMM)
    about_largest = False
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        for q0 in range(0, n, tq):
            qs = Q[q0 : q0 + tq]
            r = qs.shape[0]
            a = left[:r]
            if whiten is None:
                np.subtract(qs, ref, out=a[:, :d])
            else:
                np.matmul(centre(qs), Wt, out=a[:, :d])
                a[:, :d] -= ref
            np.einsum("ij,ij->i", a[:, :d], a[:, :d], out=a[:, d])
            for t0 in range(0, m, tt):
                ts = slice(t0, t0 + tt)
                e = E[:r, : right[:, ts].shape[1]]
                _exponents(a, right[:, ts], None if lw is None else lw[ts], out=e)
                if about_largest:
                    part = _row_logsumexp(e)
                else:
                    np.exp(e, out=e)
                    part = np.log(e.sum(axis=1))
                    tiny = np.flatnonzero(part < _LOG_TINY)  # subnormal terms: fewer digits
                    if tiny.size:  # far from every point: again, about the row's largest term
                        again = _exponents(a[tiny], right[:, ts], None if lw is None else lw[ts])
                        part[tiny] = _row_logsumexp(again)
                        about_largest = 4 * tiny.size > r
                np.logaddexp(out[q0 : q0 + r], part, out=out[q0 : q0 + r])
    return out + base


#: a row whose exponentials sum below exp(this) may hold subnormal terms: it is summed again
#: about its largest exponent
_LOG_TINY = float(np.log(1e-250))


def _exponents(
    left: np.ndarray, right: np.ndarray, log_w: np.ndarray | None, out: np.ndarray | None = None
) -> np.ndarray:
    """``min(left @ right, 0) + log_w``: the gaussian's exponents of a tile of pairs."""
    e = np.matmul(left, right, out=out)
    np.minimum(e, 0.0, out=e)  # the exponent of a distance clipped at 0
    if log_w is not None:
        e += log_w
    return e
