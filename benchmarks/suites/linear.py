"""Linear reductions: ddr PCA (one-pass covariance and randomized block Krylov solvers) against
scikit-learn PCA (auto = covariance_eigh here, covariance_eigh, randomized, full where it fits
in memory), scikit-learn IncrementalPCA over the stored chunks, dask-ml PCA (tsqr, randomized
at its default q=0 and at q=2) and dask.array.linalg.svd_compressed (q=0 and q=2) on the same
centred data. Accuracy against the float64 two-pass reference: `angle` is the largest principal
angle (degrees) between the top-10 subspaces, `ev_err` the largest relative error of the top-10
explained variances. Passes are measured: ddr randomized reads the store q+1 times (q=1: 2,
default q=3: 4) and holds a few chunks per worker; svd_compressed builds all its products into
one graph that reads each chunk once and keeps the chunks in worker memory (its peak memory
grows with the data), so its passes column says 1 at any q."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np

from benchmarks.harness import Context, max_rel_err, principal_angle_deg
from ddr.decomposition.pca import PCA

K = 10
# scikit-learn's full SVD holds U (n x d float32) and copies: only where that fits in memory
FULL_SVD_DATASETS = ("S", "M")


def run(ctx: Context) -> None:
    for name in ctx.datasets:
        ref_comps, ref_ev = ctx.exact_pca(name, K)

        def score(components: Any, ev: Any, ref_comps=ref_comps, ref_ev=ref_ev) -> dict:
            components = np.asarray(components)[:K]
            return {
                "angle": principal_angle_deg(components, ref_comps),
                "ev_err": max_rel_err(np.asarray(ev)[:K], ref_ev),
            }

        _ddr_rows(ctx, name, score)
        _sklearn_rows(ctx, name, score)
        _dask_rows(ctx, name, score)


# ---------------------------------------------------------------------------------- ddr
def _ddr_rows(ctx: Context, name: str, score: Callable[..., dict]) -> None:
    def fit(**kwargs: Any) -> Callable[[], dict]:
        def run_fit() -> dict:
            pca = PCA(K, random_state=0, **kwargs).fit(ctx.array(name))
            return score(pca.components_, pca.explained_variance_)

        return run_fit

    for scheduler in ("cluster", "threads"):
        paired = scheduler == "cluster"
        ctx.measure(
            "ddr PCA covariance",
            name,
            fit(svd_solver="covariance_eigh"),
            scheduler=scheduler,
            paired_floor=paired,
        )
        ctx.measure(
            "ddr PCA randomized (default q=3)",
            name,
            fit(svd_solver="randomized"),
            scheduler=scheduler,
            paired_floor=paired,
        )
    ctx.measure(
        "ddr PCA randomized q=1",
        name,
        fit(svd_solver="randomized", iterated_power=1),
        scheduler="cluster",
    )


# --------------------------------------------------------------------------- scikit-learn
def _sklearn_rows(ctx: Context, name: str, score: Callable[..., dict]) -> None:
    from sklearn.decomposition import PCA as SkPCA
    from sklearn.decomposition import IncrementalPCA

    X = ctx.numpy(name)  # loaded beforehand, not timed (in-memory rows)

    def sk(solver: str) -> Callable[[], dict]:
        def run_fit() -> dict:
            pca = SkPCA(K, svd_solver=solver, random_state=0).fit(X)
            return score(pca.components_, pca.explained_variance_)

        return run_fit

    solvers = ["auto", "covariance_eigh", "randomized"]
    if name in FULL_SVD_DATASETS:
        solvers.append("full")
    for solver in solvers:
        ctx.measure(
            f"sklearn PCA {solver}, in memory", name, sk(solver), scheduler="none", in_memory=True
        )

    zarr_x = ctx.zarr_array(name)
    rows = zarr_x.chunks[0]

    def incremental() -> dict:
        ipca = IncrementalPCA(K)
        for start in range(0, zarr_x.shape[0], rows):
            ipca.partial_fit(zarr_x[start : start + rows])
        return score(ipca.components_, ipca.explained_variance_)

    ctx.measure("sklearn IncrementalPCA over chunks", name, incremental, scheduler="none")


# ------------------------------------------------------------------- dask-ml and dask
def _dask_rows(ctx: Context, name: str, score: Callable[..., dict]) -> None:
    def dask_ml_pca(solver: str, power: int) -> Callable[[], dict]:
        def run_fit() -> dict:
            from dask_ml.decomposition import PCA as DaskPCA

            pca = DaskPCA(K, svd_solver=solver, iterated_power=power, random_state=0)
            pca.fit(ctx.dask_array(name))
            return score(pca.components_, pca.explained_variance_)

        return run_fit

    ctx.measure("dask-ml PCA tsqr", name, dask_ml_pca("tsqr", 0), scheduler="cluster")
    ctx.measure(
        "dask-ml PCA randomized, default q=0",
        name,
        dask_ml_pca("randomized", 0),
        scheduler="cluster",
    )
    ctx.measure(
        "dask-ml PCA randomized q=2", name, dask_ml_pca("randomized", 2), scheduler="cluster"
    )

    def compressed(q: int) -> Callable[[], dict]:
        def run_fit() -> dict:
            X = ctx.dask_array(name)
            n = X.shape[0]
            Xc = X - X.mean(axis=0)
            _, s, vt = da.linalg.svd_compressed(Xc, k=K, n_power_iter=q, seed=0)
            s, vt = da.compute(s, vt)
            return score(vt, s**2 / (n - 1))

        return run_fit

    for q in (0, 2):
        ctx.measure(f"dask svd_compressed q={q}", name, compressed(q), scheduler="cluster")
