"""``ddr ops``: the ops pipelines can use, with their parameters (:mod:`ddr.pipeline.registry`)."""

from __future__ import annotations

import typer

from ddr.cli._app import Command, app

__all__ = ["ops"]


@app.command(cls=Command, name="ops", short_help="List the ops pipelines can use.")
def ops() -> None:
    """List the ops pipelines can use: inputs, outputs, and each parameter with what it
    accepts and its default (the estimator's declaration, as `ddr validate` checks it)."""
    from ddr.pipeline import registry

    for name, op in sorted(registry.ops().items()):
        roles = ", ".join(f"{r.name}{'' if r.required else '?'}" for r in op.roles)
        typer.echo(f"{name}({roles}) -> {', '.join(op.outputs)}")
        for pname, param in op.params.items():
            typer.echo(f"    {pname}: {registry.describe_param(param)}")
    missing = registry.unavailable()
    if missing:
        typer.echo(f"(not available in this installation: {', '.join(sorted(missing))})")
