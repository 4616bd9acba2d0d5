"""The ``ddr`` typer app, the options several commands share, and how errors end a command.

Each command module registers its command on :data:`app`; ``ddr.cli`` imports them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from ddr.cli._help import Command as _HelpCommand
from ddr.cli._help import Group

__all__ = [
    "Command",
    "OwnConsole",
    "PipelineArg",
    "SetOpt",
    "app",
    "fail",
    "problems",
    "verbosity",
    "version_line",
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


def version_line() -> str:
    """What ``ddr --version`` and ``ddr version`` print: ``ddr`` and the version, from
    ddr/_version.py (the one place it is kept: the distribution's metadata is built from it).
    """
    from ddr._version import __version__

    return f"ddr {__version__}"


def _version(value: bool) -> None:
    if value:
        typer.echo(version_line())
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

# -v/-q: declared once, here, and given to every command (Command adds them)
_VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also debug messages and tracebacks.")
]
_QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only warnings and errors.")]
_VERBOSITY = "ddr.verbosity"


def _verbosity_options() -> list[Any]:
    """The ``-v``/``-q`` options as typer builds them (for :class:`Command` to add)."""
    shared = typer.Typer(add_completion=False)

    @shared.command()
    def options(verbose: _VerboseOpt = False, quiet: _QuietOpt = False) -> None:
        """Only its options are used."""

    params = typer.main.get_command(shared).params
    return [p for p in params if p.name in ("verbose", "quiet")]


class Command(_HelpCommand):
    """A ``ddr`` command: help by metavars (:mod:`ddr.cli._help`), ``-v``/``-q``, and the
    console set up for it (:func:`ddr._log.console`): whatever the library logs while the
    command runs (a plug-in's warning, a pass) is shown as ``ddr: ...`` /
    ``ddr: warning: ...`` on stderr, at the level ``-v``/``-q`` ask for.

    A command that sets the console up itself (``run``: a progress bar and a log file, known
    once the pipeline is planned) is declared with :class:`OwnConsole` and reads the level
    with :func:`verbosity`.
    """

    own_console = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_verbosity_options())

    def invoke(self, ctx: Any) -> Any:
        verbose = ctx.params.pop("verbose", False)
        quiet = ctx.params.pop("quiet", False)
        if verbose and quiet:
            fail("--verbose and --quiet contradict each other; give one", 2)
        level = -1 if quiet else int(verbose)
        ctx.meta[_VERBOSITY] = level
        if self.own_console:
            return super().invoke(ctx)
        from ddr._log import console

        with console(level, progress=False):
            return super().invoke(ctx)


class OwnConsole(Command):
    """A command that sets up its console itself, at :func:`verbosity`."""

    own_console = True


def verbosity(ctx: typer.Context) -> int:
    """The level the command's ``-v``/``-q`` ask for: -1 (``-q``), 0 or 1 (``-v``), as
    :func:`ddr._log.console` takes it (``ctx``: the command's context)."""
    return int(ctx.meta.get(_VERBOSITY, 0))


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
