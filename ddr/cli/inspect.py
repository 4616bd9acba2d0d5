"""``ddr inspect``: what an output holds, where it came from, and whether it is complete
(:func:`ddr.pipeline.inspection.inspect_output`)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ddr.cli._app import Command, app, fail

__all__ = ["INSPECT_CODES", "inspect", "inspect_path"]

#: ``ddr inspect``'s exit code for each status of what is at the path
INSPECT_CODES = {"complete": 0, "incomplete": 1, "missing": 2, "not-ddr": 3}

_LABELS = {
    "complete": "complete",
    "incomplete": "INCOMPLETE (interrupted or still being written; rerun the pipeline with "
    "--resume or --force)",
    "missing": "missing",
    "not-ddr": "not a ddr output",
}


def inspect_path(path: Any) -> tuple[dict[str, Any], int]:
    """What is at ``path`` (a local path or URL: a ddr output, model, JSON or PNG) and the
    exit code for it: what its output kind shows (:mod:`ddr.pipeline.outputs`)."""
    from ddr.pipeline.inspection import inspect_output

    info = inspect_output(path)
    return info, 1 if "error" in info else INSPECT_CODES[info["status"]]


@app.command(
    cls=Command, name="inspect", short_help="Say what an output holds and whether it is complete."
)
def inspect(
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
        fail(str(exc), 2)
    if as_json:
        typer.echo(json.dumps(info, indent=2, default=str))
    else:
        typer.echo("\n".join(_lines(info)))
    raise typer.Exit(code)


def _lines(info: dict[str, Any]) -> list[str]:
    """``info`` as text: the status, the claim, arrays, what it is and where it came from."""
    reason = f": {info['reason']}" if info.get("reason") else ""
    lines = [f"{info['path']}: {_LABELS[info['status']]}{reason}"]
    claim = info.get("claim")
    if claim:
        stale = f" (stale: {claim['stale']})" if claim["stale"] else ""
        lines.append(f"  claimed by {claim['by']}{stale}")
    for name, arr in info.get("arrays", {}).items():
        dims = f" dims {tuple(arr['dims'])}" if arr["dims"] else ""
        lines.append(
            f"  {name}: {tuple(arr['shape'])}{dims} {arr['dtype']}, chunks "
            f"{tuple(arr['chunks'])}, {arr['chunks_written']} chunks written"
        )
    for name, csr in info.get("sparse", {}).items():
        lines.append(
            f"  {name}: {tuple(csr['shape'] or ())} {csr['dtype']}, sparse (CSR group), "
            f"{csr['stored_values']} stored values"
        )
    for key in ("model", "fingerprint", "version", "bytes", "keys"):
        if key in info and info[key] is not None:
            lines.append(f"  {key}: {info[key]}")
    prov = info.get("provenance")
    if prov:
        pipe = prov["pipeline"]
        lines.append(
            f"  made by pipeline {pipe.get('name')} ({pipe.get('file')}) from {prov.get('from')}"
        )
        lines += [f"    step {sid}: {op}" for sid, op in (prov.get("steps") or {}).items()]
        for name, inp in (prov.get("inputs") or {}).items():
            lines.append(
                f"    input {name}: {inp.get('path')} [{inp.get('array')}] "
                f"{tuple(inp.get('shape', ()))} {inp.get('dtype')}"
            )
        if prov.get("versions"):
            versions = ", ".join(f"{k} {v}" for k, v in prov["versions"].items())
            lines.append(f"    versions: {versions}")
    if info.get("history"):
        lines.append("  history:")
        lines += [f"    {line}" for line in str(info["history"]).splitlines()]
    return lines
