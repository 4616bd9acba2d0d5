"""Multinomial naive Bayes for counts (word counts), from one pass of class sums, sparse or
dense."""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar

import numpy as np
import scipy.sparse
from sklearn.utils._param_validation import Interval

from ddr.generative.classifier import (
    FEATURE,
    BaseGenerativeClassifier,
    check_alpha,
    discrete_class_log_prior,
)
from ddr.stats import ClassSums
from ddr.stats._input import is_dask
from ddr.stats._sparse import negative_entries
from ddr.stats.base import Statistic, StatSpec
from ddr.tags import DDRTags

__all__ = ["MultinomialNB", "check_counts_block", "multinomial_jll"]


def check_counts_block(X: Any, whom: str) -> Any:
    """``X`` unchanged, or a ValueError if a block (dense or CSR) holds negative values.

    The message starts as scikit-learn's (``Negative values in data passed to ...``)."""
    bad = negative_entries(X)
    if bad.size:
        raise ValueError(
            f"Negative values in data passed to {whom}: counts must be >= 0; got "
            f"{bad.size} negative value(s), e.g. {bad[:3].tolist()}"
        )
    return X


def multinomial_jll(
    X: Any, weights: np.ndarray, impossible: np.ndarray | None, log_prior: np.ndarray
) -> np.ndarray:
    """Joint log-likelihood of a block of counts: ``X @ weights.T + log_prior`` (a sparse
    product for CSR blocks, a GEMM for dense ones).

    ``weights`` are the finite log-probabilities; ``impossible`` (or None) marks the words a
    class never emits (``alpha = 0``): a row that holds one gets ``-inf`` for that class, and
    a zero count of it contributes nothing (``0 log 0 = 0``), where a GEMM with ``-inf``
    weights would give NaN.
    """
    if scipy.sparse.issparse(X):
        X = scipy.sparse.csr_matrix(X, dtype=np.float64)
    else:
        X = np.asarray(X, dtype=np.float64)
    out = np.asarray(X @ weights.T) + log_prior
    if impossible is not None:
        hits = np.asarray((X > 0).astype(np.float64) @ impossible.T) > 0
        out[hits] = -np.inf
    return out


class MultinomialNB(BaseGenerativeClassifier):
    """Naive Bayes for counts: one multinomial over the features per class.

    The fit is one pass of :class:`ddr.stats.ClassSums` (the weighted feature sums of each
    class); ``p(feature j | class c) = (N_cj + alpha_j) / (N_c + sum(alpha))``, the posterior
    mean under a Dirichlet(alpha) prior (Laplace smoothing for ``alpha = 1``).

    Parameters
    ----------
    alpha : float or array-like of shape (n_features,), default=1.0
        Additive (Dirichlet) smoothing; 0 for none.
    force_alpha : bool, default=True
        If False, ``alpha`` below 1e-10 is raised to 1e-10 with a warning (scikit-learn).
    fit_prior : bool, default=True
        Learn the class priors; if False, use uniform priors.
    class_prior : array-like of shape (n_classes,), optional
        Given class priors.

    Attributes
    ----------
    classes_, class_count_, class_log_prior_ : ndarray of shape (n_classes,)
    feature_count_ : ndarray of shape (n_classes, n_features)
        Weighted count of each feature in each class.
    feature_log_prob_ : ndarray of shape (n_classes, n_features)
        ``log p(feature j | class c)``.
    class_sums_ : ddr.stats.ClassSums
        The merged statistic (``partial_fit`` merges into it).

    Notes
    -----
    Input: numpy, dask or xarray rows, an in-memory scipy.sparse matrix, or a dask array of
    scipy.sparse CSR blocks (:func:`ddr.io.open_csr`); sparse rows are never densified.
    Negative values are refused (a ValueError naming them), at fit and at predict. Fractional
    counts (tf-idf, weighted tokens) are accepted, as by scikit-learn. Passes: ``fit`` reads
    the data once; ``predict`` once, one sparse product or GEMM per block.

    Without smoothing (``alpha=0``, or ``alpha_j = 0`` for some words) ``p(word | class)`` is
    0 for a word the class never emitted: a document holding it cannot come from that class,
    whose joint log-likelihood is ``-inf`` (probability exactly 0); a word the document does
    not hold costs nothing (``0 log 0 = 0``). The posterior over the classes that can have
    emitted the document is the limit of the smoothed one as alpha tends to 0. A document
    with a word no class emitted has no posterior (0/0): ``predict``, ``predict_proba`` and
    ``predict_log_proba`` raise a ValueError naming it (scikit-learn gives NaN probabilities
    and predicts ``classes_[0]``), ``predict_joint_log_proba`` gives ``-inf`` for every
    class.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
        "force_alpha": ["boolean"],
        "fit_prior": ["boolean"],
        "class_prior": ["array-like", None],
    }

    def __init__(
        self,
        *,
        alpha: Any = 1.0,
        force_alpha: bool = True,
        fit_prior: bool = True,
        class_prior: Any = None,
    ) -> None:
        self.alpha = alpha
        self.force_alpha = force_alpha
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
        # feature_count_ sums the data's values; the rest are counts and log-probabilities
        tags.xarray_units = {
            "feature_count_": 1,
            "feature_log_prob_": 0,
            "class_count_": 0,
            "class_log_prior_": 0,
        }
        return tags

    @property
    def _defined_without_data(self) -> bool:  # type: ignore[override]
        return bool(np.all(np.asarray(self._alpha_) > 0))

    def _transform_input(self, data: Any) -> Any:
        # checked blockwise, in the pass that reads the counts
        whom = f"{type(self).__name__} (input X)"
        if is_dask(data):
            return data.map_blocks(check_counts_block, whom, dtype=data.dtype, meta=data._meta)
        return check_counts_block(data, whom)

    def _statistics(self) -> dict[str, StatSpec]:
        return {"class_sums_": ClassSums.spec()}

    def _empty_statistics(self, classes: np.ndarray, n_features: int) -> dict[str, Statistic]:
        return {"class_sums_": ClassSums.empty(classes, n_features)}

    def _update(self) -> None:
        stat: ClassSums = self.class_sums_
        self._alpha_ = check_alpha(self.alpha, self.force_alpha, stat.n_features, allow_array=True)
        self.class_count_ = stat.counts.copy()
        self.feature_count_ = stat.sums.copy()
        smoothed = self.feature_count_ + self._alpha_
        total = smoothed.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            flp = np.log(smoothed) - np.log(total)
        # a declared class without rows and alpha = 0 has 0/0: a finite placeholder (see
        # BaseGenerativeClassifier._check_unseen)
        flp[total[:, 0] <= 0] = -np.log(stat.n_features)
        self.feature_log_prob_ = flp
        self.class_log_prior_ = discrete_class_log_prior(
            self.class_count_, self.class_prior, self.fit_prior
        )

    def _priors(self) -> np.ndarray:
        return np.exp(self.class_log_prior_)

    def _jll(self) -> tuple[Any, tuple]:
        flp = self.feature_log_prob_
        never = np.isneginf(flp)
        weights = np.where(never, 0.0, flp)
        return multinomial_jll, (weights, never.astype(np.float64) if never.any() else None,
                                 self.class_log_prior_)  # fmt: skip

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        tags.classifier_tags.poor_score = True  # as scikit-learn: its checks do not use counts
        return tags
