"""A plan as ``ddr plan`` shows it: text (:func:`format_plan`) or JSON data (:func:`plan_dict`).

Both are reached through the plan (:meth:`Plan.format`, :meth:`Plan.to_dict`); ``ddr plan``
and ``ddr run --dry-run`` print them. Nothing here reads data or looks at outputs: what is
shown is what the planner decided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddr.pipeline.summary import _rel

if TYPE_CHECKING:  # the plan calls these functions; they only read it
    from ddr.pipeline.plan import Plan, StepPlan

__all__ = ["format_plan", "plan_dict"]

#: what each kind of phase does, in the plan's words
_PHASE_WORDS = {
    "batch": "one shared pass computes the statistics of",
    "fit": "multi-pass fit of",
    "compute": "scores",
    "lazy": "lazy (reads nothing)",
    "stream": "streams outputs to disk",
}


def format_plan(plan: Plan) -> str:
    """The DAG, the phases, the passes over each input and what would be written or skipped,
    as text.

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.

    Returns
    -------
    str
        Lines without a final newline.
    """
    passes = plan.passes()
    lines = [f"pipeline {plan.pipeline.name} ({plan.file})", "inputs:"]
    shared = plan.stored_arrays()
    for name, inp in plan.inputs.items():
        dims = ", ".join(f"{d}: {s}" for d, s in zip(inp.meta.dims, inp.meta.shape, strict=True))
        where = _rel(inp.path) + (f" [{inp.spec.array}]" if inp.spec.array else "")
        nrow = len(inp.array.data.chunks[0]) if hasattr(inp.array.data, "chunks") else 1
        label = next(k for k, v in shared.items() if name in v)
        lines.append(
            f"  {name}: {where} ({dims}) {inp.meta.dtype}, {nrow} row chunks; "
            f"passes: {passes[label]}{' (shared: ' + label + ')' if label != name else ''}"
        )
    lines.append("steps:")
    for sid, step in plan.steps.items():
        lines.append(f"  {sid}: {_step_line(step)}")
    lines.append("phases:")
    for i, phase in enumerate(plan.phases, start=1):
        line = f"  {i}. {phase.kind:<7} {_PHASE_WORDS[phase.kind]} {', '.join(phase.steps)}"
        line = line.rstrip()
        if phase.reads:
            line += f"; reads {', '.join(phase.reads)}"
        lines.append(line)
        for o in phase.outputs:
            out = plan.outputs[o]
            lines.append(f"       then writes {out.kind} {_rel(out.path)}")
    lines.append("outputs:")
    for out in plan.outputs:
        src = ", ".join(out.refs.values())
        lines.append(f"  {out.action:<9} {out.kind:<7} {_rel(out.path)}  <- {src}  ({out.reason})")
    total = ", ".join(f"{k}: {v}" for k, v in passes.items())
    lines.append(f"passes over inputs: {total}")
    return "\n".join(lines)


def _step_line(step: StepPlan) -> str:
    """``op(role=ref, ...) with params``, its passes and what the run does with it."""
    args = ", ".join(f"{r}={ref}" for r, ref in step.refs.items())
    params = ", ".join(f"{k}={v!r}" for k, v in step.spec.with_.items())
    state = {
        "run": "",
        "skip": "  [skipped: not needed]",
        "load": f"  [load {_rel(step.load_from.url if step.load_from else '')}: complete, "
        "same fingerprint]",
    }[step.action]
    passes = ""
    if step.action == "run" and step.op.family in ("fit", "statistic"):
        if step.one_pass:
            passes = "  (one pass)"
        elif step.passes:
            passes = f"  ({step.passes} passes)"
        else:
            passes = "  (passes decided at run time)"
    return f"{step.op.name}({args}){' with ' + params if params else ''}{passes}{state}"


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON data (``ddr plan --json``): inputs, steps, phases, outputs, passes.

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.

    Returns
    -------
    dict
        Plain values (strings, numbers, lists, dicts) but for the steps' parameters, which
        are what the pipeline gave.
    """
    return {
        "pipeline": plan.pipeline.name,
        "file": str(plan.file),
        "inputs": {
            n: {
                "path": i.path,
                "array": i.spec.array,
                "dims": list(i.meta.dims),
                "shape": list(i.meta.shape),
                "dtype": str(i.meta.dtype),
                "fingerprint": i.fingerprint,
            }
            for n, i in plan.inputs.items()
        },
        "steps": {
            sid: {
                "op": s.op.name,
                "inputs": s.refs,
                "with": s.spec.with_,
                "action": s.action,
                "one_pass": s.one_pass,
                "load_from": s.load_from.url if s.load_from else None,
                "fingerprint": s.fingerprint,
            }
            for sid, s in plan.steps.items()
        },
        "phases": [
            {
                "kind": p.kind,
                "steps": p.steps,
                "outputs": [plan.outputs[i].path for i in p.outputs],
                "reads": p.reads,
            }
            for p in plan.phases
        ],
        "outputs": [
            {
                "path": o.path,
                "kind": o.kind,
                "from": o.refs,
                "action": o.action,
                "reason": o.reason,
                "status": o.status,
                "fingerprint": o.fingerprint,
            }
            for o in plan.outputs
        ],
        "passes": plan.passes(),
    }
