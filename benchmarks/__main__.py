"""Run the benchmarks: ``python -m benchmarks [--datasets S,M,L,W] [--suites foundation,...]``.

``--suites scaling`` makes its own data and clusters: ``--workers 1,2,4,8,16`` and
``--scaling-rows N`` size it (the shared datasets are then not generated). ``--suites sparse``
makes its own corpus: ``--counts-docs``, ``--counts-words``, ``--counts-length`` size it.

Generates (or reuses) the datasets under ``--data-dir``, runs the suites, prints one table per
suite (rows: methods, columns: datasets) and writes it to ``benchmarks/results/<suite>.md``;
``benchmarks/RESULTS.md`` is then rebuilt from every suite's latest results.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import pkgutil
import re
import sys
from pathlib import Path

from benchmarks import suites
from benchmarks.harness import DATASETS, Context, Row, format_cell, machine_description

HERE = Path(__file__).parent
ORDER = ["foundation", "linear", "generative", "nonlinear", "latent", "pipeline", "scaling"]


def available_suites() -> list[str]:
    names = [m.name for m in pkgutil.iter_modules(suites.__path__) if not m.name.startswith("_")]
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def table(rows: list[Row], datasets: list[str], floors: dict[str, float]) -> str:
    methods = list(dict.fromkeys(r.method for r in rows))
    lines = ["| method | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    for method in methods:
        cells = []
        for name in datasets:
            row = next((r for r in rows if r.method == method and r.dataset == name), None)
            cells.append("-" if row is None else format_cell(row, floors.get(name)))
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--datasets", default="S,M,L,W", help="comma-separated among " + ",".join(DATASETS)
    )
    parser.add_argument(
        "--suites",
        default=",".join(available_suites()),
        help="comma-separated among " + ",".join(available_suites()),
    )
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell (median)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--workers", default="1,2,4,8,16", help="scaling suite: worker processes, comma-separated"
    )
    parser.add_argument(
        "--scaling-rows",
        type=int,
        default=8_000_000,
        help="scaling suite: rows of its 100-column float32 dataset",
    )
    parser.add_argument(
        "--counts-docs", type=int, default=1_000_000, help="sparse suite: documents"
    )
    parser.add_argument("--counts-words", type=int, default=20_000, help="sparse suite: words")
    parser.add_argument(
        "--counts-length", type=int, default=100, help="sparse suite: mean tokens a document"
    )
    parser.add_argument(
        "--counts-dense-docs",
        type=int,
        default=20_000,
        help="sparse suite: documents densified for dask-ml's dense TruncatedSVD",
    )
    parser.add_argument(
        "--transform-cases",
        default="",
        help="transforms suite: the models timed, comma-separated labels (default all; e.g. "
        "'LDA,Nystroem' on W, where GaussianMixture full takes hours to fit)",
    )
    parser.add_argument(
        "--transform-fit-rows",
        type=int,
        default=200_000,
        help="transforms suite: the first rows each model is fitted on, in memory (the "
        "methods are timed on every row; e.g. 10000 for GaussianMixture full on W)",
    )
    args = parser.parse_args(argv)
    datasets = [d for d in args.datasets.split(",") if d]
    chosen = [s for s in args.suites.split(",") if s]
    unknown = [d for d in datasets if d not in DATASETS] + [
        s for s in chosen if s not in available_suites()
    ]
    if unknown:
        parser.error(f"unknown datasets/suites: {unknown}")

    ctx = Context(datasets, args.data_dir, repeat=args.repeat)
    ctx.workers = [int(n) for n in args.workers.split(",") if n]
    ctx.scaling_rows = args.scaling_rows
    ctx.counts_docs, ctx.counts_words = args.counts_docs, args.counts_words
    ctx.counts_length, ctx.counts_dense_docs = args.counts_length, args.counts_dense_docs
    ctx.transform_cases = [c for c in args.transform_cases.split(",") if c]
    ctx.transform_fit_rows = args.transform_fit_rows
    modules = {s: importlib.import_module(f"benchmarks.suites.{s}") for s in chosen}
    shared = [s for s in chosen if getattr(modules[s], "USES_DATASETS", True)]
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:])
    try:
        for name in datasets if shared else ():
            ctx.ensure(name)
        for suite in chosen:
            ctx.suite = suite
            module = modules[suite]
            if suite in shared:
                for name in datasets:  # the read floor opens every suite's table, same run
                    ctx.measure_floor(name)
            module.run(ctx)
            if hasattr(module, "report"):  # a suite with tables of its own shape
                text = module.report(ctx)
            else:
                rows = [r for r in ctx.rows if r.suite == suite]
                text = table(rows, datasets, ctx._floors)
            # a suite of its own data says which machine it ran on (RESULTS.md's header names
            # the machine of the shared suites)
            machine = "" if suite in shared else f"Machine: {machine_description()}\n\n"
            title = suite + (f" ({module.variant()})" if hasattr(module, "variant") else "")
            doc = (
                f"## {title}\n\n{(module.__doc__ or '').strip()}\n\nRun {started}: "
                f"`{command}`\n\n{machine}{text}\n"
            )
            print("\n" + doc, flush=True)
            if not args.no_write:
                out = HERE / "results" / f"{_results_name(suite, module)}.md"
                out.parent.mkdir(exist_ok=True)
                out.write_text(doc)
    finally:
        ctx.close()
    if not args.no_write:
        write_results(machine_description() if shared else None)
    return 0


def _results_name(suite: str, module: object) -> str:
    """``suite``, or ``suite-<variant>`` for a suite whose numbers depend on installed
    versions (``variant()``): each variant keeps its own table."""
    variant = getattr(module, "variant", None)
    if variant is None:
        return suite
    return f"{suite}-" + re.sub(r"[^A-Za-z0-9.]+", "-", variant()).strip("-")


def write_results(machine: str | None) -> None:
    """Rebuild RESULTS.md from every suite's latest results; ``machine`` None keeps the
    machine line of the current RESULTS.md (only suites with their own machine line ran)."""
    if machine is None:
        old = (
            (HERE / "RESULTS.md").read_text().splitlines() if (HERE / "RESULTS.md").exists() else []
        )
        line = next((x for x in old if x.startswith("Machine: ")), "Machine: unknown")
        machine = line.removeprefix("Machine: ")
    parts = [
        "# ddr benchmark results\n",
        f"Machine: {machine}\n",
        "Cells: wall seconds (x the dask read floor on the same cluster, same run; rows "
        "with a target against the floor (ddr Moments, PCA, GaussianNB/QDA fit, a PPCA "
        "iteration) are the median of 3 runs, each right after its own floor run, and divide "
        "by the median of those floors), peak resident memory of all processes (client and "
        "workers), passes over the data (chunk bytes read / stored bytes), and accuracy. "
        "LC = LocalCluster, 2 workers x 1 thread, 4 GiB each; thr = dask threaded scheduler; "
        "1proc = one process, no dask. ddr rows read the Zarr chunks as ddr does "
        "(`ddr.io.zarr_chunks`: each stored chunk as zarr decodes it, without zarr's copy); "
        "the floor, dask and dask-ml rows through `dask.array.from_zarr`; the row 'read "
        "floor, ddr reader sum' is the reading part of a ddr row. Datasets (`ddr demo-data`, "
        "float32, zstd, rank-10 signal + unit noise, 5 classes): "
        + "; ".join(
            f"{k} {v.n_samples:,} x {v.n_features} in chunks of {v.chunk_rows:,} rows"
            for k, v in DATASETS.items()
        )
        + ".\n",
    ]
    for name in [*available_suites(), "per_block"]:
        for path in [HERE / "results" / f"{name}.md", *sorted(HERE.glob(f"results/{name}-*.md"))]:
            if path.exists():
                parts.append(path.read_text())
    (HERE / "RESULTS.md").write_text("\n".join(parts))


if __name__ == "__main__":
    raise SystemExit(main())
