"""The user guide's lists of output kinds and plots, written from the registries when the
documentation is built (``docs/_ext/ddr_pages.py``), so a registered kind is documented by
its own class attributes (``takes``, ``writes``, ``draws``)."""

from __future__ import annotations

from ddr.pipeline.outputs import output_kinds
from ddr.pipeline.outputs.plots import plot_kinds

__all__ = ["kinds_markdown", "plots_markdown"]


def kinds_markdown() -> str:
    """A Markdown table of the output kinds: what ``from`` takes, what is written."""
    rows = ["| kind | `from` | written |", "|---|---|---|"]
    rows += [f"| `{name}` | {k.takes} | {k.writes} |" for name, k in output_kinds().items()]
    return "\n".join(rows) + "\n"


def plots_markdown() -> str:
    """A Markdown list of the plots and what each draws."""
    items = [f"- `{name}`: {p.draws}" for name, p in plot_kinds().items()]
    return ";\n".join(items) + ".\n"
