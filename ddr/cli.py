"""The ``ddr`` command line.

Commands: ``run``, ``validate``, ``plan``, ``inspect``, ``schema``, ``ops``, ``demo-data``,
``version``; ``ddr COMMAND --help`` describes each.

Exit codes:

- 0: success (``inspect``: the output is complete, or not a ddr output);
- 1: a run failed (the error and the run summary are printed; ``inspect``: the output is
  INCOMPLETE, e.g. an interrupted run);
- 2: bad usage or an invalid file, reported as ``file:line:col: message`` before any data is
  read (``inspect``: nothing at that path).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="ddr",
    help="Statistics and dimensionality reduction on arrays larger than memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a param (k=v) or any key by its dotted path (run.if_exists=overwrite). "
        "Values are YAML (5 is an int). Repeatable.",
    ),
]


def _fail(message: str, code: int) -> None:
    typer.echo(f"ddr: error: {message}", err=True)
    raise typer.Exit(code)


def _problems(exc: Exception) -> None:
    """Print every problem of a PipelineError (file:line:col: message) and exit 2."""
    problems = getattr(exc, "problems", None) or []
    for p in problems:
        typer.echo(str(p), err=True)
    n = len(problems)
    typer.echo(f"ddr: {n} problem{'s' if n != 1 else ''} found; nothing was run", err=True)
    raise typer.Exit(2)


# ---------------------------------------------------------------------------- run
@app.command("run")
def run(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file (YAML).")],
    cluster: Annotated[
        str,
        typer.Option(
            "--cluster",
            "-c",
            help="A cluster config file (cluster-configs/*.yaml), or local (default: a "
            "LocalCluster sized to this machine), threads or sync.",
        ),
    ] = "local",
    set_: SetOpt = None,
    cluster_set: Annotated[
        list[str] | None,
        typer.Option("--cluster-set", help="Override a param of the cluster config (k=v)."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Check and plan, print the plan and what the cluster "
            "config would start (the SLURM/PBS job script); read and write nothing.",
        ),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace existing outputs (if_exists: overwrite).")
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Keep complete outputs with the same fingerprint and "
            "redo the rest (if_exists: skip-if-complete).",
        ),
    ] = False,
    summary: Annotated[
        Path | None, typer.Option(help="Write the run summary JSON here (also run.summary).")
    ] = None,
    performance_report: Annotated[
        Path | None,
        typer.Option(help="Write a dask performance report (HTML) here (distributed only)."),
    ] = None,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Progress bars.")
    ] = None,
) -> None:
    """Run a pipeline: check it, start the cluster, fit, write outputs, print a summary.

    Everything that can be checked without reading data is checked first (exit code 2).
    """
    from ddr.cluster import cluster_client, load_cluster_config
    from ddr.cluster import dry_run as cluster_dry_run
    from ddr.config.errors import PipelineError, RunError
    from ddr.pipeline.planner import plan_pipeline
    from ddr.pipeline.runner import run_plan

    if force and resume:
        _fail("--force and --resume contradict each other; give one", 2)
    try:
        plan = plan_pipeline(pipeline, set_ or [], force=force, resume=resume)
        config = load_cluster_config(cluster, cluster_set or [])
    except PipelineError as exc:
        _problems(exc)
    if dry_run:
        typer.echo(format_plan(plan))
        typer.echo(f"\ncluster ({cluster}, kind {config.kind}):")
        typer.echo(cluster_dry_run(config))
        return
    argv = ["ddr", *sys.argv[1:]]
    try:
        with cluster_client(config) as handle:
            typer.echo(f"ddr: running {plan.pipeline.name} on {handle.description}", err=True)
            result = run_plan(
                plan,
                progress=progress,
                summary_path=str(summary) if summary else None,
                performance_report=str(performance_report) if performance_report else None,
                argv=argv,
            )
    except RunError as exc:
        typer.echo(f"ddr: run failed: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("ddr: interrupted; outputs being written stay marked incomplete", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:  # the cluster failed to start, a worker died, ...
        typer.echo(f"ddr: run failed: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(result.format())
    where = summary or plan.pipeline.run.summary
    if where:
        typer.echo(f"summary: {where}")


# ----------------------------------------------------------------------- validate
@app.command("validate")
def validate_cmd(
    files: Annotated[
        list[Path], typer.Argument(help="Pipeline files and/or cluster configs (YAML).")
    ],
    set_: SetOpt = None,
) -> None:
    """Check pipeline files and cluster configs without running anything.

    Pipelines are checked fully (schema, ops, parameters, references, cycles, and shapes,
    dims and dtypes from the inputs' metadata); existing outputs are not looked at (that is
    `ddr plan`). Cluster configs (top key `ddr-cluster`) are checked against their
    backend's keyword names.
    """
    from ddr.cluster import validate_cluster
    from ddr.config.document import load_document
    from ddr.config.errors import PipelineError
    from ddr.pipeline.planner import plan_pipeline

    problems = []
    for f in files:
        try:
            doc = load_document(f, set_ or [])
            if isinstance(doc.data, dict) and "ddr-cluster" in doc.data:
                validate_cluster(doc)
                kind = "cluster config"
            else:
                plan_pipeline(doc, check_outputs=False)
                kind = "pipeline"
            typer.echo(f"{f}: valid {kind}")
        except PipelineError as exc:
            problems.extend(exc.problems)
    if problems:
        _problems(PipelineError(problems))


# --------------------------------------------------------------------------- plan
def format_plan(plan: Any) -> str:
    """The DAG, phases, passes per input and what would be written or skipped."""
    from ddr.pipeline.schema import split_ref

    lines = [f"pipeline {plan.pipeline.name} ({plan.file})"]
    passes = plan.passes()
    lines.append("inputs:")
    for name, inp in plan.inputs.items():
        dims = ", ".join(f"{d}: {s}" for d, s in zip(inp.meta.dims, inp.meta.shape, strict=True))
        where = f"{_rel(inp.path)}" + (f" [{inp.spec.array}]" if inp.spec.array else "")
        nrow = len(inp.array.data.chunks[0]) if hasattr(inp.array.data, "chunks") else 1
        label = next(k for k, v in plan.stored_arrays().items() if name in v)
        lines.append(
            f"  {name}: {where} ({dims}) {inp.meta.dtype}, {nrow} row chunks; "
            f"passes: {passes[label]}{' (shared: ' + label + ')' if label != name else ''}"
        )
    lines.append("steps:")
    for sid, step in plan.steps.items():
        args = ", ".join(f"{r}={ref}" for r, ref in step.refs.items())
        params = ", ".join(f"{k}={v!r}" for k, v in step.spec.with_.items())
        state = {
            "run": "",
            "skip": "  [skipped: not needed]",
            "load": f"  [load {_rel(step.load_from or '')}: complete, same fingerprint]",
        }
        pass_kind = ""
        if step.action == "run" and step.op.family in ("fit", "statistic"):
            pass_kind = {
                True: "  (one pass)",
                False: "  (multi-pass)",
                None: "  (passes decided at run time)",
            }[step.one_pass]
        lines.append(
            f"  {sid}: {step.op.name}({args}){' with ' + params if params else ''}"
            f"{pass_kind}{state[step.action]}"
        )
    lines.append("phases:")
    for i, phase in enumerate(plan.phases, start=1):
        names = ", ".join(phase.steps)
        reads = ", ".join(f"{k}" for k in phase.reads)
        what = {
            "batch": "one shared pass computes the statistics of",
            "fit": "multi-pass fit of",
            "compute": "scores",
            "lazy": "lazy (reads nothing)",
            "stream": "streams outputs to disk",
        }[phase.kind]
        line = f"  {i}. {phase.kind:<7} {what} {names}".rstrip()
        if reads:
            line += f"; reads {reads}"
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
    del split_ref
    return "\n".join(lines)


def plan_dict(plan: Any) -> dict[str, Any]:
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
                "load_from": s.load_from,
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


def _rel(path: str) -> str:
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("../..") else rel


@app.command("plan")
def plan_cmd(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file (YAML).")],
    set_: SetOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Plan as `run --force`.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Plan as `run --resume`.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Print the DAG, the passes over each input and what a run would write or skip.

    Nothing is read but metadata, nothing is written.
    """
    from ddr.config.errors import PipelineError
    from ddr.pipeline.planner import plan_pipeline

    try:
        plan = plan_pipeline(pipeline, set_ or [], force=force, resume=resume)
    except PipelineError as exc:
        _problems(exc)
    if as_json:
        typer.echo(json.dumps(plan_dict(plan), indent=2, default=str))
    else:
        typer.echo(format_plan(plan))


# ------------------------------------------------------------------------ inspect
def inspect_path(path: Path) -> tuple[dict[str, Any], int]:
    """What is at ``path`` (a ddr output, model, JSON or PNG) and the exit code for it."""
    from ddr.io import output_status
    from ddr.io.inputs import is_zarr_store

    p = Path(path)
    info: dict[str, Any] = {"path": str(p)}
    if not p.exists():
        info["status"] = "missing"
        return info, 2
    if p.is_file():
        from ddr.pipeline.reports import read_fingerprint

        fp = read_fingerprint(p)
        info["status"] = "complete" if fp else "not-ddr"
        info["fingerprint"] = fp
        info["bytes"] = p.stat().st_size
        if p.suffix == ".json" and fp:
            with p.open() as fh:
                data = json.load(fh)
            info["keys"] = [k for k in data if not k.startswith("ddr:")]
        return info, 0
    status = output_status(p)
    info["status"] = status
    if not is_zarr_store(p):
        return info, 0
    import zarr

    try:
        group = zarr.open_group(str(p), mode="r")
    except Exception as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
        return info, 1
    attrs = group.attrs.asdict()
    arrays = {}
    for name, arr in sorted(group.arrays()):
        dims = getattr(arr.metadata, "dimension_names", None)
        arrays[name] = {
            "shape": list(arr.shape),
            "dims": list(dims) if dims else None,
            "dtype": str(arr.dtype),
            "chunks": list(arr.chunks),
            "chunks_written": f"{arr.nchunks_initialized}/{arr.nchunks}",
        }
    info["arrays"] = arrays
    for key in ("ddr:model", "ddr:fingerprint", "ddr:version", "history"):
        if key in attrs:
            info[key.removeprefix("ddr:")] = attrs[key]
    prov = attrs.get("ddr:provenance")
    if isinstance(prov, dict):
        info["provenance"] = {
            "pipeline": {k: v for k, v in prov.get("pipeline", {}).items() if k != "resolved"},
            "from": prov.get("output", {}).get("from"),
            "steps": {k: v.get("op") for k, v in prov.get("steps", {}).items()},
            "inputs": prov.get("inputs"),
            "versions": prov.get("versions"),
            "run": prov.get("run"),
        }
    other = {
        k: v
        for k, v in attrs.items()
        if not k.startswith("ddr:") and k not in ("history", "params", "state")
    }
    if other:
        info["attrs"] = other
    return info, 1 if status == "incomplete" else 0


@app.command("inspect")
def inspect_cmd(
    path: Annotated[Path, typer.Argument(help="An output: Zarr group, saved model, JSON, PNG.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Say what an output holds, where it came from, and whether it is complete.

    Exit code 0: complete (or not a ddr output); 1: INCOMPLETE (an interrupted run);
    2: nothing at PATH.
    """
    info, code = inspect_path(path)
    if as_json:
        typer.echo(json.dumps(info, indent=2, default=str))
        raise typer.Exit(code)
    status = info["status"]
    label = {
        "complete": "complete",
        "incomplete": "INCOMPLETE (interrupted or still being "
        "written; rerun the pipeline with --resume or --force)",
        "missing": "missing",
        "not-ddr": "not a ddr output",
    }[status]
    typer.echo(f"{path}: {label}")
    for name, arr in info.get("arrays", {}).items():
        dims = f" dims {tuple(arr['dims'])}" if arr["dims"] else ""
        typer.echo(
            f"  {name}: {tuple(arr['shape'])}{dims} {arr['dtype']}, chunks "
            f"{tuple(arr['chunks'])}, {arr['chunks_written']} chunks written"
        )
    for key in ("model", "fingerprint", "version", "bytes", "keys"):
        if key in info and info[key] is not None:
            typer.echo(f"  {key}: {info[key]}")
    prov = info.get("provenance")
    if prov:
        pipe = prov["pipeline"]
        typer.echo(
            f"  made by pipeline {pipe.get('name')} ({pipe.get('file')}) from {prov.get('from')}"
        )
        for sid, op in (prov.get("steps") or {}).items():
            typer.echo(f"    step {sid}: {op}")
        for name, inp in (prov.get("inputs") or {}).items():
            typer.echo(
                f"    input {name}: {inp.get('path')} [{inp.get('array')}] "
                f"{tuple(inp.get('shape', ()))} {inp.get('dtype')}"
            )
        if prov.get("versions"):
            typer.echo(
                "    versions: " + ", ".join(f"{k} {v}" for k, v in prov["versions"].items())
            )
    if info.get("history"):
        typer.echo("  history:")
        for line in str(info["history"]).splitlines():
            typer.echo(f"    {line}")
    raise typer.Exit(code)


# ------------------------------------------------------------------------- schema
@app.command("schema")
def schema_cmd(
    cluster: Annotated[
        bool, typer.Option("--cluster", help="The schema of cluster configs instead.")
    ] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file.")] = None,
) -> None:
    """Print the JSON Schema of pipeline files (or cluster configs), for editors."""
    if cluster:
        from ddr.cluster import json_schema as cluster_schema

        schema = cluster_schema()
    else:
        from ddr.pipeline import registry
        from ddr.pipeline.schema import json_schema

        schema = json_schema(registry.op_names())
    text = json.dumps(schema, indent=2)
    if output:
        output.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"wrote {output}", err=True)
    else:
        typer.echo(text)


@app.command("ops")
def ops_cmd() -> None:
    """List the ops pipelines can use, with their inputs and parameters."""
    from ddr.pipeline import registry

    for name, op in sorted(registry.ops().items()):
        roles = ", ".join(f"{r.name}{'' if r.required else '?'}" for r in op.roles)
        params = ", ".join(op.params) if op.family != "apply" else ""
        outs = ", ".join(op.outputs)
        typer.echo(f"{name}({roles}) -> {outs}" + (f"; with: {params}" if params else ""))
    missing = registry.unavailable()
    if missing:
        typer.echo(f"(not available in this installation: {', '.join(sorted(missing))})")


# ---------------------------------------------------------------------- demo-data
@app.command("demo-data")
def demo_data(
    path: Annotated[Path, typer.Argument(help="Output Zarr group to create.")],
    n_samples: Annotated[int, typer.Option(help="Rows.")] = 100_000,
    n_features: Annotated[int, typer.Option(help="Columns.")] = 50,
    rank: Annotated[int, typer.Option(help="Rank of the signal.")] = 10,
    n_classes: Annotated[int, typer.Option(help="Classes (labels y).")] = 5,
    chunk_rows: Annotated[int, typer.Option(help="Rows per Zarr chunk.")] = 100_000,
    dtype: Annotated[str, typer.Option(help="float32 or float64.")] = "float32",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    missing: Annotated[float, typer.Option(help="Fraction of entries set to NaN.")] = 0.0,
    offset: Annotated[float, typer.Option(help="Constant added to every feature mean.")] = 0.0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing output.")] = False,
) -> None:
    """Write a synthetic dataset (low-rank signal + noise, class means) with its truth."""
    import time

    from ddr.demo import DemoSpec, write_demo_data

    try:
        spec = DemoSpec(
            n_samples, n_features, rank, n_classes, chunk_rows, dtype, seed, missing, offset
        )
    except ValueError as exc:
        _fail(str(exc), 2)
    start = time.perf_counter()
    try:
        write_demo_data(path, spec, if_exists="overwrite" if force else "error")
    except (FileExistsError, ValueError) as exc:
        _fail(str(exc), 2)
    size = n_samples * n_features * (4 if dtype == "float32" else 8) / 2**20
    typer.echo(
        f"wrote {path}: X {n_samples} x {n_features} {dtype} ({size:.0f} MiB raw) in chunks of "
        f"{chunk_rows} rows, y, and the true mean/components/variances "
        f"({time.perf_counter() - start:.1f} s)"
    )


@app.command("version")
def version() -> None:
    """Print the ddr version."""
    import ddr

    typer.echo(ddr.__version__)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
