"""Save fitted estimators to Zarr groups and load them back, exactly, without pickle.

Layout of a saved model (a Zarr v3 group):

- attrs ``ddr:model`` (``module.Class``: inside the ``ddr`` package, or an estimator a
  plug-in registered, :mod:`ddr.plugins`), ``ddr:version``,
  ``params`` (``get_params(deep=False)`` as tagged JSON), ``state`` (the fitted attributes as
  tagged JSON whose leaves point at arrays), and the ``ddr:status`` completion marker of
  :mod:`ddr.io.outputs` written last;
- one Zarr array per numeric numpy array of the state, one sub-group per statistic or
  nested estimator.

Values are encoded by type: JSON scalars as themselves, non-finite floats, numpy scalars,
tuples and string arrays with a tag, numeric arrays as Zarr arrays (bit-exact), statistics
through ``to_dict``, dataclasses and estimators of the ddr package field by field (only
classes inside ``ddr``, and the estimator and statistic classes that installed plug-ins
registered through entry points, are ever imported when loading: never a module a file
names). Anything else raises a TypeError naming the attribute. Each array's tag records its
shape and dtype.

Loading checks what it reads: an array that is missing, of another shape or dtype than
its tag records, or whose chunks cannot be decoded, and attributes that do not describe a
model raise :class:`CorruptModelError` naming the model's path and the part (``components_``,
``moments_.mean``, ``params.n_components``). :func:`check_model` makes the metadata checks
without reading an array (what ``ddr validate`` does for a pipeline's ``load`` step).
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

from ddr import plugins
from ddr.io.checksums import checksummed_compressors, values_crc32c
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

__all__ = ["CorruptModelError", "check_model", "load", "model_class", "save_model"]

MODEL_ATTR = "ddr:model"


class CorruptModelError(ValueError):
    """A saved model that cannot be read back as it was saved.

    Parameters
    ----------
    part : str
        The part that is wrong: a fitted attribute (``components_``, ``moments_.mean``), a
        parameter (``params.n_components``) or ``attributes``.
    detail : str
        What is wrong with it.
    path : str, optional
        The model's path or URL (secrets redacted), when known.

    Attributes
    ----------
    part, detail, path
        The parameters of those names.
    """

    def __init__(self, part: str, detail: str, path: str | None = None) -> None:
        self.part, self.detail, self.path = part, detail, path
        where = "a saved model" if path is None else f"the model at {path!r}"
        super().__init__(
            f"{where} is corrupt: {part}: {detail}; save the model again (or restore it from a "
            "copy)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.part, self.detail, self.path)

    def at(self, path: str) -> CorruptModelError:
        """The same error, naming the model's path.

        Parameters
        ----------
        path : str
            The model's path or URL as the message shows it.

        Returns
        -------
        CorruptModelError
        """
        return CorruptModelError(self.part, self.detail, path)


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
            # a checksum on every chunk: a damaged model is an error on load, never a model
            compressors=checksummed_compressors(None if arr.size < 4096 else "default"),
        )
        if arr.size:
            z[...] = arr
        # keep the memory layout: BLAS rounds differently on C and Fortran operands
        fortran = arr.ndim > 1 and arr.flags.f_contiguous and not arr.flags.c_contiguous
        # shape and dtype recorded beside the array: load checks the array against them
        return {
            "__array__": key,
            "order": "F" if fortran else "C",
            "shape": list(arr.shape),
            "dtype": arr.dtype.str,
            # of the values: a chunk that decodes but belongs elsewhere is found on load
            "crc32c": values_crc32c(arr),
        }


class _Decoder:
    """Decode tagged JSON, reading arrays from ``group``; every failure is a
    :class:`CorruptModelError` naming the part being decoded."""

    def __init__(self, group: zarr.Group) -> None:
        self.group = group

    def decode(self, value: Any, part: str) -> Any:
        try:
            return self._decode(value, part)
        except (CorruptModelError, OSError):  # storage errors are the location's to explain
            raise
        except Exception as exc:
            raise CorruptModelError(part, _reason(exc)) from None

    def _decode(self, value: Any, part: str) -> Any:
        if isinstance(value, list):
            return [self.decode(v, f"{part}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, dict):
            return value
        if "__float__" in value:
            return float(value["__float__"])
        if "__scalar__" in value:
            return np.dtype(value["dtype"]).type(self.decode(value["__scalar__"], part))
        if "__array__" in value:
            z = _saved_array(self.group, value, part)
            where = _array_path(self.group, value["__array__"])
            try:
                arr = z[...]
            except OSError:
                raise
            except Exception as exc:
                raise CorruptModelError(
                    part, f"its array {where} cannot be decoded ({_reason(exc)})"
                ) from None
            saved = value.get("crc32c")  # models saved before ddr recorded it: not checked
            if saved is not None and values_crc32c(arr) != saved:
                raise CorruptModelError(
                    part,
                    f"the values of its array {where} are not those saved (their CRC32C "
                    "differs: a chunk copied from elsewhere, or damaged)",
                )
            return np.asfortranarray(arr) if value.get("order") == "F" else arr
        if "__strings__" in value:
            return np.array(value["__strings__"], dtype=str).reshape(value["shape"])
        if "__objects__" in value:
            items = [self.decode(v, f"{part}[{i}]") for i, v in enumerate(value["__objects__"])]
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out.reshape(value["shape"])
        if "__tuple__" in value:
            return tuple(self.decode(v, f"{part}[{i}]") for i, v in enumerate(value["__tuple__"]))
        if "__dict__" in value:
            return {k: self.decode(v, f"{part}.{k}") for k, v in value["__dict__"].items()}
        if "__statistic__" in value:
            sub = _saved_group(self.group, value["__statistic__"], part)
            fields = _Decoder(sub).decode(sub.attrs["fields"], part)
            if "class" in value:  # statistics may live next to their estimator
                return _ddr_class(value["class"]).from_dict(fields)
            return statistic_from_dict(fields)
        if "__estimator__" in value:
            return _read_estimator(_saved_group(self.group, value["__estimator__"], part), part)
        if "__dataclass__" in value:
            return _ddr_class(value["__dataclass__"])(**self.decode(value["fields"], part))
        raise ValueError(f"unknown tag in saved model: {sorted(value)}")


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, KeyError):
        return f"no {text} in its saved description"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _array_path(group: zarr.Group, key: str) -> str:
    return repr(f"{group.path}/{key}" if group.path else key)


def _saved_group(group: zarr.Group, key: str, part: str) -> zarr.Group:
    try:
        sub = group[key]
    except KeyError:
        raise CorruptModelError(part, f"its group {_array_path(group, key)} is missing") from None
    if not isinstance(sub, zarr.Group):
        raise CorruptModelError(part, f"{_array_path(group, key)} is not a group")
    return sub


def _saved_array(group: zarr.Group, tag: dict[str, Any], part: str) -> zarr.Array:
    """The Zarr array a tag points at, checked against the shape and dtype the tag records
    (models saved before ddr recorded them are checked by decoding alone)."""
    key = tag["__array__"]
    where = _array_path(group, key)
    try:
        z = group[key]
    except KeyError:
        raise CorruptModelError(part, f"its array {where} is missing") from None
    if not isinstance(z, zarr.Array):
        raise CorruptModelError(part, f"{where} is not an array")
    shape, dtype = tag.get("shape"), tag.get("dtype")
    if shape is not None and tuple(z.shape) != tuple(shape):
        raise CorruptModelError(
            part, f"its array {where} has shape {tuple(z.shape)}; it was saved as {tuple(shape)}"
        )
    if dtype is not None and np.dtype(z.dtype) != np.dtype(dtype):
        raise CorruptModelError(
            part, f"its array {where} has dtype {z.dtype}; it was saved as {np.dtype(dtype)}"
        )
    return z


def _check_tags(group: zarr.Group, value: Any, part: str) -> None:
    """The metadata checks of :class:`_Decoder` over tagged JSON, reading no array."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            _check_tags(group, v, f"{part}[{i}]")
    elif isinstance(value, dict):
        if "__array__" in value:
            _saved_array(group, value, part)
        elif "__statistic__" in value:
            sub = _saved_group(group, value["__statistic__"], part)
            _check_tags(sub, sub.attrs.get("fields"), part)
        elif "__estimator__" in value:
            _check_estimator(_saved_group(group, value["__estimator__"], part), part)
        else:
            for k, v in value.items():
                tag = k.startswith("__") or k == "fields"  # a tag's own key: not a part name
                _check_tags(group, v, part if tag else f"{part}.{k}")


def _check_estimator(group: zarr.Group, prefix: str = "") -> None:
    attrs = group.attrs.asdict()
    params, state = _described(attrs, prefix)
    for k, v in params.items():
        _check_tags(group, v, f"{prefix}params.{k}")
    for k, v in state.items():
        _check_tags(group, v, f"{prefix}{k}")


def _described(attrs: Mapping[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    params, state = attrs.get("params"), attrs.get("state")
    if not isinstance(params, dict) or not isinstance(state, dict):
        raise CorruptModelError(
            prefix.rstrip(".") or "attributes",
            "its 'params' and 'state' attributes must be mappings; got "
            f"{type(params).__name__} and {type(state).__name__}",
        )
    return params, state


def _in_ddr(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "ddr"


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_ddr_estimator(obj: Any) -> bool:
    """A ddr estimator, or a registered plug-in's (saved as a nested model)."""
    if not hasattr(obj, "get_params"):
        return False
    return _in_ddr(obj) or plugins.plugin_class(_qualified(type(obj))) is type(obj)


def _ddr_class(target: Any) -> type:
    """Import a class named in a saved model: a class of the ddr package, or an estimator or
    statistic class a plug-in registered through an entry point (:mod:`ddr.plugins`: its
    package is imported because it was registered, never because a file names it)."""
    if isinstance(target, str) and not target.startswith("ddr.") and "." in target:
        cls = plugins.plugin_class(target)
        if cls is not None:
            return cls
        raise ValueError(
            f"not a ddr model: {MODEL_ATTR}={target!r} is neither a class of ddr nor an "
            "estimator or statistic registered by an installed plug-in (entry-point groups "
            "ddr.estimators, ddr.statistics); install the package that defines it"
        )
    if not isinstance(target, str) or not target.startswith("ddr."):
        raise ValueError(f"not a ddr model: {MODEL_ATTR}={target!r}")
    module, _, qualname = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), qualname)
    except (ImportError, AttributeError):
        raise ValueError(f"saved model class {target!r} does not exist in this ddr") from None


def model_class(target: str) -> type | None:
    """The class a saved model names (its ``ddr:model``), when this installation has it.

    Parameters
    ----------
    target : str
        ``module.Class``.

    Returns
    -------
    type or None
        A class of ddr, or an estimator or statistic class a plug-in registered
        (:mod:`ddr.plugins`); None for anything else (nothing is imported for it).
    """
    try:
        return _ddr_class(target)
    except ValueError:
        return None


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
    group.update_attributes(
        {
            MODEL_ATTR: f"{cls.__module__}.{cls.__qualname__}",
            "params": encoded_params,
            "state": {k: enc.encode(v, k) for k, v in state.items()},
        }
    )


def _read_estimator(group: zarr.Group, part: str = "") -> Any:
    """The estimator saved in ``group`` (``part``: where it sits in an enclosing model)."""
    prefix = f"{part}." if part else ""
    attrs = group.attrs.asdict()
    cls = _ddr_class(attrs.get(MODEL_ATTR))
    params, saved = _described(attrs, prefix)
    dec = _Decoder(group)
    decoded = {k: dec.decode(v, f"{prefix}params.{k}") for k, v in params.items()}
    try:
        est = cls(**decoded)
    except (TypeError, ValueError) as exc:
        raise CorruptModelError(f"{prefix}params", _reason(exc)) from None
    state = {k: dec.decode(v, f"{prefix}{k}") for k, v in saved.items()}
    try:
        if hasattr(est, "_set_state"):
            est._set_state(state)
        else:
            for k, v in state.items():
                setattr(est, k, v)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise CorruptModelError(f"{prefix}state", _reason(exc)) from None
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
    from ddr._version import __version__

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
            group.update_attributes(first)
            _write_estimator(est, group)
            check_claimed(p, claim, store)
            mark_complete(group, redact({**(attrs or {}), "ddr:version": __version__}))


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
    CorruptModelError
        A ``ValueError``: the model is complete but a part of it cannot be read back as it
        was saved (an array missing, replaced, or whose chunks do not decode); the message
        names the path and the part.
    """
    p = resolve(path, storage_options)
    shown = p.url if isinstance(path, Location) else redact(str(path))
    group = _model_group(p, shown)
    with p.errors("read"):
        try:
            return _read_estimator(group)
        except CorruptModelError as exc:
            raise exc.at(shown) from None


def check_model(
    path: str | os.PathLike | Location, storage_options: Mapping[str, Any] | None = None
) -> None:
    """Check a saved model from its metadata alone, reading no array: every array its
    attributes name exists with the shape and dtype it was saved with.

    Parameters
    ----------
    path : str, path-like or Location
        A local path or a URL.
    storage_options : mapping, optional
        Options of the URL's filesystem.

    Raises
    ------
    FileNotFoundError, ValueError, CorruptModelError
        As :func:`load` does.
    """
    p = resolve(path, storage_options)
    shown = p.url if isinstance(path, Location) else redact(str(path))
    group = _model_group(p, shown)
    with p.errors("read"):
        try:
            _check_estimator(group)
        except CorruptModelError as exc:
            raise exc.at(shown) from None
        except OSError:
            raise
        except Exception as exc:
            raise CorruptModelError("attributes", _reason(exc), shown) from None


def _model_group(p: Location, shown: str) -> zarr.Group:
    """The complete saved model's group at ``p``."""
    status = output_status(p)
    if status == "missing":
        raise FileNotFoundError(f"no saved model at {shown!r}")
    if status == "incomplete":
        raise ValueError(f"the model at {shown!r} is incomplete (an interrupted save?)")
    with p.errors("read"):
        try:
            group = zarr.open_group(p.store(), mode="r")
        except (ValueError, TypeError) as exc:  # metadata zarr cannot parse
            raise CorruptModelError("its Zarr metadata", _reason(exc), shown) from None
        if MODEL_ATTR not in group.attrs:
            raise ValueError(f"{shown!r} is not a saved ddr model (no {MODEL_ATTR} attribute)")
    return group
