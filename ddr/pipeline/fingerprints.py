"""The fingerprints of a plan's steps and outputs: what a complete output must match to be
kept by a rerun (``--resume``, ``--update``).

Mixed into the planner. A step's fingerprint hashes its op, parameters (never
``storage_options``), the fingerprints of what it reads and ddr's version (and, for a
``load`` step, the saved model's metadata and where it is; for a searched step, its
``search:``); an output's, its own
configuration and the fingerprints of its sources. Inputs are fingerprinted when they are
opened (:mod:`ddr.pipeline.inputs`: metadata only, never values).
"""

from __future__ import annotations

from typing import Any

from ddr.io.locations import resolve
from ddr.pipeline.inputs import metadata_fingerprint
from ddr.pipeline.plan import OutputPlan, StepPlan, _sha
from ddr.pipeline.spec_types import split_ref

__all__ = ["Fingerprinting"]


class Fingerprinting:
    """Fingerprints of :class:`ddr.pipeline.planner._Planner` (uses its state)."""

    inputs: dict[str, Any]
    steps: dict[str, StepPlan]
    outputs: list[OutputPlan]

    def _ref_fp(self, ref: str) -> str:
        head, tail = split_ref(ref)
        if head in self.inputs:
            return self.inputs[head].fingerprint
        return f"{self.steps[head].fingerprint}.{tail or self.steps[head].op.primary}"

    def _fingerprints(self) -> None:
        from ddr._version import __version__

        for step in self.steps.values():
            extra = {}
            if step.op.family == "load":
                where = resolve(step.spec.with_["path"], step.spec.with_.get("storage_options"))
                extra["model"] = metadata_fingerprint(where, None)
                extra["path"] = where.url
            if step.spec.search is not None:  # the grid searched, the folds, the scoring
                extra["search"] = step.spec.search.model_dump(mode="json")
            step.fingerprint = _sha(
                {
                    "op": step.op.name,
                    "with": _without_storage_options(step.spec.with_),
                    "inputs": {r: self._ref_fp(ref) for r, ref in sorted(step.refs.items())},
                    "ddr": __version__,
                    **extra,
                }
            )
        for out in self.outputs:
            config = out.spec.model_dump(
                by_alias=True, exclude={"path", "if_exists", "description", "storage_options"}
            )
            out.fingerprint = _sha(
                {
                    "output": config,
                    "sources": {k: self._ref_fp(r) for k, r in sorted(out.refs.items())},
                    "ddr": __version__,
                }
            )


def _without_storage_options(params: dict[str, Any]) -> dict[str, Any]:
    """Step parameters as they enter a fingerprint: where a model is read from is named by
    its location, never by the credentials used to read it."""
    return {k: v for k, v in params.items() if k != "storage_options"}
