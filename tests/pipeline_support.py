"""Helpers for the pipeline tests: small demo datasets, per-pipeline overrides, and a read
counter for Zarr stores.

:class:`ReadCounter` patches ``zarr.storage.LocalStore.get`` in this process and counts the
chunk bytes returned per (store root, array): with the threaded or synchronous scheduler
every read happens here, so ``passes(path, "X")`` (bytes read / bytes stored) proves how
many times a pipeline read an input. It is independent of the runner's own counters.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import dask

from ddr.demo import DemoSpec, write_demo_data

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ROOT / "pipelines"
CLUSTER_CONFIGS = ROOT / "cluster-configs"
BROKEN = Path(__file__).resolve().parent / "broken_pipelines"

#: the datasets the example pipelines read by default, small enough for tests
DATASETS = {
    "demo.zarr": DemoSpec(3000, 12, 4, 3, 500, seed=0),
    "demo-2.zarr": DemoSpec(2000, 12, 4, 3, 500, seed=1),
    "demo-missing.zarr": DemoSpec(3000, 12, 4, 3, 500, seed=2, missing=0.05),
    "wide.zarr": DemoSpec(2000, 60, 4, 3, 500, seed=4),
}

#: --set overrides that fit the example pipelines to the small datasets
OVERRIDES = {
    "randomized-pca-wide": ["k=4"],
    "cca": ["split=6"],
    "ppca-missing": ["max_iter=50"],
    "kernel-pca-nystrom": ["landmarks=300"],
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
    return directory


class ReadCounter:
    """Count the chunk bytes read through any Zarr LocalStore in this process."""

    _METADATA = ("zarr.json", ".zarray", ".zattrs", ".zgroup")

    def __init__(self) -> None:
        self.bytes: dict[tuple[str, str], int] = defaultdict(int)
        self._lock = threading.Lock()
        self._original: Any = None

    def __enter__(self) -> ReadCounter:
        from zarr.storage import LocalStore

        self._original = LocalStore.get
        counter = self

        async def get(store: Any, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
            buf = await counter._original(store, key, prototype, byte_range)
            if buf is not None and not key.endswith(counter._METADATA):
                array = ("/" + key).split("/c/", 1)[0].strip("/")
                with counter._lock:
                    counter.bytes[(str(Path(str(store.root)).resolve()), array)] += len(buf)
            return buf

        LocalStore.get = get  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        from zarr.storage import LocalStore

        LocalStore.get = self._original  # type: ignore[method-assign]

    def read(self, store: Path, array: str) -> int:
        return self.bytes.get((str(Path(store).resolve()), array), 0)

    def passes(self, store: Path, array: str) -> float:
        """Bytes read from ``store/array`` divided by the bytes of its stored chunks."""
        base = Path(store) / array
        stored = sum(
            f.stat().st_size for f in base.rglob("*") if f.is_file() and f.name != "zarr.json"
        )
        return self.read(store, array) / stored
