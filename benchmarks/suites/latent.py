"""Factor analysis, PLS-SVD and the Nystroem feature map (issue 17) against the read floor and
scikit-learn.

FactorAnalysis (10 factors, the rank of the generator's signal): "one EM iteration" is one pass
of the E-step sums with a noise variance per feature at a fixed start (the M-step is a small
solve on the client): its ratio to the read floor is the cost of an iteration, the target is
1.5. "fit" is the whole fit on complete data: one pass of pairwise moments, the covariance fit
on the client, one confirming EM pass; `ll_gain` is its log-likelihood minus scikit-learn's
(default settings, in memory) relative to scikit-learn's (positive: ddr's is higher), `cov_err`
the largest difference of the model covariances relative to the largest entry. "20% missing"
draws missing entries per chunk (lazy, reproducible) and runs EM to tol=1e-6.

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

import dask.array as da
import numpy as np

from benchmarks.harness import Context

K = 10
LANDMARKS = (200, 1000)
# scikit-learn holds the data (and Nystroem's n x m features) in memory: S only
IN_MEMORY = ("S",)


def run(ctx: Context) -> None:
    for name in ctx.datasets:
        _factor_analysis(ctx, name)
        _nystroem(ctx, name)
        if name in IN_MEMORY:
            _plssvd(ctx, name)


# ------------------------------------------------------------------ factor analysis
def _mask_block(block: np.ndarray, frac: float, seed: int, block_info=None) -> np.ndarray:
    index = block_info[0]["chunk-location"][0] if block_info else 0
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
