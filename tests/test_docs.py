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
import ddr.model_selection
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
    ddr.model_selection, ddr.linalg.*, ddr.tags, ddr.families, ddr.testing, ddr.plugins, and
    the base class a cluster backend plug-in subclasses."""
    names = {"ddr", "ddr.em", "ddr.linalg"} | {f"ddr.{name}" for name in ddr._EXPORTS}
    names |= {f"ddr.em.{name}" for name in ddr.em.__all__}
    names |= {f"ddr.stats.{name}" for name in ddr.stats.__all__}
    names |= {f"ddr.io.{name}" for name in ddr.io.__all__}
    names |= {f"ddr.model_selection.{name}" for name in ddr.model_selection.__all__}
    for module in (ddr.tags, ddr.families, ddr.testing, ddr.plugins):  # what plug-ins use
        names |= {module.__name__} | {f"{module.__name__}.{n}" for n in module.__all__}
    names |= {"ddr.cluster.backend", "ddr.cluster.backend.Backend"}  # backend plug-ins
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


# ------------------------------------------------------- lists generated (issue 28)
def _built_lists(ddr_pages, tmp_path) -> dict[str, str]:
    """What the docs build writes to ``user-guide/generated/`` (the extension's hook run
    with a stand-in Sphinx application)."""

    class App:
        srcdir = str(tmp_path)

    ddr_pages.write_output_kind_lists(App())
    out = tmp_path / "user-guide" / "generated"
    return {p.name: p.read_text() for p in out.glob("*.txt")}


def _rows(table: str) -> dict[str, str]:
    """The rows of a generated Markdown table by their first cell (its code text)."""
    rows = {}
    for line in table.splitlines()[2:]:
        first = line.split("|")[1].strip()
        rows[re.sub(r"[`\[\]]|\(.*\)", "", first)] = line
    return rows


def test_every_registered_op_and_statistic_is_in_the_built_lists(ddr_pages, tmp_path):
    import ddr.stats
    from ddr.pipeline import registry

    built = _built_lists(ddr_pages, tmp_path)
    estimators = _rows(built["estimators.txt"])
    statistic_ops = _rows(built["statistic-ops.txt"])
    for name, op in registry.ops().items():
        if op.family in ("fit", "apply"):
            cls, method = name.split(".", 1)
            assert f"`{method}`" in estimators[cls], f"{name} is missing from the docs' list"
        elif op.family == "statistic":
            assert f"`{op.cls.__name__}`" in statistic_ops[name], name
    # the ones the hand-kept lists had missed
    for name in ("FactorAnalysis", "Nystroem", "PLSSVD", "TruncatedSVD", "MultinomialNB", "PLSA"):
        assert name in estimators
    assert {"class_sums", "pairwise_moments"} <= set(statistic_ops)
    statistics = _rows(built["statistics.txt"])
    for name in ddr.stats.__all__:
        cls = getattr(ddr.stats, name)
        if isinstance(cls, type) and issubclass(cls, ddr.stats.Statistic):
            assert name in statistics or cls is ddr.stats.Statistic, name
    examples = _rows(built["examples.txt"])
    assert {p.name for p in (ROOT / "pipelines").glob("*.yaml")} == set(examples)


def test_the_pages_include_the_built_lists_not_hand_kept_ones():
    guide = ROOT / "docs" / "user-guide"
    pipelines = (guide / "pipelines.md").read_text()
    for name in ("estimators", "statistic-ops", "examples", "output-kinds", "plots"):
        assert f"```{{include}} generated/{name}.txt\n```" in pipelines, name
    assert "```{include} generated/statistics.txt\n```" in (guide / "statistics.md").read_text()
    assert "`Est` is any ddr estimator: `StandardScaler`" not in pipelines
    assert "| `moments`, `class_moments`, `categorical_counts`, `histogram` |" not in pipelines


def test_the_readme_tour_names_every_estimator():
    """The README is not built (GitHub shows it as it is): its tour is checked instead."""
    from ddr.testing import exported_estimators

    readme = (ROOT / "README.md").read_text()
    short = {"QuadraticDiscriminantAnalysis": "QDA", "LinearDiscriminantAnalysis": "LDA"}
    missing = [
        c.__name__
        for c in exported_estimators()
        if f"`{c.__name__}`" not in readme and short.get(c.__name__, "-") not in readme
    ]
    assert not missing, f"README.md's tour does not name {missing}"
