"""Factor analysis, PLS-SVD and the Nystroem feature map (issue 17) against the read floor and
scikit-learn.

FactorAnalysis (10 factors, the rank of the generator's signal): "one EM iteration" is one pass
of the E-step sums with a noise variance per feature at a fixed start (the M-step is a small
solve on the client): its ratio to the read floor is the cost of an iteration, the target is
1.5. "fit" is the whole fit on complete data: one pass of pairwise moments, then the fit of
their covariance on the client (no further pass); `ll_gain` is its log-likelihood minus
scikit-learn's (default settings, in memory) relative to scikit-learn's (positive: ddr's is
higher), `cov_err` the largest difference of the model covariances relative to the largest
entry. "20% missing" draws missing entries per chunk (lazy, reproducible, inside each pass)
and runs EM to tol=1e-6.

EM with missing values (issue 27: an iteration within 2x the read floor at 20 % missing): a
copy of X with 20 % of its entries NaN, drawn per chunk, is stored once beside the dataset
(`<name>-missing20.zarr`, same chunks and codec); "one EM iteration, 20% missing" is one pass
of the E-step sums of PPCA and of factor analysis over it (every row has missing entries:
each row's posterior from its observed features), each paired with dask's read floor of that
copy (`nansum`), the row beside the complete-data one.

PLSSVD (2 pairs of directions) between the first and the last 50 features: one pass over both
views against scikit-learn's PLSSVD on the loaded array; `w_err` the largest difference of the
weights.

Nystroem (rbf, gamma = the median heuristic, 1 / median squared distance between rows): fit
(the landmark rows) and one transform pass whose features are summed blockwise, against
scikit-learn's Nystroem fit + transform of the loaded array (the same landmarks: same seed);
`feat_err` the largest difference of the features of the first 2000 rows (scikit-learn
evaluates the kernel in the data's float32, ddr in float64).
"""

from __future__ import annotations

import time
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

from benchmarks import counting
from benchmarks.harness import Context

K = 10
LANDMARKS = (200, 1000)
# scikit-learn holds the data (and Nystroem's n x m features) in memory: S only
IN_MEMORY = ("S",)


def run(ctx: Context) -> None:
    for name in ctx.datasets:
        _factor_analysis(ctx, name)
        _missing_iteration(ctx, name)
        _nystroem(ctx, name)
        if name in IN_MEMORY:
            _plssvd(ctx, name)


# ------------------------------------------------------------------ factor analysis
def _mask_block(
    block: np.ndarray, frac: float, seed: int, index: int = 0, block_info=None
) -> np.ndarray:
    if block_info:
        index = block_info[0]["chunk-location"][0]
    rng = np.random.default_rng([seed, index])
    out = np.array(block, dtype=np.float32, copy=True)
    out[rng.random(block.shape) < frac] = np.nan
    return out


def _factor_analysis(ctx: Context, name: str) -> None:
    from ddr import FactorAnalysis

    for scheduler in ("cluster", "threads"):

        def one_iteration() -> dict:
            from ddr.stats import PPCASums, compute
            from ddr.stats.ppca_sums import PPCAParams

            X = ctx.array(name)
            d = X.shape[1]
            rng = np.random.default_rng(0)
            start = PPCAParams(rng.standard_normal((d, K)), np.zeros(d), rng.uniform(0.5, 2, d))
            compute(PPCASums.spec(params=start), X)
            return {}

        ctx.measure(
            "ddr FactorAnalysis, one EM iteration",
            name,
            one_iteration,
            scheduler=scheduler,
            paired_floor=scheduler == "cluster",
        )

    fitted: dict[str, FactorAnalysis] = {}

    def fit() -> dict:
        m = FactorAnalysis(K).fit(ctx.array(name))
        fitted["ddr"] = m
        return {"iterations": m.n_iter_}

    ctx.measure("ddr FactorAnalysis fit", name, fit, scheduler="cluster")

    if name in IN_MEMORY:
        from sklearn.decomposition import FactorAnalysis as SkFA

        X = ctx.numpy(name)

        def sklearn_fit() -> dict:
            sk = SkFA(K, random_state=0).fit(X)
            ours = fitted.get("ddr")
            if ours is None:
                return {"iterations": sk.n_iter_}
            n = X.shape[0]
            ll_sk = sk.score(X) * n
            C = sk.get_covariance()
            return {
                "iterations": sk.n_iter_,
                "ll_gain": (ours.score(X) * n - ll_sk) / abs(ll_sk),
                "cov_err": float(np.abs(ours.get_covariance() - C).max() / np.abs(C).max()),
            }

        ctx.measure(
            "sklearn FactorAnalysis (ll_gain: ddr's over it)",
            name,
            sklearn_fit,
            scheduler="none",
            in_memory=True,
        )

        def missing() -> dict:
            X = ctx.array(name).map_blocks(_mask_block, 0.2, 7, dtype=np.float32)
            m = FactorAnalysis(K, tol=1e-6).fit(X)
            return {"iterations": m.n_iter_}

        ctx.measure("ddr FactorAnalysis EM, 20% missing", name, missing, scheduler="cluster")


# ------------------------------------------------------- EM iterations with missing values
MISSING_FRACTION = 0.2


def _missing_copy(ctx: Context, name: str) -> zarr.Array:
    """X with ``MISSING_FRACTION`` of its entries NaN (drawn per chunk, seeded), stored once
    beside the dataset, read through the counting store."""
    path = ctx.data_dir / f"{name}-missing{round(100 * MISSING_FRACTION)}.zarr"
    src = ctx.zarr_array(name)
    done = path / "complete"
    if not done.exists():
        out = zarr.create_array(
            str(path),
            name="X",
            shape=src.shape,
            chunks=src.chunks,
            dtype=src.dtype,
            compressors=src.compressors,
            overwrite=True,
        )
        rows = src.chunks[0]
        for i, start in enumerate(range(0, src.shape[0], rows)):
            out[start : start + rows] = _mask_block(
                src[start : start + rows], MISSING_FRACTION, 7, i
            )
        done.touch()
    store = counting.CountingLocalStore(str(path), read_only=True)
    return zarr.open_array(store=store, path="X", mode="r")


def _stored_bytes(arr: zarr.Array) -> int:
    root = Path(str(arr.store.root)) / "X"
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and f.name != "zarr.json")


def _missing_iteration(ctx: Context, name: str) -> None:
    from ddr.io.zarr_chunks import from_zarr
    from ddr.stats import PPCASums, compute
    from ddr.stats.ppca_sums import PPCAParams

    masked = _missing_copy(ctx, name)
    size = _stored_bytes(masked)

    def floor() -> float:
        with ctx._scheduler("cluster"):
            start = time.perf_counter()
            da.nansum(da.from_zarr(masked)).compute()
            return time.perf_counter() - start

    ctx.measure(
        "read floor, 20% missing copy, dask nansum",
        name,
        lambda: {"floor_s": floor()},
        scheduler="cluster",
    )
    d = masked.shape[1]
    rng = np.random.default_rng(0)
    W = rng.standard_normal((d, K))
    for model, noise in (("PPCA", 1.0), ("FactorAnalysis", rng.uniform(0.5, 2, d))):

        def one_iteration(noise: float | np.ndarray = noise) -> dict:
            ctx._reset_counters()
            compute(PPCASums.spec(params=PPCAParams(W, np.zeros(d), noise)), from_zarr(masked))
            return {"passes": ctx._read_bytes() / size}

        ctx.measure(
            f"ddr {model}, one EM iteration, 20% missing",
            name,
            one_iteration,
            scheduler="cluster",
            paired_floor=True,
            floor=floor,
        )


# ------------------------------------------------------------------------- PLS-SVD
def _plssvd(ctx: Context, name: str) -> None:
    from sklearn.cross_decomposition import PLSSVD as SkPLSSVD

    from ddr import PLSSVD

    ref: dict[str, np.ndarray] = {}

    def sklearn_fit() -> dict:
        X = ctx.numpy(name)
        sk = SkPLSSVD(2).fit(X[:, :50], X[:, 50:])
        ref["w"] = sk.x_weights_
        return {}

    ctx.measure("sklearn PLSSVD", name, sklearn_fit, scheduler="none", in_memory=True)

    def ddr_fit() -> dict:
        X = ctx.array(name)
        m = PLSSVD(2).fit(X[:, :50], X[:, 50:])
        return {"w_err": float(np.abs(m.x_weights_ - ref["w"]).max())} if ref else {}

    ctx.measure("ddr PLSSVD", name, ddr_fit, scheduler="cluster")


# ------------------------------------------------------------------------ Nystroem
def _median_gamma(ctx: Context, name: str) -> float:
    sub = np.asarray(ctx.zarr_array(name)[:10_000], dtype=np.float64)
    pairs = np.random.default_rng(0).integers(0, sub.shape[0], size=(2000, 2))
    return 1.0 / float(np.median(((sub[pairs[:, 0]] - sub[pairs[:, 1]]) ** 2).sum(axis=1)))


def _nystroem(ctx: Context, name: str) -> None:
    from sklearn.kernel_approximation import Nystroem as SkNystroem

    from ddr import Nystroem

    gamma = _median_gamma(ctx, name)
    for m in LANDMARKS:
        features: dict[str, np.ndarray] = {}

        def ddr_map(m: int = m, features: dict = features) -> dict:
            X = ctx.array(name)
            phi = Nystroem("rbf", gamma=gamma, n_components=m, random_state=0).fit(X)
            F = phi.transform(X)
            _, head = da.compute(F.sum(axis=0), F[:2000])
            features["ddr"] = head
            return {"gamma": gamma}

        ctx.measure(f"ddr Nystroem m={m}: fit + transform", name, ddr_map, scheduler="cluster")
        if name not in IN_MEMORY:
            continue

        def sk_map(m: int = m, features: dict = features) -> dict:
            X = ctx.numpy(name)
            F = SkNystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=0).fit(X)
            F = F.transform(X)
            F.sum(axis=0)
            if "ddr" not in features:
                return {}
            return {"feat_err": float(np.abs(F[:2000] - features["ddr"]).max())}

        ctx.measure(
            f"sklearn Nystroem({m}) fit + transform",
            name,
            sk_map,
            scheduler="none",
            in_memory=True,
        )
