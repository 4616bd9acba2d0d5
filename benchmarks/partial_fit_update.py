"""Refit after an append, by partial_fit of the new rows, against a full fit of all rows.

``python -m benchmarks.partial_fit_update [--rows 400000] [--features 50] [--append 0.05]``
makes ``rows`` float32 rows, fits each estimator on the first ``(1 - append)`` share and
saves it (a Zarr model), then times (a) a full fit of all rows and (b) loading the saved
model and ``partial_fit`` of the appended rows only, and reports the rows each read
(counted by :func:`ddr.testing.counting_dask_array`, blocks of 25 000 rows), the time ratio
and the largest relative difference between the two models' fitted arrays. One process,
dask's threaded scheduler, the machine's cores.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import dask
import numpy as np

import ddr
from ddr.testing import counting_dask_array

CASES = {
    "PCA": lambda: ddr.PCA(10),
    "GaussianDensity": lambda: ddr.GaussianDensity(),
    "LinearDiscriminantAnalysis": lambda: ddr.LinearDiscriminantAnalysis(solver="lsqr"),
    "GaussianNB": lambda: ddr.GaussianNB(),
    "CCA": lambda: ddr.CCA(5),
}


def _fit(est, X, y):
    if isinstance(est, ddr.CCA):
        d = X.shape[1] // 2
        return est.fit(X[:, :d], X[:, d:])
    return est.fit(X, y) if y is not None else est.fit(X)


def _partial(est, X, y, classes):
    if isinstance(est, ddr.CCA):
        d = X.shape[1] // 2
        return est.partial_fit(X[:, :d], X[:, d:])
    if y is None:
        return est.partial_fit(X)
    return est.partial_fit(X, y, classes=classes)


def _gap(a, b) -> float:
    worst = 0.0
    for name, value in vars(a).items():
        if name.endswith("_") and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            scale = max(float(np.nanmax(np.abs(value))), 1e-300)
            worst = max(worst, float(np.nanmax(np.abs(getattr(b, name) - value))) / scale)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--append", type=float, default=0.05)
    args = parser.parse_args()
    n, d = args.rows, args.features
    old = round(n * (1 - args.append))
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((n, d)) @ (np.eye(d) + 0.2 * rng.standard_normal((d, d)))).astype(
        np.float32
    )
    y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.5)
    classes = np.unique(y)
    print(f"{n} x {d} float32, {args.append:.0%} appended ({n - old} rows)")
    print(
        "| estimator | full fit s | update s | update / full | rows read (update / full) "
        "| max rel. difference |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, dask.config.set(scheduler="threads"):
        for name, make in CASES.items():
            labels = None if name in ("PCA", "GaussianDensity", "CCA") else y
            _fit(make(), X[:old], None if labels is None else labels[:old]).save(
                Path(tmp) / f"{name}.zarr"
            )
            full_in, full_count = counting_dask_array(X, chunks=(25_000, d))
            start = time.perf_counter()
            full = _fit(make(), full_in, labels)
            t_full = time.perf_counter() - start
            new_in, new_count = counting_dask_array(X[old:], chunks=(25_000, d))
            start = time.perf_counter()
            updated = _partial(
                ddr.load(Path(tmp) / f"{name}.zarr"),
                new_in,
                None if labels is None else labels[old:],
                classes,
            )
            t_update = time.perf_counter() - start
            ratio = new_count.rows_read / full_count.rows_read
            print(
                f"| {name} | {t_full:.3f} | {t_update:.3f} | {t_update / t_full:.3f} "
                f"| {ratio:.3f} | {_gap(full, updated):.1e} |"
            )


if __name__ == "__main__":
    main()
