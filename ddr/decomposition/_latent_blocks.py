"""The fitted latent Gaussian model (PPCA, factor analysis) applied to row blocks.

Posterior means and covariances of the latent factors, log-likelihoods of the observed
entries and imputation of the missing ones, each row from its observed entries only;
module-level so that dask ships them to workers. Rows without a missing entry share one
posterior (:func:`~ddr.stats.ppca_sums.complete_posterior`); the others are solved row by
row in groups of at most ``_MAP_ROWS``. The posterior means and log-likelihoods
(``transform``, ``score_samples``) take a block a cache-sized tile at a time, two small GEMMs
for a tile of complete rows (:func:`_complete_tiles`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ddr.stats._centring import scratch
from ddr.stats._checks import sum_is_finite
from ddr.stats._tiled import centred_tiles
from ddr.stats.engine import aligned
from ddr.stats.ppca_sums import PPCAParams, complete_posterior, row_posterior

_LOG_2PI = float(np.log(2.0 * np.pi))

__all__ = ["cov_block", "impute_block", "inverse_block", "score_block", "transform_block"]


class _Posterior(NamedTuple):
    Ez: np.ndarray  # (n, q) posterior means
    minv: np.ndarray  # (q, q) M^{-1} of a fully observed row
    minv_rows: tuple[np.ndarray, np.ndarray] | None  # rows with NaN: mask, (n_partial, q, q)
    scale: float  # posterior covariance = scale * M^{-1}
    loglik: np.ndarray  # (n,) log-likelihood of each row's observed entries
    nan: np.ndarray  # (n, d) the missing entries


def _posterior_rows(
    X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any, *, with_minv: bool = False
) -> _Posterior:
    """Posteriors of some rows, each from its observed entries (NaN marks the others); the
    posterior covariances of rows with missing entries only ``with_minv``."""
    params = PPCAParams(W, mu, s2)
    unit, inv_sd = params.whitened()
    Y = np.subtract(X, mu, dtype=np.float64)
    if inv_sd is not None:
        Y *= inv_sd
    nan = np.isnan(Y)
    partial = nan.any(axis=1)
    minv, logdet = unit.shared_minv()
    n, q = Y.shape[0], unit.q
    Ez = np.empty((n, q))
    ll = np.empty(n)
    minv_rows = None
    full = ~partial
    if full.any():
        Ez[full], ll[full] = complete_posterior(Y[full], unit, minv, logdet)
    if partial.any():
        obs = (~nan[partial]).astype(np.float64)
        Ez[partial], minv_p, ll[partial] = row_posterior(
            np.where(nan[partial], 0.0, Y[partial]), obs, unit, with_minv=with_minv
        )
        minv_rows = None if minv_p is None else (partial, minv_p)
    if inv_sd is not None:  # back from the scaled rows: their log-densities differ by log|D|
        ll -= 0.5 * ((~nan) @ np.log(params.s2))
    return _Posterior(Ez, minv, minv_rows, float(unit.s2), ll, nan)


#: Rows per sub-block of the blockwise maps: bounds the (rows, q, q) temporaries of rows
#: with missing entries to a few MiB whatever the chunk size.
_MAP_ROWS = 4096


def _by_rows(fn: Any, X: np.ndarray, *args: Any) -> np.ndarray:
    # the fitted arrays and the block as a worker got them may be misaligned, which
    # changes numpy's rounding (ddr.stats.engine.aligned): results would vary between runs
    X, args = aligned((X, args))
    if X.shape[0] <= _MAP_ROWS:
        return fn(X, *args)
    return np.concatenate(
        [fn(X[i : i + _MAP_ROWS], *args) for i in range(0, X.shape[0], _MAP_ROWS)], axis=0
    )


def _cov_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    post = _posterior_rows(X, W, mu, s2, with_minv=True)
    cov = np.broadcast_to(post.scale * post.minv, (X.shape[0], *post.minv.shape)).copy()
    if post.minv_rows is not None:
        cov[post.minv_rows[0]] = post.scale * post.minv_rows[1]
    return cov


def _impute_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    post = _posterior_rows(X, W, mu, s2)
    out = np.array(X, dtype=X.dtype if X.dtype.kind == "f" else np.float64, copy=True)
    if post.nan.any():
        recon = post.Ez @ W.T + mu  # E[x_missing | x_observed] = mu_M + W_M E[z]
        out[post.nan] = recon[post.nan]
    return out


def transform_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    """Posterior means of a block, shape (n, q) (:func:`_complete_tiles`)."""
    return _complete_tiles(X, W, mu, s2, scores=False)


def cov_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    """Posterior covariances of a block, shape (n, q, q)."""
    return _by_rows(_cov_rows, X, W, mu, s2)


def score_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    """Log-likelihood of each row's observed entries, shape (n,) (:func:`_complete_tiles`)."""
    return _complete_tiles(X, W, mu, s2, scores=True)


def _complete_tiles(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any, *, scores: bool) -> Any:
    """Posterior means (or log-likelihoods, ``scores``) of a block, a tile of rows at a time.

    A tile without a missing entry (one sum of it tells) is centred into a reused float64
    buffer (:func:`~ddr.stats._tiled.centred_tiles`), scaled to unit noise in place (factor
    analysis), and gives ``B = Y W`` and ``E[z] = B M^{-1}`` in cache, with no
    n-sized temporary; the log-likelihoods need one more pass over the tile,
    ``|Y|^2 - B . E[z]`` (the same formulas as
    :func:`~ddr.stats.ppca_sums.complete_posterior`). A tile with missing entries goes to
    :func:`_posterior_rows`, each row from its observed entries.
    """
    X, (W, mu) = aligned((X, (W, mu)))
    params = PPCAParams(W, mu, s2)
    unit, inv_sd = params.whitened()
    minv, logdet = unit.shared_minv()
    n, d = X.shape
    q = unit.q
    out = np.empty(n) if scores else np.empty((n, q))
    # log-likelihood of a complete row: -0.5 (const + |Y|^2 - B . E[z]) with unit.s2 = 1 for
    # factor analysis (whose rows are scaled by inv_sd: their density differs by log|D|)
    const = d * _LOG_2PI + (d - q) * np.log(unit.s2) + logdet
    if inv_sd is not None:
        const += float(np.sum(np.log(params.s2)))
    for rows, Y in centred_tiles(X, mu, q):
        if not sum_is_finite(Y):  # missing entries (or a sum that overflowed): row by row
            post = _posterior_rows(X[rows], W, mu, s2)
            out[rows] = post.loglik if scores else post.Ez
            continue
        if inv_sd is not None:
            Y *= inv_sd
        B = np.matmul(Y, unit.W, out=scratch("latent.b", (Y.shape[0], q)))
        Ez = out[rows] if not scores else scratch("latent.ez", (Y.shape[0], q))
        np.matmul(B, minv, out=Ez)
        if scores:
            quad = np.einsum("ij,ij->i", Y, Y)
            quad -= np.einsum("ij,ij->i", B, Ez)
            quad /= unit.s2
            quad += const
            quad *= -0.5
            out[rows] = quad
    return out


def impute_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    """The block with NaN replaced by their conditional expectations, shape (n, d)."""
    return _by_rows(_impute_rows, X, W, mu, s2)


def inverse_block(Z: np.ndarray, W: np.ndarray, mu: np.ndarray) -> np.ndarray:
    Z, W, mu = aligned((np.asarray(Z, dtype=np.float64), W, mu))
    return Z @ W.T + mu


# ------------------------------------------------------------ the client side
