"""Count the chunk bytes read from each input, in whichever process reads them.

The runner opens local Zarr inputs through :class:`CountingStore` (a LocalStore that adds the
size of every chunk it returns to a per-process counter keyed by the store's root), and inputs
at URLs through :class:`CountingWrapper` (zarr's ``WrapperStore`` around the location's store,
counting the same way). The counters
of the client process and of every worker (``client.run(read_counts)``) summed and divided
by the stored size of an array give the passes over it that the run summary reports: a
measurement, not a promise.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from zarr.storage import LocalStore, WrapperStore

from ddr.io.locations import Location

__all__ = [
    "CountingStore",
    "CountingWrapper",
    "count_key",
    "read_counts",
    "stored_bytes",
]

_LOCK = threading.Lock()
_COUNTS: dict[str, int] = defaultdict(int)
_METADATA = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")


def read_counts() -> dict[str, int]:
    """Chunk bytes read in this process so far, by ``"<store root>::<array path>"`` (never
    reset: take differences)."""
    with _LOCK:
        return dict(_COUNTS)


def count_key(root: str, array: str) -> str:
    return f"{root}::{array.strip('/')}"


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
            with _LOCK:
                _COUNTS[count_key(str(self.root), _array_of(key))] += n_bytes

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        buf = await super().get(key, prototype, byte_range)
        if buf is not None:
            self.observe_read(key, len(buf))
        return buf

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> Any:
        key_ranges = list(key_ranges)
        out = await super().get_partial_values(prototype, key_ranges)
        with _LOCK:
            for (k, _), b in zip(key_ranges, out, strict=True):
                if b is not None and not k.endswith(_METADATA):
                    _COUNTS[count_key(str(self.root), _array_of(k))] += len(b)
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
            k = count_key(self.label, _array_of(key))
            with _LOCK:
                _COUNTS[k] += n_bytes

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
