"""Sphinx configuration of ddr's documentation site.

Build (warnings are errors, every cross-reference must resolve)::

    .venv/bin/pip install -q -e ".[docs]"
    .venv/bin/sphinx-build -W --keep-going -n docs docs/_build/html
"""

from __future__ import annotations

import sys
from pathlib import Path

import ddr

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "ddr"
author = "the ddr developers"
copyright = "the ddr developers"
version = release = ddr.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "ddr_pages",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
templates_path = ["_templates"]
root_doc = "index"

# -- MyST: the user guide and the included benchmark tables are Markdown --------------------
myst_enable_extensions: list[str] = []  # plain CommonMark + tables: README text moves unchanged
myst_heading_anchors = 4

# -- API reference --------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True}
autodoc_typehints = "none"  # the numpydoc Parameters sections say the types and shapes
autodoc_member_order = "groupwise"
add_module_names = False

numpydoc_show_class_members = False  # the class template documents the members
# type descriptions ("ndarray of shape (n_samples, n_features)") stay text: no intersphinx
numpydoc_xref_param_type = False
# what numpydoc checks in every documented docstring (the build fails on any of these):
# sections, their order and format, parameters that match the signature
numpydoc_validation_checks = {
    "GL01", "GL02", "GL03", "GL05", "GL06", "GL07", "GL09", "GL10",
    "SS01", "SS03", "SS05",
    "PR01", "PR02", "PR03", "PR05", "PR06", "PR09",
    "YD01",
}  # fmt: skip
# the memory-estimate hooks are documented once, on Statistic; each override says in one
# line what it counts; module constants are documented by a one-line ``#:`` comment
numpydoc_validation_exclude = {
    r"^ddr\.(stats|linalg\.nystrom)\.(?!Statistic\.)\w+\.(value|block)_nbytes$",
    r"^ddr\.\w+(\.\w+)?\.[A-Z][A-Z_]+$",
    # a typing.Protocol: its signature is Protocol's own (*args, **kwargs)
    r"^ddr\.em\.EMProblem$",
    # a class attribute documented by its ``#:`` comment (numpydoc reads int's docstring)
    r"^ddr\.PLSA\.n_top_words$",
}

# Types of other projects: no intersphinx (the CI builds offline), so nitpicky mode is told
# which packages' names are external rather than unresolved.
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|dask|da|distributed|xarray|xr|zarr|sklearn|scipy|pydantic|typer)"
     r"(\..*)?"),
    (r"py:.*", r"(collections\.abc|typing|pathlib|os|logging|concurrent)\..*"),
    (r"py:.*", r"(Any|Callable|Iterable|Iterator|Mapping|Sequence|Path|Literal|Self)"),
    (r"py:.*", r"(ndarray|DataArray|Dataset|Array|Generator|RandomState|Client)"),
]  # fmt: skip

# -- HTML -----------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"ddr {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_static_path: list[str] = []


def skip_sklearn_machinery(app, what, name, obj, skip, options):
    """Leave out the methods scikit-learn's mixins add for its own machinery.

    They document scikit-learn's metadata routing and output containers (its glossary and
    gallery), which ddr's estimators take no part in: their outputs follow their input.
    """
    if name in {"get_metadata_routing", "set_output"} or (
        name.startswith("set_") and name.endswith("_request")
    ):
        return True
    return skip


def setup(app):
    """Connect the hooks above."""
    app.connect("autodoc-skip-member", skip_sklearn_machinery)
