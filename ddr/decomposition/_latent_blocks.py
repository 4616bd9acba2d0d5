"""The fitted latent Gaussian model (PPCA, factor analysis) applied to row blocks.

Posterior means and covariances of the latent factors, log-likelihoods of the observed
entries and imputation of the missing ones, each row from its observed entries only;
module-level so that dask ships them to workers. Rows without a missing entry share one
posterior (:func:`~ddr.stats.ppca_sums.complete_posterior`); the others are solved row by
row in groups of at most ``_MAP_ROWS``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ddr.stats.engine import aligned
from ddr.stats.ppca_sums import PPCAParams, complete_posterior, row_posterior

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


def _transform_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    return _posterior_rows(X, W, mu, s2).Ez


def _cov_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    post = _posterior_rows(X, W, mu, s2, with_minv=True)
    cov = np.broadcast_to(post.scale * post.minv, (X.shape[0], *post.minv.shape)).copy()
    if post.minv_rows is not None:
        cov[post.minv_rows[0]] = post.scale * post.minv_rows[1]
    return cov


def _score_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    return _posterior_rows(X, W, mu, s2).loglik


def _impute_rows(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    post = _posterior_rows(X, W, mu, s2)
    out = np.array(X, dtype=X.dtype if X.dtype.kind == "f" else np.float64, copy=True)
    if post.nan.any():
        recon = post.Ez @ W.T + mu  # E[x_missing | x_observed] = mu_M + W_M E[z]
        out[post.nan] = recon[post.nan]
    return out


def transform_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    """Posterior means of a block, shape (n, q)."""
    return _by_rows(_transform_rows, X, W, mu, s2)


def cov_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    """Posterior covariances of a block, shape (n, q, q)."""
    return _by_rows(_cov_rows, X, W, mu, s2)


def score_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    """Log-likelihood of each row's observed entries, shape (n,)."""
    return _by_rows(_score_rows, X, W, mu, s2)


def impute_block(X: np.ndarray, W: np.ndarray, mu: np.ndarray, s2: Any) -> np.ndarray:
    """The block with NaN replaced by their conditional expectations, shape (n, d)."""
    return _by_rows(_impute_rows, X, W, mu, s2)


def inverse_block(Z: np.ndarray, W: np.ndarray, mu: np.ndarray) -> np.ndarray:
    Z, W, mu = aligned((np.asarray(Z, dtype=np.float64), W, mu))
    return Z @ W.T + mu


# ------------------------------------------------------------ the client side
