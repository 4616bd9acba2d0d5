"""Predictions of one chunk before and after a change of the kernels, interleaved, one core.

``python -m benchmarks.predict_ab --before REV [--dataset M] [--repeat 15]`` loads
``ddr/naive_bayes/gaussian.py`` and ``ddr/discriminant_analysis/qda.py`` as they were at
``REV`` (``git show``) beside the installed ones, fits both versions of GaussianNB and QDA
(reg_param=1e-6) on the first chunk of the dataset's ``X`` and times predict and
predict_proba of that chunk as float32 (as stored) and as float64: each block checked for
NaN as ``map_rows`` does, then the joint log-likelihood, then (for "before") scipy's
``logsumexp``, the normalisation before issue 29. The calls alternate and each time is the
best of ``--repeat`` runs, so a slow spell of a shared machine hits both alike. It checks
that both versions predict the same classes and probabilities (to 1e-9) before timing, and
prints a Markdown table beside the read of the chunk and the float64 GEMM each model needs
(the BLAS part of :mod:`benchmarks.suites.predict`'s floor).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from scipy.special import logsumexp
from threadpoolctl import threadpool_limits

import ddr
from benchmarks.per_block import best_ms, run_as_in_a_dask_worker
from benchmarks.suites.predict import _blas_block, gemm_width
from ddr.generative.classifier import check_some_class_possible
from ddr.stats._checks import check_rows

HERE = Path(__file__).resolve().parent
KERNELS = {"gaussian": "ddr/naive_bayes/gaussian.py", "qda": "ddr/discriminant_analysis/qda.py"}


def load_at(rev: str, name: str, path: str, folder: Path) -> Any:
    """The module at ``path`` as it was at git revision ``rev``, imported as ``name``."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=HERE.parent, check=True, capture_output=True
    ).stdout
    file = folder / f"{name}.py"
    file.write_bytes(source)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def old_joint(model: Any, x: np.ndarray) -> np.ndarray:
    check_rows(x, 0)
    jll, params = model._jll()
    return check_some_class_possible(jll(x, *params))


def old_predict(model: Any, x: np.ndarray) -> np.ndarray:
    return model.classes_[np.argmax(old_joint(model, x), axis=1)]


def old_proba(model: Any, x: np.ndarray) -> np.ndarray:
    j = old_joint(model, x)
    return np.exp(j - logsumexp(j, axis=1, keepdims=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.predict_ab", description=__doc__)
    parser.add_argument("--before", required=True, help="git revision of the old kernels")
    parser.add_argument("--dataset", default="M")
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    group = zarr.open_group(args.data_dir / f"{args.dataset}.zarr", mode="r")
    X = group["X"]
    rows = X.chunks[0]
    x32, y = X[:rows], group["y"][:rows]
    x64 = x32.astype(np.float64)
    with tempfile.TemporaryDirectory() as tmp:
        old = {k: load_at(args.before, f"before_{k}", p, Path(tmp)) for k, p in KERNELS.items()}
    models = [
        ("GaussianNB", ddr.GaussianNB, old["gaussian"].GaussianNB, {}),
        ("QDA", ddr.QuadraticDiscriminantAnalysis,
         old["qda"].QuadraticDiscriminantAnalysis, {"reg_param": 1e-6}),
    ]  # fmt: skip
    cases: dict[str, Callable[[], object]] = {}
    for label, New, Old, params in models:
        new, before = New(**params).fit(x32, y), Old(**params).fit(x32, y)
        np.testing.assert_array_equal(new.predict(x32), old_predict(before, x32))
        np.testing.assert_allclose(
            new.predict_proba(x32), old_proba(before, x32), rtol=1e-9, atol=1e-300
        )
        M = np.random.default_rng(0).standard_normal((x32.shape[1], gemm_width(label, new)))
        cases[f"{label} f64 BLAS floor"] = partial(_blas_block, x32, M)
        for kind, block in (("float32", x32), ("float64", x64)):
            for method, was in (("predict", old_predict), ("predict_proba", old_proba)):
                cases[f"{label}.{method}, {kind}, before"] = partial(was, before, block)
                cases[f"{label}.{method}, {kind}, after"] = partial(getattr(new, method), block)
    with threadpool_limits(limits=1, user_api="blas"):
        (read,) = best_ms(lambda: X[:rows], repeat=args.repeat)
        times = best_ms(*cases.values(), repeat=args.repeat)
    print(f"Chunk: {rows} x {X.shape[1]} {X.dtype} of {args.dataset}; before = {args.before}\n")
    print("| work per chunk, one core | ms |\n|---|---|")
    print(f"| read + decompress one chunk (zarr) | {read:.1f} |")
    for name, ms in zip(cases, times, strict=True):
        print(f"| {name} | {ms:.1f} |")
    return 0


if __name__ == "__main__":
    run_as_in_a_dask_worker("benchmarks.predict_ab")
    sys.exit(main())
