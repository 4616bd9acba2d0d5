"""The two sparse products of a TruncatedSVD pass, block by block, against scipy's alternatives:
``python -m benchmarks.sparse_products N_DOCUMENTS [--block I] [--rounds R]``.

One row block of the counts corpus ``/tmp/counts-N.zarr`` (written by
``benchmarks.sparse_at_scale`` or here: N documents x 20 000 words, about 100 tokens a
document, float32 counts; ``ddr.io.open_csr``'s blocks of about 8 Mi stored values), on one
core of this process (one BLAS thread), best of ``--rounds`` runs with every variant run once
per round (interleaved, so that a change of the machine's load hits all of them alike). The
process re-executes itself with the environment dask's nanny gives its workers
(``MALLOC_TRIM_THRESHOLD_``: every fresh array over 128 KiB faults its pages in), as
``benchmarks.per_block`` does.
Each row gives wall and CPU seconds (``time.process_time``, zarr's decoding threads
included: what a loaded machine changes least), the product's largest error against
float64's (relative to its largest entry) and its CPU seconds over the block's read floor.
Rows:

- read floor: the stored chunks of ``data`` and ``indices`` that hold the block's values,
  read and decoded through zarr and summed (what dask's floor does for them);
- ddr reader: the block read and assembled as CSR by ``ddr.io.open_csr``'s task (with the
  tasks of the chunks it shares with its neighbours);
- ``X^T (X V)`` for a 20 000 x 20 basis (k = 10 + 10 oversamples): float64 values with
  scipy's ``csr.T @ U`` (a scatter into the (d, l) result; what ddr did before issue 29),
  ``(U^T X)^T``, a CSC copy of the block (``X^T`` as CSR: a gather), float32 values
  (float32 basis and products) over the whole block and in runs of rows summed in float64
  (scipy's public products: a fresh result per run), and ``ddr.stats._sparse.gram_product``
  (what ddr does now: the same runs through scipy's kernels into reused buffers);
- the first pass's column moments: ``np.bincount`` sums (before) and
  ``ddr.stats._sparse.column_moments`` (scikit-learn's compiled ``mean_variance_axis``);
- block size: ``gram_product`` (float32) and the float64 products on the block's first
  1/8, 1/4, 1/2 and all rows, in CPU seconds per million stored values.

Prints a markdown table (``benchmarks/results/sparse-at-scale.md`` keeps the runs).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import dask
import numpy as np
import scipy.sparse
import zarr
from threadpoolctl import threadpool_limits

import ddr
from benchmarks.per_block import run_as_in_a_dask_worker
from ddr.demo_counts import CountsSpec, write_counts_data
from ddr.stats import _sparse

L = 20  # basis width: k = 10 and 10 oversamples, TruncatedSVD's default for k = 10


def bincount_moments(X: scipy.sparse.csr_matrix) -> tuple[float, np.ndarray, np.ndarray]:
    """The column moments as ddr computed them before issue 29 (numpy bincount sums)."""
    n, d = X.shape
    data = np.asarray(X.data, dtype=np.float64)
    stored = np.bincount(X.indices, minlength=d).astype(np.float64)
    mean = np.bincount(X.indices, weights=data, minlength=d) / n
    dev = data - mean[X.indices]
    zeros = n - stored
    resid = (np.bincount(X.indices, weights=dev, minlength=d) - zeros * mean) / n
    sq = np.bincount(X.indices, weights=dev * dev, minlength=d) + zeros * mean * mean
    return float(n), mean + resid, np.maximum(sq - n * resid * resid, 0.0)


def csr64(X: scipy.sparse.csr_matrix) -> scipy.sparse.csr_matrix:
    return scipy.sparse.csr_matrix((X.data.astype(np.float64), X.indices, X.indptr), X.shape)


def runs32(X: scipy.sparse.csr_matrix, V: np.ndarray, rows: int) -> np.ndarray:
    """float32 products, ``X^T U`` over runs of ``rows`` rows summed in float64."""
    U = X @ V.astype(np.float32)
    out = np.zeros(V.shape)
    for start in range(0, X.shape[0], rows):
        stop = min(start + rows, X.shape[0])
        lo, hi = X.indptr[start], X.indptr[stop]
        run = scipy.sparse.csr_matrix(
            (X.data[lo:hi], X.indices[lo:hi], X.indptr[start : stop + 1] - lo),
            shape=(stop - start, X.shape[1]),
        )
        out += run.T @ U[start:stop]
    return out


def product_variants(X: scipy.sparse.csr_matrix, V: np.ndarray) -> dict[str, Callable[[], Any]]:
    def f64_scatter() -> np.ndarray:
        Y = csr64(X)
        return np.asarray(Y.T @ (Y @ V))

    def f64_rmatmul() -> np.ndarray:
        Y = csr64(X)
        return np.asarray(((Y @ V).T @ Y).T)

    def f64_csc_copy() -> np.ndarray:
        Y = csr64(X)
        return np.asarray(Y.tocsc().T @ (Y @ V))

    def f32_whole() -> np.ndarray:
        return np.asarray(X.T @ (X @ V.astype(np.float32)), dtype=np.float64)

    return {
        "float64 values, csr.T @ U (before)": f64_scatter,
        "float64 values, (U^T X)^T": f64_rmatmul,
        "float64 values, CSC copy of the block": f64_csc_copy,
        "float32 values, whole block in float32": f32_whole,
        "float32 values, runs of 512 rows": lambda: runs32(X, V, 512),
        "float32 values, runs of 2048 rows": lambda: runs32(X, V, 2048),
        "float32 values, runs of 8192 rows": lambda: runs32(X, V, 8192),
        f"gram_product: float32, runs of {_sparse.F32_TERMS} rows (now)": lambda: (
            _sparse.gram_product(X, V, None)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n_documents", type=int)
    parser.add_argument("--block", type=int, default=3, help="which row block")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    run_as_in_a_dask_worker("benchmarks.sparse_products")
    path = f"/tmp/counts-{args.n_documents}.zarr"
    spec = CountsSpec(
        n_samples=args.n_documents, n_features=20_000, n_topics=20, doc_length=100.0,
        chunk_rows=50_000, seed=21,
    )  # fmt: skip
    with dask.config.set(scheduler="threads"):
        write_counts_data(path, spec, if_exists="skip-if-complete")
    X = ddr.io.open_csr(path, "X")
    i = min(args.block, len(X.chunks[0]) - 1)
    group = zarr.open_group(path, mode="r")["X"]
    first = sum(X.chunks[0][:i])
    lo, hi = (int(v) for v in group["indptr"][first : first + X.chunks[0][i] + 1][[0, -1]])

    def read_floor() -> float:
        return float(group["data"][lo:hi].sum()) + float(group["indices"][lo:hi].sum())

    graph = X.__dask_graph__()

    def read_block() -> Any:  # the block's task and the shared chunks' (no dask finalize copy)
        return dask.get(graph, (X.name, i, 0))

    block = read_block()
    V = np.linalg.qr(np.random.default_rng(0).standard_normal((block.shape[1], L)))[0]
    exact = np.asarray(csr64(block).T @ (csr64(block) @ V))
    variants: dict[str, Callable[[], Any]] = {"read floor (zarr decode + sum)": read_floor}
    variants["ddr reader: the block as CSR"] = read_block
    variants.update(product_variants(block, V))
    variants["column moments, np.bincount (before)"] = lambda: bincount_moments(block)
    variants["column moments, column_moments (now)"] = lambda: _sparse.column_moments(block)
    sizes = {}
    for part in (8, 4, 2, 1):
        rows = block[: block.shape[0] // part]
        sizes[f"block size: {rows.shape[0]} rows, float32 (now)"] = rows.nnz
        variants[f"block size: {rows.shape[0]} rows, float32 (now)"] = lambda rows=rows: (
            _sparse.gram_product(rows, V, None)
        )
        sizes[f"block size: {rows.shape[0]} rows, float64 (before)"] = rows.nnz
        variants[f"block size: {rows.shape[0]} rows, float64 (before)"] = lambda rows=rows: (
            np.asarray(csr64(rows).T @ (csr64(rows) @ V))
        )
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    errors: dict[str, float] = {}
    with threadpool_limits(1):
        for _ in range(args.rounds):
            for name, fn in variants.items():
                t0, c0 = time.perf_counter(), time.process_time()
                out = fn()
                cpu[name].append(time.process_time() - c0)
                wall[name].append(time.perf_counter() - t0)
                if isinstance(out, np.ndarray) and out.shape == exact.shape:
                    errors[name] = float(np.abs(out - exact).max() / np.abs(exact).max())
    floor_cpu = min(cpu["read floor (zarr decode + sum)"])
    print(
        f"block {i} of {len(X.chunks[0])}: {block.shape[0]} documents x {block.shape[1]} words, "
        f"{block.nnz} stored values, basis width {L}; best of {args.rounds} rounds, one core\n"
    )
    print("| step | wall s | CPU s | x read floor (CPU) | largest error |")
    print("|---|---|---|---|---|")
    for name in variants:
        if name in sizes:
            continue
        err = f"{errors[name]:.1e}" if name in errors else ""
        print(
            f"| {name} | {min(wall[name]):.3f} | {min(cpu[name]):.3f} | "
            f"{min(cpu[name]) / floor_cpu:.2f} | {err} |"
        )
    print("\n| block size | stored values | CPU s | CPU s per million stored values |")
    print("|---|---|---|---|")
    for name, nnz in sizes.items():
        print(f"| {name[12:]} | {nnz} | {min(cpu[name]):.3f} | {min(cpu[name]) / nnz * 1e6:.4f} |")


if __name__ == "__main__":
    main()
