"""A Zarr LocalStore that counts the chunk bytes it reads, in whichever process reads them.

The benchmark opens every dataset through this store, so the passes any method makes over
the data (ddr, dask, dask-ml, a plain loop) are measured the same way: chunk bytes read in
all processes divided by the stored size of the array.
"""

from __future__ import annotations

import threading
from typing import Any

from zarr.storage import LocalStore

_lock = threading.Lock()
_bytes = 0


def read_bytes() -> int:
    """Chunk bytes read by counting stores in this process since the last reset."""
    return _bytes


def reset() -> None:
    global _bytes
    with _lock:
        _bytes = 0


class CountingLocalStore(LocalStore):
    """LocalStore whose ``get`` adds the bytes of every chunk it returns to a process counter,
    as do the chunk files :func:`ddr.io.from_zarr` reads itself (``observe_read``)."""

    def observe_read(self, key: str, n_bytes: int) -> None:
        global _bytes
        if not key.endswith(("zarr.json", ".zarray", ".zattrs", ".zgroup")):
            with _lock:
                _bytes += n_bytes

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        buf = await super().get(key, prototype, byte_range)
        if buf is not None:
            self.observe_read(key, len(buf))
        return buf
