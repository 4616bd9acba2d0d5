"""The ``ddr`` typer app, the options several commands share, and how errors end a command.

Each command module registers its command on :data:`app`; ``ddr.cli`` imports them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from ddr.cli._help import Command, Group

__all__ = [
    "Command",
    "PipelineArg",
    "QuietOpt",
    "SetOpt",
    "VerboseOpt",
    "app",
    "fail",
    "problems",
]

app = typer.Typer(
    name="ddr",
    help="Statistics and dimensionality reduction on arrays larger than memory.\n\n"
    "Exit codes: 0 success; 1 a run failed (inspect: the output is INCOMPLETE); 2 bad "
    "usage or an invalid file; 130 interrupted (Ctrl-C). Every command has --help.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: no boxes that cut words at the terminal's width
    cls=Group,
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


def fail(message: str, code: int) -> NoReturn:
    """Print ``ddr: error: message`` (secrets redacted) on stderr and exit with ``code``."""
    from ddr.io.locations import redact

    typer.echo(f"ddr: error: {redact(message)}", err=True)
    raise typer.Exit(code)


def problems(exc: Exception) -> NoReturn:
    """Print every problem of a PipelineError (``file:line:col: message``) and exit 2."""
    found = getattr(exc, "problems", None) or []
    for p in found:
        typer.echo(str(p), err=True)
    n = len(found)
    typer.echo(f"ddr: {n} problem{'s' if n != 1 else ''} found; nothing was run", err=True)
    raise typer.Exit(2)
