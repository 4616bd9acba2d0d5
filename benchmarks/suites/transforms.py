"""Transforms, predictions and scores of the other estimators against their floors (issue 29):
LDA, PPCA, factor analysis, TruncatedSVD, GaussianMixture, KMeans, KernelDensity and Nystroem,
each method on the cluster summed (and the main output of each model written to Zarr),
paired with the floor it cannot beat, re-measured before every run (median of 3):

- read + BLAS: dask's read pass over ``X`` plus the BLAS of the model's products on every
  row: the block cast in tiles of rows to the dtype the estimator computes in and multiplied
  by matrices of the model's shapes (float64: LDA (d, k) or (d, k - 1); PPCA and factor
  analysis (d, q) then (q, q); TruncatedSVD (d, k); GaussianMixture "full" (d, d k), one
  d x d whitening per component, "diag" (d, 2 k); KMeans (d, k); exact KernelDensity (d,
  n_train); float32 for Nystroem's rbf map of float32 rows: (d, m) then (m, m));
- read + BLAS + write: that, then dask's ``to_zarr`` of the same output (computed beforehand
  and held by the workers) with ddr's codecs and chunks (the write floor rows show it).

Models are fitted beforehand (untimed) on the first 200 000 rows in memory
(``--transform-fit-rows``): what a prediction costs does not depend on how its model was
fitted. KernelDensity is measured where it is sensible at scale: binned on the first two
columns (fitted on every row; the floor is the read: a binned query is a few lattice
lookups), and exact on 1 000 training rows of all columns (twice the columns where that is
more, for a covariance of full rank; the floor adds their float64 GEMM). Nystroem (rbf,
m = 1000, gamma the median heuristic) is also measured against scikit-learn's
``Nystroem.transform`` of the same landmarks, on the cluster (``map_blocks``, summed, paired
with the same floor) and on one chunk in memory (one BLAS thread each, interleaved, best of
3: ``sk/ddr`` is scikit-learn's time over ddr's; the target is 2). Target of every other ddr
row: within 1.3x of its floor.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

import ddr
from benchmarks.harness import Context, fresh_path
from benchmarks.suites.predict import tile_rows
from ddr.io import write_zarr

#: Nystroem's landmarks, and the exact KernelDensity's training rows
LANDMARKS, KDE_TRAIN = 1000, 1000


def kde_train_rows(n_features: int) -> int:
    """The exact KernelDensity's training rows: :data:`KDE_TRAIN`, or twice the features
    where that is more (its whitening needs a covariance of full rank: W has 2 000)."""
    return max(KDE_TRAIN, 2 * n_features)


@dataclasses.dataclass(frozen=True)
class Case:
    """One model: how it is fitted, the methods timed, the shapes of its products."""

    label: str
    fit: Callable[[np.ndarray, np.ndarray], Any]
    methods: tuple[str, ...]
    products: Callable[[Any, int], list[int]]  # widths of the chained products of a row
    write: str | None = None  # the method whose output is also written
    dtype: Any = np.float64  # what the estimator computes in (for float32 rows)
    columns: int | None = None  # the first columns only (binned KernelDensity)


def _median_gamma(X: np.ndarray) -> float:
    pairs = np.random.default_rng(0).integers(0, X.shape[0], size=(2000, 2))
    diff = X[pairs[:, 0]].astype(np.float64) - X[pairs[:, 1]]
    return 1.0 / float(np.median((diff**2).sum(axis=1)))


CASES = [
    Case(
        "LDA",
        lambda X, y: ddr.LinearDiscriminantAnalysis().fit(X, y),
        ("transform", "predict", "predict_proba"),
        lambda m, d: [len(m.classes_)],
        write="transform",
    ),
    Case(
        "PPCA",
        lambda X, y: ddr.PPCA(10).fit(X),
        ("transform", "score_samples"),
        lambda m, d: [10, 10],
        write="transform",
    ),
    Case(
        "FactorAnalysis",
        lambda X, y: ddr.FactorAnalysis(10).fit(X),
        ("transform", "score_samples"),
        lambda m, d: [10, 10],
        write="transform",
    ),
    Case(
        "TruncatedSVD",
        lambda X, y: ddr.TruncatedSVD(10).fit(X),
        ("transform",),
        lambda m, d: [10],
        write="transform",
    ),
    Case(
        "GaussianMixture full",
        lambda X, y: ddr.GaussianMixture(5, max_iter=20, random_state=0).fit(X),
        ("predict", "predict_proba", "score_samples"),
        lambda m, d: [d * 5],
        write="predict_proba",
    ),
    Case(
        "GaussianMixture diag",
        lambda X, y: ddr.GaussianMixture(
            5, covariance_type="diag", max_iter=20, random_state=0
        ).fit(X),
        ("predict_proba", "score_samples"),
        lambda m, d: [10],
    ),
    Case(
        "KMeans",
        lambda X, y: ddr.KMeans(8, max_iter=20, random_state=0).fit(X),
        ("predict", "transform"),
        lambda m, d: [8],
        write="predict",
    ),
    Case(
        "KernelDensity binned 2-D",
        lambda X, y: ddr.KernelDensity(algorithm="binned").fit(X[:, :2]),
        ("score_samples",),
        lambda m, d: [],
        write="score_samples",
        columns=2,
    ),
    Case(
        "KernelDensity exact",
        lambda X, y: ddr.KernelDensity(algorithm="exact").fit(X[: kde_train_rows(X.shape[1])]),
        ("score_samples",),
        lambda m, d: [kde_train_rows(d)],
    ),
    Case(
        "Nystroem",
        lambda X, y: ddr.Nystroem(
            "rbf", gamma=_median_gamma(X), n_components=LANDMARKS, random_state=0
        ).fit(X),
        ("transform",),
        lambda m, d: [LANDMARKS, LANDMARKS],
        dtype=np.float32,
    ),
]


def run(ctx: Context) -> None:
    with ctx.scratch() as folder:
        for name in ctx.datasets:
            z = ctx.zarr_array(name)
            rows = ctx.transform_fit_rows
            X, y = z[:rows], ctx.zarr_array(name, "y")[:rows]
            chosen = [c for c in CASES if not ctx.transform_cases or c.label in ctx.transform_cases]
            unknown = set(ctx.transform_cases) - {c.label for c in CASES}
            if unknown:
                raise ValueError(f"--transform-cases: unknown {sorted(unknown)}")
            for case in chosen:
                with warnings.catch_warnings():  # a model's convergence is not measured here
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    model = case.fit(X, y)
                _case_rows(ctx, name, case, model, folder)
                if case.label == "Nystroem":
                    _sklearn_nystroem(ctx, name, model, X)


# ------------------------------------------------------------------------------ floors
def chain_block(block: np.ndarray, *Ms: np.ndarray) -> np.ndarray:
    """The BLAS of a model's products on a block, tile by tile: each tile cast to the
    matrices' dtype and multiplied by them in turn (no n-sized temporary), reduced to 1 x 1.
    """
    n, d = block.shape
    dt = Ms[0].dtype if Ms else np.float64
    step = tile_rows(d)
    outs = [np.empty((min(step, n), M.shape[1]), dtype=dt) for M in Ms]
    total = 0.0
    for start in range(0, n, step):
        tile = block[start : start + step].astype(dt)
        for M, out in zip(Ms, outs, strict=True):
            tile = np.matmul(tile, M, out=out[: tile.shape[0]])
        total += float(tile[0, 0])
    return np.full((1, 1), total)


def _read_blas(ctx: Context, name: str, Ms: list[Any]) -> dict:
    X = ctx.dask_array(name)
    parts = X.map_blocks(chain_block, *Ms, chunks=((1,) * X.numblocks[0], (1,)), dtype=float)
    parts.sum().compute()
    return {}


def product_matrices(case: Case, model: Any, d: int) -> list[np.ndarray]:
    """Random matrices of the shapes of the model's chained products."""
    rng = np.random.default_rng(0)
    shapes, rows = [], d
    for width in case.products(model, d):
        shapes.append((rows, width))
        rows = width
    return [rng.standard_normal(s).astype(case.dtype) for s in shapes]


# -------------------------------------------------------------------------------- rows
def _input(ctx: Context, name: str, case: Case) -> da.Array:
    X = ctx.array(name)
    return X if case.columns is None else X[:, : case.columns]


def _case_rows(ctx: Context, name: str, case: Case, model: Any, folder: Path) -> None:
    d = ctx.zarr_array(name).shape[1]
    Ms = [dask.delayed(M, pure=True) for M in product_matrices(case, model, d)]

    def read_blas() -> float:
        return ctx.time_on_cluster(lambda: _read_blas(ctx, name, Ms))

    held = None
    if case.write is not None:
        with dask.config.set(scheduler=ctx.client()):
            held = ctx.hold(getattr(model, case.write)(_input(ctx, name, case)))
        ctx.measure_write_floor(
            f"write floor, dask to_zarr of {case.label} {case.write}", name, held, folder
        )
    for method in case.methods:
        ctx.measure(
            f"ddr {case.label} {method}, summed (x read + BLAS)",
            name,
            lambda m=method: {"sum": float(getattr(model, m)(_input(ctx, name, case)).sum())},
            scheduler="cluster",
            paired_floor=True,
            floor=read_blas,
        )
    if held is not None:
        out = held

        def read_blas_write() -> float:
            return read_blas() + ctx.time_write_floor(out, folder)

        written = str(case.write)
        ctx.measure(
            f"ddr {case.label} {written} -> Zarr (x read + BLAS + write)",
            name,
            lambda: _written(getattr(model, written)(_input(ctx, name, case)), folder, case.label),
            scheduler="cluster",
            paired_floor=True,
            floor=read_blas_write,
        )


def _written(out: Any, folder: Path, stem: str) -> dict:
    dims = ("sample",) if out.ndim == 1 else ("sample", "column")
    write_zarr(out, fresh_path(folder, stem.replace(" ", "-")), name="out", dims=dims)
    return {}


# ---------------------------------------------------------------- scikit-learn's Nystroem
def _sklearn_nystroem(ctx: Context, name: str, model: Any, X: np.ndarray) -> None:
    """scikit-learn's Nystroem with the same landmarks (same seed), per block on the
    cluster beside ddr's, and on one chunk in memory."""
    from sklearn.kernel_approximation import Nystroem

    sk = Nystroem(kernel="rbf", gamma=model.gamma_, n_components=LANDMARKS, random_state=0).fit(X)
    assert np.array_equal(sk.component_indices_, model.component_indices_)
    case = next(c for c in CASES if c.label == "Nystroem")
    d = X.shape[1]
    Ms = [dask.delayed(M, pure=True) for M in product_matrices(case, model, d)]
    sk_key = dask.delayed(sk, pure=True)

    def sk_sum() -> dict:
        Xd = ctx.dask_array(name)
        F = Xd.map_blocks(
            _sk_block,
            sk_key,
            chunks=(Xd.chunks[0], (LANDMARKS,)),
            dtype=np.float32,
            meta=np.empty((0, 0), dtype=np.float32),
        )
        return {"sum": float(F.sum().compute())}

    ctx.measure(
        "sklearn Nystroem transform per block, summed (x read + BLAS)",
        name,
        sk_sum,
        scheduler="cluster",
        paired_floor=True,
        floor=lambda: ctx.time_on_cluster(lambda: _read_blas(ctx, name, Ms)),
    )
    chunk = X[: ctx.zarr_array(name).chunks[0]]
    ref = model.transform(chunk.astype(np.float64))
    times: dict[str, list[float]] = {"ddr": [], "sk": []}
    with threadpool_limits(1):
        for _ in range(3):
            for key, fn in (("ddr", model.transform), ("sk", sk.transform)):
                start = time.perf_counter()
                F = fn(chunk)
                times[key].append(time.perf_counter() - start)
                err = float(np.abs(F - ref).max())
                times.setdefault(f"{key}_err", []).append(err)
    best = {k: min(v) for k, v in times.items()}
    ctx.rows.append(_row(ctx, name, "Nystroem transform of one chunk in memory, one thread", best))


def _sk_block(block: np.ndarray, sk: Any) -> np.ndarray:
    return sk.transform(block)


def _row(ctx: Context, name: str, method: str, best: dict[str, float]) -> Any:
    from benchmarks.harness import Row

    metrics = {
        "ddr_s": best["ddr"],
        "sk_s": best["sk"],
        "sk/ddr": best["sk"] / best["ddr"],
        "ddr_err": best["ddr_err"],
        "sk_err": best["sk_err"],
    }
    print(f"[{ctx.suite}] {name} {method}: {metrics}", flush=True)
    return Row(ctx.suite, f"{method} (1proc)", name, best["ddr"], 0.0, None, metrics)
