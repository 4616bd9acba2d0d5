"""Pages generated from the repository at build time, so they cannot drift from it.

- ``examples/generated/<name>.md``: one page per ``pipelines/*.yaml``, titled by its file
  name, with its ``description``; its header comment (what it demonstrates, as prose, and
  the commands that run it, indented) rendered as text and ``bash`` blocks; then the
  pipeline itself, included from the file.
"""

from __future__ import annotations

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


def write_output_kind_lists(app: Sphinx) -> None:
    """Write ``user-guide/generated/*.txt`` from the registries of output and plot kinds.

    Parameters
    ----------
    app : Sphinx
        The application; its source directory holds ``user-guide/``.
    """
    from ddr.pipeline.outputs.docs import kinds_markdown, plots_markdown

    out_dir = Path(app.srcdir) / "user-guide" / "generated"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("output-kinds.txt", kinds_markdown()), ("plots.txt", plots_markdown())):
        page = out_dir / name
        if not page.exists() or page.read_text() != text:
            page.write_text(text)


def setup(app: Sphinx) -> dict:
    """Register the page generators with Sphinx."""
    app.connect("builder-inited", write_pipeline_pages)
    app.connect("builder-inited", write_output_kind_lists)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
