"""Extend a complete Zarr output by the rows appended to its inputs (``ddr run --update``).

An output whose every variable is per row, made by models that did not change since the
run that wrote it, holds the right values for every row it has: only the rows after
``clean`` (the new rows, and those of a partial input chunk an append rewrote) are
written. The values come from the same lazy dataset a full write would write
(:meth:`ddr.pipeline.outputs.zarr.ZarrKind.dataset`), cut to those rows, so they are the
values a full run writes, bit for bit.

The protocol keeps the promise of :mod:`ddr.io.outputs`: an output never looks complete
when it is not.

1. under the run's claim, one metadata write marks the group incomplete (with the claim's
   token) and drops its consolidated metadata (which would describe the old shapes);
2. every per-row array is resized along the sample dim, and the other arrays (a class
   coordinate) are rewritten whole;
3. the workers write the new rows' chunks with the run's final pass (blocks cut at the
   output's chunk boundaries, so no two tasks write one chunk; the chunk holding row
   ``clean`` keeps its rows before it);
4. every chunk is checked, then the fingerprint, the provenance and the completion
   marker are written last, and the metadata consolidated again.

A run interrupted in between leaves the output incomplete; the next run rewrites it whole.

:func:`refresh_output` does the same for a small Zarr output (a saved model, fitted
attributes) whose content an update leaves as it is: only its fingerprint and provenance
are written again, incomplete first and complete last.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddr.config.errors import RunError
from ddr.pipeline.outputs import Streamed
from ddr.pipeline.plan import OutputPlan
from ddr.pipeline.summary import _rel

__all__ = ["RowsFrom", "extend_stream", "refresh_output"]


class RowsFrom:
    """A Zarr array as a ``da.store`` target whose rows start at ``offset``: a block stored
    at rows ``i:j`` of the source lands at rows ``offset + i:offset + j`` of the array."""

    def __init__(self, array: Any, offset: int, shape: tuple[int, ...]) -> None:
        self.array = array
        self.offset = offset
        self.shape = shape
        self.dtype = array.dtype
        self.ndim = len(shape)

    def __setitem__(self, key: Any, value: Any) -> None:
        key = key if isinstance(key, tuple) else (key,)
        first = key[0]
        moved = slice(first.start + self.offset, first.stop + self.offset)
        self.array[(moved, *key[1:])] = value


def extend_stream(w: Any, out: OutputPlan) -> Streamed:
    """The share of the run's final pass of an output an update extends (see the module).

    Parameters
    ----------
    w : OutputWriter
        The runner (values, claims, provenance).
    out : OutputPlan
        An output the plan extends (``out.extend``: its rows then, now, and kept).

    Returns
    -------
    Streamed
        The new rows' chunks to store with the final pass, and the completion to make
        after it.

    Raises
    ------
    RunError
        The output does not hold what the last run wrote (another variable set, another
        number of rows).
    """
    import zarr

    from ddr.io.claims import CLAIM_ATTR
    from ddr.io.outputs import (
        STATUS_ATTR,
        PendingOutput,
        _final_attrs,
        claimed_store,
        fenced,
    )
    from ddr.pipeline.outputs import output_kind
    from ddr.pipeline.outputs.arrays import sample_dim_of

    rows = out.extend
    where = f"output {_rel(out.path)}"
    ds = output_kind(out.kind).dataset(w, out, regular=False)  # type: ignore[attr-defined]
    sdim = sample_dim_of(ds)
    claim = w.claim(out)
    store = claimed_store(out.location, claim)
    stores: list[tuple[Any, Any]] = []
    with fenced(claim), out.location.errors("write"):
        group = zarr.open_group(store, mode="r+", use_consolidated=False)
        old_attrs = group.attrs.asdict()
        _check_layout(group, ds, sdim, rows.old, where)
        first: dict[str, Any] = {STATUS_ATTR: "incomplete"}
        if claim is not None:
            first[CLAIM_ATTR] = claim.token
        group.update_attributes(first)  # written without the consolidated metadata
        for name, var in ds.variables.items():
            found: Any = group[str(name)]
            target = found.with_config({"write_empty_chunks": True})
            data = _as_stored(var, target)
            if data.dtype.kind in "UOT":
                data = data.astype(object)
            if var.dims[:1] != (sdim,):
                target[...] = np.asarray(data)  # small: a coordinate of another dim
                continue
            target.resize((rows.now, *target.shape[1:]))
            new = data[rows.clean : rows.now]
            if new.shape[0] == 0:
                continue
            stores.append((_aligned(new, rows.clean, target.chunks[0]), target))
    attrs = _final_attrs(old_attrs, out.fingerprint, w.provenance(out))
    pending = PendingOutput(out.location, None, attrs, store=store, claim=claim)
    targets = [(src, RowsFrom(tgt, rows.clean, src.shape)) for src, tgt in stores]

    def finish(values: list[Any]) -> None:
        pending.finalize()

    return Streamed(stores=targets, finish=finish)


def _as_stored(var: Any, target: Any) -> Any:
    """The values of ``var`` (a variable of the output's dataset) as ``target`` (its Zarr
    array) stores them: times and durations (a grid's ``time`` coordinate) CF-encoded with
    the units and calendar the array was written with, as xarray wrote them; other values
    as they are."""
    if np.dtype(var.dtype).kind not in "mM":
        return var.data
    import xarray as xr

    attrs = target.attrs.asdict()
    encoding = {k: attrs[k] for k in ("units", "calendar") if k in attrs}
    encoding["dtype"] = np.dtype(target.dtype)
    stored = xr.Variable(var.dims, var.data, encoding=encoding)
    return xr.conventions.encode_cf_variable(stored).data


def _aligned(data: Any, start: int, chunk: int) -> Any:
    """``data`` (rows from ``start`` on) in blocks cut at the output's chunk boundaries."""
    import dask.array as da

    n = data.shape[0]
    sizes = []
    at = start
    while at < start + n:
        stop = min((at // chunk + 1) * chunk, start + n)
        sizes.append(stop - at)
        at = stop
    if not isinstance(data, da.Array):
        data = da.from_array(np.asarray(data), chunks=(tuple(sizes), *data.shape[1:]))
    return data.rechunk({0: tuple(sizes)})


def _check_layout(group: Any, ds: Any, sdim: str | None, old_rows: int, where: str) -> None:
    """The output holds the variables the update writes, with ``old_rows`` rows each."""
    names = {str(n) for n, _ in group.arrays()}
    for name, var in ds.variables.items():
        if str(name) not in names:
            raise RunError(
                f"cannot extend: it has no variable {name!r} (rewritten since the last run?); "
                "run with --force to write it again",
                where,
            )
        arr = group[str(name)]
        if var.dims[:1] == (sdim,) and arr.shape[0] != old_rows:
            raise RunError(
                f"cannot extend: {name!r} has {arr.shape[0]} rows, the last run wrote "
                f"{old_rows}; run with --force to write it again",
                where,
            )


def refresh_output(w: Any, out: OutputPlan) -> None:
    """Rewrite the fingerprint and provenance of a complete Zarr output whose content an
    update leaves as it is (a model solved from the same recorded statistics), in two
    metadata writes under the run's claim: incomplete first, complete last.

    Parameters
    ----------
    w : OutputWriter
        The runner (claims, provenance).
    out : OutputPlan
        An output the plan refreshes (``out.refresh``).
    """
    import zarr

    from ddr.io.claims import CLAIM_ATTR
    from ddr.io.locations import redact
    from ddr.io.outputs import (
        FINGERPRINT_ATTR,
        PROVENANCE_ATTR,
        STATUS_ATTR,
        check_claimed,
        claimed_store,
        fenced,
        history_line,
        mark_complete,
    )

    claim = w.claim(out)
    store = claimed_store(out.location, claim)
    with fenced(claim), out.location.errors("write"):
        group = zarr.open_group(store, mode="r+", use_consolidated=False)
        history = str(group.attrs.get("history", ""))
        first: dict[str, Any] = {STATUS_ATTR: "incomplete"}
        if claim is not None:
            first[CLAIM_ATTR] = claim.token
        group.update_attributes(first)
        line = history_line(w.argv)
        attrs = {
            FINGERPRINT_ATTR: out.fingerprint,
            PROVENANCE_ATTR: redact(w.provenance(out)),
            "history": f"{history}\n{line}" if history else line,
        }
        check_claimed(out.location, claim, store)
        mark_complete(group, attrs)
