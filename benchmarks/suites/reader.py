"""ddr's reader against dask's on the installed zarr: one pass summing ``X``, read by
`ddr.io.from_zarr` (ddr reads and decodes each stored chunk itself) and by
`dask.array.from_zarr` (the read floor), on the same cluster, each ddr run right after a
floor run of its own. Run it with each interpreter the CI tests (`.venv`, Python 3.11:
zarr 3.1; `.venv312`, Python 3.12: the newest zarr): every zarr / numcodecs pair keeps its
own table (`results/reader-<versions>.md`). Target (issue 14): ddr / dask <= 0.75."""

from __future__ import annotations

import platform

import dask.array as da
import numcodecs
import zarr

from benchmarks.harness import Context


def variant() -> str:
    """What this suite's numbers depend on besides the machine: its results file's name."""
    python = platform.python_version()
    return f"zarr {zarr.__version__}, numcodecs {numcodecs.__version__}, python {python}"


def run(ctx: Context) -> None:
    for name in ctx.datasets:
        ctx.measure(
            f"ddr reader sum ({variant()})",
            name,
            lambda n=name: _sum(ctx.array(n)),
            scheduler="cluster",
            paired_floor=True,
        )


def _sum(x: da.Array) -> dict:
    x.sum().compute()
    return {}
