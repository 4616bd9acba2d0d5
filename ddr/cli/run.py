"""``ddr run``: plan a pipeline, run it (:func:`ddr.pipeline.run`), print its summary."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ddr.cli._app import OwnConsole, PipelineArg, SetOpt, app, fail, problems, verbosity

__all__ = ["EXIT_CODES", "run"]

#: ``ddr run``'s exit code for each way a run ends (:attr:`ddr.pipeline.RunOutcome.status`)
EXIT_CODES = {"ok": 0, "failed": 1, "refused": 1, "interrupted": 130, "invalid": 2}


@app.command(cls=OwnConsole, name="run", short_help="Run a pipeline and print its summary.")
def run(
    ctx: typer.Context,
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
    update: Annotated[
        bool,
        typer.Option(
            "--update",
            help="Inputs grew since the last run (rows appended): read only the new rows for "
            "every one-pass fit the run's state recorded, extend per-row outputs whose models "
            "did not change, keep complete outputs (as --resume); a full run when an old "
            "chunk changed (the plan names it).",
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
) -> None:
    """Run a pipeline: check it, start the cluster, fit, write outputs, print a summary.

    Everything that can be checked without reading data is checked first (exit code 2).
    The run then claims its outputs: another run writing one of them is refused, naming
    that run (exit code 1), or waited for with --wait. Progress goes to stderr (a bar on a
    terminal, else one line per pass), and to a log file beside the run summary; the
    summary is printed to stdout. Ctrl-C stops the run (exit code 130; the summary says
    interrupted, outputs being written stay incomplete; the claims are released).
    """
    from ddr._log import LogFile, console
    from ddr.cluster import dry_run as cluster_dry_run
    from ddr.cluster import load_cluster_config
    from ddr.config.errors import PipelineError
    from ddr.pipeline.orchestration import run as run_pipeline
    from ddr.pipeline.planner import plan_pipeline
    from ddr.pipeline.summary import RunClock, _rel

    clock = RunClock.since_process_start()  # the run's times include Python's start-up
    if force and resume:
        fail("--force and --resume contradict each other; give one", 2)
    if force and update:
        fail("--force and --update contradict each other; give one", 2)
    # what planning logs (a plug-in's warning, ...) is shown as every command shows it; the
    # run's console (a bar, the log file beside the summary) is known once it is planned
    with console(verbosity(ctx), progress=False):
        try:
            plan = plan_pipeline(
                pipeline,
                set_ or [],
                force=force,
                resume=resume,
                update=update,
                summary=summary,
                performance_report=performance_report,
            )
            config = load_cluster_config(cluster, cluster_set or [])
        except PipelineError as exc:
            problems(exc)
    if dry_run:
        typer.echo(plan.format())
        typer.echo(f"\ncluster ({cluster}, kind {config.kind}):")
        typer.echo(cluster_dry_run(config))
        return
    log = plan.run_file("log")
    log_file = log.location.path if log is not None else None
    show_bar = plan.pipeline.run.progress if progress is None else progress
    with console(verbosity(ctx), progress=show_bar, log_file=log_file) as shown:
        outcome = run_pipeline(
            plan,
            cluster=config,
            wait=True if wait else None,
            argv=["ddr", *sys.argv[1:]],
            clock=clock,
        )
    code = EXIT_CODES[outcome.status]
    if outcome.summary is not None:
        # a failed run's error was shown (once, on stderr): here only where the run stood
        text = outcome.summary.format()
        typer.echo(text if not code else text.splitlines()[0])
    if outcome.summary_file is not None:  # the local fallback when its store did not take it
        # the log only where it was written (a log file given up is said on stderr)
        logged = any(isinstance(h, LogFile) and not h.failed for h in shown)
        where_log = f", log: {_rel(str(log_file))}" if log_file and logged else ""
        typer.echo(f"summary: {_rel(outcome.summary_file.url)}{where_log}")
    if code:
        raise typer.Exit(code)
