"""How the runner writes outputs: each asks its kind (:mod:`ddr.pipeline.outputs`), which
writes small outputs as soon as their sources exist and gives its share of the final pass,
where every output that needs data is written in ONE compute (one read of each input).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ddr.config.errors import RunError, describe_error
from ddr.io.claims import Claim, OutputClaims
from ddr.io.locations import redact
from ddr.pipeline.extend import extend_stream, refresh_output
from ddr.pipeline.lineage import lineage
from ddr.pipeline.outputs import Streamed, output_kind
from ddr.pipeline.plan import OutputPlan
from ddr.pipeline.summary import _rel

__all__ = ["OutputWriter"]

logger = logging.getLogger("ddr.pipeline.runner")


class OutputWriter:
    """How :class:`ddr.pipeline.runner._Runner` writes outputs (uses its state): models,
    metrics and plots as soon as their sources exist, every output that needs data in one
    streamed compute, all with provenance and fingerprints."""

    plan: Any
    argv: list[str] | None
    summary: Any
    clock: Any
    output_results: dict[int, Any]
    _versions: dict[str, str] | None

    value: Callable[..., Any]  # provided by the concrete class

    _compute: Callable[..., Any]  # provided by the concrete class

    _pass: Callable[..., Any]  # provided by the concrete class

    _reads: list[str]  # the inputs the current phase reads

    _counts: Callable[..., Any]  # provided by the concrete class

    _passes: Callable[..., Any]  # provided by the concrete class

    claims: OutputClaims  # this run's claims on the outputs it writes

    def _versions_dict(self) -> dict[str, str]:
        if self._versions is None:
            import dask
            import sklearn
            import xarray
            import zarr

            from ddr._version import __version__

            self._versions = {
                "ddr": __version__,
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "dask": dask.__version__,
                "xarray": xarray.__version__,
                "zarr": zarr.__version__,
                "scikit-learn": sklearn.__version__,
            }
        return self._versions

    def provenance(self, out: OutputPlan) -> dict[str, Any]:
        """What ``out`` records of how it was made: the pipeline, the steps and inputs it
        depends on, versions and the run."""
        made_from = lineage(self.plan.steps, self.plan.inputs, list(out.refs.values()))
        return {
            "pipeline": {
                "name": self.plan.pipeline.name,
                "file": os.path.abspath(self.plan.file),
                "resolved": self.plan.resolved,
            },
            "output": {"index": out.index, "kind": out.kind, "from": dict(out.refs)},
            **made_from,
            "versions": self._versions_dict(),
            "run": {
                "started": self.summary.started,
                "command": redact(" ".join(self.argv or sys.argv)),
            },
        }

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Add the time of the block, less its passes over data, to the clock's writes."""
        passes = self.clock.parts.get("passes", 0.0)
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.clock.add("writes", elapsed - (self.clock.parts.get("passes", 0.0) - passes))

    def _small_output(self, out: OutputPlan, index: int) -> None:
        with self._writing():
            self._write_small(out, index)

    def _write_small(self, out: OutputPlan, index: int) -> None:
        res = self.output_results[out.index]
        res.phase = index
        start = time.perf_counter()
        try:
            if out.refresh:  # an update: the same content, made from the grown inputs
                refresh_output(self, out)
            else:
                output_kind(out.kind).write(self, out)
        except RunError:
            raise
        except Exception as exc:
            raise RunError(describe_error(exc), f"output {_rel(out.path)}") from exc
        res.action = "written" if not out.refresh else "refreshed"
        res.seconds = round(time.perf_counter() - start, 3)
        logger.info("wrote %s %s (%.2f s)", out.kind, _rel(out.path), res.seconds)

    # what the output kinds are given (ddr.pipeline.outputs.WriteContext)
    def claim(self, out: OutputPlan) -> Claim | None:
        """This run's claim on ``out``."""
        return self.claims.get(out.location)

    def if_exists(self, out: OutputPlan) -> str:
        """``"overwrite"`` when the plan replaces what is at ``out``, else ``"error"``."""
        return "overwrite" if out.action == "overwrite" else "error"

    def compute(self, items: list[Any]) -> list[Any]:
        """Compute ``items`` together (counted with the run's passes)."""
        return self._compute(items)

    def _stream(self, indices: list[int], index: int) -> None:
        with self._writing():
            self._write_streamed(indices, index)

    def _write_streamed(self, indices: list[int], index: int) -> None:
        """Write every output that needs data in ONE compute.

        Each Zarr output's metadata is written by :func:`ddr.io.write_zarr` (``compute=False``);
        its lazy variables are then stored chunk by chunk into the arrays it created, all
        outputs together with one ``da.store`` and the plot data in the same ``compute``, so
        an input read by several outputs is read once (separate ``write_zarr`` graphs would
        each read it). Variables that cannot be stored raw (a CF encoding changes values)
        fall back to the pending output's own graph. Each output's share is its kind's
        (:meth:`ddr.pipeline.outputs.OutputKind.stream`).
        """
        import dask.array as da

        before = self._counts()
        start = time.perf_counter()
        sources: list[Any] = []
        targets: list[Any] = []
        items: list[Any] = []
        parts: list[tuple[OutputPlan, Streamed]] = []
        for i in indices:
            out = self.plan.outputs[i]
            try:
                if out.extend is not None:  # an update writes its new rows only
                    part = extend_stream(self, out)
                else:
                    part = output_kind(out.kind).stream(self, out)
            except RunError:
                raise
            except Exception as exc:
                raise RunError(describe_error(exc), f"output {_rel(out.path)}") from exc
            sources.extend(src for src, _ in part.stores)
            targets.extend(tgt for _, tgt in part.stores)
            items.extend(part.lazy)
            parts.append((out, part))
        stores: list[Any] = []
        if sources:
            stored = da.store(sources, targets, lock=False, compute=False)
            stores = list(stored) if isinstance(stored, tuple) else [stored]
        what = f"writing {len(indices)} output{'s' if len(indices) != 1 else ''}"
        try:
            values = self._pass(what, [*stores, *items], self._reads)[len(stores) :]
        except Exception as exc:
            names = ", ".join(_rel(self.plan.outputs[i].path) for i in indices)
            raise RunError(describe_error(exc), f"writing {names}") from exc
        pos = 0
        for out, part in parts:
            try:
                part.finish(values[pos : pos + len(part.lazy)])
            except Exception as exc:
                raise RunError(describe_error(exc), f"output {_rel(out.path)}") from exc
            pos += len(part.lazy)
        seconds = round(time.perf_counter() - start, 3)
        passes = self._passes(before, self._counts())
        for i in indices:
            res = self.output_results[i]
            res.action, res.phase, res.seconds = "written", index, seconds
            out = self.plan.outputs[i]
            logger.info("wrote %s %s", out.kind, _rel(out.path))
        if indices:
            self.output_results[indices[0]].passes = passes
