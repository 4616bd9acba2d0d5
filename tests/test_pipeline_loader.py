"""Reading pipeline files: positions of every value, safe YAML only, interpolation of
${params.x}, --set overrides, and the JSON Schema."""

from __future__ import annotations

import json

import pytest

from ddr.config.document import parse_overrides
from ddr.config.errors import Location
from ddr.pipeline import PipelineError, json_schema, load_document, registry
from ddr.pipeline.outputs import output_kinds


def load(text, overrides=()):
    return load_document("p.yaml", list(overrides), text=text)


def test_positions_of_keys_values_and_items():
    doc = load("a: 1\nb:\n  c: [1, 2]\n  d: {e: x}\ns:\n  - k: 1\n")
    assert doc.where(("b",), key=True) == Location("p.yaml", 2, 1)
    assert doc.where(("b", "c")) == Location("p.yaml", 3, 6)
    assert doc.where(("b", "c", 1)) == Location("p.yaml", 3, 10)
    assert doc.where(("b", "d", "e")) == Location("p.yaml", 4, 10)
    assert doc.where(("s", 0, "k")) == Location("p.yaml", 6, 8)
    # a missing key is placed at the key of the mapping it is missing from
    assert doc.where(("b", "nope")) == Location("p.yaml", 2, 1)
    assert doc.data == {"a": 1, "b": {"c": [1, 2], "d": {"e": "x"}}, "s": [{"k": 1}]}


def test_scalars_become_plain_python():
    doc = load("i: 1_000\nf: 1.5e3\nb: true\nn: ~\nd: 2024-01-02\ns: !!str 5\n")
    assert doc.data == {"i": 1000, "f": 1500.0, "b": True, "n": None, "d": "2024-01-02", "s": "5"}
    assert type(doc.data["i"]) is int and type(doc.data["f"]) is float


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("a: 1\na: 2\n", (2, 1), "duplicate key 'a'"),
        ("a: [1, 2\nb: 3\n", (2, 2), "YAML syntax error"),
        ("a: !!python/object/apply:os.system [ls]\n", (1, 4), "YAML tags are not allowed"),
        ("a: !custom {x: 1}\n", (1, 4), "YAML tags are not allowed"),
        ("a: !!binary aGk=\n", (1, 4), "values of type bytes are not allowed"),
        ("a: 1\n---\nb: 2\n", (1, 1), "the file holds 2 YAML documents"),
        ("", (1, 1), "the file is empty"),
        ("[1, 2]\n", (1, 1), "the top level must be a mapping"),
        ("{1: a}\n", (1, 2), "keys must be strings"),
    ],
)
def test_unsafe_or_malformed_yaml_is_rejected_with_its_place(text, where, message):
    with pytest.raises(PipelineError) as info:
        load(text)
    problem = info.value.problems[0]
    assert (problem.location.line, problem.location.col) == where
    assert message in problem.message


def test_interpolation_keeps_types_and_formats_strings():
    doc = load(
        "params: {k: 5, name: pca, out: res, nested: {x: 1.5}, path: '${params.out}/x'}\n"
        "a: ${params.k}\nb: '${params.out}/${params.name}.zarr'\nc: ${params.nested.x}\n"
        "d: '$${params.k} costs ${params.k}'\ne: ${params.path}\n"
    )
    assert doc.data["a"] == 5
    assert doc.data["b"] == "res/pca.zarr"
    assert doc.data["c"] == 1.5
    assert doc.data["d"] == "${params.k} costs 5"
    assert doc.data["e"] == "res/x"
    assert doc.data["params"]["path"] == "res/x"


def test_interpolation_errors_are_located():
    with pytest.raises(PipelineError) as info:
        load(
            "params: {a: '${params.b}', b: '${params.a}', data: x}\n"
            "x: ${params.dta}\ny: ${env.HOME}\nz: 'p-${params.data2}'\n"
        )
    found = {(p.location.line, p.location.col): p.message for p in info.value.problems}
    assert "params refer to each other in a cycle" in found[(1, 31)]
    assert "unknown param 'dta' in ${params.dta} (did you mean 'data'?)" in found[(2, 4)]
    assert "only ${params.NAME} is supported" in found[(3, 4)]
    assert "unknown param 'data2'" in found[(4, 4)]


def test_overrides_are_typed_and_checked():
    text = "params: {k: 5, name: a}\nrun: {if_exists: error}\nv: ${params.k}\n"
    doc = load(text, ["k=7", "name=b c", "run.if_exists=overwrite", "new.key=[1, 2]"])
    assert doc.data["v"] == 7 and doc.data["params"]["name"] == "b c"
    assert doc.data["run"]["if_exists"] == "overwrite"
    assert doc.data["new"] == {"key": [1, 2]}
    with pytest.raises(PipelineError) as info:
        load(text, ["kk=1"])
    problem = info.value.problems[0]
    assert str(problem).startswith("--set kk=1: no param 'kk' in p.yaml (did you mean 'k'?)")
    with pytest.raises(PipelineError, match="expected key=value"):
        parse_overrides(["novalue"])
    assert parse_overrides(["a=1", "b=x", "c=", "d=2024-01-01"]) == [
        ("a", 1, "a=1"),
        ("b", "x", "b=x"),
        ("c", "", "c="),
        ("d", "2024-01-01", "d=2024-01-01"),
    ]


def test_json_schema_lists_ops_and_sections():
    schema = json_schema(registry.ops())
    json.dumps(schema)
    assert schema["$schema"].endswith("2020-12/schema")
    assert set(schema["required"]) == {"ddr", "name", "inputs", "outputs"}
    ops = schema["$defs"]["StepSpec"]["properties"]["op"]["enum"]
    assert "PCA.fit" in ops and "moments" in ops and "load" in ops
    assert schema["$defs"]["StepSpec"]["properties"]["with"]["type"] == "object"
    kinds = {
        d["properties"]["kind"]["const"] for k, d in schema["$defs"].items() if k.endswith("Output")
    }
    assert kinds == set(output_kinds())


def test_json_schema_describes_each_ops_parameters_from_their_declaration():
    """One declaration: the schema of PPCA.fit's with: is its _parameter_constraints."""
    import jsonschema

    schema = json_schema(registry.ops())
    by_op = {
        rule["if"]["properties"]["op"]["const"]: rule["then"]["properties"]["with"]
        for rule in schema["$defs"]["StepSpec"]["allOf"]
    }
    assert set(by_op) == set(registry.ops())
    ppca = by_op["PPCA.fit"]
    assert ppca["additionalProperties"] is False
    assert ppca["properties"]["solver"]["enum"] == ["closed_form", "em"]
    assert ppca["properties"]["max_iter"] == {
        "type": "integer",
        "minimum": 1,
        "description": "an int in the range [1, inf)",
        "default": 500,
    }
    assert by_op["load"]["required"] == ["path"]
    step = {"$defs": schema["$defs"], **schema["$defs"]["StepSpec"]}
    good = {"op": "PPCA.fit", "inputs": {"X": "X"}, "with": {"solver": "em", "max_iter": 3}}
    jsonschema.validate(good, step)
    for bad in ({"solver": "bogus"}, {"max_iter": 0}, {"n_component": 2}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, "with": bad}, step)
