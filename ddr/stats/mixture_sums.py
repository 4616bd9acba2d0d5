"""The E-step sums of a Gaussian mixture, mergeable: one pass per EM iteration.

Model: ``p(x) = sum_k w_k N(x; mu_k, Sigma_k)`` with full, tied (one shared), diagonal or
spherical covariances, parametrised as scikit-learn's ``GaussianMixture`` is: weights, means
and the Cholesky factors of the precisions, ``P_k P_k^T = Sigma_k^-1``.

For each row the E-step gives the responsibilities ``r_nk = w_k N(x_n; k) / p(x_n)``
(log-sum-exp, no underflow) and the row's log-likelihood ``log p(x_n)``; the M-step needs,
per component, ``sum_n r_nk``, the responsibility-weighted mean and the weighted scatter about
it. Rows and means are moved by one shift, the weighted mean of the component means, before
anything is multiplied (on data at a large offset scikit-learn's ``X @ P - mu @ P`` cancels its
digits), and each block's scatter is taken about the current component means and moved to the
block's own weighted means; blocks merge with the Chan update per component
(``S = S_a + S_b + w_a w_b / w * d d^T``), so data on a large offset keep their digits.

Per covariance type the scatter is:

- ``full``: per component, ``sum_n r_nk (x_n - m_k)(x_n - m_k)^T`` (shape (k, d, d));
- ``tied``: the sum of those over the components (shape (1, d, d)), accumulated as
  ``sum_n y_n y_n^T`` less the components' means (``sum_k r_nk = 1`` for every row);
- ``diag`` and ``spherical``: per component and feature, ``sum_n r_nk (x_nj - m_kj)^2``
  (shape (k, d); the spherical variance is their mean over the features).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import numpy as np
from scipy.linalg.blas import dsyrk, dtrmm

from ddr.stats._centring import Centring, scratch
from ddr.stats._checks import check_block, check_finite
from ddr.stats.base import CheckData, Statistic

__all__ = [
    "COVARIANCE_TYPES",
    "GaussianMixtureParams",
    "GaussianMixtureSums",
    "normalise_log_prob",
    "weighted_log_prob",
]

_LOG_2PI = float(np.log(2 * np.pi))
COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
#: up to this many components a block's row maxima and sums are taken column by column
_FEW_COMPONENTS = 32
#: rows per sub-block: about 1 MiB of float64 rows stays in cache across its products
_SUB_BLOCK_BYTES = 2**20


def _sub_block_rows(n_features: int, n_components: int) -> int:
    return int(np.clip(_SUB_BLOCK_BYTES // (8 * max(n_features + n_components, 1)), 64, 8192))


@dataclasses.dataclass(frozen=True, eq=False)
class GaussianMixtureParams:
    """The parameters of a Gaussian mixture, in scikit-learn's form.

    Parameters
    ----------
    weights : ndarray of shape (k,)
        Mixing weights.
    means : ndarray of shape (k, d)
    precisions_cholesky : ndarray
        ``P`` with ``P P^T`` the precision: shape (k, d, d) for ``full``, (d, d) for
        ``tied``, (k, d) for ``diag`` (``1 / sqrt(variance)``), (k,) for ``spherical``.
    covariance_type : {"full", "tied", "diag", "spherical"}
    """

    weights: np.ndarray
    means: np.ndarray
    precisions_cholesky: np.ndarray
    covariance_type: str

    def __post_init__(self) -> None:
        for name in ("weights", "means", "precisions_cholesky"):
            object.__setattr__(
                self, name, np.ascontiguousarray(getattr(self, name), dtype=np.float64)
            )
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ValueError(
                f"covariance_type must be one of {COVARIANCE_TYPES}; got {self.covariance_type!r}"
            )
        k, d = self.means.shape
        want = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}
        shape = want[self.covariance_type]
        if self.weights.shape != (k,) or self.precisions_cholesky.shape != shape:
            raise ValueError(
                f"GaussianMixtureParams: {k} components of {d} features need weights of shape "
                f"({k},) and {self.covariance_type} precisions_cholesky of shape {shape}; got "
                f"{self.weights.shape} and {self.precisions_cholesky.shape}"
            )

    @property
    def n_components(self) -> int:
        return self.means.shape[0]

    @property
    def n_features(self) -> int:
        return self.means.shape[1]

    def shift(self) -> np.ndarray:
        """The point rows and means are moved by: the weighted mean of the means."""
        total = float(self.weights.sum())
        if not total > 0:
            return self.means.mean(axis=0)
        return (self.weights @ self.means) / total

    def log_det(self) -> np.ndarray:
        """``log |P_k|`` per component (half the log-determinant of the precision)."""
        P = self.precisions_cholesky
        d = self.n_features
        if self.covariance_type == "full":
            return np.log(np.diagonal(P, axis1=1, axis2=2)).sum(axis=1)
        if self.covariance_type == "tied":
            return np.full(self.n_components, np.log(np.diagonal(P)).sum())
        if self.covariance_type == "diag":
            return np.log(P).sum(axis=1)
        return d * np.log(P)

    def __dask_tokenize__(self) -> Any:
        from dask.base import tokenize

        return (
            "GaussianMixtureParams",
            self.covariance_type,
            tokenize(self.weights, self.means, self.precisions_cholesky),
        )


class _Block:
    """What every sub-block of an E-step or a prediction needs of the parameters."""

    def __init__(self, params: GaussianMixtureParams) -> None:
        self.params = params
        self.shift = params.shift()
        self.local = params.means - self.shift
        ct = params.covariance_type
        P = params.precisions_cholesky
        with np.errstate(divide="ignore"):
            log_w = np.log(params.weights)
        self.const = log_w + params.log_det() - 0.5 * params.n_features * _LOG_2PI
        if ct in ("full", "tied"):
            # EM's factors are upper triangular (L^-T, scikit-learn's): a triangular product
            # (TRMM) takes half a GEMM's work; factors of given precisions are lower ones
            factors = P if ct == "full" else P[None]
            self.upper = all(not np.tril(f, -1).any() for f in factors)
            self.factors = [np.asfortranarray(f) for f in factors]
        if ct == "tied":
            self.local_p = self.local @ P
            self.local_p_term = np.einsum("kj,kj->k", self.local_p, self.local_p)
        elif ct == "diag":
            self.prec = P * P
            self.local_prec = self.local * self.prec
            self.local_term = np.einsum("kj,kj->k", self.local_prec, self.local)
        elif ct == "spherical":
            self.prec = P * P
            self.local_term = np.einsum("kj,kj->k", self.local, self.local) * self.prec

    def weighted(self, Y: np.ndarray, squares: np.ndarray | None = None) -> np.ndarray:
        """``log w_k + log N(x; k)`` of the shifted rows ``Y``, shape (m, k); ``squares``,
        ``Y * Y`` when the caller has it (diag and spherical use it).

        The result and the temporaries are this thread's scratch buffers (see
        :func:`~ddr.stats._centring.scratch`: in a dask worker every fresh array above
        128 KiB faults its pages in): the result is valid until the next call.
        """
        p = self.params
        ct = p.covariance_type
        (m, d), k = Y.shape, p.n_components
        out = scratch("gmm.weighted", (m, k))
        if ct == "full":
            A, Z = scratch("gmm.a", (m, d)), scratch("gmm.b", (m, d))
            for j in range(k):
                np.subtract(Y, self.local[j], out=A)
                W = self.times_factor(A, j, Z)
                out[:, j] = np.einsum("ij,ij->i", W, W)
        elif ct == "tied":
            # |z - m_j|^2 = |z|^2 - 2 z.m_j + |m_j|^2 of the whitened rows z: one product with
            # the k whitened means, not k passes over the rows (as diag does); the rows and
            # means are about the shift, so nothing large cancels
            A, Z = scratch("gmm.a", (m, d)), scratch("gmm.b", (m, d))
            np.copyto(A, Y)  # Y is the caller's: the product goes into A
            Z0 = self.times_factor(A, 0, Z)
            np.matmul(Z0, self.local_p.T, out=out)
            out *= -2.0
            out += np.einsum("ij,ij->i", Z0, Z0)[:, None]
            out += self.local_p_term
        elif ct == "diag":
            if squares is None:
                squares = np.multiply(Y, Y, out=scratch("gmm.a", (m, d)))
            np.matmul(squares, self.prec.T, out=out)
            G = np.matmul(Y, self.local_prec.T, out=scratch("gmm.g", (m, k)))
            G *= 2.0
            out -= G
            out += self.local_term
        else:
            sq = np.einsum("ij,ij->i", Y, Y) if squares is None else squares @ np.ones(d)
            np.multiply.outer(sq, self.prec, out=out)
            G = np.matmul(Y, self.local.T, out=scratch("gmm.g", (m, k)))
            G *= 2.0 * self.prec
            out -= G
            out += self.local_term
        out *= -0.5
        out += self.const
        return out

    def times_factor(self, A: np.ndarray, j: int, spare: np.ndarray) -> np.ndarray:
        """``A @ P_j`` (full: component j's factor; tied: the factor, j = 0): in place in
        ``A`` by TRMM when the factor is upper triangular, else a GEMM into ``spare``."""
        if self.upper:
            # A's (d, m) Fortran view: P^T A^T = (A P)^T, overwritten in place
            return dtrmm(1.0, self.factors[j], A.T, side=0, lower=0, trans_a=1, overwrite_b=1).T
        return np.matmul(A, self.factors[j], out=spare)


def weighted_log_prob(X: np.ndarray, params: GaussianMixtureParams) -> np.ndarray:
    """``log w_k + log N(x_n; mu_k, Sigma_k)`` of every row of a block, shape (n, k).

    Computed on rows and means moved by the same shift (see the module's notes), a cache-sized
    sub-block at a time.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    params : GaussianMixtureParams

    Returns
    -------
    ndarray of shape (n, k)
    """
    n, d = X.shape
    k = params.n_components
    out = np.empty((n, k))
    if n == 0:
        return out
    block = _Block(params)
    step = min(_sub_block_rows(d, k), n)
    centre = Centring(block.shift, step)
    for start in range(0, n, step):
        Y = centre(X[start : start + step])
        out[start : start + Y.shape[0]] = block.weighted(Y)
    return out


def normalise_log_prob(wlp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Responsibilities and ``log p(x)`` of rows from their weighted log-probabilities.

    Log-sum-exp about each row's largest term, in place: one ``exp`` of the block gives
    both (scipy's ``logsumexp`` followed by ``exp(wlp - norm)`` takes two, and its checks
    cost as much again on the narrow (rows, components) arrays of an E-step). A row with no
    finite term gives NaN responsibilities and a non-finite ``log p(x)``; the caller reports
    it.

    Parameters
    ----------
    wlp : ndarray of shape (n, k)
        ``log w_k + log N(x_n; k)``; overwritten with the responsibilities.

    Returns
    -------
    resp : ndarray of shape (n, k)
        ``wlp`` itself, now ``p(k | x_n)`` (rows sum to 1).
    log_norm : ndarray of shape (n,)
        ``log p(x_n)``.
    """
    k = wlp.shape[1]
    if k <= _FEW_COMPONENTS:
        # numpy reduces a short inner axis row by row, ten to twenty times slower than a
        # few whole-column maxima and a matrix-vector product
        top = wlp[:, 0].copy()
        for j in range(1, k):
            np.maximum(top, wlp[:, j], out=top)
    else:
        top = wlp.max(axis=1)
    with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
        wlp -= top[:, None]
        np.exp(wlp, out=wlp)
        total = wlp @ np.ones(k) if k <= _FEW_COMPONENTS else wlp.sum(axis=1)
        wlp /= total[:, None]
        return wlp, top + np.log(total)


@dataclasses.dataclass(frozen=True, eq=False)
class GaussianMixtureSums(Statistic):
    """E-step sums of a Gaussian mixture at one parameter setting, over disjoint sets of rows.

    Parameters
    ----------
    n_rows : int
        Rows seen.
    loglik : float
        ``sum_n log p(x_n)`` at the parameters.
    weight : ndarray of shape (k,)
        ``sum_n r_nk``.
    mean : ndarray of shape (k, d)
        ``sum_n r_nk x_n / sum_n r_nk`` (the component's mean parameter where it has no
        weight).
    scatter : ndarray of shape (k, d, d), (1, d, d) or (k, d)
        The responsibility-weighted scatter about ``mean``: per component (full), summed
        over the components (tied), or per component and feature (diag, spherical).
    """

    n_rows: int
    loglik: float
    weight: np.ndarray
    mean: np.ndarray
    scatter: np.ndarray

    readouts: ClassVar[tuple[str, ...]] = ("weight", "mean", "loglik")
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {
        "weight": ("component",),
        "mean": ("component", "{feature}"),
        "loglik": (),
    }
    # the log-likelihood is a log-density: in no power of the data's units
    readout_units: ClassVar[dict[str, int | None]] = {"weight": 0, "mean": 1, "loglik": None}
    _fields_as: ClassVar[dict[str, str]] = {
        "n_rows": "int", "loglik": "float", "weight": "float64", "mean": "float64",
        "scatter": "float64",
    }  # fmt: skip
    _merge_mismatch = (
        "cannot merge GaussianMixtureSums of shape {a} with GaussianMixtureSums of shape {b} "
        "(components, features, scatter)"
    )

    @property
    def n_components(self) -> int:
        return self.mean.shape[0]

    @property
    def n_features(self) -> int:
        return self.mean.shape[1]

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        # rows of the kind this statistic takes (the base class's docstring says more)
        data = super().check_data(rng, n_rows)
        d = data.X.shape[1]
        P = np.stack([np.linalg.inv(np.linalg.cholesky(c)).T for c in _check_covs(d)])
        params = GaussianMixtureParams(np.array([0.3, 0.7]), data.X[[0, 1]] + 0.5, P, "full")
        return CheckData(data.X, options={"params": params})

    @classmethod
    def empty(cls, params: GaussianMixtureParams) -> Self:
        """No rows: the identity of :meth:`merge` for these parameters.

        Parameters
        ----------
        params : GaussianMixtureParams

        Returns
        -------
        GaussianMixtureSums
        """
        k, d = params.means.shape
        shape = {"full": (k, d, d), "tied": (1, d, d)}.get(params.covariance_type, (k, d))
        return cls(0, 0.0, np.zeros(k), params.means.copy(), np.zeros(shape))

    @classmethod
    def from_block(  # type: ignore[override]  # its options are keywords, not **options
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        *,
        params: GaussianMixtureParams,
    ) -> Self:
        """The E-step sums of one block of rows.

        Parameters
        ----------
        X : ndarray of shape (n_rows, d)
        y, sample_weight : not supported (must be None)
        params : GaussianMixtureParams
            The current parameters.

        Returns
        -------
        GaussianMixtureSums
        """
        X = check_block(X)
        if sample_weight is not None:
            raise ValueError("GaussianMixtureSums does not support sample_weight")
        n, d = X.shape
        if d != params.n_features:
            raise ValueError(f"X has {d} features but the mixture's means have {params.n_features}")
        if n == 0:
            return cls.empty(params)
        k = params.n_components
        ct = params.covariance_type
        # diag and spherical need the rows' squares twice (the densities and the sums), and
        # the squares about the shift: one product a sub-block, no second centring
        per_feature = ct in ("diag", "spherical")
        block = _Block(params)
        step = min(_sub_block_rows(d, k), n)
        centre = Centring(block.shift, step)
        weight = np.zeros(k)
        first = np.zeros((k, d))  # sum r (y - c0)
        if ct == "full":
            acc = [np.zeros((d, d), order="F") for _ in range(k)]
        elif ct == "tied":
            acc_t = np.zeros((d, d), order="F")
        else:
            second = np.zeros((k, d))  # sum r (y - c0)^2
        loglik = 0.0
        c0 = cj = None
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            for start in range(0, n, step):
                Y = centre(X[start : start + step])
                YY = np.multiply(Y, Y, out=scratch("gmm.squares", Y.shape)) if per_feature else None
                R, norm = normalise_log_prob(block.weighted(Y, YY))
                loglik += float(norm.sum())
                if c0 is None or cj is None:
                    # the scatters are taken about points inside the data: the first
                    # sub-block's mean (c0) and each component's weighted mean there (cj);
                    # diag and spherical about the shift itself (the components' weighted
                    # mean), where their squares already are
                    c0 = np.zeros(d) if per_feature else _finite(Y.mean(axis=0))
                    wj = R.sum(axis=0)
                    cj = _finite(np.where(wj[:, None] > 0, (R.T @ Y) / wj[:, None], c0))
                if not per_feature:
                    Y -= c0  # Y is the centring buffer: rows minus shift minus c0
                weight += R.sum(axis=0)
                first += R.T @ Y
                if ct == "full":
                    A = scratch("gmm.a", Y.shape)  # free again once weighted() returned
                    for j in range(k):
                        np.subtract(Y, cj[j] - c0, out=A)
                        A *= np.sqrt(R[:, j])[:, None]
                        acc[j] = dsyrk(1.0, A.T, beta=1.0, c=acc[j], trans=0, overwrite_c=1)
                elif ct == "tied":
                    acc_t = dsyrk(1.0, Y.T, beta=1.0, c=acc_t, trans=0, overwrite_c=1)
                else:
                    second += R.T @ YY
        assert c0 is not None and cj is not None
        if not (np.isfinite(loglik) and np.isfinite(first).all()):
            check_finite(X)
            raise ValueError(
                "X has values too large to accumulate in float64, or the mixture gives its "
                "rows no density (a precision that overflows)"
            )
        has = weight > 0
        safe = np.where(has, weight, 1.0)
        mbar = np.where(has[:, None], first / safe[:, None], 0.0)  # block means less c0
        if ct == "full":
            scatter = np.empty((k, d, d))
            off = mbar - (cj - c0)  # from each component's centre to its block mean
            for j in range(k):
                S = np.triu(acc[j]) + np.triu(acc[j], 1).T
                scatter[j] = S - weight[j] * np.outer(off[j], off[j])
        elif ct == "tied":
            G = np.triu(acc_t) + np.triu(acc_t, 1).T  # sum (y - c0)(y - c0)^T, sum_k r = 1
            scatter = (G - (mbar.T * weight) @ mbar)[None]
        else:
            scatter = second - weight[:, None] * mbar * mbar
        mean = np.where(has[:, None], block.shift + c0 + mbar, params.means)
        return cls(n, loglik, weight, mean, scatter)

    def _merge_key(self) -> tuple[int, ...]:
        return (self.n_components, self.n_features, *self.scatter.shape)

    def _merge(self, other: Self) -> Self:
        wa, wb = self.weight, other.weight
        w = wa + wb
        with np.errstate(invalid="ignore", divide="ignore"):
            fb = np.where(w > 0, wb / np.where(w > 0, w, 1.0), 0.0)
            cross = np.where(w > 0, wa * wb / np.where(w > 0, w, 1.0), 0.0)
        delta = other.mean - self.mean
        mean = self.mean + fb[:, None] * delta
        scatter = self.scatter + other.scatter
        if scatter.ndim == 2:  # diag, spherical
            scatter = scatter + cross[:, None] * delta * delta
        elif scatter.shape[0] == self.n_components:  # full (and tied with one component)
            scatter = scatter + cross[:, None, None] * delta[:, :, None] * delta[:, None, :]
        else:  # tied: one scatter of all the components
            scatter = scatter + ((delta.T * cross) @ delta)[None]
        return type(self)(self.n_rows + other.n_rows, self.loglik + other.loglik, w, mean, scatter)

    @classmethod
    def value_nbytes(
        cls, n_features: int, n_classes: int = 1, *, params: Any = None, **options: Any
    ) -> int:
        """Memory estimate of one value: per component a weight, a mean and a scatter."""
        k = 1 if params is None else int(params.n_components)
        ct = "full" if params is None else params.covariance_type
        d = n_features
        per = {"full": k * d * d, "tied": d * d}.get(ct, k * d)
        return 8 * (k * (d + 1) + per)

    @classmethod
    def block_nbytes(
        cls, n_rows: int, n_features: int, n_classes: int = 1, *, params: Any = None, **options: Any
    ) -> int:
        """Memory estimate of ``from_block``'s temporaries: the shifted sub-block, its
        products and responsibilities, and the per-component accumulators."""
        k = 1 if params is None else int(params.n_components)
        d = n_features
        step = min(n_rows, _sub_block_rows(d, k))
        return 8 * (step * (3 * d + 4 * k) + k * d * d)

    def __repr__(self) -> str:
        return (
            f"GaussianMixtureSums(n_components={self.n_components}, n_features="
            f"{self.n_features}, n_rows={self.n_rows})"
        )


def _finite(v: np.ndarray) -> np.ndarray:
    """``v`` with non-finite entries set to 0 (non-finite input is reported later)."""
    return np.where(np.isfinite(v), v, 0.0)


def _check_covs(d: int) -> list[np.ndarray]:
    """Two covariances of the conformance suite's check data (d features)."""
    A = np.eye(d) + 0.3 * np.tri(d, k=-1)
    return [A @ A.T, np.diag(np.linspace(0.5, 2.0, d))]
