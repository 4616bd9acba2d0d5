"""The pipeline file schema (version 1), as pydantic v2 models.

A pipeline file is data, never code::

    ddr: 1                      # schema version
    name: quickstart
    params: {data: demo.zarr, out: quickstart-output, k: 10}
    inputs:
      X: {path: "${params.data}", array: X}
    steps:
      pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: "${params.k}"}}
      scores: {op: transform, inputs: {model: pca, X: X}}
    outputs:
      - {kind: zarr, from: scores, path: "${params.out}/scores.zarr"}
      - {kind: plot, plot: scree, from: pca, path: "${params.out}/scree.png"}
    run: {if_exists: skip-if-complete, summary: "${params.out}/run-summary.json"}

Each entry of ``outputs`` is the spec of its kind (:mod:`ddr.pipeline.outputs`: the union is
built from the registry of kinds, so a registered kind is known here, to ``ddr schema`` and
to the messages). :func:`validate` turns pydantic's errors into ``file:line:col: message``
problems with short messages (unknown keys list the valid ones). :func:`json_schema` is what
``ddr schema`` prints, for editors.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field

from ddr.config.document import Document
from ddr.config.validation import SCHEMA_VERSION
from ddr.config.validation import validate as _validate
from ddr.pipeline.outputs import output_kinds
from ddr.pipeline.outputs.registry import generation
from ddr.pipeline.spec_types import InputSpec, PipelineSpec, RunOptions, StepSpec, split_ref

__all__ = [
    "SCHEMA_VERSION",
    "InputSpec",
    "Output",
    "Pipeline",
    "RunOptions",
    "StepSpec",
    "json_schema",
    "output_union",
    "split_ref",
    "validate",
]


def output_union() -> Any:
    """The specs of every registered output kind, told apart by ``kind:`` (a discriminated
    union; a kind's own spec may be a union too, as plots are by ``plot:``)."""
    specs = tuple(kind.spec_type() for kind in output_kinds().values())
    return Annotated[Union[specs], Field(discriminator="kind")]  # noqa: UP007


class Output:
    """Any output entry: the spec of the registered kind its ``kind:`` names.

    Stands for :func:`output_union` wherever pydantic builds a validator, so a kind
    registered after this module was imported is known to the validators built since
    (:func:`validate` rebuilds :class:`Pipeline` when the kinds changed).
    """

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return handler.generate_schema(output_union())

    @classmethod
    def resolved_type(cls) -> Any:
        """The type this stands for now (for :mod:`ddr.config.validation`'s messages)."""
        return output_union()


class Pipeline(PipelineSpec):
    """A ddr pipeline file."""

    # built on first use, not at import: building asks the registry of output kinds, whose
    # first use reads the plug-ins' entry points (ddr.plugins)
    model_config = ConfigDict(**PipelineSpec.model_config, defer_build=True)

    outputs: list[Output] = Field(min_length=1)


# ------------------------------------------------------------------------ validation
def json_schema(ops: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON Schema of pipeline files (``ddr schema``).

    With ``ops`` (the registry's :class:`~ddr.pipeline.registry.Op` objects by name), ``op``
    lists them and each op's ``with:`` is described by the class's declared parameters
    (``_parameter_constraints``: types, ranges, options, defaults, required ones).
    """
    _current()
    schema = Pipeline.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://ddr.invalid/schema/pipeline-v1.json"
    schema["title"] = "ddr pipeline (schema version 1)"
    if ops:
        step = schema["$defs"]["StepSpec"]
        step["properties"]["op"]["enum"] = sorted(ops)
        step["allOf"] = [
            {
                "if": {"properties": {"op": {"const": name}}, "required": ["op"]},
                "then": {"properties": {"with": _with_schema(op)}},
            }
            for name, op in sorted(ops.items())
        ]
    return schema


def _with_schema(op: Any) -> dict[str, Any]:
    """The schema of one op's ``with:`` mapping, from its declared parameters."""
    props = {}
    for name, param in op.params.items():
        prop = param_schema(param.constraints)
        if not param.required:
            prop["default"] = _json_default(param.default)
        props[name] = prop
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    required = sorted(n for n, p in op.params.items() if p.required)
    if required:
        out["required"] = required
    return out


def param_schema(constraints: Any) -> dict[str, Any]:
    """JSON Schema of a value satisfying any of scikit-learn's ``constraints`` (what YAML can
    hold: callables and estimator objects have no form there and are left out)."""
    from numbers import Integral

    from sklearn.utils._param_validation import Interval, Options, make_constraint

    from ddr.pipeline.registry import constraint_text

    if constraints == "no_validation":
        return {}
    alternatives: list[dict[str, Any]] = []
    for raw in constraints:
        if raw is callable:
            continue
        c = make_constraint(raw)
        kind = type(c).__name__
        if isinstance(c, Interval):
            one: dict[str, Any] = {"type": "integer" if c.type is Integral else "number"}
            if c.left is not None:
                key = "minimum" if c.closed in ("left", "both") else "exclusiveMinimum"
                one[key] = c.left
            if c.right is not None:
                key = "maximum" if c.closed in ("right", "both") else "exclusiveMaximum"
                one[key] = c.right
        elif isinstance(c, Options):
            one = {"enum": sorted(c.options, key=str)}
        elif kind == "_NoneConstraint":
            one = {"type": "null"}
        elif kind == "_Booleans":
            one = {"type": "boolean"}
        elif kind == "_ArrayLikes":
            one = {"type": "array"}
        elif kind == "_RandomStates":
            one = {"type": ["integer", "null"], "minimum": 0}
        elif kind == "_InstancesOf" and c.type in _JSON_TYPES:
            one = {"type": _JSON_TYPES[c.type]}
        else:
            continue
        one["description"] = constraint_text(raw)
        alternatives.append(one)
    if len(alternatives) == 1:
        return alternatives[0]
    return {"anyOf": alternatives}


_JSON_TYPES = {str: "string", dict: "object", bool: "boolean", int: "integer", float: "number"}


def _json_default(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def validate(doc: Document, model: type[BaseModel] = Pipeline) -> BaseModel | None:
    """Validate a pipeline document (problems are added to ``doc.problems``)."""
    _current()
    return _validate(doc, model)


#: the generation of the registered kinds :class:`Pipeline` was built for
_built = [generation()]


def _current() -> None:
    """Rebuild :class:`Pipeline` if output kinds were registered or removed since it was
    built (its validator and schema hold the union of their specs)."""
    if _built[0] != generation():
        Pipeline.model_rebuild(force=True)
        _built[0] = generation()
