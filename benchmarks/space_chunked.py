"""A store chunked along space, read in whole rows: ddr's passes against dask's read floor.

``python -m benchmarks.space_chunked [--repeat 5] [--time 3650] [--no-write]`` writes (once)
a (time, lat, lon) float32 field, zstd, chunked by space as map-friendly stores are: a year
of time steps x a quarter of the grid per chunk, and also the same values as a 2-D
(time, lat*lon) array chunked the same way along its feature axis. It times, paired (each
run right after a floor run of its own, on the same threaded scheduler, in rounds over the
methods; the ratio is the median over the pairs):

- the read floor: ``dask.array.from_zarr(...).sum()`` (every stored chunk read and decoded
  once, by zarr, as dask reads it);
- ddr's row blocks of the 2-D store, summed the same way (the reading part of a pass);
- ddr's diagonal ``Moments`` of the 2-D store (``ddr.stats.compute``: one pass, each row
  block one task that reads every chunk of its rows, :mod:`ddr.io.row_blocks`);
- the same of the grid through xarray (``sample_dims="time"``; the mask is read from the
  first time step, which costs the first row block's chunks once more);
- ``PCA(n_components=5)`` of the 2-D store (16 200 features: ``svd_solver="auto"`` takes the
  randomized solver), per pass (its ``n_passes_``);
- diagonal ``Moments`` of a Dataset of two such fields (``t`` and a second field ``p`` on
  the same grid with a land mask of 2/9 of its points, chunked alike) through xarray,
  against the floor of reading both arrays: one task per row block reads both variables'
  stored chunks of its rows and copies their kept points into place
  (:mod:`ddr.stats._grid_blocks`).

Passes are measured as chunk bytes read through a counting store / stored bytes. The load
average of the machine before and after is printed and written with the table to
``benchmarks/results/space-chunked.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import xarray as xr
import zarr

HERE = Path(__file__).resolve().parent
LAT, LON = 90, 180
ROWS_PER_CHUNK = 365


def _write(root: Path, n_time: int) -> tuple[Path, Path]:
    """The grid store (fields ``t`` and ``p``) and the 2-D store (written once; reused when
    complete)."""
    grid, flat = root / "grid.zarr", root / "flat.zarr"
    done = root / f"complete-2-fields-masked-{n_time}"
    if done.exists():
        return grid, flat
    rng = np.random.default_rng(0)
    d = LAT * LON
    basis = rng.standard_normal((8, d)).astype(np.float32)
    z2 = zarr.create_array(
        str(flat), shape=(n_time, d), chunks=(ROWS_PER_CHUNK, d // 4), dtype="f4",
        overwrite=True,
    )  # fmt: skip
    group = zarr.open_group(str(grid), mode="w")
    z3, zp = (
        group.create_array(
            name,
            shape=(n_time, LAT, LON),
            chunks=(ROWS_PER_CHUNK, LAT // 2, LON // 2),
            dtype="f4",
            overwrite=True,
            dimension_names=("time", "lat", "lon"),
        )
        for name in ("t", "p")
    )
    for s in range(0, n_time, ROWS_PER_CHUNK):
        e = min(s + ROWS_PER_CHUNK, n_time)
        z = rng.standard_normal((e - s, 8)).astype(np.float32)
        block = z @ basis + 280.0 + rng.standard_normal((e - s, d)).astype(np.float32)
        z2[s:e] = block
        z3[s:e] = block.reshape(e - s, LAT, LON)
        p = z[:, ::-1] @ basis + 1000.0 + rng.standard_normal((e - s, d)).astype(np.float32)
        p = p.reshape(e - s, LAT, LON)
        p[:, LAT // 3 :, : LON // 3] = np.nan  # a land mask: 2/9 of the grid
        zp[s:e] = p
    done.touch()
    return grid, flat


def _stored(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.name != "zarr.json")


def _counted_passes(paths: list[Path], fn: Callable[[], Any]) -> float:
    """Chunk bytes ``fn`` reads from the arrays at ``paths`` (through counting stores) /
    their stored bytes."""
    from ddr.pipeline._counting import read_counts

    keys = [k for p in paths for k in (f"{p}::", f"{p.parent}::{p.name}")]
    before = sum(read_counts().get(k, 0) for k in keys)
    fn()
    after = sum(read_counts().get(k, 0) for k in keys)
    return (after - before) / sum(_stored(p) for p in paths)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--time", type=int, default=3650, help="time steps")
    parser.add_argument("--data", type=Path, default=HERE / "data" / "space-chunked")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from threadpoolctl import threadpool_limits

    import ddr
    from benchmarks.harness import machine_description
    from ddr.pipeline._counting import CountingStore
    from ddr.stats import Moments, compute
    from ddr.stats._input import as_rows

    args.data.mkdir(parents=True, exist_ok=True)
    grid, flat = _write(args.data, args.time)
    load_before = os.getloadavg()

    def floor() -> None:
        da.from_zarr(str(flat)).sum().compute()

    def floor_both() -> None:
        # the two fields' arrays, read and decoded as dask reads them, in one graph
        dask.compute(*(da.from_zarr(str(grid / v)).sum() for v in ("t", "p")))

    def moments_2d() -> None:
        compute(Moments.spec(diagonal=True), da.from_zarr(str(flat)))

    def moments_grid() -> None:
        X = xr.open_zarr(str(grid), consolidated=False)["t"]
        compute(Moments.spec(diagonal=True), X, sample_dim=("time",))

    def moments_dataset() -> None:
        X = xr.open_zarr(str(grid), consolidated=False)[["t", "p"]]
        compute(Moments.spec(diagonal=True), X, sample_dim=("time",))

    pca_passes: list[int] = []

    def pca_2d() -> None:
        est = ddr.PCA(n_components=5, random_state=0).fit(da.from_zarr(str(flat)))
        pca_passes.append(est.n_passes_)

    def rows_sum() -> None:
        # the reading part of a ddr pass: the row blocks, summed as the floor sums
        as_rows(da.from_zarr(str(flat))).data.sum().compute()

    rows = [  # (label, ddr's run, its floor)
        ("ddr row blocks, sum (the read alone), 2-D store", rows_sum, floor),
        ("ddr Moments diagonal, 2-D (time, lat*lon) store", moments_2d, floor),
        ("ddr Moments diagonal, (time, lat, lon) grid via xarray", moments_grid, floor),
        ("ddr PCA k=5 auto (randomized), 2-D store, per pass", pca_2d, floor),
        (
            "ddr Moments diagonal, Dataset of two fields (t, p with a land mask) via xarray "
            "(floor: both arrays)",
            moments_dataset,
            floor_both,
        ),
    ]
    floors: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    times: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    with dask.config.set(scheduler="threads"), threadpool_limits(1):
        floor_both()  # warm: the page cache and imports
        for _, fn, ref in rows:
            ref()
            fn()
        # rounds of pairs: a slow spell of the shared machine hits a pair alike
        for _ in range(args.repeat):
            for label, fn, ref in rows:
                t0 = time.perf_counter()
                ref()
                floors[label].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                fn()
                times[label].append(time.perf_counter() - t0)
        results = []
        for label, fn, _ in rows:
            per = pca_passes[-1] if fn is pca_2d else 1
            ratio = statistics.median(
                t / per / f for t, f in zip(times[label], floors[label], strict=True)
            )
            results.append(
                (label, statistics.median(floors[label]), statistics.median(times[label]), ratio)
            )
        # passes, counted (a separate run through counting stores)
        counted_flat = zarr.open_array(store=CountingStore(str(flat), read_only=True), mode="r")
        counted_grid = xr.open_zarr(CountingStore(str(grid), read_only=True), consolidated=False)
        diag = Moments.spec(diagonal=True)
        passes = [
            _counted_passes(
                [flat], lambda: as_rows(da.from_zarr(counted_flat)).data.sum().compute()
            ),
            _counted_passes([flat], lambda: compute(diag, da.from_zarr(counted_flat))),
            _counted_passes(
                [grid / "t"], lambda: compute(diag, counted_grid["t"], sample_dim=("time",))
            ),
            _counted_passes(
                [flat],
                lambda: ddr.PCA(n_components=5, random_state=0).fit(da.from_zarr(counted_flat)),
            ),
            _counted_passes(
                [grid / "t", grid / "p"],
                lambda: compute(diag, counted_grid[["t", "p"]], sample_dim=("time",)),
            ),
        ]
    load_after = os.getloadavg()
    size = _stored(flat) / 2**20
    z = zarr.open_array(str(flat), mode="r")
    lines = [
        "## space-chunked",
        "",
        "A store chunked along space read in whole rows (issue 32 item 4): one task per row "
        "block reads every stored chunk of its rows. Paired runs: each ddr run right after "
        "its own floor run (dask's `from_zarr(...).sum()`), dask's threaded scheduler, one "
        f"BLAS thread; medians of {args.repeat}. Target: a pass within x1.3 of the floor.",
        "",
        f"Data: {args.time} x {LAT} x {LON} float32 (zstd, {size:.0f} MiB stored), chunks "
        f"{ROWS_PER_CHUNK} time steps x a quarter of the grid (2-D store: {tuple(z.chunks)} "
        f"of {tuple(z.shape)}).",
        f"Machine: {machine_description()}.",
        f"Load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load_before)}; "
        f"after: {', '.join(f'{v:.2f}' for v in load_after)} (the machine is shared).",
        f"Command: `.venv/bin/python -m benchmarks.space_chunked --repeat {args.repeat} "
        f"--time {args.time}`",
        "",
        "Ratio: the median over the pairs of (ddr seconds / passes) / floor seconds.",
        "",
        "| method | floor s (median) | ddr s (median) | passes (counted) | per pass / floor |",
        "|---|---|---|---|---|",
    ]
    for (label, f, t, ratio), counted in zip(results, passes, strict=True):
        lines.append(f"| {label} | {f:.2f} | {t:.2f} | {counted:.2f} | x{ratio:.2f} |")
    lines += [
        "",
        "Notes: the grid row reads 1.10 passes: the mask is read from the first time step, "
        "i.e. the four chunks of the first time chunk (one of ten here; one time step of a "
        "store chunked by single time steps), before the pass. The PCA row is compute-bound: "
        "each randomized pass multiplies every row block by a 16 200 x (k + oversamples) "
        "block (`ddr.stats.sketch.CentredProduct`, about as long per block as the read), "
        "while its reads stay at one per pass (4 passes counted for `n_passes_` = 4). The "
        "Dataset row reads each field's first time step for its mask, as the grid row does. "
        "Each row block of both fields is one task that reads the fields' stored chunks of "
        "its rows and copies each chunk's kept points straight into its place in the joined "
        "block (`ddr.stats._grid_blocks`, `select_pieces`; by runs of consecutive points, "
        "`ddr.stats._columns`): one copy between the decoded chunk and the statistics. "
        "Earlier forms measured: each field's row block read first, then its kept points "
        "selected and the fields concatenated (three copies), x1.47 (7 pairs); the row "
        "blocks read first, then selected into place (two copies), x1.33 (9 pairs).",
    ]
    doc = "\n".join(lines) + "\n"
    sys.stdout.write(doc)
    if not args.no_write:
        (HERE / "results" / "space-chunked.md").write_text(doc)


if __name__ == "__main__":
    main()
