"""``GridSearchCV`` and ``cross_validate``: scikit-learn's API over the two-pass search.

The passes, solves and merges are :mod:`ddr.model_selection._passes`'; here are the
estimator a user holds (its parameters, ``fit``, ``plan``, the refitted model's methods) and
the results in scikit-learn's layout (``cv_results_``: one row per candidate, masked
``param_<name>`` arrays, ``split<k>_test_score``, ranks with failed candidates tied last).
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Real
from typing import Any

import dask
import numpy as np
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, MetaEstimatorMixin
from sklearn.model_selection import ParameterGrid
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ddr.model_selection._passes import Outcome, Search, SearchPlan, check_estimator
from ddr.model_selection._scoring import check_scoring
from ddr.model_selection._split import Folds, HashKFold

__all__ = ["GridSearchCV", "cross_validate"]


def _check_grid(estimator: Any, param_grid: Any) -> list[dict[str, Any]]:
    """The candidates, in scikit-learn's order, each naming parameters of ``estimator``."""
    candidates = list(ParameterGrid(param_grid))
    valid = estimator.get_params(deep=False)
    for cand in candidates:
        unknown = sorted(set(cand) - set(valid))
        if unknown:
            raise ValueError(
                f"Invalid parameter {unknown[0]!r} for estimator {type(estimator).__name__} in "
                f"param_grid. Valid parameters are: {sorted(valid)!r}."
            )
    return candidates


def _param_arrays(candidates: list[dict[str, Any]]) -> dict[str, np.ma.MaskedArray]:
    """``param_<name>`` masked arrays, as scikit-learn lays them out (masked where a
    candidate of a list of grids does not set the parameter)."""
    values: dict[str, dict[int, Any]] = {}
    for i, cand in enumerate(candidates):
        for name, value in cand.items():
            values.setdefault(f"param_{name}", {})[i] = value
    out = {}
    for key, given in values.items():
        try:
            arr = np.array(list(given.values()))
            dtype = arr.dtype if arr.dtype.kind != "U" and arr.ndim == 1 else np.dtype(object)
        except ValueError:  # sequences of different lengths
            dtype = np.dtype(object)
        ma = np.ma.MaskedArray(np.empty(len(candidates), dtype=dtype), mask=True)
        for i, value in given.items():
            ma[i] = value
        out[key] = ma
    return out


def _results(
    candidates: list[dict[str, Any]], outcome: Outcome
) -> dict[str, Any]:  # fmt: skip
    """``cv_results_`` in scikit-learn's layout."""
    results: dict[str, Any] = {}
    for name, array in (("fit_time", outcome.fit_times), ("score_time", outcome.score_times)):
        results[f"mean_{name}"] = array.mean(axis=1)
        results[f"std_{name}"] = array.std(axis=1)
    results.update(_param_arrays(candidates))
    results["params"] = candidates
    scores = outcome.scores
    for k in range(scores.shape[1]):
        results[f"split{k}_test_score"] = scores[:, k]
    means = np.average(scores, axis=1)
    results["mean_test_score"] = means
    results["std_test_score"] = np.sqrt(np.average((scores - means[:, None]) ** 2, axis=1))
    if np.isnan(means).all():
        rank = np.ones_like(means, dtype=np.int32)
    else:  # failed candidates tie with the worst (scikit-learn's rule)
        filled = np.where(np.isnan(means), np.nanmin(means) - 1, means)
        rank = rankdata(-filled, method="min").astype(np.int32)
    results["rank_test_score"] = rank
    return results


def _has(method: str) -> Callable[[Any], bool]:
    """For ``available_if``: the refitted model (or the estimator, before fit) has it."""

    def check(self: Any) -> bool:
        getattr(getattr(self, "best_estimator_", self.estimator), method)
        return True

    return check


class GridSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Exhaustive search over a parameter grid, in two passes over the data.

    For ddr estimators whose ``fit`` is one pass of mergeable statistics (PCA with the
    covariance solver, the naive Bayes models, LDA, QDA, the Gaussian and categorical
    densities, CCA, PLSSVD, ...): each fold's statistics are computed once (pass 1), the
    model of every (fold, candidate) pair is solved on the client from the merge of the other
    folds' statistics, every pair is scored on its held-out rows (pass 2), and the best
    candidate is refitted from the merge of all folds (no third pass). Scores equal
    scikit-learn's ``GridSearchCV`` with ``KFold(cv)`` on the same rows, to round-off.

    Parameters
    ----------
    estimator : ddr estimator
        Its fit must be one pass of mergeable statistics for every candidate
        (``tags.fit.mergeable``), or one that also keeps its rows lazily
        (``tags.fit.searchable``: an exact KernelDensity); grid parameters in its
        ``tags.fit.solve_params`` share their statistics, others get their own (in the same
        pass).
    param_grid : dict or list of dict
        Parameter names to lists of values (scikit-learn's ``ParameterGrid``).
    scoring : {"accuracy", "neg_log_loss", "mean_log_likelihood", "total_log_likelihood"} \
or None, default None
        None: the estimator's ``score`` (accuracy for classifiers, the mean log-likelihood
        for PCA, the densities and CCA, the total log-likelihood of the held-out rows for
        KernelDensity, as scikit-learn's).
    cv : int, sklearn.model_selection.KFold or HashKFold, default 5
        An int: that many contiguous folds (scikit-learn's ``KFold`` without shuffling, also
        for classifiers, where scikit-learn stratifies). ``HashKFold(n_splits, seed=...)``:
        shuffled folds that do not depend on chunking.
    refit : bool, default True
        Solve the best candidate from all folds' statistics (``best_estimator_``).
    error_score : "raise" or float, default nan
        The score of a (fold, candidate) whose solve or scoring fails (with a
        ``FitFailedWarning``), or "raise".

    Attributes
    ----------
    cv_results_ : dict of ndarray
        scikit-learn's layout: ``params``, ``param_<name>`` (masked arrays),
        ``split<k>_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``, and ``mean/std_fit_time`` (the client's solve plus a share of
        pass 1) and ``mean/std_score_time`` (a share of pass 2), each of shape
        (n_candidates,).
    best_index_ : int
    best_score_ : float
    best_params_ : dict
    best_estimator_ : estimator
        Only with ``refit=True``.
    refit_time_ : float
        Seconds of the refit's solve.
    n_splits_ : int
    scoring_ : str
        The scoring used (``scoring=None`` resolved).
    plan_ : SearchPlan
        What the search cost.
    pass_times_ : dict
        Seconds of pass 1 (``"statistics"``), the solves and pass 2 (``"scores"``).
    n_features_in_ : int
    multimetric_ : bool
        False (one scoring).

    Notes
    -----
    The data is read twice whatever the folds and candidates (see :meth:`plan`); nothing
    n-sized reaches the client. numpy input is read through dask with local threads.

    Examples
    --------
    >>> import numpy as np
    >>> from ddr import PCA
    >>> from ddr.model_selection import GridSearchCV
    >>> X = np.random.default_rng(0).normal(size=(200, 5))
    >>> search = GridSearchCV(PCA(), {"n_components": [1, 2, 3]}, cv=4).fit(X)
    >>> search.plan_.n_passes
    2
    """

    def __init__(
        self,
        estimator: Any,
        param_grid: Any,
        *,
        scoring: str | None = None,
        cv: int | HashKFold | Any = 5,
        refit: bool = True,
        error_score: Any = np.nan,
    ) -> None:
        self.estimator = estimator
        self.param_grid = param_grid
        self.scoring = scoring
        self.cv = cv
        self.refit = refit
        self.error_score = error_score

    def _search(self, X: Any, y: Any, params: dict[str, Any]) -> Search:
        check_estimator(self.estimator)
        if not isinstance(self.refit, bool):
            raise ValueError(f"refit must be True or False; got {self.refit!r}")
        if self.error_score != "raise" and not isinstance(self.error_score, Real):
            raise ValueError(f"error_score must be 'raise' or a number; got {self.error_score!r}")
        candidates = _check_grid(self.estimator, self.param_grid)
        return Search(self.estimator, candidates, self.cv, self.scoring, X, y, params)

    def plan(self, X: Any, y: Any = None, **params: Any) -> SearchPlan:
        """What :meth:`fit` on these data will cost, without reading them.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            Or a grid: a DataArray of any number of dims with ``sample_dims``.
        y : array-like, dask array or DataArray of shape (n_samples,), optional
        **params
            What the estimator's ``fit`` takes (``sample_weight``, ``sample_dim`` or
            ``sample_dims``).

        Returns
        -------
        SearchPlan
            Its ``n_passes`` is 2; ``str()`` of it says it in words. A grid on dask has its
            mask found here (its first sample read), as :meth:`fit` does.
        """
        return self._search(X, y, params).describe(self.refit)

    def fit(self, X: Any, y: Any = None, **params: Any) -> GridSearchCV:
        """Run the search: two passes over the data.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            Or a grid (time x lat x lon, ...): a DataArray of any number of dims with
            ``sample_dims``; the folds are of its samples (stacked in C order where there
            are several sample dims), its mask is found once (the first sample of dask data)
            and handed to every fold's fit, and ``best_estimator_`` is fitted on the grid
            (``as_xarray`` gives maps; ``transform``/``predict`` read the grid).
        y : array-like, dask array or DataArray of shape (n_samples,), optional
            Labels (the second view for CCA and PLSSVD); for a grid, along its sample dim
            (a DataArray over all its sample dims where there are several).
        **params
            What the estimator's ``fit`` takes (``sample_weight``, split with the rows and
            used in the fits, not the scores; ``sample_dim`` of a DataArray, or
            ``sample_dims`` of a grid; ``feature_weights``, given to every fold's fit).

        Returns
        -------
        self
        """
        search = self._search(X, y, params)
        outcome = search.run(self.error_score)
        results = _results(search.candidates, outcome)
        self.cv_results_ = results
        self.n_splits_ = search.folds.n_splits
        self.n_features_in_ = search.folds.n_features
        self.scoring_ = search.scorer.name
        self.multimetric_ = False
        self.best_index_ = int(results["rank_test_score"].argmin())
        self.best_score_ = float(results["mean_test_score"][self.best_index_])
        self.best_params_ = search.candidates[self.best_index_]
        self.plan_ = search.describe(self.refit)
        self.pass_times_ = outcome.pass_times
        if self.refit:
            values = outcome.fold_values[search.group_of(self.best_index_)]
            assert values is not None  # the best candidate has scores, hence statistics
            self.best_estimator_, self.refit_time_ = search.refit(self.best_index_, values)
        return self

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import get_tags

        tags = super().__sklearn_tags__()
        tags.estimator_type = get_tags(self.estimator).estimator_type
        return tags

    # ------------------------------------------------------ the refitted model
    def _best(self) -> Any:
        check_is_fitted(self, "cv_results_")
        if not self.refit:
            raise AttributeError(
                "This GridSearchCV was fitted with refit=False: it has no best_estimator_ to "
                "use; fit it with refit=True"
            )
        return self.best_estimator_

    @property
    def classes_(self) -> np.ndarray:
        """The classes of the refitted classifier."""
        return self._best().classes_

    @available_if(_has("predict"))
    def predict(self, X: Any, **params: Any) -> Any:
        """``best_estimator_.predict``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        **params
            What its ``predict`` takes (``sample_dim``).

        Returns
        -------
        labels : same kind as X, shape (n_samples,)
        """
        return self._best().predict(X, **params)

    @available_if(_has("predict_proba"))
    def predict_proba(self, X: Any, **params: Any) -> Any:
        """``best_estimator_.predict_proba``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        **params

        Returns
        -------
        proba : same kind as X, shape (n_samples, n_classes)
        """
        return self._best().predict_proba(X, **params)

    @available_if(_has("predict_log_proba"))
    def predict_log_proba(self, X: Any, **params: Any) -> Any:
        """``best_estimator_.predict_log_proba``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        **params

        Returns
        -------
        log_proba : same kind as X, shape (n_samples, n_classes)
        """
        return self._best().predict_log_proba(X, **params)

    @available_if(_has("transform"))
    def transform(self, X: Any, **params: Any) -> Any:
        """``best_estimator_.transform``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        **params

        Returns
        -------
        X_new : same kind as X, shape (n_samples, n_components)
        """
        return self._best().transform(X, **params)

    @available_if(_has("score_samples"))
    def score_samples(self, X: Any, **params: Any) -> Any:
        """``best_estimator_.score_samples``.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        **params

        Returns
        -------
        scores : same kind as X, shape (n_samples,)
        """
        return self._best().score_samples(X, **params)

    def score(self, X: Any, y: Any = None, **params: Any) -> float:
        """The search's scoring of ``best_estimator_`` on ``(X, y)``: one pass over dask input.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : array-like, dask array or DataArray of shape (n_samples,), optional
        **params
            ``sample_dim`` of a DataArray, or ``sample_dims`` of a grid.

        Returns
        -------
        float
        """
        best = self._best()
        folds = Folds(1, X, y, params)
        (value,) = dask.compute(
            check_scoring(best, self.scoring)(best, folds.all()),
            scheduler="threads" if folds.local else None,
        )
        return float(value)


def cross_validate(
    estimator: Any,
    X: Any,
    y: Any = None,
    *,
    cv: int | HashKFold | Any = 5,
    scoring: str | None = None,
    params: dict[str, Any] | None = None,
    return_estimator: bool = False,
    error_score: Any = np.nan,
) -> dict[str, Any]:
    """Cross-validated scores of one estimator, in two passes over the data.

    The statistics of every fold in one pass, the model of each fold solved from the merge
    of the others', the scores of every fold in a second pass (see :class:`GridSearchCV`).
    Equal to scikit-learn's ``cross_validate`` with ``KFold(cv)`` on the same rows, to
    round-off.

    Parameters
    ----------
    estimator : ddr estimator
        Fitted by one pass of mergeable statistics.
    X : array-like, dask array or DataArray of shape (n_samples, n_features)
    y : array-like, dask array or DataArray of shape (n_samples,), optional
    cv : int, sklearn.model_selection.KFold or HashKFold, default 5
        As for :class:`GridSearchCV`.
    scoring : str or None, default None
        As for :class:`GridSearchCV`.
    params : dict, optional
        What the estimator's ``fit`` takes (``sample_weight``, ``sample_dim``, or
        ``sample_dims`` of a grid as for :meth:`GridSearchCV.fit`).
    return_estimator : bool, default False
        Also return the model of each fold.
    error_score : "raise" or float, default nan
        As for :class:`GridSearchCV`.

    Returns
    -------
    dict
        ``test_score``, ``fit_time`` (the solve plus a share of pass 1) and ``score_time``
        (a share of pass 2), arrays of shape (n_splits,); ``estimator``, a list, with
        ``return_estimator``.
    """
    search = GridSearchCV(
        estimator, {}, scoring=scoring, cv=cv, refit=False, error_score=error_score
    )
    plan = search._search(X, y, dict(params or {}))
    outcome = plan.run(error_score)
    out: dict[str, Any] = {
        "fit_time": outcome.fit_times[0],
        "score_time": outcome.score_times[0],
        "test_score": outcome.scores[0],
    }
    if return_estimator:
        out["estimator"] = [outcome.models.get((0, k)) for k in range(plan.folds.n_splits)]
    return out
