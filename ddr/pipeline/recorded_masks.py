"""What a run's state records of an input's identity, and the mask of a grid input that
``ddr run --update`` takes from it instead of reading the first sample again.

A grid input's mask (its features NaN at the first sample) decides the features every fit on
it sees, so planning needs it; it used to be read each time a pipeline was planned. On a
field chunked by space, the first time step lies in every stored chunk: finding the mask read
the whole store before the run, outside its counted passes, which an update (reading only
the appended time steps) exists to avoid.

The run's state keeps the mask (packed bits in its Zarr group,
:func:`ddr.pipeline.run_state.write_state`) beside the record of the input's stored chunks
(:class:`ddr.io.chunk_records.ArrayRecord`, one listing). An update takes the recorded mask
(:func:`recorded_mask`) when the input is read as it was (same identity: path, array,
selection, sample dims, ...) and the stored objects of the row block holding its first
selected sample are those of the last run (the listing's tokens: size and modification time,
or ETag): the first sample, hence its mask, is then the one recorded, and no sample is
read. Anything else (chunks rewritten, another layout or grid, a selection that moved, a
first block that was partial, no mask recorded) reads the first sample as a first run does,
so another mask is found and, being part of the input's identity (:func:`input_identity`),
makes the update a full run. The appended rows are checked against the mask in the pass that
reads them (a masked point with a value is an error naming it), as every fit on a grid does.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ddr.io.chunk_records import ArrayRecord, array_record, compare_records

if TYPE_CHECKING:
    from ddr.io.locations import Location
    from ddr.pipeline.run_state import RunState
    from ddr.pipeline.spec_types import InputSpec

__all__ = ["contiguous_start", "input_identity", "mask_digest", "recorded_mask"]


def contiguous_start(isel: Any, sample_dim: str, stored_rows: int) -> int | None:
    """The stored row of the first row an input's ``isel`` selects along ``sample_dim``,
    when what it selects is a run of rows that appending does not move (no selection,
    ``start:`` or ``start:stop`` with bounds that are not negative); None for any other
    selection (a list, a negative bound)."""
    sel = (isel or {}).get(sample_dim)
    if sel is None:
        return 0
    if not isinstance(sel, str):
        return None
    start, _, stop = sel.partition(":")
    lo = int(start) if start.strip() else 0
    if lo < 0 or (stop.strip() and int(stop) < 0):
        return None
    return min(lo, stored_rows)


def mask_digest(mask: Any) -> dict[str, Any]:
    """What names a grid's mask in an input's identity: its shape and a digest of its bits."""
    bits = np.asarray(mask, dtype=bool)
    digest = hashlib.sha256(np.packbits(bits).tobytes()).hexdigest()[:32]
    return {"shape": list(bits.shape), "sha256": digest}


def input_identity(path: str, spec: InputSpec, sample_dim: str, mask: Any) -> dict[str, Any]:
    """What names an input in the run's state: where it is and what of it is read (never its
    credentials); for a grid, its sample dims and, where known, its mask (another mask: other
    features, statistics that do not merge).

    Parameters
    ----------
    path : str
        The input's normalised location (its URL).
    spec : InputSpec
        What the pipeline says of it.
    sample_dim : str
        Its sample dim (a grid's first sample dim).
    mask : array of bool, optional
        A grid's mask (feature dims' shape); None when not known.

    Returns
    -------
    dict
        JSON values.
    """
    out: dict[str, Any] = {
        "path": path,
        "array": spec.array,
        "isel": spec.isel,
        "sample_dim": sample_dim,
        "chunks": spec.chunks,
        "missing_chunks": spec.missing_chunks,
    }
    grid = spec.grid_sample_dims()
    if grid is not None:  # read as a grid: other features than its rows (left out otherwise)
        out["sample_dims"] = list(grid)
        if mask is not None:
            out["mask"] = mask_digest(mask)
    return out


def recorded_mask(
    last: RunState,
    name: str,
    loc: Location,
    spec: InputSpec,
    sample_dim: str,
    shape: tuple[int, ...],
) -> tuple[np.ndarray | None, ArrayRecord | None]:
    """The mask the last run recorded of grid input ``name``, where it is still the mask of
    the input's first sample (see the module docstring); and the listing of its stored
    array made to tell (the run's state records it: it is not listed again).

    Parameters
    ----------
    last : RunState
        The state the last run left.
    name : str
        The input.
    loc : Location
        Where it is.
    spec : InputSpec
        What the pipeline says of it now.
    sample_dim : str
        Its first sample dim (the axis rows are appended along).
    shape : tuple of int
        The sizes of its feature dims now, in its order (after its selection).

    Returns
    -------
    (mask or None, ArrayRecord or None)
        None for the mask where the first sample must be read to find it; None for the
        listing where none was made (or the input is not one Zarr array).
    """
    old = last.inputs.get(name)
    if old is None or old.array is None or not loc.is_zarr():
        return None, None
    mask = last.mask(name)
    if mask is None or tuple(mask.shape) != tuple(shape):
        return None, None
    said = dict(old.identity)
    if said.pop("mask", None) != mask_digest(mask):  # a state whose parts disagree: not used
        return None, None
    if said != input_identity(loc.url, spec, sample_dim, None):
        return None, None
    try:
        now = array_record(loc, spec.array, sample_dim)
    except (OSError, ValueError):  # the store did not answer: planned as a first run is
        return None, None
    if now is None:
        return None, None
    growth = compare_records(old.array, now)
    start = contiguous_start(spec.isel, sample_dim, now.rows)
    if growth.status == "changed" or start is None or start != old.start:
        return None, now
    # the first sample's row block must be one whose stored objects are as they were (an
    # old partial block that an append rewrote may hold other values now)
    if start >= growth.dirty_from:
        return None, now
    return mask, now
