"""Registries of classes by name (output kinds, plot kinds): registering a class is all it
takes, a class that lacks a required piece is refused when it is registered (naming what
it lacks), and looking up an unknown name raises, naming the registered ones.

A registry may also take the classes plug-in packages name in an entry-point group
(``ddr.outputs``, shared by output kinds and plot kinds, :mod:`ddr.plugins`): on its first
use the group is read, each class is registered in the registry whose base it subclasses,
and one that cannot be (not a subclass of any, a name that is taken or is not its entry
point's, a required piece missing) is logged, naming its distribution, and skipped.

Every change bumps one shared counter (:func:`generation`), so what is built from the
registries (the schema's union of output specs) knows when to rebuild.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ddr import plugins

__all__ = ["KindRegistry", "generation", "spec_models", "tag_of"]

T = TypeVar("T")
C = TypeVar("C", bound=type)

_generation = [0]
_NAME = re.compile(r"[a-z][a-z0-9_-]*")
#: entry-point group -> the registries that take its classes
_BY_GROUP: dict[str, list[KindRegistry[Any]]] = {}
#: the plug-ins handled (registered or reported)
_HANDLED: set[plugins.Plugin] = set()


def generation() -> int:
    """A number that changes whenever a class is registered in, or removed from, any
    registry."""
    return _generation[0]


def spec_models(tp: Any) -> list[type[BaseModel]]:
    """The pydantic models a spec type holds (itself, or the members of a union)."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    out: list[type[BaseModel]] = []
    for member in typing.get_args(tp):
        out += spec_models(member)
    return out


def tag_of(model: type[BaseModel], field_name: str) -> Any:
    """The one value a ``Literal`` field of ``model`` takes (None if it is no such field)."""
    info = model.model_fields.get(field_name)
    if info is None or typing.get_origin(info.annotation) is not typing.Literal:
        return None
    values = typing.get_args(info.annotation)
    return values[0] if len(values) == 1 else None


class KindRegistry(Generic[T]):
    """Instances of registered subclasses of ``base``, by their ``name``, in the order they
    were registered (the order messages and docs list them).

    Parameters
    ----------
    what : str
        What the classes are, for messages (``"output kind"``).
    base : type
        The abstract base class registered classes subclass.
    attributes : tuple of str
        The class attributes a registered class must set (besides ``name`` and ``spec``).
    check : callable
        ``check(cls) -> list of str``: what else the class lacks (its spec's tags).
    group : str, optional
        The entry-point group whose classes that subclass ``base`` are registered here on
        first use (:mod:`ddr.plugins`).
    """

    def __init__(
        self,
        what: str,
        base: type,
        attributes: tuple[str, ...],
        check: Callable[[Any], list[str]],
        group: str | None = None,
    ) -> None:
        self.what = what
        self.base = base
        self.attributes = ("name", "spec", *attributes)
        self.check = check
        self.group = group
        self._items: dict[str, T] = {}
        if group is not None:
            _BY_GROUP.setdefault(group, []).append(self)

    def _load_plugins(self) -> None:
        """Register the classes of the entry-point group not handled yet, each in the
        registries of the group whose base it subclasses."""
        if self.group is None:
            return
        for plugin in plugins.load(self.group):
            if plugin in _HANDLED:
                continue
            _HANDLED.add(plugin)
            takers = [
                r
                for r in _BY_GROUP[self.group]
                if inspect.isclass(plugin.obj) and issubclass(plugin.obj, r.base)
            ]
            if not takers:
                bases = " or ".join(r.base.__name__ for r in _BY_GROUP[self.group])
                plugins.report(plugin, f"{plugin.value} is {plugin.obj!r}, not a {bases} subclass")
            for registry in takers:
                registry._register_plugin(plugin)

    def _register_plugin(self, plugin: plugins.Plugin) -> None:
        cls = plugin.obj
        missing = self.lacks(cls)
        if missing:
            plugins.report(plugin, f"the {self.what} {cls.__name__} lacks: " + "; ".join(missing))
            return
        if cls.name != plugin.name:
            plugins.report(
                plugin,
                f"the {self.what} {cls.__name__} is named {cls.name!r}, not {plugin.name!r} "
                "(name the entry point as the class names itself)",
            )
            return
        have = self._items.get(cls.name)
        if have is not None and type(have) is not cls:
            owner = type(have)
            whose = "ddr's own" if owner.__module__.split(".")[0] == "ddr" else "another plug-in's"
            plugins.report(
                plugin,
                f"the {self.what} name {cls.name!r} is {whose} "
                f"({owner.__module__}.{owner.__qualname__})",
            )
            return
        self.register(cls)

    def lacks(self, cls: Any) -> list[str]:
        """What ``cls`` lacks to be registered (empty when nothing)."""
        if not (inspect.isclass(cls) and issubclass(cls, self.base)):
            return [f"{self.base.__name__} as a base class"]
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        missing += [a for a in self.attributes if not hasattr(cls, a)]
        name = getattr(cls, "name", None)
        if name is not None and not (isinstance(name, str) and _NAME.fullmatch(name)):
            missing.append(f"name (a lower-case word; got {name!r})")
        return missing or self.check(cls)

    def register(self, cls: C) -> C:
        """Register ``cls`` (also as a class decorator); returns it.

        Raises
        ------
        TypeError
            The class lacks a required piece (named in the message).
        ValueError
            Another class is registered under the same name.
        """
        missing = self.lacks(cls)
        if missing:
            raise TypeError(
                f"{self.what} {getattr(cls, '__name__', cls)!r} cannot be registered; it "
                "lacks: " + "; ".join(missing)
            )
        have = self._items.get(cls.name)
        if have is not None and type(have) is not cls:
            raise ValueError(
                f"{self.what} {cls.name!r} is {type(have).__qualname__} already; "
                f"unregister it before registering {cls.__qualname__}"
            )
        self._items[cls.name] = cls()
        _generation[0] += 1
        return cls

    def unregister(self, cls: type) -> None:
        """Remove ``cls`` if it is registered (a plug-in's tests clean up after themselves)."""
        if type(self._items.get(getattr(cls, "name", None))) is cls:  # type: ignore[arg-type]
            del self._items[cls.name]  # type: ignore[attr-defined]
            _generation[0] += 1

    def all(self) -> dict[str, T]:
        """The registered instances by name, in the order of registration (the plug-ins'
        after ddr's own)."""
        self._load_plugins()
        return dict(self._items)

    def get(self, name: str) -> T:
        """The instance registered as ``name``.

        Raises
        ------
        ValueError
            No class is, naming the registered ones.
        """
        self._load_plugins()
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(repr(k) for k in self._items)
            raise ValueError(f"unknown {self.what} {name!r}; registered: {known}") from None
