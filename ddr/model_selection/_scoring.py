"""Scores of fitted models on held-out rows, as lazy dask values (one task per block).

A search scores every (fold, candidate) pair; to read the data once for all of them, each
score is built as a graph over the fold's rows (a blockwise prediction reduced to a mean)
and all are computed together. scikit-learn's scorers compute at once, so the few scores a
search offers are written here, each equal to scikit-learn's on the same rows:

- ``"accuracy"``: the fraction of rows whose ``predict`` is ``y`` (a classifier's ``score``);
- ``"neg_log_loss"``: the mean of ``log(predict_proba)`` at the true class, the probability
  clipped to ``[eps, 1 - eps]`` (scikit-learn's ``neg_log_loss``);
- ``"mean_log_likelihood"``: the mean of ``score_samples`` (the ``score`` of PCA, the
  densities and CCA: the mean log-likelihood of a row);
- ``"total_log_likelihood"``: the sum of ``score_samples`` over the held-out rows (the
  ``score`` of :class:`ddr.KernelDensity`, as of scikit-learn's ``KernelDensity``).

``scoring=None`` means the estimator's own ``score``: accuracy for a classifier
(scikit-learn's contract for classifiers), the mean (or total) log-likelihood for an
estimator whose ``score`` is the mean (or sum) of its ``score_samples``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.core import flatten
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from sklearn.base import is_classifier

from ddr.model_selection._split import Part
from ddr.stats._input import is_xarray

__all__ = ["SCORINGS", "LazyScorer", "check_scoring"]


@dataclasses.dataclass(frozen=True)
class LazyScorer:
    """A score of a fitted estimator on a :class:`Part`, as a dask ``Delayed`` float.

    Attributes
    ----------
    name : str
        ``"accuracy"``, ``"neg_log_loss"``, ``"mean_log_likelihood"`` or
        ``"total_log_likelihood"``.
    fn : callable ``(estimator, part) -> Delayed``
    """

    name: str
    fn: Callable[[Any, Part], Any]

    def __call__(self, estimator: Any, part: Part) -> Any:
        """The score of ``estimator`` on ``part``'s rows (greater is better), lazily.

        Parameters
        ----------
        estimator : fitted estimator
        part : Part

        Returns
        -------
        Delayed
            Computes to a float.
        """
        return self.fn(estimator, part)


def _data(v: Any) -> Any:
    """The dask array under a DataArray."""
    return v.data if is_xarray(v) else v


def _labels(part: Part, rows: tuple[int, ...]) -> da.Array:
    """The part's labels as a 1-D dask array with the row chunks ``rows``."""
    y = _data(part.y)
    if y is None:
        raise ValueError("this scoring compares predictions with labels; y is None")
    if not isinstance(y, da.Array):
        y = da.from_array(np.asarray(y), chunks=(rows, *tuple((s,) for s in np.shape(y)[1:])))
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,) for this scoring; got shape {y.shape}")
    return y if y.chunks[0] == rows else y.rechunk((rows,))


def _accuracy(estimator: Any, part: Part) -> Any:
    pred = _data(estimator.predict(part.X, **part.method_params))
    return _row_mean(_block_hits, [pred, _labels(part, pred.chunks[0])])


def _block_hits(pred: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    return float(np.count_nonzero(pred == y)), pred.shape[0]


def _neg_log_loss(estimator: Any, part: Part) -> Any:
    proba = _data(estimator.predict_proba(part.X, **part.method_params))
    y = _labels(part, proba.chunks[0])
    return _row_mean(_block_log_proba, [proba, y], np.asarray(estimator.classes_))


def _block_log_proba(proba: np.ndarray, y: np.ndarray, classes: np.ndarray) -> tuple[float, int]:
    """The sum of ``log`` of each row's probability of its true class, clipped as
    scikit-learn's ``log_loss`` clips (``[eps, 1 - eps]`` of the probabilities' dtype)."""
    hit = y[:, None] == classes[None, :]
    unknown = ~hit.any(axis=1)
    if unknown.any():
        raise ValueError(
            f"y holds labels the model was not fitted with (e.g. {y[unknown][:3].tolist()}; "
            f"its classes are {classes.tolist()}): their log-loss is undefined"
        )
    eps = np.finfo(proba.dtype).eps
    p = np.clip(proba[np.arange(proba.shape[0]), hit.argmax(axis=1)], eps, 1 - eps)
    return float(np.log(p).sum()), proba.shape[0]


def _log_likelihoods(estimator: Any, part: Part) -> da.Array:
    score_samples = estimator.score_samples
    # two-view models (CCA) score the pair of rows: their y is the second view
    args = (part.X, part.y) if part.y is not None and _takes_y(score_samples) else (part.X,)
    return _data(score_samples(*args, **part.method_params))


def _mean_log_likelihood(estimator: Any, part: Part) -> Any:
    return _row_mean(_block_sum, [_log_likelihoods(estimator, part)])


def _total_log_likelihood(estimator: Any, part: Part) -> Any:
    return _row_mean(_block_sum, [_log_likelihoods(estimator, part)], total=True)


def _block_sum(values: np.ndarray) -> tuple[float, int]:
    return float(np.sum(values)), values.shape[0]


#: partial sums merged per task of the tree that reduces a score's blocks
_FAN_IN = 32


def _row_mean(
    fn: Callable[..., tuple[float, int]], arrays: list[da.Array], *extra: Any, total: bool = False
) -> Any:
    """The mean over rows of a per-block ``fn(*blocks, *extra) -> (sum, rows)`` (the sum
    with ``total``), as a ``Delayed``: one task per block and a merge tree. The layer is
    written out directly:
    dask's elementwise operations and ``mean`` took 40 ms per score to build (their
    metadata is computed per operation), a tenth of a second per fold and candidate."""
    keys = [list(flatten(a.__dask_keys__())) for a in arrays]
    if len({len(k) for k in keys}) != 1:
        raise ValueError("the arrays of a score must have the same row blocks")
    token = tokenize(fn.__name__, *(a.name for a in arrays), *extra, total)
    block = f"ddr-score-block-{token}"
    layer: dict[Any, Any] = {
        (block, i): (fn, *(k[i] for k in keys), *extra) for i in range(len(keys[0]))
    }
    level: list[Any] = [(block, i) for i in range(len(keys[0]))]
    depth = 0
    while len(level) > 1:
        merged = []
        for j, i in enumerate(range(0, len(level), _FAN_IN)):
            layer[(f"ddr-score-merge-{token}", depth, j)] = (_add, *level[i : i + _FAN_IN])
            merged.append((f"ddr-score-merge-{token}", depth, j))
        level, depth = merged, depth + 1
    final = f"ddr-score-{token}"
    layer[final] = (_sum if total else _mean, level[0])
    deps: list[Any] = list(arrays)
    return Delayed(final, HighLevelGraph.from_collections(final, layer, dependencies=deps))


def _add(*parts: tuple[float, int]) -> tuple[float, int]:
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def _mean(part: tuple[float, int]) -> float:
    return part[0] / part[1]


def _sum(part: tuple[float, int]) -> float:
    return float(part[0])


def _takes_y(method: Callable[..., Any]) -> bool:
    params = list(inspect.signature(method).parameters.values())
    return len(params) > 1 and params[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


#: the scorings a search computes lazily, by name
SCORINGS: dict[str, LazyScorer] = {
    s.name: s
    for s in (
        LazyScorer("accuracy", _accuracy),
        LazyScorer("neg_log_loss", _neg_log_loss),
        LazyScorer("mean_log_likelihood", _mean_log_likelihood),
        LazyScorer("total_log_likelihood", _total_log_likelihood),
    )
}

#: what each scoring needs of the estimator
_NEEDS = {
    "accuracy": "predict",
    "neg_log_loss": "predict_proba",
    "mean_log_likelihood": "score_samples",
    "total_log_likelihood": "score_samples",
}


def _mean_log_likelihood_scores() -> tuple[Any, ...]:
    """The ``score`` methods that are the mean of ``score_samples``: the density families'
    (PCA, GaussianDensity, CategoricalDensity, PPCA, ...) and CCA's."""
    from ddr.cross_decomposition.cca import CCA
    from ddr.families import LogLikelihoodScore

    return (LogLikelihoodScore.score, CCA.score)


def _total_log_likelihood_scores() -> tuple[Any, ...]:
    """The ``score`` methods that are the sum of ``score_samples``: KernelDensity's
    (scikit-learn's convention for its ``KernelDensity``)."""
    from ddr.density.kde import KernelDensity

    return (KernelDensity.score,)


def check_scoring(estimator: Any, scoring: str | None) -> LazyScorer:
    """The lazy scorer for ``scoring`` (None: the estimator's own ``score``).

    Parameters
    ----------
    estimator : estimator
    scoring : str or None
        A name of :data:`SCORINGS`, or None.

    Returns
    -------
    LazyScorer

    Raises
    ------
    ValueError
        For an unknown name, a scoring the estimator cannot give (no ``predict_proba``), or
        ``None`` for an estimator whose ``score`` is not one of those above.
    """
    name = type(estimator).__name__
    if scoring is None:
        score = getattr(type(estimator), "score", None)
        # each class wraps its methods (sample_dims=): compare the functions underneath
        own = None if score is None else inspect.unwrap(score)
        if is_classifier(estimator):
            scoring = "accuracy"
        elif own is not None and own in map(inspect.unwrap, _mean_log_likelihood_scores()):
            scoring = "mean_log_likelihood"
        elif own is not None and own in map(inspect.unwrap, _total_log_likelihood_scores()):
            scoring = "total_log_likelihood"
        else:
            what = "has no score method" if score is None else "has a score ddr cannot build lazily"
            raise ValueError(
                f"scoring=None scores with the estimator's own score, but {name} {what}; "
                f"give scoring as one of {sorted(SCORINGS)}"
            )
    if not isinstance(scoring, str) or scoring not in SCORINGS:
        raise ValueError(
            f"scoring must be None or one of {sorted(SCORINGS)}; got {scoring!r} (a callable "
            "scorer would need each held-out fold in memory: the search computes the scores "
            "of every fold and candidate lazily, in one pass)"
        )
    if not callable(getattr(estimator, _NEEDS[scoring], None)):
        raise ValueError(f"scoring={scoring!r} needs {name}.{_NEEDS[scoring]}, which it lacks")
    return SCORINGS[scoring]
