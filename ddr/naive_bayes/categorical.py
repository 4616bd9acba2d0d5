"""Categorical naive Bayes with additive (Dirichlet) smoothing, from one pass of counts."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.utils._param_validation import Interval

from ddr.generative.categories import CONTINUOUS, as_category_codes, smoothed_log_probs
from ddr.generative.classifier import (
    BaseGenerativeClassifier,
    check_alpha,
    discrete_class_log_prior,
)
from ddr.stats import CategoricalCounts
from ddr.stats._input import is_dask
from ddr.stats.base import Statistic, StatSpec
from ddr.stats.categorical import MAX_CATEGORIES
from ddr.tags import DDRTags

__all__ = ["CategoricalNB", "categorical_jll"]


def categorical_jll(X: np.ndarray, table: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    """Joint log-likelihood of a block of category codes, shape (n_block, n_classes).

    ``table[j, c, k]`` is ``log p(x_j = c | class k)``; its last column holds the smoothed
    probability of a category never seen in training, used for every code beyond the table.
    """
    codes = np.minimum(as_category_codes(X), table.shape[1] - 1)
    jll = np.broadcast_to(log_prior, (codes.shape[0], log_prior.shape[0])).copy()
    for j in range(codes.shape[1]):
        jll += table[j][codes[:, j]]
    return jll


class CategoricalNB(BaseGenerativeClassifier):
    """Naive Bayes for categorical features, with additive (Dirichlet) smoothing.

    Each feature is coded ``0, 1, ..., K_j - 1`` (e.g. with scikit-learn's OrdinalEncoder).
    The fit is one pass of :class:`ddr.stats.CategoricalCounts`; ``p(x_j = c | class k)`` is
    ``(N_kjc + alpha) / (N_k + alpha K_j)``, the posterior mean under a symmetric
    Dirichlet(alpha) prior (the multinomial MLE for ``alpha=0``).

    Parameters
    ----------
    alpha : float, default=1.0
        Additive smoothing (0 for none).
    force_alpha : bool, default=True
        If False, ``alpha`` below 1e-10 is raised to 1e-10 with a warning (scikit-learn).
    fit_prior : bool, default=True
        Learn the class priors; if False, use uniform priors.
    class_prior : array-like of shape (n_classes,), optional
        Given class priors.
    min_categories : int or array-like of shape (n_features,), optional
        Minimum number of categories per feature (``K_j = max(max code + 1, min_categories)``).

    Attributes
    ----------
    classes_, class_count_ : ndarray of shape (n_classes,)
    class_log_prior_ : ndarray of shape (n_classes,)
    category_count_ : list of ndarray of shape (n_classes, n_categories_[j])
    feature_log_prob_ : list of ndarray of shape (n_classes, n_categories_[j])
    n_categories_ : ndarray of shape (n_features,)
    category_counts_ : ddr.stats.CategoricalCounts
        The merged statistic.

    Notes
    -----
    A category never seen in training (a code below ``n_categories_[j]`` with no count, or
    any code at or beyond it) gets the probability of a zero count,
    ``alpha / (N_k + alpha K_j)``: smoothing handles it (scikit-learn raises an IndexError
    for codes beyond the table). Negative or non-integer codes raise a ValueError.
    Passes: ``fit`` reads the data once, ``predict`` once.

    Without smoothing (``alpha=0``) that probability is 0: a row holding a category a class
    never showed for that feature cannot come from the class, whose joint log-likelihood is
    ``-inf`` (probability exactly 0; the posterior over the other classes is the limit of the
    smoothed one as alpha tends to 0). A row that no class can produce has no posterior:
    ``predict``, ``predict_proba`` and ``predict_log_proba`` raise a ValueError naming it,
    ``predict_joint_log_proba`` gives ``-inf`` for every class.
    """

    _fit_dtype = "numeric"
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "alpha": [Interval(Real, 0, None, closed="left")],
        "force_alpha": ["boolean"],
        "fit_prior": ["boolean"],
        "class_prior": ["array-like", None],
        "min_categories": [None, "array-like", Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        *,
        alpha: float = 1.0,
        force_alpha: bool = True,
        fit_prior: bool = True,
        class_prior: Any = None,
        min_categories: Any = None,
    ) -> None:
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.min_categories = min_categories

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.solve_params = frozenset(
            {"alpha", "force_alpha", "fit_prior", "class_prior", "min_categories"}
        )
        tags.checks.expected_failed_checks = {
            "check_sample_weight_equivalence_on_dense_data": CONTINUOUS,
            "check_classifiers_one_label_sample_weights": CONTINUOUS,
        }
        return tags

    @property
    def _defined_without_data(self) -> bool:  # type: ignore[override]
        return float(self._alpha_) > 0

    def _transform_input(self, data: Any) -> Any:
        # validated codes (int64) on the fly, in the same pass as the counts
        if is_dask(data):
            return data.map_blocks(as_category_codes, dtype=np.int64)
        return as_category_codes(data)

    def _statistics(self) -> dict[str, StatSpec]:
        return {"category_counts_": CategoricalCounts.spec()}

    def _empty_statistics(self, classes: np.ndarray, n_features: int) -> dict[str, Statistic]:
        empty = CategoricalCounts(
            classes, np.zeros((len(classes), n_features, 0)), np.zeros(n_features, np.int64)
        )
        return {"category_counts_": empty}

    def _n_categories(self, seen: np.ndarray) -> np.ndarray:
        if self.min_categories is None:
            return seen.astype(np.int64)
        mc = np.asarray(self.min_categories)
        if not np.issubdtype(mc.dtype, np.signedinteger) and not np.issubdtype(
            mc.dtype, np.unsignedinteger
        ):
            raise ValueError(f"'min_categories' should have integral type. Got {mc.dtype} instead.")
        if mc.ndim not in (0, 1) or (mc.ndim == 1 and mc.shape != seen.shape):
            raise ValueError(
                f"'min_categories' should have shape ({seen.shape[0]},) when an array-like is "
                f"provided. Got {mc.shape} instead."
            )
        if (mc < 1).any() or (mc > MAX_CATEGORIES).any():
            raise ValueError(
                f"min_categories must be between 1 and {MAX_CATEGORIES}; got {mc.tolist()}"
            )
        return np.maximum(seen, mc).astype(np.int64)

    def _update(self) -> None:
        stat: CategoricalCounts = self.category_counts_
        self._alpha_ = check_alpha(self.alpha, self.force_alpha, stat.n_features, allow_array=False)
        self.n_categories_ = self._n_categories(stat.n_categories)
        cc, lp, unseen = smoothed_log_probs(stat.counts, self.n_categories_, self._alpha_)
        self.category_count_ = cc
        self.feature_log_prob_ = lp
        self._unseen_log_prob_ = unseen
        self.class_count_ = stat.class_counts.copy()
        self.class_log_prior_ = discrete_class_log_prior(
            self.class_count_, self.class_prior, self.fit_prior
        )

    def _priors(self) -> np.ndarray:
        return np.exp(self.class_log_prior_)

    def _jll(self) -> tuple[Any, tuple]:
        d, k = self._unseen_log_prob_.shape
        width = int(self.n_categories_.max()) + 1
        table = np.empty((d, width, k))
        for j in range(d):
            cj = int(self.n_categories_[j])
            table[j, :cj] = self.feature_log_prob_[j].T
            table[j, cj:] = self._unseen_log_prob_[j]
        return categorical_jll, (table, self.class_log_prior_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.positive_only = True
        return tags
