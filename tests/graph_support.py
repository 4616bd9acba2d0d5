"""What a dask collection's graph carries, for tests that a fitted value goes into it once."""

from __future__ import annotations

import pickle
from typing import Any


def task_nbytes(collection: Any) -> dict[Any, int]:
    """The pickled size of every task of ``collection``'s graph, by key: what distributed
    sends with the task (a value embedded in it travels with every such task)."""
    return {k: len(pickle.dumps(t)) for k, t in dict(collection.__dask_graph__()).items()}
