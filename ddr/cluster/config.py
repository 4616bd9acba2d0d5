"""Cluster config files: the schema, the built-in configs, loading and validation.

The keyword block of each kind is validated against the keyword names of the backend's own
classes (:mod:`ddr.cluster.kinds`); the ``dask:`` block against dask's config and against
what can be exported to workers. Every problem is reported as ``file:line:col: message``;
a ``--cluster-set`` override is reported under its own text.

The model a file is validated with (:func:`config_model`: the registered kinds, one keyword
block per backend) is built from the registry when it is first needed, and again when a
backend was registered since (a plug-in's, :mod:`ddr.plugins`); every such model subclasses
:class:`ClusterConfig`.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, create_model

from ddr.cluster.kinds import backend_class, backends, generation
from ddr.cluster.settings import ClusterSettings
from ddr.cluster.worker_env import worker_environment
from ddr.config.document import Document, load_document
from ddr.config.errors import Location, PipelineError, Problem
from ddr.config.validation import validate

__all__ = [
    "BUILTIN",
    "ClusterConfig",
    "config_model",
    "json_schema",
    "load_cluster_config",
    "validate_cluster",
]


class ClusterConfig(ClusterSettings):
    """A validated ddr cluster config file: what :func:`load_cluster_config` returns is an
    instance (of the :func:`config_model` of the registered kinds, which subclasses this)."""


_MODEL: list[tuple[int, type[ClusterConfig]]] = []  # [(generation, model)]


def config_model() -> type[ClusterConfig]:
    """The model cluster config files are validated with: ``kind`` one of the registered
    kinds, and a keyword block for each kind that takes one (rebuilt when a backend was
    registered since it was built).

    Returns
    -------
    type
        A subclass of :class:`ClusterConfig`.
    """
    kinds = backends()  # registers the plug-ins' backends on first use
    if not _MODEL or _MODEL[0][0] != generation():
        fields: dict[str, Any] = {
            "kind": (Literal[tuple(kinds)], ...),
            **{
                kind: (
                    dict[str, Any] | None,
                    Field(None, description=f"{b.target} keyword arguments."),
                )
                for kind, b in kinds.items()
                if b.block
            },
        }
        model = create_model(
            "ClusterConfig", __base__=ClusterConfig, __doc__="A ddr cluster config file.", **fields
        )
        _MODEL[:] = [(generation(), model)]
    return _MODEL[0][1]


#: built-in configs usable by name: ``--cluster local`` (the default), ``threads``, ``sync``
BUILTIN: dict[str, str] = {
    "local": """\
ddr-cluster: 1
kind: local
description: A LocalCluster sized by dask to this machine (processes, one BLAS thread each).
local:
  processes: true
  memory_limit: auto
  dashboard_address: ":0"
""",
    "threads": "ddr-cluster: 1\nkind: threads\ndescription: dask's threaded scheduler\n",
    "sync": "ddr-cluster: 1\nkind: sync\ndescription: dask's single-threaded scheduler\n",
}


def load_cluster_config(
    source: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()
) -> Any:
    """Read and validate a cluster config file (or a built-in name: local, threads, sync).

    Parameters
    ----------
    source : str or path
        A YAML file, or one of :data:`BUILTIN`.
    overrides : list of str
        ``--cluster-set`` items: ``k=v`` sets a param, a dotted key any place
        (``slurm.cores=2``).

    Returns
    -------
    ClusterConfig

    Raises
    ------
    PipelineError
        Every problem, as ``file:line:col: message``.
    """
    name = str(source)
    try:
        if not Path(name).exists() and name in BUILTIN:
            doc = load_document(f"<builtin {name}>", overrides, text=BUILTIN[name])
        else:
            if not Path(name).exists():
                raise PipelineError(
                    [
                        Problem(
                            Location(name, 0, 0),
                            f"no such cluster config (give a file or one of {', '.join(BUILTIN)})",
                        )
                    ]
                )
            doc = load_document(name, overrides)
        return validate_cluster(doc)
    except PipelineError as exc:
        raise PipelineError([_as_cluster_set(p) for p in exc.problems]) from None


def _as_cluster_set(problem: Problem) -> Problem:
    """Overrides of a cluster config come from ``--cluster-set``: say so."""
    loc = problem.location
    if loc.line == 0 and loc.file.startswith("--set "):
        return Problem(
            Location("--cluster-set " + loc.file.removeprefix("--set "), 0, 0), problem.message
        )
    return problem


def validate_cluster(doc: Document) -> Any:
    """Validate a loaded cluster document; raise all problems at once."""
    config = validate(doc, config_model())
    data = doc.data if isinstance(doc.data, dict) else {}
    kind = data.get("kind")
    if isinstance(kind, str) and kind in backends():
        _check_blocks(doc, data, kind)
    if isinstance(data.get("dask"), dict):
        _check_dask(doc, data["dask"])
    doc.raise_problems()
    assert config is not None  # validate() added problems otherwise
    return config


def _check_blocks(doc: Document, data: dict[str, Any], kind: str) -> None:
    backend = backend_class(kind)
    for other, b in backends().items():
        if b.block and other != kind and other in data:
            doc.problem(
                (other,),
                f"a {other!r} block in a config of kind {kind!r}; remove it or set kind: {other}",
                key=True,
            )
    block = data.get(kind)
    if backend.needs_block and not isinstance(block, dict):
        doc.problem(
            ("kind",), f"kind {kind} needs a {kind!r} block with the backend's keyword arguments"
        )
    elif isinstance(block, dict):
        valid = backend.keywords()
        for key in block:
            if key not in valid:
                close = difflib.get_close_matches(key, sorted(valid), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                doc.problem((kind, key), f"{backend.target} has no keyword {key!r}{hint}", key=True)
        backend.check_block(block, doc)
    if not backend.scalable and ("scale" in data or "adapt" in data):
        doc.problem(
            ("scale",) if "scale" in data else ("adapt",),
            f"kind {kind} cannot be scaled from here",
            key=True,
        )


def _check_dask(doc: Document, block: dict[str, Any]) -> None:
    import dask

    for key, value in block.items():
        if not isinstance(key, str) or ("." not in key and key not in dask.config.config):
            doc.problem(
                ("dask", key),
                f"{key!r} is not a dask config key (use dotted keys such as "
                "distributed.worker.memory.target)",
                key=True,
            )
            continue
        try:
            worker_environment({key: value})
        except ValueError as exc:
            doc.problem(("dask", key), str(exc), key=True)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of cluster config files (``ddr schema --cluster``)."""
    schema = config_model().model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "ddr cluster config (schema version 1)"
    return schema
