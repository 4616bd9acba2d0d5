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
Then two plateaus of Gaussian mixtures with tied covariances (``GaussianMixture``'s default
tol=1e-6): three overlapping 2-D clusters of 200 rows from a symmetric start (two components
2e-4 apart; the case of ``tests/test_gaussian_mixture.py``; the optimum the best of 5
scikit-learn runs to tol=1e-12), and the demo data's 10 leading principal component scores
(``ddr demo-data`` defaults, 100 000 rows) with 4 components from k-means++, seed 0 (the
example pipeline's fit; the optimum ddr's own fit to tol=1e-12 from the same start).
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


def _clusters() -> np.ndarray:
    rng = np.random.default_rng(0)
    centres = np.array([[-1.5, 0.0], [1.5, 0.0], [0.0, 2.5]])
    cov = np.array([[1.0, 0.3], [0.3, 0.8]])
    return np.concatenate([rng.multivariate_normal(c, cov, 200) for c in centres])


def _demo_scores() -> np.ndarray:
    from ddr.demo import DemoSpec, demo_dataset

    X = demo_dataset(DemoSpec())["X"].values
    return np.asarray(ddr.PCA(10).fit(X).transform(X), dtype=np.float64)


_SYMMETRIC = {
    "covariance_type": "tied",
    "weights_init": np.full(3, 1 / 3),
    "means_init": np.array([[1e-4, 0.5], [-1e-4, 0.5], [0.0, 2.0]]),
    "precisions_init": "inverse covariance of X",
}
_DEMO = {"covariance_type": "tied", "init_params": "k-means++", "random_state": 0}


def _model(kind: str, q: int, kw: dict[str, Any], X: np.ndarray) -> Any:
    if kind == "gm":
        kw = dict(kw, max_iter=kw.get("max_iter", 1000))
        if isinstance(kw.get("precisions_init"), str):
            kw["precisions_init"] = np.linalg.inv(np.cov(X.T))
        return ddr.GaussianMixture(q, **kw)
    return (ddr.FactorAnalysis if kind == "fa" else ddr.PPCA)(q, **kw)


CASES: dict[str, tuple[Any, str, int, dict[str, Any]]] = {
    "breast_cancer FA(3)": (lambda: _standardised(load_breast_cancer().data), "fa", 3, {}),
    "diabetes FA(2), Heywood": (lambda: _standardised(load_diabetes().data), "fa", 2, {}),
    "wine FA(2), 20% missing in 5 columns": (_wine, "fa", 2, {}),
    "iris FA(2)": (lambda: load_iris().data, "fa", 2, {}),
    "iris FA(2), n_init=5": (lambda: load_iris().data, "fa", 2, {"n_init": 5, "random_state": 0}),
    "PPCA(4), 20 000 x 30, 20% missing": (_ppca_data, "ppca", 4, {}),
    "GaussianMixture(3, tied), symmetric start": (_clusters, "gm", 3, _SYMMETRIC),
    "GaussianMixture(4, tied), demo scores": (_demo_scores, "gm", 4, _DEMO),
}


def _optimum(X: np.ndarray, kind: str, q: int, model: Any) -> float:
    from test_factor_analysis import observed_maximum, profile_maximum

    if kind == "ppca":
        ref = ddr.PPCA(q, tol=0.0, max_iter=5000).fit(X)
        return float(ref.loglik_curve_[-1])
    if kind == "gm":
        from sklearn.mixture import GaussianMixture

        if X.shape[0] > 10_000:  # ddr's own fit from the same start, to round-off
            params = {k: v for k, v in model.get_params().items() if k != "n_components"}
            ref = _model(kind, q, dict(params, tol=1e-12, max_iter=3000), X)
            return float(ref.fit(X).score(X) * X.shape[0])
        fits = [
            GaussianMixture(q, covariance_type=model.covariance_type, tol=1e-12,
                            max_iter=20_000, random_state=s).fit(X)
            for s in range(5)
        ]  # fmt: skip
        return max(float(f.score(X)) for f in fits) * X.shape[0]
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
        import ddr.mixture.gaussian_mixture as gm

        lg.fit_em = functools.partial(lg.fit_em, accelerate=False)  # type: ignore[assignment]
        gm.fit_em = functools.partial(gm.fit_em, accelerate=False)  # type: ignore[assignment]
    label = f" ({args.label})" if args.label else ""
    print(f"| case | passes{label} | EM iterations | loglik | gap to the optimum | warnings |")
    print("|---|---|---|---|---|---|")
    for name, (make, kind, q, kw) in CASES.items():
        X = make()
        arr, counter = counting_dask_array(X, chunks=(max(50, X.shape[0] // 4), -1))
        with dask.config.set(scheduler="threads"), warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            try:
                model = _model(kind, q, kw, X).fit(arr)
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
