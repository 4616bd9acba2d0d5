"""Moments, ClassMoments and QDA's fit on the wide dataset, on a 2-worker cluster, with where
the workers' time goes.

``python -m benchmarks.class_moments_wide [--dataset W] [--rounds 2]`` generates (or
reuses) the dataset, starts a LocalCluster of 2 workers x 1 thread (4 GiB each), and runs in
rounds, one after another: ``ddr.stats.compute(Moments, X)``, ``compute(ClassMoments, X,
y)`` and ``QuadraticDiscriminantAnalysis().fit(X, y)``. For each it prints the wall time,
the workers' CPU time, and the task stream summed over both workers by task kind and
action (compute, transfer): the block statistics, the merge tree and its transfers. Issue
29's target is QDA's fit within 1.3x of Moments on W; the table in
``benchmarks/results/predict-floors.md`` ("QDA's fit on wide data") comes from it.
"""

from __future__ import annotations

import argparse
import collections
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _kind(key: object) -> str:
    """A task key without its tokens: ``ddr-stats-merge``."""
    name = key[0] if isinstance(key, tuple) else str(key)
    return "-".join(
        part for part in str(name).split("-")
        if not (len(part) >= 16 and all(c in "0123456789abcdef" for c in part))
    )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="W")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data", type=Path, default=HERE / "data")
    args = parser.parse_args(argv)
    import psutil
    from distributed import Client, LocalCluster, get_task_stream

    import ddr
    from benchmarks.harness import Context
    from ddr.stats import ClassMoments, Moments, compute

    ctx = Context([args.dataset], args.data)
    ctx.ensure(args.dataset)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit="4GiB", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        pids = client.run(os.getpid).values()
        procs = [psutil.Process(p) for p in pids]

        def cpu() -> float:
            return sum(sum(p.cpu_times()[:2]) for p in procs)

        X, y = ctx.array(args.dataset), ctx.labels(args.dataset)
        X[: 2 * X.chunks[0][0]].sum().compute()  # warm: imports and the page cache
        fits = {
            "Moments": lambda: compute(Moments, X),
            "ClassMoments": lambda: compute(ClassMoments, X, y),
            "QDA fit": lambda: ddr.QuadraticDiscriminantAnalysis().fit(X, y),
        }
        for _ in range(args.rounds):
            for name, fit in fits.items():
                c0, t0 = cpu(), time.perf_counter()
                with get_task_stream(client=client) as stream:
                    fit()
                wall, used = time.perf_counter() - t0, cpu() - c0
                parts: dict[str, float] = collections.defaultdict(float)
                for task in stream.data:
                    for ss in task["startstops"]:
                        parts[f"{_kind(task['key'])} {ss['action']}"] += ss["stop"] - ss["start"]
                shown = ", ".join(
                    f"{k} {v:.1f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])
                    if v > 0.2
                )  # fmt: skip
                print(f"{name:12s} wall {wall:6.1f} s, workers CPU {used:6.1f} s | {shown}")


if __name__ == "__main__":
    main()
