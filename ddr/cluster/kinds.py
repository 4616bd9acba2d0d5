"""The cluster backends by ``kind``: the registry a backend class registers itself in.

A backend module decorates its class with :func:`register_backend`; this module imports no
backend (``ddr.cluster``'s ``__init__`` imports the shipped ones, in the order messages list
them), so the backends, the config schema built from the registry and the code that starts a
backend import it without an import loop.

Backends of other packages are named in the entry-point group ``ddr.cluster_backends``
(:mod:`ddr.plugins`): on the first use of the registry (:func:`backends`,
:func:`backend_class`) they are registered after the shipped ones; one that cannot be (not a
:class:`~ddr.cluster.backend.Backend`, a kind that is taken or is not its entry point's
name, a required class attribute missing) is logged, naming its distribution, and skipped.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, TypeVar

from ddr import plugins
from ddr.cluster.backend import Backend

__all__ = ["BACKENDS", "backend_class", "backends", "generation", "register_backend"]

B = TypeVar("B", bound=type[Backend])

#: every kind of cluster config, in the order messages list them (the order registered);
#: read it through :func:`backends`, which registers the plug-ins' first
BACKENDS: dict[str, type[Backend]] = {}

_generation = [0]
_handled: set[plugins.Plugin] = set()
_lock = threading.RLock()


def generation() -> int:
    """A number that changes whenever a backend is registered (what is built from the
    registry, the config schema, rebuilds when it does)."""
    return _generation[0]


def _lacks(cls: Any) -> list[str]:
    """The class attributes a backend declares (``kind: ClassVar[str]``) but does not set."""
    missing = []
    for klass in reversed(inspect.getmro(cls)):
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            if "ClassVar" in str(annotation) and not hasattr(cls, name) and name not in missing:
                missing.append(name)
    return missing


def register_backend(cls: B) -> B:
    """Register a :class:`~ddr.cluster.backend.Backend` subclass under its ``kind`` (also as
    a class decorator).

    Raises
    ------
    TypeError
        ``cls`` is not a Backend subclass, sets no ``kind``, or leaves a class attribute
        its bases declare unset (``target``, ``example``, ``cluster_class``, ...) or a method
        unimplemented (``start``); named.
    ValueError
        Another class is registered under the same kind.
    """
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"a cluster backend must subclass ddr.cluster.backend.Backend; got {cls!r}")
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"cluster backend {cls.__name__} sets no kind (a str)")
    missing = _lacks(cls) + sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise TypeError(
            f"cluster backend {cls.__name__} cannot be registered; it does not set: "
            + ", ".join(missing)
        )
    if BACKENDS.get(kind, cls) is not cls:
        raise ValueError(f"a cluster backend of kind {kind!r} is registered already")
    BACKENDS[kind] = cls
    _generation[0] += 1
    return cls


def _load_plugins() -> None:
    with _lock:
        for plugin in plugins.load("ddr.cluster_backends"):
            if plugin in _handled:
                continue
            _handled.add(plugin)
            cls = plugin.obj
            kind = getattr(cls, "kind", None)
            have = BACKENDS.get(kind) if isinstance(kind, str) else None
            if not (inspect.isclass(cls) and issubclass(cls, Backend)):
                problem = f"{plugin.value} is {cls!r}, not {plugins.GROUPS[plugin.group]}"
            elif isinstance(kind, str) and kind != plugin.name:
                problem = (
                    f"the backend {cls.__name__} is of kind {kind!r}, not {plugin.name!r} (name "
                    "the entry point as its kind)"
                )
            elif have is not None and have is not cls:
                whose = "ddr's own" if have.__module__.split(".")[0] == "ddr" else "another's"
                problem = f"the kind {kind!r} is {whose} ({have.__module__}.{have.__qualname__})"
            else:
                try:
                    register_backend(cls)
                    continue
                except (TypeError, ValueError) as exc:
                    problem = str(exc)
            plugins.report(plugin, problem)


def backends() -> dict[str, type[Backend]]:
    """Every registered backend by kind, the plug-ins' after the shipped ones.

    Returns
    -------
    dict
        Kind -> Backend subclass, in the order messages list them.
    """
    _load_plugins()
    return dict(BACKENDS)


def backend_class(kind: str) -> type[Backend]:
    """The backend class of ``kind``."""
    return backends()[kind]
