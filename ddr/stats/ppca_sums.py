"""The E-step sums of probabilistic PCA, with missing values handled exactly, mergeable.

Model (Tipping and Bishop, 1999): ``x = W z + mu + e``, ``z ~ N(0, I_q)``, ``e ~ N(0, s2 I_d)``.
For a row with observed features O (NaN marks the others), the posterior of ``z`` given the
observed entries only is Gaussian with

    M = s2 I + W_O^T W_O,   E[z] = M^{-1} W_O^T (x_O - mu_O),   Cov[z] = s2 M^{-1},

and the marginal log-likelihood of the observed entries is

    -1/2 [ |O| log 2 pi + (|O| - q) log s2 + log|M| + (|y_O|^2 - b^T M^{-1} b) / s2 ],

``y = x - mu``, ``b = W_O^T y_O`` (matrix determinant lemma and Woodbury identity).

The M-step solves, for every feature j, the ridge-free normal equations of the regression of
``y_j`` on ``z~ = [z; 1]`` over the rows where j is observed (Ilin and Raiko, 2010, with the
mean estimated jointly):

    A_j w~_j = b_j,   A_j = sum_{n: j in O_n} E[z~ z~^T],   b_j = sum_{n: j in O_n} y_nj E[z~],

so the sufficient statistics are per-feature (d x (q+1) x (q+1) and d x (q+1)) sums, and they
merge by addition. Rows without missing entries share one M and add to a single
``(q+1) x (q+1)`` matrix common to all features; only blocks with missing entries pay for the
per-feature sums. :class:`PPCASums` holds them for one parameter setting: one pass per EM
iteration.

Factor analysis is the same model with a diagonal noise covariance ``Psi = diag(psi)`` (seed
004): ``s2`` is then a vector. Its posteriors are PPCA's with unit noise for the rows scaled by
``psi^{-1/2}`` (and W likewise); the sums stay in the data's units (the scaling of complete
rows is folded into the loadings of their products, so they are never copied), the
log-likelihood gets ``-1/2 sum_j count_j log psi_j`` back, and the M-step estimates one
variance per feature instead of pooling them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np

from ddr.stats._centring import Centring, scratch, small_gemm_rows
from ddr.stats._checks import check_block, check_finite, check_weights
from ddr.stats._posteriors import (
    BatchedPosterior,
    _missing_row_bytes,
    _missing_rows,
    _packing,
    _products,
    missing_posterior,
    packed_gram,
    spd_inverse_logdet,
    unpack,
)
from ddr.stats.base import CheckData, Statistic

__all__ = [
    "BatchedPosterior",
    "PPCAParams",
    "PPCASums",
    "complete_posterior",
    "missing_posterior",
    "packed_gram",
    "row_posterior",
    "spd_inverse_logdet",
    "unpack",
]

_LOG_2PI = float(np.log(2 * np.pi))


@dataclasses.dataclass(frozen=True, eq=False)
class PPCAParams:
    """Parameters of a linear Gaussian latent model: loadings W (d, q), mean mu (d,) and the
    noise variance s2: a float (PPCA, ``s2 I``) or an array of shape (d,) (factor analysis,
    ``diag(s2)``)."""

    W: np.ndarray
    mu: np.ndarray
    s2: float | np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "W", np.ascontiguousarray(self.W, dtype=np.float64))
        object.__setattr__(self, "mu", np.ascontiguousarray(self.mu, dtype=np.float64))
        if np.ndim(self.s2) == 0:
            object.__setattr__(self, "s2", float(self.s2))
        else:
            s2 = np.ascontiguousarray(self.s2, dtype=np.float64)
            if s2.shape != self.mu.shape:
                raise ValueError(
                    f"PPCAParams: a noise variance per feature needs shape {self.mu.shape}; "
                    f"got {s2.shape}"
                )
            object.__setattr__(self, "s2", s2)

    @property
    def q(self) -> int:
        return self.W.shape[1]

    @property
    def isotropic(self) -> bool:
        """Whether the noise is ``s2 I`` (PPCA) rather than diagonal (factor analysis)."""
        return isinstance(self.s2, float)

    def whitened(self) -> tuple[PPCAParams, np.ndarray | None]:
        """The model of the rows scaled by ``s2^{-1/2}`` feature by feature, and those scales.

        Isotropic parameters are returned as they are (scales None). Diagonal noise gives
        ``(W s2^{-1/2}, mu, 1.0)``: unit noise, so the posteriors of the scaled rows are PPCA's
        (the mean is kept: rows are centred before they are scaled).
        """
        if self.isotropic:
            return self, None
        inv_sd = 1.0 / np.sqrt(self.s2)
        return PPCAParams(self.W * inv_sd[:, None], self.mu, 1.0), inv_sd

    def shared_minv(self) -> tuple[np.ndarray, float]:
        """``M^{-1}`` and ``log|M|`` for a fully observed row."""
        M = self.s2 * np.eye(self.q) + self.W.T @ self.W
        c = np.linalg.cholesky(M)
        logdet = 2.0 * float(np.log(np.diagonal(c)).sum())
        cinv = np.linalg.inv(c)
        return cinv.T @ cinv, logdet

    def __dask_tokenize__(self) -> Any:
        from dask.base import tokenize

        return ("PPCAParams", tokenize(self.W, self.mu, self.s2))


def complete_posterior(
    Y: np.ndarray, params: PPCAParams, minv: np.ndarray, logdet: float
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior means and log-likelihoods of fully observed centred rows ``Y = X - mu``.

    Returns
    -------
    Ez : ndarray of shape (n, q)
    loglik : ndarray of shape (n,)
    """
    d, q = params.W.shape
    B = Y @ params.W
    Ez = B @ minv
    quad = np.einsum("ij,ij->i", Y, Y) - np.einsum("ij,ij->i", B, Ez)
    const = d * _LOG_2PI + (d - q) * np.log(params.s2) + logdet
    return Ez, -0.5 * (const + quad / params.s2)


def row_posterior(
    Yf: np.ndarray, obs: np.ndarray, params: PPCAParams, *, with_minv: bool = True
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Posteriors of rows with missing entries, each from its observed features only.

    Parameters
    ----------
    Yf : ndarray of shape (n, d)
        Centred rows ``x - mu`` with the missing entries set to 0.
    obs : ndarray of shape (n, d), float
        1.0 where observed, 0.0 where missing.
    params : PPCAParams
        Isotropic (unit-noise parameters, :meth:`PPCAParams.whitened`, for diagonal noise).
    with_minv : bool, default=True
        Whether to return ``M_n^{-1}`` (the posterior covariances), or None.

    Returns
    -------
    Ez : ndarray of shape (n, q)
        Posterior means (0, the prior mean, for rows with nothing observed).
    minv : ndarray of shape (n, q, q) or None
        ``M_n^{-1}``; the posterior covariance is ``s2 * minv``.
    loglik : ndarray of shape (n,)
        Marginal log-likelihood of each row's observed entries (0 for an empty row).
    """
    W, s2 = params.W, float(params.s2)
    q = W.shape[1]
    post, Ez, bmb = missing_posterior(Yf, obs, W, s2)
    p = obs.sum(axis=1)
    quad = np.einsum("ij,ij->i", Yf, Yf) - bmb
    loglik = -0.5 * (p * _LOG_2PI + (p - q) * np.log(s2) + post.logdet + quad / s2)
    minv = unpack(post.inverse().T, q) if with_minv else None
    return np.ascontiguousarray(Ez.T), minv, loglik


class _Acc:
    """Running sums of one block (mutable; becomes a frozen :class:`PPCASums`).

    ``unit`` are the parameters with unit noise (:meth:`PPCAParams.whitened`) and ``inv_sd``
    the scales of the rows that go with them (None for isotropic noise). The posteriors are
    those of the scaled rows ``Y' = Y diag(inv_sd)``, but every sum is kept in the data's
    units, and complete rows are never scaled: ``Y' W' = Y (diag(inv_sd) W')`` folds the
    scaling into the loadings of the products.
    """

    def __init__(self, d: int, q: int, unit: PPCAParams, inv_sd: np.ndarray | None) -> None:
        self.q = q
        self.unit = unit
        self.inv_sd = inv_sd
        self.w_products = unit.W if inv_sd is None else unit.W * inv_sd[:, None]
        self.minv, self.logdet = unit.shared_minv()
        self.zz_shared = np.zeros((q + 1, q + 1))
        self.zz_total = np.zeros((q + 1, q + 1))
        # rows with missing entries: E[z~ z~^T] summed per feature and in all, packed
        self.zz_feature_packed: np.ndarray | None = None
        self.zz_missing_packed: np.ndarray | None = None
        self.gram: np.ndarray | None = None  # packed w_j w_j^T of the unit-noise loadings
        self.yz = np.zeros((d, q + 1))
        self.yy = np.zeros(d)
        self.count = np.zeros(d)
        self.loglik = 0.0
        self.n_empty = 0

    def products(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``B1 = [Y' W', 1]`` and ``Y^T B1`` (the last column: the column sums of Y)."""
        return _products(Y, self.w_products)

    def add_complete(
        self,
        Y: np.ndarray,
        products: tuple[np.ndarray, np.ndarray] | None = None,
        w: np.ndarray | None = None,
    ) -> None:
        """Sums of fully observed rows, without forming the posterior means row by row.

        With ``B = Y W`` and ``E[z] = B M^{-1}`` for all rows, every sum is a q x q or d x q
        product: ``sum E[z]E[z]^T = M^{-1} B^T B M^{-1}``, ``sum y E[z]^T = (Y^T B) M^{-1}``,
        ``sum b^T M^{-1} b = tr(M^{-1} B^T B)``: two (rows x d x q) GEMMs per block, with a
        column of ones appended to B so the second also gives the column sums of Y. With
        frequency weights ``w`` every sum is over ``diag(w)``: ``B1^T diag(w) B1``, ...
        """
        B1, YB1 = self.products(Y) if products is None else products
        if w is None:
            G1 = B1.T @ B1  # [[B^T B, sum b], [sum b^T, m]]
            self.add_products(G1, YB1, np.einsum("ij,ij->j", Y, Y))
            return
        Bw = B1 * w[:, None]
        self.add_products(B1.T @ Bw, Y.T @ Bw, w @ np.square(Y))

    def add_products(self, G1: np.ndarray, YB1: np.ndarray, yy: np.ndarray) -> None:
        """Sums of m fully observed rows from their products (see :meth:`add_complete`).

        Parameters
        ----------
        G1 : ndarray of shape (q+1, q+1)
            ``B1^T B1`` with ``B1 = [Y' W', 1]``; ``G1[q, q]`` is m.
        YB1 : ndarray of shape (d, q+1)
            ``Y^T B1``.
        yy : ndarray of shape (d,)
            ``sum_rows Y**2`` per feature.
        """
        q, minv, s2 = self.q, self.minv, self.unit.s2
        d = YB1.shape[0]
        m = G1[q, q]
        G = G1[:q, :q]
        sz = G1[:q, q] @ minv
        ezz = minv @ G @ minv + m * s2 * minv
        for target in (self.zz_shared, self.zz_total):
            target[:q, :q] += ezz
            target[:q, q] += sz
            target[q, :q] += sz
            target[q, q] += m
        self.yz[:, :q] += YB1[:, :q] @ minv
        self.yz[:, q] += YB1[:, q]
        self.yy += yy
        self.count += m
        scaled_yy = float(yy.sum()) if self.inv_sd is None else float(yy @ self.inv_sd**2)
        quad = scaled_yy - float(np.sum(minv * G))
        const = d * _LOG_2PI + (d - q) * np.log(s2) + self.logdet
        self.loglik += -0.5 * (m * const + quad / s2)

    def add_missing(self, Y: np.ndarray, nan: np.ndarray, w: np.ndarray | None = None) -> None:
        """Sums of rows with missing entries: each row's posterior from its observed entries.

        The posteriors are solved for all the rows at once (:class:`BatchedPosterior`), and
        ``E[z~ z~^T]`` of each row, packed (its lower triangle: (q+1)(q+2)/2 values instead
        of (q+1)^2), is summed per feature by one GEMM with the observation mask (whose
        column of ones gives the observed counts). Diagonal noise: the scaling of the rows
        is folded into the loadings of ``b_n`` and into the weights of ``|y_n|^2``. Frequency
        weights ``w`` scale each row's column of moments (and so every sum taken from it).
        """
        q, s2 = self.q, float(self.unit.s2)
        m, d = Y.shape
        # the mask with a column of ones: its GEMM with the rows' moments also sums them
        mask = scratch("ppca.obs", (m, d + 1))
        obs = mask[:, :d]
        np.subtract(1.0, nan, out=obs)
        mask[:, d] = 1.0
        # Y with its NaN set to 0 by a bitwise AND with the mask: 2x faster than np.where,
        # whose branch on the (random) mask mispredicts
        keep = scratch("ppca.keep", (m, d), np.int64)
        np.subtract(nan, 1, out=keep, dtype=np.int64, casting="unsafe")
        Yf = scratch("ppca.zeroed", (m, d))
        np.bitwise_and(Y.view(np.int64), keep, out=Yf.view(np.int64))
        if self.gram is None:
            self.gram = packed_gram(self.unit.W)
        post, Ez, bmb = missing_posterior(Yf, obs, self.w_products, s2, self.gram, "ppca.post")
        minv = post.inverse()
        off = post.off
        offz = _packing(q + 1)[0]
        # E[z~ z~^T] of each row, packed, one column per row; its rows (q, j) are E[z~]
        E = scratch("ppca.moments", (int(offz[-1]) + 1, m))
        for j in range(q):
            block = E[offz[j] : offz[j] + q - j]
            np.multiply(Ez[j:], Ez[j], out=block)
            block += s2 * minv[off[j] : off[j] + q - j]
            E[offz[j] + q - j] = Ez[j]
        E[offz[q]] = 1.0
        if w is not None:
            E *= w
        part = mask.T @ E.T  # (d + 1, P): per feature over the rows observing it; all rows
        if self.zz_feature_packed is None:
            self.zz_feature_packed, self.zz_missing_packed = part[:d], part[d]
        else:
            self.zz_feature_packed += part[:d]
            self.zz_missing_packed += part[d]
        self.count += part[:d, offz[q]]
        self.yz += Yf.T @ E[offz + q - np.arange(q + 1)].T  # y [E z; 1]
        sq = np.square(Yf, out=Yf)  # Yf is not needed after this
        self.yy += sq.sum(axis=0) if w is None else w @ sq
        row_sq = sq.sum(axis=1) if self.inv_sd is None else sq @ self.inv_sd**2
        p = d - np.count_nonzero(nan, axis=1)
        ll = p * _LOG_2PI + (p - q) * np.log(s2) + post.logdet + (row_sq - bmb) / s2
        self.loglik += -0.5 * float(ll.sum() if w is None else w @ ll)
        self.n_empty += int((p == 0).sum())

    def zz_feature(self) -> np.ndarray:
        """Per-feature sums over the rows with missing entries, (d, q+1, q+1) or (0, ...)."""
        if self.zz_feature_packed is None:
            return np.zeros((0, self.q + 1, self.q + 1))
        return unpack(self.zz_feature_packed, self.q + 1)

    def zz_all(self) -> np.ndarray:
        """``sum E[z~ z~^T]`` over every row."""
        if self.zz_missing_packed is None:
            return self.zz_total
        return self.zz_total + unpack(self.zz_missing_packed, self.q + 1)


# ------------------------------------------------------------------- statistic
@dataclasses.dataclass(frozen=True, eq=False)
class PPCASums(Statistic):
    """E-step sums of PPCA for one parameter setting, over disjoint sets of rows.

    ``y = x - mu`` with the ``mu`` of the parameters; ``z~ = [z; 1]``.

    Parameters
    ----------
    n_rows : int
        Rows seen.
    n_empty : int
        Rows with no observed entry (they add nothing else).
    n_obs : float
        Observed entries.
    count : ndarray of shape (d,)
        Observed entries per feature.
    loglik : float
        Sum of the marginal log-likelihoods of the observed entries of each row.
    zz_shared : ndarray of shape (q+1, q+1)
        ``sum E[z~ z~^T]`` over the fully observed rows (they count for every feature).
    zz_feature : ndarray of shape (d, q+1, q+1) or (0, q+1, q+1)
        Per feature j, ``sum E[z~ z~^T]`` over the rows with missing entries that observe j;
        empty when no row had a missing entry.
    yz : ndarray of shape (d, q+1)
        ``sum_{n: j observed} y_nj E[z~_n]``.
    yy : ndarray of shape (d,)
        ``sum_{n: j observed} y_nj^2``.
    zz_total : ndarray of shape (q+1, q+1)
        ``sum E[z~ z~^T]`` over all rows (the moments of the latent posteriors, for the
        parameter-expanded M-step).
    """

    n_rows: int
    n_empty: int
    n_obs: float
    count: np.ndarray
    loglik: float
    zz_shared: np.ndarray
    zz_feature: np.ndarray
    yz: np.ndarray
    yy: np.ndarray
    zz_total: np.ndarray

    @classmethod
    def empty(cls, d: int, q: int) -> Self:
        """The identity of :meth:`merge`.

        Parameters
        ----------
        d : int
            Width of the data.
        q : int
            Number of latent dimensions.

        Returns
        -------
        PPCASums
            No rows.
        """
        return cls(
            0,
            0,
            0.0,
            np.zeros(d),
            0.0,
            np.zeros((q + 1, q + 1)),
            np.zeros((0, q + 1, q + 1)),
            np.zeros((d, q + 1)),
            np.zeros(d),
            np.zeros((q + 1, q + 1)),
        )

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        # rows of the kind this statistic takes (the base class's docstring says more)
        data = super().check_data(rng, n_rows)
        d = data.X.shape[1]
        params = PPCAParams(rng.standard_normal((d, 1)), np.zeros(d), 1.0)
        return CheckData(data.X, options={"params": params})

    @classmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        params: PPCAParams,
    ) -> Self:
        """The E-step sums of one block of rows (NaN marks missing entries).

        Parameters
        ----------
        X : ndarray of shape (n_rows, d)
        y : not supported (must be None)
        sample_weight : ndarray of shape (n_rows,), optional
            Non-negative frequency weights: a row of weight ``w`` adds ``w`` times its sums
            (and its log-likelihood), as ``w`` copies of it would.
        params : PPCAParams
            The current parameters (W, mu, s2).
        """
        X = check_block(X)
        n, d = X.shape
        w = check_weights(sample_weight, n)
        if d != params.W.shape[0]:
            raise ValueError(f"X has {d} features but the PPCA parameters have {params.W.shape[0]}")
        q = params.q
        acc = cls.empty(d, q)
        if n == 0:
            return acc
        # diagonal noise: the posteriors of the rows scaled to unit noise (see _Acc)
        unit, inv_sd = params.whitened()
        step = small_gemm_rows(d, q + 1, lo=128, hi=4096)
        # rows with missing entries go in larger sub-blocks: the batched posteriors cost
        # about 3 q^2 numpy calls per sub-block whatever its size
        step_missing = max(step, _missing_rows(d, q))
        a = _Acc(d, q, unit, inv_sd)
        centre = Centring(params.mu, min(max(step, step_missing), n))
        start, missing = 0, False
        while start < n:
            Y = centre(X[start : start + (step_missing if missing else step)])
            ws = None if w is None else w[start : start + Y.shape[0]]
            start += Y.shape[0]
            if not missing:
                products = a.products(Y)
                if np.isfinite(products[1][:, q]).all():  # column sums finite: no NaN, no inf
                    a.add_complete(Y, products, ws)
                    continue
            nan = np.isnan(Y)
            if np.isinf(Y).any():
                check_finite(np.where(nan, 0.0, Y), hint=" (NaN marks missing values)")
            if not nan.any():
                if missing:  # a complete sub-block after missing ones
                    products = a.products(Y)
                if not np.isfinite(products[1][:, q]).all():
                    raise ValueError("X has values too large to accumulate in float64")
                a.add_complete(Y, products, ws)
                continue
            missing = True  # the rest of the block: larger sub-blocks
            partial = nan.any(axis=1)
            if partial.all():
                a.add_missing(Y, nan, ws)
            else:
                a.add_complete(Y[~partial], w=None if ws is None else ws[~partial])
                a.add_missing(Y[partial], nan[partial], None if ws is None else ws[partial])
        loglik = a.loglik
        if inv_sd is not None:  # the log-densities of the scaled rows, back to the data's
            loglik -= 0.5 * float(a.count @ np.log(params.s2))
        return cls(
            n,
            a.n_empty,
            float(a.count.sum()),
            a.count,
            loglik,
            a.zz_shared,
            a.zz_feature(),
            a.yz,
            a.yy,
            a.zz_all(),
        )

    @classmethod
    def from_moments(
        cls, n: float, mean: np.ndarray, covariance: np.ndarray, *, params: PPCAParams
    ) -> Self:
        """The E-step sums of n complete rows from their mean and covariance alone.

        On complete data every sum is a quadratic function of the rows: with ``e = mean -
        mu`` and ``T = sum y y^T = n (S + e e^T)``, ``B^T B = W'^T T W'``, ``Y^T B = T W'``,
        ``sum b = n W'^T e``: the sums :meth:`from_block` accumulates, to round-off, with
        O(d^2 q) work and no pass over the rows (factor analysis of complete data runs its
        EM iterations on the client this way).

        Parameters
        ----------
        n : float
            Rows.
        mean : ndarray of shape (d,)
        covariance : ndarray of shape (d, d)
            Their covariance with ddof=0.
        params : PPCAParams
            The current parameters.

        Returns
        -------
        PPCASums
            Without missing entries (``zz_feature`` empty).
        """
        d, q = params.W.shape
        unit, inv_sd = params.whitened()
        a = _Acc(d, q, unit, inv_sd)
        e = np.asarray(mean, dtype=np.float64) - params.mu
        w = a.w_products
        Sw = covariance @ w
        ew = e @ w
        G1 = np.empty((q + 1, q + 1))
        G1[:q, :q] = n * (w.T @ Sw + np.outer(ew, ew))
        G1[:q, q] = G1[q, :q] = n * ew
        G1[q, q] = n
        YB1 = np.empty((d, q + 1))
        YB1[:, :q] = n * (Sw + np.outer(e, ew))
        YB1[:, q] = n * e
        a.add_products(G1, YB1, n * (np.diagonal(covariance) + e * e))
        loglik = a.loglik
        if inv_sd is not None:
            loglik -= 0.5 * float(a.count @ np.log(params.s2))
        return cls(
            int(n),
            0,
            float(a.count.sum()),
            a.count,
            loglik,
            a.zz_shared,
            np.zeros((0, q + 1, q + 1)),
            a.yz,
            a.yy,
            a.zz_total,
        )

    _fields_as: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("count", "zz_shared", "zz_feature", "yz", "yy", "zz_total"), "float64"),
        "n_rows": "int", "n_empty": "int", "n_obs": "float", "loglik": "float",
    }  # fmt: skip
    _merge_mismatch = (
        "cannot merge PPCASums of shape {a} with PPCASums of shape {b} (features, components + 1)"
    )

    @property
    def n_features(self) -> int:
        return self.yz.shape[0]

    @property
    def n_components(self) -> int:
        return self.yz.shape[1] - 1

    @classmethod
    def value_nbytes(
        cls, n_features: int, n_classes: int = 1, *, params: Any = None, **options: Any
    ) -> int:
        """Memory estimate of one value, with missing entries (per-feature (q+1)^2 sums)."""
        q1 = (params.q if params is not None else 1) + 1
        return 8 * (n_features * (q1 * q1 + q1 + 2) + 3 * q1 * q1)

    @classmethod
    def block_nbytes(
        cls,
        n_rows: int,
        n_features: int,
        n_classes: int = 1,
        *,
        params: Any = None,
        **options: Any,
    ) -> int:
        """Memory estimate of ``from_block``'s temporaries, per sub-block of rows: centred
        rows and their products with W for complete rows; for rows with missing entries
        (larger sub-blocks) the rows, their mask, zeroed copy and bit mask, and the packed
        systems, factors, inverses and posterior moments of ``BatchedPosterior``."""
        q = params.q if params is not None else 1
        q1 = q + 1
        d = n_features
        rows = min(n_rows, small_gemm_rows(d, q1, lo=128, hi=4096))
        complete = 8 * rows * (2 * d + q1 * q1 + q1)
        missing = min(n_rows, max(rows, _missing_rows(d, q))) * _missing_row_bytes(d, q)
        return max(complete, missing)

    def _merge_key(self) -> tuple[int, ...]:
        return self.yz.shape

    def _merge(self, other: Self) -> Self:
        """Add the sums of disjoint rows (for the same parameters)."""
        if self.zz_feature.shape[0] == 0:
            zz_feature = other.zz_feature
        elif other.zz_feature.shape[0] == 0:
            zz_feature = self.zz_feature
        else:
            zz_feature = self.zz_feature + other.zz_feature
        return type(self)(
            self.n_rows + other.n_rows,
            self.n_empty + other.n_empty,
            self.n_obs + other.n_obs,
            self.count + other.count,
            self.loglik + other.loglik,
            self.zz_shared + other.zz_shared,
            zz_feature,
            self.yz + other.yz,
            self.yy + other.yy,
            self.zz_total + other.zz_total,
        )

    def feature_gram(self) -> np.ndarray:
        """``A_j``, shape (d, q+1, q+1): the per-feature normal matrices of the M-step."""
        A = np.broadcast_to(self.zz_shared, (self.n_features, *self.zz_shared.shape))
        return A + self.zz_feature if self.zz_feature.shape[0] else A.copy()

    @property
    def has_missing(self) -> bool:
        return self.zz_feature.shape[0] > 0

    def __repr__(self) -> str:
        return (
            f"PPCASums(n_features={self.n_features}, n_components={self.n_components}, "
            f"n_rows={self.n_rows}, missing={self.has_missing})"
        )
