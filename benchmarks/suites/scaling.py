"""Scaling with the number of worker processes (LocalCluster, one thread each): seconds per
fit for 1, 2, 4, ... workers (`--workers`), each fit's ratio to ddr's own read pass on the
same cluster (x reader) and its parallel efficiency T(1) / (n T(n)) (eff), with the peak
resident memory of a single worker. Data: `--scaling-rows` x 100 float32 (`ddr demo-data`,
5 classes, chunks of 100 000 rows), generated once under `--data-dir`.
Target (issue 20): each one-pass fit's efficiency within 10 points of the reader's from 1 to
16 workers. The second passes (issue 29) scale the same way: predictions, probabilities and
PCA scores of models fitted beforehand on the first chunk (their outputs summed, so that
nothing but the pass is timed), and PCA scores written to Zarr beside dask's write floor (a
`to_zarr` of the same number of float32 columns, the same row chunks and ddr's codecs).

Fixed overhead: the same fits over 160 chunks of 100 rows on 8 worker processes, where the
read is nothing and what is left is the cost of a fit's tasks, its graph and its solve.
Target: a fit's seconds beyond the reader's pass under 0.3 s. "dask blockwise X and y" is
dask's own cost of a pass over two arrays chunk by chunk (X and the labels), for the
classifiers.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import psutil
import zarr

import ddr
from benchmarks.harness import Context, fresh_path, write_floor
from ddr.demo import DemoSpec, write_demo_data
from ddr.io.zarr_chunks import from_zarr

#: this suite makes its own data and clusters (not the shared S/M/L/W and 2-worker cluster)
USES_DATASETS = False

TINY = DemoSpec(16_000, 100, 10, 5, 100, seed=17)
OVERHEAD_WORKERS = 8
READER = "ddr reader, one pass (sum)"
_FITS = ("ddr PCA fit (covariance)", "ddr GaussianNB fit", "ddr QDA fit")

_results: dict[str, Any] = {}


def spec(rows: int) -> DemoSpec:
    return DemoSpec(rows, 100, 10, 5, 100_000, seed=16)


class _WorkerPeak:
    """The largest resident memory of any one of the cluster's worker processes, sampled
    every 50 ms while in the ``with``."""

    def __init__(self, pids: list[int]) -> None:
        self.procs = [psutil.Process(p) for p in pids]
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for p in self.procs:
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, p.memory_info().rss)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._sample()

    def __enter__(self) -> _WorkerPeak:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


@contextlib.contextmanager
def _cluster(n: int, memory: str) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory,
            dashboard_address=None,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
        dask.config.set(scheduler=client),
    ):
        yield client


def _models(path: Path) -> dict[str, Any]:
    """PCA, GaussianNB and QDA fitted on the first chunk, in memory (for the second passes)."""
    X = zarr.open_array(str(path), path="X", mode="r")
    y = zarr.open_array(str(path), path="y", mode="r")
    rows = X.chunks[0]
    Xc, yc = np.asarray(X[:rows]), np.asarray(y[:rows])
    return {
        "pca": ddr.PCA(10).fit(Xc),
        "nb": ddr.GaussianNB().fit(Xc, yc),
        "qda": ddr.QuadraticDiscriminantAnalysis().fit(Xc, yc),
    }


def _methods(
    path: Path, n_chunks: int | None = None, models: dict[str, Any] | None = None
) -> dict[str, Callable[[], Any]]:
    """The timed methods, over the first ``n_chunks`` row chunks (default: all); with
    ``models`` (:func:`_models`) their second passes too."""
    X = from_zarr(zarr.open_array(str(path), path="X", mode="r"))
    y = from_zarr(zarr.open_array(str(path), path="y", mode="r"))
    Xd = da.from_zarr(str(path), "X")
    if n_chunks is not None:
        rows = sum(X.chunks[0][:n_chunks])
        X, y, Xd = X[:rows], y[:rows], Xd[:rows]
    methods: dict[str, Callable[[], Any]] = {
        READER: lambda: X.sum().compute(),
        "dask read floor (da.from_zarr sum)": lambda: Xd.sum().compute(),
        "ddr PCA fit (covariance)": lambda: ddr.PCA(10).fit(X),
        "ddr GaussianNB fit": lambda: ddr.GaussianNB().fit(X, y),
        "ddr QDA fit": lambda: ddr.QuadraticDiscriminantAnalysis().fit(X, y),
    }
    if models is None:
        return methods
    pca, nb, qda = models["pca"], models["nb"], models["qda"]
    out = path.parent / f"{path.stem}-out.zarr"
    methods.update(
        {
            "ddr GaussianNB predict (sum)": lambda: nb.predict(X).sum().compute(),
            "ddr QDA predict_proba (sum)": lambda: qda.predict_proba(X).sum().compute(),
            "ddr PCA transform (sum)": lambda: pca.transform(X).sum().compute(),
            # each run writes a new array: no removal of the last is timed
            "dask write floor (to_zarr, 10 columns)": lambda: write_floor(
                Xd[:, :10], fresh_path(out, "floor")
            ),
            "ddr PCA transform to Zarr (to_zarr)": lambda: write_floor(
                pca.transform(X), fresh_path(out, "scores")
            ),
        }
    )
    return methods


def _time(
    client: Any,
    methods: dict[str, Callable[[], Any]],
    rounds: int,
    warm: dict[str, Callable[[], Any]],
) -> dict[str, tuple]:
    """Median seconds and the peak RSS of one worker, the methods interleaved round by round
    so that drift of the machine's speed falls on all of them alike, after each method ran
    once on ``warm`` (a few chunks: imports, first reads, the workers' buffers)."""
    pids = list(client.run(os.getpid).values())
    for fn in warm.values():
        fn()
    from distributed import get_task_stream

    seconds: dict[str, list[float]] = {m: [] for m in methods}
    peaks: dict[str, int] = dict.fromkeys(methods, 0)
    tasks: dict[str, dict[str, float]] = {}
    for _ in range(rounds):
        for name, fn in methods.items():
            with _WorkerPeak(pids) as peak, get_task_stream(client) as stream:
                start = time.perf_counter()
                fn()
                seconds[name].append(time.perf_counter() - start)
            peaks[name] = max(peaks[name], peak.peak)
            tasks[name] = _where(stream.data)
    return {m: (float(np.median(seconds[m])), peaks[m], tasks[m]) for m in methods}


def _where(stream: list[dict[str, Any]]) -> dict[str, float]:
    """Where a run's task time went: the compute seconds of the tasks of each prefix, and the
    seconds spent moving data to tasks (all workers together)."""
    from dask.utils import key_split

    out: dict[str, float] = {"transfers": 0.0}
    for task in stream:
        for part in task["startstops"]:
            seconds = part["stop"] - part["start"]
            if part["action"] == "compute":
                prefix = key_split(task["key"])
                out[prefix] = out.get(prefix, 0.0) + seconds
            elif part["action"] == "transfer":
                out["transfers"] += seconds
    return out


def run(ctx: Context) -> None:
    rows = ctx.scaling_rows
    workers = ctx.workers
    rounds = max(ctx.repeat, 2)
    path = ctx.data_dir / f"scaling-{rows}.zarr"
    ctx.data_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        write_demo_data(path, spec(rows), if_exists="skip-if-complete")
        write_demo_data(ctx.data_dir / "scaling-tiny.zarr", TINY, if_exists="skip-if-complete")
    print(f"[scaling] data ready in {time.perf_counter() - start:.0f} s", flush=True)
    memory = psutil.virtual_memory().total * 0.8 / max(workers)
    per_worker = f"{int(min(memory, 8 * 2**30)) // 2**20}MiB"
    table: dict[int, dict[str, tuple]] = {}
    models = _models(path)
    for n in workers:
        with _cluster(n, per_worker) as client:
            timed = _methods(path, models=models)
            table[n] = _time(client, timed, rounds, _methods(path, 2 * n, models))
        print(f"[scaling] {n} workers: " + ", ".join(
            f"{m} {s:.2f} s" for m, (s, *_) in table[n].items()
        ), flush=True)  # fmt: skip
    with _cluster(OVERHEAD_WORKERS, "2GiB") as client:
        tiny = ctx.data_dir / "scaling-tiny.zarr"
        methods = _methods(tiny)
        del methods["dask read floor (da.from_zarr sum)"]
        X = from_zarr(zarr.open_array(str(tiny), path="X", mode="r"))
        y = from_zarr(zarr.open_array(str(tiny), path="y", mode="r"))
        methods["dask blockwise X and y (sum)"] = lambda: (
            da.map_blocks(_sum_both, X, y[:, None], chunks=((1,) * X.numblocks[0], (1,)))
            .sum()
            .compute()
        )
        overhead = _time(client, methods, max(rounds, 7), methods)
    _results.update(rows=rows, workers=workers, rounds=rounds, table=table, overhead=overhead)
    _results["memory_limit"] = per_worker


def _sum_both(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([[a.sum() + b.sum()]])


def report(ctx: Context) -> str:
    """The suite's tables (markdown)."""
    r = _results
    workers, table = r["workers"], r["table"]
    head = "| method | " + " | ".join(f"{n} worker{'s' if n > 1 else ''}" for n in workers)
    lines = [
        f"{r['rows']:,} x 100 float32 in {-(-r['rows'] // 100_000)} chunks; LocalCluster, "
        f"1 thread and {r['memory_limit']} per worker; median of {r['rounds']} interleaved "
        "rounds. Cells: seconds (x ddr's reader pass on the same cluster; eff: T(1) / (n "
        "T(n)); peak RSS of one worker).",
        "",
        head + " |",
        "|---" * (len(workers) + 1) + "|",
    ]
    for method in table[workers[0]]:
        t1 = table[workers[0]][method][0] * workers[0]
        cells = []
        for n in workers:
            seconds, peak, _ = table[n][method]
            reader = table[n][READER][0]
            ratio = "" if method == READER else f"x{seconds / reader:.2f}, "
            cells.append(
                f"{seconds:.2f} s ({ratio}eff {100 * t1 / (n * seconds):.0f} %, "
                f"{peak / 2**20:.0f} MiB)"
            )
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Where the time of a fit goes (last round, dask's task stream; seconds of all "
        "workers together): reading chunks (ddr-from-zarr: X and, for the classifiers, the "
        "label chunks; the reader's pass reads and sums in one task), the statistics of the "
        "blocks (ddr-stats-block), merging (ddr-stats-merge) and moving data to tasks "
        "(partial statistics to merges, label chunks to the blocks). Time per chunk that grows "
        "with the number of workers is the machine's (cores, memory bandwidth) not ddr's.",
        "",
        "| workers | reader: read + sum | "
        + " | ".join(f"{m.removeprefix('ddr ')}: read, stats, merge, moved" for m in _FITS)
        + " |",
        "|---" * (len(_FITS) + 2) + "|",
    ]
    for n in workers:
        read = table[n][READER][2].get("sum", float("nan"))
        cells = []
        for m in _FITS:
            t = table[n][m][2]
            cells.append(
                ", ".join(
                    f"{t.get(k, 0.0):.2f}"
                    for k in ("ddr-from-zarr", "ddr-stats-block", "ddr-stats-merge", "transfers")
                )
            )
        lines.append(f"| {n} | {read:.2f} | " + " | ".join(cells) + " |")
    over = r["overhead"]
    reader = over[READER][0]
    lines += [
        "",
        f"Fixed overhead: {TINY.n_samples:,} x 100 in 160 chunks of 100 rows, "
        f"{OVERHEAD_WORKERS} worker processes, median of {max(r['rounds'], 7)} rounds.",
        "",
        "| method | seconds | beyond the reader's pass |",
        "|---|---|---|",
    ]
    for method, (seconds, *_) in over.items():
        extra = "" if method == READER else f"{seconds - reader:+.3f} s"
        lines.append(f"| {method} | {seconds:.3f} s | {extra} |")
    return "\n".join(lines)
