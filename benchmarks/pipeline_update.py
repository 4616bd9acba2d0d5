"""``ddr run --update`` after a 5 % append, against a full run of the same pipeline.

``python -m benchmarks.pipeline_update [--rows 1000000] [--features 50] [--append 0.05]``
writes a demo dataset (``ddr demo-data``: float32, zstd, chunks of 100 000 rows), runs each
pipeline below once, appends ``append`` of the rows the zarr way (resize, write,
consolidate), then times (a) ``--update`` and (b) a full run of the same pipeline on the
grown data into another directory, each from a plan already made (planning is timed apart:
one listing of the stored chunks per input). Reported per pipeline: the wall seconds of both
and their ratio, the chunk bytes each read (the runner's counters: bytes read by the
one-pass fits, then in all), the largest relative difference of the models' fitted arrays,
and whether every per-row output is the same bits. One process, dask's threaded scheduler,
the machine's cores.

- ``quickstart``: PCA and StandardScaler fitted on every row, the scores of every row (to
  Zarr), metrics, both models saved: the fits merge the new rows, the scores are recomputed
  (the PCA changed).
- ``classify``: GaussianNB, QDA and LDA trained on the first rows, predictions of the rows
  after (to Zarr), the models saved: the models are solved from their recorded statistics,
  the predictions extended by the new rows only.
- ``classify-all``: the same trained on every row: the models merge the new rows, the
  predictions are recomputed.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import dask
import numpy as np
import xarray as xr
import zarr

import ddr
from ddr.demo import DemoSpec, write_demo_data
from ddr.pipeline import plan_pipeline, run_plan

QUICKSTART = """
ddr: 1
name: quickstart
params: {data: demo.zarr, out: out}
inputs:
  X: {path: "${params.data}", array: X}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 10}}
  scaler: {op: StandardScaler.fit, inputs: {X: X}}
  scores: {op: PCA.transform, inputs: {model: pca, X: X}}
outputs:
  - {kind: zarr, from: scores, path: "${params.out}/scores.zarr"}
  - {kind: metrics, from: [pca.explained_variance_ratio_], path: "${params.out}/m.json"}
  - {kind: model, from: pca, path: "${params.out}/pca.model.zarr"}
  - {kind: model, from: scaler, path: "${params.out}/scaler.model.zarr"}
run: {if_exists: skip-if-complete}
"""

CLASSIFY = """
ddr: 1
name: classify
params: {data: demo.zarr, out: out, train_end: 750000, test_start: 750000}
inputs:
  X: {path: "${params.data}", array: X, isel: {sample: ":${params.train_end}"}}
  y: {path: "${params.data}", array: y, isel: {sample: ":${params.train_end}"}}
  X_test: {path: "${params.data}", array: X, isel: {sample: "${params.test_start}:"}}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  qda: {op: QuadraticDiscriminantAnalysis.fit, inputs: {X: X, y: y}, with: {reg_param: 1.0e-6}}
  lda: {op: LinearDiscriminantAnalysis.fit, inputs: {X: X, y: y}}
  nb_pred: {op: GaussianNB.predict, inputs: {model: nb, X: X_test}}
  qda_pred: {op: QuadraticDiscriminantAnalysis.predict, inputs: {model: qda, X: X_test}}
  lda_pred: {op: LinearDiscriminantAnalysis.predict, inputs: {model: lda, X: X_test}}
outputs:
  - {kind: zarr, from: {nb: nb_pred, qda: qda_pred, lda: lda_pred}, path: "${params.out}/p.zarr"}
  - {kind: model, from: nb, path: "${params.out}/nb.model.zarr"}
  - {kind: model, from: qda, path: "${params.out}/qda.model.zarr"}
  - {kind: model, from: lda, path: "${params.out}/lda.model.zarr"}
run: {if_exists: skip-if-complete}
"""

CASES = {
    "quickstart": (QUICKSTART, []),
    "classify": (CLASSIFY, []),
    "classify-all": (CLASSIFY, ["train_end=", "test_start=0"]),
}


def _append(store: Path, n: int) -> None:
    rng = np.random.default_rng(1)
    group = zarr.open_group(store, mode="r+")
    X, y = group["X"], group["y"]
    old = X.shape[0]
    X.resize((old + n, X.shape[1]))
    y.resize((old + n,))
    step = 50_000
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        X[old + lo : old + hi] = rng.standard_normal((hi - lo, X.shape[1])).astype(X.dtype)
        y[old + lo : old + hi] = rng.integers(1, 5, hi - lo).astype(y.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        zarr.consolidate_metadata(store)


def _timed(path: Path, sets: list[str], *, update: bool) -> tuple[float, float, object]:
    start = time.perf_counter()
    plan = plan_pipeline(path, sets, update=update)
    planned = time.perf_counter() - start
    start = time.perf_counter()
    summary = run_plan(plan, argv=["benchmark"])
    return planned, time.perf_counter() - start, summary


def _bytes(summary: object, stored: dict[str, int], phase: str) -> float:
    """MB read: by the one-pass fits (``phase="fits"``) or in all."""
    total = 0.0
    for step in summary.steps:  # type: ignore[attr-defined]
        if phase == "fits" and step.op.endswith(".fit") and step.passes:
            total = sum(v * stored.get(k, 0) for k, v in step.passes.items())
            break
    if phase == "all":
        total = sum(v * stored.get(k, 0) for k, v in summary.passes.items())  # type: ignore[attr-defined]
    return total / 1e6


def _gap(a_dir: Path, b_dir: Path) -> float:
    worst = 0.0
    for saved in sorted(a_dir.glob("*.model.zarr")):
        a, b = ddr.load(saved), ddr.load(b_dir / saved.name)
        for name, value in vars(a).items():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
                scale = max(float(np.max(np.abs(value))), 1e-300)
                worst = max(worst, float(np.max(np.abs(vars(b)[name] - value))) / scale)
    return worst


def _same_rows(a_dir: Path, b_dir: Path) -> bool:
    for store in sorted(a_dir.glob("*.zarr")):
        if store.name.endswith((".model.zarr", ".state.zarr")):
            continue
        with xr.open_zarr(store) as a, xr.open_zarr(b_dir / store.name) as b:
            if any(not np.array_equal(a[v].values, b[v].values) for v in a.variables):
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--append", type=float, default=0.05)
    args = parser.parse_args()
    n, d, new = args.rows, args.features, round(args.rows * args.append)
    print(f"{n} x {d} float32 in chunks of 100 000 rows, {args.append:.0%} appended ({new} rows)")
    print(
        "| pipeline | update s | full s | update / full | plan s (update) "
        "| MB read by the fits (update / full) | MB read in all (update / full) "
        "| models: max rel. difference | per-row outputs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, dask.config.set(scheduler="threads"):
        for name, (text, sets) in CASES.items():
            here = Path(tmp) / name
            here.mkdir()
            write_demo_data(here / "demo.zarr", DemoSpec(n, d, 10, 5, 100_000, seed=0))
            path = here / "p.yaml"
            path.write_text(text.replace("demo.zarr", str(here / "demo.zarr")))
            sets = [*sets, f"out={here / 'out'}"]
            _timed(path, sets, update=False)
            _append(here / "demo.zarr", new)
            plan_s, update_s, updated = _timed(path, sets, update=True)
            shutil.rmtree(here / "full", ignore_errors=True)
            full_sets = [*sets[:-1], f"out={here / 'full'}"]
            _, full_s, full = _timed(path, full_sets, update=False)
            again = plan_pipeline(path, full_sets)
            stored = {
                label: again.inputs[names[0]].stored_bytes or 0
                for label, names in again.stored_arrays().items()
            }
            print(
                f"| {name} | {update_s:.2f} | {full_s:.2f} | {update_s / full_s:.3f} | "
                f"{plan_s:.2f} | {_bytes(updated, stored, 'fits'):.1f} / "
                f"{_bytes(full, stored, 'fits'):.1f} | {_bytes(updated, stored, 'all'):.1f} / "
                f"{_bytes(full, stored, 'all'):.1f} | {_gap(here / 'out', here / 'full'):.1e} | "
                f"{'same bits' if _same_rows(here / 'out', here / 'full') else 'DIFFER'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
