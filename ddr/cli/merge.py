"""``ddr merge``: the model of the union of the rows several saved models were fitted on
(:func:`ddr.merge_fits`), saved as a new model: a federated fit without moving a row."""

from __future__ import annotations

from typing import Annotated

import typer

from ddr.cli._app import Command, app, fail

__all__ = ["merge"]


@app.command(
    cls=Command,
    name="merge",
    short_help="Merge saved models' statistics into the model of all their rows.",
)
def merge(
    models: Annotated[
        list[str],
        typer.Argument(
            metavar="MODEL",
            help="Saved models (ddr save / a pipeline's kind: model output): paths or URLs.",
            show_default=False,
        ),
    ],
    output: Annotated[
        str,
        typer.Option("--output", "-o", metavar="PATH", help="Where to save the merged model."),
    ],
    if_exists: Annotated[
        str,
        typer.Option(
            "--if-exists",
            metavar="error|overwrite|skip-if-complete",
            help="What to do when something is at --output already.",
        ),
    ] = "error",
) -> None:
    """Merge the statistics of saved models fitted on different rows (sites, machines,
    stores) and save the model of all their rows.

    The models must be of one class with the same parameters and a fit that is one pass
    of mergeable statistics (the estimators with partial_fit). The result equals a fit on
    all the rows together, to round-off. The inputs are read only.
    """
    import ddr
    from ddr.io.models import CorruptModelError

    if len(models) < 2:
        fail("ddr merge needs at least two models", 2)
    try:
        fitted = [ddr.load(path) for path in models]
        merged = ddr.merge_fits(*fitted)
    except (CorruptModelError, OSError, TypeError, ValueError) as exc:
        fail(str(exc), 1)
    try:
        merged.save(output, if_exists=if_exists)
    except (OSError, ValueError) as exc:
        fail(str(exc), 1)
    rows = ", ".join(path for path in models)
    typer.echo(f"merged {len(models)} {type(merged).__name__} models ({rows}) into {output}")
