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
from typer.core import TyperCommand, TyperGroup

# Help wraps at spaces only: a value such as skip-if-complete is never split at a hyphen.
# The formatter wraps a copy with non-breaking hyphens (which textwrap does not break at)
# and puts the hyphens back in the text it prints.
_NB_HYPHEN = "\u2011"


def _wrap_at_spaces(cls: type) -> type:
    formatter_base = cls.context_class.formatter_class

    class Formatter(formatter_base):  # type: ignore[misc,valid-type]
        def write_text(self, text: str) -> None:
            super().write_text(text.replace("-", _NB_HYPHEN))

        def write_dl(self, rows: Any, *args: Any, **kwargs: Any) -> None:
            rows = [(a, b.replace("-", _NB_HYPHEN)) for a, b in rows]
            super().write_dl(rows, *args, **kwargs)

        def getvalue(self) -> str:
            return super().getvalue().replace(_NB_HYPHEN, "-")

    context = type("Context", (cls.context_class,), {"formatter_class": Formatter})
    return type(cls.__name__, (cls,), {"context_class": context})


def _argument_name(param: Any) -> str:
    name = param.metavar or param.name.upper()
    return name + ("..." if param.nargs != 1 else "")


class Command(_wrap_at_spaces(TyperCommand)):  # type: ignore[misc]
    """Help as a Unix command's: ``Usage: ddr run [OPTIONS] PIPELINE``, arguments and options
    by their metavars (``FILE``, ``KEY=VALUE``), never a Python type name."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument" and not getattr(param, "hidden", False):
                args.append((_argument_name(param), param.help or ""))
            elif param.param_type_name == "option":
                record = param.get_help_record(ctx)
                if record is not None:
                    opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


app = typer.Typer(
    name="ddr",
    help="Statistics and dimensionality reduction on arrays larger than memory.\n\n"
    "Exit codes: 0 success; 1 a run failed (inspect: the output is INCOMPLETE); 2 bad "
    "usage or an invalid file; 130 interrupted (Ctrl-C). Every command has --help.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: no boxes that cut words at the terminal's width
    cls=_wrap_at_spaces(TyperGroup),
)


def _version(value: bool) -> None:
    if value:
        import ddr

        typer.echo(f"ddr {ddr.__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the ddr version and exit.", is_eager=True, callback=_version
        ),
    ] = False,
) -> None:
    """The options before a command (``ddr --version``)."""


SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Override a param (k=5) or any key by its dotted path (run.if_exists=overwrite). "
        "Values are YAML (5 is an int). Repeatable.",
    ),
]
PipelineArg = Annotated[
    Path, typer.Argument(metavar="PIPELINE", help="The pipeline file (YAML).", show_default=False)
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also debug messages and tracebacks.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only warnings and errors.")]


def _fail(message: str, code: int) -> None:
    from ddr.io.locations import redact

    typer.echo(f"ddr: error: {redact(message)}", err=True)
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
@app.command(cls=Command, name="run", short_help="Run a pipeline and print its summary.")
def run(
    pipeline: PipelineArg,
    cluster: Annotated[
        str,
        typer.Option(
            "--cluster",
            "-c",
            metavar="FILE|local|threads|sync",
            help="A cluster config file (cluster-configs/*.yaml), or local (default: a "
            "LocalCluster sized to this machine), threads or sync.",
        ),
    ] = "local",
    set_: SetOpt = None,
    cluster_set: Annotated[
        list[str] | None,
        typer.Option(
            "--cluster-set",
            metavar="KEY=VALUE",
            help="Override a param of the cluster config (jobs=8). Repeatable.",
        ),
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
        str | None,
        typer.Option(
            metavar="FILE",
            help="Write the run summary JSON here, a path or URL (also run.summary); the log "
            "goes beside a local one (.log).",
        ),
    ] = None,
    performance_report: Annotated[
        str | None,
        typer.Option(
            metavar="FILE",
            help="Write a dask performance report (HTML) here, a path or URL (distributed only).",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="When another run is writing one of the outputs, wait until it ends (or "
            "its claim goes stale) instead of refusing (run.wait: true).",
        ),
    ] = False,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="A progress bar on a terminal (default: run.progress, true); without it, or "
            "when stderr is not a terminal, one line per pass.",
            show_default=False,
        ),
    ] = None,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run a pipeline: check it, start the cluster, fit, write outputs, print a summary.

    Everything that can be checked without reading data is checked first (exit code 2).
    The run then claims its outputs: another run writing one of them is refused, naming
    that run (exit code 1), or waited for with --wait. Progress goes to stderr (a bar on a
    terminal, else one line per pass), and to a log file beside the run summary; the
    summary is printed to stdout. Ctrl-C stops the run (exit code 130; the summary says
    interrupted, outputs being written stay incomplete; the claims are released).
    """
    clock = _process_clock()
    from ddr.cluster import dry_run as cluster_dry_run
    from ddr.cluster import load_cluster_config
    from ddr.config.errors import PipelineError
    from ddr.pipeline.planner import plan_pipeline

    if force and resume:
        _fail("--force and --resume contradict each other; give one", 2)
    if verbose and quiet:
        _fail("--verbose and --quiet contradict each other; give one", 2)
    try:
        plan = plan_pipeline(
            pipeline,
            set_ or [],
            force=force,
            resume=resume,
            summary=summary,
            performance_report=performance_report,
        )
        config = load_cluster_config(cluster, cluster_set or [])
    except PipelineError as exc:
        _problems(exc)
    if dry_run:
        typer.echo(format_plan(plan))
        typer.echo(f"\ncluster ({cluster}, kind {config.kind}):")
        typer.echo(cluster_dry_run(config))
        return
    from ddr._log import console

    summary_file, log = plan.run_file("summary"), plan.run_file("log")
    log_file = log.location.path if log is not None else None
    show_bar = plan.pipeline.run.progress if progress is None else progress
    with console(-1 if quiet else int(verbose), progress=show_bar, log_file=log_file) as shown:
        result, code = _run(plan, config, clock, shown, wait)
    if result is not None:
        # a failed run's error was shown (once, on stderr): here only where the run stood
        text = result.format()
        typer.echo(text if not code else text.splitlines()[0])
        if summary_file is not None:
            from ddr.pipeline.summary import written_to

            where_log = f", log: {_rel(str(log_file))}" if log_file else ""
            # a summary its store did not take went to a local fallback file
            typer.echo(f"summary: {_rel(written_to(summary_file.location).url)}{where_log}")
    if code:
        raise typer.Exit(code)


def _process_clock() -> Any:
    """A run clock started when this process started (Python's start-up included)."""
    import time

    import psutil

    from ddr.pipeline.summary import RunClock

    try:
        started = psutil.Process().create_time()
    except psutil.Error:  # pragma: no cover - no process table
        started = time.time()
    return RunClock(started=started)


def _run(plan: Any, config: Any, clock: Any, shown: list[Any], wait: bool) -> tuple[Any, int]:
    """Claim the outputs (before a cluster starts: a run refused stops at once), run, release
    the claims; the summary and the exit code."""
    import logging

    from ddr.config.errors import PipelineError
    from ddr.io.claims import ClaimError
    from ddr.io.locations import redact
    from ddr.pipeline.ownership import claim_outputs
    from ddr.pipeline.planner import replan

    log = logging.getLogger("ddr.cli")
    claims = claim_outputs(plan, wait=True if wait else None, argv=["ddr", *sys.argv[1:]])
    try:
        claims.acquire()
    except ClaimError as exc:
        log.error("run refused: %s", exc)
        return None, 1
    except OSError as exc:  # the claim could not be written or read
        log.error("run refused: could not claim the outputs: %s", redact(str(exc)))
        return None, 1
    except KeyboardInterrupt:
        log.error("interrupted while waiting for another run; nothing was written")
        return None, 130
    try:
        if claims.waited:  # what the other run wrote may be complete now
            try:
                plan = replan(plan)
            except PipelineError as exc:
                for problem in exc.problems:
                    log.error("%s", problem)
                return None, 2
        return _run_claimed(plan, config, clock, shown, claims)
    finally:
        claims.release()


def _run_claimed(
    plan: Any, config: Any, clock: Any, shown: list[Any], claims: Any
) -> tuple[Any, int]:
    """Start the cluster, run, stop the cluster; the summary (also written to the plan's
    summary file with the final times) and the exit code."""
    import logging
    import time

    from ddr._log import quiet_interrupted_shutdown, watch_cluster
    from ddr.cluster import ClusterError, cluster_client
    from ddr.config.errors import RunError
    from ddr.io.locations import redact
    from ddr.io.request_bounds import interrupt_requests
    from ddr.pipeline.runner import run_plan
    from ddr.pipeline.summary import RunSummary

    log = logging.getLogger("ddr.cli")
    summary_file = plan.run_file("summary")
    summary_at = summary_file.location if summary_file is not None else None
    for out in plan.outputs:
        if out.action == "overwrite" and out.reason.startswith("complete but outdated"):
            log.info("rewriting %s: %s", _rel(out.path), out.reason)
    clock.add("start-up", clock.wall())
    argv = ["ddr", *sys.argv[1:]]
    result: RunSummary | None = None
    code = 0
    closing = None
    try:
        started = time.perf_counter()
        with cluster_client(config) as handle:
            clock.add("cluster start", time.perf_counter() - started)
            log.info("running %s on %s", plan.pipeline.name, handle.description)
            if handle.client is not None:
                watch_cluster(handle.client, shown, own_workers=config.kind == "local")
            try:
                result = run_plan(plan, argv=argv, clock=clock, claims=claims)
            except KeyboardInterrupt:
                quiet_interrupted_shutdown()
                raise
            finally:
                closing = time.perf_counter()
    except ClusterError as exc:  # before anything was read or written
        log.error("run failed before reading anything: %s", exc)
        code = 1
    except RunError as exc:
        log.error("run failed: %s", redact(str(exc)))
        log.debug("where it failed:", exc_info=True)
        result, code = _carried_summary(exc), 1
    except KeyboardInterrupt as exc:
        interrupt_requests()  # releasing claims, writing the summary: seconds at most
        log.error("interrupted; outputs being written stay marked incomplete")
        result, code = _carried_summary(exc), 130
    except Exception as exc:  # the cluster failed to start, a worker died, ...
        log.error("run failed: %s: %s", type(exc).__name__, redact(str(exc)))
        log.debug("where it failed:", exc_info=True)
        result, code = _carried_summary(exc), 1
    if closing is not None:
        clock.add("cluster shutdown", time.perf_counter() - closing)
    if result is not None:  # with the whole wall time, now that the cluster is gone
        result.clocked(clock)
        if summary_at:  # a local fallback when it cannot go there, said once
            result.write(summary_at)
    return result, code


def _carried_summary(exc: BaseException) -> Any:
    """The summary of a run that failed or was interrupted, as ``run_plan`` left it on its
    exception (never read back from its store, which may be the thing that failed)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        summary = getattr(cur, "ddr_summary", None)
        if summary is not None:
            return summary
        cur = cur.__cause__ or cur.__context__
    return None


# ----------------------------------------------------------------------- validate
@app.command(cls=Command, name="validate", short_help="Check pipeline files and cluster configs.")
def validate_cmd(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="Pipeline files and/or cluster configs (YAML).",
            show_default=False,
        ),
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
            "load": f"  [load {_rel(step.load_from.url if step.load_from else '')}: complete, "
            "same fingerprint]",
        }
        pass_kind = ""
        if step.action == "run" and step.op.family in ("fit", "statistic"):
            pass_kind = (
                "  (one pass)"
                if step.one_pass
                else f"  ({step.passes} passes)"
                if step.passes
                else "  (passes decided at run time)"
            )
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


def _rel(path: str) -> str:
    from ddr.pipeline.summary import _rel as rel

    return rel(path)


@app.command(cls=Command, name="plan", short_help="Print what a run would read, fit and write.")
def plan_cmd(
    pipeline: PipelineArg,
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
def inspect_path(path: Any) -> tuple[dict[str, Any], int]:
    """What is at ``path`` (a local path or URL: a ddr output, model, JSON or PNG) and the
    exit code for it: what its output kind shows (:mod:`ddr.pipeline.outputs`)."""
    from ddr.io.locations import Location, redact, resolve
    from ddr.pipeline.outputs import kind_at

    p = resolve(path)
    info: dict[str, Any] = {"path": p.url if isinstance(path, Location) else redact(str(path))}
    if not p.exists() or p.is_empty_folder():  # an empty folder is nobody's output
        info["status"] = "missing"
        return info, 2
    kind, probe = kind_at(p)
    if kind is None:  # a file no kind wrote (any folder or store is the zarr kind's to read)
        info.update(status="not-ddr", fingerprint=None, bytes=p.size())
        return info, _INSPECT_CODES["not-ddr"]
    info.update(kind.inspect(probe))
    if info["status"] != "not-ddr":  # a store ddr did not write is of no kind
        info["kind"] = kind.name
    return info, 1 if "error" in info else _INSPECT_CODES[info["status"]]


#: ``ddr inspect``'s exit code for each status of what is at the path
_INSPECT_CODES = {"complete": 0, "incomplete": 1, "missing": 2, "not-ddr": 3}


@app.command(
    cls=Command, name="inspect", short_help="Say what an output holds and whether it is complete."
)
def inspect_cmd(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="An output (Zarr group, saved model, JSON, PNG): a path or URL.",
            show_default=False,
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Say what an output holds, where it came from, and whether it is complete.

    PATH may be a URL (s3://..., gs://..., az://..., https://...); credentials come from the
    environment. Exit code 0: complete; 1: INCOMPLETE (an interrupted run); 2: nothing at
    PATH (an empty folder included), or it cannot be reached; 3: something that ddr did not
    write.
    """
    try:
        info, code = inspect_path(path)
    except (OSError, ImportError, ValueError) as exc:
        _fail(str(exc), 2)
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
    typer.echo(f"{info['path']}: {label}")
    claim = info.get("claim")
    if claim:
        stale = f" (stale: {claim['stale']})" if claim["stale"] else ""
        typer.echo(f"  claimed by {claim['by']}{stale}")
    for name, arr in info.get("arrays", {}).items():
        dims = f" dims {tuple(arr['dims'])}" if arr["dims"] else ""
        typer.echo(
            f"  {name}: {tuple(arr['shape'])}{dims} {arr['dtype']}, chunks "
            f"{tuple(arr['chunks'])}, {arr['chunks_written']} chunks written"
        )
    for name, csr in info.get("sparse", {}).items():
        typer.echo(
            f"  {name}: {tuple(csr['shape'] or ())} {csr['dtype']}, sparse (CSR group), "
            f"{csr['stored_values']} stored values"
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
@app.command(cls=Command, name="schema", short_help="Print the JSON Schema of pipeline files.")
def schema_cmd(
    cluster: Annotated[
        bool, typer.Option("--cluster", help="The schema of cluster configs instead.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write to a file.")
    ] = None,
) -> None:
    """Print the JSON Schema of pipeline files (or cluster configs), for editors."""
    if cluster:
        from ddr.cluster import json_schema as cluster_schema

        schema = cluster_schema()
    else:
        from ddr.pipeline import registry
        from ddr.pipeline.schema import json_schema

        schema = json_schema(registry.ops())
    text = json.dumps(schema, indent=2)
    if output:
        output.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"wrote {output}", err=True)
    else:
        typer.echo(text)


@app.command(cls=Command, name="ops", short_help="List the ops pipelines can use.")
def ops_cmd() -> None:
    """List the ops pipelines can use: inputs, outputs, and each parameter with what it
    accepts and its default (the estimator's declaration, as `ddr validate` checks it)."""
    from ddr.pipeline import registry

    for name, op in sorted(registry.ops().items()):
        roles = ", ".join(f"{r.name}{'' if r.required else '?'}" for r in op.roles)
        outs = ", ".join(op.outputs)
        typer.echo(f"{name}({roles}) -> {outs}")
        for pname, param in op.params.items():
            typer.echo(f"    {pname}: {registry.describe_param(param)}")
    missing = registry.unavailable()
    if missing:
        typer.echo(f"(not available in this installation: {', '.join(sorted(missing))})")


# ---------------------------------------------------------------------- demo-data
@app.command(
    cls=Command, name="demo-data", short_help="Write a synthetic dataset with known truth."
)
def demo_data(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="Output Zarr group to create: a path or URL (s3://...).",
            show_default=False,
        ),
    ],
    kind: Annotated[
        str,
        typer.Option(
            metavar="dense|counts",
            help="dense: a low-rank signal plus noise with class labels; counts: word counts "
            "of documents drawn from a topic model, stored sparse (CSR, AnnData's layout).",
        ),
    ] = "dense",
    n_samples: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Rows (documents).  [default: 100000; counts: 20000]",
            show_default=False,
        ),
    ] = None,
    n_features: Annotated[
        int | None,
        typer.Option(
            metavar="D", help="Columns (words).  [default: 50; counts: 5000]", show_default=False
        ),
    ] = None,
    rank: Annotated[int, typer.Option(metavar="R", help="Rank of the signal.")] = 10,
    n_classes: Annotated[int, typer.Option(metavar="K", help="Classes (labels y).")] = 5,
    chunk_rows: Annotated[
        int | None,
        typer.Option(
            metavar="ROWS",
            help="Rows per Zarr chunk (default: the rows in 8 chunks, each at most 64 MiB).",
            show_default=False,
        ),
    ] = None,
    dtype: Annotated[str, typer.Option(metavar="float32|float64", help="Dtype of X.")] = (
        "float32"
    ),
    seed: Annotated[
        int,
        typer.Option(
            metavar="S",
            help="Seed of the population: the mean, the signal subspace, the class means.",
        ),
    ] = 0,
    sample_seed: Annotated[
        int,
        typer.Option(
            metavar="S",
            help="Seed of the sample drawn from the population. Another value with the same "
            "--seed (and --n-features, --rank, --n-classes, --offset) draws new rows of the "
            "same population: a test set for models fitted on the first.",
        ),
    ] = 0,
    missing: Annotated[
        float, typer.Option(metavar="FRACTION", help="Fraction of entries set to NaN.")
    ] = 0.0,
    offset: Annotated[
        float, typer.Option(metavar="C", help="Constant added to every feature mean.")
    ] = 0.0,
    n_topics: Annotated[int, typer.Option(metavar="K", help="counts: topics.")] = 10,
    doc_length: Annotated[
        float, typer.Option(metavar="L", help="counts: mean tokens per document.")
    ] = 100.0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing output.")] = False,
) -> None:
    """Write a synthetic dataset with its truth: dense (low-rank signal + noise, class means)
    or counts (documents from a topic model, sparse)."""
    import time

    from ddr.demo import DemoSpec, write_demo_data

    if kind not in ("dense", "counts"):
        _fail(f"--kind must be 'dense' or 'counts'; got {kind!r}", 2)
    if kind == "counts":
        _demo_counts(
            path,
            n_samples,
            n_features,
            n_topics,
            doc_length,
            chunk_rows,
            dtype,
            seed,
            sample_seed,
            force,
        )
        return
    n_samples = 100_000 if n_samples is None else n_samples
    n_features = 50 if n_features is None else n_features
    try:
        spec = DemoSpec(
            n_samples,
            n_features,
            rank,
            n_classes,
            chunk_rows,
            dtype,
            seed,
            missing,
            offset,
            sample_seed=sample_seed,
        )
    except ValueError as exc:
        _fail(str(exc), 2)
    start = time.perf_counter()
    try:
        write_demo_data(path, spec, if_exists="overwrite" if force else "error")
    except (OSError, ValueError, ImportError) as exc:
        _fail(str(exc), 2)
    size = n_samples * n_features * (4 if dtype == "float32" else 8) / 2**20
    n_chunks = -(-n_samples // spec.chunk_rows)
    typer.echo(
        f"wrote {path}: X {n_samples} x {n_features} {dtype} ({size:.0f} MiB raw) in "
        f"{n_chunks} chunk{'s' if n_chunks != 1 else ''} of {spec.chunk_rows} rows, y, and "
        f"the true mean/components/variances (population seed {seed}, sample seed "
        f"{sample_seed}; {time.perf_counter() - start:.1f} s)"
    )


def _demo_counts(
    path: str,
    n_samples: int | None,
    n_features: int | None,
    n_topics: int,
    doc_length: float,
    chunk_rows: int | None,
    dtype: str,
    seed: int,
    sample_seed: int,
    force: bool,
) -> None:
    """``ddr demo-data --kind counts``."""
    import time

    from ddr.demo_counts import CountsSpec, write_counts_data

    try:
        spec = CountsSpec(
            n_samples=20_000 if n_samples is None else n_samples,
            n_features=5_000 if n_features is None else n_features,
            n_topics=n_topics,
            doc_length=doc_length,
            chunk_rows=chunk_rows,
            dtype=dtype,
            seed=seed,
            sample_seed=sample_seed,
        )
    except ValueError as exc:
        _fail(str(exc), 2)
    start = time.perf_counter()
    try:
        write_counts_data(path, spec, if_exists="overwrite" if force else "error")
    except (OSError, ValueError, ImportError) as exc:
        _fail(str(exc), 2)
    typer.echo(
        f"wrote {path}: X {spec.n_samples} documents x {spec.n_features} words, sparse counts "
        f"({dtype}, CSR group in AnnData's layout), {spec.n_topics} topics, about "
        f"{spec.doc_length:g} tokens a document; the vocabulary (var/_index) and the truth "
        f"(true_topics, true_mixtures, doc_length) (topic seed {seed}, sample seed "
        f"{sample_seed}; {time.perf_counter() - start:.1f} s)"
    )


@app.command(cls=Command, name="version", short_help="Print the ddr version.")
def version() -> None:
    """Print the ddr version (also ddr --version)."""
    import ddr

    typer.echo(ddr.__version__)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
