"""Predictions against their floors (issue 29): ddr GaussianNB and QDA (reg_param=1e-6) predict
and predict_proba, summed on the cluster and written to Zarr, each beside the floor it cannot
beat, re-measured before every run (paired, median of 3):

- read + BLAS: dask's read pass over ``X`` plus the float64 GEMM the model needs on every
  row (the block cast to float64 in tiles of rows, times a (d, 2k) matrix for GaussianNB,
  a (d, d k) one for QDA: one d x d whitening per class);
- read + BLAS + write: that, then dask's ``to_zarr`` of the same output (computed beforehand
  and held by the workers) with the codecs ddr writes with (zstd, crc32c checksum) and the
  same chunks; the write floor rows show that write alone.

The "read + f64 BLAS floor" rows are that floor measured once as a row of its own. Models
are fitted beforehand on the same rows (untimed). Target: every ddr row within 1.3x of its
floor.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np

import ddr
from benchmarks.harness import Context, fresh_path
from ddr.io import write_zarr

MODELS: dict[str, Callable[[], Any]] = {
    "GaussianNB": ddr.GaussianNB,
    "QDA": lambda: ddr.QuadraticDiscriminantAnalysis(reg_param=1e-6),
}


def run(ctx: Context) -> None:
    with ctx.scratch() as folder:
        for name in ctx.datasets:
            for label, make in MODELS.items():
                with dask.config.set(scheduler=ctx.client()):
                    model = make().fit(ctx.array(name), ctx.labels(name))
                _model_rows(ctx, name, label, model, folder)


def gemm_width(label: str, model: Any) -> int:
    """Columns of the float64 matrix every row of ``X`` is multiplied by: the model's BLAS."""
    k, d = len(model.classes_), model.n_features_in_
    return 2 * k if label == "GaussianNB" else d * k


def tile_rows(d: int) -> int:
    """Rows of a tile of the BLAS floor: a tile's product fits in cache for small ``d``, and
    at least 256 rows share each load of the matrix when ``d`` is large."""
    return max(256, 2**16 // max(d, 1))


def _blas_block(block: np.ndarray, M: np.ndarray) -> np.ndarray:
    """The float64 GEMM of a block, tile by tile (no n-sized temporary), reduced to 1 x 1."""
    n, d = block.shape
    step = tile_rows(d)
    out = np.empty((min(step, n), M.shape[1]))
    total = 0.0
    for start in range(0, n, step):
        tile = block[start : start + step].astype(np.float64)
        np.matmul(tile, M, out=out[: tile.shape[0]])
        total += float(out[0, 0])
    return np.full((1, 1), total)


def _read_blas(ctx: Context, name: str, M: Any) -> dict:
    X = ctx.dask_array(name)
    parts = X.map_blocks(_blas_block, M, chunks=((1,) * X.numblocks[0], (1,)), dtype=np.float64)
    parts.sum().compute()
    return {}


def _model_rows(ctx: Context, name: str, label: str, model: Any, folder: Path) -> None:
    d = model.n_features_in_
    rng = np.random.default_rng(0)
    M = rng.standard_normal((d, gemm_width(label, model)))
    M_key = dask.delayed(M, pure=True)  # once in the graph, not in every task

    def read_blas() -> float:
        return ctx.time_on_cluster(lambda: _read_blas(ctx, name, M_key))

    ctx.measure(
        f"read + f64 BLAS floor, {label} (dask)",
        name,
        lambda: _read_blas(ctx, name, M_key),
        scheduler="cluster",
    )
    with dask.config.set(scheduler=ctx.client()):
        held = {
            "predict": ctx.hold(model.predict(ctx.array(name))),
            "predict_proba": ctx.hold(model.predict_proba(ctx.array(name))),
        }
    for method, out in held.items():
        ctx.measure_write_floor(f"write floor, dask to_zarr of {label} {method}", name, out, folder)

    def read_blas_write(out: da.Array) -> Callable[[], float]:
        return lambda: read_blas() + ctx.time_write_floor(out, folder)

    for method in held:
        ctx.measure(
            f"ddr {label} {method}, summed (x read + BLAS)",
            name,
            lambda m=method: {"sum": float(getattr(model, m)(ctx.array(name)).sum().compute())},
            scheduler="cluster",
            paired_floor=True,
            floor=read_blas,
        )
        ctx.measure(
            f"ddr {label} {method} -> Zarr (x read + BLAS + write)",
            name,
            lambda m=method: _written(getattr(model, m)(ctx.array(name)), folder, f"{label}-{m}"),
            scheduler="cluster",
            paired_floor=True,
            floor=read_blas_write(held[method]),
        )


def _written(out: Any, folder: Path, stem: str) -> dict:
    dims = ("sample",) if out.ndim == 1 else ("sample", "class")
    write_zarr(out, fresh_path(folder, stem), name="out", dims=dims)
    return {}
