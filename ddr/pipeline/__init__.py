"""Declarative pipelines: YAML files that read Zarr, fit ddr estimators and write Zarr.

- :func:`load_document` / :func:`plan_pipeline`: read and check a file, all problems at once
  as ``file:line:col: message``, before any data is read;
- :func:`run_plan` / :func:`run_pipeline`: execute under the active dask scheduler (one pass
  for all one-pass fits of an input, lazy transforms streamed to Zarr, crash-safe outputs,
  resume by fingerprint, provenance, a run summary);
- :mod:`ddr.pipeline.registry`: the ops (every ddr estimator, statistics, ``load``);
- :func:`json_schema`: the JSON Schema of pipeline files.

Everything is imported lazily; ``import ddr.pipeline`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Pipeline",
    "PipelineError",
    "Plan",
    "RunError",
    "RunSummary",
    "json_schema",
    "load_document",
    "plan_pipeline",
    "run_pipeline",
    "run_plan",
]

_WHERE = {
    "Pipeline": "ddr.pipeline.schema",
    "json_schema": "ddr.pipeline.schema",
    "PipelineError": "ddr.config.errors",
    "RunError": "ddr.config.errors",
    "load_document": "ddr.config.document",
    "Plan": "ddr.pipeline.planner",
    "plan_pipeline": "ddr.pipeline.planner",
    "RunSummary": "ddr.pipeline.summary",
    "run_plan": "ddr.pipeline.runner",
}


def run_pipeline(
    path: str,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    force: bool = False,
    resume: bool = False,
    **run_kwargs: Any,
) -> Any:
    """Plan and run a pipeline file under the active dask scheduler; returns its summary.

    What ``ddr run`` does, from Python: start a cluster first (or use the threaded scheduler)
    to choose where the work runs.

    Parameters
    ----------
    path : str
        The pipeline file (YAML).
    overrides : sequence of str
        ``key=value`` strings, as ``ddr run --set`` takes them (e.g. ``"params.k=5"``).
    force : bool, default False
        Rewrite complete outputs too (``ddr run --force``).
    resume : bool, default False
        Keep the complete outputs of an interrupted run, recompute the rest
        (``ddr run --resume``).
    **run_kwargs
        ``summary_path``, ``performance_report``, ``argv``, ``clock``: passed to
        ``ddr.pipeline.run_plan``.

    Returns
    -------
    RunSummary
        What each step and output did, the passes over the data and the wall time; its
        ``to_dict()`` is what ``run-summary.json`` holds.
    """
    from ddr.pipeline.planner import plan_pipeline
    from ddr.pipeline.runner import run_plan

    plan = plan_pipeline(path, overrides, force=force, resume=resume)
    return run_plan(plan, **run_kwargs)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'ddr.pipeline' has no attribute {name!r}")
