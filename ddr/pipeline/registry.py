"""The op registry: every ddr estimator and statistic as pipeline ops, discovered, not listed.

Ops are built on first use from ``ddr._EXPORTS`` (estimator classes, imported then),
``ddr.stats`` (the public statistics) and the plug-ins registered through the entry-point
groups ``ddr.estimators`` and ``ddr.statistics`` (:mod:`ddr.plugins`, read then), so an
estimator that lands later, in ddr or in another package, is an op with no change here:

- ``Est.fit`` (roles from ``fit``'s signature: ``X``, ``y``, ``sample_weight``, ...) gives a
  fitted model; ``Est.fit_transform`` gives the model and the transformed data (fit, then a
  lazy transform);
- ``Est.transform``, ``Est.inverse_transform``, ``Est.predict``, ``Est.predict_proba``,
  ``Est.predict_log_proba``, ``Est.decision_function``, ``Est.score_samples``,
  ``Est.impute`` (role ``model`` plus the method's own roles) give lazy arrays;
  ``Est.score`` gives a number;
- ``moments``, ``class_moments``, ``categorical_counts``, ``histogram``,
  ``pairwise_moments`` (every public statistic of ``ddr.stats`` whose options all have
  defaults): one statistic (parameters: the statistic's options);
- ``load``: a saved model (``with: {path: ...}``).

Parameters (``with:``) are described once, by the class: an estimator's (or statistic's)
``_parameter_constraints``, scikit-learn's declaration. :func:`check_params` checks ``with:``
against it before any data is read (unknown and missing names, every value against its
constraints with scikit-learn's own validation, then the class's
``_check_param_combination``); ``ddr schema`` and ``ddr ops`` are generated from the same
declaration. A parameter renamed to scikit-learn's name (the class's ``_renamed_params`` and
``_renamed_values``) is still accepted under its old name or value for one release:
:func:`renamed` gives the current names and the notes the planner warns with.

What the planner needs to know of a class is asked of it: read-outs
(``Statistic.readouts``) and, of an estimator, its tags (:func:`ddr.tags.get_ddr_tags`:
output widths, the largest ``n_components``, passes, statistics), checked here when the
class is registered.
"""

from __future__ import annotations

import importlib
import inspect
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from ddr import plugins
from ddr.tags import check_estimator_class

__all__ = [
    "APPLY_METHODS",
    "FEATURE_ROLES",
    "FIT_METHODS",
    "Op",
    "Param",
    "Role",
    "Renamed",
    "check_params",
    "get_op",
    "op_names",
    "ops",
    "unavailable",
]

#: methods that apply a fitted model; the first gives a number, the others arrays
APPLY_METHODS = (
    "transform",
    "inverse_transform",
    "predict",
    "predict_proba",
    "predict_log_proba",
    "decision_function",
    "score_samples",
    "impute",
    "score",
)
FIT_METHODS = ("fit", "fit_transform")


@dataclass(frozen=True)
class Role:
    """A named input of an op."""

    name: str
    required: bool
    kind: str  # "array" or "model"
    ndim: int | None  # 2 (rows x features), 1 (per row) or None (not checked)


@dataclass(frozen=True)
class Param:
    """A parameter an op's ``with:`` may set.

    ``default`` is ``inspect.Parameter.empty`` for a required parameter; ``constraints`` is
    the class's declaration (a list of scikit-learn constraints, or ``"no_validation"``).
    """

    default: Any
    constraints: Any

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty


@dataclass(frozen=True)
class Op:
    """One op of the registry.

    Attributes
    ----------
    name : str
        ``"PCA.fit"``, ``"moments"``, ``"load"``, ...
    family : {"fit", "apply", "statistic", "load"}
    roles : tuple of Role
    outputs : dict
        Output name -> value kind (``"model"``, ``"array"``, ``"metric"``, ``"statistic"``);
        the first is the primary output (what ``step`` alone refers to).
    cls : type or None
        The estimator (fit, apply) or statistic class.
    method : str or None
        The estimator method an apply op calls; ``"fit"`` or ``"fit_transform"`` for fits.
    params : dict
        Name -> :class:`Param` of what ``with:`` may set.
    """

    name: str
    family: str
    roles: tuple[Role, ...]
    outputs: dict[str, str]
    cls: type | None = None
    method: str | None = None
    params: dict[str, Param] = field(default_factory=dict)
    doc: str = ""

    @property
    def primary(self) -> str:
        return next(iter(self.outputs))

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)


#: roles of a fit that lie along X's features, not its rows (one value per feature, or a
#: DataArray on some of a grid's feature dims): never cut into runs of rows, renamed to the
#: sample dim or checked against X's row count
FEATURE_ROLES = frozenset({"feature_weights"})

_LOCK = threading.RLock()
_OPS: dict[str, Op] | None = None
_UNAVAILABLE: dict[str, str] = {}
#: the plug-ins' generation (ddr.plugins.generation) the ops were built for
_BUILT_FOR = [-1]


def _positional(fn: Any) -> list[inspect.Parameter]:
    sig = inspect.signature(fn)
    return [
        p
        for p in list(sig.parameters.values())[1:]  # drop self
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def _roles(cls: type, method: str, *, with_model: bool) -> tuple[Role, ...]:
    from sklearn.base import ClassifierMixin

    classifier = issubclass(cls, ClassifierMixin)
    roles = [Role("model", True, "model", None)] if with_model else []
    for p in _positional(getattr(cls, method)):
        required = p.default is inspect.Parameter.empty
        if p.name == "y" and method in ("fit", "fit_transform", "score") and classifier:
            required = True
        if p.name == "sample_weight" or (p.name == "y" and classifier):
            ndim: int | None = 1
        elif p.name == "y":
            ndim = None  # ignored (PCA), or a second view of any width (CCA)
        elif p.name in FEATURE_ROLES:
            ndim = None  # along the features: 1-D, or some of a grid's feature dims
        else:
            ndim = 2
        roles.append(Role(p.name, required, "array", ndim))
    return tuple(roles)


def _declared(cls: type, signature: list[inspect.Parameter]) -> dict[str, Param]:
    constraints = getattr(cls, "_parameter_constraints", {})
    return {
        p.name: Param(p.default, constraints.get(p.name, "no_validation"))
        for p in signature
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _estimator_params(cls: type) -> dict[str, Param]:
    return _declared(cls, list(inspect.signature(cls.__init__).parameters.values())[1:])


def _first_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _estimator_ops(name: str, cls: type) -> list[Op]:
    check_estimator_class(cls)  # what the planner asks of it is declared (a TypeError if not)
    params = _estimator_params(cls)
    doc = _first_line(cls)
    out = [
        Op(
            f"{name}.fit",
            "fit",
            _roles(cls, "fit", with_model=False),
            {"model": "model"},
            cls,
            "fit",
            params,
            doc,
        )
    ]
    if hasattr(cls, "transform"):
        out.append(
            Op(
                f"{name}.fit_transform",
                "fit",
                _roles(cls, "fit", with_model=False),
                {"data": "array", "model": "model"},
                cls,
                "fit_transform",
                params,
                doc,
            )
        )
    for method in APPLY_METHODS:
        if not callable(getattr(cls, method, None)):
            continue
        kind = "metric" if method == "score" else "array"
        roles = _roles(cls, method, with_model=True)
        outputs = {"value" if kind == "metric" else "data": kind}
        if method == "transform" and any(r.name == "y" for r in roles):
            outputs["y_data"] = "array"  # the second view's scores (CCA), when y is given
        out.append(
            Op(
                f"{name}.{method}",
                "apply",
                roles,
                outputs,
                cls,
                method,
                {},
                _first_line(getattr(cls, method)),
            )
        )
    return out


def _statistic_op(op_name: str, cls: type) -> Op:
    sig = inspect.signature(cls.from_block)
    params = _declared(cls, [p for p in sig.parameters.values() if p.kind == p.KEYWORD_ONLY])
    roles = (
        Role("X", True, "array", 2),
        *([Role("y", cls.needs_labels, "array", 1)] if cls.accepts_labels else []),
        Role("sample_weight", False, "array", 1),
    )
    return Op(
        op_name, "statistic", roles, {"statistic": "statistic"}, cls, None, params, _first_line(cls)
    )


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _configurable(cls: type) -> bool:
    """Whether every option of ``cls.from_block`` has a default (a pipeline can use it)."""
    options = inspect.signature(cls.from_block).parameters.values()
    return all(p.default is not p.empty for p in options if p.kind == p.KEYWORD_ONLY)


def statistics() -> dict[str, type]:
    """The statistics a pipeline can configure (every option of ``from_block`` has a
    default), by op name: the public ones of ``ddr.stats`` (``Moments`` -> ``moments``),
    then the plug-ins' (:func:`ddr.plugins.statistics`: the entry point's name)."""
    import ddr.stats

    out = {}
    for name in ddr.stats.__all__:
        cls = getattr(ddr.stats, name, None)
        if not (isinstance(cls, type) and issubclass(cls, ddr.stats.Statistic)):
            continue
        if cls is ddr.stats.Statistic:
            continue
        if _configurable(cls):
            out[_snake(name)] = cls
    for name, cls in plugins.statistics().items():
        if _configurable(cls):
            out[name] = cls
    return out


def _build() -> dict[str, Op]:
    import ddr

    ops: dict[str, Op] = {}
    for op_name, cls in statistics().items():
        ops[op_name] = _statistic_op(op_name, cls)
    ops["load"] = Op(
        "load",
        "load",
        (),
        {"model": "model"},
        None,
        None,
        {
            "path": Param(inspect.Parameter.empty, [str]),
            "storage_options": Param(None, [dict, None]),
        },
        "A model saved with est.save (or a pipeline's model output), at a path or URL.",
    )
    for name, module in sorted(ddr._EXPORTS.items()):
        # subpackages exported under their own name (ddr.stats, ddr.io, ddr.model_selection)
        # and ddr.load are not estimators
        if not module.startswith("ddr.") or module in (f"ddr.{name}", "ddr.io.models"):
            continue
        try:
            cls = getattr(importlib.import_module(module), name)
        except Exception as exc:  # a module that does not exist yet (or is broken) is skipped
            _UNAVAILABLE[name] = f"{type(exc).__name__}: {exc}"
            continue
        if not (isinstance(cls, type) and hasattr(cls, "fit") and hasattr(cls, "get_params")):
            continue  # functions such as johnson_lindenstrauss_min_dim
        try:
            built = _estimator_ops(name, cls)
        except Exception as exc:  # an estimator whose signatures cannot be read
            _UNAVAILABLE[name] = f"{type(exc).__name__}: {exc}"
            continue
        for op in built:
            ops[op.name] = op
    for name, cls in plugins.estimators().items():
        try:
            built = _estimator_ops(name, cls)
        except Exception as exc:  # a plug-in whose signatures cannot be read
            plugin = next(p for p in plugins.load("ddr.estimators") if p.name == name)
            plugins.report(plugin, f"its ops cannot be built: {type(exc).__name__}: {exc}")
            _UNAVAILABLE[name] = f"{type(exc).__name__}: {exc}"
            continue
        for op in built:
            ops[op.name] = op
    return ops


def ops() -> dict[str, Op]:
    """All ops, by name (built on first call; again when a plug-in was imported since)."""
    global _OPS
    with _LOCK:
        for group in ("ddr.estimators", "ddr.statistics"):
            plugins.load(group)  # entry points not imported yet are imported now
        if _OPS is None or _BUILT_FOR[0] != plugins.generation():
            _UNAVAILABLE.clear()
            _OPS = _build()
            _BUILT_FOR[0] = plugins.generation()
        return _OPS


def refresh() -> dict[str, Op]:
    """Rebuild the registry (after installing or writing a new estimator in this process)."""
    global _OPS
    with _LOCK:
        _OPS = None
        _UNAVAILABLE.clear()
    return ops()


def unavailable() -> dict[str, str]:
    """Exported estimators (and plug-in estimators) whose ops could not be built, with the
    reason."""
    ops()
    return dict(_UNAVAILABLE)


def op_names() -> list[str]:
    return sorted(ops())


def describe_ops() -> str:
    """A compact list of the valid ops, for error messages and ``ddr ops``."""
    groups: dict[str, list[str]] = {}
    plain = []
    for name in sorted(ops()):
        head, dot, tail = name.partition(".")
        if dot:
            groups.setdefault(head, []).append(tail)
        else:
            plain.append(name)
    parts = [", ".join(plain)]
    parts += [f"{cls}.{{{', '.join(methods)}}}" for cls, methods in sorted(groups.items())]
    return "; ".join(parts)


def get_op(name: str) -> Op | None:
    return ops().get(name)


# ---------------------------------------------------------------- parameter checks
def check_params(op: Op, given: dict[str, Any]) -> list[tuple[str | None, str]]:
    """Check ``with:`` for ``op`` without data; returns ``[(param or None, message)]``.

    Unknown names (with a "did you mean"), missing required ones, every value against the
    class's ``_parameter_constraints`` (:func:`ddr._params.validate_parameters`:
    scikit-learn's checks and messages, a bool refused as a number), and then, for
    estimators, ``_check_param_combination``.
    """
    import difflib

    from sklearn.utils._param_validation import InvalidParameterError

    from ddr._params import validate_parameters
    from ddr.config.validation import check_path

    problems: list[tuple[str | None, str]] = []
    valid = sorted(op.params)
    where = op.cls.__name__ if op.family == "fit" and op.cls else op.name
    for name in given:
        if name not in op.params:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                (
                    name,
                    f"unknown parameter {name!r} for {where}{hint}; valid parameters: "
                    f"{', '.join(valid) or 'none'}",
                )
            )
    for name, param in op.params.items():
        if param.required and name not in given:
            problems.append((None, f"missing required parameter {name!r}"))
        elif name in given:
            try:
                validate_parameters({name: param.constraints}, {name: given[name]}, where)
            except InvalidParameterError as exc:
                problems.append((name, str(exc)))
    if op.family == "load" and isinstance(given.get("path"), str) and not problems:
        try:
            check_path(given["path"])
        except ValueError as exc:
            problems.append(("path", str(exc)))
    if problems or op.family != "fit" or op.cls is None:
        return problems
    known = {k: v for k, v in given.items() if k in op.params}
    try:
        est = op.cls(**known)
        if hasattr(est, "_check_param_combination"):
            est._check_param_combination()
    except (TypeError, ValueError) as exc:
        return [(_named_param(str(exc), known), str(exc))]
    return []


@dataclass(frozen=True)
class Renamed:
    """``with:`` with renamed parameters' old names and values replaced by the new ones.

    ``notes`` are ``(parameter as written, at its key?, message)``: one FutureWarning each,
    said where the old name (its key) or the old value is in the file.
    """

    params: dict[str, Any]
    notes: tuple[tuple[str, bool, str], ...] = ()
    #: ``(parameter, message)``: a parameter given under both its names
    problems: list[tuple[str | None, str]] = field(default_factory=list)
    #: new name -> the old name it was written as
    as_written: dict[str, str] = field(default_factory=dict)


def renamed(op: Op, given: dict[str, Any]) -> Renamed:
    """``given`` (a fit step's ``with:``) in the class's current names: the old name of a
    renamed parameter (the class's ``_renamed_params``) and a renamed value
    (``_renamed_values``) are replaced, each with a note. A parameter given under both names
    is a problem."""
    from ddr._params import (
        renamed_parameter_message,
        renamed_value_message,
        renamed_values,
        take_renamed,
    )

    cls = op.cls
    if op.family != "fit" or cls is None:
        return Renamed(dict(given))
    names: dict[str, str] = getattr(cls, "_renamed_params", {})
    try:
        params, done = take_renamed(cls.__name__, names, given)
    except TypeError as exc:
        twice = [new for old, new in names.items() if old in given and new in given]
        return Renamed(dict(given), problems=[(new, str(exc)) for new in twice])
    notes = [(old, True, renamed_parameter_message(cls.__name__, old, new)) for old, new in done]
    written = {new: old for old, new in done}
    for name, old, new in renamed_values(getattr(cls, "_renamed_values", {}), params):
        params[name] = new
        message = renamed_value_message(cls.__name__, name, old, new)
        notes.append((written.get(name, name), False, message))
    return Renamed(params, tuple(notes), as_written=written)


def _named_param(message: str, params: dict[str, Any]) -> str | None:
    for name in params:
        if re.search(rf"\b{re.escape(name)}\b", message):
            return name
    return None


# ------------------------------------------------------- the declaration, for people
def constraint_text(constraint: Any) -> str:
    """One declared constraint in words (scikit-learn's, with options sorted so the text is
    the same in every run)."""
    from sklearn.utils._param_validation import Options, make_constraint

    c = make_constraint(constraint)
    if isinstance(c, Options):
        return f"one of {sorted(c.options, key=str)!r}"
    kind = type(c).__name__
    if kind == "_Booleans":
        return "a bool"
    if kind == "_RandomStates":
        return "an int seed or None"
    if kind == "_Callables":
        return "a callable (Python only)"
    return str(c)


def describe_param(param: Param) -> str:
    """``"an int in the range [1, inf) or None (default None)"``: a parameter's declared
    constraints in words, for ``ddr ops``."""
    if param.constraints == "no_validation":
        what = "any value"
    else:
        parts = [constraint_text(c) for c in param.constraints]
        what = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"
    default = "required" if param.required else f"default {param.default!r}"
    return f"{what} ({default})"
