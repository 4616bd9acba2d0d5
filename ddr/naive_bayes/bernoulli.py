"""Bernoulli naive Bayes for binary (or binarised) features, from one pass of class moments."""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar

import numpy as np
from sklearn.utils._param_validation import Interval

from ddr.generative.classifier import (
    FEATURE,
    BaseGenerativeClassifier,
    check_alpha,
    discrete_class_log_prior,
)
from ddr.stats import ClassMoments
from ddr.stats._checks import block_start, check_rows
from ddr.stats._input import is_dask
from ddr.stats.base import Statistic, StatSpec
from ddr.tags import DDRTags

__all__ = ["BernoulliNB", "bernoulli_jll", "binarize_block"]


def binarize_block(
    X: np.ndarray, threshold: float, block_info: dict[Any, Any] | None = None
) -> np.ndarray:
    """1.0 where ``X > threshold``, else 0.0 (scikit-learn's ``binarize``); NaN or infinity
    is refused (NaN would binarise to 0 unseen)."""
    X = np.asarray(X)
    check_rows(X, block_start(block_info), "BernoulliNB")
    return (X > threshold).astype(np.float64)


def bernoulli_jll(
    X: np.ndarray,
    weights: np.ndarray,
    const: np.ndarray,
    never_on: np.ndarray | None = None,
    never_off: np.ndarray | None = None,
) -> np.ndarray:
    """Joint log-likelihood of a (binarised) block: ``X @ weights.T + const``, one GEMM.

    Parameters
    ----------
    X : ndarray of shape (n_block, n_features)
        The block (0/1, or the values as given with ``binarize=None``).
    weights : ndarray of shape (n_classes, n_features)
        ``log p - log(1 - p)``, finite: 0 where either is ``-inf`` (``alpha = 0``).
    const : ndarray of shape (n_classes,)
        ``log prior + sum_j log(1 - p_j)`` over the finite ``log(1 - p_j)``.
    never_on, never_off : ndarray of shape (n_classes, n_features), optional
        1.0 where a class never showed the feature on (``p = 0``) or never off (``p = 1``):
        a row with that feature on (any value but 0), respectively off (any value but 1), is
        impossible for the class and gets ``-inf``. Where the row agrees, the term is
        ``0 log 0 = 0``, the limit, where a GEMM with the infinite weights would give NaN.

    Returns
    -------
    ndarray of shape (n_block, n_classes)
    """
    X = np.asarray(X, dtype=np.float64)
    out = X @ weights.T + const
    if never_on is not None and never_off is not None:
        hits = ((X != 0).astype(np.float64) @ never_on.T > 0) | (
            (X != 1).astype(np.float64) @ never_off.T > 0
        )
        out[hits] = -np.inf
    return out


class BernoulliNB(BaseGenerativeClassifier):
    """Naive Bayes for binary features: one Bernoulli per class and feature.

    The fit is one pass of :class:`ddr.stats.ClassMoments` (diagonal) over the binarised
    rows: ``feature_count_`` is the class count times the class mean of each feature.
    Binarisation is applied blockwise on the fly, so dask input is still read once.

    Parameters
    ----------
    alpha : float or array-like of shape (n_features,), default=1.0
        Additive smoothing: ``p = (count + alpha) / (class count + 2 alpha)``.
    force_alpha : bool, default=True
        If False, ``alpha`` below 1e-10 is raised to 1e-10 with a warning.
    binarize : float or None, default=0.0
        Threshold: features are 1 where ``X > binarize``. None uses ``X`` as given
        (assumed binary; other values are used as counts, as in scikit-learn).
    fit_prior : bool, default=True
    class_prior : array-like of shape (n_classes,), optional

    Attributes
    ----------
    classes_, class_count_, class_log_prior_ : ndarray of shape (n_classes,)
    feature_count_ : ndarray of shape (n_classes, n_features)
    feature_log_prob_ : ndarray of shape (n_classes, n_features)
        ``log p(x_j = 1 | class)``.
    class_moments_ : ddr.stats.ClassMoments

    Notes
    -----
    Passes: ``fit`` reads the data once; ``predict`` once with one GEMM per block.

    Without smoothing (``alpha=0``) a class that showed a feature always off (``p = 0``) or
    always on (``p = 1``) cannot produce a row where it is on, respectively off: that class
    gets a joint log-likelihood of ``-inf`` (probability 0), and the row's posterior is the
    limit of the smoothed one as alpha tends to 0. A row that no class can produce has no
    posterior: ``predict``, ``predict_proba`` and ``predict_log_proba`` raise a ValueError
    naming it, ``predict_joint_log_proba`` gives ``-inf`` for every class. (scikit-learn
    gives NaN for every row once one such feature exists.)
    """

    def __init__(
        self,
        *,
        alpha: Any = 1.0,
        force_alpha: bool = True,
        binarize: float | None = 0.0,
        fit_prior: bool = True,
        class_prior: Any = None,
    ) -> None:
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.binarize = binarize
        self.fit_prior = fit_prior
        self.class_prior = class_prior

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.solve_params = frozenset({"alpha", "force_alpha", "fit_prior", "class_prior"})
        tags.xarray_dims = {
            "feature_count_": ("class", FEATURE),
            "feature_log_prob_": ("class", FEATURE),
            "class_count_": ("class",),
            "class_log_prior_": ("class",),
        }
        # counts of the binarised features, and logs of probabilities
        tags.xarray_units = dict.fromkeys(tags.xarray_dims, 0)
        return tags

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
        "force_alpha": ["boolean"],
        "binarize": [None, Interval(Real, None, None, closed="neither")],
        "fit_prior": ["boolean"],
        "class_prior": ["array-like", None],
    }

    @property
    def _defined_without_data(self) -> bool:  # type: ignore[override]
        return bool(np.all(np.asarray(self._alpha_) > 0))

    def _transform_input(self, data: Any) -> Any:
        if self.binarize is None:
            return data
        if is_dask(data):
            return data.map_blocks(binarize_block, float(self.binarize), dtype=np.float64)
        return binarize_block(data, float(self.binarize))

    def _statistics(self) -> dict[str, StatSpec]:
        return {"class_moments_": ClassMoments.spec(diagonal=True)}

    def _empty_statistics(self, classes: np.ndarray, n_features: int) -> dict[str, Statistic]:
        return {"class_moments_": ClassMoments.empty(classes, n_features, diagonal=True)}

    def _update(self) -> None:
        cm: ClassMoments = self.class_moments_
        self._alpha_ = check_alpha(self.alpha, self.force_alpha, cm.n_features, allow_array=True)
        alpha = self._alpha_
        self.class_count_ = cm.counts.copy()
        self.feature_count_ = np.stack([m.count * m.mean for m in cm.moments])
        denom = np.log(self.class_count_[:, None] + 2 * alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            flp = np.log(self.feature_count_ + alpha) - denom
            # log p(x_j = 0 | class) from the counts directly: exact where p is near 1
            neg = np.log(self.class_count_[:, None] - self.feature_count_ + alpha) - denom
        # a declared class without rows and alpha = 0 has 0/0: finite placeholder (see
        # BaseGenerativeClassifier._check_unseen)
        flp[self.class_count_ <= 0] = np.log(0.5)
        neg[self.class_count_ <= 0] = np.log(0.5)
        self.feature_log_prob_ = flp
        self._neg_log_prob_ = neg
        self.class_log_prior_ = discrete_class_log_prior(
            self.class_count_, self.class_prior, self.fit_prior
        )

    def _priors(self) -> np.ndarray:
        return np.exp(self.class_log_prior_)

    def _jll(self) -> tuple[Any, tuple]:
        flp, neg = self.feature_log_prob_, self._neg_log_prob_
        # alpha = 0: p = 0 (log p = -inf) or p = 1 (log(1 - p) = -inf) for features a class
        # always showed off or on; the GEMM takes the finite parts, the masks the rest
        never_on, never_off = np.isneginf(flp), np.isneginf(neg)
        on, off = np.where(never_on, 0.0, flp), np.where(never_off, 0.0, neg)
        const = self.class_log_prior_ + off.sum(axis=1)
        if not (never_on.any() or never_off.any()):
            return bernoulli_jll, (on - off, const)
        masks = (never_on.astype(np.float64), never_off.astype(np.float64))
        return bernoulli_jll, (on - off, const, *masks)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        return tags
