"""Passes over the data of the EM fits of issue 27, and how far from the optimum they stop.

``python -m benchmarks.em_passes`` fits each case with a dask array whose reads are counted
(:func:`ddr.testing.counting_dask_array`) and compares the fit's log-likelihood with the
optimum found by an independent maximiser (the one of ``tests/test_factor_analysis.py``:
the profile likelihood of psi for complete data, a direct BFGS maximisation of the
observed-data Gaussian likelihood with missing values; for PPCA with missing values, EM run
to ``tol=0``). Each row: passes, EM iterations, and the relative gap ``(optimum - loglik) /
|optimum|``. With ``--plain`` the same fits run without SQUAREM (``accelerate=False``),
which isolates the acceleration's share. Run it on two commits to compare them (the
``--label`` names the column); it prints a markdown table.

The cases are those of the issue: standardised breast_cancer FactorAnalysis(3),
standardised diabetes FactorAnalysis(2) (a Heywood case), standardised wine with 20 % of the
values of 5 columns missing (the columns and rows drawn with seed 27) FactorAnalysis(2),
iris FactorAnalysis(2); and PPCA(4) of 20 000 x 30 rank-4 data with 20 % missing at random.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import dask
import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine

import ddr
from ddr.testing import counting_dask_array

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _standardised(X: np.ndarray) -> np.ndarray:
    return (X - X.mean(axis=0)) / X.std(axis=0)


def _wine() -> np.ndarray:
    rng = np.random.default_rng(27)
    X = _standardised(load_wine().data)
    for j in rng.choice(X.shape[1], 5, replace=False):
        X[rng.random(X.shape[0]) < 0.2, j] = np.nan
    return X


def _ppca_data() -> np.ndarray:
    rng = np.random.default_rng(0)
    W = np.linalg.qr(rng.standard_normal((30, 4)))[0] * [3.0, 2.0, 1.5, 1.2]
    X = rng.standard_normal((20_000, 4)) @ W.T + 0.5 * rng.standard_normal((20_000, 30)) + 5
    X[rng.random(X.shape) < 0.2] = np.nan
    return X


CASES: dict[str, tuple[Any, str, int, dict[str, Any]]] = {
    "breast_cancer FA(3)": (lambda: _standardised(load_breast_cancer().data), "fa", 3, {}),
    "diabetes FA(2), Heywood": (lambda: _standardised(load_diabetes().data), "fa", 2, {}),
    "wine FA(2), 20% missing in 5 columns": (_wine, "fa", 2, {}),
    "iris FA(2)": (lambda: load_iris().data, "fa", 2, {}),
    "iris FA(2), n_init=5": (lambda: load_iris().data, "fa", 2, {"n_init": 5, "random_state": 0}),
    "PPCA(4), 20 000 x 30, 20% missing": (_ppca_data, "ppca", 4, {}),
}


def _optimum(X: np.ndarray, kind: str, q: int, model: Any) -> float:
    from test_factor_analysis import observed_maximum, profile_maximum

    if kind == "ppca":
        ref = ddr.PPCA(q, tol=0.0, max_iter=5000).fit(X)
        return float(ref.loglik_curve_[-1])
    if np.isnan(X).any():
        return observed_maximum(X, q, model.components_.T, model.mean_, model.noise_variance_)[0]
    return profile_maximum(X, q, starts=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.em_passes", description=__doc__)
    parser.add_argument("--plain", action="store_true", help="EM without SQUAREM")
    parser.add_argument("--label", default="", help="names the columns")
    parser.add_argument(
        "--optima",
        type=Path,
        help="a JSON file of the optima: read when it exists (an older commit, whose tests "
        "lack the maximisers), else written",
    )
    args = parser.parse_args(argv)
    optima = json.loads(args.optima.read_text()) if args.optima and args.optima.exists() else None
    found: dict[str, float] = {}
    if args.plain:
        import ddr.decomposition._latent_gaussian as lg

        lg.fit_em = functools.partial(lg.fit_em, accelerate=False)  # type: ignore[assignment]
    label = f" ({args.label})" if args.label else ""
    print(f"| case | passes{label} | EM iterations | loglik | gap to the optimum | warnings |")
    print("|---|---|---|---|---|---|")
    for name, (make, kind, q, kw) in CASES.items():
        X = make()
        arr, counter = counting_dask_array(X, chunks=(max(50, X.shape[0] // 4), -1))
        with dask.config.set(scheduler="threads"), warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            try:
                model = (ddr.FactorAnalysis if kind == "fa" else ddr.PPCA)(q, **kw).fit(arr)
            except TypeError:  # an older commit without n_init
                print(f"| {name} | - | - | - | - | - |")
                continue
        n = X.shape[0]
        ll = float(model.score(X) * n)
        best = optima[name] if optima else _optimum(X, kind, q, model)
        found[name] = best
        said = sorted({type(w.message).__name__ for w in got})
        print(
            f"| {name} | {counter.passes:g} | {model.n_iter_} | {ll:.6f} | "
            f"{(best - ll) / abs(best):.1e} | {', '.join(said) or '-'} |",
            flush=True,
        )
    if args.optima and optima is None:
        args.optima.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
