"""Chunk reads held back, for tests that must act while a run is in the middle of a pass.

A ``dask worker --preload`` (the worker-loss tests) or an import in a ``ddr`` process (the
claims tests) wraps ddr's reader so that:

- every chunk read takes ``DDR_TEST_CHUNK_DELAY`` seconds longer (a pass over small test
  data then lasts long enough to kill a worker in the middle of it);
- with ``DDR_TEST_CHUNK_GATE=path``, the reads of data after the first
  ``DDR_TEST_CHUNK_FREE`` (default 0) wait until the file ``path`` exists: the test decides
  when the run goes on, rather than betting on how long a loaded machine takes to start
  the other process.

Results are unchanged.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ddr.io.zarr_chunks import StoredChunks

_DELAY = float(os.environ.get("DDR_TEST_CHUNK_DELAY", "0"))
_GATE = os.environ.get("DDR_TEST_CHUNK_GATE")
_FREE = int(os.environ.get("DDR_TEST_CHUNK_FREE", "0"))
_reads = 0
_count = threading.Lock()


def _wait_for_gate(key: tuple) -> None:
    global _reads
    if any(isinstance(k, slice) and k.start == k.stop for k in key):
        return  # dask's read of the array's meta (an empty block), not a read of data
    with _count:
        _reads += 1
        held = _reads > _FREE
    if held and _GATE:
        while not Path(_GATE).exists():
            time.sleep(0.05)


# a preload may be executed more than once in a worker: wrap the reader once only
if not hasattr(StoredChunks, "_undelayed_getitem"):
    StoredChunks._undelayed_getitem = StoredChunks.__getitem__

    def _slow_read(self, key):
        _wait_for_gate(key if isinstance(key, tuple) else (key,))
        time.sleep(_DELAY)
        return StoredChunks._undelayed_getitem(self, key)

    StoredChunks.__getitem__ = _slow_read
