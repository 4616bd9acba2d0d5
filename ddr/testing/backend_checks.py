"""The conformance suite of cluster backends (:class:`ddr.cluster.backend.Backend`).

Each check is a function of a backend class that raises ``AssertionError`` when the class
breaks what ``ddr validate``, ``ddr schema --cluster``, ``ddr run --dry-run`` and the memory
check rely on, without starting anything: its example block (``Backend.example``) validates
as a cluster config and reaches the backend's keywords unchanged; a misspelled keyword is
refused at its line and column with a did-you-mean; the dry run describes what would start
and writes nothing, starts no process; the config schema lists the kind; the memory a worker
would get is known or said to be unknown, before anything starts::

    from ddr.testing import parametrize_with_backend_checks

    @parametrize_with_backend_checks([MyBackend])
    def test_my_backend(backend, check, tmp_path):
        check(backend, tmp_path)
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ddr.cluster.backend import Backend

__all__ = [
    "backend_checks",
    "check_dry_run_starts_and_writes_nothing",
    "check_example_validates",
    "check_memory_limit_is_known_before_start",
    "check_misspelled_keyword_is_named",
    "check_schema_lists_the_kind",
    "parametrize_with_backend_checks",
    "registered_backends",
]

BackendCheck = Callable[[type[Backend], Path], None]


def registered_backends() -> list[type[Backend]]:
    """Every registered cluster backend (ddr's and the plug-ins'), in registration order.

    Returns
    -------
    list of type
    """
    import ddr.cluster  # noqa: F401  (registers the shipped backends)
    from ddr.cluster.kinds import backends

    return list(backends().values())


def backend_checks(backend: type[Backend]) -> Iterator[BackendCheck]:
    """The checks of a backend class, each a function ``check(backend, tmp_path)``.

    Parameters
    ----------
    backend : type
        A registered subclass of :class:`ddr.cluster.backend.Backend`.

    Yields
    ------
    callable
    """
    yield check_example_validates
    yield check_misspelled_keyword_is_named
    yield check_dry_run_starts_and_writes_nothing
    yield check_schema_lists_the_kind
    yield check_memory_limit_is_known_before_start


def parametrize_with_backend_checks(backends: Iterable[type[Backend]]) -> Any:
    """A pytest parametrisation of every check of every backend, as ``(backend, check)``.

    Parameters
    ----------
    backends : iterable of Backend subclasses

    Returns
    -------
    decorator
        ``pytest.mark.parametrize`` with ids ``"kind-check_name"``.
    """
    import pytest

    cases = [(cls, check) for cls in backends for check in backend_checks(cls)]
    ids = [f"{cls.kind}-{check.__name__}" for cls, check in cases]
    return pytest.mark.parametrize(("backend", "check"), cases, ids=ids)


# ------------------------------------------------------------------------ checks
def check_example_validates(backend: type[Backend], tmp_path: Path) -> None:
    """The example block validates as a cluster config of the backend's kind, its keywords
    among those the backend accepts, and reaches the backend's keywords unchanged."""
    config = _load(_write(tmp_path, backend, backend.example))
    assert config.kind == backend.kind, (config.kind, backend.kind)
    if backend.example is None:
        assert not backend.block, f"{backend.__name__} takes a block but gives no example"
        return
    assert backend.block, f"{backend.__name__} takes no block but gives an example"
    unknown = set(backend.example) - backend.keywords()
    assert not unknown, f"the example's keywords {sorted(unknown)} are not the backend's"
    assert config.backend_kwargs == backend.example, (config.backend_kwargs, backend.example)


def check_misspelled_keyword_is_named(backend: type[Backend], tmp_path: Path) -> None:
    """A keyword one letter off is refused at its line and column, naming the right one."""
    from ddr.config.errors import PipelineError

    if not backend.example:
        return
    right = sorted(backend.example)[0]
    wrong = right[:-1] + ("x" if right[-1] != "x" else "y")
    if wrong in backend.keywords():  # the misspelling is another keyword: nothing to check
        return
    block = {k: v for k, v in backend.example.items() if k != right} | {
        wrong: backend.example[right]
    }
    path = _write(tmp_path, backend, block)
    try:
        _load(path)
    except PipelineError as exc:
        text = str(exc)
        assert f"{path}:" in text and wrong in text, text
        assert f"did you mean '{right}'" in text, text
        return
    raise AssertionError(f"{backend.kind}: the keyword {wrong!r} was accepted")


def check_dry_run_starts_and_writes_nothing(backend: type[Backend], tmp_path: Path) -> None:
    """``--dry-run`` gives a description of what would start, names the backend's target
    (its class or call) and neither writes a file nor starts a process."""
    import psutil

    from ddr.cluster import dry_run

    config = _load(_write(tmp_path, backend, backend.example))
    work = tmp_path / "dry-run"
    work.mkdir()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with _cwd(work):
        text = dry_run(config)
    started = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert isinstance(text, str) and text.strip(), f"{backend.kind}: an empty dry run"
    name = backend.target.split("(")[0].rsplit(".", 1)[-1]
    assert name in text or backend.target in text, (backend.target, text)
    assert list(work.iterdir()) == [], f"{backend.kind}: the dry run wrote {list(work.iterdir())}"
    assert not started, f"{backend.kind}: the dry run started processes {sorted(started)}"


def check_schema_lists_the_kind(backend: type[Backend], tmp_path: Path) -> None:
    """``ddr schema --cluster`` (the cluster config's JSON Schema) names the kind."""
    from ddr.cluster import json_schema

    text = json.dumps(json_schema())
    assert json.dumps(backend.kind) in text, f"{backend.kind} is not in the cluster schema"


def check_memory_limit_is_known_before_start(backend: type[Backend], tmp_path: Path) -> None:
    """The memory each worker will get (for the memory check) is a positive number of
    bytes, or None where the config does not say, from the config alone."""
    config = _load(_write(tmp_path, backend, backend.example))
    limit = backend(config).worker_memory_limit()
    assert limit is None or (isinstance(limit, int) and limit > 0), limit


# ----------------------------------------------------------------------- helpers
def _write(tmp_path: Path, backend: type[Backend], block: dict[str, Any] | None) -> Path:
    """A cluster config file of the backend's kind with ``block`` (JSON is YAML)."""
    doc: dict[str, Any] = {"ddr-cluster": 1, "kind": backend.kind}
    if block is not None:
        doc[backend.kind] = block
    path = tmp_path / f"{backend.kind}.yaml"
    path.write_text("\n".join(f"{key}: {json.dumps(value)}" for key, value in doc.items()) + "\n")
    return path


def _load(path: Path) -> Any:
    from ddr.cluster import load_cluster_config

    return load_cluster_config(path)


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(here)
