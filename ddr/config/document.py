"""Read a pipeline (or cluster) file: safe YAML with line and column of every value.

The file is parsed with ruamel.yaml's round-trip loader, which builds only plain mappings,
sequences and scalars (no Python objects: there is no unsafe path) and rejects duplicate
keys. The document is turned into plain Python data plus an *index* from every path
(``("steps", "pca", "with", "n_components")``) to the line and column of its key and
value, so later stages (pydantic validation, reference checks, metadata checks) can say
exactly where a problem is.

Then, in order:

1. ``--set key=value`` overrides are applied (``key`` alone names a param; a dotted key such
   as ``run.if_exists`` names any place in the document). Values are parsed as YAML, so
   ``--set k=5`` gives an int and ``--set name=pca`` a string.
2. ``${params.name}`` is replaced everywhere (params may refer to other params). A value that
   is exactly one ``${params.x}`` takes the param's type; inside a longer string the param
   is formatted into it. ``$${`` is a literal ``${``; a ``${`` that no ``}`` closes is an
   error, not text. Nothing else is interpolated: no environment variables, no
   expressions, never ``eval``.

Reading is bounded (:mod:`ddr.config.limits`): the file's size, what YAML aliases and params
expand to, and how deeply values nest, each refused at its line and column.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddr.config import limits
from ddr.config.errors import Location, PipelineError, Problem

__all__ = ["Document", "Span", "load_document", "parse_overrides"]

_PARAM_RE = re.compile(r"\$(\$?)\{([^{}]*)\}")
# a whole ${...} (or $${...}) where one is, else a lone ${ (or $${) that no } closes
_OPENING_RE = re.compile(r"\$(\$?)\{[^{}]*\}|\$(\$?)\{")
_STR_TAG = "tag:yaml.org,2002:str"

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Span:
    """Where a mapping key and its value (or a sequence item) are in the file."""

    key: Location
    value: Location


@dataclass
class Document:
    """A parsed file: plain data, where each part of it came from, and its problems so far."""

    file: str
    data: Any
    index: dict[Path_, Span] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def where(self, path: Path_, *, key: bool = False) -> Location:
        """The location of ``path``: its value (or key), else that of its nearest ancestor's key.

        A path that does not exist (a required field that is missing) is reported at the key
        of the mapping it is missing from.
        """
        path = tuple(path)
        if path in self.index:
            span = self.index[path]
            return span.key if key else span.value
        while path:
            path = path[:-1]
            if path in self.index:
                return self.index[path].key
        return Location(self.file, 1, 1)

    def problem(self, path: Path_, message: str, *, key: bool = False) -> None:
        self.problems.append(Problem(self.where(path, key=key), message))

    def raise_problems(self) -> None:
        if self.problems:
            raise PipelineError(self.problems)


def _loc(file: str, lc: tuple[int, int] | None, fallback: Location) -> Location:
    if lc is None:
        return fallback
    return Location(file, lc[0] + 1, lc[1] + 1)


def _parse_yaml(text: str, file: str) -> Any:
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = limits.bounded_yaml("rt")  # round-trip: positions, duplicate keys rejected
    try:
        docs = list(yaml.load_all(text))
    except limits.LimitError as exc:
        mark = exc.problem_mark
        raise PipelineError(
            [Problem(Location(file, mark.line + 1, mark.column + 1), str(exc.problem))]
        ) from None
    except DuplicateKeyError as exc:
        mark = exc.problem_mark
        m = re.search(r'duplicate key "(.*?)"', str(exc.problem))
        first = exc.context_mark.line + 1 if exc.context_mark is not None else None
        name = m.group(1) if m else "?"
        where = f" (the mapping starts on line {first})" if first else ""
        raise PipelineError(
            [
                Problem(
                    Location(file, mark.line + 1, mark.column + 1),
                    f"duplicate key {name!r}{where}; each key may appear once",
                )
            ]
        ) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        what = " ".join(str(s) for s in (exc.context, exc.problem) if s)
        ctx = exc.context_mark
        if ctx is not None and exc.problem_mark is not None and ctx.line != mark.line:
            what += f" (it started on line {ctx.line + 1}, column {ctx.column + 1})"
        raise PipelineError(
            [Problem(Location(file, line, col), f"YAML syntax error: {what}")]
        ) from None
    except YAMLError as exc:
        raise PipelineError([Problem(Location(file), f"YAML error: {exc}")]) from None
    if len(docs) > 1:
        raise PipelineError(
            [Problem(Location(file), f"the file holds {len(docs)} YAML documents; give one")]
        )
    return docs[0] if docs else None


def _plain(node: Any, path: Path_, doc: Document, here: Location) -> Any:
    """Plain Python data from the round-trip tree, indexing every key and item."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar

    file = doc.file
    if isinstance(node, CommentedMap):
        tag = getattr(node.tag, "value", None)
        if tag and not tag.startswith(("tag:yaml.org,2002:map", "tag:yaml.org,2002:omap")):
            doc.problems.append(Problem(here, f"YAML tags are not allowed here: {tag}"))
        out: dict[str, Any] = {}
        for k in node:
            own = k in getattr(node, "_ok", node)  # merged (<<) keys have no position of their own
            kloc = _loc(file, node.lc.key(k) if own else None, here)
            vloc = _loc(file, node.lc.value(k) if own else None, kloc)
            if not isinstance(k, str):
                doc.problems.append(
                    Problem(kloc, f"keys must be strings; got {type(k).__name__} {k!r}")
                )
                continue
            key = str(k)
            doc.index[(*path, key)] = Span(kloc, vloc)
            out[key] = _plain(node[k], (*path, key), doc, vloc)
        return out
    if isinstance(node, CommentedSeq):
        tag = getattr(node.tag, "value", None)
        if tag and not tag.startswith("tag:yaml.org,2002:seq"):
            doc.problems.append(Problem(here, f"YAML tags are not allowed here: {tag}"))
        items = []
        for i, item in enumerate(node):
            loc = _loc(file, node.lc.item(i), here)
            doc.index[(*path, i)] = Span(loc, loc)
            items.append(_plain(item, (*path, i), doc, loc))
        return items
    if isinstance(node, TaggedScalar):
        tag = getattr(node.tag, "value", str(node.tag))
        if tag == _STR_TAG:
            return str(node.value)
        doc.problems.append(Problem(here, f"YAML tags are not allowed: {tag}"))
        return None
    if node is None or isinstance(node, bool):
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, (_dt.date, _dt.datetime)):
        return node.isoformat()
    doc.problems.append(
        Problem(here, f"values of type {type(node).__name__} are not allowed in pipeline files")
    )
    return None


def parse_overrides(items: list[str] | tuple[str, ...]) -> list[tuple[str, Any, str]]:
    """``["k=5", "run.if_exists=overwrite"]`` -> ``[(key, value, original text), ...]``.

    Values are parsed as YAML scalars or flow collections (``5`` -> int, ``[1, 2]`` -> list).
    """
    from ruamel.yaml.error import YAMLError

    yaml = limits.bounded_yaml("safe")
    out: list[tuple[str, Any, str]] = []
    problems = []
    for text in items:
        key, sep, raw = text.partition("=")
        if not sep or not key.strip():
            problems.append(
                Problem(Location(f"--set {text}", 0, 0), "expected key=value, e.g. --set k=5")
            )
            continue
        try:
            value = yaml.load(raw) if raw.strip() else ""
        except limits.LimitError as exc:
            problems.append(Problem(Location(f"--set {text}", 0, 0), str(exc.problem)))
            continue
        except YAMLError as exc:
            problems.append(
                Problem(Location(f"--set {text}", 0, 0), f"the value is not valid YAML: {exc}")
            )
            continue
        if isinstance(value, (_dt.date, _dt.datetime)):
            value = raw.strip()
        out.append((key.strip(), value, text))
    if problems:
        raise PipelineError(problems)
    return out


def _apply_overrides(doc: Document, overrides: list[tuple[str, Any, str]]) -> None:
    data = doc.data
    for key, value, text in overrides:
        here = Location(f"--set {text}", 0, 0)
        parts = key.split(".")
        if len(parts) == 1:
            params = data.get("params")
            if not isinstance(params, dict) or key not in params:
                known = sorted(params) if isinstance(params, dict) else []
                hint = _did_you_mean(key, known)
                doc.problems.append(
                    Problem(
                        here,
                        f"no param {key!r} in {doc.file}{hint}; params: {known or 'none'} "
                        "(set other places with a dotted key, e.g. run.if_exists=overwrite)",
                    )
                )
                continue
            parts = ["params", key]
        node = data
        ok = True
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part) if isinstance(node, dict) else None
            if nxt is None and isinstance(node, dict):
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                doc.problems.append(
                    Problem(here, f"{'.'.join(parts[: i + 1])} is not a mapping; cannot set {key}")
                )
                ok = False
                break
            node = nxt
        if ok:
            node[parts[-1]] = value
            doc.index[tuple(parts)] = Span(here, here)


def _did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _interpolate(doc: Document) -> None:
    data = doc.data
    if not isinstance(data, dict):
        return
    raw_params = data.get("params") if isinstance(data.get("params"), dict) else {}
    resolved: dict[str, Any] = {}
    resolving: list[str] = []
    # bounds (ddr.config.limits): values and characters produced, and the nesting of
    # containers and of params within params, so no substitution can grow without limit
    spent, level, over = 0, 0, False

    def spend(amount: int, path: Path_) -> bool:
        nonlocal spent, over
        spent += amount
        if spent > limits.MAX_SIZE and not over:
            over = True
            doc.problem(path, f"with its params substituted, the file {limits.too_large()}")
        return not over

    def nest(path: Path_) -> bool:
        nonlocal level
        level += 1
        if level > limits.MAX_DEPTH:
            doc.problem(path, f"params within params: {limits.too_deep(level)}")
            level -= 1
            return False
        return True

    def param(name: str, path: Path_) -> Any:
        nonlocal level
        head, *rest = name.split(".")
        if head in resolved:
            value = resolved[head]
        elif head in raw_params:
            if head in resolving:
                chain = " -> ".join([*resolving[resolving.index(head) :], head])
                doc.problem(path, f"params refer to each other in a cycle: {chain}")
                return None
            if not nest(path):
                return None
            resolving.append(head)
            value = resolved[head] = sub(raw_params[head], ("params", head))
            resolving.pop()
            level -= 1
        else:
            doc.problem(
                path,
                f"unknown param {head!r} in ${{params.{name}}}"
                f"{_did_you_mean(head, list(raw_params))}; params: {sorted(raw_params) or 'none'}",
            )
            return None
        for part in rest:
            if not isinstance(value, dict) or part not in value:
                doc.problem(path, f"param {name!r} does not exist ({head} has no key {part!r})")
                return None
            value = value[part]
        return value

    def sub(value: Any, path: Path_) -> Any:
        nonlocal level
        if not spend(1 + (len(value) if isinstance(value, str) else 0), path):
            return None
        if isinstance(value, (dict, list)):
            if not nest(path):
                return None
            if isinstance(value, dict):
                out: Any = {k: sub(v, (*path, k)) for k, v in value.items()}
            else:
                out = [sub(v, (*path, i)) for i, v in enumerate(value)]
            level -= 1
            return out
        if not isinstance(value, str) or "${" not in value:
            return value
        lone = _unterminated(value)
        if lone is not None:
            # taken literally, "${params.out/x.zarr" would become a directory of that name
            doc.problem(
                path,
                f"unterminated ${{ in {value!r} (character {lone + 1}): write "
                "${params.NAME}, with its closing brace (and $${ for a literal ${)",
            )
            return value
        whole = _PARAM_RE.fullmatch(value)
        if whole and not whole.group(1):
            return resolve(whole.group(2), path)

        def repl(m: re.Match[str]) -> str:
            if m.group(1):  # $${...} is a literal ${...}
                return "${" + m.group(2) + "}"
            v = resolve(m.group(2), path)
            if isinstance(v, (dict, list)):
                doc.problem(
                    path,
                    f"${{{m.group(2)}}} is a {type(v).__name__}; it cannot be put inside a string",
                )
                return ""
            text = "" if v is None else str(v)
            return text if spend(len(text), path) else ""

        return _PARAM_RE.sub(repl, value)

    def resolve(expr: str, path: Path_) -> Any:
        expr = expr.strip()
        if not expr.startswith("params."):
            doc.problem(
                path,
                f"cannot interpolate ${{{expr}}}: only ${{params.NAME}} is supported "
                "(write $${...} for a literal ${...})",
            )
            return None
        return param(expr.removeprefix("params."), path)

    for name in raw_params:
        param(name, ("params", name))
    for key in list(data):
        data[key] = resolved if key == "params" else sub(data[key], (key,))
    # a param used whole is shared, not copied: measure what the sharing amounts to
    found = None if over else limits.oversized_path(data)
    if found is not None:
        doc.problem(found[0], f"with its params substituted, {found[1]}")


def _unterminated(text: str) -> int | None:
    """Where the first ``${`` that no ``}`` closes starts in ``text`` (a ``$${`` is a literal
    and may stand alone), or None."""
    for m in _OPENING_RE.finditer(text):
        if m.group(2) == "":  # a lone ${, not escaped
            return m.start()
    return None


def load_document(
    source: str | os.PathLike,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    text: str | None = None,
    interpolate: bool = True,
) -> Document:
    """Parse a YAML file (or ``text``) into a :class:`Document`.

    Raises
    ------
    PipelineError
        For a missing file, YAML syntax errors, duplicate keys, tags, a non-mapping top
        level, bad ``--set`` overrides and interpolation errors (all at once where possible).
    """
    file = str(source)
    if text is None:
        p = Path(source)
        if not p.is_file():
            raise PipelineError([Problem(Location(file, 0, 0), "no such file")])
        try:
            text = limits.read_bounded(p, file)
        except (OSError, UnicodeDecodeError) as exc:
            raise PipelineError([Problem(Location(file, 0, 0), f"cannot read: {exc}")]) from None
    else:
        raw = text.encode("utf-8", "surrogatepass")
        limits.check_size(raw, len(raw), file)
    tree = _parse_yaml(text, file)
    doc = Document(file, None)
    if tree is None:
        raise PipelineError([Problem(Location(file), "the file is empty")])
    doc.data = _plain(tree, (), doc, Location(file, 1, 1))
    if not isinstance(doc.data, dict):
        doc.problems.append(
            Problem(Location(file), f"the top level must be a mapping; got a {type(tree).__name__}")
        )
        doc.raise_problems()
    parsed = parse_overrides(list(overrides))
    _apply_overrides(doc, parsed)
    if interpolate:
        _interpolate(doc)
    doc.raise_problems()
    return doc
