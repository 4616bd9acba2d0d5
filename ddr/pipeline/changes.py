"""What an output was made from, and what changed since: the reason a rerun rewrites it.

Every output stores its *lineage* in its provenance (``ddr:provenance``): the steps it
depends on (op, parameters, inputs) and the inputs they read (path, array, shape, dtype,
fingerprint). When a complete output's fingerprint differs from the plan's, comparing the
stored lineage with the planned one says why, e.g.
``pca.with.n_components 10 -> 5`` or ``input X: its metadata changed``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ddr.pipeline.schema import split_ref

__all__ = ["describe_changes", "lineage", "read_provenance"]


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
                "shape": list(inp.meta.shape or ()),
                "dtype": str(inp.meta.dtype),
                "fingerprint": inp.fingerprint,
            }
            return
        if head in out_steps or head not in steps:
            return
        step = steps[head]
        out_steps[head] = {
            "op": step.op.name,
            "with": step.spec.with_,
            "inputs": dict(step.refs),
            "fingerprint": step.fingerprint,
        }
        for r in step.refs.values():
            walk(r)

    for ref in refs:
        walk(ref)
    return {"steps": out_steps, "inputs": out_inputs}


def read_provenance(path: str | os.PathLike, kind: str) -> dict[str, Any] | None:
    """The provenance stored in an output (Zarr group, saved model, JSON or PNG), or None."""
    p = Path(path)
    try:
        if kind in ("zarr", "model"):
            from ddr.io import read_attrs

            value = read_attrs(p).get("ddr:provenance")
        elif p.suffix.lower() == ".json":
            value = json.loads(p.read_text(encoding="utf-8")).get("ddr:provenance")
        elif p.suffix.lower() == ".png":
            from PIL import Image

            with Image.open(p) as im:
                text = im.text.get("ddr:provenance")
            value = json.loads(text) if text else None
        else:
            value = None
    except Exception:  # unreadable: nothing to compare with
        return None
    return value if isinstance(value, dict) else None


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
