"""The sparse suite's measurements at the issue's size, on a machine with many cores:
``python -m benchmarks.sparse_at_scale N_DOCUMENTS N_WORKERS`` (e.g. 1000000 16).

A counts corpus of N documents x 20 000 words (``ddr demo-data --kind counts`` in-process,
about 100 tokens a document), then on a LocalCluster of N_WORKERS single-thread workers: the
CSR read floor (dask's sum of ``data``, ``indices``, ``indptr``), ddr's CSR reader pass and
TruncatedSVD (k=10, n_iter=5: 6 passes), each round in that order (``--rounds``, default 2),
PLSA (3 EM iterations, one pass each) beside a floor run, PLSA's folding-in of 10 000
documents per worker, and scikit-learn's in-memory randomized TruncatedSVD (one process).
Each round also gives the workers' CPU seconds (``psutil``) of the reader's pass and of a
TruncatedSVD pass over those of the floor. ``--svd-only`` stops after the rounds (the
TruncatedSVD rows alone). ``--chunk-rows`` sets the reader's rows per block (default:
``ddr.io.open_csr``'s, about 8 Mi stored values a block).
Prints one line per measurement (``benchmarks/results/sparse-at-scale.md`` keeps the runs)."""

import argparse
import os
import time
import warnings
from typing import Any

import dask
import dask.array as da
import numpy as np
import psutil
import zarr
from distributed import Client, LocalCluster
from sklearn.exceptions import ConvergenceWarning

import ddr
from ddr.demo_counts import CountsSpec, write_counts_data

PLSA_ITER = 3


def _cpu(procs: list[psutil.Process]) -> float:
    """User and system CPU seconds of ``procs`` so far."""
    return sum(sum(p.cpu_times()[:2]) for p in procs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n_documents", type=int)
    parser.add_argument("n_workers", type=int)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--svd-only", action="store_true")
    parser.add_argument("--chunk-rows", type=int, default=None)
    args = parser.parse_args()
    n, workers = args.n_documents, args.n_workers
    path = f"/tmp/counts-{n}.zarr"
    spec = CountsSpec(
        n_samples=n, n_features=20_000, n_topics=20, doc_length=100.0, chunk_rows=50_000, seed=21
    )
    t = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        write_counts_data(path, spec, if_exists="skip-if-complete")
    g = zarr.open_group(path, mode="r")["X"]
    print(
        f"data {n} x 20000, nnz {g['data'].shape[0]}, written in {time.perf_counter() - t:.0f} s",
        flush=True,
    )
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, memory_limit="7GiB", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        arrays = [da.from_zarr(g[k]) for k in ("data", "indices", "indptr")]
        X = ddr.io.open_csr(path, "X", chunk_rows=args.chunk_rows)

        # the workers' CPU seconds beside the wall clock: on a loaded machine the wall clock
        # of one run moves 2-3x between rounds, the CPU a pass costs much less
        procs = [psutil.Process(pid) for pid in client.run(os.getpid).values()]

        def timed(fn: Any) -> tuple[float, float]:
            c0, t0 = _cpu(procs), time.perf_counter()
            fn()
            return time.perf_counter() - t0, _cpu(procs) - c0

        def floor() -> float:
            return timed(lambda: dask.compute(*[a.sum() for a in arrays]))[0]

        count = X.map_blocks(
            lambda b: np.array([[b.nnz]]),
            chunks=((1,) * len(X.chunks[0]), (1,)),
            dtype=np.int64,
            meta=np.empty((0, 0), np.int64),
        ).sum()
        floor()
        print(f"{len(X.chunks[0])} row blocks of {X.chunks[0][0]} documents", flush=True)
        for _ in range(args.rounds):
            f, fc = timed(lambda: dask.compute(*[a.sum() for a in arrays]))
            r, rc = timed(count.compute)
            svd = ddr.TruncatedSVD(10, n_iter=5, random_state=0)
            s, sc = timed(lambda est=svd: est.fit(X))
            print(
                f"{workers} workers: floor {f:.2f} s; ddr CSR reader pass {r:.2f} s (x{r / f:.2f});"
                f" TruncatedSVD n_iter=5 {s:.2f} s, {s / 6:.2f} s a pass (x{s / 6 / f:.2f} of the"
                f" floor). Workers' CPU: floor {fc:.2f} s, reader x{rc / fc:.2f}, TruncatedSVD"
                f" {sc / 6:.2f} s a pass (x{sc / 6 / fc:.2f})",
                flush=True,
            )
        if args.svd_only:
            return
        f = floor()
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # 3 iterations on purpose
            warnings.simplefilter("ignore", ConvergenceWarning)
            # a random start: the passes are the iterations (the default start adds an SVD)
            plsa = ddr.PLSA(10, init="random", max_iter=PLSA_ITER, tol=0.0, random_state=0).fit(X)
        p = time.perf_counter() - t0
        print(
            f"PLSA k=10, max_iter={PLSA_ITER} ({PLSA_ITER} passes): {p:.2f} s, "
            f"{p / PLSA_ITER:.2f} s a pass (x{p / PLSA_ITER / f:.2f} of the floor, {f:.2f} s)",
            flush=True,
        )
        m = 10_000 * workers  # a block of 10 000 documents per worker
        t0 = time.perf_counter()
        plsa.transform(ddr.io.open_csr(path, "X", chunk_rows=10_000)[:m]).compute()
        print(
            f"PLSA transform (folding-in) of the first {m} documents, {workers} blocks: "
            f"{time.perf_counter() - t0:.2f} s",
            flush=True,
        )
    M = ddr.io.open_csr(path, "X").compute(scheduler="threads")
    from sklearn.decomposition import TruncatedSVD

    t0 = time.perf_counter()
    est = TruncatedSVD(10, random_state=0).fit(M)
    sk = time.perf_counter() - t0
    err = np.max(np.abs(est.singular_values_ - svd.singular_values_) / svd.singular_values_)
    print(
        f"scikit-learn TruncatedSVD randomized in memory (1 process): {sk:.2f} s; largest relative"
        f" difference of singular values to ddr's {err:.1e}",
        flush=True,
    )


if __name__ == "__main__":
    main()
