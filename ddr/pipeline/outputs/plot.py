"""``kind: plot``: a PNG figure drawn by one of the plot kinds
(:mod:`ddr.pipeline.outputs.plots`), with the fingerprint and the provenance in PNG text
chunks. A plot of a model is drawn as soon as the model exists; a plot of data (scatter,
confusion, a density's histogram) in the run's final pass, sharing its reads."""

from __future__ import annotations

import importlib.util
import io
import json
from typing import TYPE_CHECKING, Any

from ddr.io.locations import redact
from ddr.pipeline.outputs.base import (
    CheckContext,
    Streamed,
    WriteContext,
    register_output_kind,
)
from ddr.pipeline.outputs.files import FileKind
from ddr.pipeline.outputs.plots import PlotOutput, plot_kind, plot_kinds, plot_union
from ddr.pipeline.reports import FINGERPRINT_KEY, PROVENANCE_KEY, jsonable

if TYPE_CHECKING:
    from ddr.pipeline.outputs.plots import PlotKind
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["PlotOutputKind", "png_bytes"]


@register_output_kind
class PlotOutputKind(FileKind):
    """A figure; what it shows, what it is drawn from and its own fields are its plot
    kind's (``plot:``)."""

    name = "plot"
    spec = PlotOutput
    writes = "PNG (matplotlib, the `plot` extra)"

    @property
    def takes(self) -> str:  # type: ignore[override]
        """The plots and what each is drawn from (from the registry of plot kinds)."""
        return "`plot:` " + ", ".join(f"`{p.name}` ({p.takes})" for p in plot_kinds().values())

    def spec_type(self) -> Any:
        return plot_union()

    def _plot(self, spec: Any) -> PlotKind:
        return plot_kind(spec.plot)

    # ---------------------------------------------------------------- planning
    def refs(self, spec: Any) -> dict[str, str]:
        return {**super().refs(spec), **self._plot(spec).refs(spec)}

    def planned_refs(self, spec: Any, ctx: CheckContext) -> dict[str, str]:
        return {**super().refs(spec), **self._plot(spec).planned_refs(spec, ctx)}

    def ref_where(self, spec: Any, key: str) -> tuple[Any, ...]:
        plot = self._plot(spec)
        if key in plot.refs(spec) or key not in super().refs(spec):
            return plot.ref_where(spec, key)
        return ("from",)

    def check(self, ctx: CheckContext, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        spec = out.spec
        base = ("outputs", out.index)
        if importlib.util.find_spec("matplotlib") is None:
            ctx.problem((*base, "plot"), "plots need matplotlib: pip install 'ddr-stats[plot]'")
        if not spec.path.lower().endswith(".png"):
            ctx.problem(
                (*base, "path"),
                f"plots are PNG files; the path must end in .png (got {spec.path!r})",
            )
        src = metas.get(next(iter(out.refs)))
        if src is not None:
            self._plot(spec).check(ctx, out, src, metas)

    def streams(self, out: OutputPlan, metas: dict[str, ValueMeta]) -> bool:
        return any(m.kind == "array" for m in metas.values())

    # ----------------------------------------------------------------- writing
    def render(self, w: WriteContext, out: OutputPlan) -> bytes:
        plot = self._plot(out.spec)
        lazy, known = plot.gather(w, out)
        computed = dict(zip(lazy, w.compute(list(lazy.values())), strict=True)) if lazy else {}
        return self._png(w, out, plot.finish(computed, known))

    def stream(self, w: WriteContext, out: OutputPlan) -> Streamed:
        plot = self._plot(out.spec)
        lazy, known = plot.gather(w, out)

        def finish(values: list[Any]) -> None:
            data = plot.finish(dict(zip(lazy, values, strict=True)), known)
            self.write_file(w, out, self._png(w, out, data))

        return Streamed(lazy=list(lazy.values()), finish=finish)

    def _png(self, w: WriteContext, out: OutputPlan, data: dict[str, Any]) -> bytes:
        provenance = w.provenance(out)
        fig = self._plot(out.spec).draw(data, out.spec.title)
        return png_bytes(fig, out.fingerprint, provenance)

    # ------------------------------------------------------------ reading back
    def fingerprint_in(self, content: bytes) -> str | None:
        return _text_chunks(content).get(FINGERPRINT_KEY)

    def provenance_in(self, content: bytes) -> dict[str, Any] | None:
        text = _text_chunks(content).get(PROVENANCE_KEY)
        return json.loads(text) if text else None

    def examples(self) -> list[dict[str, Any]]:
        out = []
        for plot in plot_kinds().values():
            example = plot.example()
            out.append({**example, "output": {"plot": plot.name, **example["output"]}})
        return out


def _text_chunks(content: bytes) -> dict[str, str]:
    from PIL import Image

    with Image.open(io.BytesIO(content)) as im:
        return dict(im.text)


def png_bytes(fig: Any, fingerprint: str | None, provenance: dict[str, Any] | None) -> bytes:
    """A Figure as PNG bytes (closed after), the fingerprint and the provenance (secrets
    redacted) in text chunks."""
    import matplotlib.pyplot as plt

    from ddr._version import __version__

    meta = {"Software": f"ddr {__version__}"}
    if fingerprint is not None:
        meta[FINGERPRINT_KEY] = fingerprint
    if provenance is not None:
        meta[PROVENANCE_KEY] = json.dumps(redact(jsonable(provenance)), default=str)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=110, metadata=meta, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()
