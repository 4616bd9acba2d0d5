"""Blockwise maps over row blocks, in the input's form: :func:`map_rows`.

What every estimator's ``transform``, ``predict`` and ``score_samples`` run: ``fn`` on each
row block (numpy: the array; dask: every chunk, lazily; xarray: the data, then a DataArray on
the sample dims), with the blocks checked for NaN and infinity (input or output) and the
message naming the rows. Re-exported by :mod:`ddr.base`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import dask.array as da
import numpy as np

from ddr.stats._checks import block_start, check_rows, rows_at, sum_is_finite
from ddr.stats._grid_out import rows_dataarray
from ddr.stats._input import Rows
from ddr.stats._units import DataUnits
from ddr.stats.engine import aligned, shipped

__all__ = ["RowCheck", "map_rows"]


def map_rows(
    rows: Rows,
    fn: Callable[..., np.ndarray],
    *,
    n_out: int | None,
    dtype: Any,
    new_dim: str | None = None,
    new_coords: Sequence[Any] | None = None,
    name: str | None = None,
    args: tuple[Any, ...] = (),
    check: RowCheck = "input",
    allow_nan: bool = False,
    method: str = "",
    hint: str = "",
    units: DataUnits = None,
) -> Any:
    """Apply ``fn(block, *args)`` to every row block and return the result in the input's form.

    Every block is checked where it is computed (``check``): rows with NaN or infinity are
    refused, naming how many and where (:func:`check_rows`); ``"output"`` also refuses an
    output that overflows its dtype.

    Parameters
    ----------
    rows : Rows
        The validated input.
    fn : callable
        Maps an (n_block, n_features) numpy block to (n_block, n_out), or to (n_block,) when
        ``n_out`` is None (predictions). Must be a module-level function (it is shipped to
        workers) taking the small fitted arrays in ``args``.
    n_out : int or None
        Output width, or None for a 1-D output.
    dtype : dtype
        Output dtype.
    new_dim, new_coords : str, sequence
        Name and coordinate of the output's second dim for xarray output.
    name : str, optional
        Name of the output DataArray and prefix of the dask keys.
    check : {"input", "output", None}
        ``"input"``: each block of X must be finite. ``"output"``: each block of the output
        must be finite (for methods whose output is finite exactly when their input is:
        NaN in X shows there, and so does a value too large for ``dtype``); a block that is
        not is explained from X. None: no check (outputs that may be infinite on purpose,
        such as log-densities, or NaN that is passed through).
    allow_nan : bool
        NaN in X is accepted (missing values the method handles); infinity is not.
    method : str
        The method, as messages name it (``"PCA.transform"``).
    hint : str
        Said after the refusal of NaN (what to use instead).
    units : str, mapping or None
        The output's units, the ``units`` attribute of a DataArray output: the estimator's
        ``_output_units(power)`` of the fitted data's units (``ddr.stats._units``).
    """
    X = rows.data
    label = name or fn.__name__.strip("_")
    fn = functools.partial(
        _checked_block, fn=fn, check=check, nan_ok=allow_nan, what=method, hint=hint
    )
    if rows.is_lazy:
        # big fitted values go into the graph once, as their own keys, not into every task
        args = tuple(shipped(a) for a in args)
        if n_out is None:
            out = X.map_blocks(
                fn,
                *args,
                drop_axis=1,
                chunks=(X.chunks[0],),
                dtype=dtype,
                meta=np.empty((0,), dtype=dtype),
                name=_key_name(name, fn, X, args),
            )
        else:
            out = X.map_blocks(
                fn,
                *args,
                chunks=(X.chunks[0], (n_out,)),
                dtype=dtype,
                meta=np.empty((0, 0), dtype=dtype),
                name=_key_name(name, fn, X, args),
            )
    else:
        out = fn(X, *args)
    if rows.kind != "xarray":
        return out
    attrs = {}
    if method:
        est, _, meth = method.partition(".")
        attrs = {"long_name": f"{meth or est} output of {est}", "ddr:estimator": est}
        attrs.update({"ddr:method": meth} if meth else {})
    return rows_dataarray(rows, out, n_out, new_dim, new_coords, label, attrs, units)


def _key_name(name: str | None, fn: Callable, X: da.Array, args: tuple[Any, ...]) -> str:
    from dask.base import tokenize

    base = fn.keywords["fn"] if isinstance(fn, functools.partial) else fn
    return f"{name or base.__name__}-{tokenize(fn, X, *args)}"


#: what :func:`map_rows` checks in each block
RowCheck = Literal["input", "output"] | None


def _checked_block(
    X: Any,
    *args: Any,
    fn: Callable[..., np.ndarray],
    check: str | None,
    nan_ok: bool,
    what: str,
    hint: str,
    block_info: dict[Any, Any] | None = None,
) -> np.ndarray:
    """``fn(X, *args)`` with :func:`check_rows` of ``X`` first (``check="input"``) or of its
    output (``check="output"``), its arguments aligned (:func:`ddr.stats.engine.aligned`:
    arrays a worker received may start at odd bytes, where numpy rounds another way)."""
    args = aligned(args)
    if check is None:
        return fn(X, *args)
    start = block_start(block_info)
    if check == "input":
        check_rows(X, start, what, hint, nan_ok=nan_ok)
        return fn(X, *args)
    with np.errstate(over="ignore", invalid="ignore"):  # what they lead to is said below
        out = fn(X, *args)
    if (
        isinstance(out, np.ndarray)
        and out.dtype.kind in "fc"
        and not sum_is_finite(out)
        and not np.isfinite(out).all()
    ):
        check_rows(X, start, what, hint, nan_ok=nan_ok)
        n_bad = int((~np.isfinite(out)).reshape(out.shape[0], -1).any(axis=1).sum())
        values = X.data if hasattr(X, "tocsr") else np.asarray(X)
        largest = float(np.nanmax(np.abs(values))) if values.size else 0.0
        raise ValueError(
            f"the output{' of ' + what if what else ''} is not finite in {n_bad} of the "
            f"{out.shape[0]} rows {rows_at(start or 0, out.shape[0])} though X is (its largest "
            f"magnitude is {largest:.3g}): too large for {out.dtype}; scale X, or give it as "
            "float64"
        )
    return out
