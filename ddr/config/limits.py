"""Bounds on what reading a pipeline or cluster file may cost.

A pipeline file is a few kilobytes of configuration, but YAML and ``${params.x}`` can make a
small file expand without limit: a 1.5 KB file of 30 params each repeating the last twice
grows to gigabytes, and nine levels of YAML aliases (each repeating the one before ten
times) to 10^9 values. Three bounds keep reading any file to well under a second and a few
tens of megabytes, each refused as ``file:line:col: message`` (exit code 2):

- :data:`MAX_FILE_BYTES`: the size of the file, found by reading at most one byte more;
- :data:`MAX_SIZE`: the values and characters a document may hold once YAML aliases and
  params are expanded, counted while the YAML is composed (an alias counts what it repeats)
  and while params are substituted, so nothing larger is ever built;
- :data:`MAX_DEPTH`: how deeply values (and params referring to params) may nest, checked
  before recursing, so no parser or validator runs out of stack.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.nodes import MappingNode, SequenceNode
from ruamel.yaml.scanner import RoundTripScanner, Scanner

from ddr.config.errors import Location, PipelineError, Problem

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_SIZE",
    "LimitError",
    "bounded_yaml",
    "measure",
    "oversized_path",
    "check_size",
    "read_bounded",
    "too_large",
]

#: The largest file read, in bytes (pipeline files are a few KB; this leaves room for long
#: ``isel`` index lists).
MAX_FILE_BYTES = 256 * 1024
#: The most values plus characters a document may hold after YAML aliases and params are
#: expanded: twice what a file of :data:`MAX_FILE_BYTES` can hold without them.
MAX_SIZE = 2 * MAX_FILE_BYTES
#: The deepest nesting of values, and of params that refer to params.
MAX_DEPTH = 64
#: The most digits of an integer (Python refuses to convert more than 4300 anyway).
MAX_INT_DIGITS = 1000


class LimitError(MarkedYAMLError):
    """A file exceeds one of the bounds of this module (raised while composing the YAML)."""


def too_large() -> str:
    return (
        f"expands to more than {MAX_SIZE:,} values and characters, the most a pipeline file "
        "may hold: YAML aliases or params repeat too much of it"
    )


def too_deep(depth: int) -> str:
    return f"values are nested {depth} deep; at most {MAX_DEPTH} levels are allowed"


def read_bounded(path: Path, file: str) -> str:
    """The text of ``path`` (UTF-8), refusing a file larger than :data:`MAX_FILE_BYTES`
    without reading the rest of it."""
    with path.open("rb") as fh:
        raw = fh.read(MAX_FILE_BYTES + 1)
        size = fh.seek(0, 2)
    check_size(raw, size, file)
    return raw.decode("utf-8")


def check_size(head: bytes, size: int, file: str) -> None:
    """Refuse a file of ``size`` bytes over :data:`MAX_FILE_BYTES`, at the line and column
    of ``head`` (its first bytes) where the bound is crossed."""
    if size <= MAX_FILE_BYTES:
        return
    line = head.count(b"\n", 0, MAX_FILE_BYTES) + 1
    col = MAX_FILE_BYTES - head.rfind(b"\n", 0, MAX_FILE_BYTES)
    raise PipelineError(
        [
            Problem(
                Location(file, line, col),
                f"the file is {size:,} bytes; pipeline and cluster files are limited to "
                f"{MAX_FILE_BYTES:,} bytes (256 KiB), reached here",
            )
        ]
    )


def bounded_yaml(typ: str) -> YAML:
    """A ruamel.yaml loader (``"rt"``, or ``"safe"`` in pure Python) with the bounds of this
    module: they raise :class:`LimitError` with the place in the text."""
    yaml = YAML(typ=typ, pure=True)
    yaml.Composer = _BoundedComposer
    yaml.Scanner = _BoundedRoundTripScanner if typ == "rt" else _BoundedScanner
    return yaml


class _FlowDepth:
    """Refuses flow collections (``[[[...``) nested deeper than :data:`MAX_DEPTH` as they
    are scanned: the scanner keeps a possible key per open level and checks them all at
    every token, so 50 000 open brackets alone would take seconds."""

    flow_level: int
    reader: Any

    def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
        if self.flow_level >= MAX_DEPTH:
            mark = self.reader.get_mark()
            raise LimitError(None, None, too_deep(self.flow_level + 1), mark)
        super().fetch_flow_collection_start(TokenClass, to_push)  # type: ignore[misc]


class _BoundedScanner(_FlowDepth, Scanner):
    pass


class _BoundedRoundTripScanner(_FlowDepth, RoundTripScanner):
    pass


class _BoundedComposer(Composer):
    """ruamel.yaml's composer, measuring every node as it is composed: its *size* (values
    plus characters, an alias counting all it repeats) and *depth*, from those of its
    children (already composed, so the cost is linear in the file, not in what it expands
    to). Raises :class:`LimitError` at the first node over :data:`MAX_SIZE` or
    :data:`MAX_DEPTH`, before the document is constructed."""

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        self._level = 0
        self._measured: dict[int, tuple[int, int]] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):  # the node it repeats is composed and measured
            return super().compose_node(parent, index)
        self._level += 1
        if self._level > MAX_DEPTH:
            raise LimitError(None, None, too_deep(self._level), event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._level -= 1
        size, depth = 1, 1
        if isinstance(node, (SequenceNode, MappingNode)):
            for child in _children(node):
                if id(child) not in self._measured:  # an alias to a value still open
                    raise LimitError(
                        None,
                        None,
                        "a YAML alias refers to a value that holds it (a cycle)",
                        event.start_mark,
                    )
                csize, cdepth = self._measured[id(child)]
                size += csize
                depth = max(depth, cdepth + 1)
        else:
            size += len(node.value)
            if str(node.tag).endswith(":int") and len(node.value) > MAX_INT_DIGITS:
                raise LimitError(
                    None,
                    None,
                    f"an integer of {len(node.value):,} digits; at most {MAX_INT_DIGITS} "
                    "are allowed",
                    event.start_mark,
                )
        self._measured[id(node)] = (size, depth)
        if size > MAX_SIZE:
            raise LimitError(None, None, f"this value {too_large()}", event.start_mark)
        if depth > MAX_DEPTH:  # through aliases: each part is shallow enough on its own
            raise LimitError(None, None, too_deep(depth), event.start_mark)
        return node


def _children(node: SequenceNode | MappingNode) -> Iterator[Any]:
    if isinstance(node, SequenceNode):
        yield from node.value
    else:
        for key, value in node.value:
            yield key
            yield value


def _items(value: Any) -> list[tuple[str | int, Any]]:
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return list(enumerate(value))
    return []


def measure(value: Any, memo: dict[int, tuple[int, int]] | None = None) -> tuple[int, int]:
    """``(size, depth)`` of plain data whose containers may be shared (params substituted
    by reference): size is values plus characters as if every shared part were copied.
    Iterative and linear in the distinct containers, whatever the depth or sharing."""
    memo = {} if memo is None else memo
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        node, ready = stack.pop()
        if not isinstance(node, (dict, list)) or (id(node) in memo and not ready):
            continue
        items = _items(node)
        if not ready:
            stack.append((node, True))
            stack.extend((v, False) for _, v in items)
            continue
        size, depth = 1, 1
        for k, v in items:
            size += len(k) if isinstance(k, str) else 0
            vsize, vdepth = memo.get(id(v), (1 + len(v) if isinstance(v, str) else 1, 1))
            size += vsize
            depth = max(depth, vdepth + 1)
        memo[id(node)] = (size, depth)
    if isinstance(value, (dict, list)):
        return memo[id(value)]
    return (1 + len(value) if isinstance(value, str) else 1), 1


def oversized_path(value: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where plain data exceeds :data:`MAX_SIZE` or :data:`MAX_DEPTH` (the deepest part that
    does on its own) and why, or None when it does not."""
    memo: dict[int, tuple[int, int]] = {}
    size, depth = measure(value, memo)
    if size <= MAX_SIZE and depth <= MAX_DEPTH:
        return None
    path: tuple[str | int, ...] = ()
    node = value
    while True:
        for key, child in _items(node):
            csize, cdepth = memo.get(id(child), (0, 0))
            if csize > MAX_SIZE or cdepth > MAX_DEPTH:
                path, node = (*path, key), child
                break
        else:
            break
    size, depth = memo[id(node)]
    return path, (f"this value {too_large()}" if size > MAX_SIZE else too_deep(depth))
