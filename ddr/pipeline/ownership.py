"""The claims a run takes on the outputs it writes (:mod:`ddr.io.claims`), from its plan.

:func:`claim_outputs` claims every output the plan writes or rewrites (not those it skips),
and the run's state when the run writes it (:mod:`ddr.pipeline.run_state`), with the
pipeline's ``run.wait`` and ``run.claim_timeout``. A run (:func:`ddr.pipeline.run`, which
``ddr run`` and :func:`ddr.pipeline.run_plan` use) takes the claims before it starts a
cluster, so a run refused because another run holds an output stops at once; a run that
waited for another is planned again (what that run wrote may now be complete) before it runs.
"""

from __future__ import annotations

import sys

from ddr.config.validation import seconds
from ddr.io.claims import OutputClaims
from ddr.pipeline.plan import Plan

__all__ = ["claim_outputs"]


def claim_outputs(
    plan: Plan, *, wait: bool | float | None = None, argv: list[str] | None = None
) -> OutputClaims:
    """The (not yet taken) claims of ``plan``'s outputs; use it as a context manager.

    Parameters
    ----------
    plan : Plan
        From :func:`ddr.pipeline.plan_pipeline`.
    wait : bool or float, optional
        Replaces ``run.wait``: refuse (False), wait (True) or wait at most this many seconds
        for an output another run holds.
    argv : list of str, optional
        The command other runs are shown (default ``sys.argv``; secrets redacted).
    """
    opts = plan.pipeline.run
    if wait is None:
        wait = opts.wait if isinstance(opts.wait, bool) else seconds(opts.wait)
    outputs = [o.location for o in plan.outputs if o.action in ("write", "overwrite")]
    if plan.state is not None and plan.state.action == "write":  # written like an output
        outputs.append(plan.state.location)
    return OutputClaims(
        outputs,
        timeout=seconds(opts.claim_timeout),
        wait=wait,
        command=" ".join(argv if argv is not None else sys.argv),
    )
