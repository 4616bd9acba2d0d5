"""Sparse word counts (LSA): ddr's CSR reader and TruncatedSVD against the read floor of the CSR
store, scikit-learn's in-memory TruncatedSVD (randomized, and ARPACK: the reference) and dask-
ml's TruncatedSVD; and ddr's PLSA (3 EM iterations from a random start, one pass each: the
per-pass cost of an iteration; its default start adds a 3-pass randomized SVD). Data: `ddr
demo-data --kind counts` (`--counts-docs` documents x `--counts-words` words, about
`--counts-length` tokens a document, 20 topics; a CSR group in AnnData's layout, zstd),
generated once under `--data-dir`.
Cluster: LocalCluster, 2 workers x 1 thread.

The read floor is dask's pass over the three stored arrays of the CSR group (`data`,
`indices`, `indptr`, each `da.from_zarr(...).sum()`): every stored byte read once, nothing
assembled. Every ddr row runs right after a floor run of its own (median of 3 pairs); "per
pass" is a fit's seconds over its passes, and its ratio is to that floor. Passes are
measured: chunk bytes read through a counting store in every process over the stored bytes
of the group. `sv_err`: the largest relative error of the 10 singular values against ARPACK
(`scipy.sparse.linalg.svds` through scikit-learn, in memory). dask-ml's TruncatedSVD takes
dense chunks only: it is run on the sparse blocks (it fails) and on the first
`--counts-dense-docs` documents densified, beside ddr on the same dense rows.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import zarr
from sklearn.exceptions import ConvergenceWarning

import ddr
from benchmarks import counting
from benchmarks.harness import Context
from ddr.demo_counts import CountsSpec, write_counts_data
from ddr.io.csr import csr_blocks

#: this suite makes its own data and cluster
USES_DATASETS = False
K = 10
PAIRS = 3
#: EM iterations (passes) of the PLSA row: its per-pass time is what is compared
PLSA_ITER = 3

_results: list[tuple[str, str]] = []
_meta: dict[str, Any] = {}


def spec(ctx: Context) -> CountsSpec:
    return CountsSpec(
        n_samples=ctx.counts_docs,
        n_features=ctx.counts_words,
        n_topics=20,
        doc_length=float(ctx.counts_length),
        chunk_rows=50_000,
        seed=21,
    )


@contextlib.contextmanager
def _cluster() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, memory_limit="6GiB",
            dashboard_address=None,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
        dask.config.set(scheduler=client),
    ):  # fmt: skip
        yield client


def _nnz(block: Any) -> np.ndarray:
    return np.array([[block.nnz]], dtype=np.int64)


def _dense(block: Any) -> np.ndarray:
    return block.toarray()


def _stored_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in (path / "X").rglob("*") if f.is_file()
               and f.name not in ("zarr.json", ".zarray", ".zattrs", ".zgroup"))  # fmt: skip


def run(ctx: Context) -> None:
    s = spec(ctx)
    path = ctx.data_dir / f"counts-{s.n_samples}x{s.n_features}-L{int(s.doc_length)}.zarr"
    ctx.data_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        write_counts_data(path, s, if_exists="skip-if-complete")
    print(f"[sparse] data {path.name}: {time.perf_counter() - start:.0f} s", flush=True)
    root = zarr.open_group(store=counting.CountingLocalStore(str(path), read_only=True), mode="r")
    group = root["X"]
    X = csr_blocks(group, f"{path}/X")
    stored = _stored_bytes(path)
    _meta.update(path=path.name, nnz=int(group["data"].shape[0]), stored=stored,
                 blocks=len(X.chunks[0]), shape=X.shape)  # fmt: skip
    arrays = [da.from_zarr(group[name]) for name in ("data", "indices", "indptr")]

    def floor() -> Any:
        return dask.compute(*[a.sum() for a in arrays])

    with _cluster() as client:

        def read_bytes() -> int:
            return counting.read_bytes() + sum(client.run(counting.read_bytes).values())

        def reset() -> None:
            counting.reset()
            client.run(counting.reset)

        def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
            reset()
            t0 = time.perf_counter()
            out = fn()
            return time.perf_counter() - t0, read_bytes() / stored, out

        X[: X.chunks[0][0]].map_blocks(
            _nnz, chunks=((1,), (1,)), dtype=np.int64, meta=np.empty((0, 0), np.int64)
        ).sum().compute()  # warm
        floor()
        reference = _reference(path, s)
        f_seconds, f_passes, _ = timed(floor)
        _row("read floor: dask sum of data, indices, indptr", f"{f_seconds:.2f} s, "
             f"{f_passes:.2f} passes")  # fmt: skip

        def paired(label: str, fn: Callable[[], Any], score: Callable[[Any], str]) -> None:
            runs = []
            for _ in range(PAIRS):
                fl = timed(floor)[0]
                sec, passes, out = timed(fn)
                runs.append((sec, fl, passes, out))
            sec, fl, passes, out = sorted(runs, key=lambda r: r[0] / r[1])[len(runs) // 2]
            n_passes = max(round(passes), 1)
            _row(label, f"{sec:.2f} s, {passes:.2f} passes, per pass {sec / n_passes:.2f} s "
                 f"(x{sec / n_passes / fl:.2f} of its floor, {fl:.2f} s){score(out)}")  # fmt: skip

        count = X.map_blocks(_nnz, chunks=((1,) * len(X.chunks[0]), (1,)), dtype=np.int64,
                             meta=np.empty((0, 0), np.int64))  # fmt: skip
        paired("ddr CSR reader, one pass (stored values counted)",
               lambda: int(count.sum().compute()), lambda n: f", nnz {n}")  # fmt: skip

        def sv_err(est: Any) -> str:
            err = np.max(np.abs(est.singular_values_ - reference) / reference)
            return f", sv_err {err:.1e}"

        for q in (5, 2):
            paired(f"ddr TruncatedSVD k={K}, n_iter={q} ({q + 1} passes)",
                   lambda q=q: ddr.TruncatedSVD(K, n_iter=q, random_state=0).fit(X),
                   sv_err)  # fmt: skip

        def plsa() -> Any:
            with warnings.catch_warnings():  # 3 iterations on purpose: no convergence
                warnings.simplefilter("ignore", ConvergenceWarning)
                return ddr.PLSA(K, init="random", max_iter=PLSA_ITER, tol=0.0,
                                random_state=0).fit(X)  # fmt: skip

        paired(f"ddr PLSA k={K}, init='random', max_iter={PLSA_ITER} ({PLSA_ITER} passes)",
               plsa, lambda m: f", loglike {m.loglike_[-1]:.6g}")  # fmt: skip
        _dask_ml(X, s, ctx.counts_dense_docs)
    _sklearn(path, reference)


def _reference(path: Path, s: CountsSpec) -> np.ndarray:
    """ARPACK's top singular values (in memory), cached beside the data."""
    cache = path.with_suffix(".svds.npy")
    if cache.exists():
        return np.load(cache)
    from scipy.sparse.linalg import svds

    M = ddr.io.open_csr(path, "X").compute(scheduler="threads").astype(np.float64)
    values = np.sort(svds(M, k=K, tol=0, random_state=0)[1])[::-1]
    np.save(cache, values)
    return values


def _sklearn(path: Path, reference: np.ndarray) -> None:
    """scikit-learn in memory (the CSR loaded first, not timed), randomized and ARPACK."""
    from sklearn.decomposition import TruncatedSVD

    M = ddr.io.open_csr(path, "X").compute(scheduler="threads")
    for label, kwargs in (("randomized, n_iter=5", {}), ("arpack", {"algorithm": "arpack"})):
        t0 = time.perf_counter()
        try:
            est = TruncatedSVD(K, random_state=0, **kwargs).fit(M)
        except MemoryError as exc:
            _row(f"scikit-learn TruncatedSVD {label}, in memory", f"fails: {type(exc).__name__}")
            continue
        sec = time.perf_counter() - t0
        err = np.max(np.abs(est.singular_values_ - reference) / reference)
        _row(f"scikit-learn TruncatedSVD {label}, in memory",
             f"{sec:.2f} s (loaded CSR, {M.data.nbytes / 2**30:.1f} GiB of values), "
             f"sv_err {err:.1e}")  # fmt: skip


def _dask_ml(X: da.Array, s: CountsSpec, dense_docs: int) -> None:
    try:
        from dask_ml.decomposition import TruncatedSVD
    except ImportError:  # a machine without the bench extra: its rows say so
        _row("dask-ml TruncatedSVD", "not installed (pip install -e '.[bench]')")
        return

    for alg in ("tsqr", "randomized"):
        t0 = time.perf_counter()
        try:
            TruncatedSVD(K, algorithm=alg, random_state=0).fit(X)
            outcome = f"{time.perf_counter() - t0:.2f} s"
        except Exception as exc:  # recorded: a peer that cannot run is a result
            outcome = f"fails: {type(exc).__name__}: {str(exc)[:60]}"
        _row(f"dask-ml TruncatedSVD {alg}, sparse blocks", outcome)
    m = min(s.n_samples, dense_docs)
    rows = X[:m]
    dense = rows.map_blocks(_dense, dtype=np.float32, meta=np.empty((0, 0), np.float32))
    # in the workers' memory before anything is timed: dask-ml's one graph reads each block
    # once, ddr's passes would otherwise re-read and densify the CSR blocks every pass
    dense = dense.persist()
    dense.sum().compute()  # the persisted blocks are in memory before the clock starts
    gib = m * s.n_features * 4 / 2**30
    from scipy.sparse.linalg import svds

    ref = np.sort(svds(rows.compute().astype(np.float64), k=K, tol=0, random_state=0)[1])[::-1]
    for label, fit in (
        ("ddr TruncatedSVD n_iter=5", lambda: ddr.TruncatedSVD(K, random_state=0).fit(dense)),
        ("dask-ml TruncatedSVD tsqr",
         lambda: TruncatedSVD(K, algorithm="tsqr").fit(dense.rechunk((10_000, -1)))),
        ("dask-ml TruncatedSVD randomized, n_iter=5",
         lambda: TruncatedSVD(K, algorithm="randomized", n_iter=5, random_state=0).fit(dense)),
    ):  # fmt: skip
        t0 = time.perf_counter()
        try:
            est = fit()
            sec = time.perf_counter() - t0
            err = np.max(np.abs(est.singular_values_ - ref) / ref)
            outcome = f"{sec:.2f} s, sv_err {err:.1e}"
        except Exception as exc:
            outcome = f"fails: {type(exc).__name__}: {str(exc)[:60]}"
        _row(f"{label}, first {m} documents dense ({gib:.1f} GiB float32)", outcome)


def _row(method: str, cell: str) -> None:
    _results.append((method, cell))
    print(f"[sparse] {method}: {cell}", flush=True)


def report(ctx: Context) -> str:
    m = _meta
    head = (
        f"Data: {m.get('path')}: {m.get('shape')} "
        f"documents x words, {m.get('nnz')} stored values, {m.get('stored', 0) / 2**30:.2f} GiB "
        f"stored (zstd), read in {m.get('blocks')} row blocks.\n\n"
    )
    lines = ["| method | result |", "|---|---|"]
    lines += [f"| {method} | {cell} |" for method, cell in _results]
    return head + "\n".join(lines)
