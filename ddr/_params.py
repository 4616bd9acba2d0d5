"""Parameters checked against their declaration: scikit-learn's ``_parameter_constraints``,
with one change: a bool is not a number.

Python's ``bool`` subclasses ``int``, so scikit-learn's ``Interval(Integral, 1, None)`` takes
``True`` as 1 and ``Interval(Real, 0, None)`` takes it as 1.0: ``n_components: true`` in a
pipeline would fit one component. Here a bool satisfies only the constraints that mean a
bool (``"boolean"``, ``"verbose"``, ``Options`` holding it, ``bool`` itself, ...), never a
numeric one (an ``Interval``, ``"random_state"``, a number type).

This is the one place parameters are validated: an estimator's ``fit``
(:meth:`ddr.base.DDRMixin._validate_params`), a statistic's options
(:meth:`ddr.stats.Statistic.spec`) and a pipeline step's ``with:``
(:func:`ddr.pipeline.registry.check_params`) all call :func:`validate_parameters`.

Renamed parameters (ddr's old names where scikit-learn has its own, see the estimators page's
"Differences from scikit-learn") are declared by the class (``_renamed_params``: old name ->
new; ``_renamed_values``: parameter -> {old value: new}); the old name or value still works
for one release with a FutureWarning naming the new one (:func:`take_renamed`,
:func:`renamed_values`), in Python and in a pipeline's ``with:``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "RENAMED_REMOVED_IN",
    "renamed_parameter_message",
    "renamed_value_message",
    "renamed_values",
    "take_renamed",
    "validate_parameters",
]


def _numeric(constraint: Any) -> bool:
    """Whether ``constraint`` (made by scikit-learn's ``make_constraint``) accepts a bool only
    because bool is an int."""
    from sklearn.utils._param_validation import Interval

    if isinstance(constraint, Interval) or type(constraint).__name__ == "_RandomStates":
        return True
    kind = getattr(constraint, "type", None)  # an instance-of constraint: Integral, float, ...
    return (
        isinstance(kind, type) and kind is not bool and kind is not np.bool_
        and issubclass(kind, numbers.Number)
    )  # fmt: skip


def validate_parameters(
    constraints: Mapping[str, Any], params: Mapping[str, Any], caller_name: str
) -> None:
    """Check ``params`` against ``constraints`` (scikit-learn's declaration), refusing a bool
    where only a number is declared.

    Parameters
    ----------
    constraints : mapping
        Parameter name -> list of scikit-learn constraints, or ``"no_validation"``.
        Parameters without an entry are not checked.
    params : mapping
        Parameter name -> value.
    caller_name : str
        The class (or function) named in the message.

    Raises
    ------
    sklearn.utils._param_validation.InvalidParameterError
        A ``ValueError`` and ``TypeError`` naming the parameter, what it must be and what
        was given (scikit-learn's message), e.g. "The 'n_components' parameter of PCA must
        be an int in the range [1, inf) or None. Got True instead."
    """
    from sklearn.utils._param_validation import (
        InvalidParameterError,
        make_constraint,
        validate_parameter_constraints,
    )

    validate_parameter_constraints(dict(constraints), dict(params), caller_name=caller_name)
    for name, value in params.items():
        declared = constraints.get(name, "no_validation")
        if not isinstance(value, (bool, np.bool_)) or declared == "no_validation":
            continue
        made = [make_constraint(c) for c in declared]
        if any(c.is_satisfied_by(value) for c in made if not _numeric(c)):
            continue
        shown = [str(c) for c in made if not c.hidden]
        what = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller_name} must be {what}. Got {value!r} instead "
            "(a bool is not a number here)."
        )


# ------------------------------------------------------------------ renamed parameters
#: the release from which the old names and values of renamed parameters are refused
RENAMED_REMOVED_IN = "0.3"


def renamed_parameter_message(owner: str, old: str, new: str) -> str:
    """The FutureWarning of a parameter given by its old name."""
    return (
        f"{owner}: the parameter {old!r} is now called {new!r} (scikit-learn's name); "
        f"{old!r} is deprecated and will stop working in ddr {RENAMED_REMOVED_IN}: write "
        f"{new!r} instead"
    )


def renamed_value_message(owner: str, name: str, old: Any, new: Any) -> str:
    """The FutureWarning of a parameter given an old value."""
    return (
        f"{owner}: {name}={old!r} is now called {name}={new!r} (scikit-learn's name); "
        f"{old!r} is deprecated and will stop working in ddr {RENAMED_REMOVED_IN}: write "
        f"{new!r} instead"
    )


def renamed_values(
    renamed: Mapping[str, Mapping[Any, Any]], params: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """``[(name, old value, new value)]`` for every parameter of ``params`` set to an old
    value of ``renamed`` (parameter -> {old value: new value})."""
    out = []
    for name, values in renamed.items():
        value = params.get(name)
        if isinstance(value, str) and value in values:
            out.append((name, value, values[value]))
    return out


def take_renamed(
    owner: str, renamed: Mapping[str, str], given: Mapping[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``given`` with the old names of ``renamed`` (old -> new) replaced by the new ones.

    Returns the parameters and the ``(old, new)`` pairs that were replaced (the caller warns,
    where it can say where). A parameter given under both names is a ``TypeError``, as
    Python's for a keyword given twice.
    """
    out = dict(given)
    done = []
    for old, new in renamed.items():
        if old not in out:
            continue
        if new in given:
            raise TypeError(
                f"{owner} got both {old!r} and {new!r}, one parameter under its old and its "
                f"new name; give only {new!r}"
            )
        out[new] = out.pop(old)
        done.append((old, new))
    return out, done
