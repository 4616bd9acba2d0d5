"""``ddr plan``: print what a run would read, fit and write (:meth:`ddr.pipeline.Plan.format`)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ddr.cli._app import Command, PipelineArg, SetOpt, app, fail, problems

__all__ = ["plan"]


@app.command(cls=Command, name="plan", short_help="Print what a run would read, fit and write.")
def plan(
    pipeline: PipelineArg,
    set_: SetOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Plan as `run --force`.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Plan as `run --resume`.")] = False,
    update: Annotated[
        bool,
        typer.Option(
            "--update",
            help="Plan as `run --update`: which inputs grew, the rows each step reads, what "
            "each output becomes.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Print the DAG, the passes over each input and what a run would write or skip.

    Nothing is read but metadata, nothing is written.
    """
    from ddr.config.errors import PipelineError
    from ddr.pipeline.planner import plan_pipeline

    if force and update:
        fail("--force and --update contradict each other; give one", 2)
    try:
        planned = plan_pipeline(pipeline, set_ or [], force=force, resume=resume, update=update)
    except PipelineError as exc:
        problems(exc)
    if as_json:
        typer.echo(json.dumps(planned.to_dict(), indent=2, default=str))
    else:
        typer.echo(planned.format())
