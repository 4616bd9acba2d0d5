"""The reduction engine: one pass over the row blocks of X, a statistic per block, a tree merge.

Several statistics of the same input are computed in the same task per block, so the input is
read once whatever their number. For dask input the engine builds one task per row block and a
merge tree of bounded fan-in (``split_every``); memory per worker stays at a few blocks.

Results are bit-identical between runs on the same cluster and chunking: the tree is fixed
by the blocks (each merge task merges its parts in block order), every task runs BLAS on one
thread, and every array a task gets is aligned first (:func:`aligned`). That last one is
needed because distributed hands a task the arrays of its graph (a statistic's options such
as PPCA's loadings, an array embedded by ``da.from_array``) and the values other tasks sent
as views of the message they came in, at whatever byte offset the message put them: a
float64 array that is not 8-byte aligned makes numpy's matmul use its own loop instead of
BLAS, which rounds differently (measured: PPCA's E-step sums 1e-13 apart, its scores 1e-14,
its log-likelihood 2e-9 after 50 iterations, from one run to the next).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any

import dask
import numpy as np
from dask.core import flatten
from dask.delayed import Delayed, unpack_collections
from dask.highlevelgraph import HighLevelGraph

from ddr.stats._input import Rows, align_to_rows, as_rows
from ddr.stats._whole_rows import distributed_client
from ddr.stats.base import Statistic, StatSpec, as_spec

__all__ = [
    "DEFAULT_SPLIT_EVERY",
    "BlockRows",
    "compute",
    "compute_with_rows",
    "aligned",
    "default_split_every",
    "lazy",
    "one_blas_thread",
    "payload_nbytes",
    "shipped",
]

DEFAULT_SPLIT_EVERY = 16
# A merge task holds its fan-in of partial statistics at once: keep the d x d matrices it
# holds near 128 MiB each (a class statistic holds one per class), so wide data merges in a
# deeper tree instead of a worker gathering sixteen 32 MB matrices per class.
_MERGE_BYTES = 2**27


def default_split_every(n_features: int) -> int:
    """The merge fan-in used when none is given: 16, less for d above 1024 (2 from d = 2900)."""
    return int(np.clip(_MERGE_BYTES // (8 * max(n_features, 1) ** 2), 2, DEFAULT_SPLIT_EVERY))


# numpy input is cut into blocks of about this many bytes (as float64) to bound the temporaries.
_NUMPY_BLOCK_BYTES = 64 * 2**20

StatsArg = type[Statistic] | StatSpec | Sequence[type[Statistic] | StatSpec]


def _specs(stats: StatsArg) -> tuple[tuple[StatSpec, ...], bool]:
    if isinstance(stats, (list, tuple)):
        if not stats:
            raise ValueError("stats: give at least one statistic")
        return tuple(as_spec(s) for s in stats), False
    return (as_spec(stats),), True


def aligned(value: Any) -> Any:
    """``value`` with every numpy array in it aligned for its dtype (copied if it is not).

    Looks into tuples, lists, dicts, :class:`~ddr.stats.base.StatSpec` options and dataclass
    instances (statistics, PPCA's parameters), and gives back ``value`` itself when nothing
    in it needed a copy. Arrays that distributed deserialised into a message's buffer may
    start at any byte: numpy's matmul then skips BLAS and rounds differently, so a result
    would depend on where a message put its arrays.

    Parameters
    ----------
    value : object

    Returns
    -------
    object
        ``value``, or a copy of it whose arrays are aligned.
    """
    if isinstance(value, np.ndarray):
        return value if value.flags.aligned else value.copy(order="K")
    if isinstance(value, (tuple, list)):
        items = [aligned(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if type(value) in (tuple, list) else type(value)(*items)
    if isinstance(value, dict):
        new = {k: aligned(v) for k, v in value.items()}
        return value if all(new[k] is v for k, v in value.items()) else new
    if isinstance(value, StatSpec):
        options = aligned(value.options)
        return value if options is value.options else StatSpec(value.cls, options)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        changed = {}
        for name in fields:
            old = getattr(value, name)
            new = aligned(old)
            if new is not old:
                changed[name] = new
        return dataclasses.replace(value, **changed) if changed else value
    return value


#: bytes of arrays above which a fitted value goes into a dask graph as one key its block
#: tasks read (:func:`shipped`): distributed sends every task's arguments to its worker with
#: that task, so a value embedded in the tasks travels, and is decoded, once per block
SHIP_BYTES = 2**16


def payload_nbytes(value: Any) -> int:
    """Bytes of the numpy arrays in ``value``, looked for where :func:`aligned` looks.

    Parameters
    ----------
    value : object

    Returns
    -------
    int
    """
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (tuple, list)):
        return sum(payload_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(payload_nbytes(v) for v in value.values())
    if isinstance(value, StatSpec):
        return payload_nbytes(value.options)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(payload_nbytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    return 0


def shipped(value: Any, lazy: bool = True) -> Any:
    """``value`` as an argument of a dask graph's block tasks: one ``Delayed`` (a key that
    every block task depends on, sent once to each worker) when it holds more than
    :data:`SHIP_BYTES` of arrays, else ``value`` itself, embedded in the tasks.

    The engine ships the options of the statistics it computes, and
    :func:`ddr.base.map_rows` the fitted arguments of blockwise methods: a Gaussian
    mixture's precision factors on 2 000 features (160 MB) went to a worker with each of
    its blocks' tasks.

    Parameters
    ----------
    value : object
        A fitted value: an array, or arrays in a tuple, list, dict or dataclass.
    lazy : bool, default True
        Whether it goes into a dask graph (else it is returned as it is).

    Returns
    -------
    object or Delayed
    """
    if lazy and not isinstance(value, Delayed) and payload_nbytes(value) > SHIP_BYTES:
        return dask.delayed(value, pure=True, traverse=False)
    return value


def _shipped_spec(spec: StatSpec) -> StatSpec:
    options = tuple((name, shipped(v)) for name, v in spec.options)
    if all(a[1] is b[1] for a, b in zip(options, spec.options, strict=True)):
        return spec
    return StatSpec(spec.cls, options)


def _block_stats(
    specs: tuple[StatSpec, ...], X: np.ndarray, y: np.ndarray | None, w: np.ndarray | None
) -> tuple[int, tuple[Statistic, ...]]:
    specs, X, y, w = aligned((specs, X, y, w))
    return X.shape[0], tuple(s.from_block(X, y if s.accepts_labels else None, w) for s in specs)


_CONTROLLER: list[Any] = []


def one_blas_thread() -> Any:
    """A context in which BLAS runs on one thread (the threadpool controller, slow to make,
    is made once per process)."""
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


def _block_stats_one_blas_thread(
    specs: tuple[StatSpec, ...], X: np.ndarray, y: np.ndarray | None, w: np.ndarray | None
) -> tuple[int, tuple[Statistic, ...]]:
    """:func:`_block_stats` with one BLAS thread: dask already runs a task per core, and a
    multi-threaded BLAS under it oversubscribes the cores (measured 13x slower on 2 cores)."""
    with one_blas_thread():
        return _block_stats(specs, X, y, w)


def _merge_parts(*parts: tuple[int, tuple[Statistic, ...]]) -> tuple[int, tuple[Statistic, ...]]:
    parts = aligned(parts)  # sent by other tasks: see the module's notes
    n = sum(m for m, _ in parts)
    first, *rest = (stats for _, stats in parts)
    merged = tuple(a.merge_many([r[i] for r in rest]) for i, a in enumerate(first))
    return n, merged


def _finish(part: tuple[int, tuple[Statistic, ...]], single: bool) -> Any:
    n, stats = part
    if n == 0:
        raise ValueError("X is empty: it has 0 samples")
    return stats[0] if single else stats


def _check_inputs(specs: tuple[StatSpec, ...], rows: Rows, y: Any) -> None:
    n, d = rows.shape
    if d == 0:
        raise ValueError("X has 0 features")
    if n == 0:
        raise ValueError("X is empty: it has 0 samples")
    if y is None:
        missing = [repr(s) for s in specs if s.needs_labels]
        if missing:
            raise ValueError(f"{', '.join(missing)} need(s) class labels y; got y=None")
    if rows.is_sparse:
        dense_only = [s.cls.__name__ for s in specs if not s.accepts_sparse]
        if dense_only:
            raise TypeError(
                f"{', '.join(dense_only)} take(s) dense rows; X holds scipy.sparse rows. "
                "Densify them (X.toarray(), or X.map_blocks(lambda b: b.toarray()) for a dask "
                "array) if they fit, or use a statistic that reads sparse rows"
            )


def lazy(
    stats: StatsArg,
    X: Any,
    y: Any = None,
    sample_weight: Any = None,
    *,
    sample_dim: Hashable | None = None,
    split_every: int | None = None,
) -> Delayed:
    """The merged statistic(s) of ``X`` as a dask ``Delayed``, for composition.

    Pass several ``lazy`` results to one ``dask.compute`` to share the pass over their common
    input. numpy input is wrapped as a single-block dask array.

    Parameters
    ----------
    stats : Statistic class, StatSpec, or a list/tuple of them
        As for :func:`compute`.
    X : array-like, dask.array.Array or xarray.DataArray, shape (n_samples, n_features)
        As for :func:`compute`.
    y : array-like of shape (n_samples,), optional
        Class labels, for statistics that use them.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative frequency weights.
    sample_dim : hashable, optional
        The sample dimension of a DataArray ``X`` (default: its first dimension).
    split_every : int, optional
        Fan-in of the merge tree (default as for :func:`compute`).

    Returns
    -------
    Delayed
        Computes to what :func:`compute` returns.
    """
    specs, single = _specs(stats)
    rows = as_rows(X, sample_dim=sample_dim)
    if not rows.is_lazy:
        import dask.array as da

        rows = Rows(da.from_array(rows.data, chunks=(_numpy_block_rows(rows.data), -1)), "dask")
    return _lazy_rows(specs, single, rows, y, sample_weight, split_every)


def _lazy_rows(
    specs: tuple[StatSpec, ...],
    single: bool,
    rows: Rows,
    y: Any,
    sample_weight: Any,
    split_every: int | None,
) -> Delayed:
    y = align_to_rows(y, rows, "y")
    w = align_to_rows(sample_weight, rows, "sample_weight")
    _check_inputs(specs, rows, y)
    specs = tuple(_shipped_spec(s) for s in specs)
    fan_in = _fan_in(rows.shape[1], split_every)

    # The graph is written out directly (one layer: a task per block and the merge tree)
    # rather than built by a dask.delayed call per task: that tokenised and merged a graph
    # per call, 0.2 ms a block on the client (40 ms for 160 blocks, 0.3 s for 1600), which
    # every fit paid before its first task ran. The chunk tasks of X, y and w stay as they
    # are (not fused into ours): statistics computed together with other work over the same
    # input (one dask.compute) then share its chunk reads instead of reading private copies.
    token = dask.base.tokenize(specs, rows.data, y, w, fan_in)
    spec_arg, spec_deps = unpack_collections(specs)  # a dask value in an option: once
    x_keys = list(flatten(rows.data.__dask_keys__()))
    y_keys = [None] * len(x_keys) if y is None else list(flatten(y.__dask_keys__()))
    w_keys = [None] * len(x_keys) if w is None else list(flatten(w.__dask_keys__()))
    block = f"ddr-stats-block-{token}"
    layer: dict[Any, Any] = {
        (block, i): (_block_stats_one_blas_thread, spec_arg, xk, yk, wk)
        for i, (xk, yk, wk) in enumerate(zip(x_keys, y_keys, w_keys, strict=True))
    }
    final = _merge_tree(layer, [(block, i) for i in range(len(x_keys))], token, fan_in, single)
    deps = [c for c in (rows.data, y, w) if c is not None] + list(spec_deps)
    return Delayed(final, HighLevelGraph.from_collections(final, layer, dependencies=deps))


def _fan_in(n_features: int, split_every: int | None) -> int:
    fan_in = default_split_every(n_features) if split_every is None else int(split_every)
    if fan_in < 2:
        raise ValueError(f"split_every must be at least 2; got {split_every}")
    return fan_in


def _merge_tree(
    layer: dict[Any, Any], level: list[Any], token: str, fan_in: int, single: bool
) -> str:
    """Add the merge tree of bounded fan-in over the block tasks ``level``; its final key."""
    merge = f"ddr-stats-merge-{token}"
    depth = 0
    while len(level) > 1:
        nxt = []
        for j, i in enumerate(range(0, len(level), fan_in)):
            layer[(merge, depth, j)] = (_merge_parts, *level[i : i + fan_in])
            nxt.append((merge, depth, j))
        level = nxt
        depth += 1
    form = "one" if single else "all"  # a single statistic and a list differ in shape
    final = f"ddr-stats-{form}-{token}"
    layer[final] = (_finish, level[0], single)
    return final


def compute(
    stats: StatsArg,
    X: Any,
    y: Any = None,
    sample_weight: Any = None,
    *,
    sample_dim: Hashable | None = None,
    split_every: int | None = None,
    **compute_kwargs: Any,
) -> Any:
    """Compute one or several statistics of ``X`` in one pass over its rows.

    Parameters
    ----------
    stats : Statistic class, StatSpec, or a list/tuple of them
        E.g. ``Moments``, ``Moments.spec(diagonal=True)`` or ``[Moments, ClassMoments]``.
    X : array-like, dask.array.Array or xarray.DataArray, shape (n_samples, n_features)
        Dask arrays chunked along features are read in whole-row blocks (a Zarr array a
        row block per task; see ``ddr.stats._input.as_rows``).
    y : array-like of shape (n_samples,), optional
        Class labels (integer, float or string), for statistics that use them.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative frequency weights.
    sample_dim : hashable, optional
        The sample dimension of a DataArray ``X`` (default: its first dimension).
    split_every : int, optional
        Fan-in of the merge tree (default 16, fewer for more than 1024 features: see
        ``ddr.stats.engine.default_split_every``).
    **compute_kwargs
        Passed to ``dask.compute`` for dask input (e.g. ``scheduler=``).

    Returns
    -------
    Statistic or tuple of Statistic
        One merged statistic for a single ``stats``; a tuple in the same order for a list.
    """
    specs, single = _specs(stats)
    rows = as_rows(X, sample_dim=sample_dim)
    if rows.is_lazy:
        (result,) = dask.compute(
            _lazy_rows(specs, single, rows, y, sample_weight, split_every), **compute_kwargs
        )
        return aligned(result)  # as it came in a message
    y = align_to_rows(y, rows, "y")
    w = align_to_rows(sample_weight, rows, "sample_weight")
    _check_inputs(specs, rows, y)
    step = _numpy_block_rows(rows.data)
    parts = [
        _block_stats(
            specs,
            rows.data[i : i + step],
            None if y is None else y[i : i + step],
            None if w is None else w[i : i + step],
        )
        for i in range(0, rows.shape[0], step)
    ]
    return _finish(_merge_parts(*parts), single)


def _numpy_block_rows(X: np.ndarray) -> int:
    return max(1, _NUMPY_BLOCK_BYTES // (8 * max(X.shape[1], 1)))


# ------------------------------------------------- per-row parameters kept between passes


@dataclasses.dataclass(frozen=True)
class BlockRows:
    """Per-row parameters kept between passes, one array per row block of X, in order.

    What :func:`compute_with_rows` returns and takes back on the next pass over the same X.
    For dask input the blocks are persisted where the scheduler computed them (on a cluster:
    the workers' memory, beside nothing else of X); for numpy input they are numpy arrays.

    Parameters
    ----------
    blocks : tuple
        One ``(n_block_rows, width)`` array (or persisted dask ``Delayed`` of one) per block.
    """

    blocks: tuple[Any, ...]


def _rows_step(spec: StatSpec, X: Any, rows: np.ndarray | None) -> tuple[Any, np.ndarray]:
    spec, X, rows = aligned((spec, X, rows))
    with one_blas_thread():
        stat, new = spec.from_block_with_rows(X, rows)
    return (X.shape[0], (stat,)), new


def _rows_step_part(result: tuple[Any, np.ndarray]) -> Any:
    return result[0]


def _rows_step_rows(result: tuple[Any, np.ndarray]) -> np.ndarray:
    return result[1]


def compute_with_rows(
    stat: type[Statistic] | StatSpec,
    X: Any,
    rows: BlockRows | None = None,
    *,
    sample_dim: Hashable | None = None,
    split_every: int | None = None,
    **compute_kwargs: Any,
) -> tuple[Statistic, BlockRows]:
    """One pass of a statistic that also updates per-row parameters: EM with row latents.

    Each block's task reads its rows of X and its rows' parameters, and gives its statistic
    (merged in the tree as by :func:`compute`) and its rows' new parameters, which stay beside
    the block for the next pass (``statistic.from_block_with_rows``; e.g. pLSA's document
    mixtures). X is read once; the parameters cost ``n_samples x width`` floats of memory
    (on the cluster's workers for dask input).

    Parameters
    ----------
    stat : Statistic class or StatSpec
        A statistic with ``carries_rows`` (its options in the spec).
    X : array-like, scipy.sparse matrix, dask array or DataArray, shape (n_samples, n_features)
        The same X (same blocks) on every pass.
    rows : BlockRows, optional
        The parameters the previous pass gave; None on the first pass (the statistic starts
        them).
    sample_dim : hashable, optional
        The sample dimension of a DataArray ``X`` (default: its first dimension).
    split_every : int, optional
        Fan-in of the merge tree (default as for :func:`compute`).
    **compute_kwargs
        Passed to ``dask.persist`` and ``dask.compute`` for dask input.

    Returns
    -------
    stat : Statistic
        The merged statistic of all rows at their parameters.
    rows : BlockRows
        The rows' new parameters, for the next pass.
    """
    spec = as_spec(stat)
    if not spec.cls.carries_rows:
        raise TypeError(
            f"{spec.cls.__name__} keeps no per-row parameters between passes "
            "(carries_rows is False); use ddr.stats.compute"
        )
    data = as_rows(X, sample_dim=sample_dim)
    _check_inputs((spec,), data, None)
    fan_in = _fan_in(data.shape[1], split_every)
    if data.is_lazy:
        x_keys = list(flatten(data.data.__dask_keys__()))
    else:
        step = _numpy_block_rows(data.data)
        x_keys = list(range(0, data.shape[0], step))
    old = [None] * len(x_keys) if rows is None else list(rows.blocks)
    if len(old) != len(x_keys):
        raise ValueError(
            f"the per-row parameters are in {len(old)} blocks and X in {len(x_keys)}: pass "
            "the same X, in the same blocks, on every pass"
        )
    if not data.is_lazy:
        results = [
            _rows_step(spec, data.data[i : i + step], prev)
            for i, prev in zip(x_keys, old, strict=True)
        ]
        part = _merge_parts(*(r[0] for r in results))
        return _finish(part, True), BlockRows(tuple(r[1] for r in results))

    spec = _shipped_spec(spec)
    token = dask.base.tokenize(spec, data.data, [getattr(o, "key", None) for o in old], fan_in)
    spec_arg, spec_deps = unpack_collections(spec)
    step_name, part_name = f"ddr-rows-step-{token}", f"ddr-rows-part-{token}"
    layer: dict[Any, Any] = {}
    new_keys = []
    for i, (xk, prev) in enumerate(zip(x_keys, old, strict=True)):
        layer[(step_name, i)] = (_rows_step, spec_arg, xk, None if prev is None else prev.key)
        layer[(part_name, i)] = (_rows_step_part, (step_name, i))
        new_keys.append(f"ddr-rows-{token}-{i}")
        layer[new_keys[-1]] = (_rows_step_rows, (step_name, i))
    final = _merge_tree(layer, [(part_name, i) for i in range(len(x_keys))], token, fan_in, True)
    deps = [data.data, *(o for o in old if o is not None), *spec_deps]
    graph = HighLevelGraph.from_collections(final, layer, dependencies=deps)
    # the new parameters stay where they were computed; the statistic comes to the client
    new_rows = [Delayed(k, graph, layer=final) for k in new_keys]
    client = distributed_client(compute_kwargs.get("scheduler"))
    if client is not None:  # dask.persist would bring them to this process unless default
        persisted = client.persist([Delayed(final, graph), *new_rows])
    else:
        persisted = dask.persist(Delayed(final, graph), *new_rows, **compute_kwargs)
    (result,) = dask.compute(persisted[0], **compute_kwargs)
    return aligned(result), BlockRows(tuple(persisted[1:]))
