"""``ddr version``: the ddr version (also ``ddr --version``)."""

from __future__ import annotations

import typer

from ddr.cli._app import Command, app, version_line

__all__ = ["version"]


@app.command(cls=Command, name="version", short_help="Print the ddr version.")
def version() -> None:
    """Print the ddr version (the same line as ddr --version)."""
    typer.echo(version_line())
