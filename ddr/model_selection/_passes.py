"""Grid search and cross-validation in two passes over the data, from mergeable statistics.

An estimator whose ``fit`` is one pass of mergeable statistics and a solve on the client
(:class:`ddr.base.FitPlan`) needs no fit per fold: the statistics of "all folds but ``k``"
are the merge of the other folds' statistics, and every candidate of a grid whose
parameters enter only the solve (the estimator's ``tags.fit.solve_params``) is a solve of
the same merged statistics. So a search over ``K`` folds and ``G`` candidates is:

1. pass 1: the statistics of every fold, each fold's once (one ``dask.compute``);
2. ``K x G`` solves on the client, each from the merge of ``K - 1`` folds' statistics;
3. pass 2: the score of every (fold, candidate) pair on its held-out rows, all in one graph
   (one ``dask.compute``: the fold's rows are read once for all candidates);
4. the refit: the best candidate solved from the merge of all folds (no pass).

Candidates that differ in a parameter outside ``solve_params`` (one that changes the
statistics, e.g. LDA's ``shrinkage="auto"``, which adds fourth moments) get their own
statistics of every fold, computed in the same pass 1 (the fold's rows are read once for
all); candidates whose statistics are the same graph (the same keys) share its
computation. Either way the data is read twice, whatever ``K`` and ``G``.

A fit that keeps its training rows (an exact kernel density: ``tags.fit.searchable``
without ``mergeable``) fits the same way: its statistic of a fold is the fold's moments, and
the model of "all folds but k" keeps those folds' rows lazily (the same arrays as the folds'
own), so pass 2 reads every chunk once for all the kernel sums of every (fold, candidate)
pair. Parameters the fit decides from the data's shape (``tags.fit.decided_params``:
KernelDensity's ``algorithm="auto"``) are decided once, from all rows, for every fold.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import dask
import numpy as np
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning

from ddr.base import FitPlan
from ddr.model_selection._scoring import LazyScorer, check_scoring
from ddr.model_selection._split import Folds, Part, check_cv
from ddr.tags import get_ddr_tags

__all__ = ["N_PASSES", "Outcome", "Search", "SearchPlan", "check_estimator"]

#: the passes over the data of every search (see the module's notes)
N_PASSES = 2


@dataclasses.dataclass(frozen=True)
class SearchPlan:
    """What a search costs, known before it runs (:meth:`GridSearchCV.plan`).

    Parameters
    ----------
    n_splits : int
        Folds.
    n_candidates : int
        Parameter settings of the grid.
    n_statistics : int
        Distinct statistics computed of each fold in pass 1: one per group of candidates
        that differ only in parameters that enter the solve (candidates whose statistics
        are the same graph share it).
    n_passes : int
        Passes over the data: 2 (the folds' statistics; the scores).
    n_solves : int
        Solves on the client: one per (fold, candidate), plus the refit.
    n_scores : int
        Scores computed in pass 2: one per (fold, candidate).
    fold_sizes : tuple of int
        Rows per fold.
    sklearn_fits : int
        The fits scikit-learn's ``GridSearchCV`` makes for the same search (each a pass over
        the training rows, in memory): ``n_splits * n_candidates``, plus the refit.
    """

    n_splits: int
    n_candidates: int
    n_statistics: int
    n_passes: int
    n_solves: int
    n_scores: int
    fold_sizes: tuple[int, ...]
    sklearn_fits: int

    def __str__(self) -> str:
        return (
            f"{self.n_splits} folds x {self.n_candidates} candidates: {self.n_passes} passes "
            f"over the data (pass 1: {self.n_statistics} statistic(s) of each fold; pass 2: "
            f"{self.n_scores} scores), {self.n_solves} solves on the client; scikit-learn's "
            f"GridSearchCV: {self.sklearn_fits} fits"
        )


@dataclasses.dataclass
class _Group:
    """Candidates that share the statistics of a fold (they differ only in solve params)."""

    params: dict[str, Any]
    members: list[int]
    plans: list[FitPlan] = dataclasses.field(default_factory=list)
    error: Exception | None = None


@dataclasses.dataclass
class Outcome:
    """What one run of a search found: scores and times per (candidate, fold)."""

    scores: np.ndarray
    fit_times: np.ndarray
    score_times: np.ndarray
    fold_values: list[list[Any] | None]
    models: dict[tuple[int, int], Any]
    pass_times: dict[str, float]


def _merge(a: Any, b: Any) -> Any:
    """``a`` merged with ``b``: a statistic, or tuples/lists/dicts of them item by item."""
    if isinstance(a, (tuple, list)):
        return type(a)(_merge(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping):
        return {key: _merge(a[key], b[key]) for key in a}
    return a.merge(b)


def _merge_all(values: Sequence[Any]) -> Any:
    acc = values[0]
    for v in values[1:]:
        acc = _merge(acc, v)
    return acc


def _leave_one_out(values: Sequence[Any]) -> list[Any]:
    """For each ``k``, the merge of every value but the ``k``-th: from prefix and suffix
    merges, ``3 K`` merges instead of ``K (K - 1)``."""
    K = len(values)
    prefix: list[Any] = [None] * K
    suffix: list[Any] = [None] * K
    for k in range(1, K):
        prefix[k] = values[0] if k == 1 else _merge(prefix[k - 1], values[k - 1])
    for k in range(K - 2, -1, -1):
        suffix[k] = values[K - 1] if k == K - 2 else _merge(values[k + 1], suffix[k + 1])
    return [
        suffix[k] if prefix[k] is None else prefix[k] if suffix[k] is None else
        _merge(prefix[k], suffix[k])
        for k in range(K)
    ]  # fmt: skip


def check_estimator(estimator: Any) -> None:
    if not callable(getattr(estimator, "_fit_plan", None)):
        raise TypeError(
            "ddr.model_selection searches ddr estimators whose fit is one pass of mergeable "
            f"statistics; {type(estimator).__module__}.{type(estimator).__name__} is not a "
            "ddr estimator (use scikit-learn's GridSearchCV for it)"
        )
    get_ddr_tags(estimator)  # a TypeError naming what is undeclared


class Search:
    """One search's folds, candidates, groups and pass-1 graphs (nothing computed)."""

    def __init__(
        self,
        estimator: Any,
        candidates: list[dict[str, Any]],
        cv: Any,
        scoring: str | None,
        X: Any,
        y: Any,
        fit_params: dict[str, Any],
    ) -> None:
        self.estimator = estimator
        self.candidates = candidates
        self.folds = Folds(check_cv(cv), X, y, fit_params)
        self.scheduler = "threads" if self.folds.local else None
        self.groups = self._groups()  # refuses fits that are not one pass first
        self.scorer: LazyScorer = check_scoring(estimator, scoring)
        for group in self.groups:
            self._plan_folds(group)

    def _groups(self) -> list[_Group]:
        """Candidates grouped by the parameters that change the statistics; each candidate
        checked to be one pass of mergeable statistics."""
        n, d = self.folds.n_samples, self.folds.n_features
        groups: dict[str, _Group] = {}
        #: each candidate with the parameters its fit decides from the data's shape fixed
        #: from the whole data (an "auto" that would decide otherwise on a fold's rows)
        self.settings: list[dict[str, Any]] = []
        for i, cand in enumerate(self.candidates):
            est = clone(self.estimator).set_params(**cand)
            tags = get_ddr_tags(est)
            decided = tags.fit.decided_params(n, d)
            if decided:
                tags = get_ddr_tags(est.set_params(**decided))
            self.settings.append({**cand, **decided})
            if not (tags.fit.mergeable(n, d) or tags.fit.searchable(n, d)):
                raise ValueError(
                    f"{_describe(est, cand)} is not fitted by one pass of mergeable statistics "
                    f"on {n} x {d} data, which ddr.model_selection needs (each fold's "
                    "statistics computed once, merged for the others); search it with "
                    "scikit-learn's GridSearchCV on in-memory data, or choose parameters of a "
                    "one-pass fit (e.g. PCA's svd_solver='covariance_eigh')"
                )
            params = {k: v for k, v in self.settings[i].items() if k not in tags.fit.solve_params}
            key = dask.base.tokenize(sorted(params.items(), key=lambda kv: kv[0]))
            groups.setdefault(key, _Group(params, [])).members.append(i)
        return list(groups.values())

    def _plan_folds(self, group: _Group) -> None:
        """The statistics of every fold for the group's first candidate (they are the
        group's: its candidates differ only in what enters the solve)."""
        cand = self.settings[group.members[0]]
        try:
            for k in range(self.folds.n_splits):
                group.plans.append(self._fit_plan(cand, self.folds.test(k)))
        except Exception as exc:  # the candidates' failure, scored as error_score
            if isinstance(exc, _NotOnePass):
                raise ValueError(str(exc)) from None
            group.error = exc

    def _fit_plan(self, cand: dict[str, Any], part: Part) -> FitPlan:
        est = clone(self.estimator).set_params(**cand)
        plan = est._fit_plan(part.X, part.y, **part.fit_params)
        if plan is None:
            raise _NotOnePass(
                f"{_describe(est, cand)} has no one-pass fit on these rows (its _fit_plan is "
                "None), which ddr.model_selection needs"
            )
        return plan

    def describe(self, refit: bool) -> SearchPlan:
        """What running this search costs."""
        K, G = self.folds.n_splits, len(self.candidates)
        keys = {dask.base.tokenize(g.plans[0].statistics) for g in self.groups if g.error is None}
        return SearchPlan(
            n_splits=K,
            n_candidates=G,
            n_statistics=len(keys),
            n_passes=N_PASSES,
            n_solves=K * G + int(refit),
            n_scores=K * G,
            fold_sizes=self.folds.sizes,
            sklearn_fits=K * G + int(refit),
        )

    # ------------------------------------------------------------------- running
    def run(self, error_score: Any) -> Outcome:
        """Pass 1, the solves, pass 2; failures scored ``error_score`` (or raised)."""
        K, G = self.folds.n_splits, len(self.candidates)
        t0 = time.perf_counter()
        fold_values = self._statistics()
        t1 = time.perf_counter()
        fit_times = np.zeros((G, K))
        failures: list[tuple[int, int, Exception]] = []
        models: dict[tuple[int, int], Any] = {}
        graphs: dict[tuple[int, int], Any] = {}
        for group, values in zip(self.groups, fold_values, strict=True):
            train = None if values is None else _leave_one_out(values)
            for i in group.members:
                for k in range(K):
                    start = time.perf_counter()
                    try:
                        if group.error is not None or train is None:
                            raise group.error or ValueError("no statistics")
                        est = self._fit_plan(self.settings[i], self.folds.train(k)).solve(train[k])
                        est = self.folds.own_sample_dims(est)
                        fit_times[i, k] = time.perf_counter() - start
                        graphs[i, k] = self.scorer(est, self.folds.test(k))
                        models[i, k] = est
                    except Exception as exc:
                        if error_score == "raise":
                            raise
                        failures.append((i, k, exc))
        t2 = time.perf_counter()
        order = list(graphs)
        computed = dask.compute(*(graphs[p] for p in order), scheduler=self.scheduler)
        t3 = time.perf_counter()
        scores = np.full((G, K), np.nan)
        for pair, value in zip(order, computed, strict=True):
            scores[pair] = float(value)
        if failures:
            for i, k, _ in failures:
                scores[i, k] = error_score
            _warn_failures(failures, G * K, error_score)
        # the shared passes' times, a share to each (candidate, fold)
        fit_times += (t1 - t0) / (K * G)
        score_times = np.full((G, K), (t3 - t2) / (K * G))
        return Outcome(
            scores,
            fit_times,
            score_times,
            fold_values,
            models,
            {"statistics": t1 - t0, "solves": t2 - t1, "scores": t3 - t2},
        )

    def _statistics(self) -> list[list[Any] | None]:
        """Pass 1: every group's statistics of every fold, in one ``dask.compute``."""
        plans = [p for g in self.groups if g.error is None for p in g.plans]
        try:
            flat = iter(dask.compute(*(p.statistics for p in plans), scheduler=self.scheduler))
        except Exception as exc:
            for p in plans:
                p.explain(exc)  # the estimator's advice, if it has some (NaN: use PPCA)
            raise
        return [None if g.error is not None else [next(flat) for _ in g.plans] for g in self.groups]

    def refit(self, index: int, values: list[Any]) -> tuple[Any, float]:
        """Candidate ``index`` solved from the merge of every fold's statistics."""
        start = time.perf_counter()
        est = self._fit_plan(self.settings[index], self.folds.all()).solve(_merge_all(values))
        return self.folds.own_sample_dims(est), time.perf_counter() - start

    def group_of(self, index: int) -> int:
        return next(j for j, g in enumerate(self.groups) if index in g.members)


class _NotOnePass(ValueError):
    """A candidate whose fit is not one pass: refused, never scored as error_score."""


def _describe(est: Any, cand: Mapping[str, Any]) -> str:
    given = ", ".join(f"{k}={v!r}" for k, v in cand.items())
    return f"{type(est).__name__}({given})"


def _warn_failures(
    failures: list[tuple[int, int, Exception]], total: int, error_score: Any
) -> None:
    if len(failures) == total:
        first = failures[0][2]
        raise ValueError(
            f"All the {total} fits failed; the first with {type(first).__name__}: {first}"
        ) from first
    kinds: dict[str, int] = {}
    for _, _, exc in failures:
        text = f"{type(exc).__name__}: {exc}"
        kinds[text] = kinds.get(text, 0) + 1
    summary = "\n".join(f"{n} fits failed with {text}" for text, n in kinds.items())
    warnings.warn(
        f"{len(failures)} fits failed out of a total of {total}. The score on these "
        f"train-test partitions for these parameters will be set to {error_score}.\n{summary}",
        FitFailedWarning,
        stacklevel=4,
    )
