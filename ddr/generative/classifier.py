"""What every generative classifier in ddr shares: one pass of statistics, partial_fit by merge,
and predictions computed blockwise from the joint log-likelihood.

A generative classifier models ``p(x | y = c)`` and ``p(y = c)``. Its fit is the statistics of
the training rows (:mod:`ddr.stats`: ``ClassMoments``, ``CategoricalCounts``, ``Histogram``),
computed in ONE pass for any number of statistics, followed by a small solve on the client.
``partial_fit`` merges the statistics of the new batch into the stored ones and solves again,
so the model after any sequence of batches is the model of all rows seen: it does not
depend on how the data was batched or chunked.

Predictions are a module-level function of a row block and the small fitted arrays (the
*joint log-likelihood* ``log p(x, c)``), applied blockwise with :func:`ddr.base.map_rows`:
numpy in, numpy out; dask in, lazy dask out; DataArray in, DataArray out with a ``class``
dim. Probabilities are normalised with log-sum-exp, so they never underflow.

Declared classes that never occur (``partial_fit(..., classes=[...])``)
------------------------------------------------------------------------
A class declared in ``classes=`` with no sample yet has an empirical prior of 0: its
probability is exactly 0 and it is never predicted (scikit-learn's naive Bayes behaves the
same). If a prior > 0 is *given* for it (``priors=`` / ``class_prior=`` / ``fit_prior=False``),
its likelihood is needed; where the model defines no likelihood without data (Gaussian
naive Bayes, QDA, LDA, kernel naive Bayes, categorical models without smoothing) predictions
raise a ``ValueError`` naming the class. Smoothed categorical and Bernoulli models
(``alpha > 0``) give such a class the uniform posterior-mean likelihood, as scikit-learn does.

Rows that no class can have produced
------------------------------------
A row whose likelihood is 0 under every class (naive Bayes without smoothing, ``alpha=0``,
and a feature value no class showed in training) has no posterior: ``p(c | x)`` is 0/0.
``predict_joint_log_proba`` gives its ``-inf`` values; ``predict``, ``predict_proba``,
``predict_log_proba`` and ``score`` raise a ``ValueError`` that names the rows (scikit-learn
gives NaN probabilities and predicts the first class). A class that cannot have produced a
row while another can gets probability exactly 0 (log-probability ``-inf``): the limit of
the smoothed posterior as alpha tends to 0.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Hashable
from typing import Any

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ddr.base import FEATURE, DDRMixin, FitPlan, check_some_weight, fit_context, map_rows
from ddr.stats import compute, lazy
from ddr.stats._checks import check_labels, label_kind, sum_is_finite
from ddr.stats._input import Rows, is_dask, is_xarray
from ddr.stats.base import Statistic, StatSpec
from ddr.tags import DDRTags, always, fixed_passes

__all__ = [
    "FEATURE",
    "BaseGenerativeClassifier",
    "check_alpha",
    "check_priors",
    "check_some_class_possible",
    "class_log_prior",
    "discrete_class_log_prior",
    "empirical_or_given",
    "joint_log_likelihood_block",
    "log_proba_block",
    "predict_block",
    "proba_block",
    "tile_rows",
]


# ------------------------------------------------------------------ blockwise functions
# Module-level so dask can ship them to workers; ``jll`` is itself a module-level function of
# (block, *params) returning the (n_block, n_classes) joint log-likelihood.
def joint_log_likelihood_block(X: np.ndarray, jll: Callable, params: tuple) -> np.ndarray:
    """Joint log-likelihood ``log p(x, c)`` of a block, shape (n_block, n_classes)."""
    return jll(X, *params)


def check_some_class_possible(j: np.ndarray) -> np.ndarray:
    """``j`` unchanged, or a ValueError for rows that no class can have produced.

    A row whose joint log-likelihood is ``-inf`` for every class has ``p(x) = 0``: its
    posterior is 0/0, undefined (log-sum-exp would give NaN and argmax class 0). Models
    without smoothing (``alpha=0``) get there when a row holds a feature value that no class
    showed in training.

    Parameters
    ----------
    j : ndarray of shape (n_block, n_classes)
        Joint log-likelihood of a block.

    Returns
    -------
    ndarray of shape (n_block, n_classes)
        ``j``.
    """
    if j.shape[1] and sum_is_finite(j):  # no -inf at all (one sum, not a mask of the block)
        return j
    dead = np.isneginf(j).all(axis=1) if j.shape[1] else np.zeros(j.shape[0], dtype=bool)
    if dead.any():
        rows = np.flatnonzero(dead)
        shown = ", ".join(map(str, rows[:5].tolist())) + (", ..." if rows.size > 5 else "")
        raise ValueError(
            f"{rows.size} row(s) of this block of {j.shape[0]} (at {shown}, counted from its "
            "first row as 0) have probability 0 under every class: the joint log-likelihood is "
            "-inf for all of them and the posterior 0/0, undefined. Without smoothing "
            "(alpha=0) a row is impossible for a class when it holds a feature value the class "
            "never showed in training. predict_joint_log_proba gives the -inf values; a small "
            "alpha > 0 gives every such row a posterior (as alpha tends to 0 it goes to the "
            "classes that miss the fewest of the row's values)"
        )
    return j


#: float64 scratch bytes a row tile of a blockwise joint log-likelihood aims at: its
#: temporaries then stay in a core's cache between the steps that make and use them (a
#: float64 temporary of the whole block per step made GaussianNB.predict of a 100 000 x 100
#: float32 chunk take 98 ms on one core, against 60 ms in tiles)
TILE_BYTES = 2**20


def tile_rows(width: int) -> int:
    """Rows of a tile of a blockwise computation that keeps ``width`` float64 values a row.

    At least 256 rows, so that a GEMM against a large matrix (QDA's whitening on thousands
    of features) reads that matrix once for many rows.

    Parameters
    ----------
    width : int
        float64 values of scratch per row of the tile.

    Returns
    -------
    int
    """
    return max(256, TILE_BYTES // (8 * max(width, 1)))


def _max_and_sum_exp(j: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(top, e, s)``: each row's largest finite-or-zero value, ``exp(j - top)`` and its
    row sums, as ``scipy.special.logsumexp`` shifts them (a non-finite maximum is replaced by
    0); done here on the small (n_block, n_classes) array without scipy's generic checks,
    which cost more than the exponentials."""
    top = j.max(axis=1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.exp(j - top)
    return top, e, e.sum(axis=1, keepdims=True)


def log_proba_block(X: np.ndarray, jll: Callable, params: tuple) -> np.ndarray:
    """Log posterior ``log p(c | x)`` of a block, normalised by log-sum-exp; a ValueError for
    rows that no class can have produced (:func:`check_some_class_possible`)."""
    j = check_some_class_possible(jll(X, *params))
    with np.errstate(invalid="ignore", divide="ignore"):
        top, _, s = _max_and_sum_exp(j)
        return j - (top + np.log(s))


def proba_block(X: np.ndarray, jll: Callable, params: tuple) -> np.ndarray:
    """Posterior ``p(c | x)`` of a block: ``exp(j - top) / sum`` (one exponential a value,
    no logarithm)."""
    j = check_some_class_possible(jll(X, *params))
    with np.errstate(invalid="ignore"):
        _, e, s = _max_and_sum_exp(j)
        e /= s
    return e


def predict_block(X: np.ndarray, jll: Callable, params: tuple, classes: np.ndarray) -> np.ndarray:
    """The most probable class of each row of a block; a ValueError for rows that no class
    can have produced (:func:`check_some_class_possible`), which have none."""
    return classes[np.argmax(check_some_class_possible(jll(X, *params)), axis=1)]


# --------------------------------------------------------------------------- priors
def check_priors(
    priors: Any, n_classes: int, *, name: str = "priors", renormalise: str
) -> np.ndarray:
    """Validate user-given class priors.

    Parameters
    ----------
    priors : array-like of shape (n_classes,)
    n_classes : int
    renormalise : {"raise", "warn", "none"}
        What to do when the priors do not sum to 1: raise (scikit-learn's GaussianNB),
        warn and renormalise (its LDA), or use them as given (its discrete naive Bayes and QDA).
    """
    p = np.asarray(priors, dtype=np.float64)
    if p.ndim != 1 or p.shape[0] != n_classes:
        raise ValueError(
            f"{name} must have one entry per class ({n_classes}); got shape {p.shape}. "
            "Number of priors must match number of classes."
        )
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError(f"{name} must be finite and non-negative; got {p.tolist()}")
    total = p.sum()
    if renormalise == "raise" and not np.isclose(total, 1.0):
        raise ValueError(f"The sum of the priors should be 1; {name} sums to {total:g}")
    if renormalise == "warn" and abs(total - 1.0) > 1e-5:
        import warnings

        warnings.warn("The priors do not sum to 1. Renormalizing", UserWarning, stacklevel=3)
        p = p / total
    return p


def _log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p)


# ------------------------------------------------------------------------ base class
class BaseGenerativeClassifier(DDRMixin, ClassifierMixin, BaseEstimator, abc.ABC):
    """Fit by one pass of statistics, ``partial_fit`` by merge, blockwise predictions.

    Subclasses implement:

    - ``_statistics()``: ``{fitted attribute name: StatSpec}``, the statistics of one pass;
    - ``_empty_statistics(classes, n_features)``: the same statistics with declared classes
      and no rows (the identity of ``merge``), for the first ``partial_fit``;
    - ``_update()``: the fitted parameters from the stored statistics (must set
      ``class_count_``), and ``_priors()``: the class priors the model uses;
    - ``_jll()``: ``(function, params)`` with ``function(block, *params)`` the joint
      log-likelihood of a block (a module-level function, shipped to dask workers);
    - optionally ``_transform_input(data)`` (e.g. binarisation, applied lazily) and
      ``_defined_without_data`` (whether a declared class without samples still has a
      likelihood, e.g. a smoothed categorical model).
    """

    _abstract_estimator = True
    #: dtypes accepted by scikit-learn's validation of in-memory input
    _fit_dtype: Any = (np.float64, np.float32)
    #: whether an unseen declared class has a likelihood (smoothed categorical models)
    _defined_without_data: bool = False

    # --------------------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def _statistics(self) -> dict[str, StatSpec]:
        """The statistics of one pass, by the fitted attribute that stores them."""

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = fixed_passes(1)
        tags.fit.statistics = self._widest_pass
        tags.fit.mergeable = always  # partial_fit merges the statistics of each batch
        return tags

    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        return [(spec, n_features) for spec in self._statistics().values()]

    @abc.abstractmethod
    def _empty_statistics(self, classes: np.ndarray, n_features: int) -> dict[str, Statistic]:
        """The same statistics for declared classes and no rows (the merge identity)."""

    @abc.abstractmethod
    def _update(self) -> None:
        """Set the fitted parameters from the stored statistics."""

    @abc.abstractmethod
    def _priors(self) -> np.ndarray:
        """The class priors the fitted model uses, shape (n_classes,)."""

    @abc.abstractmethod
    def _jll(self) -> tuple[Callable, tuple]:
        """``(function, params)``: the blockwise joint log-likelihood and its arrays."""

    def _transform_input(self, data: Any) -> Any:
        """Map the (numpy or dask) rows before statistics and predictions; identity here."""
        return data

    # ------------------------------------------------------------------- the pass
    def _validate_y(self, y: Any, rows: Rows) -> Any:
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        if not is_dask(y) and not is_xarray(y) and not rows.is_lazy:
            y = column_or_1d(y, warn=True)
            if y.dtype.kind == "O" or y.dtype.kind in "fiub":
                check_classification_targets(y)
        y = self._labels(y, rows)
        if not rows.is_lazy:
            y = check_labels(np.asarray(y), rows.shape[0])
        return y

    def _one_pass(
        self, X: Any, y: Any, sample_weight: Any, sample_dim: Hashable | None, *, reset: bool
    ) -> dict[str, Statistic]:
        """Validate the input and compute every statistic in one pass over the rows."""
        rows = self._rows(X, reset=reset, sample_dim=sample_dim, dtype=self._fit_dtype)
        y = self._validate_y(y, rows)
        specs = self._statistics()
        data = self._transform_input(rows.data)
        stats = compute(list(specs.values()), data, y, sample_weight)
        return dict(zip(specs, stats, strict=True))

    # what ddr.merge_fits asks: the per-class statistics, by fitted attribute
    def _fit_statistics(self) -> dict[str, Statistic] | None:
        if not hasattr(self, "classes_"):
            return None
        return {name: getattr(self, name) for name in self._statistics()}

    def _solve_statistics(self, stats: dict[str, Statistic]) -> BaseGenerativeClassifier:
        self._store(stats)
        return self

    def _store(self, stats: dict[str, Statistic]) -> None:
        for name, stat in stats.items():
            setattr(self, name, stat)
        self.classes_ = np.asarray(next(iter(stats.values())).classes)
        self._update()

    # ------------------------------------------------------------------ fit API
    @fit_context
    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, sample_dim: Hashable | None = None
    ) -> BaseGenerativeClassifier:
        """Fit the model in one pass over the rows of ``X``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
            Class labels (integers or strings).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative frequency weights.
        sample_dim : hashable, optional
            The sample dimension of a DataArray ``X``.

        Returns
        -------
        self
        """
        return self._fit_plan(X, y, sample_weight, sample_dim=sample_dim).run()

    @fit_context
    def _fit_plan(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> FitPlan:
        """The fit as one lazy pass of every statistic and the solve (see :class:`FitPlan`)."""
        self._forget()
        self._choose_algorithm(X)
        rows = self._rows(X, reset=True, sample_dim=sample_dim, dtype=self._fit_dtype)
        y = self._validate_y(y, rows)
        specs = self._statistics()
        data = self._transform_input(rows.data)
        stats = lazy(list(specs.values()), data, y, sample_weight)
        return FitPlan.over(rows, stats, lambda value: self._finish_fit(specs, value))

    def _choose_algorithm(self, X: Any) -> None:
        """Hook for subclasses whose statistics depend on the size of the data."""

    def _finish_fit(self, specs: dict[str, StatSpec], value: Any) -> BaseGenerativeClassifier:
        stats = dict(zip(specs, value, strict=True))
        counts = self._class_counts(stats)
        check_some_weight(counts, type(self).__name__)
        classes = np.asarray(next(iter(stats.values())).classes)
        seen = classes[counts > 0]
        if seen.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes to fit; got "
                f"{seen.shape[0]} class with samples ({seen.tolist()}). A classifier can't "
                "train when only one class is present."
            )
        self._store(stats)
        return self

    @fit_context
    def partial_fit(
        self,
        X: Any,
        y: Any,
        classes: Any = None,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> BaseGenerativeClassifier:
        """Update the model with a batch: merge its statistics into the stored ones.

        The result equals ``fit`` on all batches together (the statistics are merged
        exactly), whatever the batch sizes and their order.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
        classes : array-like of shape (n_classes,), optional
            Every class that can appear in ``y``. Required on the first call, optional later
            (it must then equal ``classes_``).
        sample_weight : array-like of shape (n_samples,), optional
        sample_dim : hashable, optional

        Returns
        -------
        self
        """
        first = not hasattr(self, "classes_")
        if classes is not None:
            declared = np.asarray(classes)
            declared = check_labels(declared, declared.shape[0], name="classes")
            if np.unique(declared).shape[0] != declared.shape[0]:
                raise ValueError(f"classes must not contain duplicates; got {declared.tolist()}")
            declared = np.unique(declared)
            if not first and not np.array_equal(declared, self.classes_):
                raise ValueError(
                    f"`classes={declared.tolist()!r}` is not the same as on last call to "
                    f"partial_fit, was: {self.classes_.tolist()!r}"
                )
            if declared.shape[0] < 2:
                raise ValueError(
                    f"classes must hold at least 2 classes for a classifier; got 1 class "
                    f"({declared.tolist()})"
                )
        elif first:
            raise ValueError("classes must be passed on the first call to partial_fit.")
        batch = self._one_pass(X, y, sample_weight, sample_dim, reset=first)
        known = declared if first else self.classes_
        new = next(iter(batch.values())).classes
        same_kind = label_kind(new) == label_kind(known)
        unknown = np.setdiff1d(new, known) if same_kind else new
        if unknown.size:
            raise ValueError(
                f"The target label(s) {np.asarray(unknown).tolist()} in y do not exist in the "
                f"initial classes {known.tolist()}"
            )
        if first:
            acc = self._empty_statistics(known, self.n_features_in_)
        else:
            acc = {name: getattr(self, name) for name in batch}
        merged = {name: acc[name].merge(stat) for name, stat in batch.items()}
        self._store(merged)
        return self

    def _forget(self) -> None:
        for name in (*self._statistics(), "classes_"):
            if hasattr(self, name):
                delattr(self, name)

    @staticmethod
    def _class_counts(stats: dict[str, Statistic]) -> np.ndarray:
        stat = next(iter(stats.values()))
        return stat.class_counts if hasattr(stat, "class_counts") else stat.counts

    # ------------------------------------------------------------------ predict API
    def _check_unseen(self) -> None:
        """Raise if a declared class without samples has a positive prior but no likelihood."""
        if self._defined_without_data:
            return
        priors = np.asarray(self._priors())
        unseen = (self.class_count_ <= 0) & (priors > 0)
        if unseen.any():
            names = self.classes_[unseen].tolist()
            raise ValueError(
                f"class(es) {names} were declared in classes= but no sample of them has been "
                f"seen, and their prior is positive ({priors[unseen].tolist()}"
                f"); {type(self).__name__} has no likelihood for a class without data. Feed "
                "samples of these classes with partial_fit, or give them a prior of 0."
            )

    def _predict_rows(self, X: Any, sample_dim: Hashable | None) -> Rows:
        check_is_fitted(self)
        self._check_unseen()
        rows = self._rows(X, reset=False, sample_dim=sample_dim, dtype=self._fit_dtype)
        data = self._transform_input(rows.data)
        return rows.with_data(data)

    def _map(
        self, X: Any, sample_dim: Hashable | None, fn: Callable, name: str, units: int | None
    ) -> Any:
        rows = self._predict_rows(X, sample_dim)
        jll, params = self._jll()
        return map_rows(
            rows, fn, n_out=len(self.classes_), dtype=np.float64, new_dim="class",
            new_coords=self.classes_, name=name, args=(jll, params),
            method=f"{type(self).__name__}.predict_{name}", units=self._output_units(units),
        )  # fmt: skip

    def predict_joint_log_proba(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Joint log-probability ``log p(x, c) = log p(c) + log p(x | c)``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``; a DataArray has a ``class`` dim.
        """
        # a log-density: its units (those of the data to the power -n_features) not stated
        return self._map(X, sample_dim, joint_log_likelihood_block, "joint_log_proba", None)

    def predict_log_proba(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Log posterior ``log p(c | x)``, normalised by log-sum-exp (no underflow).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, n_classes)
        """
        return self._map(X, sample_dim, log_proba_block, "log_proba", 0)

    def predict_proba(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Posterior probabilities ``p(c | x)``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, n_classes)
        """
        return self._map(X, sample_dim, proba_block, "proba", 0)

    def predict(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """The most probable class of each row (one blockwise pass).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples,)
            Labels with the dtype of ``classes_``.
        """
        rows = self._predict_rows(X, sample_dim)
        jll, params = self._jll()
        return map_rows(
            rows, predict_block, n_out=None, dtype=self.classes_.dtype, name="predict",
            args=(jll, params, self.classes_), method=f"{type(self).__name__}.predict",
        )  # fmt: skip

    def score(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        *,
        sample_dim: Hashable | None = None,
    ) -> float:
        """Mean accuracy on ``(X, y)``; one pass over dask input.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : array-like, dask array or DataArray of shape (n_samples,)
            True labels.
        sample_weight : array-like of shape (n_samples,), optional
            Weights of the rows in the mean.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        float
        """
        pred = self.predict(X, sample_dim=sample_dim)
        if is_xarray(pred):
            pred = pred.data
        if is_xarray(y):
            y = y.data
        if not is_dask(pred):
            y = np.asarray(y.compute() if is_dask(y) else y).ravel()
            return float(accuracy_score(y, pred, sample_weight=sample_weight))
        chunks = (pred.chunks[0],)
        y = (y if is_dask(y) else da.from_array(np.asarray(y).ravel(), chunks=chunks)).rechunk(
            chunks
        )
        hit = (pred == y).astype(np.float64)
        if sample_weight is None:
            return float(hit.mean().compute())
        w = (
            sample_weight
            if is_dask(sample_weight)
            else da.from_array(np.asarray(sample_weight, dtype=np.float64), chunks=chunks)
        )
        w = w.rechunk(chunks)
        return float(((hit * w).sum() / w.sum()).compute())


def empirical_or_given(
    counts: np.ndarray, given: Any, *, name: str, renormalise: str
) -> np.ndarray:
    """Class priors: the given ones (validated) or the empirical frequencies of ``counts``."""
    if given is not None:
        return check_priors(given, counts.shape[0], name=name, renormalise=renormalise)
    total = counts.sum()
    return counts / total if total > 0 else np.zeros_like(counts)


def class_log_prior(priors: np.ndarray) -> np.ndarray:
    """``log(priors)`` with ``log 0 = -inf`` and no warning."""
    return _log(np.asarray(priors, dtype=np.float64))


def check_alpha(alpha: Any, force_alpha: bool, n_features: int, *, allow_array: bool) -> Any:
    """Validate an additive smoothing ``alpha`` as scikit-learn's discrete naive Bayes does.

    Returns a float or an array of shape (n_features,). With ``force_alpha=False`` values
    below 1e-10 are raised to 1e-10 with a warning.
    """
    numeric = isinstance(alpha, (int, float, np.integer, np.floating)) or (
        allow_array and np.ndim(alpha) == 1 and np.asarray(alpha).dtype.kind in "iuf"
    )
    if isinstance(alpha, bool) or not numeric:
        expected = "a float or an array of shape (n_features,)" if allow_array else "a float"
        raise TypeError(f"alpha must be {expected} >= 0; got {alpha!r}")
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim == 1 and a.shape[0] != n_features:
        raise ValueError(
            "When alpha is an array, it should contains `n_features`. "
            f"Got {a.shape[0]} elements instead of {n_features}."
        )
    if not np.isfinite(a).all() or (a < 0).any():
        raise ValueError(f"alpha must be finite and >= 0; got {alpha!r}")
    if a.min() < 1e-10 and not force_alpha:
        import warnings

        warnings.warn(
            "alpha too small will result in numeric errors, setting alpha = 1.0e-10. Use "
            "`force_alpha=True` to keep alpha unchanged.",
            UserWarning,
            stacklevel=3,
        )
        a = np.maximum(a, 1e-10)
    return float(a) if a.ndim == 0 else a


def discrete_class_log_prior(counts: np.ndarray, class_prior: Any, fit_prior: bool) -> np.ndarray:
    """``class_log_prior_`` of scikit-learn's discrete naive Bayes: given, empirical or uniform."""
    k = counts.shape[0]
    if class_prior is not None:
        return class_log_prior(check_priors(class_prior, k, name="class_prior", renormalise="none"))
    if fit_prior:
        total = counts.sum()
        return class_log_prior(counts / total if total > 0 else np.zeros(k))
    return np.full(k, -np.log(k))
