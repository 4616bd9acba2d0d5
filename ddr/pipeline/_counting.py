"""Count the chunk bytes read from each input, in whichever process reads them, once per task.

The runner opens local Zarr inputs through :class:`CountingStore` (a LocalStore that counts
the size of every chunk it returns, keyed by the store's root), and inputs at URLs through
:class:`CountingWrapper` (zarr's ``WrapperStore`` around the location's store, counting the
same way). The tasks that read them are :func:`counted_getter`: the bytes one task reads are
gathered (a context variable follows the read into zarr's I/O thread) and

- on a dask worker, published to the scheduler (event topic :data:`TOPIC`), where
  :class:`ReadTally` adds them up once per task: a task re-run or recomputed because a
  worker was lost counts once (the bytes read again are tallied apart), and what a worker
  read is not lost with it;
- anywhere else (dask's local schedulers), added to this process's counters.

Divided by the stored size of an array, the sums give the passes over it that the run
summary reports: a measurement, not a promise. Without the tally (a scheduler where ddr is
not installed) the runner falls back to summing every process's counters
(``client.run(read_counts)``), which a lost worker takes with it.
"""

from __future__ import annotations

import contextvars
import itertools
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from distributed.diagnostics.plugin import SchedulerPlugin
from zarr.storage import LocalStore, WrapperStore

from ddr.io.locations import Location

__all__ = [
    "TOPIC",
    "BlockReads",
    "CountingStore",
    "CountingWrapper",
    "ReadTally",
    "count_key",
    "counted_call",
    "counted_getter",
    "install_tally",
    "blocks_selected",
    "block_nbytes",
    "local_counts",
    "read_counts",
    "stored_bytes",
    "stored_objects",
    "union_share",
    "tally_totals",
]

#: the scheduler event topic of the bytes each task read
TOPIC = "ddr-reads"

_LOCK = threading.Lock()
_COUNTS: dict[str, int] = defaultdict(int)  # read outside any worker task
_TASK_COUNTS: dict[str, int] = defaultdict(int)  # read by worker tasks (also published)
_METADATA = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")
# the bytes the running counted_getter call has read, by count key
_READING: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "ddr_reading", default=None
)


def read_counts() -> dict[str, int]:
    """Chunk bytes read in this process so far, by ``"<store root>::<array path>"`` (never
    reset: take differences)."""
    with _LOCK:
        total = dict(_COUNTS)
        for k, v in _TASK_COUNTS.items():
            total[k] = total.get(k, 0) + v
    return total


def local_counts() -> dict[str, int]:
    """Chunk bytes read in this process outside dask worker tasks (what the scheduler's
    tally does not see)."""
    with _LOCK:
        return dict(_COUNTS)


def count_key(root: str, array: str) -> str:
    return f"{root}::{array.strip('/')}"


def _observe(key: str, n_bytes: int) -> None:
    reading = _READING.get()
    if reading is not None:
        reading[key] = reading.get(key, 0) + n_bytes
    else:
        with _LOCK:
            _COUNTS[key] += n_bytes


def _array_of(key: str) -> str:
    """The array path of a chunk key (``X/c/0/0`` -> ``X``; v2 ``X/0.0`` -> ``X``)."""
    k = "/" + key
    if "/c/" in k:
        return k.split("/c/", 1)[0].strip("/")
    return k.rsplit("/", 1)[0].strip("/")


class CountingStore(LocalStore):
    """A read-only LocalStore that counts the chunk bytes it returns, and those that
    :func:`ddr.io.from_zarr` reads from its files directly (``observe_read``)."""

    def observe_read(self, key: str, n_bytes: int) -> None:
        if not key.endswith(_METADATA):
            _observe(count_key(str(self.root), _array_of(key)), n_bytes)

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        buf = await super().get(key, prototype, byte_range)
        if buf is not None:
            self.observe_read(key, len(buf))
        return buf

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> Any:
        key_ranges = list(key_ranges)
        out = await super().get_partial_values(prototype, key_ranges)
        for (k, _), b in zip(key_ranges, out, strict=True):
            if b is not None:
                self.observe_read(k, len(b))
        return out


class CountingWrapper(WrapperStore):
    """A read-only wrapper of any zarr store (an input at a URL) that counts the chunk bytes
    it serves, keyed by ``label`` (the input's URL)."""

    def __init__(self, store: Any, label: str = "") -> None:
        super().__init__(store)
        self.label = label

    def _with_store(self, store: Any) -> CountingWrapper:
        return type(self)(store, self.label)

    def _observe(self, key: str, n_bytes: int) -> None:
        if not key.endswith(_METADATA):
            _observe(count_key(self.label, _array_of(key)), n_bytes)

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        buf = await self._store.get(key, prototype, byte_range)
        if buf is not None:
            self._observe(key, len(buf))
        return buf

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> Any:
        key_ranges = list(key_ranges)
        out = await self._store.get_partial_values(prototype, key_ranges)
        for (k, _), b in zip(key_ranges, out, strict=True):
            if b is not None:
                self._observe(k, len(b))
        return out


def stored_bytes(root: str | Location, array_path: str) -> int:
    """Bytes of the stored chunks of ``array_path`` inside the store at ``root`` (a local
    path or a location; at a URL, one listing of the array's objects)."""
    from ddr.io.locations import resolve

    base = resolve(root)
    if array_path:
        base = base.joinpath(array_path)
    return base.du(exclude=_METADATA)


def stored_objects(root: str | Location, array_path: str) -> Iterator[tuple[str, int]]:
    """``(key, bytes)`` of each stored object of ``array_path`` inside the store at ``root``,
    the key relative to the array (``c/0/0``; metadata documents left out): one listing."""
    import os
    import posixpath
    from pathlib import Path

    from ddr.io.locations import resolve

    base = resolve(root)
    if array_path:
        base = base.joinpath(array_path)
    if base.protocol == "file":
        top = Path(base.path)
        for f in top.rglob("*"):
            if f.is_file() and f.name not in _METADATA:
                yield f.relative_to(top).as_posix(), f.stat().st_size
        return
    with base.errors("read"):
        found = base.fs.find(base.fs_path, detail=True)
    prefix = base.fs_path.rstrip("/") + "/"
    for key, info in found.items():
        if posixpath.basename(key) not in _METADATA:
            yield key.removeprefix(prefix).lstrip(os.sep), int(info.get("size") or 0)


# --------------------------------------------------------- planned passes (units)
@dataclass(frozen=True)
class BlockReads:
    """What an input's selection reads of its stored array, in the unit measured passes
    count: stored bytes. ``nbytes`` holds, for each block of the stored array's dask grid
    (the blocks its tasks read), the stored bytes that block's task reads; ``mask`` the
    blocks the selection needs; ``total`` the array's stored bytes (a pass)."""

    nbytes: np.ndarray
    mask: np.ndarray
    total: int

    def share(self) -> float:
        """Passes over the stored array one read of the selection makes (rows 0:75000 of
        100 000 in chunks of 12 500: 0.75)."""
        return union_share([self])


def union_share(reads: Sequence[BlockReads | None]) -> float:
    """Passes over one stored array that reading these selections of it in one compute
    makes: each block once, however many of them need it (1 when one is the whole array
    or not known)."""
    if not reads or any(r is None for r in reads):
        return 1.0
    known = [r for r in reads if r is not None]
    first = known[0]
    if not first.total or any(r.mask.shape != first.mask.shape for r in known):
        return 1.0
    mask = np.any(np.stack([r.mask for r in known]), axis=0)
    return float(first.nbytes[mask].sum()) / first.total


def blocks_selected(chunks: tuple[int, ...], sel: Any) -> np.ndarray:
    """Which blocks of a dimension chunked as ``chunks`` an ``isel`` indexer (a slice, a
    list of positions, or None: everything) needs, as a boolean mask over the blocks."""
    n_blocks = len(chunks)
    bounds = np.cumsum((0, *chunks))
    n = int(bounds[-1])
    mask = np.zeros(n_blocks, dtype=bool)
    if sel is None:
        mask[:] = True
        return mask
    if isinstance(sel, slice):
        start, stop, step = sel.indices(n)
        count = len(range(start, stop, step))
        if count == 0:
            return mask
        if abs(step) <= min(chunks) or count > 1_000_000:  # every block between its ends
            lo, hi = sorted((start, start + step * (count - 1)))
            first, last = np.searchsorted(bounds, [lo, hi], side="right") - 1
            mask[first : last + 1] = True
            return mask
        positions = np.arange(start, stop, step)
    else:
        positions = np.asarray(sel, dtype=np.int64)
        positions = np.where(positions < 0, positions + n, positions)
    mask[np.unique(np.searchsorted(bounds, positions, side="right") - 1)] = True
    return mask


def block_nbytes(
    objects: Iterable[tuple[str, int]],
    stored: tuple[int, ...],
    chunks: tuple[tuple[int, ...], ...],
) -> np.ndarray:
    """The stored bytes each block of the dask grid ``chunks`` reads: each stored object
    (``key, bytes``, its key ``c/i/j`` or ``i.j``, of the stored grid ``stored``) is read
    whole by every block it overlaps."""
    shape = tuple(len(c) for c in chunks)
    out = np.zeros(shape, dtype=np.int64)
    bounds = [np.cumsum((0, *c)) for c in chunks]
    for key, size in objects:
        body = key[2:] if key[:2] in ("c/", "c.") else key
        try:
            coords = [int(part) for part in re.split(r"[./]", body)]
        except ValueError:
            continue
        if len(coords) != len(shape):
            continue
        spans = []
        for c, g, b in zip(coords, stored, bounds, strict=True):
            lo = c * g
            hi = min(lo + g, int(b[-1])) - 1
            first, last = np.searchsorted(b, [lo, hi], side="right") - 1
            spans.append(range(max(int(first), 0), min(int(last), len(b) - 2) + 1))
        for block in itertools.product(*spans):
            out[block] += size
    return out


# ----------------------------------------------------------------- once per task
def counted_getter(a: Any, b: Any, asarray: bool = True, lock: Any = None) -> Any:
    """dask's ``getter`` for a counted input's blocks: the bytes the block's read takes are
    published to the scheduler's tally on a worker, or counted in this process elsewhere."""
    from dask.array.core import getter_nofancy

    return counted_call(getter_nofancy, a, b, asarray=asarray, lock=lock)


def counted_call(read: Any, *args: Any, **kwargs: Any) -> Any:
    """``read(*args, **kwargs)``, a task that reads a counted input (a block of rows), with
    the bytes it reads published as :func:`counted_getter`'s are."""
    reading: dict[str, int] = {}
    token = _READING.set(reading)
    try:
        return read(*args, **kwargs)
    finally:
        _READING.reset(token)
        if reading:
            _report(reading)


def _report(reading: dict[str, int]) -> None:
    try:
        from distributed import get_worker

        worker = get_worker()
        key = worker.get_current_task()
    except (ImportError, ValueError, AttributeError, KeyError):
        key = None
    with _LOCK:
        for k, v in reading.items():
            (_COUNTS if key is None else _TASK_COUNTS)[k] += v
    if key is not None:
        # sent with the worker's messages to the scheduler, before the task's result
        worker.log_event(TOPIC, {"key": str(key), "bytes": reading})


class ReadTally(SchedulerPlugin):
    """On the scheduler: the bytes read by each task, counted once per task.

    A task's reads count once per time a graph asks for the task to run (a graph that asks
    for it again once it was released, or once the scheduler forgot it, starts a new count):
    a run of it again after a worker was lost (re-run, or recomputed because its result was
    on the lost worker) adds to :attr:`again` instead of :attr:`counted`.
    Installed with :func:`install_tally` as a scheduler plugin.
    """

    name = "ddr-read-tally"

    def __init__(self) -> None:
        self.counted: dict[str, int] = defaultdict(int)
        self.again: dict[str, int] = defaultdict(int)
        self._live: set[str] = set()

    def log_event(self, topic: str, msg: Any) -> None:
        if topic != TOPIC or not isinstance(msg, dict):
            return
        key = str(msg.get("key"))
        target = self.again if key in self._live else self.counted
        self._live.add(key)
        for k, v in (msg.get("bytes") or {}).items():
            target[k] += int(v)

    def update_graph(self, scheduler: Any, *, tasks: Any = (), **kwargs: Any) -> None:
        # a task a new graph runs again (it was released after an earlier graph) is a new
        # read; one still running or in memory is not run again
        for key in tasks:
            ts = scheduler.tasks.get(key)
            if ts is None or ts.state == "released":
                self._live.discard(str(key))

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if finish == "forgotten":
            self._live.discard(str(key))

    def totals(self) -> tuple[dict[str, int], dict[str, int]]:
        return dict(self.counted), dict(self.again)


def install_tally(dask_scheduler: Any = None) -> None:
    """Run on the scheduler (``client.run_on_scheduler``): add the :class:`ReadTally`
    plugin once."""
    if ReadTally.name not in dask_scheduler.plugins:
        dask_scheduler.add_plugin(ReadTally(), name=ReadTally.name)


def tally_totals(dask_scheduler: Any = None) -> tuple[dict[str, int], dict[str, int]]:
    """Run on the scheduler: the tally's ``(counted, again)`` byte counts."""
    return dask_scheduler.plugins[ReadTally.name].totals()
