"""``kind: model``: a fitted model, saved with ``est.save`` (a Zarr group: arrays as arrays,
parameters as JSON, no pickle) and read back with ``ddr.load``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ddr.io.outputs import FINGERPRINT_ATTR, PROVENANCE_ATTR
from ddr.pipeline.outputs.base import (
    CheckContext,
    OutputSpec,
    Probe,
    WriteContext,
    register_output_kind,
)
from ddr.pipeline.outputs.stores import StoreKind
from ddr.pipeline.plan import _a
from ddr.pipeline.spec_types import Ref, split_ref

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["ModelKind", "ModelOutput"]


class ModelOutput(OutputSpec):
    """A fitted model, saved with est.save (Zarr group, no pickle)."""

    kind: Literal["model"]
    from_: Ref = Field(alias="from")


@register_output_kind
class ModelKind(StoreKind):
    """A fitted model; a complete one with the same fingerprint is loaded by a rerun
    instead of fitting again."""

    name = "model"
    spec = ModelOutput
    takes = "a model"
    writes = (
        "`est.save` (Zarr group: arrays as arrays, parameters as JSON, no pickle); `ddr.load(path)`"
    )

    def check(self, ctx: CheckContext, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        meta = next(iter(metas.values()))
        if meta.kind != "model":
            ctx.problem(
                ("outputs", out.index, "from"),
                f"a model output needs a fitted model; {out.spec.from_!r} is {_a(meta.kind)}",
            )

    def write(self, w: WriteContext, out: OutputPlan) -> None:
        from ddr.io.models import save_model
        from ddr.io.outputs import history_line

        model = w.value(out.refs[next(iter(out.refs))])
        attrs = {
            FINGERPRINT_ATTR: out.fingerprint,
            PROVENANCE_ATTR: w.provenance(out),
            "history": history_line(w.argv),
        }
        save_model(model, out.location, if_exists=w.if_exists(out), attrs=attrs, claim=w.claim(out))

    def saved_model(self, out: OutputPlan) -> str | None:
        head, tail = split_ref(out.refs[next(iter(out.refs))])
        return head if tail in (None, "model") else None

    def recognizes(self, probe: Probe) -> int:
        return 2 if not probe.is_file and "ddr:model" in (probe.attrs or {}) else 0

    def examples(self) -> list[dict[str, Any]]:
        return [
            {
                "output": {"from": "nb", "path": "nb.model.zarr"},
                "steps": {"nb": {"op": "GaussianNB.fit", "inputs": {"X": "X", "y": "y"}}},
            }
        ]
