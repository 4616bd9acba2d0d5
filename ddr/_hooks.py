"""What a lower layer calls and a layer above it provides, wired by the package root.

Imports only point down (``docs/user-guide/development.md``), yet two things the lower layers
do are done by :mod:`ddr.io`, above them:

- ``est.save(path)`` (:meth:`ddr.base.DDRMixin.save`, the estimator layer) writes the model
  with :func:`ddr.io.models.save_model` (:func:`saver`);
- dask input that only reads a Zarr array is re-read through ddr's chunk reader
  (:func:`ddr.io.zarr_graphs.with_ddr_reader`) where inputs become rows
  (:func:`ddr.stats._input.as_rows`, the statistics layer) (:func:`dask_reader`); input
  chunked along its features is read there in row blocks, one task each
  (:mod:`ddr.io.row_blocks`).

The lower layer asks this module, which imports nothing of ddr; ``ddr/__init__.py`` (the
package root, above every layer) registers stand-ins that import ddr.io on first use, so
importing an estimator or a statistic does not import the I/O stack, and a plain ``import
ddr`` stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # types only: importing this module imports nothing but the standard library
    import dask.array as da

__all__ = ["DaskReader", "Saver", "dask_reader", "register_dask_reader", "register_saver", "saver"]


class Saver(Protocol):
    """``saver(estimator, path, *, if_exists, storage_options)``: write a ddr estimator to a
    Zarr group (as :func:`ddr.io.models.save_model`)."""

    def __call__(
        self,
        estimator: object,
        path: str | os.PathLike[str],
        *,
        if_exists: str = ...,
        storage_options: Mapping[str, Any] | None = ...,
    ) -> None: ...


class DaskReader(Protocol):
    """``reader(x, whole_axes=()) -> x'``: a dask array with the same shape, dtype and values,
    the same chunks except that ``whole_axes`` (the feature axes) may come whole, in row
    blocks (:func:`ddr.io.zarr_graphs.with_ddr_reader`)."""

    def __call__(self, x: da.Array, whole_axes: tuple[int, ...] = ...) -> da.Array: ...


_saver: list[Saver] = []
_reader: list[DaskReader] = []


def register_saver(fn: Saver) -> Saver:
    """Make ``fn`` what :meth:`ddr.base.DDRMixin.save` calls."""
    _saver[:] = [fn]
    return fn


def saver() -> Saver:
    """The registered model writer."""
    if not _saver:
        raise RuntimeError("no model writer is registered (ddr's package root registers ddr.io's)")
    return _saver[0]


def register_dask_reader(fn: DaskReader) -> DaskReader:
    """Make ``fn`` what dask input is passed through when it becomes rows."""
    _reader[:] = [fn]
    return fn


def dask_reader() -> DaskReader:
    """The registered dask input reader (the identity when none is: a reader is a speed-up,
    never a requirement)."""
    return _reader[0] if _reader else _identity


def _identity(x: da.Array, whole_axes: tuple[int, ...] = ()) -> da.Array:
    return x
