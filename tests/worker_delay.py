"""A ``dask worker --preload`` for the worker-loss tests: every chunk a worker reads through
ddr's reader takes ``DDR_TEST_CHUNK_DELAY`` seconds longer, so that a pass over small test
data lasts long enough to kill a worker in the middle of it. Results are unchanged."""

from __future__ import annotations

import os
import time

from ddr.io.zarr_chunks import StoredChunks

_DELAY = float(os.environ.get("DDR_TEST_CHUNK_DELAY", "0"))

# a preload may be executed more than once in a worker: wrap the reader once only
if not hasattr(StoredChunks, "_undelayed_getitem"):
    StoredChunks._undelayed_getitem = StoredChunks.__getitem__

    def _slow_read(self, key):
        time.sleep(_DELAY)
        return StoredChunks._undelayed_getitem(self, key)

    StoredChunks.__getitem__ = _slow_read
