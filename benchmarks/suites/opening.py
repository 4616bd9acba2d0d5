"""The same fits on ``X`` opened three ways (issue 19): ``ddr.io.from_zarr``,
``xr.open_zarr(path)["X"]`` and ``dask.array.from_zarr`` (the labels opened the same way as
``X``). ddr recognises the last two as reading the Zarr array unchanged and reads their chunks
through its own reader (:mod:`ddr.io.zarr_graphs`), so all three should cost the same.
Each fit on ``ddr.io.from_zarr`` input runs right after a dask read floor of its own; each
fit on ``xr.open_zarr`` or ``da.from_zarr`` input twice: once right after a dask floor, once
right after the same fit on ``ddr.io.from_zarr`` input (its "x" is then the ratio to that
fit: on a shared machine, a ratio of two ratios to floors measured minutes apart moves by
20 %). Target (issue 19): on M, PCA covariance and GaussianNB fits on ``xr.open_zarr`` and
``da.from_zarr`` input within 1.1x of the same fit on ``ddr.io.from_zarr`` input."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import xarray as xr

import ddr
from benchmarks import counting
from benchmarks.harness import Context


def _xarray(ctx: Context, name: str) -> tuple[Any, Any]:
    store = counting.CountingLocalStore(str(ctx.path(name)), read_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # consolidated metadata: zarr's v3 note, not ours
        ds = xr.open_zarr(store, consolidated=False)
    return ds["X"], ds["y"]


WAYS: dict[str, Callable[[Context, str], tuple[Any, Any]]] = {
    "ddr.io.from_zarr": lambda ctx, n: (ctx.array(n), ctx.labels(n)),
    "xr.open_zarr": _xarray,
    "da.from_zarr": lambda ctx, n: (ctx.dask_array(n), ctx.dask_labels(n)),
}

OURS = "ddr.io.from_zarr"

FITS: dict[str, Callable[[], Any]] = {
    "PCA covariance": lambda: ddr.PCA(10, svd_solver="covariance_eigh"),
    "GaussianNB": ddr.GaussianNB,
}


def run(ctx: Context) -> None:
    _warm_up(ctx)
    for name in ctx.datasets:
        for fit_label, make in FITS.items():

            def fit_ours(n: str = name, m: Callable = make) -> float:
                with dask.config.set(scheduler=ctx.client()):
                    start = time.perf_counter()
                    _fit(ctx, n, m, WAYS[OURS])
                    return time.perf_counter() - start

            for way, open_ in WAYS.items():
                # None: paired with dask's floor
                for floor in [None] if way == OURS else [None, fit_ours]:
                    ctx.measure(
                        f"ddr {fit_label} fit on {way}"
                        + (", x to the fit on ddr.io.from_zarr" if floor else ""),
                        name,
                        lambda n=name, m=make, o=open_: _fit(ctx, n, m, o),
                        scheduler="cluster",
                        paired_floor=True,
                        floor=floor,
                    )


def _fit(ctx: Context, name: str, make: Callable[[], Any], open_: Callable) -> dict:
    X, y = open_(ctx, name)
    model = make()
    model.fit(X, y) if isinstance(model, ddr.GaussianNB) else model.fit(X)
    return {}


def _warm_up(ctx: Context) -> None:
    """Import the estimators on the workers (untimed), so no row pays for it."""
    name = ctx.datasets[0]
    X, y = ctx.array(name)[:2000], ctx.labels(name)[:2000]
    with dask.config.set(scheduler=ctx.client()):
        for make in FITS.values():
            make().fit(X, y)
        da.from_zarr(ctx.zarr_array(name))[:2000].sum().compute()
