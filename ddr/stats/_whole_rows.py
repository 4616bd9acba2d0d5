"""Whole rows from data chunked along its features, and the check that a row block fits.

ddr reads rows: every statistic's ``from_block`` needs all the features of its rows. Data
chunked along features (gridded stores chunked by space: time x lat/4 x lon/4) is made into
row blocks before anything is read:

- a Zarr array read through ddr's reader gets one task per row block that reads every stored
  chunk of its rows (:mod:`ddr.io.row_blocks`, through :func:`ddr._hooks.dask_reader`);
- any other dask array is merged by dask's own ``rechunk`` along the feature axes, but only
  when dask's graph for it is a plain concatenation: each chunk of the input used by exactly
  one task of the merge, one merged block per row block (:func:`merge_feature_chunks`);
  otherwise the input is refused with the rechunk that fixes it.

Either way a task then holds a whole row block, which may be far larger than a stored chunk
(a year of daily 0.25 degree fields is 1.5e9 values). :func:`check_row_blocks` refuses,
before any data is read, a row block that one task of a worker cannot hold, naming the block,
the worker's memory and the row chunking that fits.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.core import flatten
from dask.highlevelgraph import HighLevelGraph

__all__ = [
    "TaskBudget",
    "block_task_nbytes",
    "check_row_blocks",
    "distributed_client",
    "merge_feature_chunks",
    "task_budget",
]

#: bytes a task holds per value of its row block, on top of the block as read: the float64
#: copy the statistics work on (``Moments`` centres the block in float64)
WORK_ITEMSIZE = 8


def distributed_client(scheduler: Any = None) -> Any:
    """The distributed Client that would run a graph now, or None (a local scheduler)."""
    from distributed import Client

    owner = getattr(dask.base.get_scheduler(scheduler=scheduler), "__self__", None)
    return owner if isinstance(owner, Client) else None


@dataclasses.dataclass(frozen=True)
class TaskBudget:
    """What one task may hold: the memory at which dask pauses a worker, shared by its threads.

    Parameters
    ----------
    limit : int
        The worker's memory limit in bytes (the machine's memory for a local scheduler).
    nthreads : int
        Tasks the worker runs at once.
    fraction : float
        The fraction of ``limit`` at which the worker stops running tasks
        (``distributed.worker.memory.pause``).
    where : str
        The worker, in words, for messages.
    """

    limit: int
    nthreads: int
    fraction: float
    where: str

    @property
    def per_task(self) -> int:
        """Bytes one task may hold."""
        return int(self.fraction * self.limit / max(self.nthreads, 1))


def task_budget(scheduler: Any = None) -> TaskBudget | None:
    """The budget of one task on the scheduler that would run a graph now: the smallest of a
    distributed cluster's workers (per thread), or this machine's memory shared by dask's
    local threads; None when nothing is known (workers without a memory limit)."""
    # a worker that never pauses holds tasks up to its limit
    fraction = float(dask.config.get("distributed.worker.memory.pause", 0.8) or 1.0)
    client = distributed_client(scheduler)
    if client is not None:
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        known = [
            (int(w.get("memory_limit") or 0), int(w.get("nthreads") or 1), addr)
            for addr, w in workers.items()
            if w.get("memory_limit")
        ]
        if not known:
            return None
        limit, nthreads, addr = min(known, key=lambda k: k[0] / k[1])
        return TaskBudget(limit, nthreads, fraction, f"worker {addr}")
    try:
        import psutil
    except ImportError:  # distributed brings psutil; without it nothing is known
        return None
    threads = int(dask.config.get("num_workers", None) or (dask.system.CPU_COUNT or 1))
    return TaskBudget(int(psutil.virtual_memory().total), threads, fraction, "this machine")


def block_task_nbytes(rows: int, width: int, itemsize: int) -> int:
    """Bytes one task holds for a row block of ``rows`` x ``width`` values of ``itemsize``
    bytes: the block as read and the float64 copy the statistics work on."""
    return rows * width * (itemsize + WORK_ITEMSIZE)


def rows_that_fit(budget: TaskBudget, width: int, itemsize: int) -> int:
    """The most rows of ``width`` features one task of ``budget`` can hold (0: not one)."""
    return budget.per_task // max(block_task_nbytes(1, width, itemsize), 1)


def check_row_blocks(
    x: da.Array,
    sample_axes: tuple[int, ...],
    name: str,
    rechunk: Callable[[int], str],
    scheduler: Any = None,
) -> None:
    """Refuse (``ValueError``) row blocks that one task cannot hold, before anything is read.

    Parameters
    ----------
    x : dask.array.Array
        The data in whole-row blocks: one chunk along every axis not in ``sample_axes``.
    sample_axes : tuple of int
        The axes that index samples; a row block's rows are the product of its extents
        along them.
    name : str
        What messages call the data.
    rechunk : callable
        ``rechunk(rows)``: in words, how to give the data row blocks of at most ``rows``
        rows (the storage chunking or the call that does it).
    scheduler : optional
        The scheduler the graph will run on (default: dask's current one).
    """
    budget = task_budget(scheduler)
    if budget is None:
        return
    extents = [max(x.chunks[a], default=0) for a in sample_axes]
    if any(math.isnan(e) for e in extents):
        return  # unknown chunk sizes: checked by nothing here
    # chunks form a grid: the largest block is the product of the largest extents
    rows = math.prod(int(e) for e in extents)
    width = math.prod(int(s) for i, s in enumerate(x.shape) if i not in sample_axes)
    itemsize = np.dtype(x.dtype).itemsize
    need = block_task_nbytes(rows, width, itemsize)
    if need <= budget.per_task:
        return
    fit = rows_that_fit(budget, width, itemsize)
    held = (
        f"{budget.where} has memory_limit {_mib(budget.limit)} and runs {budget.nthreads} "
        f"task(s) at once: {_mib(budget.per_task)} per task before dask pauses it "
        f"({budget.fraction:.0%} of the limit)"
    )
    block = (
        f"{name}: a row block of {rows} rows x {width} features ({np.dtype(x.dtype)}) needs "
        f"{_mib(need)} in one task (the block as read, {_mib(rows * width * itemsize)}, and "
        f"the float64 copy the statistics work on), more than a task can hold: {held}"
    )
    if fit < 1:
        raise ValueError(
            f"{block}. Not even one row of {width} features fits: give each worker more "
            "memory (memory_limit) or fewer threads"
        )
    raise ValueError(f"{block}. Give {name} row blocks of at most {fit} rows: {rechunk(fit)}")


def _mib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def merge_feature_chunks(x: da.Array, whole_axes: tuple[int, ...]) -> da.Array | None:
    """``x`` with each axis of ``whole_axes`` in one chunk by dask's ``rechunk``, when dask's
    graph for it keeps one read per chunk; else None.

    The merge is taken only when the tasks it adds concatenate: every chunk of ``x`` is used
    by exactly one of them, and there is one merged block per block of ``x``'s other axes
    (its row blocks). A plan that splits chunks in an intermediate stage, or hands one chunk
    to several tasks, is not.

    Parameters
    ----------
    x : dask.array.Array
    whole_axes : tuple of int
        The feature axes to merge.

    Returns
    -------
    dask.array.Array or None
        The values of ``x`` with one chunk along ``whole_axes``, ``x``'s chunks along the
        other axes.
    """
    # dask's task-based merge (p2p, distributed's default for large arrays, is a shuffle)
    try:
        y = x.rechunk({a: -1 for a in whole_axes}, method="tasks")
    except ValueError:  # unknown chunk sizes: dask has no plan
        return None
    if y is x:
        return x
    graph, below = y.__dask_graph__(), x.__dask_graph__()
    if not isinstance(graph, HighLevelGraph) or not isinstance(below, HighLevelGraph):
        return None
    ours = set(below.layers)
    added = [name for name in graph.layers if name not in ours]
    if any(c != x.chunks[i] for i, c in enumerate(y.chunks) if i not in whole_axes):
        return None
    inputs = set(flatten(x.__dask_keys__()))
    outputs = set(flatten(y.__dask_keys__()))
    deps = graph.get_all_dependencies()
    users: collections.Counter[Any] = collections.Counter()
    tasks = 0
    for layer in added:
        for key in graph.layers[layer]:
            tasks += 1
            used = deps.get(key, set()) & inputs
            if used and key not in outputs:
                return None  # an intermediate stage reads x's chunks
            users.update(used)
    rows = math.prod(n for i, n in enumerate(x.numblocks) if i not in whole_axes)
    if set(users) != inputs or any(n != 1 for n in users.values()) or tasks != rows:
        return None
    return y
