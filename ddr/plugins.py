"""Plug-ins: estimators, statistics, output kinds, plot kinds and cluster backends that other
packages register through entry points.

A package adds a class to ddr by naming it in one of four entry-point groups of its
``pyproject.toml`` (the development guide's "Plug-ins" page shows the lines):

- ``ddr.estimators``: an estimator class (scikit-learn's contract, ``ddr.base.DDRMixin``,
  its ddr tags); the entry point's name is its ops' prefix (``MaxAbsScaler.fit``);
- ``ddr.statistics``: a subclass of :class:`ddr.stats.Statistic`; the name is its op
  (``extrema``);
- ``ddr.outputs``: a subclass of ``ddr.pipeline.outputs.OutputKind`` or of
  ``ddr.pipeline.outputs.plots.PlotKind``; the name is its ``name`` (the ``kind:`` or the
  ``plot:`` of a pipeline's output entry);
- ``ddr.cluster_backends``: a subclass of ``ddr.cluster.backend.Backend``; the name is its
  ``kind`` (a cluster config's ``kind:``).

Registered, a class is found where ddr's own are: the ops (``ddr ops``, ``ddr schema``,
``ddr validate``, pipelines), :func:`ddr.load` (which imports a class named in a saved model
only when it is ddr's own or a registered plug-in's), the output and plot kinds, the cluster
kinds, and the conformance suites of :mod:`ddr.testing`, which are parametrized over the
registries.

Loading is lazy. ``import ddr`` reads no entry point: a group is read, and its classes
imported, on the first use of its registry (the ops, the output kinds, the cluster kinds, a
saved model naming a class outside ddr). An entry point whose module is being imported at
that moment (a plug-in module that imports ddr's registries) is loaded on the next use.
A plug-in that cannot be used is logged once, as a warning of the ``ddr.plugins`` logger
naming its distribution, its entry point and what is wrong (its import fails, it is not
the group's kind of class, its name is ddr's or another plug-in's, it lacks a required
piece), and skipped; everything else works, as xarray does with its backend engines.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GROUPS",
    "Plugin",
    "estimators",
    "generation",
    "load",
    "plugin_class",
    "report",
    "skipped",
    "statistics",
]

log = logging.getLogger("ddr.plugins")

#: the entry-point groups, with the class each entry point names
GROUPS: dict[str, str] = {
    "ddr.estimators": "an estimator class (ddr.base.DDRMixin and scikit-learn's BaseEstimator)",
    "ddr.statistics": "a statistic class (a subclass of ddr.stats.Statistic)",
    "ddr.outputs": "an output kind or plot kind class (a subclass of "
    "ddr.pipeline.outputs.OutputKind or ddr.pipeline.outputs.plots.PlotKind)",
    "ddr.cluster_backends": "a cluster backend class (a subclass of ddr.cluster.backend.Backend)",
}

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OP_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Plugin:
    """One entry point of a plug-in package, and what it named.

    Parameters
    ----------
    group : str
        The entry-point group (one of :data:`GROUPS`).
    name : str
        The entry point's name: what the class is known by in ddr.
    value : str
        What it points at, ``"package.module:Class"``.
    distribution : str
        The distribution (the installed package) that declares it.
    obj : object
        The object it named (None until it is imported, or when its import failed).
    """

    group: str
    name: str
    value: str
    distribution: str
    obj: Any = None

    def __str__(self) -> str:
        return f"{self.distribution!r} ({self.group} entry point {self.name} = {self.value})"


_lock = threading.RLock()
#: group -> the entry points not imported yet (their module was being imported)
_pending: dict[str, list[Plugin]] = {}
#: group -> the plug-ins imported, in a stable order (one per name)
_loaded: dict[str, list[Plugin]] = {}
#: what was reported: (plug-in, problem), in the order it was
_skipped: dict[tuple[Plugin, str], None] = {}
#: group -> name -> the class accepted (estimators, statistics)
_accepted: dict[str, dict[str, Any]] = {}
_checked: dict[str, set[Plugin]] = {}
_generation = [0]


def generation() -> int:
    """A number that changes whenever an entry point is imported (for registries built from
    the plug-ins, to know when to rebuild).

    Returns
    -------
    int
    """
    return _generation[0]


def report(plugin: Plugin, problem: str) -> None:
    """Log that ``plugin`` is skipped, and why (once per plug-in and problem).

    Parameters
    ----------
    plugin : Plugin
        The entry point.
    problem : str
        What is wrong with it.
    """
    key = (_without_obj(plugin), problem)
    with _lock:
        if key in _skipped:
            return
        _skipped[key] = None
    log.warning("plug-in %s skipped: %s", plugin, problem)


def skipped() -> list[tuple[Plugin, str]]:
    """The plug-ins skipped so far in this process, each with what is wrong with it.

    Returns
    -------
    list of (Plugin, str)
    """
    with _lock:
        return list(_skipped)


def _without_obj(plugin: Plugin) -> Plugin:
    return Plugin(plugin.group, plugin.name, plugin.value, plugin.distribution)


def _entry_points(group: str) -> list[Plugin]:
    """The group's entry points, one per name (the first distribution in name order keeps
    it; the others are reported)."""
    found: dict[str, Plugin] = {}
    listed = []
    for ep in importlib.metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        listed.append(Plugin(group, ep.name, ep.value, str(getattr(dist, "name", "?"))))
    for plugin in sorted(set(listed), key=lambda p: (p.name, p.distribution, p.value)):
        have = found.get(plugin.name)
        if have is None:
            found[plugin.name] = plugin
        else:
            report(plugin, f"the name {plugin.name!r} is {have.distribution!r}'s already")
    return list(found.values())


def _initializing(module: str) -> bool:
    """Whether ``module`` or a package above it is being imported right now."""
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        spec = getattr(sys.modules.get(".".join(parts[:i])), "__spec__", None)
        if getattr(spec, "_initializing", False):
            return True
    return False


def _import(plugin: Plugin) -> Any:
    module, _, attr = plugin.value.partition(":")
    obj: Any = importlib.import_module(module.strip())
    for part in attr.strip().split(".") if attr.strip() else ():
        obj = getattr(obj, part)
    return obj


def load(group: str) -> list[Plugin]:
    """The plug-ins of ``group`` whose entry points import, each imported once per process.

    The first call reads the group's entry points; an entry point whose import fails is
    reported (:func:`report`) and skipped. One whose module is being imported right now (the
    plug-in imports a ddr registry, which asked for its group) is tried again on the next
    call.

    Parameters
    ----------
    group : str
        One of :data:`GROUPS`.

    Returns
    -------
    list of Plugin
        With ``obj`` the object each entry point names, in a stable order.
    """
    if group not in GROUPS:
        raise ValueError(f"unknown plug-in group {group!r}; the groups are {', '.join(GROUPS)}")
    with _lock:
        if group not in _loaded:
            _loaded[group] = []
            _pending[group] = _entry_points(group)
        waiting, _pending[group] = _pending[group], []
        for plugin in waiting:
            module = plugin.value.partition(":")[0].strip()
            if _initializing(module):
                _pending[group].append(plugin)
                continue
            try:
                obj = _import(plugin)
            except Exception as exc:  # a broken plug-in must not break ddr
                report(plugin, f"importing it failed: {type(exc).__name__}: {exc}")
                continue
            _loaded[group].append(
                Plugin(plugin.group, plugin.name, plugin.value, plugin.distribution, obj)
            )
            _generation[0] += 1
        return list(_loaded[group])


def _is_class(obj: Any) -> bool:
    return inspect.isclass(obj)


def _estimator_problems(plugin: Plugin) -> list[str]:
    from ddr._exports import EXPORTS
    from ddr.tags import check_estimator_class

    cls = plugin.obj
    if not _IDENTIFIER.fullmatch(plugin.name):
        return [f"its name {plugin.name!r} is not an identifier (ops are named NAME.fit)"]
    if plugin.name in EXPORTS:
        return [f"its name {plugin.name!r} is ddr's own (ddr.{plugin.name})"]
    if not (_is_class(cls) and callable(getattr(cls, "fit", None)) and hasattr(cls, "get_params")):
        return [f"{plugin.value} is {cls!r}, not {GROUPS[plugin.group]}"]
    if not hasattr(cls, "__ddr_tags__"):
        return [f"{cls.__name__} has no __ddr_tags__ (subclass ddr.base.DDRMixin)"]
    try:
        check_estimator_class(cls)
    except Exception as exc:
        return [f"{type(exc).__name__}: {exc}"]
    return []


def _statistic_problems(plugin: Plugin) -> list[str]:
    import ddr.stats
    from ddr.stats.base import _REGISTRY, Statistic

    cls = plugin.obj
    if not (_is_class(cls) and issubclass(cls, Statistic)):
        return [f"{plugin.value} is {cls!r}, not {GROUPS[plugin.group]}"]
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        return [f"{cls.__name__} does not implement {missing}"]
    if not _OP_NAME.fullmatch(plugin.name):
        return [f"its name {plugin.name!r} is not a lower-case op name (such as 'extrema')"]
    builtin = {_snake(n) for n in ddr.stats.__all__} | {"load"}
    if plugin.name in builtin:
        return [f"its name {plugin.name!r} is the op of one of ddr's own statistics"]
    if _REGISTRY.get(cls.__name__) is not cls:
        owner = _REGISTRY.get(cls.__name__)
        return [
            f"its class name {cls.__name__!r} is the type of "
            f"{owner.__module__}.{owner.__qualname__} (to_dict and from_dict name statistics "
            "by their class name)"
            if owner is not None
            else f"{cls.__name__} is not a registered Statistic"
        ]
    return []


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_CHECKS = {"ddr.estimators": _estimator_problems, "ddr.statistics": _statistic_problems}


def _accepted_in(group: str) -> dict[str, Any]:
    plugins = load(group)
    with _lock:
        accepted = _accepted.setdefault(group, {})
        checked = _checked.setdefault(group, set())
        for plugin in plugins:
            if plugin in checked:
                continue
            checked.add(plugin)
            problems = _CHECKS[group](plugin)
            if problems:
                report(plugin, "; ".join(problems))
            else:
                accepted[plugin.name] = plugin.obj
        return dict(accepted)


def estimators() -> dict[str, type]:
    """The plug-in estimator classes (group ``ddr.estimators``), by entry-point name.

    Each is checked once: a class with ``fit`` and ``get_params`` and ddr's tags, whose
    required facts are declared (:func:`ddr.tags.check_estimator_class`), under a name that
    is an identifier and not one of ddr's (``ddr._exports.EXPORTS``).

    Returns
    -------
    dict
        Entry-point name -> class.
    """
    return _accepted_in("ddr.estimators")


def statistics() -> dict[str, type]:
    """The plug-in statistic classes (group ``ddr.statistics``), by entry-point name (the op).

    Each is checked once: a concrete subclass of :class:`ddr.stats.Statistic`, under a
    lower-case op name that is not one of ddr's statistics' ops, with a class name that is
    not the type of one of ddr's statistics (``to_dict`` names it).

    Returns
    -------
    dict
        Entry-point name -> class.
    """
    return _accepted_in("ddr.statistics")


def plugin_class(qualified_name: str) -> type | None:
    """The registered plug-in estimator or statistic class called ``module.QualName``.

    What :func:`ddr.load` imports for a saved model that names a class outside ddr: only a
    class registered through an entry point, never a module named in a file.

    Parameters
    ----------
    qualified_name : str
        ``f"{cls.__module__}.{cls.__qualname__}"``, as a saved model records it.

    Returns
    -------
    type or None
        The class, or None when no registered plug-in has that name.
    """
    for cls in (*estimators().values(), *statistics().values()):
        if f"{cls.__module__}.{cls.__qualname__}" == qualified_name:
            return cls
    return None


def _reset() -> None:
    """Forget every group (for tests that install plug-ins while this process runs)."""
    with _lock:
        for table in (_pending, _loaded, _skipped, _accepted, _checked):
            table.clear()
        _generation[0] += 1
