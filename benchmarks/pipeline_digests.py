"""Digests of what every example pipeline writes, to show a refactoring changed nothing.

Runs every pipeline in ``pipelines/`` (in the order the test suite uses: ``apply-saved``
after ``fit-once``) on small datasets written here, with the threaded scheduler, and prints
one digest per output: for a Zarr output or model, the SHA-256 of each array's dims, dtype,
shape and values (decoded, so codec changes do not count) and of its attributes other than
provenance and history; for a JSON file its content without the ``ddr:`` keys; for a PNG
its pixels. Times, paths and versions are left out, so two runs of the same code agree.

Usage::

    python -m benchmarks.pipeline_digests --out before.json      # on the old commit
    python -m benchmarks.pipeline_digests --compare before.json  # on the new one

The second form exits 1 and lists every output whose digest differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: small versions of the datasets the example pipelines read (as tests/pipeline_support.py)
SPECS = {
    "demo.zarr": dict(n_samples=3000, n_features=12, rank=4, n_classes=3, chunk_rows=500, seed=0),
    "demo-new.zarr": dict(
        n_samples=2000, n_features=12, rank=4, n_classes=3, chunk_rows=500, seed=0, sample_seed=1
    ),
    "demo-missing.zarr": dict(
        n_samples=3000, n_features=12, rank=4, n_classes=3, chunk_rows=500, seed=2, missing=0.05
    ),
    "wide.zarr": dict(n_samples=2000, n_features=60, rank=8, n_classes=3, chunk_rows=500, seed=4),
}
COUNTS = {
    "corpus.zarr": dict(
        n_samples=800, n_features=60, n_topics=3, doc_length=60, chunk_rows=200, seed=1
    )
}
#: the gridded field eof.yaml reads (time x lat x lon, land NaN)
GRIDDED = {"gridded.zarr": dict(n_samples=240, n_lat=18, n_lon=36, chunk_rows=60, seed=0)}
OVERRIDES = {
    "randomized-pca-wide": ["k=8"],
    "classify": ["train_end=2000", "test_start=2000"],
    "cca": ["split=6"],
    "ppca-missing": ["max_iter=50", "k=4"],
    "kernel-pca-nystrom": ["landmarks=300"],
    "factor-analysis": ["k=4"],
    "lsa-plsa": ["k=3"],
    "kernel-cca": ["split=6"],
    "gaussian-mixture": ["tol=1e-4"],  # its tol=1e-7 takes ~1400 EM passes on the small data
    "grid-search": ["components=[1, 2, 3, 4, 5, 6, 8]"],  # the small data have 12 features
}
_UNSTABLE_ATTRS = ("ddr:provenance", "history", "ddr:version", "ddr:claim", "ddr:fingerprint")
#: a search's timings (cv_results_' seconds): digested by dims, dtype and shape only
_TIMINGS = ("mean_fit_time", "std_fit_time", "mean_score_time", "std_score_time")


def _sha(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def digest(path: Path) -> dict[str, str]:
    """Digests of what is at ``path`` (a Zarr group, a JSON or a PNG file), by part."""
    import numpy as np

    if path.suffix == ".json":
        data = json.loads(path.read_text())
        return {"json": _sha({k: v for k, v in data.items() if not k.startswith("ddr:")})}
    if path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as im:
            return {"pixels": _sha(np.asarray(im.convert("RGBA")).tobytes())}
    import zarr

    out = {}
    group = zarr.open_group(str(path), mode="r")
    attrs = {k: v for k, v in group.attrs.asdict().items() if k not in _UNSTABLE_ATTRS}
    out["attrs"] = _sha(attrs)
    for name, arr in sorted(group.arrays(), key=lambda item: item[0]):
        values = arr[...]
        dims = getattr(arr.metadata, "dimension_names", None)
        body = (
            values.tobytes() if values.dtype.kind != "O" else json.dumps(values.tolist()).encode()
        )
        if name in _TIMINGS:
            body = b""
        out[name] = _sha(list(dims or ()), str(values.dtype), list(values.shape), body)
    for name, _ in sorted(group.groups(), key=lambda item: item[0]):
        for key, value in digest(path / name).items():
            out[f"{name}/{key}"] = value
    return out


def run_all(work: Path) -> dict[str, dict[str, str]]:
    """Run every example pipeline in ``work``; the digests of every output, by path."""
    import dask
    from typer.testing import CliRunner

    from ddr.cli import app
    from ddr.demo import DemoSpec, write_demo_data
    from ddr.demo_counts import CountsSpec, write_counts_data
    from ddr.demo_gridded import GriddedSpec, write_gridded_data
    from ddr.pipeline import plan_pipeline

    with dask.config.set(scheduler="threads"):
        for name, spec in SPECS.items():
            write_demo_data(work / name, DemoSpec(**spec))
        for name, spec in COUNTS.items():
            write_counts_data(work / name, CountsSpec(**spec))
        for name, spec in GRIDDED.items():
            write_gridded_data(work / name, GriddedSpec(**spec))
    names = sorted(p.stem for p in (ROOT / "pipelines").glob("*.yaml"))
    names.remove("apply-saved")
    names.insert(names.index("fit-once") + 1, "apply-saved")
    found: dict[str, dict[str, str]] = {}
    import os

    here = os.getcwd()
    os.chdir(work)
    try:
        for name in names:
            file = ROOT / "pipelines" / f"{name}.yaml"
            sets = [a for s in OVERRIDES.get(name, []) for a in ("--set", s)]
            result = CliRunner().invoke(
                app, ["run", str(file), "--cluster", "threads", "--no-progress", *sets]
            )
            if result.exit_code != 0:
                raise SystemExit(f"{name} failed:\n{result.output}")
            plan = plan_pipeline(file, [s for s in OVERRIDES.get(name, [])])
            for out in plan.outputs:
                rel = os.path.relpath(out.location.path, work)
                found[f"{name}: {rel}"] = digest(Path(out.location.path))
    finally:
        os.chdir(here)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the digests here (JSON)")
    parser.add_argument("--compare", type=Path, help="compare with digests written before")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ddr-digests-") as tmp:
        found = run_all(Path(tmp))
    if args.out:
        args.out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    n_parts = sum(len(v) for v in found.values())
    print(f"{len(found)} outputs, {n_parts} digested parts")
    if args.compare:
        before = json.loads(args.compare.read_text())
        differ = sorted(
            f"{out} [{part}]"
            for out in set(before) | set(found)
            for part in set(before.get(out, {})) | set(found.get(out, {}))
            if before.get(out, {}).get(part) != found.get(out, {}).get(part)
        )
        for line in differ:
            print(f"differs: {line}")
        print("identical" if not differ else f"{len(differ)} parts differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
