"""What an output was made from: what changed since (the reason a rerun rewrites it), and
whether predictions are on the rows a model was fitted on.

Every output stores its *lineage* in its provenance (``ddr:provenance``): the steps it
depends on (op, parameters, inputs) and the inputs they read (path, array, selection,
shape, dtype, fingerprint). When a complete output's fingerprint differs from the plan's,
comparing the stored lineage with the planned one says why, e.g.
``pca.with.n_components 10 -> 5`` or ``input X: its metadata changed``. Comparing the rows
a model's training inputs select with the rows its predictions are on says whether a
confusion matrix shows training or held-out accuracy (:func:`rows_role`).
"""

from __future__ import annotations

import json
from typing import Any

from ddr.io.locations import redact
from ddr.pipeline.spec_types import split_ref

__all__ = ["describe_changes", "lineage", "rows_role", "stored_provenance"]


def lineage(steps: dict[str, Any], inputs: dict[str, Any], refs: list[str]) -> dict[str, Any]:
    """The steps and inputs ``refs`` depend on, as stored in an output's provenance.

    Parameters
    ----------
    steps : dict of str -> StepPlan
    inputs : dict of str -> InputPlan
    refs : list of str
        The output's references.

    Returns
    -------
    dict
        ``{"steps": {id: {op, with, inputs, fingerprint}}, "inputs": {name: {path, array,
        shape, dtype, fingerprint}}}``.
    """
    out_steps: dict[str, Any] = {}
    out_inputs: dict[str, Any] = {}

    def walk(ref: str) -> None:
        head, _ = split_ref(ref)
        if head in inputs:
            inp = inputs[head]
            out_inputs[head] = {
                "path": inp.path,
                "array": inp.spec.array,
                "isel": inp.spec.isel,
                "sample_dim": inp.sample_dim,
                "shape": list(inp.meta.shape or ()),
                "dtype": str(inp.meta.dtype),
                "fingerprint": inp.fingerprint,
            }
            grid = inp.spec.grid_sample_dims()
            if grid is not None:  # a grid: its own dims and shape, not the rows it gives
                out_inputs[head]["sample_dims"] = list(grid)
                out_inputs[head]["dims"] = [str(d) for d in inp.array.dims]
                out_inputs[head]["shape"] = [int(n) for n in inp.array.shape]
            return
        if head in out_steps or head not in steps:
            return
        step = steps[head]
        out_steps[head] = {
            "op": step.op.name,
            "with": redact(step.spec.with_),
            "inputs": dict(step.refs),
            "fingerprint": step.fingerprint,
        }
        if step.spec.search is not None:  # a searched step: its grid, folds and scoring
            out_steps[head]["search"] = step.spec.search.model_dump(mode="json")
        for r in step.refs.values():
            walk(r)

    for ref in refs:
        walk(ref)
    return {"steps": out_steps, "inputs": out_inputs}


def describe_changes(stored: dict[str, Any] | None, planned: dict[str, Any]) -> list[str]:
    """What differs between a stored provenance and the planned :func:`lineage`, one short
    phrase per difference (at most a few; parameters first)."""
    if not stored:
        return []
    changes: list[str] = []
    old_steps = stored.get("steps") or {}
    for sid, new in planned["steps"].items():
        old = old_steps.get(sid)
        if old is None:
            changes.append(f"step {sid} is new")
            continue
        if old.get("op") != new["op"]:
            changes.append(f"{sid}.op {old.get('op')} -> {new['op']}")
        changes.extend(_diff(f"{sid}.with", old.get("with") or {}, new["with"]))
        if old.get("search") != new.get("search"):
            changes.append(
                f"{sid}.search {_short(old.get('search'))} -> {_short(new.get('search'))}"
            )
        if old.get("inputs") != new["inputs"]:
            changes.append(f"{sid}.inputs {_short(old.get('inputs'))} -> {_short(new['inputs'])}")
    old_inputs = stored.get("inputs") or {}
    for name, new in planned["inputs"].items():
        old = old_inputs.get(name)
        if old is None:
            changes.append(f"input {name} is new")
        elif old.get("path") != new["path"] or old.get("array") != new["array"]:
            changes.append(f"input {name}: {_where(old)} -> {_where(new)}")
        elif old.get("shape") != new["shape"] or old.get("dtype") != new["dtype"]:
            changes.append(
                f"input {name}: shape {tuple(old.get('shape', ()))} {old.get('dtype')} -> "
                f"{tuple(new['shape'])} {new['dtype']}"
            )
        elif old.get("fingerprint") != new["fingerprint"]:
            changes.append(f"input {name}: its metadata changed (rewritten since?)")
    return changes


def _diff(prefix: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            out.append(f"{prefix}.{key} {_short(old[key])} removed")
        elif key not in old:
            out.append(f"{prefix}.{key} set to {_short(new[key])}")
        elif _norm(old[key]) != _norm(new[key]):
            out.append(f"{prefix}.{key} {_short(old[key])} -> {_short(new[key])}")
    return out


def _norm(value: Any) -> str:
    # stored provenance went through JSON: compare in that form (tuples are lists, ...)
    return json.dumps(value, sort_keys=True, default=str)


def _short(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(inp: dict[str, Any]) -> str:
    return f"{inp.get('path')}" + (f" [{inp['array']}]" if inp.get("array") else "")


# ----------------------------------------------------------- rows used to fit
def rows_role(
    steps: dict[str, Any], inputs: dict[str, Any], predictions: str, model_path: Any
) -> str:
    """Which rows predictions are on, for a confusion matrix's title.

    Parameters
    ----------
    steps, inputs : dict
        The plan's steps and inputs.
    predictions : str
        Reference to a predict step (``{model: ..., X: ...}``).
    model_path : str, optional
        Where a loaded model was saved (its provenance names its training inputs).

    Returns
    -------
    str
        ``"training rows"`` (the rows the model was fitted on), ``"held-out rows (not used
        to fit)"``, ``"rows partly used to fit"``, or ``"rows"`` when it cannot be told.
    """
    head, _ = split_ref(predictions)
    step = steps.get(head)
    if step is None or "model" not in step.refs or "X" not in step.refs:
        return "rows"
    rows = lineage(steps, inputs, [step.refs["X"]])["inputs"]
    if model_path is not None:
        trained = (stored_provenance(model_path) or {}).get("inputs") or {}
    else:
        trained = lineage(steps, inputs, [step.refs["model"]])["inputs"]
    if not rows or not trained:
        return "rows"
    overlaps = {_overlap(a, b) for a in rows.values() for b in trained.values()}
    overlaps.discard("disjoint")
    if not overlaps:
        return "held-out rows (not used to fit)"
    if overlaps == {"same"}:
        return "training rows"
    if None in overlaps:
        return "rows"
    return "rows partly used to fit"


def stored_provenance(path: Any) -> dict[str, Any] | None:
    """The provenance a Zarr output or saved model stores (a group attribute), or None."""
    from ddr.io import read_attrs
    from ddr.io.outputs import PROVENANCE_ATTR

    try:
        value = read_attrs(path).get(PROVENANCE_ATTR)
    except Exception:  # unreadable: the rows cannot be told
        return None
    return value if isinstance(value, dict) else None


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """``"same"``, ``"disjoint"``, ``"some"`` rows of two inputs, or None (cannot tell)."""
    if (a.get("path"), a.get("array")) != (b.get("path"), b.get("array")):
        return "disjoint"  # another dataset
    ra, rb = _rows(a), _rows(b)
    if ra is None or rb is None:
        return None
    if ra == rb:
        return "same"
    if isinstance(ra, tuple) and isinstance(rb, tuple):
        return "some" if max(ra[0], rb[0]) < min(ra[1], rb[1]) else "disjoint"
    if isinstance(ra, tuple):
        ra, rb = rb, ra  # ra: a set of indices
    hit = any(i in rb if isinstance(rb, frozenset) else rb[0] <= i < rb[1] for i in ra)
    return "some" if hit else "disjoint"


def _rows(inp: dict[str, Any]) -> tuple[float, float] | frozenset[int] | None:
    """The sample rows an input selects: ``(start, stop)`` (stop may be inf), a set of
    indices, or None when negative indices make it depend on the length."""
    sel = (inp.get("isel") or {}).get(inp.get("sample_dim") or "")
    if sel is None:
        return (0, float("inf"))
    if isinstance(sel, str):
        start, _, stop = sel.partition(":")
        lo = int(start) if start.strip() else 0
        hi = int(stop) if stop.strip() else float("inf")
        return None if lo < 0 or hi < 0 else (lo, hi)
    idx = [int(i) for i in sel]
    return None if any(i < 0 for i in idx) else frozenset(idx)
