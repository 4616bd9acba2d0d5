"""Validation of YAML documents against pydantic models, every error at its line and column.

Shared by pipeline files and cluster configs: pydantic's error locations are mapped back to
places in the data (and so to ``file:line:col``), and its messages are rewritten to say what
was expected and what was given, with the valid keys for an unknown one.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Annotated, Any, Union

import pydantic
from pydantic import AfterValidator, BaseModel, BeforeValidator, ValidationError

from ddr.config.document import Document

#: The version of the pipeline and cluster file schemas this ddr reads.
SCHEMA_VERSION = 1


def check_duration(value: str | float) -> str | float:
    from dask.utils import parse_timedelta

    if isinstance(value, bool):
        raise ValueError(f"expected seconds or a time such as 10m; got {value!r}")
    try:
        n = parse_timedelta(value, default="s")
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"expected seconds or a time such as 10m; got {value!r}") from None
    if n is None or n <= 0:
        raise ValueError(f"must be a positive time; got {value!r}")
    return value


#: A positive time in a file: seconds, or a dask time such as ``30s``, ``10m``, ``2h``.
Duration = Annotated[str | float, AfterValidator(check_duration)]


def not_a_bool(value: Any) -> Any:
    """Refuse a bool where a number is expected: pydantic reads ``true`` as 1 (bool is an
    int in Python), so ``max_points: true`` would silently mean 1."""
    if isinstance(value, bool):
        raise ValueError(f"must be an integer, not a boolean; got {value!r}")
    return value


#: An integer in a file: ``true``/``false`` are refused, not read as 1 and 0.
Int = Annotated[int, BeforeValidator(not_a_bool)]
#: An integer >= 1 in a file (``true`` refused).
PositiveInt = Annotated[pydantic.PositiveInt, BeforeValidator(not_a_bool)]


def check_path(value: str) -> str:
    """Refuse a path no filesystem or URL can hold: one with a NUL byte (the operating
    system would refuse it only when the path is first used, deep in a run)."""
    if "\x00" in value:
        raise ValueError(f"a path cannot hold a NUL byte (\\x00); got {value!r}")
    return value


#: A path or URL in a file (checked: no NUL byte).
PathStr = Annotated[str, AfterValidator(check_path)]


def seconds(value: str | float) -> float:
    """A :data:`Duration` in seconds."""
    from dask.utils import parse_timedelta

    return float(parse_timedelta(value, default="s"))


def _unwrap(tp: Any) -> Any:
    while True:
        if typing.get_origin(tp) is Annotated:
            tp = typing.get_args(tp)[0]
        elif hasattr(tp, "resolved_type"):  # stands for a type built at run time
            tp = tp.resolved_type()
        else:
            return tp


def _members(tp: Any) -> list[Any]:
    """The members of a union, those of unions inside it included (None left out)."""
    tp = _unwrap(tp)
    if typing.get_origin(tp) not in (Union, types.UnionType):
        return [tp]
    return [m for a in typing.get_args(tp) if a is not type(None) for m in _members(a)]


def _tags_fit(model: type[BaseModel], data: dict[str, Any]) -> bool:
    """Whether ``data`` has the value of every required ``Literal`` field of ``model`` (the
    tags that tell the members of a union apart: ``kind``, ``plot``)."""
    tags = [
        (f.alias or n, typing.get_args(f.annotation))
        for n, f in model.model_fields.items()
        if f.is_required() and typing.get_origin(f.annotation) is typing.Literal
    ]
    return bool(tags) and all(data.get(name) in values for name, values in tags)


def _pick_member(tp: Any, data: Any) -> Any:
    """For a union, the member that validates ``data`` (by its tags: ``kind``, and ``plot``
    in the union of plots inside), else the only non-None member; other types are returned
    as they are."""
    tp = _unwrap(tp)
    if typing.get_origin(tp) not in (Union, types.UnionType):
        return tp
    members = _members(tp)
    models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    if isinstance(data, dict) and models:
        for m in models:
            if _tags_fit(m, data):
                return m
    if len(members) == 1:
        return members[0]
    dicts = [m for m in members if typing.get_origin(m) is dict]
    if isinstance(data, dict) and len(dicts) == 1:
        return dicts[0]
    return None


def _model_at(root: type[BaseModel], loc: tuple[Any, ...], data: Any) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (to list its valid keys)."""
    tp: Any = root
    for elem in data_path(data, loc):
        tp = _pick_member(tp, data)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            fields = {(f.alias or n): f for n, f in tp.model_fields.items()}
            if elem not in fields:
                return None
            tp = fields[elem].annotation
        elif typing.get_origin(tp) is dict:
            tp = typing.get_args(tp)[1]
        elif typing.get_origin(tp) is list:
            tp = typing.get_args(tp)[0]
        else:
            return None
        data = data[elem]
    tp = _pick_member(tp, data)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def data_path(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The part of a pydantic error ``loc`` that names places in the data (drops union tags
    such as ``'plot'`` in ``('outputs', 3, 'plot', 'max_points')``)."""
    out: list[Any] = []
    loc = tuple(loc)
    for i, elem in enumerate(loc):
        if isinstance(data, dict) and elem in data:
            nxt = loc[i + 1] if i + 1 < len(loc) else None
            child = data[elem]
            is_tag = (
                nxt is not None
                and nxt in data
                and not (isinstance(child, dict) and nxt in child)
                and not isinstance(child, list)
            ) or (  # a tag named as its field is, before the tag of a union inside
                nxt is not None and isinstance(child, str) and child == nxt
            )
            if is_tag:
                continue
            data = child
            out.append(elem)
        elif isinstance(data, list) and isinstance(elem, int) and 0 <= elem < len(data):
            data = data[elem]
            out.append(elem)
    return tuple(out)


def _describe(path: tuple[Any, ...]) -> str:
    parts = []
    for p in path:
        parts.append(f"[{p}]" if isinstance(p, int) else ("." if parts else "") + str(p))
    return "".join(parts) or "the top level"


def _fmt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(err: dict[str, Any], path: tuple[Any, ...], root: type[BaseModel], data: Any) -> str:
    kind = err["type"]
    loc = tuple(err["loc"])
    where = _describe(path)
    value = err.get("input")
    if kind == "missing":
        return f"{where}: missing required key {loc[-1]!r}"
    if kind == "extra_forbidden":
        model = _model_at(root, loc[:-1], data)
        valid = sorted((f.alias or n) for n, f in model.model_fields.items()) if model else []
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown key {loc[-1]!r}{hint}" + (
            f"; valid keys: {', '.join(valid)}" if valid else ""
        )
    if kind == "union_tag_invalid":
        tags = err.get("ctx", {}).get("expected_tags", "")
        tag = str(err.get("ctx", {}).get("discriminator", "kind")).strip("'")
        return f"{where}: unknown {tag} {_fmt(err['ctx'].get('tag'))}; valid {tag}s: {tags}"
    if kind == "union_tag_not_found":
        tags = err.get("ctx", {}).get("expected_tags", "")
        tag = str(err.get("ctx", {}).get("discriminator", "kind")).strip("'")
        return f"{where}: missing required key {tag!r}" + (f" ({tags})" if tags else "")
    if kind == "literal_error":
        if path in (("ddr",), ("ddr-cluster",)):
            return (
                f"unsupported schema version {path[0]}: {_fmt(value)}; this ddr reads "
                f"version {SCHEMA_VERSION} (write `{path[0]}: {SCHEMA_VERSION}`)"
            )
        return f"{where}: expected {err['ctx']['expected']}; got {_fmt(value)}"
    if kind in ("value_error", "assertion_error"):
        msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        return f"{where}: {msg}"
    if kind == "too_short" and isinstance(value, (dict, list)) and not value:
        return f"{where}: must not be empty"
    msg = str(err["msg"]).replace("Input should be", "must be")
    msg = msg.replace(", unable to interpret input", "")
    return f"{where}: {msg}; got {_fmt(value)}"


def validate(doc: Document, model: type[BaseModel]) -> BaseModel | None:
    """Validate ``doc.data`` against ``model``; problems are added to ``doc.problems``.

    Returns the model instance, or None when the document is invalid.
    """
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        seen: set[tuple[Any, ...]] = set()
        for err in exc.errors(include_url=False):
            loc = tuple(err["loc"])
            path = data_path(doc.data, loc)
            # a value that fits no member of a union gets one error per member: keep the first
            structural = err["type"] in ("missing", "extra_forbidden")
            key = (path, err["type"]) if structural else (path,)
            if key in seen:
                continue
            seen.add(key)
            on_key = err["type"] == "extra_forbidden"
            doc.problem(path, _message(err, path, model, doc.data), key=on_key)
        return None
