"""What ``est.save(path)`` calls: the model writer, registered by the layer that owns it.

The estimators (:meth:`ddr.base.DDRMixin.save`) sit below :mod:`ddr.io`, which writes models,
and never import it. The package root (``ddr/__init__.py``, above every layer) registers the
writer when any part of ddr is first imported: a stand-in that imports
:func:`ddr.io.models.save_model` on first use, so importing an estimator does not import the
I/O stack. :func:`register_saver` replaces it.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Saver", "register_saver", "saver"]

#: ``saver(estimator, path, *, if_exists, storage_options)``
Saver = Callable[..., None]

_saver: list[Saver] = []


def register_saver(fn: Saver) -> Saver:
    """Make ``fn`` what :meth:`ddr.base.DDRMixin.save` calls."""
    _saver[:] = [fn]
    return fn


def saver() -> Saver:
    """The registered model writer."""
    if not _saver:
        raise RuntimeError("no model writer is registered (ddr's package root registers ddr.io's)")
    return _saver[0]
