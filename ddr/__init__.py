"""ddr: statistics and dimensionality reduction on arrays larger than memory.

Estimators follow scikit-learn's contract and accept numpy, dask and xarray input; every fit
is passes of mergeable statistics (:mod:`ddr.stats`) over the row blocks of the data.
Public names are imported lazily so ``import ddr`` stays cheap.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ddr import _hooks
from ddr._exports import EXPORTS as _EXPORTS
from ddr._version import __version__ as __version__

if TYPE_CHECKING:
    import dask.array as da

# _EXPORTS: public name -> module that defines it (the table is ddr._exports.EXPORTS, in a
# module that imports nothing, so the layers below the root can tell ddr's names from a plug-in's)


# ddr.io's services to the layers below it (ddr._hooks), imported on first use
def _save_model(
    estimator: object,
    path: str | os.PathLike[str],
    *,
    if_exists: str = "error",
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """What ``est.save(path)`` calls: :func:`ddr.io.models.save_model`."""
    importlib.import_module("ddr.io.models").save_model(
        estimator, path, if_exists=if_exists, storage_options=storage_options
    )


def _with_ddr_reader(x: da.Array, whole_axes: tuple[int, ...] = ()) -> da.Array:
    """What dask input passes through: :func:`ddr.io.zarr_graphs.with_ddr_reader`."""
    return importlib.import_module("ddr.io.zarr_graphs").with_ddr_reader(x, whole_axes)


_hooks.register_saver(_save_model)
_hooks.register_dask_reader(_with_ddr_reader)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(_EXPORTS[name])
        return module if module.__name__.endswith("." + name) else getattr(module, name)
    raise AttributeError(f"module 'ddr' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the public names only (not this module's own imports: os, Any, Mapping, ...)
    return sorted(["__version__", *_EXPORTS])


__all__ = sorted(_EXPORTS)
