"""The state a run keeps beside its outputs, so that a later ``ddr run --update`` can read only
the rows appended since.

One Zarr v3 group (``run.state``; by default ``<name>.state.zarr`` beside the first
output) holds, as of the end of the last run that succeeded:

- per input: what identifies it (path, array, selection), its fingerprint, the rows it
  selected, and the record of its stored array (:class:`ddr.io.chunk_records.ArrayRecord`:
  shape, grid and one token per stored object, from one listing); for a grid input, its
  mask (packed bits, a Zarr array of the group: an update takes it instead of reading the
  first sample again, :mod:`ddr.pipeline.recorded_masks`);
- per fit or statistic step whose fit is one pass of mergeable statistics: what identifies
  it (op, parameters, inputs; :func:`step_config`), the rows it was fitted on, and two
  statistics: those the model was solved from (all its rows) and those of its *prefix*,
  the rows that lie in complete stored chunks of every input it reads. An update merges
  the statistics of the rows after the prefix into the prefix: a chunk that was partial
  (and that an append rewrites) is read again, never trusted;
- per output: the fingerprint it was complete with; per step: what identifies it.

The statistics are d x d matrices (a few per class for the classifiers), saved as a model's
are (:mod:`ddr.io.models`: arrays bit-exact, checksummed). The group is written as every
output is: metadata with ``ddr:status = "incomplete"`` first, under the run's claim, the
completion marker last; a state that is not complete is not read (the next update is a
full run). It is written after every output of the run is complete, so a run interrupted
before leaves the state of the run before, which still describes what that run read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ddr.io.chunk_records import ArrayRecord
from ddr.io.claims import CLAIM_ATTR, Claim
from ddr.io.locations import Location

__all__ = [
    "STATE_ATTR",
    "STATE_VERSION",
    "InputRecord",
    "RunState",
    "StepRecord",
    "read_state",
    "write_state",
]

#: the group attribute that holds the state (JSON; statistics point at arrays)
STATE_ATTR = "ddr:state"
#: the layout of the state; another one is not read (the next update is a full run)
STATE_VERSION = 1


@dataclass
class InputRecord:
    """What a run read of one input.

    Attributes
    ----------
    identity : dict
        Where it is and what it selects (path, array, isel, sample_dim, chunks).
    fingerprint : str
        Its fingerprint in that run's plan.
    rows : int
        The rows it selected.
    start : int or None
        The stored row of its first selected row, for a selection that is a run of rows
        (none, or ``start:stop``); None for any other selection.
    array : ArrayRecord or None
        The record of its stored array; None for inputs that are not one Zarr array.
    mask : array of bool or None
        A grid input's mask (True at the masked features, the feature dims' shape); None
        for other inputs. Not in :meth:`to_dict`: the state keeps it as packed bits in an
        array of its group (:func:`write_state`), read back by :meth:`RunState.mask`.
    """

    identity: dict[str, Any]
    fingerprint: str
    rows: int
    start: int | None
    array: ArrayRecord | None
    mask: np.ndarray | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "fingerprint": self.fingerprint,
            "rows": self.rows,
            "start": self.start,
            "array": None if self.array is None else self.array.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputRecord:
        arr = data.get("array")
        start = data.get("start")
        return cls(
            dict(data.get("identity") or {}),
            str(data.get("fingerprint", "")),
            int(data["rows"]),
            None if start is None else int(start),
            None if arr is None else ArrayRecord.from_dict(arr),
        )


@dataclass
class StepRecord:
    """The statistics a one-pass fit (or a statistic step) was solved from.

    Attributes
    ----------
    config : str
        What identifies the step but for the data (:func:`step_config`).
    fingerprint : str
        Its fingerprint in that run's plan.
    rows : int
        The rows it was fitted on.
    prefix_rows : int
        The rows of its prefix (in complete stored chunks of every input it reads).
    statistics : Any
        The statistics of all ``rows`` (what the model was solved from).
    prefix : Any or None
        The statistics of the first ``prefix_rows`` rows; None when that is none.
    """

    config: str
    fingerprint: str
    rows: int
    prefix_rows: int
    statistics: Any = None
    prefix: Any = None


@dataclass
class RunState:
    """The state of the last run that succeeded (see the module docstring)."""

    pipeline: str
    inputs: dict[str, InputRecord] = field(default_factory=dict)
    steps: dict[str, StepRecord] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    #: every step's config (:func:`ddr.pipeline.state_plan.StatePlanning._step_config`)
    configs: dict[str, str] = field(default_factory=dict)
    #: the group the statistics are read from (a state read back; None for one being made)
    group: Any = None
    _tags: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    _masks: dict[str, Any] = field(default_factory=dict)

    def mask(self, name: str) -> np.ndarray | None:
        """The mask of grid input ``name`` (bool, its feature dims' shape), read from the
        group the first time; None where none was recorded, or what was cannot be read
        (then the first sample is read, as a first run does)."""
        rec = self.inputs.get(name)
        if rec is None:
            return None
        if rec.mask is None and name in self._masks and self.group is not None:
            from ddr.io.models import _Decoder

            entry = self._masks.pop(name)  # read (or found unreadable) once
            try:
                shape = tuple(int(s) for s in entry["shape"])
                bits = np.asarray(_Decoder(self.group).decode(entry["bits"], f"masks.{name}"))
                if bits.dtype != np.uint8 or bits.shape != (-(-math.prod(shape) // 8),):
                    raise ValueError(f"{bits.dtype} bits of shape {bits.shape} for {shape}")
                unpacked = np.unpackbits(bits, count=math.prod(shape))
                rec.mask = unpacked.astype(bool).reshape(shape)
            except (KeyError, TypeError, ValueError):  # a damaged entry: found again instead
                return None
        return rec.mask

    def statistics(self, sid: str) -> tuple[Any, Any]:
        """``(statistics, prefix)`` of step ``sid``, read from the group the first time."""
        rec = self.steps[sid]
        if rec.statistics is None and sid in self._tags:
            from ddr.io.models import _Decoder

            dec = _Decoder(self.group)
            tag_all, tag_prefix = self._tags[sid]
            rec.statistics = dec.decode(tag_all, f"steps.{sid}.statistics")
            if tag_prefix == "statistics":  # the prefix is all the rows
                rec.prefix = rec.statistics
            elif tag_prefix is not None:
                rec.prefix = dec.decode(tag_prefix, f"steps.{sid}.prefix")
        return rec.statistics, rec.prefix


def read_state(loc: Location) -> tuple[RunState | None, str]:
    """The complete state at ``loc``, or None and why there is none.

    Parameters
    ----------
    loc : Location
        Where the state is.

    Returns
    -------
    (RunState or None, str)
        The state (its statistics read when asked, :meth:`RunState.statistics`), and an
        empty reason; or None and, in words, why no state can be used.
    """
    import zarr

    from ddr.io import output_status

    status = output_status(loc)
    if status == "missing":
        return None, f"no state at {loc.shown} (the last run recorded none)"
    if status != "complete":
        return None, f"the state at {loc.shown} is {status} (an interrupted run?)"
    with loc.errors("read"):
        group = zarr.open_group(loc.store(), mode="r")
        data = group.attrs.asdict().get(STATE_ATTR)
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        return None, f"{loc.shown} holds no state this ddr reads"
    try:
        state = RunState(str(data.get("pipeline", "")), group=group)
        for name, rec in dict(data.get("inputs") or {}).items():
            state.inputs[name] = InputRecord.from_dict(rec)
        for sid, rec in dict(data.get("steps") or {}).items():
            state.steps[sid] = StepRecord(
                str(rec["config"]),
                str(rec.get("fingerprint", "")),
                int(rec["rows"]),
                int(rec["prefix_rows"]),
            )
            state._tags[sid] = (rec["statistics"], rec.get("prefix"))
        state.outputs = {str(k): str(v) for k, v in dict(data.get("outputs") or {}).items()}
        state._masks = {str(k): v for k, v in dict(data.get("masks") or {}).items()}
        state.configs = {str(k): str(v) for k, v in dict(data.get("configs") or {}).items()}
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"the state at {loc.shown} cannot be read ({type(exc).__name__}: {exc})"
    return state, ""


def write_state(
    loc: Location,
    state: RunState,
    *,
    fingerprint: str,
    attrs: dict[str, Any],
    claim: Claim | None,
) -> None:
    """Write ``state`` at ``loc`` (replacing what is there), complete last.

    Parameters
    ----------
    loc : Location
        Where the state goes.
    state : RunState
        With every step's statistics in memory.
    fingerprint : str
        The state's fingerprint (a run whose plan has the same one keeps it).
    attrs : dict
        Provenance and history (written with the completion marker).
    claim : Claim, optional
        The run's claim on ``loc``; every write checks it.
    """
    import zarr

    from ddr.io.models import _Encoder
    from ddr.io.outputs import (
        FINGERPRINT_ATTR,
        STATUS_ATTR,
        _prepare,
        check_claimed,
        claimed_store,
        fenced,
        mark_complete,
    )

    with fenced(claim):
        _prepare(loc, "overwrite", None)
        store = claimed_store(loc, claim)
        with loc.errors("write"):
            group = zarr.open_group(store, mode="w-", zarr_format=3)
            first: dict[str, Any] = {STATUS_ATTR: "incomplete"}
            if claim is not None:
                first[CLAIM_ATTR] = claim.token
            group.update_attributes(first)
            enc = _Encoder(group)
            steps = {}
            for sid, rec in state.steps.items():
                steps[sid] = {
                    "config": rec.config,
                    "fingerprint": rec.fingerprint,
                    "rows": rec.rows,
                    "prefix_rows": rec.prefix_rows,
                    "statistics": enc.encode(rec.statistics, f"{sid}.statistics"),
                    # the prefix is often all the rows (data in whole chunks): kept once
                    "prefix": None
                    if rec.prefix is None
                    else "statistics"
                    if rec.prefix is rec.statistics or rec.prefix_rows == rec.rows
                    else enc.encode(rec.prefix, f"{sid}.prefix"),
                }
            masks = {
                # one bit per grid point, in the feature dims' C order (8 x smaller than bool)
                name: {
                    "shape": list(rec.mask.shape),
                    "bits": enc.encode(np.packbits(rec.mask.astype(bool).ravel()), f"{name}.mask"),
                }
                for name, rec in state.inputs.items()
                if rec.mask is not None
            }
            data = {
                "version": STATE_VERSION,
                "pipeline": state.pipeline,
                "inputs": {name: rec.to_dict() for name, rec in state.inputs.items()},
                "masks": masks,
                "steps": steps,
                "outputs": dict(state.outputs),
                "configs": dict(state.configs),
            }
            check_claimed(loc, claim, store)
            mark_complete(group, {**attrs, STATE_ATTR: data, FINGERPRINT_ATTR: fingerprint})
