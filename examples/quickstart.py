"""Quickstart: one pass of ddr statistics over a demo dataset on a local dask cluster.

Usage: python examples/quickstart.py PATH_TO_DEMO_ZARR
"""

from __future__ import annotations

import sys
import time

import dask
import numpy as np
from distributed import Client, LocalCluster

from ddr.io import open_input
from ddr.stats import ClassMoments, Moments, lazy


def main(path: str) -> None:
    X = open_input(path, "X")
    y = open_input(path, "y")
    truth = open_input(path, "true_explained_variance").values
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        print(f"cluster: {len(client.scheduler_info()['workers'])} workers")
        print(f"input: X {X.shape} {X.dtype}, {len(X.chunks[0])} row chunks of "
              f"{X.chunks[0][0]} rows")
        start = time.perf_counter()
        # two statistics, one pass over X
        moments, classes = dask.compute(lazy(Moments, X), lazy(ClassMoments, X, y))
        seconds = time.perf_counter() - start
    evals = np.linalg.eigvalsh(moments.covariance(ddof=1))[::-1][: len(truth)]
    print(f"one pass over {moments.count:.0f} rows in {seconds:.2f} s")
    print("top covariance eigenvalues:", np.round(evals, 2))
    print("true eigenvalues:          ", np.round(truth, 2))
    priors = {int(c): round(float(p), 3) for c, p in zip(classes.classes, classes.priors(),
                                                         strict=True)}
    print("class priors:", priors)
    print(f"between-class / total variance: "
          f"{np.trace(classes.between_scatter()) / np.trace(moments.scatter):.3f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "quickstart-output/demo.zarr")
