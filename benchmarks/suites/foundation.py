"""The read floor and one pass of statistics: ddr `Moments` against dask's mean + cov and numpy
on the loaded array. Accuracy: the largest relative error of all covariance eigenvalues
against a float64 two-pass reference."""

from __future__ import annotations

import dask.array as da
import numpy as np

from benchmarks import counting
from benchmarks.harness import Context, max_rel_err
from ddr.stats import Moments, compute


def run(ctx: Context) -> None:
    for name in ctx.datasets:
        ref = ctx.exact_eigvals(name)
        zarr_x = ctx.zarr_array(name)
        rows = zarr_x.chunks[0]

        def plain_loop(zarr_x=zarr_x, rows=rows) -> dict:
            for start in range(0, zarr_x.shape[0], rows):
                zarr_x[start : start + rows]
            return {}

        def eig_err(cov: np.ndarray, ref: np.ndarray = ref) -> dict:
            return {"eig_err": max_rel_err(np.linalg.eigvalsh(cov), ref)}

        ctx.measure("read floor, plain zarr loop", name, plain_loop, scheduler="none")
        ctx.measure(
            "read floor, dask sum",
            name,
            lambda n=name: _sum(ctx.dask_array(n)),
            scheduler="threads",
        )
        # what ddr's own reader takes for the same pass: the part of a ddr row that is reading
        ctx.measure(
            "read floor, ddr reader sum",
            name,
            lambda n=name: _sum(ctx.array(n)),
            scheduler="cluster",
            paired_floor=True,
        )
        for scheduler in ("cluster", "threads"):
            ctx.measure(
                "ddr Moments",
                name,
                lambda n=name: eig_err(compute(Moments, ctx.array(n)).covariance(1)),
                scheduler=scheduler,
                paired_floor=scheduler == "cluster",
            )
        ctx.measure(
            "dask mean + cov",
            name,
            lambda n=name: eig_err(da.cov(ctx.dask_array(n), rowvar=False).compute()),
            scheduler="cluster",
        )
        if name == "M":
            memory_check(ctx, name)
        if name != "L" or "M" not in ctx.datasets:
            X = ctx.numpy(name)
            ctx.measure(
                "numpy mean + cov, loaded array",
                name,
                lambda X=X: eig_err(np.cov(X, rowvar=False)),
                scheduler="none",
                in_memory=True,
            )


def memory_check(ctx: Context, name: str) -> None:
    """Moments on 2 workers with 1 GiB each: no spilling, no restarts (issue acceptance)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit="1GiB", dashboard_address=None
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        before = set(client.scheduler_info()["workers"])

        def fit() -> dict:
            import dask

            client.run(counting.reset)
            with dask.config.set(scheduler=client):
                compute(Moments, ctx.array(name))
            read = sum(client.run(counting.read_bytes).values())
            spilled = client.run(lambda dask_worker: len(getattr(dask_worker.data, "slow", ())))
            after = set(client.scheduler_info()["workers"])
            return {
                "passes": read / ctx.stored_bytes(name),
                "spilled_keys": sum(spilled.values()),
                "restarted_workers": len(before - after),
            }

        ctx.measure("ddr Moments, 2 workers x 1 GiB", name, fit, scheduler="sync", children=True)


def _sum(x: da.Array) -> dict:
    x.sum().compute()
    return {}
