"""What ddr's guards on inputs and files cost: ``python -m benchmarks.guards``.

- **Chunk listing** (issue 16): before any data is read, every input a pipeline reads is
  checked for missing chunks from one listing of its store. Timed on X of dataset M (20
  chunks of 100 000 x 100 float32; generated under ``--data-dir`` when missing) and on an
  array of 10 000 chunks (1 000 000 x 4 float32), beside opening the same input without the
  check (``missing_chunks="fill"``), best of ``--repeat`` runs, and one pass over the data
  (a threaded sum) for scale.
- **Bounded parsing**: the params doubling bomb, the 9-level YAML alias bomb and a 50 MB file
  (the files of ``tests/test_config_limits.py``), each read in a fresh Python process: the
  wall time from the start of ``load_document`` to the refusal, and the peak resident
  memory of that whole process (interpreter and imports included).

Prints a table and writes it to ``benchmarks/results/guards.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from ddr.config.document import load_document
from ddr.config.errors import PipelineError
start = time.perf_counter()
try:
    load_document(sys.argv[1])
    problem = "accepted"
except PipelineError as exc:
    problem = str(exc.problems[0])
seconds = time.perf_counter() - start
try:  # this process's peak (ru_maxrss would keep the parent's, from before exec)
    with open("/proc/self/status") as fh:
        rss = next(int(ln.split()[1]) * 1024 for ln in fh if ln.startswith("VmHWM:"))
except OSError:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "rss": rss, "problem": problem}))
"""


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def listing_rows(data_dir: Path, repeat: int) -> list[str]:
    import numpy as np
    import zarr

    from benchmarks.harness import Context
    from ddr.io import open_input
    from ddr.io.stored_chunks import missing_chunk_keys

    ctx = Context(["M"], data_dir)
    ctx.ensure("M")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        many = Path(tmp) / "many.zarr"
        arr = zarr.create_array(many, shape=(1_000_000, 4), chunks=(100, 4), dtype="f4")
        arr[...] = np.ones((1_000_000, 4), dtype="f4")
        cases = [("M: X", ctx.path("M"), "X"), ("10 000 chunks", many, None)]
        for label, path, name in cases:
            z = zarr.open_array(path, path=name or "", mode="r")
            missing, n = missing_chunk_keys(z)
            assert not missing
            listing = _best(lambda z=z: missing_chunk_keys(z), repeat)
            checked = _best(lambda p=path, a=name: open_input(p, a, protect=False), repeat)
            unchecked = _best(
                lambda p=path, a=name: open_input(p, a, protect=False, missing_chunks="fill"),
                repeat,
            )
            data = open_input(path, name, protect=False, missing_chunks="fill").data
            one_pass = _best(lambda d=data: d.sum().compute(scheduler="threads"), 1)
            rows.append(
                f"| {label} | {n:,} | {listing * 1e3:.1f} ms | {unchecked * 1e3:.1f} ms | "
                f"{checked * 1e3:.1f} ms | {one_pass:.2f} s | {100 * listing / one_pass:.2g} % |"
            )
    return rows


def bomb_files(directory: Path) -> dict[str, Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_config_limits import alias_bomb, doubling_bomb

    files = {
        "params doubling (30 params)": directory / "doubling.yaml",
        "YAML aliases (9 levels)": directory / "laughs.yaml",
        "50 MB file": directory / "big.yaml",
    }
    files["params doubling (30 params)"].write_text(doubling_bomb())
    files["YAML aliases (9 levels)"].write_text(alias_bomb())
    line = "# " + "x" * 77 + "\n"
    with files["50 MB file"].open("w") as fh:
        fh.write("ddr: 1\n")
        for _ in range(50 * 2**20 // len(line) // 1000):
            fh.write(line * 1000)
    return files


def parsing_rows(repeat: int) -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in bomb_files(Path(tmp)).items():
            runs = []
            for _ in range(repeat):
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, str(path), str(ROOT)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs.append(json.loads(out.stdout))
            best = min(runs, key=lambda r: r["seconds"])
            where = best["problem"].split(": ", 1)[0].removeprefix(tmp + os.sep)
            rows.append(
                f"| {label} | {path.stat().st_size:,} B | {best['seconds'] * 1e3:.1f} ms | "
                f"{max(r['rss'] for r in runs) / 2**20:.0f} MiB | {where} |"
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-listing", action="store_true", help="only the parsing bounds")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    lines = [
        "# Guards on inputs and files",
        "",
        f"Load average when measured: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} "
        f"({os.cpu_count()} cores). Best of {args.repeat} runs.",
        "",
    ]
    if not args.skip_listing:
        lines += [
            "## Missing-chunk check: one listing per input array",
            "",
            "| array | chunks | listing and check | open_input, fill | open_input, checked "
            "| a pass over the data | check / pass |",
            "|---|---|---|---|---|---|---|",
            *listing_rows(args.data_dir, args.repeat),
            "",
        ]
    lines += [
        "## Bounded parsing: time to refusal and peak memory of the whole process",
        "",
        "| file | size | refused after | peak RSS | reported at |",
        "|---|---|---|---|---|",
        *parsing_rows(args.repeat),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "guards.md").write_text(text)


if __name__ == "__main__":
    main()
