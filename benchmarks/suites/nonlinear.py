"""Nonlinear and probabilistic reductions: Nystrom kernel PCA against scikit-learn's Nystroem +
PCA and exact kernel PCA; PPCA by distributed EM against the read floor, the closed form, and
(with 0, 20 and 50 % of the entries missing) the true subspace.

KernelPCA (rbf, 4 components), on dataset S only. gamma is the median heuristic,
1 / median squared distance between rows (about 1e-3 here); scikit-learn's default 1/d = 0.01
makes the kernel matrix of this 100-dimensional data nearly diagonal, with no spectral gap to
recover. 4 components: their eigenvalues are separated (the 4th is 1.5 x the 5th, while the
5th to 11th lie within 1.1 x of each other, so larger subspaces are ill-determined even
exactly). The "10k" rows fit everything on the first 10 000 rows in memory, where exact
kernel PCA (ddr's, equal to scikit-learn's dense solver) is the reference: ev_rel_err is the
largest relative error of the 4 eigenvalues, angle_deg the largest principal angle between
the 4-dimensional score spaces of those 10 000 rows. The "S" rows fit the whole dataset (ddr
from the Zarr store, scikit-learn on the loaded array) and compare with the same reference
(eigenvalues per row, scores of the 10 000 rows): these errors include the sampling
difference between 10 000 and 200 000 rows.

PPCA (10 components): "one EM iteration" is one pass of the E-step sums (its ratio to the
read floor is the cost of an iteration); "EM" runs to convergence (tol 1e-9) from the PCA
start and reports iterations, the relative gaps in log-likelihood and sigma^2 and the angle to
the closed form. Missing entries are drawn at random per chunk (lazy, reproducible); angles
are to the generator's true components; the peer is scikit-learn's PCA after mean imputation.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from benchmarks.harness import Context, principal_angle_deg

K = 10  # PPCA components (the rank of the generator's signal)
K_KPCA = 4  # kernel PCA components (see the module docstring)
SUBSET = 10_000
LANDMARKS = (200, 1000, 3000)
MISSING = (0.0, 0.2, 0.5)


def run(ctx: Context) -> None:
    for name in ctx.datasets:
        _ppca(ctx, name)
    if "S" in ctx.datasets:
        _ppca_missing(ctx, "S")
        _kernel_pca(ctx, "S")


# ------------------------------------------------------------------ kernel PCA
def _col_angle(A: np.ndarray, B: np.ndarray) -> float:
    """Largest principal angle (degrees) between the column spaces of A and B (n x k)."""
    return principal_angle_deg(A.T, B.T)


def _kernel_pca(ctx: Context, name: str) -> None:
    from sklearn.decomposition import PCA
    from sklearn.decomposition import KernelPCA as SkKernelPCA
    from sklearn.kernel_approximation import Nystroem

    from ddr import KernelPCA

    X = ctx.numpy(name)
    sub = np.asarray(X[:SUBSET], dtype=np.float64)
    pairs = np.random.default_rng(0).integers(0, SUBSET, size=(2000, 2))
    gamma = 1.0 / float(np.median(((sub[pairs[:, 0]] - sub[pairs[:, 1]]) ** 2).sum(axis=1)))
    ref: dict[str, np.ndarray] = {}

    def exact_ddr() -> dict:
        m = KernelPCA(K_KPCA + 1, kernel="rbf", gamma=gamma, method="exact").fit(sub)
        ref["ev"] = m.eigenvalues_[:K_KPCA] / SUBSET
        ref["scores"] = m.transform(sub)[:, :K_KPCA]
        ev = m.eigenvalues_
        return {"gamma": gamma, "gap": ev[K_KPCA - 1] / ev[K_KPCA]}

    ctx.measure(
        "KernelPCA exact, 10k rows (reference)",
        name,
        exact_ddr,
        scheduler="threads",
        in_memory=True,
    )

    def errors(ev_per_row: np.ndarray, scores: np.ndarray) -> dict:
        return {
            "ev_rel_err": float(np.max(np.abs(ev_per_row / ref["ev"] - 1))),
            "angle_deg": _col_angle(scores, ref["scores"]),
        }

    def exact_sklearn() -> dict:
        m = SkKernelPCA(K_KPCA, kernel="rbf", gamma=gamma, eigen_solver="dense").fit(sub)
        return errors(m.eigenvalues_ / SUBSET, m.transform(sub))

    ctx.measure(
        "sklearn KernelPCA dense, 10k rows", name, exact_sklearn, scheduler="none", in_memory=True
    )

    for m_ in LANDMARKS:

        def ddr_sub(m_: int = m_) -> dict:
            model = KernelPCA(K_KPCA, kernel="rbf", gamma=gamma, method="nystrom", n_landmarks=m_)
            model.fit(sub)
            return errors(model.eigenvalues_ / SUBSET, model.transform(sub))

        def sk_sub(m_: int = m_) -> dict:
            phi = Nystroem(kernel="rbf", gamma=gamma, n_components=m_, random_state=0)
            feats = phi.fit_transform(sub)
            pca = PCA(K_KPCA).fit(feats)
            n = feats.shape[0]
            return errors(pca.explained_variance_ * (n - 1) / n, pca.transform(feats))

        ctx.measure(
            f"ddr KernelPCA nystrom m={m_}, 10k rows",
            name,
            ddr_sub,
            scheduler="threads",
            in_memory=True,
        )
        ctx.measure(
            f"sklearn Nystroem({m_}) + PCA, 10k rows",
            name,
            sk_sub,
            scheduler="none",
            in_memory=True,
        )

    n_full = X.shape[0]
    for m_ in LANDMARKS:

        def ddr_full(m_: int = m_) -> dict:
            model = KernelPCA(K_KPCA, kernel="rbf", gamma=gamma, method="nystrom", n_landmarks=m_)
            model.fit(ctx.array(name))
            return errors(model.eigenvalues_ / n_full, model.transform(sub))

        ctx.measure(f"ddr KernelPCA nystrom m={m_}", name, ddr_full, scheduler="cluster")
        if m_ > 1000:
            continue  # scikit-learn would hold a 200 000 x 3000 feature matrix and its copies

        def sk_full(m_: int = m_) -> dict:
            phi = Nystroem(kernel="rbf", gamma=gamma, n_components=m_, random_state=0)
            feats = phi.fit_transform(X)
            pca = PCA(K_KPCA).fit(feats)
            n = feats.shape[0]
            return errors(pca.explained_variance_ * (n - 1) / n, pca.transform(phi.transform(sub)))

        ctx.measure(
            f"sklearn Nystroem({m_}) + PCA", name, sk_full, scheduler="none", in_memory=True
        )


# ------------------------------------------------------------------------ PPCA
def _ppca(ctx: Context, name: str) -> None:

    from ddr import PPCA

    truth = ctx.truth(name)["components"][:K]
    cf: dict[str, float] = {}

    def closed_form() -> dict:
        m = PPCA(K, solver="closed_form").fit(ctx.array(name))
        cf.update(ll=float(m.loglik_curve_[0]), s2=m.noise_variance_)
        cf_components.append(m.components_)
        return {"angle_truth_deg": principal_angle_deg(m.components_, truth)}

    cf_components: list[np.ndarray] = []
    ctx.measure("ddr PPCA closed form", name, closed_form, scheduler="cluster")

    for scheduler in ("cluster", "threads"):

        def one_iteration() -> dict:
            # one EM iteration's pass: the E-step sums at a start (the M-step is a small
            # solve on the client); a fit with max_iter=1 adds its start's pass
            from ddr.stats import PPCASums, compute
            from ddr.stats.ppca_sums import PPCAParams

            X = ctx.array(name)
            d = X.shape[1]
            start = PPCAParams(np.random.default_rng(0).standard_normal((d, K)), np.zeros(d), 1.0)
            compute(PPCASums.spec(params=start), X)
            return {}

        ctx.measure(
            "ddr PPCA, one EM iteration",
            name,
            one_iteration,
            scheduler=scheduler,
            paired_floor=scheduler == "cluster",
        )

    def em() -> dict:
        m = PPCA(K, tol=1e-9).fit(ctx.array(name))
        out = {
            "iterations": m.n_iter_,
            "angle_truth_deg": principal_angle_deg(m.components_, truth),
        }
        if cf:
            out.update(
                ll_rel_gap=abs(m.loglik_curve_[-1] / cf["ll"] - 1),
                s2_rel_gap=abs(m.noise_variance_ / cf["s2"] - 1),
                angle_cf_deg=principal_angle_deg(m.components_, cf_components[0]),
            )
        return out

    ctx.measure("ddr PPCA EM (pca start)", name, em, scheduler="cluster")

    def em_random() -> dict:
        m = PPCA(K, init="random", tol=1e-9).fit(ctx.array(name))
        out = {"iterations": m.n_iter_}
        if cf:
            out.update(
                ll_rel_gap=abs(m.loglik_curve_[-1] / cf["ll"] - 1),
                s2_rel_gap=abs(m.noise_variance_ / cf["s2"] - 1),
                angle_cf_deg=principal_angle_deg(m.components_, cf_components[0]),
            )
        return out

    ctx.measure("ddr PPCA EM (random start)", name, em_random, scheduler="cluster")

    if name in ("S", "M"):
        from sklearn.decomposition import PCA

        X = ctx.numpy(name)

        def sklearn_pca() -> dict:
            m = PCA(K).fit(X)
            return {"angle_truth_deg": principal_angle_deg(m.components_, truth)}

        ctx.measure(
            "sklearn PCA (PPCA ML via noise_variance_)",
            name,
            sklearn_pca,
            scheduler="none",
            in_memory=True,
        )


def _mask_block(block: np.ndarray, frac: float, seed: int, block_info=None) -> np.ndarray:
    index = block_info[0]["chunk-location"][0] if block_info else 0
    rng = np.random.default_rng([seed, index])
    out = np.array(block, dtype=np.float32, copy=True)
    out[rng.random(block.shape) < frac] = np.nan
    return out


def _ppca_missing(ctx: Context, name: str) -> None:
    from sklearn.decomposition import PCA

    from ddr import PPCA

    truth = ctx.truth(name)["components"][:K]
    for frac in MISSING:

        def masked(frac: float = frac) -> da.Array:
            X = ctx.array(name)
            return X if frac == 0 else X.map_blocks(_mask_block, frac, 7, dtype=np.float32)

        def em(frac: float = frac) -> dict:
            m = PPCA(K, tol=1e-9).fit(masked(frac))
            return {
                "iterations": m.n_iter_,
                "angle_truth_deg": principal_angle_deg(m.components_, truth),
            }

        pct = round(100 * frac)
        ctx.measure(f"ddr PPCA EM, {pct}% missing", name, em, scheduler="cluster")

        loaded = masked(frac).compute(scheduler="threads")

        def mean_impute_pca(loaded: np.ndarray = loaded) -> dict:
            filled = np.where(np.isnan(loaded), np.nanmean(loaded, axis=0), loaded)
            m = PCA(K).fit(filled)
            return {"angle_truth_deg": principal_angle_deg(m.components_, truth)}

        ctx.measure(
            f"sklearn PCA after mean imputation, {pct}% missing",
            name,
            mean_impute_pca,
            scheduler="none",
            in_memory=True,
        )
