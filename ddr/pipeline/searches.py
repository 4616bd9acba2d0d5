"""Grid searches of fit steps (``search:``): checked before any data is read, costed in the
plan, run by :class:`ddr.model_selection.GridSearchCV` in two passes.

A fit step with a ``search:`` block (:class:`~ddr.pipeline.spec_types.SearchSpec`) searches
its estimator's parameters by cross-validation; the step's model is the best candidate,
refitted from the merge of every fold's statistics (no third pass), and the fitted search
is the step's output ``search`` (what the ``search`` plot and the ``cv_results`` output are
drawn and written from), with ``best_params_``, ``best_score_`` and ``best_index_`` as
small values (for ``kind: metrics``).

What is checked, and where its problem is reported:

- without data (:func:`grid_problems`): the op is a fit; each grid parameter is one of the
  estimator's and not also in ``with:``; each value passes the class's declared
  constraints (``_parameter_constraints``, as ``with:`` is checked) and its combination with
  ``with:`` (``_check_param_combination``);
- with the inputs' metadata (:func:`plan_search`, on lazy stand-ins, nothing computed):
  every candidate's fit is one pass of mergeable statistics of these inputs (the
  estimator's ``_fit_plan``, its tags' ``mergeable``), the scoring suits the estimator, the
  folds fit the rows; the cost (:class:`ddr.model_selection.SearchPlan`: 2 passes, folds,
  candidates, statistics per fold) is what ``ddr plan`` prints.
"""

from __future__ import annotations

from typing import Any

from ddr.model_selection._passes import N_PASSES
from ddr.pipeline import registry
from ddr.pipeline.spec_types import HashFolds, SearchSpec
from ddr.tags import get_ddr_tags

__all__ = [
    "SEARCH_OUTPUTS",
    "SEARCH_PASSES",
    "candidates",
    "grid_problems",
    "make_search",
    "plan_search",
    "search_outputs",
]

#: a searched step's outputs besides its model (and ``data`` of a fit_transform): the fitted
#: search, and its small results by scikit-learn's names
SEARCH_OUTPUTS = {
    "search": "search",
    "best_params_": "metric",
    "best_score_": "metric",
    "best_index_": "metric",
}


#: the passes over its data of every search (ddr.model_selection: the folds' statistics, the
#: scores), whatever its folds, candidates and the width of its data
SEARCH_PASSES = N_PASSES


def _grids(spec: SearchSpec) -> list[dict[str, list[Any]]]:
    grid = spec.param_grid
    return list(grid) if isinstance(grid, list) else [grid]


def candidates(spec: SearchSpec) -> list[dict[str, Any]]:
    """The candidates of ``spec``'s grid, in scikit-learn's order (``ParameterGrid``)."""
    from sklearn.model_selection import ParameterGrid

    return list(ParameterGrid(_grids(spec)))


def _cv(spec: SearchSpec) -> Any:
    if isinstance(spec.cv, HashFolds):
        from ddr.model_selection import HashKFold

        return HashKFold(spec.cv.hash_folds, seed=spec.cv.seed)
    return spec.cv


def make_search(op: registry.Op, with_: dict[str, Any], spec: SearchSpec) -> Any:
    """The :class:`ddr.model_selection.GridSearchCV` a searched step runs (not fitted)."""
    from ddr.model_selection import GridSearchCV

    assert op.cls is not None
    grid = spec.param_grid
    return GridSearchCV(
        op.cls(**with_),
        [dict(g) for g in grid] if isinstance(grid, list) else dict(grid),
        scoring=spec.scoring,
        cv=_cv(spec),
        refit=True,
    )


def grid_problems(
    op: registry.Op, with_: dict[str, Any], spec: SearchSpec
) -> list[tuple[tuple[Any, ...], str, bool]]:
    """What is wrong with a search before any data is read.

    Parameters
    ----------
    op : Op
        The step's op.
    with_ : dict
        The step's ``with:`` (already checked).
    spec : SearchSpec

    Returns
    -------
    list of (path, message, at_key)
        ``path`` below the step's ``search`` (``("param_grid", "var_smoothing", 2)``), the
        message, and whether it points at the key rather than the value.
    """
    import difflib

    if op.family != "fit" or op.cls is None:
        return [
            ((), f"only a fit step (Estimator.fit) can search a grid; {op.name} is not one", True)
        ]
    problems: list[tuple[tuple[Any, ...], str, bool]] = []
    listed = isinstance(spec.param_grid, list)
    where = op.cls.__name__
    for g, grid in enumerate(_grids(spec)):
        base: tuple[Any, ...] = ("param_grid", g) if listed else ("param_grid",)
        for name, values in grid.items():
            if name not in op.params:
                close = difflib.get_close_matches(name, sorted(op.params), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(
                    (
                        (*base, name),
                        f"{where} has no parameter {name!r} to search{hint}; its parameters: "
                        f"{', '.join(sorted(op.params))}",
                        True,
                    )
                )
                continue
            if name in with_:
                problems.append(
                    (
                        (*base, name),
                        f"{name!r} is both set in with: and searched; give it in one place",
                        True,
                    )
                )
                continue
            for i, value in enumerate(values):
                # the same checks as with:, of with: and this one value
                for pname, message in registry.check_params(op, {**with_, name: value}):
                    if pname in (name, None):
                        problems.append(((*base, name, i), f"{name}={value!r}: {message}", False))
                        break
    return problems


def plan_search(
    op: registry.Op, with_: dict[str, Any], spec: SearchSpec, args: dict[str, Any]
) -> Any:
    """The cost of the search over ``args`` (lazy stand-ins of its inputs), refusing what it
    cannot search; nothing is computed (call it where a compute raises, as the planner does).

    Parameters
    ----------
    op : Op
    with_ : dict
    spec : SearchSpec
    args : dict
        Role -> lazy array (``X``, ``y``, ``sample_weight``).

    Returns
    -------
    SearchPlan
        ``n_passes`` is 2.

    Raises
    ------
    ValueError or TypeError
        A candidate the estimator refuses on these data, or whose fit is not one pass of
        mergeable statistics; a scoring the estimator cannot give; folds that do not fit the
        rows. The message names the candidate.
    """
    from ddr.pipeline.fitplans import call_kwargs, fit_plan

    assert op.cls is not None
    # each candidate's own one-pass plan over all rows: a candidate the estimator refuses
    # here (n_components above the features) would only fail once data was read
    for cand in candidates(spec):
        try:
            plan = fit_plan(op.cls(**with_, **cand), args)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"candidate {_shown(cand)}: {exc}") from None
        if plan is None:
            raise ValueError(
                f"candidate {_shown(cand)}: {op.cls.__name__}'s fit is not one pass of "
                "mergeable statistics with these parameters, which a search needs (each "
                "fold's statistics computed once, merged for the others)"
            )
    search = make_search(op, with_, spec)
    kwargs = call_kwargs(search.fit, {k: v for k, v in args.items() if k != "model"})
    return search.plan(kwargs.pop("X"), kwargs.pop("y", None), **kwargs)


def search_outputs() -> dict[str, str]:
    """A searched step's outputs besides its fit's, by name -> value kind."""
    return dict(SEARCH_OUTPUTS)


def _shown(cand: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in cand.items()) + "}"


def candidate_problems(
    cls: type, with_: dict[str, Any], spec: SearchSpec, n: int | None, d: int | None
) -> list[tuple[tuple[Any, ...], str]]:
    """Candidates of the grid past the rank limit of data of shape ``(n, d)`` (as ``with:
    {n_components: ...}`` is checked): ``(where below search:, message)`` for each value."""
    out = []
    for path, cand in _candidate_paths(spec):
        params = {**with_, **cand}
        transformer = get_ddr_tags(cls, **params).transformer
        limit = transformer.n_components_limit(n, d) if transformer else None
        nc = params.get("n_components")
        if limit is None or not isinstance(nc, int) or isinstance(nc, bool):
            continue
        if nc > limit[0] and "n_components" in cand:
            message = f"n_components={nc} is more than {limit[1]} = {limit[0]} of the data"
            out.append((path["n_components"], message))
    return out


def searched_width(
    cls: type, with_: dict[str, Any], spec: SearchSpec, n: int | None, d: int | None
) -> int | None:
    """The output width of a searched model: its candidates' if they all agree."""
    widths = set()
    for cand in candidates(spec):
        transformer = get_ddr_tags(cls, **with_, **cand).transformer
        widths.add(transformer.width(n, d) if transformer else None)
    return widths.pop() if len(widths) == 1 else None


def _candidate_paths(spec: SearchSpec) -> list[tuple[dict[str, tuple[Any, ...]], dict[str, Any]]]:
    """Each candidate of the grid, with where each of its values is written (below
    ``search``): ``({"n_components": ("param_grid", "n_components", 2)}, {...})``; in
    :func:`candidates`' order."""
    import itertools

    grids = spec.param_grid if isinstance(spec.param_grid, list) else [spec.param_grid]
    out = []
    for g, grid in enumerate(grids):
        base = ("param_grid", g) if isinstance(spec.param_grid, list) else ("param_grid",)
        names = sorted(grid)  # scikit-learn's ParameterGrid order
        for picks in itertools.product(*(range(len(grid[k])) for k in names)):
            paths = {k: (*base, k, i) for k, i in zip(names, picks, strict=True)}
            out.append((paths, {k: grid[k][i] for k, i in zip(names, picks, strict=True)}))
    return out
