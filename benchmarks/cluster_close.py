"""How long a LocalCluster takes to close, with and without ddr's quick exit of its workers.

``python -m benchmarks.cluster_close [--workers 8] [--repeats 3]`` starts a process
LocalCluster, has every worker import what a ddr run imports (ddr's estimators,
scikit-learn, xarray, zarr), then closes it and times ``close()``; once with the clusters ddr
starts (:func:`ddr.cluster.shutdown.exit_quickly` registered, as every ``ddr run`` does) and
once with distributed's defaults. It prints a markdown table and counts the nanny's
``Worker process still alive ..., killing`` warnings (a close that passes 4 s per worker).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from distributed import LocalCluster

from ddr.cluster.backend import make_client
from ddr.cluster.shutdown import exit_quickly


def _import_what_a_run_imports() -> None:
    import sklearn.discriminant_analysis  # noqa: F401
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    import ddr.decomposition  # noqa: F401


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.killed = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.killed += "still alive" in record.getMessage()


def close_seconds(workers: int, quick: bool, counter: _Count) -> float:
    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with make_client(cluster, set_as_default=False) as client:
        if quick:
            exit_quickly(client)
        client.run(_import_what_a_run_imports)
    start = time.perf_counter()
    cluster.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    counter = _Count()
    logging.getLogger("distributed.nanny").addHandler(counter)
    print(f"| workers | shutdown | close() median s (of {args.repeats}) | workers killed |")
    print("|---|---|---|---|")
    for quick in (False, True):
        counter.killed = 0
        times = [close_seconds(args.workers, quick, counter) for _ in range(args.repeats)]
        name = "ddr (exit_quickly)" if quick else "distributed's default"
        print(f"| {args.workers} | {name} | {statistics.median(times):.2f} | {counter.killed} |")


if __name__ == "__main__":
    main()
