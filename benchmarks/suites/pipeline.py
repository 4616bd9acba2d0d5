"""Runner overhead: a PCA pipeline (plan + run: fit, scores streamed to Zarr with provenance,
fingerprints and measured passes) against the same work written directly in Python
(``ddr.PCA`` fit, ``ddr.io.write_zarr`` of the scores). Target: the pipeline within 5 % of
the direct code. The op registry (imports of every estimator module, a one-time cost of
``import``) is built before timing; planning (opening inputs, checks, fingerprints) is timed.

The pipeline reads its inputs through its own counting store; here that store also counts
for the harness, so the passes column is measured the same way for both rows.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import dask
import numpy as np
from zarr.storage import LocalStore

import ddr
from benchmarks.counting import CountingLocalStore
from benchmarks.harness import Context, principal_angle_deg
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
    work = Path(tempfile.mkdtemp(prefix="ddr-bench-pipeline-"))
    try:
        for name in ctx.datasets:
            ref, _ = ctx.exact_pca(name, k=10)
            ctx.measure_floor(name)
            yaml_path = work / "bench.yaml"
            yaml_path.write_text(PIPELINE.format(data=ctx.path(name), out=work / "pipeline"))
            found: dict[str, np.ndarray] = {}

            def direct(name=name, ref=ref, found=found) -> dict:
                X = ctx.array(name)
                pca = ddr.PCA(n_components=10).fit(X)
                write_zarr(
                    pca.transform(X),
                    work / "direct" / "scores.zarr",
                    name="scores",
                    if_exists="overwrite",
                )
                found["direct"] = pca.components_
                return {"angle_deg": principal_angle_deg(pca.components_, ref)}

            def pipeline(yaml_path=yaml_path, ref=ref, found=found) -> dict:
                summary = run_plan(plan_pipeline(yaml_path, force=True))
                with open(work / "pipeline" / "components.json") as fh:
                    comps = np.asarray(json.load(fh)["pca.components_"])
                found["pipeline"] = comps
                return {
                    "angle_deg": principal_angle_deg(comps, ref),
                    "runner_passes": summary.passes.get("X", float("nan")),
                }

            with dask.config.set(scheduler=ctx.client()):  # warm both paths, unmeasured
                direct()
                pipeline()
            d = ctx.measure("direct Python: PCA fit + write_zarr(scores)", name, direct)
            p = ctx.measure("pipeline: PCA fit + scores to Zarr", name, pipeline)
            if not (d.error or p.error):
                overhead = p.seconds / d.seconds - 1.0
                print(
                    f"[pipeline] {name}: runner overhead {100 * overhead:+.1f} % "
                    "(target: within 5 %)",
                    flush=True,
                )
                np.testing.assert_allclose(
                    found["pipeline"], found["direct"], rtol=1e-10, atol=1e-12
                )
    finally:
        _counting.CountingStore = original
        shutil.rmtree(work, ignore_errors=True)
