"""``partial_fit`` for every estimator whose ``fit`` is one pass of mergeable statistics.

Such an estimator builds its fit as a :class:`ddr.base.FitPlan`: lazy statistics of the rows
and a solve on the client. The model of two sets of rows is then the solve of their merged
statistics, so a batch only needs its own statistics: :meth:`MergedFitMixin.partial_fit`
computes them (one pass over the batch), merges them into those the model was solved from,
and solves again. The statistics are kept on the fitted model (the attribute the class names
in ``_statistics_attr``) by every fit, however it ran (``fit``, ``partial_fit``, a
pipeline's shared pass), and they are saved with it (:func:`ddr.save`), so a loaded model
continues exactly and models fitted on different machines merge (:func:`merge_fits`).

Merges are exact (Chan/Golub/LeVeque updates in float64): the model after any split of the
rows into batches, in any order, equals ``fit`` on all of them to round-off.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

import numpy as np
from sklearn.base import _fit_context

__all__ = ["MergedFitMixin", "merge_fits", "merge_statistics", "statistics_count"]


def merge_statistics(held: Any, batch: Any) -> Any:
    """``held`` merged with ``batch``: a statistic, or tuples/lists/dicts of them item by
    item."""
    if isinstance(held, dict):
        if not isinstance(batch, dict) or batch.keys() != held.keys():
            raise ValueError("the statistics to merge have different structures")
        return {k: held[k].merge(batch[k]) for k in held}
    if isinstance(held, (tuple, list)):
        if not isinstance(batch, type(held)) or len(batch) != len(held):
            raise ValueError("the statistics to merge have different structures")
        return type(held)(merge_statistics(a, b) for a, b in zip(held, batch, strict=True))
    return held.merge(batch)


def statistics_count(value: Any) -> float:
    """The (weighted) number of rows a statistic (or the first of a tuple) was computed from
    (the largest per-feature count where counts are per feature)."""
    while isinstance(value, (tuple, list, dict)):
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
    count = getattr(value, "count", 0.0)
    count = np.asarray(count, dtype=np.float64)
    return float(count.max()) if count.size else 0.0


class MergedFitMixin:
    """``partial_fit`` from the fit's :class:`~ddr.base.FitPlan`, and its statistics kept.

    A class declares where its fit keeps the merged statistics (``_statistics_attr``; an
    attribute it already documents, such as ``moments_``, or ``fit_statistics_``),
    :meth:`_solve_statistics` (the solve from a statistics value alone, for
    :func:`merge_fits`), and builds its ``_fit_plan`` with the row count of
    :meth:`_rows_merged` added to the batch's where it checks a number of samples before the
    pass (the checks then apply to all rows seen, not to one batch).

    Estimators with a ``partial_fit`` of their own (PCA, StandardScaler, the generative
    classifiers) take part in :func:`merge_fits` through the same two methods,
    :meth:`_fit_statistics` and :meth:`_solve_statistics`.
    """

    #: the fitted attribute that holds the statistics the model was solved from
    _statistics_attr: ClassVar[str] = "fit_statistics_"
    #: the row count already merged while a partial_fit plans its batch (else 0)
    _merging_count: float = 0.0
    #: The number of features seen by fit (scikit-learn's fitted attribute, declared here for
    #: the type checker).
    n_features_in_: int

    def _fit_statistics(self) -> Any:
        """The statistics the fitted model was solved from (None before a fit)."""
        return getattr(self, self._statistics_attr, None)

    def _solve_statistics(self, value: Any) -> Any:
        """Set the fitted attributes from the statistics ``value`` (the features' facts,
        ``n_features_in_`` and the like, already set); returns self."""
        raise TypeError(f"{type(self).__name__} does not solve from statistics alone")

    def _merges(self, n_features: int) -> bool:
        """Whether a fit on ``n_features`` features gives statistics that merge (a class
        whose one-pass fit is sometimes a random sketch says no then)."""
        return True

    def _rows_merged(self) -> float:
        """Rows already merged into the model while :meth:`partial_fit` plans a batch."""
        return self._merging_count

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Merge the statistics of a batch of rows into the model and solve again.

        One pass over the batch. After any sequence of batches the model equals ``fit`` on
        all their rows together (to round-off), whatever the batch sizes and their order;
        a model loaded with :func:`ddr.load` continues where it was saved.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            A batch of rows (the first view for two-view estimators).
        y : array-like, dask array or DataArray, optional
            What ``fit`` takes as ``y`` (the second view of CCA and PLSSVD), else ignored.
        **fit_params
            What ``fit`` takes (``sample_weight``, ``sample_dim``).

        Returns
        -------
        self
        """
        name = type(self).__name__
        held = self._fit_statistics()
        saved = _shape_facts(self)
        if held is None and saved:
            raise ValueError(
                f"{name} was fitted without keeping the statistics partial_fit merges into (a "
                "fit of several passes, or a model saved by an older ddr): fit it again"
            )
        if held is not None:
            self._check_same_features(X, fit_params.get("sample_dim"))
        self._merging_count = 0.0 if held is None else statistics_count(held)
        try:
            plan = self._fit_plan(X, y, **fit_params)  # type: ignore[attr-defined]
        finally:
            self._merging_count = 0.0
        if plan is None:
            raise ValueError(
                f"{name}.partial_fit needs a fit that is one pass of statistics; with these "
                f"parameters {name}.fit reads the data several times (see the estimator's "
                "documentation for the settings that fit in one pass)"
            )
        if not self._merges(self.n_features_in_):
            raise ValueError(
                f"{name}.partial_fit needs a fit whose statistics merge; with these "
                f"parameters {name}.fit is a one-pass random sketch of the "
                f"{self.n_features_in_} features (see the estimator's documentation)"
            )
        if held is not None and _shape_facts(self) != saved:
            new = _shape_facts(self)
            for attr, value in saved.items():
                setattr(self, attr, value)
            raise ValueError(
                f"the batch has {_describe(new)}, but {name} was fitted with {_describe(saved)}"
            )
        batch = plan.compute()
        return plan.solve(batch if held is None else merge_statistics(held, batch))

    def _check_same_features(self, X: Any, sample_dim: Hashable | None) -> None:
        """scikit-learn's check (and message) that X has the fitted number of features."""
        self._rows(X, reset=False, sample_dim=sample_dim)  # type: ignore[attr-defined]


def _shape_facts(est: Any) -> dict[str, Any]:
    """The fitted facts of the input's width that a batch must match."""
    return {a: getattr(est, a) for a in ("n_features_in_", "n_features_y_") if hasattr(est, a)}


def _describe(facts: dict[str, Any]) -> str:
    words = {"n_features_in_": "features in X", "n_features_y_": "features in Y"}
    return ", ".join(f"{v} {words[k]}" for k, v in facts.items())


def merge_fits(*models: Any) -> Any:
    """The model of the union of the rows several fitted models were fitted on.

    Each model keeps the statistics it was solved from (``ddr.load`` gives them back), so
    models fitted at different sites, on different machines or stores, merge without moving
    a row: the result equals ``fit`` on all their rows together to round-off (a federated
    fit).

    Parameters
    ----------
    *models : fitted estimators
        At least one; all of one class with the same parameters, each with a one-pass
        mergeable fit (an estimator with ``partial_fit`` from ``MergedFitMixin``, or one
        of the classes that keep their statistics the same way).

    Returns
    -------
    estimator
        A new fitted estimator (the inputs are not changed).
    """
    from sklearn.base import clone

    if not models:
        raise ValueError("merge_fits needs at least one fitted model")
    first = models[0]
    cls = type(first)
    if not callable(getattr(first, "_fit_statistics", None)):
        raise TypeError(
            f"{cls.__name__} does not keep mergeable statistics; merge_fits takes estimators "
            "whose fit is one pass of statistics (they have partial_fit)"
        )
    params = first.get_params(deep=False)
    for i, model in enumerate(models):
        if type(model) is not cls:
            raise TypeError(
                f"merge_fits: model {i} is a {type(model).__name__}, model 0 a {cls.__name__}"
            )
        if not _same_params(model.get_params(deep=False), params):
            raise ValueError(
                f"merge_fits: model {i}'s parameters differ from model 0's: "
                f"{model.get_params(deep=False)} != {params}"
            )
        if model._fit_statistics() is None:
            raise ValueError(
                f"merge_fits: model {i} ({cls.__name__}) is not fitted, or kept no statistics"
            )
        if _shape_facts(model) != _shape_facts(first):
            raise ValueError(
                f"merge_fits: model {i} was fitted with {_describe(_shape_facts(model))}, "
                f"model 0 with {_describe(_shape_facts(first))}"
            )
        _check_same_features(model, first, i)
        if not _same_feature_weights(model, first):
            raise ValueError(
                f"merge_fits: model {i}'s feature_weights differ from model 0's; the merged "
                "statistics are solved with one set of weights"
            )
    merged = first._fit_statistics()
    for model in models[1:]:
        merged = merge_statistics(merged, model._fit_statistics())
    out = clone(first)
    for fact, value in _shape_facts(first).items():
        setattr(out, fact, value)
    if hasattr(first, "feature_names_in_"):
        out.feature_names_in_ = first.feature_names_in_
    for fact in getattr(first, "_feature_facts", ()):  # grids, coordinates and units
        if hasattr(first, fact):
            setattr(out, fact, getattr(first, fact))
    if getattr(first, "feature_weights_", None) is not None:  # the solve applies them
        out.feature_weights_ = first.feature_weights_
    out = out._solve_statistics(merged)
    if isinstance(out, MergedFitMixin):
        setattr(out, out._statistics_attr, merged)
    return out


def _check_same_features(model: Any, first: Any, i: int) -> None:
    """Refuse a model fitted on other features than model 0: another grid (dims, sizes,
    coordinates or mask; a Dataset's variables), other feature coordinates or other units,
    for X and, for two views, for Y. Their statistics would merge, but not mean the same
    features."""
    for view, prefix in (("X", ""), ("Y", "y_")):
        grid = getattr(model, f"{prefix}feature_layout_", None)
        base = getattr(first, f"{prefix}feature_layout_", None)
        said = f"merge_fits: model {i}'s {view}"
        if (grid is None) != (base is None):
            how = ("was", "was not") if grid is not None else ("was not", "was")
            raise ValueError(
                f"{said} {how[0]} fitted as a grid (an N-D DataArray or a Dataset) and model "
                f"0's {how[1]}; merge fits on the same grid"
            )
        if grid is not None:
            _check_same_grid(grid, base, said)
        coords = getattr(model, f"{prefix}feature_coords_", None)
        base_coords = getattr(first, f"{prefix}feature_coords_", None)
        if (coords is None) != (base_coords is None) or not np.array_equal(
            np.asarray(coords), np.asarray(base_coords)
        ):
            raise ValueError(f"{said} has other feature coordinates than model 0's")
        units = getattr(model, f"{prefix}feature_units_", None)
        base_units = getattr(first, f"{prefix}feature_units_", None)
        if units != base_units:
            raise ValueError(f"{said} is in units {units!r}, model 0's in {base_units!r}")


def _check_same_grid(grid: Any, base: Any, said: str) -> None:
    """``grid`` (a FeatureLayout, or a Dataset's FeatureBlocks) is ``base``: the same
    variables, and for each the same dims, sizes, coordinates and mask."""
    variables = getattr(grid, "variables", None)
    if variables != getattr(base, "variables", None):
        raise ValueError(
            f"{said} has the variables {variables}, model 0's {getattr(base, 'variables', None)}"
        )
    parts = zip(getattr(grid, "layouts", (grid,)), getattr(base, "layouts", (base,)), strict=True)
    for k, (part, ref) in enumerate(parts):
        where = said if variables is None else f"{said}[{variables[k]!r}]"
        if part.dims != ref.dims:
            raise ValueError(f"{where} has the feature dims {part.dims}, model 0's {ref.dims}")
        try:
            ref.check_same(part, where)
        except ValueError as e:
            raise ValueError(f"{e} (model 0's)") from None
        differ = np.setxor1d(part.masked, ref.masked)
        if differ.size:
            j = int(differ[0])
            whose = "model 0's mask but not in its own" if j in ref.masked else "its mask only"
            raise ValueError(
                f"{where} has another mask than model 0's: the feature at {ref.describe(j)} is "
                f"in {whose}; merged statistics need the same features kept"
            )


def _same_feature_weights(a: Any, b: Any) -> bool:
    """Whether two fits have the same ``feature_weights_`` (a decomposition's; None: none)."""
    wa, wb = getattr(a, "feature_weights_", None), getattr(b, "feature_weights_", None)
    if wa is None or wb is None:
        return wa is None and wb is None
    return bool(np.array_equal(wa, wb))


def _same_params(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not np.array_equal(np.asarray(x), np.asarray(y)):
                return False
        elif x != y:
            return False
    return True
