"""Results in the form of a DataArray input: rows back on the sample dims, features back on
the grid (:class:`ddr.stats._grid.FeatureLayout`), and the ``sample_dims=`` keyword of every
estimator method.

Estimators (``ddr.base``) call these; they know nothing of estimators themselves.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from ddr.stats._grid import FeatureLayout, SampleDims
from ddr.stats._grid_blocks import FeatureBlocks
from ddr.stats._input import Rows
from ddr.stats._units import DataUnits, with_units

__all__ = ["accept_sample_dims", "fitted_dataarray", "rows_dataarray", "take_sample_dims"]


def rows_dataarray(
    rows: Rows,
    out: Any,
    n_out: int | None,
    new_dim: str | None,
    new_coords: Sequence[Any] | None,
    name: str,
    attrs: Mapping[str, Any] | None = None,
    units: DataUnits = None,
) -> Any:
    """``out`` (numpy or dask, one row per row of ``rows``) as a DataArray on the input's
    sample dims and coordinates (several sample dims: unstacked again), with a new dim
    ``new_dim`` for 2-D output, or the input's feature dims and coordinates (masked features
    NaN) when ``new_dim`` is the rows' stacked feature dim.

    ``units`` (``ddr.stats._units``) become the ``units`` attribute: one string, or one
    per data variable of a Dataset fit, each given to its variable's part of a
    feature-shaped output (an output over all of them says units only where they agree)."""
    import xarray as xr

    tmpl = rows.template
    sdims = tuple(rows.sample_dims) if rows.sample_dims is not None else (rows.sample_dim,)
    on_samples = set(sdims)
    coords: dict[Hashable, Any] = {}
    if len(sdims) == 1 and sdims[0] in tmpl.coords:
        coords[sdims[0]] = tmpl.coords[sdims[0]]
    # non-index coords that live on the sample dims only (e.g. time labels) follow the rows
    for cname, coord in tmpl.coords.items():
        if cname not in coords and coord.dims and set(coord.dims) <= on_samples:
            coords[cname] = coord
    tail: tuple[Hashable, ...] = ()
    layout = rows.layout
    if isinstance(layout, FeatureBlocks) and n_out is not None and new_dim == layout.name:
        # a Dataset's features: one variable per block, each on its own grid
        parts = layout.split(out, axis=1)
        return xr.Dataset(
            {
                v: rows_dataarray(
                    dataclasses.replace(rows, layout=sub), part, sub.n_kept, sub.name, None,
                    v, attrs, _variable_units(units, v),
                )
                for v, sub, part in zip(layout.variables, layout.layouts, parts, strict=True)
            },
            attrs=dict(attrs or {}),
        )  # fmt: skip
    if n_out is not None:
        dim = new_dim or "component"
        if isinstance(layout, FeatureLayout) and dim == layout.name:
            out = layout.expand(out, axis=1)
            tail = layout.dims
            coords.update(layout.xr_coords())
        else:
            tail = (dim,)
            if new_coords is not None:
                coords[dim] = np.asarray(new_coords)
    if len(sdims) > 1:
        shape = tuple(tmpl.sizes[d] for d in sdims)
        out = out.reshape(shape + tuple(out.shape[1:]))
    return xr.DataArray(
        out, dims=sdims + tail, coords=coords, name=name, attrs=with_units(attrs, units)
    )


def fitted_dataarray(
    value: np.ndarray,
    dims: tuple[str, ...],
    *,
    feature_token: str,
    feature_dim: Hashable,
    feature_coords: Any,
    layout: FeatureLayout | FeatureBlocks | None,
    coords: Mapping[str, Any],
    name: str,
    attrs: Mapping[str, Any],
    units: DataUnits = None,
) -> Any:
    """A fitted attribute as a DataArray.

    Parameters
    ----------
    value : ndarray
        The attribute.
    dims : tuple of str
        Its declared dims; ``feature_token`` (and ``feature_token + suffix``, the second
        feature axis of a d x d matrix) stands for the training data's features.
    feature_dim, feature_coords
        The features' dim and coordinate of a 2-D input (no ``layout``).
    layout : FeatureLayout, FeatureBlocks or None
        The feature grid of an N-D input: each feature axis becomes its feature dims, with
        NaN at the masked features. The blocks of a Dataset give a Dataset, a variable per
        block (for attributes with one feature axis).
    coords : mapping
        Coordinates of the other dims (``class``); a dim named like a feature dim is renamed
        ``<estimator>_<dim>`` (fitted on PCA scores, a mixture's ``component`` and the
        features' ``component`` would be one dim twice).
    name : str
        The DataArray's name.
    attrs : mapping
        Its attributes.
    units : str, mapping or None
        Its units (``ddr.stats._units``): the ``units`` attribute; for a Dataset fit one
        per data variable, each given to its variable.
    """
    import xarray as xr

    if isinstance(layout, FeatureBlocks):
        return _fitted_dataset(value, dims, feature_token, layout, coords, name, attrs, units)
    feature_names = set(layout.dims) if layout is not None else {feature_dim}
    owner = str(attrs.get("ddr:estimator", "model")).lower()
    out_dims: list[Hashable] = []
    out_coords: dict[Hashable, Any] = {}
    for axis in range(len(dims) - 1, -1, -1):  # from the last: expanding moves later axes
        d = dims[axis]
        if d.startswith(feature_token):
            suffix = d[len(feature_token) :]
            if layout is not None:
                value = layout.expand(value, axis=axis)
                out_dims[:0] = [f"{f}{suffix}" for f in layout.dims]
                out_coords.update(layout.xr_coords(suffix))
            else:
                out_dims.insert(0, f"{feature_dim}{suffix}")
                if feature_coords is not None:
                    out_coords[f"{feature_dim}{suffix}"] = feature_coords
        else:
            own = f"{owner}_{d}" if d in feature_names else d
            out_dims.insert(0, own)
            if d in coords:
                out_coords[own] = coords[d]
    return xr.DataArray(
        value, dims=tuple(out_dims), coords=out_coords, name=name, attrs=with_units(attrs, units)
    )


def _fitted_dataset(
    value: np.ndarray,
    dims: tuple[str, ...],
    feature_token: str,
    blocks: FeatureBlocks,
    coords: Mapping[str, Any],
    name: str,
    attrs: Mapping[str, Any],
    units: DataUnits,
) -> Any:
    """A fitted attribute of a Dataset fit as a Dataset: its feature axis cut into the
    variables' blocks, each on its grid (:func:`fitted_dataarray`)."""
    import xarray as xr

    axes = [i for i, d in enumerate(dims) if d.startswith(feature_token)]
    if len(axes) != 1:
        raise ValueError(
            f"{attrs.get('ddr:estimator', 'the model')}.{attrs.get('ddr:attribute', name)} has "
            f"{len(axes)} feature axes; fitted on a Dataset, as_xarray gives attributes with "
            "one feature axis (one variable per block); the numpy attribute has the rest"
        )
    parts = blocks.split(value, axes[0])
    return xr.Dataset(
        {
            v: fitted_dataarray(
                part, dims, feature_token=feature_token, feature_dim=sub.name,
                feature_coords=None, layout=sub, coords=coords, name=v, attrs=attrs,
                units=_variable_units(units, v),
            )
            for v, sub, part in zip(blocks.variables, blocks.layouts, parts, strict=True)
        },
        attrs=dict(attrs),
    )  # fmt: skip


def _variable_units(units: DataUnits, variable: str) -> str | None:
    """The units of one data variable's part of an output."""
    if units is None or isinstance(units, str):
        return units
    return units.get(variable)


def accept_sample_dims(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a method with a ``sample_dim`` keyword, or ``**kwargs`` passed on to such
    methods) also taking ``sample_dims=``: a dim name or a tuple of them, passed on as
    ``sample_dim=SampleDims(...)``, which reads a DataArray as a grid (any number of dims,
    masks). Giving both is a TypeError."""
    if getattr(fn, "_takes_sample_dims", False):
        return fn
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    params = list(sig.parameters.values())
    named = "sample_dim" in sig.parameters
    if not named and not any(p.kind == p.VAR_KEYWORD for p in params):
        return fn
    owner = fn.__qualname__

    @functools.wraps(fn)
    def method(*args: Any, **kwargs: Any) -> Any:
        if "sample_dims" in kwargs:
            given = kwargs.pop("sample_dims")
            if kwargs.get("sample_dim") is not None:
                raise TypeError(
                    f"{owner}: give sample_dims or sample_dim, not both (sample_dims="
                    f"{given!r}, sample_dim={kwargs['sample_dim']!r}); sample_dims takes one "
                    "name or a tuple of names"
                )
            if given is not None:
                X = args[1] if len(args) > 1 else kwargs.get("X")
                kwargs["sample_dim"] = SampleDims.of(given, tuple(getattr(X, "dims", ())))
        return fn(*args, **kwargs)

    method._takes_sample_dims = True  # type: ignore[attr-defined]
    if named and sig.parameters["sample_dim"].kind == inspect.Parameter.KEYWORD_ONLY:
        extra = inspect.Parameter("sample_dims", inspect.Parameter.KEYWORD_ONLY, default=None)
        params.insert([p.name for p in params].index("sample_dim") + 1, extra)
        method.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        method.__doc__ = _documented(fn.__doc__)
    return method


def _documented(doc: str | None) -> str | None:
    """``doc`` with a ``sample_dims`` entry after its ``sample_dim`` parameter (numpydoc)."""
    if not doc:
        return doc
    lines = doc.split("\n")
    at = next((i for i, line in enumerate(lines) if line.strip().startswith("sample_dim :")), None)
    if at is None:
        return doc
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    end = at + 1
    while end < len(lines) and lines[end].startswith(indent + " "):
        end += 1
    entry = [
        f"{indent}sample_dims : hashable or tuple of hashable, optional",
        f"{indent}    The sample dims of a DataArray X of any number of dims: they are stacked",
        f"{indent}    into rows, the other dims are the features (those NaN at every sample, a",
        f"{indent}    mask, left out); see the user guide's page on gridded data. Not together",
        f"{indent}    with ``sample_dim``.",
    ]
    return "\n".join(lines[:end] + entry + lines[end:])


def take_sample_dims(cls: type) -> None:
    """Every public method of ``cls`` that takes ``sample_dim`` (or passes ``**kwargs`` on to
    one that does) also takes ``sample_dims=`` (:func:`accept_sample_dims`), in one place
    rather than in each estimator's signature."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        for attr, fn in vars(klass).items():
            if attr in seen or attr.startswith("_") or attr in ("set_params", "get_params"):
                continue
            seen.add(attr)
            # plain functions only: scikit-learn's request methods are descriptors
            if inspect.isfunction(fn) and not getattr(fn, "_takes_sample_dims", False):
                wrapped = accept_sample_dims(fn)
                if wrapped is not fn:
                    setattr(cls, attr, wrapped)
