"""Issue 15 acceptance: ``ddr validate`` refuses every invalid parameter value of every op,
with ``file:line:col``, exit code 2, and nothing read.

The bad values are generated from the declarations themselves (scikit-learn's
``generate_invalid_param_val``, one per declared constraint, plus a value of a wrong type),
so an op added later is covered by being an op."""

from __future__ import annotations

import json
import math
import re

from pipeline_support import ReadCounter, make_data
from sklearn.utils._param_validation import (
    InvalidParameterError,
    generate_invalid_param_val,
    make_constraint,
    validate_parameter_constraints,
)
from typer.testing import CliRunner

from ddr.cli import app
from ddr.pipeline import registry

#: values of the wrong type for most declarations (each is used where no constraint takes it)
WRONG_TYPES = ({"bad": 1}, [["nested"]], 5, "bogus")
#: a valid value for each required parameter of an op (``load``'s path), by name
REQUIRED_VALUES = {"path": "never-saved.zarr"}


def _yaml(value):
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return json.dumps(value)


def bad_values(param):
    """One invalid value per declared constraint, then one of a wrong type."""
    if param.constraints == "no_validation":
        return []
    candidates = []
    for c in param.constraints:
        try:
            candidates.append(generate_invalid_param_val(make_constraint(c)))
        except NotImplementedError:  # no value violates it alone (e.g. "boolean", None)
            continue
    candidates.extend(WRONG_TYPES)
    out = []
    for value in candidates:
        try:
            validate_parameter_constraints({"p": param.constraints}, {"p": value}, "test")
        except InvalidParameterError:
            out.append(value)
            if len(out) > len(param.constraints):
                break
    return out


def _cases():
    cases = []
    for name, op in sorted(registry.ops().items()):
        for pname, param in op.params.items():
            for value in bad_values(param):
                cases.append((name, pname, value))
    return cases


CASES = _cases()


def _inputs(op):
    refs = {"X": "X", "y": "y", "sample_weight": "w"}
    return {r.name: refs[r.name] for r in op.roles if r.required or r.name == "y"}


def test_every_op_with_parameters_has_generated_bad_values():
    ops_with_params = {n for n, op in registry.ops().items() if op.params}
    assert {name for name, _, _ in CASES} == ops_with_params
    for name, op in registry.ops().items():
        for pname, param in op.params.items():
            assert param.constraints != "no_validation", f"{name}: {pname} is not declared"


def test_validate_refuses_every_bad_value_with_its_location_and_reads_nothing(
    tmp_path, monkeypatch
):
    make_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    lines = [
        "ddr: 1",
        "name: bad-params",
        "inputs:",
        "  X: {path: demo.zarr, array: X}",
        "  y: {path: demo.zarr, array: y}",
        "steps:",
    ]
    expected = []
    for i, (name, pname, value) in enumerate(CASES):
        op = registry.get_op(name)
        roles = ", ".join(f"{r}: {ref}" for r, ref in _inputs(op).items())
        lines += [f"  s{i}:", f"    op: {name}", f"    inputs: {{{roles}}}"]
        # the op's other required parameters get a valid value, so only ``pname`` is refused
        others = "".join(
            f", {other}: {_yaml(REQUIRED_VALUES[other])}"
            for other, param in op.params.items()
            if other != pname and param.required
        )
        prefix = f"    with: {{{pname}: "
        lines.append(prefix + _yaml(value) + others + "}")
        where = op.cls.__name__ if op.family == "fit" else name
        expected.append((len(lines), len(prefix) + 1, pname, where))
    lines += ["outputs:", "  - {kind: model, from: s0, path: out/never.zarr}"]
    path = tmp_path / "bad-params.yaml"
    path.write_text("\n".join(lines) + "\n")
    with ReadCounter() as counter:
        result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert not counter.bytes, "data was read before the problems were reported"
    reported = [ln for ln in result.output.splitlines() if ln.startswith(str(path))]
    by_line = {}
    for ln in reported:
        m = re.match(rf"{re.escape(str(path))}:(\d+):(\d+): (.*)$", ln)
        assert m, ln
        by_line.setdefault(int(m.group(1)), []).append((int(m.group(2)), m.group(3)))
    for line, col, pname, where in expected:
        assert line in by_line, f"line {line} ({pname} of {where}) was not refused"
        (got_col, message), *_ = by_line[line]
        assert got_col == col
        assert message.startswith(f"The {pname!r} parameter of {where} must be"), message
    assert len(reported) == len(expected)
    assert len(expected) > 150  # every constraint of every op: a lot of them
