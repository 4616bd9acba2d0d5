"""Cost of one chunk: reading it against computing each statistic on it, one core, one BLAS thread.

``python -m benchmarks.per_block [--dataset S] [--repeat 15]`` reads the first chunk of the
dataset's ``X`` (100 000 x 100 float32 for S, M, L) and times:

- reading and decompressing the chunk through zarr (what every pass pays per chunk), and
  through ddr's reader (:func:`ddr.io.from_zarr`: read and decoded by ddr, no copy);
- ``from_block`` of every statistic a one-pass fit or an iteration is made of;
- GaussianNB and QDA (reg_param=1e-6, fitted on the chunk) predict and predict_proba of the
  chunk as float32 (as stored) and as float64, beside the float64 GEMM each needs (the
  BLAS floor of :mod:`benchmarks.suites.predict`);
- with ``--transforms``, the models of :mod:`benchmarks.suites.transforms` (LDA, PPCA,
  factor analysis, TruncatedSVD, GaussianMixture, KMeans, KernelDensity, Nystroem; fitted
  on the chunk): each method on the chunk beside the BLAS of its products, and Nystroem
  beside scikit-learn's with the same landmarks.

Each time is the best of ``--repeat`` runs: on a shared machine the same read takes 110 or
250 ms from one run to the next, and the best run is the one that measures the code. The
process runs with the environment dask's nanny gives its workers
(``distributed.nanny.pre-spawn-environ``: ``MALLOC_TRIM_THRESHOLD_`` changes how glibc hands
out large buffers, and so what a block costs in a worker).

On a cluster whose cores are all busy decompressing, a statistic's time adds to the read
floor instead of hiding behind it, so ``1 + t_stat / t_read`` is roughly the ratio to the
floor a fit can reach. The table is printed and written to
``benchmarks/results/per_block.md`` (and appended to ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import zarr
from threadpoolctl import threadpool_limits

from benchmarks.harness import DATASETS, machine_description
from ddr.io.zarr_chunks import StoredChunks
from ddr.stats import ClassMoments, Moments
from ddr.stats.ppca_sums import PPCAParams, PPCASums
from ddr.stats.sketch import CentredProduct

HERE = Path(__file__).resolve().parent


def best_ms(*fns: Callable[[], object], repeat: int) -> list[float]:
    """Best wall milliseconds of ``repeat`` calls of each of ``fns``, after one warm-up call
    each; the calls alternate, so a slow spell of the machine hits them alike."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [1e3 * min(ts) for ts in times]


def cases(x: np.ndarray, y: np.ndarray) -> dict[str, Callable[[], object]]:
    """The per-chunk work of each fit, keyed by what uses it."""
    rng = np.random.default_rng(0)
    d = x.shape[1]
    mean = x[:1000].mean(axis=0, dtype=np.float64)
    basis = rng.standard_normal((d, 20))  # k = 10 plus 10 oversamples
    params = PPCAParams(rng.standard_normal((d, 10)), mean, 1.0)
    return {
        "Moments (PCA covariance solver, StandardScaler full)": lambda: Moments.from_block(x),
        "Moments diagonal (StandardScaler)": lambda: Moments.from_block(x, diagonal=True),
        "ClassMoments diagonal (GaussianNB fit)": lambda: ClassMoments.from_block(
            x, y, diagonal=True
        ),
        "ClassMoments full (QDA, LDA fit)": lambda: ClassMoments.from_block(x, y),
        "CentredProduct l = 20, first pass (with the mean and trace)": lambda: (
            CentredProduct.from_block(x, basis=basis)
        ),
        "CentredProduct l = 20 (a later randomized PCA pass)": lambda: CentredProduct.from_block(
            x, basis=basis, center=mean, diagonal=False
        ),
        "PPCASums q = 10 (one PPCA EM iteration)": lambda: PPCASums.from_block(x, params=params),
    }


def predict_cases(x: np.ndarray, y: np.ndarray) -> dict[str, Callable[[], object]]:
    """Per-chunk predictions of the generative classifiers, float32 and float64, and the
    float64 GEMM each needs (what the predict suite's floor adds to the read)."""
    from benchmarks.suites.predict import MODELS, _blas_block, gemm_width

    x64 = x.astype(np.float64)
    out: dict[str, Callable[[], object]] = {}
    for label, make in MODELS.items():
        model = make().fit(x, y)
        M = np.random.default_rng(0).standard_normal((x.shape[1], gemm_width(label, model)))
        out[f"{label} f64 BLAS floor (the chunk cast in tiles)"] = partial(_blas_block, x, M)
        for kind, block in (("float32", x), ("float64", x64)):
            for method in ("predict", "predict_proba"):
                out[f"{label}.{method}, {kind} chunk"] = partial(getattr(model, method), block)
    return out


def transform_cases(x: np.ndarray, y: np.ndarray) -> dict[str, Callable[[], object]]:
    """Per-chunk transforms, predictions and scores of the models of
    :mod:`benchmarks.suites.transforms` (fitted on the chunk), each beside the BLAS of its
    products (that suite's floor); Nystroem also beside scikit-learn's with the same
    landmarks."""
    from sklearn.kernel_approximation import Nystroem

    from benchmarks.suites.transforms import CASES, chain_block, product_matrices

    out: dict[str, Callable[[], object]] = {}
    for case in CASES:
        model = case.fit(x, y)
        block = x if case.columns is None else np.ascontiguousarray(x[:, : case.columns])
        Ms = product_matrices(case, model, x.shape[1])
        kind = np.dtype(case.dtype).name
        out[f"{case.label} {kind} BLAS floor (the chunk cast in tiles)"] = partial(
            chain_block, x, *Ms
        )
        for method in case.methods:
            out[f"{case.label}.{method}, float32 chunk"] = partial(getattr(model, method), block)
        if case.label == "Nystroem":
            sk = Nystroem(
                kernel="rbf", gamma=model.gamma_, n_components=model.n_components, random_state=0
            ).fit(x)
            out["scikit-learn Nystroem.transform, float32 chunk (same landmarks)"] = partial(
                sk.transform, x
            )
    return out


def run_as_in_a_dask_worker(module: str = "benchmarks.per_block") -> None:
    """Re-execute ``python -m module`` (this command) with the environment variables dask's
    nanny sets for workers."""
    import dask
    import distributed  # noqa: F401  (registers the distributed config)

    env = {k: str(v) for k, v in dask.config.get("distributed.nanny.pre-spawn-environ").items()}
    if any(os.environ.get(k) != v for k, v in env.items()):
        argv = [sys.executable, "-m", module, *sys.argv[1:]]
        os.execve(sys.executable, argv, {**os.environ, **env})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.per_block", description=__doc__)
    parser.add_argument("--dataset", default="S", choices=sorted(DATASETS))
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--transforms",
        action="store_true",
        help="also the transforms suite's models (benchmarks.suites.transforms)",
    )
    args = parser.parse_args(argv)
    path = args.data_dir / f"{args.dataset}.zarr"
    if not path.exists():
        parser.error(f"{path} does not exist: run `python -m benchmarks --datasets S` first")
    group = zarr.open_group(path, mode="r")
    X = group["X"]
    rows = X.chunks[0]
    x, y = X[:rows], group["y"][:rows]
    first = (slice(0, rows), slice(0, X.shape[1]))
    with threadpool_limits(limits=1, user_api="blas"):
        read, direct = best_ms(lambda: X[:rows], lambda: StoredChunks(X)[first], repeat=args.repeat)
        lines = [
            f"| read + decompress one chunk (zarr) | {read:.1f} | |",
            f"| read + decompress one chunk (ddr reader) | {direct:.1f} | x{direct / read:.2f} |",
            *(
                f"| {name} | {ms:.1f} | x{1 + ms / read:.2f} |"
                for name, fn in (
                    cases(x, y)
                    | predict_cases(x, y)
                    | (transform_cases(x, y) if args.transforms else {})
                ).items()
                for ms in best_ms(fn, repeat=args.repeat)
            ),
        ]
    doc = "\n".join(
        [
            "## per block",
            "",
            (__doc__ or "").strip().splitlines()[0],
            "",
            f"Chunk: {rows} x {X.shape[1]} {X.dtype} of {args.dataset}. "
            f"Machine: {machine_description()}",
            "",
            "| work per chunk | ms | 1 + stat / read |",
            "|---|---|---|",
            *lines,
            "",
        ]
    )
    print(doc)
    if not args.no_write:
        (HERE / "results" / "per_block.md").write_text(doc)
        from benchmarks.__main__ import write_results

        write_results(machine_description())
    return 0


if __name__ == "__main__":
    run_as_in_a_dask_worker()
    raise SystemExit(main())
