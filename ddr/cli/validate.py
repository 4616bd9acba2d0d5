"""``ddr validate``: check pipeline files and cluster configs without running anything."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ddr.cli._app import Command, SetOpt, app, problems

__all__ = ["validate"]


@app.command(cls=Command, name="validate", short_help="Check pipeline files and cluster configs.")
def validate(
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

    found = []
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
            found.extend(exc.problems)
    if found:
        problems(PipelineError(found))
