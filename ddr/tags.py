"""What the rest of ddr knows of an estimator: one tags object, asked of the estimator.

scikit-learn gathers what its checks need to know of an estimator in one ``Tags`` dataclass,
built per instance by ``__sklearn_tags__`` (each class adds to its parent's) and read with
:func:`sklearn.utils.get_tags`. ddr does the same for what the pipeline, the memory check,
plots and the conformance suites need: an estimator's ``__ddr_tags__()`` returns a
:class:`DDRTags` and :func:`get_ddr_tags` is the one function that asks it. scikit-learn's
own tags (``input_tags.allow_nan``, ``sparse``, ``positive_only``, ``categorical``, ...) stay
in ``__sklearn_tags__``, where scikit-learn reads them.

Facts that depend on the data's shape are callables of the tags (bound to the instance's
parameters when the tags are built): ``tags.fit.passes(n_samples, n_features)``,
``tags.transformer.width(n_samples, n_features)``, ...

Defaults live here, in the dataclasses' fields. Facts without a sensible default are
*required*: they start as :data:`UNDECLARED` and :func:`check_ddr_tags` refuses tags that
leave one so, naming it. Every estimator must declare how many passes its fit makes and the
statistics of its widest pass; a transformer must declare the width of its output. The check
runs when a class is defined (``ddr.base.DDRMixin`` builds the tags of a default
instance), when a class is registered, and whenever tags are asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from numbers import Integral
from typing import Any

__all__ = [
    "FEATURE",
    "UNDECLARED",
    "always",
    "CheckTags",
    "DDRTags",
    "FitTags",
    "TransformerTags",
    "check_ddr_tags",
    "check_estimator_class",
    "fixed_passes",
    "get_ddr_tags",
    "moments_pass",
    "n_components_limit",
    "n_components_width",
    "never",
    "no_decided_params",
    "no_statistics",
    "rank_limit",
    "unknown_passes",
]

#: Placeholder for "the feature dim of the training data" in ``DDRTags.xarray_dims``.
FEATURE = "__feature__"

#: ``(n_samples, n_features) -> value``: a fact that depends on the shape of the data (either
#: may be None where the pipeline does not know it)
ShapeRule = Callable[[Any, Any], Any]


class _Undeclared:
    """The value of a required fact nobody declared: refused by :func:`check_ddr_tags`, and
    loud if called anyway."""

    def __repr__(self) -> str:
        return "UNDECLARED"

    def __bool__(self) -> bool:
        return False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an estimator fact that was never declared was asked for (UNDECLARED)")


#: The value of a required fact that an estimator has not declared (see :func:`check_ddr_tags`).
UNDECLARED: Any = _Undeclared()


# ------------------------------------------------------------------ rules to declare with
def fixed_passes(n: int) -> ShapeRule:
    """A fit that reads X ``n`` times whatever its shape (1 for a pass of statistics).

    Parameters
    ----------
    n : int
        The passes.

    Returns
    -------
    callable
        ``(n_samples, n_features) -> n``.
    """

    def passes(n_samples: Any, n_features: Any) -> int:
        return n

    return passes


def unknown_passes(n_samples: Any, n_features: Any) -> None:
    """A fit whose passes are decided while it runs (EM stops when it converges).

    Parameters
    ----------
    n_samples, n_features : int or None
        The shape of the data (None where it is not known).

    Returns
    -------
    None
    """
    return None


def moments_pass(n_features: int) -> list[tuple[Any, int]]:
    """The widest pass holds a full :class:`~ddr.stats.Moments` of the input.

    Parameters
    ----------
    n_features : int
        Width of the input.

    Returns
    -------
    list of (StatSpec, int)
        ``[(Moments.spec(), n_features)]``.
    """
    from ddr.stats import Moments

    return [(Moments.spec(), n_features)]


def no_statistics(n_features: int) -> list[tuple[Any, int]]:
    """The fit keeps no statistic of the rows (it reads only the shape of X).

    Parameters
    ----------
    n_features : int
        Width of the input.

    Returns
    -------
    list
        Empty.
    """
    return []


def never(n_samples: Any, n_features: Any) -> bool:
    """A fact that holds for no data (e.g. not mergeable).

    Parameters
    ----------
    n_samples, n_features : int or None
        The shape of the data (None where it is not known).

    Returns
    -------
    bool
        False.
    """
    return False


def always(n_samples: Any, n_features: Any) -> bool:
    """A fact that holds for all data (e.g. a fit that is always mergeable).

    Parameters
    ----------
    n_samples, n_features : int or None
        The shape of the data (None where it is not known).

    Returns
    -------
    bool
        True.
    """
    return True


def no_decided_params(n_samples: Any, n_features: Any) -> dict[str, Any]:
    """No parameter decided by the data's shape (the default of ``decided_params``).

    Parameters
    ----------
    n_samples, n_features : int or None
        The shape of the data (None where it is not known).

    Returns
    -------
    dict
        Empty.
    """
    return {}


def n_components_width(n_components: Any) -> ShapeRule:
    """Output width rule of ``n_components`` columns when it is an int, else unknown.

    Parameters
    ----------
    n_components : int, float, str or None
        The estimator's parameter.

    Returns
    -------
    callable
        ``(n_samples, n_features) -> int or None``.
    """
    width = (
        int(n_components)
        if isinstance(n_components, Integral) and not isinstance(n_components, bool)
        else None
    )

    def rule(n_samples: Any, n_features: Any) -> int | None:
        return width

    return rule


def no_limit(n_samples: Any, n_features: Any) -> None:
    """No largest ``n_components`` (the default)."""
    return None


def rank_limit(n_samples: Any, n_features: Any) -> tuple[int, str] | None:
    """``min(n_samples, n_features)``: components that span the data.

    Parameters
    ----------
    n_samples, n_features : int or None
        The shape of the data (None where it is not known).

    Returns
    -------
    (int, str) or None
        The limit and how it comes about, or None where the shape is not known.
    """
    if not (n_samples and n_features):
        return None
    return min(n_samples, n_features), f"min(n_samples={n_samples}, n_features={n_features})"


def n_components_limit(what: str) -> ShapeRule:
    """The largest ``n_components`` is ``n_samples`` or ``n_features`` (``what``).

    Parameters
    ----------
    what : {"n_samples", "n_features"}
        Which.

    Returns
    -------
    callable
        ``(n_samples, n_features) -> (int, str) or None``.
    """

    def rule(n_samples: Any, n_features: Any) -> tuple[int, str] | None:
        n = n_samples if what == "n_samples" else n_features
        return (n, what) if n else None

    return rule


def saved_n_components(state: Mapping[str, Any]) -> int | None:
    """A saved model's output width: its ``n_components_``."""
    n = state.get("n_components_")
    return n if isinstance(n, int) else None


# ------------------------------------------------------------------------ the tags
@dataclasses.dataclass(slots=True)
class FitTags:
    """What ``fit`` reads and what it keeps.

    Parameters
    ----------
    passes : callable ``(n_samples, n_features) -> int or None``
        How many times ``fit`` reads an X of this shape, or None when that is decided while
        fitting (``ddr plan`` prints it). Required.
    statistics : callable ``(n_features) -> list of (StatSpec, width)``
        The statistics of the widest pass over ``n_features`` columns, each with the width
        it accumulates: what a task of the pass holds (``ddr.pipeline.memory``). Required.
    mergeable : callable ``(n_samples, n_features) -> bool``, default never
        Whether ``fit`` on data of this shape is one pass of mergeable statistics followed by
        a solve, so that the model of two sets of rows comes from merging their statistics
        (``partial_fit``, data that grows, cross-validation folds as merges).
    solve_params : frozenset of str, default empty
        Parameters that enter only the solve of a mergeable fit: changing them refits from
        the same statistics, without reading the data again (model selection).
    loads_data : str or None, default None
        Why ``fit`` loads the data into memory instead of reducing it to statistics (the
        reason is shown by the conformance suites), or None.
    keeps_data : callable ``(n_samples, n_features) -> bool``, default never
        Whether the fitted model keeps its training data as it was given (a dask X stays
        lazy, unread), so that every later use of the whole model (saving it, scoring with
        it, drawing it) reads that data again: ``ddr plan`` counts those passes.
    searchable : callable ``(n_samples, n_features) -> bool``, default never
        Whether ``fit`` on any subset of rows of data of this shape is one pass of mergeable
        statistics and a solve that reads no data but may keep the subset's rows lazily
        (an exact kernel density), so that ``ddr.model_selection`` builds the model of "all
        folds but k" from the folds' merged statistics and rows, exactly. Every
        ``mergeable`` fit is searchable; a fit that keeps its rows is searchable without
        being mergeable (``partial_fit`` would need the rows of every earlier batch).
    decided_params : callable ``(n_samples, n_features) -> dict``, default none
        Parameters whose value ``fit`` decides from the data's shape (an ``"auto"``
        resolved), as ``{name: value}``: a search fixes them from the whole data before
        fitting subsets of its rows, so that every fold gets the same kind of fit.
    passes_note : str or None, default None
        For a fit whose passes are decided while it runs (``passes`` gives None): what is
        known of them beforehand, e.g. ``"2 for the start, then one per EM iteration (at
        most 100)"``; ``ddr plan`` prints it.
    """

    passes: ShapeRule = UNDECLARED
    statistics: Callable[[int], list[tuple[Any, int]]] = UNDECLARED
    mergeable: ShapeRule = never
    solve_params: frozenset[str] = frozenset()
    loads_data: str | None = None
    keeps_data: ShapeRule = never
    searchable: ShapeRule = never
    decided_params: Callable[[Any, Any], dict[str, Any]] = no_decided_params
    passes_note: str | None = None


@dataclasses.dataclass(slots=True)
class TransformerTags:
    """What a transformer's output is, before it is computed.

    Parameters
    ----------
    width : callable ``(n_samples, n_features) -> int or None``
        Columns of ``transform``'s output for data of this shape, or None when only the fit
        can tell. Required.
    saved_width : callable ``(state) -> int or None``, default the ``n_components_`` saved
        Columns of the output of a saved model, from its stored state.
    n_components_limit : callable ``(n_samples, n_features) -> (int, str) or None``
        The largest ``n_components`` data of this shape allows and why, or None.
    component_prefix : str or None, default None
        What the output's columns are called in plots: ``"PC"`` gives PC1, PC2, ...
    component_name : callable ``(i, output) -> str`` or None
        The name of column ``i`` (from 0) of ``output`` (``"data"``, or ``"y_data"`` for
        the second view of a two-view model); None: from ``component_prefix``.
    """

    width: ShapeRule = UNDECLARED
    saved_width: Callable[[Mapping[str, Any]], int | None] = saved_n_components
    n_components_limit: ShapeRule = no_limit
    component_prefix: str | None = None
    component_name: Callable[[int, str], str] | None = None

    def name(self, i: int, output: str = "data") -> str:
        """Column ``i`` (from 0) of ``output``, for axes of plots: ``PC1``, ``component 1``.

        Parameters
        ----------
        i : int
            The column, from 0.
        output : str, default "data"
            ``"data"``, or ``"y_data"`` for the second view of a two-view model.

        Returns
        -------
        str
        """
        if self.component_name is not None:
            return self.component_name(i, output)
        return f"{self.component_prefix}{i + 1}" if self.component_prefix else f"component {i + 1}"


@dataclasses.dataclass(slots=True)
class CheckTags:
    """What the conformance suites of :mod:`ddr.testing` need to run on small data.

    Parameters
    ----------
    params : dict, default empty
        Constructor parameters for the suites' tiny data (a few features, 90 rows) where a
        default does not fit them (a Johnson-Lindenstrauss width, one pair of CCA
        directions of a one-column view).
    expected_failed_checks : dict, default empty
        scikit-learn checks a default instance is known to fail, each with the reason
        (passed to :func:`sklearn.utils.estimator_checks.check_estimator`).
    """

    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    expected_failed_checks: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class DDRTags:
    """Everything ddr asks of an estimator, built per instance by ``__ddr_tags__``.

    Parameters
    ----------
    fit : FitTags
        What ``fit`` reads and keeps.
    transformer : TransformerTags or None
        The output of ``transform`` (None for estimators without one).
    xarray_dims : dict, default empty
        For fitted attributes with a feature or class axis, the dims
        ``DDRMixin.as_xarray`` gives them (:data:`FEATURE` stands for the
        training data's feature dim), e.g. ``{"components_": ("component", FEATURE)}``.
    xarray_units : dict, default empty
        For attributes of ``xarray_dims``, the power of the data's units each is in, stated
        as its ``units`` attribute when the data have one (``ddr.stats._units``): 1
        (``mean_``), 2 (variances), 0 (dimensionless: unit vectors, ratios, probabilities,
        counts), -1 (CCA's weights), None (not stated: ddr cannot say); an attribute not
        listed is given no units. E.g. ``{"components_": 0, "explained_variance_": 2}``.
    translation_invariant : str or None, default None
        The method whose output does not change when the data the model is fitted on and
        applied to move by one constant vector (checked on data at a 1e8 offset).
    loglik_attribute : str or None, default None
        The fitted attribute holding the log-likelihood per EM iteration (what a pipeline's
        ``loglik`` plot draws).
    cluster_sizes : callable or None, default None
        For a clustering or mixture model: ``cluster_sizes(fitted) -> ndarray of shape
        (n_clusters,)``, the training rows per cluster (what a pipeline's ``sizes`` plot
        draws), e.g. KMeans's ``cluster_sizes_``; a mixture may give ``weights_`` times its
        rows (expected rows, not necessarily whole numbers).
    checks : CheckTags
        Parameters and known failures for the conformance suites.
    """

    fit: FitTags = dataclasses.field(default_factory=FitTags)
    transformer: TransformerTags | None = None
    xarray_dims: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    xarray_units: dict[str, int | None] = dataclasses.field(default_factory=dict)
    translation_invariant: str | None = None
    loglik_attribute: str | None = None
    cluster_sizes: Callable[[Any], Any] | None = None
    checks: CheckTags = dataclasses.field(default_factory=CheckTags)


# ------------------------------------------------------------------------- asking
#: required facts, with what each one is, for the refusal
_REQUIRED = {
    "fit.passes": "how many times fit reads X: a callable (n_samples, n_features) -> int or "
    "None, e.g. ddr.tags.fixed_passes(1) or ddr.tags.unknown_passes",
    "fit.statistics": "the statistics of fit's widest pass: a callable (n_features) -> "
    "[(StatSpec, width)], e.g. ddr.tags.moments_pass or ddr.tags.no_statistics",
}
_REQUIRED_TRANSFORMER = {
    "transformer.width": "the columns of transform's output: a callable (n_samples, "
    "n_features) -> int or None, e.g. ddr.tags.n_components_width(self.n_components)",
}


def check_ddr_tags(owner: Any, tags: DDRTags) -> DDRTags:
    """Refuse tags that leave a required fact undeclared, naming it; return them.

    Parameters
    ----------
    owner : estimator or class
        Whose tags these are (named in the refusal; a class with ``transform`` must have
        transformer tags).
    tags : DDRTags
        What its ``__ddr_tags__`` returned.

    Returns
    -------
    DDRTags
        ``tags``.

    Raises
    ------
    TypeError
        When a required fact is missing.
    """
    cls = owner if isinstance(owner, type) else type(owner)
    if not isinstance(tags, DDRTags):
        raise TypeError(
            f"{cls.__name__}.__ddr_tags__ must return a ddr.tags.DDRTags; got {type(tags).__name__}"
        )
    missing = [
        (name, what)
        for name, what in _REQUIRED.items()
        if getattr(tags.fit, name.split(".")[1]) is UNDECLARED
    ]
    if callable(getattr(cls, "transform", None)):
        if tags.transformer is None:
            missing.append(("transformer", "a transformer's output: ddr.tags.TransformerTags"))
        else:
            missing += [
                (name, what)
                for name, what in _REQUIRED_TRANSFORMER.items()
                if getattr(tags.transformer, name.split(".")[1]) is UNDECLARED
            ]
    if missing:
        listed = "; ".join(f"tags.{name} ({what})" for name, what in missing)
        raise TypeError(
            f"{cls.__module__}.{cls.__name__} does not declare what ddr must know of it: "
            f"{listed}. Set them in its __ddr_tags__ (see ddr.tags)"
        )
    return tags


def check_estimator_class(estimator_class: type) -> None:
    """Check the tags of a default instance of ``cls`` (when a class is defined or registered).

    A class whose constructor needs arguments is not instantiated here: its tags are checked
    whenever they are asked for (:func:`get_ddr_tags`) and by the conformance suites.

    Parameters
    ----------
    estimator_class : type
        A ddr estimator class.

    Raises
    ------
    TypeError
        When the tags leave a required fact undeclared (naming it).
    """
    try:
        instance = estimator_class()
    except TypeError:
        return
    check_ddr_tags(estimator_class, instance.__ddr_tags__())


def get_ddr_tags(estimator: Any, /, **params: Any) -> DDRTags:
    """The ddr tags of an estimator (checked: every required fact declared).

    Parameters
    ----------
    estimator : estimator or estimator class
        An instance, or a class, instantiated with ``params`` (its defaults elsewhere).
    **params
        Constructor parameters, for a class.

    Returns
    -------
    DDRTags
        Built for this instance's parameters.

    Raises
    ------
    TypeError
        If ``estimator`` is not a ddr estimator, or its tags leave a required fact undeclared.
    """
    if isinstance(estimator, type):
        if not hasattr(estimator, "__ddr_tags__"):
            raise TypeError(f"{estimator.__name__} is not a ddr estimator (no __ddr_tags__)")
        estimator = estimator(**params)
    elif params:
        raise TypeError("get_ddr_tags: parameters are given with a class, not an instance")
    hook = getattr(estimator, "__ddr_tags__", None)
    if hook is None:
        raise TypeError(f"{type(estimator).__name__} is not a ddr estimator (no __ddr_tags__)")
    return check_ddr_tags(estimator, hook())
