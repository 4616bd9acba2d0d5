"""``kind: zarr``: arrays (lazy ones streamed chunk by chunk by the workers), fitted
attributes and statistics' read-outs, to one Zarr v3 group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ddr.config.errors import RunError
from ddr.pipeline.outputs.arrays import (
    as_dataarray,
    consistent_rows,
    grid_coord_attrs,
    grid_layout,
    lazy_row_numbers,
    raw_writes,
    regular_chunks,
    rename_dims,
    sample_dim_of,
    statistic_dataset,
    statistic_maps,
    variable_strings,
)
from ddr.pipeline.outputs.base import (
    CheckContext,
    OutputSpec,
    Streamed,
    WriteContext,
    register_output_kind,
)
from ddr.pipeline.outputs.stores import StoreKind
from ddr.pipeline.plan import _shape
from ddr.pipeline.spec_types import Name, Ref, split_ref
from ddr.pipeline.summary import _rel

if TYPE_CHECKING:
    from ddr.io.outputs import PendingOutput
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["ZarrKind", "ZarrOutput"]


class ZarrOutput(OutputSpec):
    """Arrays to a Zarr group (data streamed by the workers, completion marker last)."""

    kind: Literal["zarr"]
    from_: Ref | dict[Name, Ref] = Field(
        alias="from", description="One reference, or variable name -> reference."
    )
    name: Name | None = Field(None, description="Variable name for a single `from`.")
    dims: list[Name] | dict[Name, list[Name]] | None = Field(
        None, description="New dim names (for a single `from`), or variable -> dim names."
    )
    coords: dict[Name, Ref] = Field(
        default_factory=dict, description="Coordinate name -> 1-D reference along samples."
    )
    attrs: dict[str, Any] = Field(default_factory=dict, description="Extra group attributes.")


@register_output_kind
class ZarrKind(StoreKind):
    """Arrays to a Zarr group; the variables are named by the keys of ``from`` (or
    ``name``), ``coords`` are 1-D references along the samples."""

    name = "zarr"
    spec = ZarrOutput
    takes = (
        "one reference, or `{variable: reference}`; plus `dims` (new dim names), `coords` "
        "(`{name: 1-D reference along samples}`), `attrs`"
    )
    writes = (
        "a Zarr v3 group; lazy arrays streamed chunk by chunk by the workers; statistics as "
        "their read-outs"
    )

    def refs(self, spec: ZarrOutput) -> dict[str, str]:
        src = spec.from_
        refs = {(spec.name or src.replace(".", "_")): src} if isinstance(src, str) else dict(src)
        for cname, ref in spec.coords.items():
            refs[f"coord:{cname}"] = ref
        return refs

    def ref_where(self, spec: ZarrOutput, key: str) -> tuple[Any, ...]:
        if key.startswith("coord:"):
            return ("coords", key.removeprefix("coord:"))
        return super().ref_where(spec, key)

    # ------------------------------------------------------------------ checks
    def check(self, ctx: CheckContext, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        spec: ZarrOutput = out.spec  # type: ignore[assignment]
        base = ("outputs", out.index)
        rows: dict[str, tuple[int | None, str]] = {}
        for key, meta in metas.items():
            where = (*base, *self.ref_where(spec, key))
            if meta.kind == "model":
                ctx.problem(
                    where,
                    f"{out.refs[key]!r} is a model; "
                    "save models with kind: model (or name a fitted attribute, e.g. "
                    f"{out.refs[key]}.components_)",
                )
                continue
            if meta.kind == "metric":
                ctx.problem(
                    where, f"{out.refs[key]!r} is a number; write numbers with kind: metrics"
                )
                continue
            if meta.kind == "search":
                ctx.problem(
                    where,
                    f"{out.refs[key]!r} is a grid search; write its results with kind: "
                    "cv_results (a Zarr group, one row per candidate)",
                )
                continue
            if key.startswith("coord:") and meta.shape is not None and len(meta.shape) != 1:
                ctx.problem(
                    where,
                    f"coordinate {key[6:]!r} must be "
                    f"1-D; {out.refs[key]!r} has shape {_shape(meta.shape)}",
                )
                continue
            if meta.kind == "array" and meta.shape:
                rows[key] = (meta.shape[0], out.refs[key])
        if isinstance(spec.dims, list):
            if isinstance(spec.from_, dict):
                ctx.problem(
                    (*base, "dims"),
                    "with several variables in `from`, give dims as "
                    "a mapping variable -> dim names",
                )
            else:
                key = next(iter(metas), None)
                _check_dims(ctx, out, key, metas.get(key), spec.dims, (*base, "dims"))
        elif isinstance(spec.dims, dict):
            for var, dims in spec.dims.items():
                if var not in out.refs:
                    ctx.problem(
                        (*base, "dims", var),
                        f"dims names the variable {var!r}, which "
                        f"is not in `from` ({', '.join(k for k in out.refs if ':' not in k)})",
                        key=True,
                    )
                    continue
                _check_dims(ctx, out, var, metas.get(var), dims, (*base, "dims", var))
        sizes = {n for n, _ in rows.values() if n is not None}
        if len(sizes) > 1:
            desc = ", ".join(f"{ref} ({n})" for n, ref in rows.values())
            ctx.problem(
                (*base, "from"),
                f"the arrays of one Zarr output must have the same number of samples; got {desc}",
            )

    def streams(self, out: OutputPlan, metas: dict[str, ValueMeta]) -> bool:
        return any(m.kind == "array" for m in metas.values())

    # ----------------------------------------------------------------- writing
    def write(self, w: WriteContext, out: OutputPlan) -> None:
        pending, _ = self._pending(w, out)
        w.compute([pending.delayed])
        pending.finalize()

    def stream(self, w: WriteContext, out: OutputPlan) -> Streamed:
        pending, ds = self._pending(w, out)
        raw = raw_writes(pending.store, ds)

        def finish(values: list[Any]) -> None:
            pending.finalize()

        if raw is None:  # a variable cannot be stored as it is: its own graph writes it
            return Streamed(lazy=[pending.delayed], finish=finish)
        return Streamed(stores=raw, finish=finish)

    def _pending(self, w: WriteContext, out: OutputPlan) -> tuple[PendingOutput, Any]:
        """Write the metadata of the output (``ddr.io.write_zarr(compute=False)``); return
        the pending output and the dataset whose lazy variables are still to be written."""
        from ddr.io import write_zarr

        spec: ZarrOutput = out.spec  # type: ignore[assignment]
        ds = self.dataset(w, out)
        attrs = dict(spec.attrs)
        attrs.setdefault("title", f"{w.plan.pipeline.name}: {', '.join(out.refs.values())}")
        pending = write_zarr(
            ds,
            out.location,
            if_exists=w.if_exists(out),
            inputs=[i.location for i in w.plan.inputs.values()],
            attrs=attrs,
            fingerprint=out.fingerprint,
            provenance=w.provenance(out),
            compute=False,
            claim=w.claim(out),
        )
        return pending, ds

    def dataset(self, w: WriteContext, out: OutputPlan, *, regular: bool = True) -> Any:
        """The dataset the output holds (lazy variables), as it is written: variables named
        and with their dims, rows made consistent, and (``regular``) regular chunks, one
        dask chunk per Zarr chunk. An update that extends the output writes its new rows
        from the same values (not rechunked first: a chunk of the output that spans old
        and new rows of an input would read the old ones)."""
        import xarray as xr

        spec: ZarrOutput = out.spec  # type: ignore[assignment]
        variables: dict[str, Any] = {}
        coords: dict[str, Any] = {}
        for key, ref in out.refs.items():
            if key.startswith("coord:"):
                coords[key.removeprefix("coord:")] = w.value(ref)
                continue
            value, chosen = _value_of(w, ref)
            if hasattr(value, "to_dict") and hasattr(value, "merge"):  # a statistic
                # its read-outs (all, or the one chosen) as the statistic declares them: on
                # the grid (maps) where it was computed on a grid input, one path for both
                names = None if chosen is None else (chosen,)
                layout = _grid_layout(w, ref)
                units = _data_units(w, ref)
                readouts = (
                    statistic_dataset(value, _feature_dim(w, ref), units, names)
                    if layout is None
                    else statistic_maps(value, layout, units, names)
                )
                for name, arr in readouts.items():
                    whole = name if len(out.refs) == 1 else f"{key}_{name}"
                    var = whole if chosen is None else key  # a chosen one: as `from` names it
                    variables[var] = arr.rename(var)
                continue
            variables[key] = as_dataarray(value, key)
        if isinstance(spec.dims, list):
            key = next(iter(variables))
            variables[key] = rename_dims(variables[key], spec.dims)
        elif isinstance(spec.dims, dict):
            for var, dims in spec.dims.items():
                variables[var] = rename_dims(variables[var], dims)
        ds = xr.Dataset(consistent_rows(variables))
        for cname, value in coords.items():
            arr = as_dataarray(value, cname)
            sdim = sample_dim_of(ds)
            if sdim is None:
                raise RunError(
                    f"coordinate {cname!r} needs an array along samples in `from`",
                    f"output {_rel(out.path)}",
                )
            ds = ds.assign_coords({cname: (sdim, arr.data)})
        ds = grid_coord_attrs(ds, [i.array for i in w.plan.inputs.values()])
        ds = variable_strings(lazy_row_numbers(ds))
        return regular_chunks(ds) if regular else ds

    # ----------------------------------------------------------------- testing
    def examples(self) -> list[dict[str, Any]]:
        pca = {"op": "PCA.fit", "inputs": {"X": "X"}, "with": {"n_components": 2}}
        scores = {"op": "PCA.transform", "inputs": {"model": "pca", "X": "X"}}
        return [
            {
                "output": {"from": {"scores": "scores", "label": "y"}, "path": "scores.zarr"},
                "steps": {"pca": pca, "scores": scores},
            },
            {
                "output": {"from": "pca.components_", "path": "components.zarr"},
                "steps": {"pca": pca},
            },
        ]


def _check_dims(
    ctx: CheckContext,
    out: OutputPlan,
    key: str | None,
    meta: ValueMeta | None,
    dims: list[str],
    where: tuple[Any, ...],
) -> None:
    if meta is None or meta.shape is None:
        return
    if len(dims) != len(meta.shape):
        ctx.problem(
            where,
            f"{len(dims)} dim names {dims} for {out.refs[key]!r}, which has "
            f"{len(meta.shape)} dims (shape {_shape(meta.shape)})",
        )
    elif len(set(dims)) != len(dims):
        ctx.problem(where, f"dim names must differ; got {dims}")


def _value_of(w: WriteContext, ref: str) -> tuple[Any, str | None]:
    """What ``ref`` names, and None; for a read-out of a statistic step chosen by name
    (``m.variance``), the statistic and that name (written as the whole statistic's
    read-outs are: labelled dims, maps on a grid, units)."""
    head, tail = split_ref(ref)
    step = w.plan.steps.get(head)
    if (
        step is not None
        and tail is not None
        and step.op.primary == "statistic"
        and tail not in step.outputs
    ):
        return w.value(head), tail
    return w.value(ref), None


def _grid_layout(w: WriteContext, ref: str) -> Any:
    """The grid of the X a statistic was computed on, when it is a grid input
    (``sample_dims:``) whose mask the plan read; else None."""
    step = w.plan.steps.get(split_ref(ref)[0])
    if step is None or "X" not in step.refs:
        return None
    inp = w.plan.inputs.get(split_ref(step.refs["X"])[0])
    grid = inp.spec.grid_sample_dims() if inp is not None else None
    if inp is None or grid is None or inp.grid_mask is None:
        return None
    return grid_layout(inp.array, grid, inp.grid_mask)


def _data_units(w: WriteContext, ref: str) -> str | None:
    """The units of the X a statistic was computed on (its ``units`` attribute), or None."""
    from ddr.stats._units import data_units

    step = w.plan.steps.get(split_ref(ref)[0])
    if step is None or "X" not in step.refs:
        return None
    units = data_units(w.value(step.refs["X"]))
    return units if isinstance(units, str) else None


def _feature_dim(w: WriteContext, ref: str) -> str:
    """The feature dim of the X a statistic was computed on (``feature`` if unnamed)."""
    step = w.plan.steps.get(split_ref(ref)[0])
    if step is not None and "X" in step.refs:
        X = w.value(step.refs["X"])
        dims = getattr(X, "dims", None)
        if dims and len(dims) == 2:
            return str(dims[1])
    return "feature"
