"""``kind: table``: columns of a CSV file, from 1-D values (fitted attributes, read-outs) or
arrays (a transform's output, one column per feature, computed in the run's final pass)."""

from __future__ import annotations

import json
from typing import Any, Literal

import numpy as np
from pydantic import Field

from ddr.pipeline.outputs import FileKind, OutputSpec, Streamed
from ddr.pipeline.spec_types import Name, Ref

__all__ = ["TableKind", "TableOutput"]


class TableOutput(OutputSpec):
    """Values as the columns of a CSV file."""

    kind: Literal["table"]
    from_: dict[Name, Ref] = Field(alias="from", description="Column name -> reference.")
    delimiter: Literal[",", ";", "\t"] = Field(",", description="Between the columns.")


def _lazy(value: Any) -> bool:
    data = getattr(value, "data", value)  # a DataArray's array
    return hasattr(data, "dask")


class TableKind(FileKind):
    """A CSV file: a header, one row per element, then ``# ddr:`` lines (provenance and,
    last, the fingerprint). A 2-D value gives one column per feature (``name_0``, ...)."""

    name = "table"
    spec = TableOutput
    takes = "`{column: reference}` to 1-D values or arrays with as many rows"
    writes = "CSV"

    def check(self, ctx: Any, out: Any, metas: dict[str, Any]) -> None:
        for key, meta in metas.items():
            if meta.kind == "model":
                ctx.problem(
                    ("outputs", out.index, *self.ref_where(out.spec, key)),
                    f"{out.refs[key]!r} is a model; a table holds values and arrays",
                )

    def streams(self, out: Any, metas: dict[str, Any]) -> bool:
        return any(m.kind == "array" for m in metas.values())

    def _gather(self, w: Any, out: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        values = {key: w.value(ref) for key, ref in out.refs.items()}
        lazy = {k: getattr(v, "data", v) for k, v in values.items() if _lazy(v)}
        return lazy, {k: v for k, v in values.items() if k not in lazy}

    def render(self, w: Any, out: Any) -> bytes:
        lazy, known = self._gather(w, out)
        computed = dict(zip(lazy, w.compute(list(lazy.values())), strict=True)) if lazy else {}
        return self._csv(w, out, {**known, **computed})

    def stream(self, w: Any, out: Any) -> Streamed:
        lazy, known = self._gather(w, out)

        def finish(values: list[Any]) -> None:
            computed = dict(zip(lazy, values, strict=True))
            self.write_file(w, out, self._csv(w, out, {**known, **computed}))

        return Streamed(lazy=list(lazy.values()), finish=finish)

    def _csv(self, w: Any, out: Any, values: dict[str, Any]) -> bytes:
        columns: dict[str, np.ndarray] = {}
        for key in out.refs:  # in the entry's order
            value = np.asarray(values[key])
            if value.ndim == 2:
                columns.update({f"{key}_{j}": value[:, j] for j in range(value.shape[1])})
            else:
                columns[key] = np.ravel(value)
        sep = out.spec.delimiter
        lines = [sep.join(columns)]
        rows = zip(*columns.values(), strict=True)
        lines += [sep.join(repr(float(v)) for v in row) for row in rows]
        lines.append("# ddr:provenance=" + json.dumps(w.provenance(out), default=str))
        lines.append(f"# ddr:fingerprint={out.fingerprint}")
        return ("\n".join(lines) + "\n").encode()

    def _comments(self, content: bytes) -> dict[str, str]:
        out = {}
        for line in content.decode().splitlines():
            if line.startswith("# ddr:"):
                key, _, value = line[2:].partition("=")
                out[key] = value
        return out

    def fingerprint_in(self, content: bytes) -> str | None:
        return self._comments(content).get("ddr:fingerprint")

    def provenance_in(self, content: bytes) -> dict[str, Any] | None:
        value = json.loads(self._comments(content)["ddr:provenance"])
        return value if isinstance(value, dict) else None

    def contents(self, content: bytes) -> dict[str, Any]:
        rows = [r for r in content.decode().splitlines() if not r.startswith("#")]
        return {"columns": rows[0], "rows": len(rows) - 1}

    def examples(self) -> list[dict[str, Any]]:
        fit = {"op": "MaxAbsScaler.fit", "inputs": {"X": "X"}}
        scaled = {"op": "MaxAbsScaler.transform", "inputs": {"model": "scaler", "X": "X"}}
        columns = {"max_abs": "scaler.max_abs_", "scale": "scaler.scale_"}
        return [
            {"output": {"from": columns, "path": "scale.csv"}, "steps": {"scaler": fit}},
            {
                "output": {"from": {"x": "scaled"}, "path": "scaled.csv"},
                "steps": {"scaler": fit, "scaled": scaled},
            },
        ]
