"""``ddr demo-data``: write a synthetic dataset with its truth (:mod:`ddr.demo`,
:mod:`ddr.demo_counts`)."""

from __future__ import annotations

from typing import Annotated

import typer

from ddr.cli._app import Command, app, fail

__all__ = ["demo_data"]

#: what --if-exists accepts: ddr.io.write_zarr's if_exists
_IF_EXISTS = ("error", "overwrite", "skip-if-complete")


@app.command(
    cls=Command, name="demo-data", short_help="Write a synthetic dataset with known truth."
)
def demo_data(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="Output Zarr group to create: a path or URL (s3://...).",
            show_default=False,
        ),
    ],
    kind: Annotated[
        str,
        typer.Option(
            metavar="dense|counts|gridded",
            help="dense: a low-rank signal plus noise with class labels; counts: word counts "
            "of documents drawn from a topic model, stored sparse (CSR, AnnData's layout); "
            "gridded: a time x lat x lon field (t2m) with a land mask (NaN) and known spatial "
            "modes with seasonal cycles, for EOF analysis.",
        ),
    ] = "dense",
    n_samples: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Rows (documents; gridded: monthly time steps).  [default: 100000; counts: "
            "20000; gridded: 480]",
            show_default=False,
        ),
    ] = None,
    n_features: Annotated[
        int | None,
        typer.Option(
            metavar="D", help="Columns (words).  [default: 50; counts: 5000]", show_default=False
        ),
    ] = None,
    rank: Annotated[
        int | None,
        typer.Option(
            metavar="R",
            help="Rank of the signal (gridded: spatial modes, at most 6).  [default: 10; "
            "gridded: 3]",
            show_default=False,
        ),
    ] = None,
    n_classes: Annotated[int, typer.Option(metavar="K", help="Classes (labels y).")] = 5,
    chunk_rows: Annotated[
        int | None,
        typer.Option(
            metavar="ROWS",
            help="Rows per Zarr chunk (gridded: time steps per chunk or generated block; "
            "default: the rows in 8 chunks, each at most 64 MiB).",
            show_default=False,
        ),
    ] = None,
    dtype: Annotated[str, typer.Option(metavar="float32|float64", help="Dtype of X.")] = (
        "float32"
    ),
    seed: Annotated[
        int,
        typer.Option(
            metavar="S",
            help="Seed of the population: the mean, the signal subspace, the class means.",
        ),
    ] = 0,
    sample_seed: Annotated[
        int,
        typer.Option(
            metavar="S",
            help="Seed of the sample drawn from the population. Another value with the same "
            "--seed (and --n-features, --rank, --n-classes, --offset) draws new rows of the "
            "same population: a test set for models fitted on the first.",
        ),
    ] = 0,
    missing: Annotated[
        float, typer.Option(metavar="FRACTION", help="Fraction of entries set to NaN.")
    ] = 0.0,
    offset: Annotated[
        float, typer.Option(metavar="C", help="Constant added to every feature mean.")
    ] = 0.0,
    n_topics: Annotated[int, typer.Option(metavar="K", help="counts: topics.")] = 10,
    doc_length: Annotated[
        float, typer.Option(metavar="L", help="counts: mean tokens per document.")
    ] = 100.0,
    n_lat: Annotated[int, typer.Option(metavar="N", help="gridded: latitudes.")] = 36,
    n_lon: Annotated[int, typer.Option(metavar="N", help="gridded: longitudes.")] = 72,
    chunk_by: Annotated[
        str,
        typer.Option(
            metavar="time|space",
            help="gridded: store whole maps of --chunk-rows time steps per chunk (time), or "
            "every time step of a quarter of the grid per chunk (space).",
        ),
    ] = "time",
    if_exists: Annotated[
        str,
        typer.Option(
            metavar="error|overwrite|skip-if-complete",
            help="What to do when PATH holds a ddr output already: refuse (error), replace it "
            "(overwrite), or keep it when it is complete and was written with the same "
            "options, else write it again (skip-if-complete).",
        ),
    ] = "error",
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing output (--if-exists overwrite).")
    ] = False,
) -> None:
    """Write a synthetic dataset with its truth: dense (low-rank signal + noise, class means),
    counts (documents from a topic model, sparse) or gridded (a field with a land mask and
    known spatial modes)."""
    import time

    from ddr.demo import DEMO_KINDS, demo_spec, write_demo

    if kind not in DEMO_KINDS:
        fail(f"--kind must be one of {', '.join(DEMO_KINDS)}; got {kind!r}", 2)
    if if_exists not in _IF_EXISTS:
        fail(f"--if-exists must be one of {', '.join(_IF_EXISTS)}; got {if_exists!r}", 2)
    if force and if_exists not in ("error", "overwrite"):
        fail(f"--force and --if-exists {if_exists} contradict each other; give one", 2)
    if force:
        if_exists = "overwrite"
    params: dict[str, object] = dict(
        n_samples=n_samples, chunk_rows=chunk_rows, dtype=dtype, seed=seed, sample_seed=sample_seed
    )
    if kind == "dense":
        params.update(n_features=n_features, rank=10 if rank is None else rank)
        params.update(n_classes=n_classes, missing=missing, offset=offset)
    elif kind == "counts":
        params.update(n_features=n_features, n_topics=n_topics, doc_length=doc_length)
    else:
        if n_features is not None:
            fail("--n-features is not an option of --kind gridded: give --n-lat and --n-lon", 2)
        params.update(rank=rank, n_lat=n_lat, n_lon=n_lon, chunk_by=chunk_by)
    try:
        spec = demo_spec(kind, **params)
    except ValueError as exc:
        fail(str(exc), 2)
    start = time.perf_counter()
    try:
        written = write_demo(path, spec, if_exists=if_exists)  # type: ignore[arg-type]
    except FileExistsError as exc:  # the library's advice, in this command's options
        fail(_in_options(str(exc)), 2)
    except (OSError, ValueError, ImportError) as exc:
        fail(str(exc), 2)
    if not written:
        typer.echo(f"kept {path}: complete, written with the same options")
        return
    typer.echo(f"wrote {path}: {spec.describe(time.perf_counter() - start)}")


def _in_options(message: str) -> str:
    """ddr.io's advice (``if_exists='overwrite' (--force)``) in demo-data's options."""
    return message.replace("pass if_exists='overwrite' (--force)", "pass --force").replace(
        "'skip-if-complete'", "--if-exists skip-if-complete"
    )
