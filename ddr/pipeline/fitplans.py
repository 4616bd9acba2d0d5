"""Calling estimators from the runner: arguments by role, and one-pass fit plans.

:func:`fit_plan` asks an estimator for its :class:`ddr.base.FitPlan` (the one-pass fit
protocol: every estimator whose fit is one pass of statistics implements ``_fit_plan``;
the common test suite makes sure of it). Errors it raises are the estimator's refusal of
the inputs and propagate to the caller.
"""

from __future__ import annotations

import inspect
from typing import Any

from ddr.base import FitPlan
from ddr.pipeline.registry import FEATURE_ROLES
from ddr.stats._grid import SampleDims

__all__ = [
    "SAMPLE_DIMS_ATTR",
    "call",
    "call_kwargs",
    "fit_plan",
    "mark_sample_dims",
    "sample_dims_of",
]


def _accepts(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


#: Attribute of a pipeline input's DataArray that names the dims its ``sample_dims:`` made
#: the samples (a list): every call on it passes them as ``sample_dims=`` (read as a grid)
SAMPLE_DIMS_ATTR = "ddr:sample_dims"


def mark_sample_dims(arr: Any, dims: tuple[str, ...], mask: Any = None) -> Any:
    """``arr`` (an input's DataArray) marked as a grid over the sample dims ``dims``, with
    its ``mask`` where it is known (read while planning: every fit on it takes that one)."""
    return arr.assign_attrs({SAMPLE_DIMS_ATTR: SampleDims(dims, mask=mask)})


def sample_dims_of(X: Any) -> tuple[Any, Any]:
    """``(sample_dim, along)``: what a statistic of ``X`` takes as ``sample_dim`` (a grid
    input's ``SampleDims``, else X's first dim) and the one dim per-sample arrays (labels,
    weights) lie along (None: a grid over several sample dims, whose labels have them all)."""
    sdim = _sample_dim({"X": X})
    if isinstance(sdim, SampleDims):
        return sdim, sdim[0] if len(sdim) == 1 else None
    return sdim, sdim


def _sample_dim(args: dict[str, Any]) -> Any:
    """X's sample dim: the sample dims of a grid input (:func:`mark_sample_dims`, as
    ``SampleDims``: stacked into rows, masked features left out), else its first dim."""
    X = args.get("X")
    dims = getattr(X, "dims", None)
    grid = getattr(X, "attrs", {}).get(SAMPLE_DIMS_ATTR) if dims else None
    if grid:
        return grid if isinstance(grid, SampleDims) else SampleDims(tuple(grid))
    return dims[0] if dims else None


def _aligned(args: dict[str, Any]) -> dict[str, Any]:
    """1-D per-sample arrays named along X's sample dim (labels stored as ``(index,)``), and
    variable-length strings (numpy's StringDType, what Zarr v3 string arrays read as) as
    object arrays of str, the string labels the estimators take."""
    sdim = sample_dims_of(args.get("X"))[1]  # a grid's one sample dim (None: several)
    out = {}
    for role, value in args.items():
        dims = getattr(value, "dims", None)
        if (
            sdim is not None
            and role != "X"
            and role not in FEATURE_ROLES  # along the features, not the samples
            and dims is not None
            and len(dims) == 1
            and dims[0] != sdim
        ):
            # stored along another dim (e.g. ``index``): paired by position, so its own
            # coordinate (if any) must not be matched against X's
            value = value.rename({dims[0]: sdim})
            value = value.drop_vars(sdim) if sdim in value.coords else value
        if role != "X" and getattr(getattr(value, "dtype", None), "kind", None) == "T":
            value = value.astype(object)
        out[role] = value
    return out


def call_kwargs(fn: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``fn`` from role values (and ``sample_dim`` when it takes one)."""
    kwargs = _aligned(args)
    sdim = _sample_dim(args)
    if sdim is not None and _accepts(fn, "sample_dim"):
        kwargs["sample_dim"] = sdim
    return kwargs


def call(est: Any, method: str, args: dict[str, Any]) -> Any:
    """``est.<method>(**roles)`` with roles as keywords (``X=``, ``y=``, ``model`` dropped)."""
    fn = getattr(est, method)
    roles = {k: v for k, v in args.items() if k != "model"}
    return fn(**call_kwargs(fn, roles))


def fit_plan(est: Any, args: dict[str, Any]) -> FitPlan | None:
    """The estimator's one-pass fit plan for these arguments, or None (a multi-pass fit)."""
    kwargs = call_kwargs(est.fit, args)
    return est._fit_plan(kwargs.pop("X"), **kwargs)
