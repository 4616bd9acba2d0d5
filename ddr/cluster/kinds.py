"""The cluster backends by ``kind``: the registry a backend class registers itself in.

A backend module decorates its class with :func:`register_backend`; this module imports no
backend (``ddr.cluster``'s ``__init__`` imports the shipped ones, in the order messages list
them), so the backends, the config schema built from the registry and the code that starts a
backend import it without an import loop.
"""

from __future__ import annotations

from typing import TypeVar

from ddr.cluster.backend import Backend

__all__ = ["BACKENDS", "backend_class", "register_backend"]

B = TypeVar("B", bound=type[Backend])

#: every kind of cluster config, in the order messages list them (the order registered)
BACKENDS: dict[str, type[Backend]] = {}


def register_backend(cls: B) -> B:
    """Register a :class:`~ddr.cluster.backend.Backend` subclass under its ``kind`` (also as
    a class decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"a cluster backend must subclass ddr.cluster.backend.Backend; got {cls!r}")
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"cluster backend {cls.__name__} sets no kind (a str)")
    if BACKENDS.get(kind, cls) is not cls:
        raise ValueError(f"a cluster backend of kind {kind!r} is registered already")
    BACKENDS[kind] = cls
    return cls


def backend_class(kind: str) -> type[Backend]:
    """The backend class of ``kind``."""
    return BACKENDS[kind]
