"""Runner overhead: a PCA pipeline (plan + run: fit, scores streamed to Zarr with provenance,
fingerprints and measured passes) against the same work written directly in Python
(``ddr.PCA`` fit, ``ddr.io.write_zarr`` of the scores). Target: the pipeline within 5 % of
the direct code. The op registry (imports of every estimator module, a one-time cost of
``import``) is built before timing; planning (opening inputs, checks, fingerprints) is timed.

Both are paired with their floor (issue 29), re-measured before every run (median of 3):
two dask read passes over ``X`` (the fit's and the scores') and dask's ``to_zarr`` of the
same scores (computed beforehand, held by the workers; ddr's codecs, zstd + crc32c, and the
same chunks), the "write floor" row. Target: within 1.2x. Each step is reported against
its own part of that floor: ``fit_x`` the fit (the pipeline's step time) over one read
floor, ``scores_x`` writing the scores (transform + write: the output's time) over one read
plus the write floor.

The pipeline reads its inputs through its own counting store; here that store also counts
for the harness, so the passes column is measured the same way for both rows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import dask
import numpy as np
from zarr.storage import LocalStore

import ddr
from benchmarks.counting import CountingLocalStore
from benchmarks.harness import Context, fresh_path, principal_angle_deg
from ddr.io import write_zarr
from ddr.pipeline import _counting, plan_pipeline, registry, run_plan

PIPELINE = """\
ddr: 1
name: bench-pca
params: {{data: "{data}", out: "{out}", k: 10}}
inputs:
  X: {{path: "${{params.data}}", array: X}}
steps:
  pca: {{op: PCA.fit, inputs: {{X: X}}, with: {{n_components: "${{params.k}}"}}}}
  scores: {{op: PCA.transform, inputs: {{model: pca, X: X}}}}
outputs:
  - {{kind: zarr, from: scores, path: "${{params.out}}/scores.zarr"}}
  - {{kind: metrics, from: [pca.components_], path: "${{params.out}}/components.json"}}
run: {{if_exists: overwrite, progress: false}}
"""


_RunnerCounting = _counting.CountingStore  # run() swaps the module's name for the class below


class _BothCounting(CountingLocalStore, _RunnerCounting):
    """Counts for the harness (passes column) and for the runner (its summary), once each,
    whether zarr reads a chunk (``get``) or ddr's reader reads its file (``observe_read``)."""

    def observe_read(self, key: str, n_bytes: int) -> None:
        CountingLocalStore.observe_read(self, key, n_bytes)
        _RunnerCounting.observe_read(self, key, n_bytes)

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        buf = await LocalStore.get(self, key, prototype, byte_range)
        if buf is not None:
            self.observe_read(key, len(buf))
        return buf


def run(ctx: Context) -> None:
    registry.ops()  # the one-time import of every estimator module
    original = _counting.CountingStore
    _counting.CountingStore = _BothCounting  # the runner opens inputs through this class
    try:
        with ctx.scratch() as work:
            for name in ctx.datasets:
                _rows(ctx, name, work)
    finally:
        _counting.CountingStore = original


def _rows(ctx: Context, name: str, work: Path) -> None:
    ref, _ = ctx.exact_pca(name, k=10)
    yaml_path = work / "bench.yaml"
    yaml_path.write_text(PIPELINE.format(data=ctx.path(name), out=work / "pipeline"))
    found: dict[str, np.ndarray] = {}
    floor: dict[str, float] = {}  # the parts of the last floor run, for the per-step ratios

    def direct() -> dict:
        X = ctx.array(name)
        start = time.perf_counter()
        pca = ddr.PCA(n_components=10).fit(X)
        fitted = time.perf_counter()
        write_zarr(pca.transform(X), fresh_path(work, "direct-scores"), name="scores")
        found["direct"] = pca.components_
        return {
            "angle_deg": principal_angle_deg(pca.components_, ref),
            **_step_ratios(fitted - start, time.perf_counter() - fitted, floor),
        }

    def pipeline() -> dict:
        summary = run_plan(plan_pipeline(yaml_path, force=True))
        with open(work / "pipeline" / "components.json") as fh:
            comps = np.asarray(json.load(fh)["pca.components_"])
        found["pipeline"] = comps
        fit_s = next(s.seconds for s in summary.steps if s.id == "pca")
        scores_s = next(o.seconds for o in summary.outputs if o.path.endswith("scores.zarr"))
        return {
            "angle_deg": principal_angle_deg(comps, ref),
            "runner_passes": summary.passes.get("X", float("nan")),
            **_step_ratios(fit_s, scores_s, floor),
        }

    with dask.config.set(scheduler=ctx.client()):  # warm both paths, unmeasured
        direct()
        pipeline()
        held = ctx.hold(ddr.PCA(n_components=10).fit(ctx.array(name)).transform(ctx.array(name)))
    ctx.measure_write_floor("write floor, dask to_zarr of the scores", name, held, work)

    def two_reads_one_write() -> float:
        floor["read"] = ctx.time_read_floor(name)
        floor["write"] = ctx.time_write_floor(held, work)
        floor["read2"] = ctx.time_read_floor(name)
        return floor["read"] + floor["write"] + floor["read2"]

    kw: dict = {"paired_floor": True, "floor": two_reads_one_write}
    d = ctx.measure("direct Python: PCA fit + write_zarr(scores) (x 2 reads + write)", name,
                    direct, **kw)  # fmt: skip
    p = ctx.measure("pipeline: PCA fit + scores to Zarr (x 2 reads + write)", name, pipeline,
                    **kw)  # fmt: skip
    if not (d.error or p.error):
        overhead = p.seconds / d.seconds - 1.0
        print(
            f"[pipeline] {name}: runner overhead {100 * overhead:+.1f} % (target: within 5 %)",
            flush=True,
        )
        np.testing.assert_allclose(found["pipeline"], found["direct"], rtol=1e-10, atol=1e-12)


def _step_ratios(fit_s: float, scores_s: float, floor: dict[str, float]) -> dict[str, float]:
    """Each step over its part of the floor: the fit over one read, writing the scores over
    one read and the write (the mean of the two read floors of the same floor run)."""
    if not floor:
        return {}
    read = (floor["read"] + floor["read2"]) / 2
    return {"fit_x": fit_s / read, "scores_x": scores_s / (read + floor["write"])}
