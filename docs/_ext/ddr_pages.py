"""Pages generated from the repository at build time, so they cannot drift from it.

- ``examples/generated/<name>.md``: one page per ``pipelines/*.yaml``, titled by its file
  name, with its ``description``; its header comment (what it demonstrates, as prose, and
  the commands that run it, indented) rendered as text and ``bash`` blocks; then the
  pipeline itself, included from the file.
- ``user-guide/generated/*.txt``, included by the user guide: the output and plot kinds
  (from their registries), every estimator with its pipeline ops and every statistic op
  (from the op registry, :func:`ddr.pipeline.registry.ops`), every statistic of
  ``ddr.stats``, and the table of example pipelines (from their ``description``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from ruamel.yaml import YAML

if TYPE_CHECKING:  # the tests import this module without Sphinx installed
    from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "pipelines"
COMMAND_INDENT = "  "  # "#   ddr run ..." (after "# ") in a header is a command, "# text" prose


def split_header(lines: list[str]) -> tuple[list[str], int]:
    """The leading ``#`` comment block of a pipeline file, and the line number after it.

    Parameters
    ----------
    lines : list of str
        The file's lines.

    Returns
    -------
    header : list of str
        The comment lines without their ``#`` and one following space.
    end : int
        The number of header lines (the YAML body starts on line ``end + 1``).
    """
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line[2:] if line.startswith("# ") else line[1:])
    return header, len(header)


def header_markdown(header: list[str]) -> str:
    """Prose paragraphs as Markdown and runs of command lines as ``bash`` blocks.

    Parameters
    ----------
    header : list of str
        Comment lines as :func:`split_header` returns them.

    Returns
    -------
    str
        Markdown text.
    """
    out: list[str] = []
    in_commands = False
    for line in header:
        is_command = line.startswith(COMMAND_INDENT) and bool(line.strip())
        if is_command != in_commands:
            out += ["", "```bash"] if is_command else ["```", ""]
            in_commands = is_command
        out.append(line.strip() if is_command else line)
    if in_commands:
        out.append("```")
    return "\n".join(out).strip() + "\n"


def pipeline_page(path: Path, out_dir: Path) -> str:
    """The Markdown page of one example pipeline.

    Parameters
    ----------
    path : Path
        The pipeline file.
    out_dir : Path
        The directory the page is written to (the include is relative to it).

    Returns
    -------
    str
        The page's Markdown.
    """
    lines = path.read_text().splitlines()
    header, end = split_header(lines)
    description = YAML(typ="safe").load(path.read_text())["description"]
    include = Path("../" * len(out_dir.relative_to(ROOT).parts)) / path.relative_to(ROOT)
    return "\n".join(
        [
            f"# {path.name}",
            "",
            f"*{description.strip()}*",
            "",
            header_markdown(header),
            f"```{{literalinclude}} {include.as_posix()}",
            ":language: yaml",
            f":lines: {end + 1}-",
            "```",
            "",
        ]
    )


def write_pipeline_pages(app: Sphinx) -> None:
    """Write ``examples/generated/*.md`` from ``pipelines/*.yaml``, rewriting only changes.

    Parameters
    ----------
    app : Sphinx
        The application; its source directory holds ``examples/``.
    """
    out_dir = Path(app.srcdir) / "examples" / "generated"
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = {}
    for path in sorted(PIPELINES.glob("*.yaml")):
        wanted[out_dir / f"{path.stem}.md"] = pipeline_page(path, out_dir)
    for stale in set(out_dir.glob("*.md")) - set(wanted):
        stale.unlink()
    for page, text in wanted.items():
        if not page.exists() or page.read_text() != text:
            page.write_text(text)


def _first_line(obj: object) -> str:
    """The summary of ``obj``'s docstring (its first paragraph, on one line), in Markdown,
    for a table cell."""
    doc = (getattr(obj, "__doc__", None) or "").strip()
    summary = " ".join(line.strip() for line in doc.split("\n\n", 1)[0].splitlines())
    summary = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", summary)  # :class:`Moments` -> `Moments`
    return summary.replace("``", "`").replace("|", "\\|")


def _ops_by_class() -> dict[type, list[str]]:
    """Estimator class -> the methods pipelines can call on it (its ops, in the registry's
    order)."""
    from ddr.pipeline import registry

    found: dict[type, list[str]] = {}
    for op in registry.ops().values():
        if op.family in ("fit", "apply") and op.cls is not None:
            found.setdefault(op.cls, []).append(op.name.split(".", 1)[1])
    return found


def estimators_markdown() -> str:
    """The table of every estimator pipelines can use (ddr's and registered plug-ins'):
    its name, what it is, its module and its ops (``Est.fit``, ``Est.transform``, ...).

    Returns
    -------
    str
        Markdown.
    """
    rows = [
        "| estimator | what it is | module | ops (`Est.<op>`) |",
        "|---|---|---|---|",
    ]
    for cls, methods in sorted(_ops_by_class().items(), key=lambda kv: kv[0].__name__):
        module = cls.__module__.rsplit(".", 1)[0] if cls.__module__.startswith("ddr.") else ""
        ops = ", ".join(f"`{m}`" for m in methods)
        rows.append(
            f"| `{cls.__name__}` | {_first_line(cls)} | `{module or cls.__module__}` | {ops} |"
        )
    return "\n".join(rows) + "\n"


def statistic_ops_markdown() -> str:
    """The table of every statistic op (ddr's and plug-ins'): its roles, the statistic it
    gives and its options, as ``ddr ops`` describes them.

    Returns
    -------
    str
        Markdown.
    """
    from ddr.pipeline import registry

    rows = ["| op | roles | gives | `with:` options |", "|---|---|---|---|"]
    for name, op in sorted(registry.ops().items()):
        if op.family != "statistic":
            continue
        roles = ", ".join(f"`{r.name}`" + ("" if r.required else " (optional)") for r in op.roles)
        options = "; ".join(
            f"`{p}`: {registry.describe_param(param)}" for p, param in op.params.items()
        )
        rows.append(f"| `{name}` | {roles} | `{op.cls.__name__}` | {options or 'none'} |")
    return "\n".join(rows) + "\n"


def statistics_markdown() -> str:
    """The table of every statistic ``ddr.stats`` exports: what it holds (its docstring's
    first line), its read-outs and its pipeline op.

    Returns
    -------
    str
        Markdown.
    """
    import ddr.stats
    from ddr.pipeline import registry

    op_of = {op.cls: name for name, op in registry.ops().items() if op.family == "statistic"}
    rows = ["| statistic | holds | read-outs | op |", "|---|---|---|---|"]
    for name in sorted(ddr.stats.__all__):
        cls = getattr(ddr.stats, name)
        if not (isinstance(cls, type) and issubclass(cls, ddr.stats.Statistic)):
            continue
        if cls is ddr.stats.Statistic:
            continue
        readouts = ", ".join(f"`{r}`" for r in getattr(cls, "readouts", ()))
        op = f"`{op_of[cls]}`" if cls in op_of else ""
        rows.append(f"| `{name}` | {_first_line(cls)} | {readouts} | {op} |")
    return "\n".join(rows) + "\n"


def examples_markdown() -> str:
    """The table of the example pipelines: each file (linked to its page) and its
    ``description``.

    Returns
    -------
    str
        Markdown.
    """
    rows = ["| file | what |", "|---|---|"]
    for path in sorted(PIPELINES.glob("*.yaml")):
        description = YAML(typ="safe").load(path.read_text())["description"].strip()
        what = description.replace("|", "\\|")
        page = f"../examples/generated/{path.stem}.md"
        rows.append(f"| [`{path.name}`]({page}) | {what} |")
    return "\n".join(rows) + "\n"


def generated_lists() -> dict[str, str]:
    """File name (under ``user-guide/generated/``) -> its Markdown."""
    from ddr.pipeline.outputs.docs import kinds_markdown, plots_markdown

    return {
        "output-kinds.txt": kinds_markdown(),
        "plots.txt": plots_markdown(),
        "estimators.txt": estimators_markdown(),
        "statistic-ops.txt": statistic_ops_markdown(),
        "statistics.txt": statistics_markdown(),
        "examples.txt": examples_markdown(),
    }


def write_output_kind_lists(app: Sphinx) -> None:
    """Write ``user-guide/generated/*.txt`` (:func:`generated_lists`) from the registries of
    output and plot kinds, ops and statistics, and from the example pipelines, rewriting
    only changes.

    Parameters
    ----------
    app : Sphinx
        The application; its source directory holds ``user-guide/``.
    """
    out_dir = Path(app.srcdir) / "user-guide" / "generated"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in generated_lists().items():
        page = out_dir / name
        if not page.exists() or page.read_text() != text:
            page.write_text(text)


def setup(app: Sphinx) -> dict:
    """Register the page generators with Sphinx."""
    app.connect("builder-inited", write_pipeline_pages)
    app.connect("builder-inited", write_output_kind_lists)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
