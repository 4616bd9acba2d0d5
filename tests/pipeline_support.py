"""Helpers for the pipeline tests: small demo datasets, per-pipeline overrides, and a read
counter for Zarr stores.

:class:`ReadCounter` patches ``zarr.storage.LocalStore.get`` in this process and counts the
chunk bytes returned per (store root, array): with the threaded or synchronous scheduler
every read happens here, so ``passes(path, "X")`` (bytes read / bytes stored) proves how
many times a pipeline read an input. It is independent of the runner's own counters.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask

from ddr.demo import DemoSpec, write_demo_data
from ddr.demo_counts import CountsSpec, write_counts_data
from ddr.demo_gridded import GriddedSpec, write_gridded_data

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ROOT / "pipelines"
CLUSTER_CONFIGS = ROOT / "cluster-configs"
BROKEN = Path(__file__).resolve().parent / "broken_pipelines"

#: the datasets the example pipelines read by default, small enough for tests
DATASETS = {
    "demo.zarr": DemoSpec(3000, 12, 4, 3, 500, seed=0),
    "demo-new.zarr": DemoSpec(2000, 12, 4, 3, 500, seed=0, sample_seed=1),
    "demo-missing.zarr": DemoSpec(3000, 12, 4, 3, 500, seed=2, missing=0.05),
    "wide.zarr": DemoSpec(2000, 60, 8, 3, 500, seed=4),
}
#: the word-count corpora (CSR groups) the example pipelines read by default
COUNTS = {"corpus.zarr": CountsSpec(800, 60, 3, doc_length=60, chunk_rows=200, seed=1)}
#: the gridded fields (time x lat x lon, land NaN) the example pipelines read by default
GRIDDED = {"gridded.zarr": GriddedSpec(240, 18, 36, chunk_rows=60, seed=0)}

#: --set overrides that fit the example pipelines to the small datasets
OVERRIDES = {
    "randomized-pca-wide": ["k=8"],
    "classify": ["train_end=2000", "test_start=2000"],
    "cca": ["split=6"],
    "ppca-missing": ["max_iter=50", "k=4"],
    "kernel-pca-nystrom": ["landmarks=300"],
    "factor-analysis": ["k=4"],
    "lsa-plsa": ["k=3"],
    "kernel-cca": ["split=6"],
    # GaussianMixture's default tol=1e-6 takes ~1500 EM passes on the small data
    "gaussian-mixture": [f"steps.gm{k}.with.tol=1e-4" for k in range(2, 7)],
    "grid-search": ["components=[1, 2, 3, 4, 5, 6, 8]"],  # the small data have 12 features
}

#: pipelines that need another pipeline's outputs first
REQUIRES = {"apply-saved": "fit-once"}


def example_names() -> list[str]:
    """Every pipeline in pipelines/, in an order that satisfies REQUIRES."""
    names = sorted(p.stem for p in PIPELINES.glob("*.yaml"))
    for later, first in REQUIRES.items():
        if later in names and first in names:
            names.remove(later)
            names.insert(names.index(first) + 1, later)
    return names


def make_data(directory: Path) -> Path:
    """Write the small datasets into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    with dask.config.set(scheduler="threads"):
        for name, spec in DATASETS.items():
            write_demo_data(directory / name, spec, if_exists="skip-if-complete")
        for name, counts in COUNTS.items():
            write_counts_data(directory / name, counts, if_exists="skip-if-complete")
        for name, field in GRIDDED.items():
            write_gridded_data(directory / name, field, if_exists="skip-if-complete")
    return directory


class ReadCounter:
    """Count the chunk bytes read in this process, through any Zarr LocalStore's ``get`` or
    from chunk files ddr's reader reads itself, by chunk file."""

    _METADATA = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")

    def __init__(self) -> None:
        self.bytes: dict[Path, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._originals: tuple[Any, Any] | None = None

    def _add(self, path: Path, n_bytes: int) -> None:
        if not path.name.endswith(self._METADATA):
            with self._lock:
                self.bytes[path.resolve()] += n_bytes

    def __enter__(self) -> ReadCounter:
        from zarr.storage import LocalStore

        from ddr.io import zarr_chunks

        original_get, original_read = LocalStore.get, zarr_chunks.read_chunk_file
        self._originals = (original_get, original_read)
        counter = self

        async def get(store: Any, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
            buf = await original_get(store, key, prototype, byte_range)
            if buf is not None:
                counter._add(Path(str(store.root)) / key, len(buf))
            return buf

        def read_chunk_file(path: Any) -> Any:
            raw = original_read(path)
            if raw is not None:
                counter._add(Path(path), raw.shape[0])
            return raw

        LocalStore.get = get  # type: ignore[method-assign]
        zarr_chunks.read_chunk_file = read_chunk_file
        return self

    def __exit__(self, *exc: Any) -> None:
        from zarr.storage import LocalStore

        from ddr.io import zarr_chunks

        assert self._originals is not None
        LocalStore.get, zarr_chunks.read_chunk_file = self._originals  # type: ignore[method-assign]

    def read(self, store: Path, array: str) -> int:
        base = (Path(store) / array).resolve()
        return sum(n for path, n in self.bytes.items() if path.is_relative_to(base))

    def passes(self, store: Path, array: str) -> float:
        """Bytes read from ``store/array`` divided by the bytes of its stored chunks."""
        base = Path(store) / array
        stored = sum(
            f.stat().st_size for f in base.rglob("*") if f.is_file() and f.name != "zarr.json"
        )
        return self.read(store, array) / stored


def files_written(directory: Path, inputs: set[str]) -> list[str]:
    """Files under ``directory`` other than the ``inputs`` (top-level names) and the run's
    log (``*.log``: the CLI writes it beside the run summary even for a run that stopped
    before it started): what a run that must write nothing wrote."""
    return sorted(
        str(p.relative_to(directory))
        for p in directory.rglob("*")
        if p.is_file() and p.relative_to(directory).parts[0] not in inputs and p.suffix != ".log"
    )


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "64k", fill: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (a full disk, with ``fill``), unmounted on
    exit; the test is skipped where this process cannot mount one (not root)."""
    import pytest

    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small file system is a tmpfs here, which needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode:
        pytest.skip(f"could not mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        if fill:
            with contextlib.suppress(OSError), open(where / "filler", "wb", buffering=0) as fh:
                while True:
                    fh.write(b"\0" * 4096)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def resize_tmpfs(where: Path, size: str) -> None:
    """Give the tmpfs at ``where`` (from :func:`small_tmpfs`) another size."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)
