"""Declarative pipelines: YAML files that read Zarr, fit ddr estimators and write Zarr.

- :func:`load_document` / :func:`plan_pipeline`: read and check a file, all problems at once
  as ``file:line:col: message``, before any data is read;
- :func:`run`: one run, as ``ddr run`` does it (:mod:`ddr.pipeline.orchestration`): claim
  the outputs, start the cluster (or use the active scheduler), execute (one pass for all
  one-pass fits of an input, lazy transforms streamed to Zarr, crash-safe outputs, resume by
  fingerprint, provenance), write the summary, release the claims; returns a
  :class:`RunOutcome` (``ddr.run_pipeline`` is the same function);
- :func:`run_plan`: a planned run under the active scheduler, raising when it fails;
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
    "RunOutcome",
    "RunSummary",
    "json_schema",
    "load_document",
    "plan_pipeline",
    "run",
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
    "RunOutcome": "ddr.pipeline.orchestration",
    "run": "ddr.pipeline.orchestration",
    "run_pipeline": "ddr.pipeline.orchestration",
    "run_plan": "ddr.pipeline.orchestration",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'ddr.pipeline' has no attribute {name!r}")
