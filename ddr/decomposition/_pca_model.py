"""PCA's blockwise functions and its probabilistic model (Tipping and Bishop), shared by
:class:`~ddr.PCA` and :class:`~ddr.RotatedPCA`.

The block functions are module-level so that dask ships them to workers. The model's
read-outs (:class:`ProbabilisticPCA`: ``get_covariance``, ``get_precision``,
``score_samples``) are scikit-learn's PCA model, computed from the k components without a
d x d matrix where they can be.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
from scipy import linalg
from sklearn.utils.validation import check_is_fitted

from ddr.base import map_rows
from ddr.stats._tiled import centred_product

__all__ = [
    "MISSING_HINT",
    "ProbabilisticPCA",
    "check_complete",
    "inverse_block",
    "raise_missing",
    "score_block",
    "transform_block",
]

LOG_2PI = float(np.log(2 * np.pi))
MISSING_HINT = (
    "PCA needs complete rows; for data with missing values use ddr.PPCA(solver='em'), which "
    "fits principal components with NaN treated as missing"
)


# ------------------------------------------------------------------ blockwise functions
# Module-level so dask can ship them to workers.
def transform_block(
    X: np.ndarray, mean: np.ndarray, components: np.ndarray, scale: np.ndarray | None, dtype: Any
) -> np.ndarray:
    """Scores of a block: ``(X - mean) @ components.T`` (/ ``scale`` when whitening).

    Centred in float64 before projecting (all digits kept), a cache-sized tile of rows at a
    time (:func:`~ddr.stats._tiled.centred_product`: no float64 copy of a float32 block).
    """
    if scale is None:  # NaN, or a value too large for dtype: map_rows says
        return centred_product(np.asarray(X), components.T, shift=mean, dtype=dtype)
    out = centred_product(np.asarray(X), components.T, shift=mean)
    out /= scale
    return out.astype(dtype, copy=False)


def inverse_block(
    Z: np.ndarray, mean: np.ndarray, components: np.ndarray, scale: np.ndarray | None, dtype: Any
) -> np.ndarray:
    """Reconstruction of a block of scores: ``(Z * scale) @ components + mean``."""
    Z = np.asarray(Z, dtype=np.float64)
    if scale is not None:
        Z = Z * scale
    return (Z @ components + mean).astype(dtype, copy=False)


def score_block(
    X: np.ndarray,
    mean: np.ndarray,
    components: np.ndarray,
    damp: np.ndarray,
    inv_noise: float,
    const: float,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Log-likelihood of each row under the probabilistic PCA model, without a d x d matrix.

    With ``r = x - mean`` (times the feature weights: the model is of the weighted data)
    and ``z = components @ r``, the precision is ``inv_noise`` off the principal subspace
    and ``1 / (e_i + noise)`` along component ``i``, so
    ``r^T P r = inv_noise ||r||^2 - sum_i damp_i z_i^2``.
    """
    R = np.asarray(X, dtype=np.float64) - mean
    if weights is not None:
        R *= weights
    Z = R @ components.T
    quad = (np.einsum("ij,ij->i", R, R) * inv_noise if inv_noise else 0.0) - (Z * Z) @ damp
    return -0.5 * quad - const


def check_complete(X: np.ndarray) -> None:
    X = np.asarray(X)
    if X.dtype.kind == "f" and not np.isfinite(X).all():
        n_nan = int(np.isnan(X).sum())
        what = f"{n_nan} NaN" if n_nan else "infinite values"
        raise ValueError(f"Input X contains {what}. {MISSING_HINT}")


def raise_missing(exc: Exception) -> None:
    """Re-raise a NaN/inf error from a block with the pointer to PPCA."""
    msg = str(exc)
    if isinstance(exc, ValueError) and ("NaN" in msg or "infinite" in msg):
        raise ValueError(f"{msg}. {MISSING_HINT}") from exc


class ProbabilisticPCA:
    """The probabilistic PCA model of a fitted PCA (scikit-learn's): Gaussian with covariance
    ``components_.T diag(max(explained_variance_ - noise, 0)) components_ + noise I``, of the
    weighted data ``(X - mean_) * feature_weights_`` for a fit with feature weights.

    For classes with ``components_``, ``explained_variance_``, ``noise_variance_``,
    ``mean_``, ``n_components_``, ``n_features_in_``, ``whiten`` and ddr's ``_rows``.
    """

    # what the model reads of the estimator (declared for the type checker)
    components_: np.ndarray
    explained_variance_: np.ndarray
    noise_variance_: float
    mean_: np.ndarray
    n_components_: int
    n_features_in_: int
    whiten: bool
    _rows: Callable[..., Any]

    def _model_spectrum(self) -> tuple[np.ndarray, float]:
        """``e`` with covariance ``components_.T diag(e) components_ + noise I`` (sklearn's)."""
        ev = self.explained_variance_
        noise = float(self.noise_variance_)
        if self.n_components_ < self.n_features_in_ and ev.size:
            # rank-deficient data: the discarded eigenvalues are 0 to round-off; a noise at
            # round-off level keeps the model covariance invertible (scikit-learn's noise is
            # its SVD's round-off there, so both give a finite, meaningless likelihood)
            noise = max(noise, np.finfo(np.float64).eps * float(ev.max()))
        e = np.where(ev > noise, ev - noise, 0.0)
        if self.whiten:  # scikit-learn scales the components by sqrt(ev) in this model
            e = e * ev
        return e, noise

    def get_covariance(self) -> np.ndarray:
        """Covariance of the probabilistic PCA model, shape (n_features, n_features).

        ``components_.T @ diag(max(explained_variance_ - noise, 0)) @ components_ + noise I``
        (with scikit-learn's extra scaling when ``whiten=True``).
        """
        check_is_fitted(self)
        e, noise = self._model_spectrum()
        cov = (self.components_.T * e) @ self.components_
        cov[np.diag_indices_from(cov)] += noise
        return cov

    def get_precision(self) -> np.ndarray:
        """Inverse of :meth:`get_covariance` (by the matrix inversion lemma), d x d."""
        check_is_fitted(self)
        e, noise = self._model_spectrum()
        d = self.components_.shape[1]
        if noise == 0.0:
            return linalg.inv(self.get_covariance())
        C = self.components_
        prec = -(C.T * (e / (noise * (e + noise)))) @ C
        prec[np.diag_indices(d)] += 1.0 / noise
        return prec

    def score_samples(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Log-likelihood of each sample under the probabilistic PCA model.

        The model is scikit-learn's (Tipping and Bishop; Bishop, PRML 12.2.1): Gaussian with
        :meth:`get_covariance`. Computed blockwise from the k components, never forming the
        d x d precision. A model fitted with ``feature_weights`` is the model of the weighted
        data ``(X - mean_) * feature_weights_``, and this is the log-likelihood of the
        weighted rows (comparable between models with the same weights).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ll : same kind as X, shape (n_samples,)
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=True)
        if not rows.is_lazy:
            check_complete(rows.data)
        e, noise = self._model_spectrum()
        d, k = self.n_features_in_, self.n_components_
        prec_along = e + noise
        if noise <= 0.0 and (k < d or np.any(prec_along <= 0)):
            raise ValueError(
                "score_samples needs a non-singular model covariance; noise_variance_ is 0 "
                f"with n_components_={k} < n_features={d} (or a zero explained variance). "
                "Fit with n_components < min(n_samples, n_features)"
            )
        inv_noise = 1.0 / noise if noise > 0 else 0.0
        damp = inv_noise - 1.0 / prec_along
        logdet = float(np.log(prec_along).sum()) + (d - k) * (np.log(noise) if k < d else 0.0)
        const = 0.5 * (d * LOG_2PI + logdet)
        return map_rows(
            rows,
            score_block,
            n_out=None,
            dtype=np.float64,
            name="pca-score-samples",
            args=(
                self.mean_,
                self.components_,
                damp,
                inv_noise,
                const,
                getattr(self, "feature_weights_", None),
            ),
            check="output",
            method="PCA.score_samples",
            hint=MISSING_HINT,
        )
