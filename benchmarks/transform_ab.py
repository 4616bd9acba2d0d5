"""Transforms of one chunk before and after issue 29's changes, interleaved, one core.

``python -m benchmarks.transform_ab --before REV [--dataset M] [--repeat 7]`` loads the
blockwise functions of LDA, PPCA and factor analysis, TruncatedSVD, KMeans and the exact
KernelDensity as they were at ``REV`` (``git show``) beside the installed ones, fits each
model on the first chunk of the dataset's ``X`` (``y`` for LDA) and times both versions'
blockwise maps of that chunk (as stored, float32), with the BLAS floor each needs
(:func:`benchmarks.suites.transforms.chain_block`). Nystroem's (rbf, m = 1000, gamma the
median heuristic) "before" is :func:`ddr.linalg.nystrom.kernel_scores` (the map of
:class:`~ddr.KernelPCA`, which ``Nystroem.transform`` ran before), beside scikit-learn's
``Nystroem.transform`` with the same landmarks; its accuracy columns are the largest
difference from the float64 features of the same rows. The calls alternate and each time
is the best of ``--repeat`` runs; both versions are checked to agree before timing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from threadpoolctl import threadpool_limits

import ddr
from benchmarks.per_block import best_ms, run_as_in_a_dask_worker
from benchmarks.predict_ab import load_at
from benchmarks.suites.transforms import CASES, chain_block, kde_train_rows, product_matrices

HERE = Path(__file__).resolve().parent
MODULES = {
    "lda": "ddr/discriminant_analysis/lda.py",
    "latent": "ddr/decomposition/_latent_blocks.py",
    "svd": "ddr/decomposition/truncated_svd.py",
    "kmeans": "ddr/clustering/kmeans.py",
    "kernels": "ddr/density/_kernels.py",
}


def _pairs(x: np.ndarray, y: np.ndarray, old: dict[str, Any]) -> dict[str, tuple]:
    """``label: (before, after, floor matrices)`` of each blockwise map."""
    import ddr.clustering.kmeans as kmeans
    import ddr.decomposition._latent_blocks as latent
    import ddr.decomposition.truncated_svd as svd
    import ddr.density._kernels as kernels
    import ddr.discriminant_analysis.lda as lda_mod

    case = {c.label: c for c in CASES}
    d = x.shape[1]
    out: dict[str, tuple] = {}
    lda = ddr.LinearDiscriminantAnalysis().fit(x, y)
    Ms = product_matrices(case["LDA"], lda, d)
    scores = lda._scores_
    out["LDA scores (predict)"] = (
        partial(old["lda"].lda_scores, x, *scores),
        partial(lda_mod.lda_scores, x, *scores),
        Ms,
    )
    proj = (lda.xbar_, lda.scalings_[:, : lda._max_components])
    out["LDA transform"] = (
        partial(old["lda"].lda_transform, x, *proj),
        partial(lda_mod.lda_transform, x, *proj),
        Ms,
    )
    for label, make in (("PPCA", ddr.PPCA), ("FactorAnalysis", ddr.FactorAnalysis)):
        model = make(10).fit(x)
        args = model._args()
        Ms = product_matrices(case[label], model, d)
        for fn in ("transform_block", "score_block"):
            before = partial(getattr(old["latent"], fn), x, *args)
            out[f"{label} {fn}"] = (before, partial(getattr(latent, fn), x, *args), Ms)
    tsvd = ddr.TruncatedSVD(10).fit(x)
    ct = np.ascontiguousarray(tsvd.components_.T)
    out["TruncatedSVD transform"] = (
        partial(old["svd"]._project_block, x, ct, np.float32),
        partial(svd._project_block, x, ct, np.float32),
        product_matrices(case["TruncatedSVD"], tsvd, d),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km = ddr.KMeans(8, max_iter=20, random_state=0).fit(x)
    c = km.cluster_centers_
    Ms = product_matrices(case["KMeans"], km, d)
    for fn in ("_labels_block", "_transform_block"):
        out[f"KMeans {fn}"] = (
            partial(getattr(old["kmeans"], fn), x, c),
            partial(getattr(kmeans, fn), x, c),
            Ms,
        )
    n_train = kde_train_rows(d)
    kde = ddr.KernelDensity(algorithm="exact").fit(x[:n_train])
    W, centre, h = kde._whitening_, kde._center_, kde.bandwidth_
    Q, T = (x - centre) @ W.T, (x[:n_train] - centre) @ W.T
    out[f"KernelDensity exact log-sums ({n_train:,} points)".replace(",", " ")] = (
        partial(old["kernels"].log_kernel_sums, Q, T, None, "gaussian", h),
        partial(kernels.log_kernel_sums, Q, T, None, "gaussian", h),
        product_matrices(case["KernelDensity exact"], kde, d),
    )
    return out


def _nystroem(x: np.ndarray) -> tuple[dict[str, Callable[[], object]], dict[str, float]]:
    from sklearn.kernel_approximation import Nystroem

    from ddr.linalg.nystrom import kernel_scores

    case = next(c for c in CASES if c.label == "Nystroem")
    model = case.fit(x, None)
    sk = Nystroem(kernel="rbf", gamma=model.gamma_, n_components=1000, random_state=0).fit(x)
    spec = model._kernel(x.shape[1], model.gamma_)
    before = partial(kernel_scores, x, model.components_, model.normalization_.T, None, spec)
    ref = model.transform(x.astype(np.float64))
    errors = {
        "before": float(np.abs(before() - ref).max()),
        "after": float(np.abs(model.transform(x) - ref).max()),
        "scikit-learn": float(np.abs(sk.transform(x) - ref).max()),
        "largest feature": float(np.abs(ref).max()),
    }
    cases = {
        "Nystroem float32 BLAS floor": partial(
            chain_block, x, *product_matrices(case, model, x.shape[1])
        ),
        "Nystroem.transform, before": before,
        "Nystroem.transform, after": partial(model.transform, x),
        "scikit-learn Nystroem.transform": partial(sk.transform, x),
    }
    return cases, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.transform_ab", description=__doc__)
    parser.add_argument("--before", required=True, help="git revision of the old functions")
    parser.add_argument("--dataset", default="M")
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rows", type=int, default=None, help="rows of the chunk (default all)")
    args = parser.parse_args(argv)
    group = zarr.open_group(args.data_dir / f"{args.dataset}.zarr", mode="r")
    X = group["X"]
    rows = args.rows or X.chunks[0]
    x, y = X[:rows], group["y"][:rows]
    with tempfile.TemporaryDirectory() as tmp:
        old = {k: load_at(args.before, f"before_{k}", p, Path(tmp)) for k, p in MODULES.items()}
    cases: dict[str, Callable[[], object]] = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for label, (before, after, Ms) in _pairs(x, y, old).items():
            a, b = np.asarray(before()), np.asarray(after())
            np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-8 * max(1.0, np.abs(a).max()))
            cases[f"{label}, BLAS floor"] = partial(chain_block, x, *Ms)
            cases[f"{label}, before"] = before
            cases[f"{label}, after"] = after
        ny_cases, errors = _nystroem(x)
        cases.update(ny_cases)
        (read,) = best_ms(lambda: X[:rows], repeat=args.repeat)
        times = best_ms(*cases.values(), repeat=args.repeat)
    print(f"Chunk: {rows} x {X.shape[1]} {X.dtype} of {args.dataset}; before = {args.before}\n")
    print("| work per chunk, one core | ms |\n|---|---|")
    print(f"| read + decompress one chunk (zarr) | {read:.1f} |")
    for name, ms in zip(cases, times, strict=True):
        print(f"| {name} | {ms:.1f} |")
    print(
        "\nNystroem features, largest difference from float64: "
        + ", ".join(f"{k} {v:.2g}" for k, v in errors.items())
    )
    return 0


if __name__ == "__main__":
    run_as_in_a_dask_worker("benchmarks.transform_ab")
    sys.exit(main())
