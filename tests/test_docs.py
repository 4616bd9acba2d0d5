"""The documentation site covers the public API and every example pipeline.

The build itself (``sphinx-build -W --keep-going -n``) runs in ``.ci/run``; these checks need
no Sphinx and keep a new public name or pipeline from going undocumented.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import ddr
import ddr.em
import ddr.families
import ddr.io
import ddr.linalg
import ddr.plugins
import ddr.stats
import ddr.tags
import ddr.testing

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = (ROOT / "docs" / "reference" / "index.rst").read_text()


def _documented() -> set[str]:
    """Fully qualified names the API reference lists (autosummary entries, autodata, modules)."""
    names: set[str] = set()
    module = ""
    in_summary = False
    for line in REFERENCE.splitlines():
        directive = re.match(
            r"\.\. (module|currentmodule|automodule|autodata|autosummary)::\s*(\S*)", line
        )
        if directive:
            kind, arg = directive.groups()
            in_summary = kind == "autosummary"
            if kind in ("module", "currentmodule", "automodule"):
                module = arg
                names.add(arg)
            elif kind == "autodata":
                names.add(f"{module}.{arg}")
            continue
        entry = re.match(r"   ([A-Za-z_]\w*)$", line)
        if in_summary and entry:
            names.add(f"{module}.{entry.group(1)}")
    return names


def _public() -> set[str]:
    """What the API reference must show: ddr's exports, ddr.em, ddr.stats, ddr.io,
    ddr.linalg.*, ddr.tags, ddr.families, ddr.testing, ddr.plugins."""
    names = {"ddr", "ddr.em", "ddr.linalg"} | {f"ddr.{name}" for name in ddr._EXPORTS}
    names |= {f"ddr.em.{name}" for name in ddr.em.__all__}
    names |= {f"ddr.stats.{name}" for name in ddr.stats.__all__}
    names |= {f"ddr.io.{name}" for name in ddr.io.__all__}
    for module in (ddr.tags, ddr.families, ddr.testing, ddr.plugins):  # what plug-ins use
        names |= {module.__name__} | {f"{module.__name__}.{n}" for n in module.__all__}
    for info in pkgutil.iter_modules(ddr.linalg.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"ddr.linalg.{info.name}")
            names |= {module.__name__} | {f"{module.__name__}.{n}" for n in module.__all__}
    return names


def test_the_api_reference_lists_every_public_name():
    missing = sorted(_public() - _documented())
    assert not missing, f"add these to docs/reference/index.rst: {missing}"


def test_the_api_reference_lists_only_public_names():
    unknown = sorted(_documented() - _public())
    assert not unknown, f"not public (or misspelt) in docs/reference/index.rst: {unknown}"


@pytest.fixture(scope="module")
def ddr_pages():
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        yield importlib.import_module("ddr_pages")
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))


def test_a_pipeline_header_becomes_prose_and_command_blocks(ddr_pages):
    header, end = ddr_pages.split_header(
        ["# What it shows.", "#", "#   ddr demo-data demo.zarr", "#   ddr run x.yaml", "#",
         "# More prose.", "ddr: 1"]
    )  # fmt: skip
    assert end == 6
    text = ddr_pages.header_markdown(header)
    assert text == (
        "What it shows.\n\n\n```bash\nddr demo-data demo.zarr\nddr run x.yaml\n```\n\n\n"
        "More prose.\n"
    )


@pytest.mark.parametrize("path", sorted((ROOT / "pipelines").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_pipeline_has_a_page_that_includes_it(path, ddr_pages):
    out_dir = ROOT / "docs" / "examples" / "generated"
    page = ddr_pages.pipeline_page(path, out_dir)
    header, end = ddr_pages.split_header(path.read_text().splitlines())
    assert header, f"{path.name} has no header comment saying what it shows and how to run it"
    assert "```bash\nddr " in page, f"{path.name}'s header gives no command to run it"
    include = re.search(r"```\{literalinclude\} (\S+)\n:language: yaml\n:lines: (\d+)-", page)
    assert (out_dir / include.group(1)).resolve() == path.resolve()
    assert int(include.group(2)) == end + 1


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(p.name for p in (ROOT / "docs").glob("*.md"))]
)
def test_relative_links_lead_to_files(page):
    path = ROOT / page if page == "README.md" else ROOT / "docs" / page
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", path.read_text())
    missing = [t for t in targets if "://" not in t and not (path.parent / t).exists()]
    assert not missing, f"{page} links to files that do not exist: {missing}"


def test_dir_of_the_package_lists_its_public_names_only():
    """``dir(ddr)`` shows what users can use, not the module's own imports."""
    import ddr

    names = dir(ddr)
    assert "PCA" in names and "load" in names and "__version__" in names
    assert not {"os", "Any", "Mapping", "TYPE_CHECKING", "annotations", "importlib"} & set(names)
