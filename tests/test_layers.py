"""The import graph keeps ddr's layers (docs/user-guide/development.md, "Layers").

The contracts are import-linter's, configured in pyproject.toml (``[tool.importlinter]``): the
layers in order, the estimator families independent of each other, registries that import
none of their members. Every import counts: at a module's top, inside a function, and under
``if TYPE_CHECKING:`` (grimp, which builds import-linter's graph, reads them all; the last test
here checks that it does). Beside the contracts: no import cycle anywhere in ``ddr``, and the
package root (which wires ddr.io into the layers below it, :mod:`ddr._hooks`) is imported only
from above ddr.io.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]

#: the packages that may import the package root ``ddr`` (which imports ddr.io on use)
ABOVE_IO = ("ddr.cli", "ddr.pipeline", "ddr.testing")


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("ddr", cache_dir=None)


def test_the_import_contracts_are_kept():
    """``lint-imports`` with pyproject.toml's contracts (what CI runs, through this test)."""
    run = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"
    )
    done = subprocess.run(
        [sys.executable, "-c", run], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


def test_no_import_cycles():
    """No module of ddr imports itself back through others (a package's ``__init__`` and
    its modules included), whether the imports are at the top, in functions or for types."""
    graph = _graph()
    cycles = _cycles({m: graph.find_modules_directly_imported_by(m) for m in graph.modules})
    described = []
    for cycle in cycles:
        members = set(cycle)
        described.append(
            "; ".join(
                f"{a} -> {b} (line {d['line_number']})"
                for a in sorted(cycle)
                for b in sorted(graph.find_modules_directly_imported_by(a) & members)
                for d in graph.get_import_details(importer=a, imported=b)[:1]
            )
        )
    assert not described, "import cycles:\n" + "\n".join(described)


def test_only_the_layers_above_io_import_the_package_root():
    """``import ddr`` from below ddr.io would reach ddr.io through the root's wiring."""
    importers = _graph().find_modules_that_directly_import("ddr")
    below = sorted(m for m in importers if not m.startswith(ABOVE_IO))
    assert not below, f"import the package root but sit below ddr.io: {below}"


def test_imports_in_functions_and_for_types_are_in_the_graph(tmp_path, monkeypatch):
    """The contracts see what grimp sees: imports inside functions and under TYPE_CHECKING
    are edges of its graph like any other (else a lower layer could reach up unseen)."""
    pkg = tmp_path / "layered"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("")
    (pkg / "typed.py").write_text("")
    (pkg / "low.py").write_text(
        textwrap.dedent(
            """
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from layered.typed import T


            def late():
                from layered import high

                return high
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("layered", cache_dir=None)
    assert graph.direct_import_exists(importer="layered.low", imported="layered.high")
    assert graph.direct_import_exists(importer="layered.low", imported="layered.typed")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
