"""``ddr schema``: the JSON Schema of pipeline files (or cluster configs), for editors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ddr.cli._app import Command, app

__all__ = ["schema"]


@app.command(cls=Command, name="schema", short_help="Print the JSON Schema of pipeline files.")
def schema(
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

        found = cluster_schema()
    else:
        from ddr.pipeline import registry
        from ddr.pipeline.schema import json_schema

        found = json_schema(registry.ops())
    text = json.dumps(found, indent=2)
    if output:
        output.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"wrote {output}", err=True)
    else:
        typer.echo(text)
