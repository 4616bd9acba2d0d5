"""The ``ddr`` command line: one module per command, each only its arguments and calls
into the library.

Commands: ``run``, ``validate``, ``plan``, ``inspect``, ``merge``, ``schema``, ``ops``,
``demo-data``, ``version``; ``ddr COMMAND --help`` describes each. The app, the options
several commands share and the help formatter are in :mod:`ddr.cli._app` and
:mod:`ddr.cli._help`.

Exit codes:

- 0: success (``inspect``: the output is complete);
- 1: a run failed or was refused (the error and the run summary are printed; ``inspect``:
  the output is INCOMPLETE, e.g. an interrupted run);
- 2: bad usage or an invalid file, reported as ``file:line:col: message`` before any data is
  read (``inspect``: nothing at that path);
- 3: ``inspect`` only: something that ddr did not write;
- 130: interrupted (Ctrl-C).
"""

from __future__ import annotations

# importing a command's module registers it on the app, in the order ``ddr --help`` lists
# them
# isort: off
from ddr.cli._app import app
from ddr.cli import run, validate, plan, inspect, merge, schema, ops, demo_data, version  # noqa: F401

# isort: on
from ddr.cli.inspect import inspect_path

__all__ = ["app", "inspect_path", "main"]


def main() -> None:
    """The ``ddr`` console script. Python warnings are shown as ``ddr: warning: ...`` lines
    (:func:`ddr._log.route_warnings`), also those raised before a command's console is set
    up (planning a run)."""
    from ddr._log import route_warnings

    with route_warnings():
        app()
