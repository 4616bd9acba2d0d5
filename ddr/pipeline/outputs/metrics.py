"""``kind: metrics``: numbers, statistics' read-outs and small fitted attributes, as one
JSON file (the fingerprint and provenance under ``ddr:`` keys)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ddr.pipeline.outputs.arrays import statistic_readouts
from ddr.pipeline.outputs.base import CheckContext, OutputSpec, WriteContext, register_output_kind
from ddr.pipeline.outputs.files import FileKind
from ddr.pipeline.reports import FINGERPRINT_KEY, PROVENANCE_KEY, json_bytes
from ddr.pipeline.spec_types import Name, Ref

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["MetricsKind", "MetricsOutput"]


class MetricsOutput(OutputSpec):
    """Scores, statistics read-outs and small fitted attributes as JSON."""

    kind: Literal["metrics"]
    from_: Ref | list[Ref] | dict[Name, Ref] = Field(alias="from")


@register_output_kind
class MetricsKind(FileKind):
    """Small values as JSON, keyed by the keys of ``from`` (or the references)."""

    name = "metrics"
    spec = MetricsOutput
    takes = (
        "references to numbers, statistics or small fitted attributes (a list or "
        "`{key: reference}`)"
    )
    writes = "JSON"

    def check(self, ctx: CheckContext, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        for key, meta in metas.items():
            where = ("outputs", out.index, *self.ref_where(out.spec, key))
            if meta.kind == "array":
                ctx.problem(
                    where,
                    f"{out.refs[key]!r} is an "
                    "array with one value per sample; metrics are small values "
                    "(write arrays with kind: zarr)",
                )
            elif meta.kind == "model":
                ctx.problem(
                    where,
                    f"{out.refs[key]!r} is a "
                    "model; name one of its fitted attributes (e.g. "
                    f"{out.refs[key]}.explained_variance_ratio_) or save it with "
                    "kind: model",
                )
            elif meta.kind == "search":
                head = out.refs[key].partition(".")[0]
                ctx.problem(
                    where,
                    f"{out.refs[key]!r} is a grid search; name its small results "
                    f"({head}.best_params_, {head}.best_score_, {head}.best_index_), or write "
                    "its cv_results with kind: cv_results",
                )

    def render(self, w: WriteContext, out: OutputPlan) -> bytes:
        data: dict[str, Any] = {}
        for key, ref in out.refs.items():
            value = w.value(ref)
            if hasattr(value, "to_dict") and hasattr(value, "merge"):  # a statistic
                value = statistic_readouts(value)
            data[key] = value
        data[PROVENANCE_KEY] = w.provenance(out)
        return json_bytes(data, out.fingerprint)

    def fingerprint_in(self, content: bytes) -> str | None:
        data = json.loads(content.decode("utf-8"))
        return data.get(FINGERPRINT_KEY) if isinstance(data, dict) else None

    def provenance_in(self, content: bytes) -> dict[str, Any] | None:
        return json.loads(content.decode("utf-8")).get(PROVENANCE_KEY)

    def contents(self, content: bytes) -> dict[str, Any]:
        data = json.loads(content)
        return {"keys": [k for k in data if not k.startswith("ddr:")]}

    def examples(self) -> list[dict[str, Any]]:
        return [
            {
                "output": {
                    "from": {"ratio": "pca.explained_variance_ratio_", "mean": "moments.mean"},
                    "path": "metrics.json",
                },
                "steps": {
                    "pca": {"op": "PCA.fit", "inputs": {"X": "X"}, "with": {"n_components": 2}},
                    "moments": {"op": "moments", "inputs": {"X": "X"}},
                },
            }
        ]
