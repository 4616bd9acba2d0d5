"""The benchmark harness: datasets, a shared cluster, and one way of measuring every method.

Every row is measured by :meth:`Context.measure`: wall seconds, the peak resident memory of
this process and all its children (the cluster's workers included), the passes over the
data (chunk bytes read through :class:`benchmarks.counting.CountingLocalStore` in every
process, divided by the stored size of ``X``), and the accuracy numbers the method returns.
A method that raises (``KilledWorker``, ``MemoryError``) is recorded as failed, and the run
goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shutil
import tempfile
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

from benchmarks import counting
from ddr.demo import DemoSpec, demo_truth, write_demo_data
from ddr.io.checksums import checksummed_compressors
from ddr.io.zarr_chunks import from_zarr

DATASETS: dict[str, DemoSpec] = {
    "S": DemoSpec(
        n_samples=200_000, n_features=100, rank=10, n_classes=5, chunk_rows=100_000, seed=1
    ),
    "M": DemoSpec(
        n_samples=2_000_000, n_features=100, rank=10, n_classes=5, chunk_rows=100_000, seed=2
    ),
    "L": DemoSpec(
        n_samples=10_000_000, n_features=100, rank=10, n_classes=5, chunk_rows=100_000, seed=3
    ),
    "W": DemoSpec(
        n_samples=200_000, n_features=2000, rank=10, n_classes=5, chunk_rows=10_000, seed=4
    ),
}

PAIRED_REPEAT = 3
SCHEDULER_LABEL = {"cluster": "LC", "threads": "thr", "sync": "sync", "none": "1proc"}


def principal_angle_deg(A: np.ndarray, B: np.ndarray) -> float:
    """Largest principal angle (degrees) between the row spaces of ``A`` and ``B`` (k x d).

    Uses the sine form ``||Q_B - Q_A Q_A^T Q_B||_2``, accurate for tiny angles.
    """
    qa, _ = np.linalg.qr(np.asarray(A, dtype=np.float64).T)
    qb, _ = np.linalg.qr(np.asarray(B, dtype=np.float64).T)
    resid = qb - qa @ (qa.T @ qb)
    s = np.linalg.norm(resid, 2)
    return float(np.degrees(np.arcsin(min(1.0, s))))


def max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """Largest relative error of ``a`` against the reference ``b``."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.abs(b)))


@dataclasses.dataclass
class Row:
    suite: str
    method: str
    dataset: str
    seconds: float
    peak_mib: float
    passes: float | None
    metrics: dict[str, float]
    error: str | None = None
    floor: float | None = None  # the read floor re-measured beside this row, when paired


class _PeakMemory:
    """Samples the summed RSS of this process (and its children: the workers) every 20 ms.

    The list of child processes is re-read every half second, not at every sample: scanning
    ``/proc`` 50 times a second took most of a millisecond of CPU each time, a few per cent
    of a core taken from the run being measured on a 2-core machine.
    """

    def __init__(self, children: bool) -> None:
        self.children = children
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._me = psutil.Process()
        self._kids: list[psutil.Process] = []
        self._kids_at = -1.0

    def _rss(self) -> int:
        now = time.perf_counter()
        if self.children and now - self._kids_at > 0.5:
            self._kids, self._kids_at = self._me.children(recursive=True), now
        total = self._me.memory_info().rss
        for child in self._kids:
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            self._stop.wait(0.02)

    def __enter__(self) -> _PeakMemory:
        self.peak = self._rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


class Context:
    """What a benchmark suite gets: datasets, references, a cluster and :meth:`measure`."""

    def __init__(self, datasets: list[str], data_dir: Path, repeat: int = 1) -> None:
        self.datasets = datasets
        self.data_dir = data_dir
        self.repeat = repeat
        self.rows: list[Row] = []
        self.suite = ""
        self.workers: list[int] = [1, 2]  # the scaling suite's worker counts
        self.scaling_rows = 8_000_000
        # the sparse suite's corpus: documents, words, mean tokens a document, dense documents
        self.counts_docs, self.counts_words, self.counts_length = 1_000_000, 20_000, 100
        self.counts_dense_docs = 20_000
        self.transform_cases: list[str] = []  # the transforms suite's models (empty: all)
        self.transform_fit_rows = 200_000  # the rows the transforms suite fits them on
        self._client: Any = None
        self._cluster: Any = None
        self._numpy: dict[str, np.ndarray] = {}
        self._floors: dict[str, float] = {}

    # ---------------------------------------------------------------- datasets
    def path(self, name: str) -> Path:
        return self.data_dir / f"{name}.zarr"

    def ensure(self, name: str) -> None:
        """Generate dataset ``name`` unless a complete copy with the same spec exists."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        with dask.config.set(scheduler="threads"):
            write_demo_data(self.path(name), DATASETS[name], if_exists="skip-if-complete")
        took = time.perf_counter() - start
        if took > 2:
            print(f"[data] generated {name} in {took:.0f} s", flush=True)

    def zarr_array(self, name: str, var: str = "X") -> zarr.Array:
        store = counting.CountingLocalStore(str(self.path(name)), read_only=True)
        return zarr.open_array(store=store, path=var, mode="r")

    def array(self, name: str) -> da.Array:
        """``X`` of dataset ``name`` as ddr reads its inputs (:func:`ddr.io.from_zarr`: each
        stored chunk read and decoded once, no copy), with the stored row chunks. For ddr
        rows."""
        return from_zarr(self.zarr_array(name))

    def labels(self, name: str) -> da.Array:
        return from_zarr(self.zarr_array(name, "y"))

    def dask_array(self, name: str) -> da.Array:
        """``X`` as dask users read it (``dask.array.from_zarr``): for the read floor, dask's
        own rows and the dask-based anchors."""
        return da.from_zarr(self.zarr_array(name))

    def dask_labels(self, name: str) -> da.Array:
        return da.from_zarr(self.zarr_array(name, "y"))

    def numpy(self, name: str) -> np.ndarray:
        """The whole ``X`` in memory (float32), loaded once and kept until another is loaded."""
        if name not in self._numpy:
            # one dataset in memory at a time: a cached array would count in the peak memory
            # of every later row
            self._numpy.clear()
            self._numpy[name] = self.zarr_array(name)[...]
        return self._numpy[name]

    def stored_bytes(self, name: str) -> int:
        root = self.path(name) / "X"
        return sum(
            f.stat().st_size for f in root.rglob("*") if f.is_file() and f.name != "zarr.json"
        )

    def truth(self, name: str) -> dict[str, Any]:
        return demo_truth(DATASETS[name])

    def exact_covariance(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Float64 two-pass mean and covariance (ddof=1), cached beside the data."""
        cache = self.data_dir / f"{name}.exact.npz"
        if cache.exists():
            with np.load(cache, allow_pickle=False) as f:
                return f["mean"], f["cov"]
        X = da.from_zarr(zarr.open_array(str(self.path(name)), path="X", mode="r"))
        with dask.config.set(scheduler="threads"):
            mean = X.astype(np.float64).mean(axis=0).compute()
            blocks = X.to_delayed().ravel()
            parts = [dask.delayed(_centred_gram)(b, mean) for b in blocks]
            cov = np.sum(dask.compute(*parts), axis=0) / (X.shape[0] - 1)
        np.savez(cache, mean=mean, cov=cov)
        return mean, cov

    def exact_pca(self, name: str, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` components (k, d) and explained variances (k,) of the exact covariance."""
        _, cov = self.exact_covariance(name)
        evals, evecs = np.linalg.eigh(cov)
        return evecs[:, ::-1][:, :k].T, evals[::-1][:k]

    def exact_eigvals(self, name: str) -> np.ndarray:
        return np.linalg.eigvalsh(self.exact_covariance(name)[1])

    # ----------------------------------------------------------------- cluster
    def client(self) -> Any:
        """The 2-worker x 1-thread LocalCluster (4 GiB per worker) shared by the run."""
        if self._client is None:
            from distributed import Client, LocalCluster

            self._cluster = LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                memory_limit="4GiB",
                dashboard_address=None,
                processes=True,
            )
            self._client = Client(self._cluster, set_as_default=False)
            # warm both workers (imports, first zarr reads) so no row pays for it
            with dask.config.set(scheduler=self._client):
                for first in (self.array(self.datasets[0]), self.dask_array(self.datasets[0])):
                    first[: 8 * first.chunks[0][0]].sum().compute()
        return self._client

    def _restart_if_broken(self) -> None:
        if self._client is None:
            return
        try:
            if len(self._client.scheduler_info()["workers"]) >= 2:
                return
            self._client.restart()
        except Exception:  # a nanny that cannot restart its worker: start a new cluster
            self.close()

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
                self._cluster.close()
            self._client = self._cluster = None

    @contextlib.contextmanager
    def _watchdog(self, scheduler: str, timeout: float) -> Iterator[list[str]]:
        """Give up on a cluster row that lost its workers for good or ran past ``timeout``:
        closing the cluster makes the running compute raise, and the row is a failure."""
        verdict: list[str] = []
        if scheduler != "cluster":
            yield verdict
            return
        client, stop = self._client, threading.Event()

        def watch() -> None:
            start, short_since = time.perf_counter(), None
            while not stop.wait(2.0):
                try:
                    n = len(client.scheduler_info()["workers"])
                except Exception:
                    return
                now = time.perf_counter()
                short_since = None if n >= 1 else (short_since or now)
                if short_since is not None and now - short_since > 30:
                    verdict.append("WorkersLost")
                elif now - start > timeout:
                    verdict.append(f"Timeout after {timeout:.0f} s")
                if verdict:
                    self.close()
                    return

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            yield verdict
        finally:
            stop.set()
            thread.join()

    @contextlib.contextmanager
    def _scheduler(self, scheduler: str) -> Iterator[None]:
        if scheduler == "cluster":
            with dask.config.set(scheduler=self.client()):
                yield
        elif scheduler in ("threads", "sync"):
            with dask.config.set(scheduler=scheduler):
                yield
        elif scheduler == "none":
            with dask.config.set(scheduler="sync"):
                yield
        else:
            raise ValueError(f"unknown scheduler {scheduler!r}")

    def _reset_counters(self) -> None:
        counting.reset()
        if self._client is not None:
            self._client.run(counting.reset)

    def _read_bytes(self) -> int:
        total = counting.read_bytes()
        if self._client is not None:
            total += sum(self._client.run(counting.read_bytes).values())
        return total

    # ----------------------------------------------------------------- measure
    def measure(
        self,
        method: str,
        dataset: str,
        fn: Callable[[], dict[str, float] | None],
        *,
        scheduler: str = "cluster",
        in_memory: bool = False,
        children: bool | None = None,
        timeout: float = 900.0,
        paired_floor: bool = False,
        floor: Callable[[], float] | None = None,
    ) -> Row:
        """Run ``fn`` under ``scheduler`` and record a row (median of ``repeat`` runs).

        ``paired_floor`` (rows with a target relative to the read floor): run at least
        :data:`PAIRED_REPEAT` times, re-measure the dask read floor right before each run,
        and take the row's ratio against the median of those floors, so that drift of the
        machine's speed during a long run does not bias the ratio.

        ``in_memory`` marks methods that work on ``ctx.numpy(name)`` (loaded beforehand,
        not timed): their passes are reported as "in memory". ``children`` includes the
        memory of child processes (default: for cluster rows only). A cluster row that loses
        its workers for good, or runs past ``timeout`` seconds, is recorded as failed.
        ``floor`` times another floor for ``paired_floor`` (e.g. dask's pass over the same
        data on an object store) instead of dask's pass over the local dataset.
        """
        label = f"{method} ({SCHEDULER_LABEL[scheduler]})"
        for cached in [k for k in self._numpy if k != dataset]:
            del self._numpy[cached]  # another dataset's array would inflate this row's memory
        runs, floors = [], []
        for _ in range(max(self.repeat, PAIRED_REPEAT) if paired_floor else self.repeat):
            if paired_floor:
                floors.append(floor() if floor is not None else self._time_floor(dataset))
            with self._scheduler(scheduler):
                self._reset_counters()
                error, metrics = None, {}
                with _PeakMemory(
                    children=scheduler == "cluster" if children is None else children
                ) as mem:
                    start = time.perf_counter()
                    with self._watchdog(scheduler, timeout) as verdict:
                        try:
                            metrics = fn() or {}
                        except Exception as exc:  # recorded: peers that die are results too
                            error = type(exc).__name__
                    seconds = time.perf_counter() - start
                    if verdict:
                        error = verdict[0]
                passes = None
                if "passes" in metrics:  # measured by fn itself (e.g. on a cluster of its own)
                    passes = metrics.pop("passes")
                elif not in_memory and not verdict:
                    passes = self._read_bytes() / self.stored_bytes(dataset)
            runs.append(
                Row(self.suite, label, dataset, seconds, mem.peak / 2**20, passes, metrics, error)
            )
            if error:
                self._restart_if_broken()
                break
        row = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
        if floors:
            row.floor = sorted(floors)[len(floors) // 2]
        self.rows.append(row)
        print(
            f"[{self.suite}] {dataset} {label}: {format_cell(row, self.floor_seconds(dataset))}",
            flush=True,
        )
        return row

    # ------------------------------------------------------------- read floor
    def floor_seconds(self, name: str) -> float | None:
        return self._floors.get(name)

    def _time_floor(self, name: str) -> float:
        """One floor run, sampled for memory like the row it is paired with (same overhead)."""
        return self.time_on_cluster(lambda: self.dask_array(name).sum().compute())

    def time_on_cluster(self, fn: Callable[[], object]) -> float:
        """Seconds of one run of ``fn`` on the cluster, sampled for memory like a measured row
        (the same overhead): a floor of a suite's own, for ``measure(floor=...)``."""
        with self._scheduler("cluster"), _PeakMemory(children=True):
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

    def time_read_floor(self, name: str) -> float:
        """One dask read floor run over ``X`` of ``name`` (for ``measure(floor=...)``)."""
        return self._time_floor(name)

    # ------------------------------------------------------------ write floor
    @contextlib.contextmanager
    def scratch(self) -> Iterator[Path]:
        """A fresh folder beside the datasets (the disk outputs go to) for a suite's outputs
        and write floors, removed when the suite is done."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="scratch-", dir=self.data_dir))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def hold(self, arr: da.Array) -> da.Array:
        """``arr`` computed by the cluster now (untimed) and kept in its workers' memory: what
        a write floor writes, so that it times writing alone."""
        from distributed import wait

        client = self.client()
        held = client.persist(arr)
        with client.as_current():  # the cluster's client is not the default one
            wait(held)
        return held

    def time_write_floor(self, held: da.Array, folder: Path) -> float:
        """One write floor run: dask's ``to_zarr`` of ``held`` (see :meth:`hold`) to a new
        Zarr v3 array in ``folder``, with the codecs ddr writes its outputs with (zstd level
        0, then the crc32c checksum: :func:`ddr.io.checksums.checksummed_compressors`) and the
        same chunks (the row chunks of the input, the whole width), on the cluster. Sampled
        for memory like the row it is paired with (same overhead); each run writes a new
        array, so no removal of the last one is timed."""
        path = fresh_path(folder, "write-floor")
        return self.time_on_cluster(lambda: write_floor(held, path))

    def measure_write_floor(self, method: str, name: str, held: da.Array, folder: Path) -> Row:
        """A row for the write floor of ``held`` (dask's ``to_zarr``, see
        :meth:`time_write_floor`); its passes column is 0 (it reads nothing)."""
        return self.measure(
            method,
            name,
            lambda: write_floor(held, fresh_path(folder, "write-floor")) or {},
            scheduler="cluster",
        )

    def measure_floor(self, name: str) -> float:
        """The dask read floor on the cluster: one pass summing ``X``; the ratios' reference."""
        row = self.measure(
            "read floor, dask sum",
            name,
            lambda: _touch(self.dask_array(name).sum()),
            scheduler="cluster",
        )
        self._floors[name] = row.seconds
        return row.seconds


_FRESH = itertools.count()


def fresh_path(folder: Path, stem: str) -> Path:
    """A path in ``folder`` that no earlier call gave (``<stem>-<n>.zarr``)."""
    return folder / f"{stem}-{next(_FRESH)}.zarr"


def write_floor(held: da.Array, path: Path) -> None:
    # ddr writes every chunk, also one that equals the fill value (write_empty_chunks=True)
    da.to_zarr(
        held,
        str(path),
        mode="w",
        compressors=checksummed_compressors(),
        zarr_format=3,
        config={"write_empty_chunks": True},
    )


def _centred_gram(block: np.ndarray, mean: np.ndarray) -> np.ndarray:
    c = block.astype(np.float64) - mean
    return c.T @ c


def _touch(x: Any) -> dict[str, float]:
    x.compute()
    return {}


def format_cell(row: Row, floor: float | None) -> str:
    if row.error:
        return f"fails: {row.error} after {row.seconds:.1f} s"
    parts = [f"{row.seconds:.2f} s"]
    floor = row.floor or floor
    if floor and not row.method.startswith(("read floor, dask sum", "read floor, plain zarr")):
        parts[0] += f" (x{row.seconds / floor:.2f})"
    parts.append(
        f"{row.peak_mib / 1024:.1f} GiB" if row.peak_mib >= 1024 else f"{row.peak_mib:.0f} MiB"
    )
    parts.append("in memory" if row.passes is None else f"{row.passes:.1f} passes")
    for key, value in row.metrics.items():
        parts.append(f"{key} {_fmt(value)}")
    return ", ".join(parts)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return (
            f"{value:.2g}" if (abs(value) < 1e-2 or abs(value) >= 1e4) and value else f"{value:.3g}"
        )
    return str(value)


def machine_description() -> str:
    import platform
    import sys

    import distributed
    import sklearn
    import xarray

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = psutil.virtual_memory().total / 2**30
    versions = {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "dask": dask.__version__,
        "distributed": distributed.__version__,
        "zarr": zarr.__version__,
        "xarray": xarray.__version__,
        "scikit-learn": sklearn.__version__,
    }
    with contextlib.suppress(ImportError):
        import dask_ml

        versions["dask-ml"] = dask_ml.__version__
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM; " + ", ".join(
        f"{k} {v}" for k, v in versions.items()
    )
