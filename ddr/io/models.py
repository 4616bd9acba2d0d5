"""Save fitted estimators to Zarr groups and load them back, exactly, without pickle.

Layout of a saved model (a Zarr v3 group):

- attrs ``ddr:model`` (``module.Class``, always inside the ``ddr`` package), ``ddr:version``,
  ``params`` (``get_params(deep=False)`` as tagged JSON), ``state`` (the fitted attributes as
  tagged JSON whose leaves point at arrays), and the ``ddr:status`` completion marker of
  :mod:`ddr.io.outputs` written last;
- one Zarr array per numeric numpy array of the state, one sub-group per statistic or
  nested estimator.

Values are encoded by type: JSON scalars as themselves, non-finite floats, numpy scalars,
tuples and string arrays with a tag, numeric arrays as Zarr arrays (bit-exact), statistics
through ``to_dict``, dataclasses and estimators of the ddr package field by field (only
classes inside ``ddr`` are ever imported when loading). Anything else raises a TypeError
naming the attribute.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import zarr

from ddr.io.claims import CLAIM_ATTR, Claim
from ddr.io.locations import Location, redact, resolve
from ddr.io.outputs import (
    STATUS_ATTR,
    IfExists,
    _prepare,
    check_claimed,
    check_not_input,
    claimed_store,
    fenced,
    mark_complete,
    output_status,
)
from ddr.stats.base import Statistic, statistic_from_dict

__all__ = ["load", "save_model"]

MODEL_ATTR = "ddr:model"


class _Encoder:
    """Encode values into tagged JSON, writing arrays into ``group``."""

    def __init__(self, group: zarr.Group) -> None:
        self.group = group
        self.n = 0

    def _key(self, hint: str) -> str:
        self.n += 1
        safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in hint)[:60]
        return f"{self.n:04d}_{safe}"

    def encode(self, value: Any, where: str) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int) and not isinstance(value, np.integer):
            return value
        if isinstance(value, float) and not isinstance(value, np.floating):
            return value if math.isfinite(value) else {"__float__": repr(value)}
        if isinstance(value, np.generic):
            return {"__scalar__": self.encode(value.item(), where), "dtype": value.dtype.str}
        if isinstance(value, np.ndarray):
            return self._array(value, where)
        if isinstance(value, tuple):
            return {"__tuple__": [self.encode(v, f"{where}.{i}") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.encode(v, f"{where}.{i}") for i, v in enumerate(value)]
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise TypeError(f"cannot save {where}: dict keys must be strings")
            return {"__dict__": {k: self.encode(v, f"{where}.{k}") for k, v in value.items()}}
        if isinstance(value, Statistic):
            key = self._key(where)
            sub = self.group.create_group(key)
            fields = value.to_dict()
            sub.attrs["fields"] = _Encoder(sub).encode(fields, where)
            cls = type(value)
            return {"__statistic__": key, "class": f"{cls.__module__}.{cls.__qualname__}"}
        if dataclasses.is_dataclass(value) and not isinstance(value, type) and _in_ddr(value):
            cls = type(value)
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            return {
                "__dataclass__": f"{cls.__module__}.{cls.__qualname__}",
                "fields": self.encode(fields, where),
            }
        if _is_ddr_estimator(value):
            key = self._key(where)
            sub = self.group.create_group(key)
            _write_estimator(value, sub)
            return {"__estimator__": key}
        raise TypeError(
            f"cannot save {where}: values of type {type(value).__name__} have no Zarr form "
            "(ddr saves arrays, numbers, strings, lists/dicts of those and statistics)"
        )

    def _array(self, arr: np.ndarray, where: str) -> Any:
        if arr.dtype.kind in "US":
            return {"__strings__": arr.astype(str).tolist(), "shape": list(arr.shape)}
        if arr.dtype.kind == "O":
            return {
                "__objects__": [
                    self.encode(v, f"{where}[{i}]") for i, v in enumerate(arr.ravel().tolist())
                ],
                "shape": list(arr.shape),
            }
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"cannot save {where}: arrays of dtype {arr.dtype} are not supported")
        key = self._key(where)
        z = self.group.create_array(
            key,
            shape=arr.shape,
            dtype=arr.dtype,
            chunks=arr.shape,
            compressors=None if arr.size < 4096 else "auto",
        )
        if arr.size:
            z[...] = arr
        # keep the memory layout: BLAS rounds differently on C and Fortran operands
        fortran = arr.ndim > 1 and arr.flags.f_contiguous and not arr.flags.c_contiguous
        return {"__array__": key, "order": "F" if fortran else "C"}


class _Decoder:
    def __init__(self, group: zarr.Group) -> None:
        self.group = group

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.decode(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "__float__" in value:
            return float(value["__float__"])
        if "__scalar__" in value:
            return np.dtype(value["dtype"]).type(self.decode(value["__scalar__"]))
        if "__array__" in value:
            arr = self.group[value["__array__"]][...]
            return np.asfortranarray(arr) if value.get("order") == "F" else arr
        if "__strings__" in value:
            return np.array(value["__strings__"], dtype=str).reshape(value["shape"])
        if "__objects__" in value:
            items = [self.decode(v) for v in value["__objects__"]]
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out.reshape(value["shape"])
        if "__tuple__" in value:
            return tuple(self.decode(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {k: self.decode(v) for k, v in value["__dict__"].items()}
        if "__statistic__" in value:
            sub = self.group[value["__statistic__"]]
            fields = _Decoder(sub).decode(sub.attrs["fields"])
            if "class" in value:  # statistics may live next to their estimator
                return _ddr_class(value["class"]).from_dict(fields)
            return statistic_from_dict(fields)
        if "__estimator__" in value:
            return _read_estimator(self.group[value["__estimator__"]])
        if "__dataclass__" in value:
            return _ddr_class(value["__dataclass__"])(**self.decode(value["fields"]))
        raise ValueError(f"unknown tag in saved model: {sorted(value)}")


def _in_ddr(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "ddr"


def _is_ddr_estimator(obj: Any) -> bool:
    return hasattr(obj, "get_params") and _in_ddr(obj)


def _ddr_class(target: Any) -> type:
    """Import a class named in a saved model; only classes of the ddr package are allowed."""
    if not isinstance(target, str) or not target.startswith("ddr."):
        raise ValueError(f"not a ddr model: {MODEL_ATTR}={target!r}")
    module, _, qualname = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), qualname)
    except (ImportError, AttributeError):
        raise ValueError(f"saved model class {target!r} does not exist in this ddr") from None


def _write_estimator(est: Any, group: zarr.Group) -> None:
    cls = type(est)
    params = est.get_params(deep=False)
    if hasattr(est, "_get_state"):
        state = est._get_state()
    else:
        state = {k: v for k, v in vars(est).items() if k not in params}
    enc = _Encoder(group)
    encoded_params = {}
    for k, v in params.items():
        if callable(v) and not isinstance(v, type):
            raise TypeError(
                f"cannot save {cls.__name__}: parameter {k}={v!r} is a callable; only named "
                "options can be saved (e.g. kernel='rbf')"
            )
        if isinstance(v, (np.random.Generator, np.random.RandomState)):
            raise TypeError(
                f"cannot save {cls.__name__}: parameter {k} is a {type(v).__name__}; use an "
                "int seed to make the model reproducible and savable"
            )
        encoded_params[k] = enc.encode(v, f"params.{k}")
    group.attrs.update(
        {
            MODEL_ATTR: f"{cls.__module__}.{cls.__qualname__}",
            "params": encoded_params,
            "state": {k: enc.encode(v, k) for k, v in state.items()},
        }
    )


def _read_estimator(group: zarr.Group) -> Any:
    attrs = group.attrs.asdict()
    cls = _ddr_class(attrs.get(MODEL_ATTR))
    dec = _Decoder(group)
    est = cls(**{k: dec.decode(v) for k, v in attrs["params"].items()})
    state = {k: dec.decode(v) for k, v in attrs["state"].items()}
    if hasattr(est, "_set_state"):
        est._set_state(state)
    else:
        for k, v in state.items():
            setattr(est, k, v)
    return est


def save_model(
    est: Any,
    path: str | os.PathLike | Location,
    *,
    if_exists: IfExists = "error",
    attrs: dict[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    claim: Claim | None = None,
) -> None:
    """Save a (fitted or unfitted) ddr estimator to a Zarr group at ``path``.

    The group is marked complete only after every array is written: on an object store the
    last write, one PUT of the group's metadata, is what says so. With a ``claim``
    (``ddr.io.claims``) every write checks it, as :func:`ddr.io.write_zarr`'s do.

    Parameters
    ----------
    est : estimator
        A ddr estimator, fitted or not.
    path : str, path-like or Location
        A local path or a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://``).
    if_exists : {"error", "overwrite", "skip-if-complete"}, default "error"
        What to do when something is at ``path`` already.
    attrs : dict, optional
        Extra group attributes (provenance); secrets in them are redacted.
    storage_options : mapping, optional
        Options of the URL's filesystem, as for :func:`ddr.io.open_input`.
    claim : Claim, optional
        The run's claim on ``path``; every write checks that it still holds.
    """
    import ddr

    p = resolve(path, storage_options)
    check_not_input(p)
    with fenced(claim):
        if _prepare(p, if_exists, None) == "skip":
            return
        store = claimed_store(p, claim)
        with p.errors("write"):
            group = zarr.open_group(store, mode="w-", zarr_format=3)
            first = {STATUS_ATTR: "incomplete"}
            if claim is not None:
                first[CLAIM_ATTR] = claim.token
            group.attrs.update(first)
            _write_estimator(est, group)
            check_claimed(p, claim, store)
            mark_complete(group, redact({**(attrs or {}), "ddr:version": ddr.__version__}))


def load(
    path: str | os.PathLike | Location, storage_options: Mapping[str, Any] | None = None
) -> Any:
    """Load an estimator saved with ``est.save(path)`` (a local path or a URL).

    Parameters
    ----------
    path : str, path-like or Location
        A local path or a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://``).
    storage_options : mapping, optional
        Options of the URL's filesystem, as for :func:`ddr.io.open_input`.

    Returns
    -------
    estimator
        The estimator as it was saved.

    Raises
    ------
    FileNotFoundError
        Nothing is at ``path``.
    ValueError
        The path holds no ddr model, or an incomplete one (an interrupted save).
    """
    p = resolve(path, storage_options)
    shown = p.url if isinstance(path, Location) else redact(str(path))
    status = output_status(p)
    if status == "missing":
        raise FileNotFoundError(f"no saved model at {shown!r}")
    if status == "incomplete":
        raise ValueError(f"the model at {shown!r} is incomplete (an interrupted save?)")
    with p.errors("read"):
        group = zarr.open_group(p.store(), mode="r")
        if MODEL_ATTR not in group.attrs:
            raise ValueError(f"{shown!r} is not a saved ddr model (no {MODEL_ATTR} attribute)")
        return _read_estimator(group)
