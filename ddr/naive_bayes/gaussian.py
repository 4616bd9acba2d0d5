"""Gaussian naive Bayes from one pass of diagonal class moments."""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar

import numpy as np
from sklearn.utils._param_validation import Interval

from ddr.generative.classifier import (
    FEATURE,
    BaseGenerativeClassifier,
    class_log_prior,
    empirical_or_given,
    tile_rows,
)
from ddr.stats import ClassMoments
from ddr.stats.base import Statistic, StatSpec
from ddr.stats.moments import Moments
from ddr.tags import DDRTags

__all__ = ["GaussianNB", "gaussian_jll"]

# A feature is "stiff" for the expanded quadratic form when some class's variance on it is
# this small relative to the feature's total variance: expanding (x - theta)^2 / var there
# would cancel digits, so those features are evaluated directly per class.
_STIFF = 1e-4


def gaussian_jll(
    X: np.ndarray,
    shift: np.ndarray,
    W: np.ndarray,
    const: np.ndarray,
    stiff: np.ndarray,
    theta_stiff: np.ndarray,
    inv_var_stiff: np.ndarray,
) -> np.ndarray:
    """Joint log-likelihood of a block under diagonal Gaussians, shape (n_block, n_classes).

    ``sum_j (x_j - theta_cj)^2 / var_cj`` is expanded around ``shift`` (the training mean):
    with ``c = x - shift``, the row ``[c, c^2]`` times ``W`` (2 n_features x n_classes: the
    linear coefficients above the quadratic ones) plus ``const``. Features listed in
    ``stiff`` (a class variance tiny compared with the feature's spread, where the expansion
    would cancel digits; their rows of ``W`` are 0) are summed directly.

    The block is taken in tiles of rows (:func:`~ddr.generative.classifier.tile_rows`):
    a float32 block is cast tile by tile into one float64 buffer that holds ``[c, c^2]``,
    so no n-sized float64 copy, centred copy or square is ever made.
    """
    n, d = X.shape
    out = np.empty((n, const.shape[0]))
    step = tile_rows(2 * d)
    buf = np.empty((min(step, n), 2 * d))
    for start in range(0, n, step):
        rows = X[start : start + step]
        tile = buf[: rows.shape[0]]
        c = tile[:, :d]
        np.copyto(c, rows)  # the cast to float64, into the buffer
        c -= shift
        np.multiply(c, c, out=tile[:, d:])
        np.matmul(tile, W, out=out[start : start + rows.shape[0]])
    out += const
    if stiff.size:
        Xs = np.asarray(X[:, stiff], dtype=np.float64)
        for k in range(const.shape[0]):
            D = Xs - theta_stiff[k]
            D *= D
            out[:, k] -= 0.5 * (D @ inv_var_stiff[k])
    return out


class GaussianNB(BaseGenerativeClassifier):
    """Gaussian naive Bayes: one diagonal Gaussian per class, fitted in one pass.

    The fit is one pass of :class:`ddr.stats.ClassMoments` (diagonal): class counts, means
    and centred sums of squares merged with the Chan/Golub/LeVeque update, so the variances
    have two-pass accuracy and do not depend on how the data is chunked or batched.

    Parameters
    ----------
    priors : array-like of shape (n_classes,), optional
        Class priors (must sum to 1). Default: the class frequencies.
    var_smoothing : float, default=1e-9
        ``epsilon_ = var_smoothing * (largest variance of any feature over all rows)`` is
        added to every variance, as in scikit-learn. Here the largest variance comes from the
        merged statistic of all rows seen, so ``partial_fit`` over any batching gives the same
        model as ``fit`` (scikit-learn recomputes it from the last batch only). If every
        feature is constant the largest variance is 0 and ``epsilon_ = var_smoothing`` (a floor
        in the units of ``X``), so there is never a division by zero.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Weight of the training rows of each class.
    class_prior_ : ndarray of shape (n_classes,)
    theta_ : ndarray of shape (n_classes, n_features)
        Per-class means.
    var_ : ndarray of shape (n_classes, n_features)
        Per-class variances (ddof=0) plus ``epsilon_``.
    epsilon_ : float
    class_moments_ : ddr.stats.ClassMoments
        The merged statistic behind the model (what ``partial_fit`` merges into).
    n_features_in_ : int

    Notes
    -----
    Passes: ``fit`` reads the data once; ``predict``/``predict_proba`` read it once, and
    each block costs one GEMM against a (2 n_features, n_classes) matrix, tile by tile.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "priors": ["array-like", None],
        "var_smoothing": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, *, priors: Any = None, var_smoothing: float = 1e-9) -> None:
        self.priors = priors
        self.var_smoothing = var_smoothing

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.solve_params = frozenset({"priors", "var_smoothing"})
        tags.translation_invariant = "predict_proba"
        tags.xarray_dims = {
            "theta_": ("class", FEATURE),
            "var_": ("class", FEATURE),
            "class_prior_": ("class",),
            "class_count_": ("class",),
        }
        tags.xarray_units = {"theta_": 1, "var_": 2, "class_prior_": 0, "class_count_": 0}
        return tags

    def _statistics(self) -> dict[str, StatSpec]:
        return {"class_moments_": ClassMoments.spec(diagonal=True)}

    def _empty_statistics(self, classes: np.ndarray, n_features: int) -> dict[str, Statistic]:
        return {"class_moments_": ClassMoments.empty(classes, n_features, diagonal=True)}

    def _priors(self) -> np.ndarray:
        return self.class_prior_

    def _update(self) -> None:
        cm: ClassMoments = self.class_moments_
        counts = cm.counts
        seen = counts > 0
        d = cm.n_features
        theta = np.zeros((cm.n_classes, d))
        var = np.zeros((cm.n_classes, d))
        total = Moments.empty(d, diagonal=True)
        for k, m in enumerate(cm.moments):
            if seen[k]:
                theta[k] = m.mean
                var[k] = m.variance(0)
                total = total.merge(m)
        max_var = float(np.max(total.variance(0))) if total.count > 0 else 0.0
        eps = float(self.var_smoothing) * (max_var if max_var > 0 else 1.0)
        if eps == 0 and np.any(var[seen] == 0):
            c, j = np.argwhere((var == 0) & seen[:, None])[0]
            raise ValueError(
                f"feature {j} has zero variance in class {cm.classes[c]!r} and "
                "var_smoothing=0 leaves it zero (a division by zero); use var_smoothing > 0"
            )
        self.theta_ = theta
        self.var_ = var + eps
        self.epsilon_ = eps
        self.class_count_ = counts.copy()
        self.class_prior_ = empirical_or_given(
            counts, self.priors, name="priors", renormalise="raise"
        )
        self._total_mean_ = total.mean if total.count > 0 else np.zeros(d)
        self._total_var_ = total.variance(0) if total.count > 0 else np.zeros(d)

    def _jll(self) -> tuple[Any, tuple]:
        theta, var = self.theta_, self.var_
        shift = self._total_mean_
        stiff_mask = var.min(axis=0) < _STIFF * (self._total_var_ + self.epsilon_)
        stiff = np.flatnonzero(stiff_mask)
        inv = 1.0 / var
        tc = np.where(stiff_mask, 0.0, theta - shift)
        quad = np.where(stiff_mask, 0.0, inv)
        lin = tc * quad
        const = (
            class_log_prior(self.class_prior_)
            - 0.5 * np.sum(np.log(2.0 * np.pi * var), axis=1)
            - 0.5 * np.sum(tc * tc * quad, axis=1)
        )
        # [c, c^2] @ W: the linear and quadratic terms in one GEMM
        W = np.ascontiguousarray(np.concatenate([lin, -0.5 * quad], axis=1).T)
        params = (shift, W, const, stiff, theta[:, stiff], inv[:, stiff])
        return gaussian_jll, params
