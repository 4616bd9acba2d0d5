"""The value types of pipeline files: names, references, chunk sizes, storage options.

Shared by the schema (:mod:`ddr.pipeline.schema`) and the output kinds
(:mod:`ddr.pipeline.outputs`), which declare their own spec models with them; kept apart
from the schema so that the schema can list the registered kinds without an import loop.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from ddr.config.validation import not_a_bool

__all__ = [
    "ChunkSize",
    "IfExists",
    "Name",
    "Ref",
    "StorageOptions",
    "Strict",
    "split_ref",
]

#: what to do with an existing output
IfExists = Literal["error", "overwrite", "skip-if-complete"]

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_ATTR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid name: use letters, digits, '_' and '-', starting with a "
            "letter or '_' (dots separate a step from one of its outputs)"
        )
    return value


def _check_ref(value: str) -> str:
    head, dot, tail = value.partition(".")
    if not _NAME_RE.fullmatch(head) or (dot and not _ATTR_RE.fullmatch(tail)):
        raise ValueError(
            f"{value!r} is not a valid reference: write an input or step name (e.g. X, pca) or "
            "step.output (e.g. pca.model, pca.components_)"
        )
    return value


def check_slice(value: str) -> str:
    """Refuse what is not ``'start:stop'``."""
    if not re.fullmatch(r"\s*-?\d*\s*:\s*-?\d*\s*", value):
        raise ValueError(f"{value!r} is not a slice: write 'start:stop' (e.g. '0:25', '10:')")
    return value


def _check_chunk(value: int) -> int:
    from ddr.io.stored_chunks import chunk_size_problem

    problem = chunk_size_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def split_ref(ref: str) -> tuple[str, str | None]:
    """``"pca.components_"`` -> ``("pca", "components_")``; ``"X"`` -> ``("X", None)``."""
    head, _, tail = ref.partition(".")
    return head, tail or None


#: An input, step or variable name.
Name = Annotated[str, AfterValidator(_check_name)]
#: A reference to an input or a step, or to one output of a step (``pca.model``).
Ref = Annotated[
    str,
    AfterValidator(_check_ref),
    Field(description="An input or step name, or step.output (e.g. pca.model)."),
]

#: A chunk size along one dim: elements per chunk, or -1 (the whole dim in one chunk).
ChunkSize = Annotated[int, BeforeValidator(not_a_bool), AfterValidator(_check_chunk)]

#: Options of a URL's filesystem.
StorageOptions = Annotated[
    dict[str, Any] | None,
    Field(
        description="Options of the URL's filesystem (fsspec: key/secret, endpoint_url, "
        "anon, token, account_name, ...). Credentials and endpoints otherwise come from the "
        "environment and the usual config files. Secret values are never recorded."
    ),
]


class Strict(BaseModel):
    """A part of a pipeline file: unknown keys refused, values frozen."""

    model_config = ConfigDict(extra="forbid", populate_by_name=False, frozen=True)
