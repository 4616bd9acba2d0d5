"""The ``ddr`` command line.

Exit codes: 0 success; 1 a run failed (the error is printed); 2 bad usage or an invalid
file, reported before any data is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="ddr",
    help="Statistics and dimensionality reduction on arrays larger than memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str, code: int) -> None:
    typer.echo(f"ddr: error: {message}", err=True)
    raise typer.Exit(code)


@app.command("demo-data")
def demo_data(
    path: Annotated[Path, typer.Argument(help="Output Zarr group to create.")],
    n_samples: Annotated[int, typer.Option(help="Rows.")] = 100_000,
    n_features: Annotated[int, typer.Option(help="Columns.")] = 50,
    rank: Annotated[int, typer.Option(help="Rank of the signal.")] = 10,
    n_classes: Annotated[int, typer.Option(help="Classes (labels y).")] = 5,
    chunk_rows: Annotated[int, typer.Option(help="Rows per Zarr chunk.")] = 100_000,
    dtype: Annotated[str, typer.Option(help="float32 or float64.")] = "float32",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    missing: Annotated[float, typer.Option(help="Fraction of entries set to NaN.")] = 0.0,
    offset: Annotated[float, typer.Option(help="Constant added to every feature mean.")] = 0.0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing output.")] = False,
) -> None:
    """Write a synthetic dataset (low-rank signal + noise, class means) with its truth."""
    import time

    from ddr.demo import DemoSpec, write_demo_data

    try:
        spec = DemoSpec(
            n_samples, n_features, rank, n_classes, chunk_rows, dtype, seed, missing, offset
        )
    except ValueError as exc:
        _fail(str(exc), 2)
    start = time.perf_counter()
    try:
        write_demo_data(path, spec, if_exists="overwrite" if force else "error")
    except (FileExistsError, ValueError) as exc:
        _fail(str(exc), 2)
    size = n_samples * n_features * (4 if dtype == "float32" else 8) / 2**20
    typer.echo(
        f"wrote {path}: X {n_samples} x {n_features} {dtype} ({size:.0f} MiB raw) in chunks of "
        f"{chunk_rows} rows, y, and the true mean/components/variances "
        f"({time.perf_counter() - start:.1f} s)"
    )


@app.command("version")
def version() -> None:
    """Print the ddr version."""
    import ddr

    typer.echo(ddr.__version__)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
