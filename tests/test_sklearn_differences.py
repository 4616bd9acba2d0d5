"""Every exported estimator against its scikit-learn namesake: the one table of differences
(docs/user-guide/estimators.md, "Differences from scikit-learn") is checked here, so it
cannot drift from the code.

The counterpart of ``ddr.X`` is scikit-learn's estimator of the same name
(:func:`sklearn.utils.discovery.all_estimators`), or none. What is compared, and what the
table must then say, each row ``| estimator | kind | name | scikit-learn | ddr | why |``:

- ``parameter``: a parameter one of them has and the other lacks (``inspect.signature``);
  the side without it shows ``—``;
- ``default``: a parameter both have with different defaults, both shown as written here;
- ``value``: ``name=value`` that scikit-learn's ``_parameter_constraints`` take and ddr's
  refuse (every string option of scikit-learn's that ddr refuses must have a row);
- ``attribute`` / ``method``: a fitted attribute or a public method scikit-learn's has and
  ddr's lacks (both fitted on the same small data);
- ``behaviour``: the same name doing something else (free text, the names must exist);
- ``neither``: a method of the estimator API neither has, and why ddr's model defines none;
- ``no counterpart``: ddr's estimators scikit-learn has no namesake for;
- ``none``: an estimator without differences (every export has at least one row).

Every row must be true (a difference that was removed fails here too) and explain itself.
"""

from __future__ import annotations

import ast
import inspect
import re
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.utils import get_tags
from sklearn.utils._param_validation import (
    InvalidParameterError,
    StrOptions,
    make_constraint,
    validate_parameter_constraints,
)
from sklearn.utils.discovery import all_estimators

import ddr
from ddr.tags import get_ddr_tags

DOC = Path(__file__).resolve().parents[1] / "docs" / "user-guide" / "estimators.md"
SECTION = "## Differences from scikit-learn"
KINDS = (
    "parameter",
    "default",
    "value",
    "attribute",
    "method",
    "behaviour",
    "neither",
    "no counterpart",
    "none",
)
#: the methods of the estimator API compared by name
METHODS = (
    "fit",
    "partial_fit",
    "transform",
    "fit_transform",
    "inverse_transform",
    "predict",
    "fit_predict",
    "predict_proba",
    "predict_log_proba",
    "predict_joint_log_proba",
    "decision_function",
    "score_samples",
    "score",
    "sample",
    "get_covariance",
    "get_precision",
    "get_feature_names_out",
)
ABSENT = "—"


@dataclass(frozen=True)
class Row:
    estimator: str
    kind: str
    name: str
    sklearn: str
    ddr: str
    why: str
    line: int


def _code(cell: str) -> str:
    """The text of a cell without its backticks (``—`` stays)."""
    cell = cell.strip()
    return cell[1:-1] if len(cell) > 1 and cell[0] == cell[-1] == "`" else cell


def _rows() -> list[Row]:
    text = DOC.read_text()
    assert SECTION in text, f"{DOC.name} has no section {SECTION!r}"
    start = text.index(SECTION)
    lines = text[start:].splitlines()
    first = text[:start].count("\n") + 1
    rows, table = [], False
    for i, line in enumerate(lines[1:], start=1):
        if line.startswith("## "):
            break
        if line.startswith("| estimator | kind |"):
            table = True
            continue
        if not (table and line.startswith("| ")):
            continue
        cells = [c.strip() for c in line.strip()[1:-1].split("|")]
        assert len(cells) == 6, f"{DOC.name}:{first + i}: a row has 6 cells: {line!r}"
        est, kind, name, sk, ours, why = cells
        rows.append(Row(_code(est), kind, _code(name), _code(sk), _code(ours), why, first + i))
    return rows


ROWS = _rows()
NAMES = sorted(n for n, m in ddr._EXPORTS.items() if isinstance(getattr(ddr, n), type))
SKLEARN = dict(all_estimators())


def _counterpart(name: str) -> type | None:
    return SKLEARN.get(name)


def _params(cls: type) -> dict[str, inspect.Parameter]:
    return {
        p.name: p
        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _where(row: Row) -> str:
    return f"{DOC.name}:{row.line}"


def _rows_of(name: str, kind: str) -> dict[str, Row]:
    return {r.name: r for r in ROWS if r.estimator == name and r.kind == kind}


def test_the_table_names_every_export_and_only_exports():
    named = {r.estimator for r in ROWS}
    assert not set(NAMES) - named, (
        f"exported estimators missing from the table of {DOC.name} ({SECTION!r}): "
        f"{sorted(set(NAMES) - named)}; add their rows (kind 'none' if nothing differs)"
    )
    assert not named - set(NAMES), f"rows for what ddr does not export: {named - set(NAMES)}"
    for r in ROWS:
        assert r.kind in KINDS, f"{_where(r)}: kind {r.kind!r} is not one of {KINDS}"
        assert r.why and r.why != ABSENT, f"{_where(r)}: say why"


@pytest.mark.parametrize("name", NAMES)
def test_no_counterpart_rows(name):
    sk = _counterpart(name)
    rows = _rows_of(name, "no counterpart")
    if sk is None:
        assert rows, f"{name} has no scikit-learn namesake: it needs a 'no counterpart' row"
    else:
        assert not rows, f"{_where(next(iter(rows.values())))}: scikit-learn has {name}"


@pytest.mark.parametrize("name", [n for n in NAMES if _counterpart(n) is not None])
def test_parameters_and_defaults(name):
    """Parameters only one side has, and different defaults: each has its row, and each such
    row is still true (the defaults as written here, ``repr`` in backticks)."""
    ours, theirs = _params(getattr(ddr, name)), _params(_counterpart(name))
    rows = _rows_of(name, "parameter")
    differ = sorted(set(ours) ^ set(theirs))
    assert sorted(rows) == differ, (
        f"{name}: the table lists parameters {sorted(rows)}, but the signatures differ in {differ}"
    )
    for p in differ:
        row = rows[p]
        if p in ours:
            assert row.sklearn == ABSENT and row.ddr == repr(ours[p].default), _where(row)
        else:
            assert row.ddr == ABSENT and row.sklearn == repr(theirs[p].default), _where(row)
    rows = _rows_of(name, "default")
    shared = sorted(set(ours) & set(theirs))
    differ = [p for p in shared if repr(ours[p].default) != repr(theirs[p].default)]
    assert sorted(rows) == differ, (
        f"{name}: the table lists defaults of {sorted(rows)}, but those of {differ} differ"
    )
    for p in differ:
        assert rows[p].sklearn == repr(theirs[p].default), _where(rows[p])
        assert rows[p].ddr == repr(ours[p].default), _where(rows[p])


def _accepts(cls: type, param: str, value: Any) -> bool:
    constraints = {param: cls._parameter_constraints.get(param, "no_validation")}
    try:
        validate_parameter_constraints(constraints, {param: value}, caller_name=cls.__name__)
    except InvalidParameterError:
        return False
    return True


@pytest.mark.parametrize("name", [n for n in NAMES if _counterpart(n) is not None])
def test_values_scikit_learn_takes_and_ddr_refuses(name):
    """Every string option of scikit-learn's that ddr refuses has a ``value`` row, and every
    ``value`` row (``param=literal``) is taken by scikit-learn and refused by ddr."""
    ours, theirs = getattr(ddr, name), _counterpart(name)
    shared = set(_params(ours)) & set(_params(theirs))
    refused = set()
    for p in sorted(shared):
        for c in theirs._parameter_constraints.get(p, []):
            c = make_constraint(c)
            if isinstance(c, StrOptions):
                for option in sorted(c.options - c.deprecated):
                    if not _accepts(ours, p, option):
                        refused.add(f"{p}={option!r}")
    rows = _rows_of(name, "value")
    assert refused <= set(rows), f"{name}: values ddr refuses without a row: {refused - set(rows)}"
    for text, row in rows.items():
        p, _, literal = text.partition("=")
        value = ast.literal_eval(literal)
        assert p in shared, f"{_where(row)}: {p!r} is not a parameter of both"
        assert _accepts(theirs, p, value), f"{_where(row)}: scikit-learn refuses {text}"
        assert not _accepts(ours, p, value), f"{_where(row)}: ddr takes {text} now"


# ----------------------------------------------------------- fitted on the same data
@cache
def _data() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=240)
    X = rng.standard_normal((240, 6)) @ rng.standard_normal((6, 6)) + y[:, None]
    return {
        "X": X,
        "y": y,
        "counts": np.clip(np.floor(X + 3), 0, 7).astype(np.int64),
        "Y": X[:, :2] @ rng.standard_normal((2, 3)) + rng.standard_normal((240, 3)),
    }


def _fit(est: Any, like: Any) -> Any:
    """``est`` fitted on data of the kind ``like`` (a ddr estimator) takes: its scikit-learn
    tags say which (counts, labels, a second view)."""
    data = _data()
    tags = get_tags(like)
    counts = tags.input_tags.categorical or tags.input_tags.positive_only
    X = data["counts"] if counts else data["X"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if tags.estimator_type == "classifier":
            return est.fit(X, data["y"])
        if tags.target_tags.required:
            return est.fit(X, data["Y"])
        return est.fit(X)


def _fitted_attributes(est: Any) -> set[str]:
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}


@pytest.mark.parametrize("name", [n for n in NAMES if _counterpart(n) is not None])
def test_attributes_and_methods(name):
    """The fitted attributes and the estimator-API methods scikit-learn's has and ddr's lacks,
    fitted with ddr's small-data parameters (its tags) on the same data: each has its row,
    and each row is still true."""
    params = dict(get_ddr_tags(getattr(ddr, name)).checks.params)
    theirs_params = {k: v for k, v in params.items() if k in _params(_counterpart(name))}
    ours = getattr(ddr, name)(**params)
    theirs = _fit(_counterpart(name)(**theirs_params), ours)
    ours = _fit(ours, ours)
    # ours may compute one when it is first read (QDA's rotations_): asked, not listed
    missing = sorted(a for a in _fitted_attributes(theirs) if not hasattr(ours, a))
    rows = _rows_of(name, "attribute")
    assert sorted(rows) == missing, (
        f"{name}: the table lists attributes {sorted(rows)}; scikit-learn's has {missing} "
        "that ddr's lacks"
    )
    missing = sorted(m for m in METHODS if hasattr(theirs, m) and not hasattr(type(ours), m))
    rows = _rows_of(name, "method")
    assert sorted(rows) == missing, (
        f"{name}: the table lists methods {sorted(rows)}; scikit-learn's has {missing} that "
        "ddr's lacks"
    )
    for row in _rows_of(name, "behaviour").values():
        target = re.split(r"[=(]", row.name)[0]
        assert hasattr(type(ours), target) or target in _params(type(ours)), (
            f"{_where(row)}: ddr's {name} has no {target!r}"
        )
    for row in _rows_of(name, "neither").values():
        assert row.name in METHODS, f"{_where(row)}: {row.name!r} is not an estimator method"
        assert not hasattr(type(ours), row.name) and not hasattr(theirs, row.name), (
            f"{_where(row)}: {row.name} exists now"
        )
