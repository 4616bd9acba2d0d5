"""Every example pipeline, run as its header says, gives numbers that make sense for what it
claims: variances that match the truth stored with the demo data, held-out accuracy close to
the training accuracy on a new sample of the same population, canonical correlations that
are the correlations of the variates written, a noise variance EM recovers from data with
holes, a Scott bandwidth, one pass where one pass is claimed.

The commands are read from each file's header (``#   ddr ...`` lines) and run through the
command line in order, with the data made smaller (fewer rows and columns) and the threaded
scheduler; ``test_pipeline_examples.py`` runs them on distributed clusters.
"""

from __future__ import annotations

import json
import re
import shlex
import warnings

import numpy as np
import pytest
import xarray as xr
from pipeline_support import PIPELINES, example_names
from typer.testing import CliRunner

import ddr
from ddr.cli import app
from ddr.demo import DemoSpec, demo_dataset
from ddr.io import open_input, read_attrs
from ddr.pipeline import plan_pipeline
from ddr.pipeline.lineage import rows_role

#: the demo data the headers make, shrunk: option -> largest value used here
SHRINK = {"--n-samples": 4000, "--n-features": 30, "--chunk-rows": 500}
#: wider data for the randomized solver (its passes depend on the width)
SHRINK_WIDE = {"--n-samples": 2000, "--n-features": 200, "--chunk-rows": 250}
#: the gridded field the headers make, shrunk (time steps, grid, chunks)
SHRINK_GRIDDED = {"--n-samples": 240, "--n-lat": 18, "--n-lon": 36, "--chunk-rows": 60}
#: --set values that fit the pipelines to the shrunk data (the header's own --set come after)
FIT = {
    "classify": ["train_end=3000", "test_start=3000"],
    "cca": ["split=15"],
    "kernel-cca": ["split=15"],
    "lsa-plsa": ["k=3"],
}


def header_commands(name: str) -> list[list[str]]:
    """The ``ddr ...`` commands of a pipeline file's header comment, in order."""
    out = []
    for line in (PIPELINES / f"{name}.yaml").read_text().splitlines():
        if not line.startswith("#"):
            break
        m = re.match(r"#\s+(ddr\s.+)$", line)
        if m:
            out.append(shlex.split(m.group(1).split("  #")[0]))
    return out


def shrink(args: list[str], limits: dict[str, int]) -> list[str]:
    """``ddr demo-data`` arguments with sizes capped by ``limits`` (added where defaulted)."""
    args = list(args)
    defaults = {"--n-samples": 100_000, "--n-features": 50}
    for opt, cap in limits.items():
        if opt in args:
            i = args.index(opt) + 1
            args[i] = str(min(int(args[i]), cap))
        else:
            args += [opt, str(min(defaults.get(opt, cap), cap))]
    return args


def run_header(name: str, checks: dict) -> None:
    runner = CliRunner()
    for cmd in header_commands(name):
        assert cmd[0] == "ddr", cmd
        args = cmd[1:]
        if args[0] == "demo-data":
            limits = SHRINK_WIDE if "wide" in args[1] else SHRINK
            if "gridded" in args:  # --kind gridded: time steps and a grid, no features
                limits = SHRINK_GRIDDED
            args = [*shrink(args, limits), "--force"]
        elif args[0] == "run":
            pipeline = args[1]
            args = [
                "run",
                str(PIPELINES / pipeline.removeprefix("pipelines/")),
                "--cluster",
                "threads",
                "--no-progress",
                *[a for s in FIT.get(name, []) for a in ("--set", s)],
                *args[2:],
            ]
        elif args[0] == "plan":
            args = ["plan", str(PIPELINES / args[1].removeprefix("pipelines/")), *args[2:]]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (cmd, result.output)
        if args[0] == "run":
            planned_is_measured(result.output)
            ran = args[1].rsplit("/", 1)[-1].removesuffix(".yaml")
            sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
            if ran in checks:
                checks[ran](sets)
        if args[0] == "plan":
            checks.setdefault("plan-output", []).append(result.output)


def planned_is_measured(output: str) -> None:
    """The passes ``ddr plan`` promises are the passes the run measured, in one unit
    (passes over each stored array: its stored bytes read over its stored bytes); an
    open-ended plan (``"2+"``: EM decides) is a lower bound."""
    (where,) = [line.split(": ", 1)[1] for line in output.splitlines() if line[:9] == "summary: "]
    summary = metrics(where.split(", log: ")[0])
    measured, planned = summary["passes"], summary["planned_passes"]
    assert set(measured) <= set(planned), (measured, planned)
    for label, promise in planned.items():
        got = measured.get(label, 0.0)
        if promise.endswith("+"):
            assert got >= float(promise[:-1]) - 0.01, (label, promise, got)
        else:
            assert got == pytest.approx(float(promise), abs=0.01), (label, promise, got)


def metrics(path: str) -> dict:
    return json.loads(open(path).read())


def opened(path: str) -> xr.Dataset:
    """The output as xarray opens it, which must happen without a warning (consolidated)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return xr.open_zarr(path)


def truth(data: str) -> dict:
    with xr.open_zarr(data) as ds:
        return {
            "explained_variance": ds["true_explained_variance"].values,
            "noise_variance": ds.attrs["true_noise_variance"],
            "spec": DemoSpec(**ds.attrs["ddr:demo"]),
        }


# ------------------------------------------------------------------- checks
def check_quickstart(sets: list[str]) -> None:
    m = metrics("quickstart-output/pca-metrics.json")
    t = truth("demo.zarr")
    variances = m["pca.explained_variance_"]
    np.testing.assert_allclose(variances, t["explained_variance"], rtol=0.15)
    assert m["pca.noise_variance_"] == pytest.approx(t["noise_variance"], rel=0.1)
    ratio = np.asarray(m["pca.explained_variance_ratio_"])
    assert np.all(np.diff(ratio) <= 0) and 0.5 < ratio.sum() < 1
    ds = opened("quickstart-output/scores.zarr")
    assert ds["scores"].dims == ("sample", "component") and ds["scores"].shape == (4000, 10)
    np.testing.assert_allclose(ds["scores"].values.var(axis=0, ddof=1), variances, rtol=1e-4)


def check_randomized(sets: list[str]) -> None:
    m = metrics("wide-output/metrics.json")
    assert m["solver"] == "randomized" and m["passes"] == 4
    summary = metrics("wide-output/run-summary.json")
    assert summary["passes"] == {"X": 5.0} and summary["planned_passes"] == {"X": "5"}
    X = open_input("wide.zarr", "X")
    exact = ddr.PCA(n_components=20, svd_solver="covariance_eigh").fit(X)
    np.testing.assert_allclose(m["explained_variance_ratio"], exact.explained_variance_ratio_, 1e-3)
    model = ddr.load("wide-output/pca.model.zarr")
    t = truth("wide.zarr")
    np.testing.assert_allclose(model.explained_variance_, t["explained_variance"], rtol=0.25)


def check_kernel_pca(sets: list[str]) -> None:
    model = ddr.load("kernel-pca-output/kpca.model.zarr")
    lam = model.eigenvalues_
    share = model.explained_variance_ratio_
    assert np.all(np.diff(lam) <= 0) and np.all(lam > 0)
    assert 0 < share.sum() < 1
    np.testing.assert_allclose(share / share[0], lam / lam[0], rtol=1e-12)
    # the scores' variances are the eigenvalues / n (the identity kernel PCA is built on)
    scores = opened("kernel-pca-output/scores.zarr")["scores"].values
    np.testing.assert_allclose(scores.var(axis=0), lam / scores.shape[0], rtol=1e-6)


def check_ppca(sets: list[str]) -> None:
    m = metrics("ppca-output/metrics.json")
    t = truth("demo-missing.zarr")
    assert m["noise_variance"] == pytest.approx(t["noise_variance"], rel=0.15)
    curve = np.asarray(m["loglik"])
    assert np.all(np.diff(curve) >= -1e-9 * np.abs(curve[1:]))  # EM never goes down
    assert m["iterations"] < 200  # converged, not stopped
    spec = t["spec"]
    full = demo_dataset(DemoSpec(**{**vars(spec), "missing": 0.0}))["X"].values
    holes = np.isnan(open_input("demo-missing.zarr", "X").values)
    imputed = opened("ppca-output/ppca.zarr")["imputed"].values
    col_mean = np.nanmean(np.where(holes, np.nan, full), axis=0)
    err = np.sqrt(np.mean((imputed - full)[holes] ** 2))
    by_mean = np.sqrt(np.mean((np.broadcast_to(col_mean, full.shape) - full)[holes] ** 2))
    assert err < 0.5 * by_mean, (err, by_mean)


def check_factor_analysis(sets: list[str]) -> None:
    """On standardised features the noise variances are the uniquenesses: the true noise
    variance over each feature's total variance; complete data: one pass, EM's iterations
    on the client."""
    m = metrics("factor-analysis-output/metrics.json")
    with xr.open_zarr("demo.zarr") as ds:
        V, ev = ds["true_components"].values, ds["true_explained_variance"].values
        s2 = ds.attrs["true_noise_variance"]
    total = np.diag(V.T @ np.diag(ev - s2) @ V) + s2
    np.testing.assert_allclose(m["uniqueness"], s2 / total, rtol=0.15)
    assert m["iterations"] == len(m["loglike"])  # converged, on the client
    assert 0 < m["iterations"] < 1000
    loadings = np.asarray(m["loadings"])
    assert loadings.shape == (10, 30)
    # communalities + uniquenesses = 1 (the variance of a standardised feature)
    np.testing.assert_allclose((loadings**2).sum(axis=0) + m["uniqueness"], 1.0, atol=2e-3)
    summary = metrics("factor-analysis-output/run-summary.json")
    fa = next(s for s in summary["steps"] if s["id"] == "fa")
    assert fa["passes"] == {"X": 1.0}
    scores = opened("factor-analysis-output/scores.zarr")["scores"]
    assert scores.dims == ("sample", "factor") and scores.shape == (4000, 10)


def check_kmeans(sets: list[str]) -> None:
    """The labels written are the saved model's nearest centres, the sizes and the inertia
    those of the labels and distances written, Lloyd's iterations never raise the inertia, the
    fit's passes are the sample, the iterations and at most one at the final centres, and the
    inertia is within 1 % of scikit-learn's best of 10 starts in memory."""
    from sklearn.cluster import KMeans

    m = metrics("kmeans-output/metrics.json")
    ds = opened("kmeans-output/clusters.zarr")
    labels, D = ds["labels"].values, ds["distances"].values
    km = ddr.load("kmeans-output/kmeans.model.zarr")
    X = open_input("demo.zarr", "X").values
    np.testing.assert_array_equal(labels, km.predict(X))
    np.testing.assert_array_equal(labels, D.argmin(axis=1))
    np.testing.assert_array_equal(m["sizes"], np.bincount(labels, minlength=km.n_clusters))
    nearest = D[np.arange(labels.size), labels]
    assert m["inertia"] == pytest.approx(float(nearest @ nearest), rel=1e-9)
    curve = np.asarray(m["inertia_per_iteration"])
    assert np.all(np.diff(curve) <= 0) and m["inertia"] <= curve[-1]
    assert m["passes"] in (m["iterations"] + 1, m["iterations"] + 2) and m["iterations"] < 300
    assert metrics("kmeans-output/run-summary.json")["passes"]["X"] == pytest.approx(
        m["passes"] + 1  # predict and transform share one pass
    )
    sk = KMeans(km.n_clusters, n_init=10, random_state=0).fit(X.astype(np.float64))
    assert m["inertia"] <= 1.01 * sk.inertia_, (m["inertia"], sk.inertia_)


def check_lsa_plsa(sets: list[str]) -> None:
    """pLSA: topics are distributions over the words, document mixtures distributions over the
    topics, the log-likelihood never falls, the top-words table names each topic's most
    probable words; LSA's topics are orthonormal."""
    phi = opened("lsa-plsa-output/plsa-topics.zarr")
    phi = next(iter(phi.data_vars.values())).values
    assert phi.shape == (3, 30) and (phi >= 0).all()
    np.testing.assert_allclose(phi.sum(axis=1), 1.0, atol=1e-12)
    theta = opened("lsa-plsa-output/mixtures.zarr")
    theta = next(iter(theta.data_vars.values())).values
    assert theta.shape == (4000, 3) and (theta >= 0).all()
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, atol=1e-9)
    m = metrics("lsa-plsa-output/top-words.json")
    assert np.all(np.diff(m["loglike"]) >= -1e-9 * np.abs(m["loglike"][1:]))
    assert len(m["loglike"]) == m["iterations"]
    assert len(m["top_words"]) == 3
    for i, words in enumerate(m["top_words"].values()):
        probs = list(words.values())
        assert probs == sorted(probs, reverse=True)
        assert probs[0] == pytest.approx(phi[i].max())
    V = opened("lsa-plsa-output/lsa-topics.zarr")
    V = next(iter(V.data_vars.values())).values
    np.testing.assert_allclose(V @ V.T, np.eye(3), atol=1e-8)
    # EM converges with the pipeline's own settings
    assert m["converged"] and m["iterations"] < 200
    # the CSR counts are counted like dense input, each stored byte once a pass: the plan's
    # passes of TruncatedSVD, PLSA's (its initial SVD's, one per iteration), one to write the
    # mixtures
    summary = metrics("lsa-plsa-output/run-summary.json")
    steps = {s["id"]: s["passes"] for s in summary["steps"]}
    plan = plan_pipeline(PIPELINES / "lsa-plsa.yaml", [*FIT["lsa-plsa"], *sets], force=True)
    lsa = plan.steps["lsa"].passes
    assert lsa is not None and steps["lsa"] == {"X": float(lsa)}
    assert steps["plsa"] == {"X": float(m["passes"])}
    assert m["passes"] == m["iterations"] + 3  # a randomized SVD of 3 passes starts the EM
    assert summary["passes"] == {"X": float(lsa + m["passes"] + 1)}
    assert summary["planned_passes"] == {"X": f"{lsa + 2}+"} == plan.passes()


def check_classify(sets: list[str]) -> None:
    """Held-out accuracy estimates the accuracy on new data of the population (QDA's training
    accuracy would not: with 30 x 30 covariances per class it is optimistic by ~0.15 here)."""
    plan = plan_pipeline(PIPELINES / "classify.yaml", [*FIT["classify"], *sets], resume=True)
    assert rows_role(plan.steps, plan.inputs, "nb_pred", None) == "held-out rows (not used to fit)"
    ds = opened("classify-output/predictions.zarr")
    spec = truth(plan.pipeline.params["data"])["spec"]
    fresh = demo_dataset(DemoSpec(**{**vars(spec), "n_samples": 20_000, "sample_seed": 99}))
    X_new, y_new = fresh["X"].values, fresh["y"].values
    for name, saved in (("naive_bayes", "gaussian-nb"), ("lda", "lda"), ("qda", "qda")):
        held_out = float((ds[name] == ds["truth"]).mean())
        on_new_data = ddr.load(f"classify-output/{saved}.model.zarr").score(X_new, y_new)
        assert abs(held_out - on_new_data) < 0.05, (name, held_out, on_new_data, sets)
        assert held_out > 1 / spec.n_classes + 0.1, (name, held_out)


def check_kde(sets: list[str]) -> None:
    m = metrics("kde-output/metrics.json")
    assert m["bandwidth"] == pytest.approx(4000 ** (-1 / 5), rel=1e-9)  # Scott, 1-D
    model = ddr.load("kde-output/kde.model.zarr")
    ds = opened("kde-output/density.zarr")
    pc1 = ds["pc1"].values.ravel()
    grid = np.linspace(pc1.min() - 5 * pc1.std(), pc1.max() + 5 * pc1.std(), 4001)
    mass = np.trapezoid(np.exp(model.score_samples(grid[:, None])), grid)
    assert mass == pytest.approx(1.0, abs=1e-3)
    np.testing.assert_allclose(
        ds["log_density"].values, model.score_samples(ds["pc1"].values), rtol=1e-10
    )


def check_cca(sets: list[str]) -> None:
    rho = np.asarray(metrics("cca-output/metrics.json")["correlations"])
    assert np.all(np.diff(rho) <= 1e-12) and np.all((rho >= 0) & (rho <= 1))
    assert rho[0] > 0.9
    ds = opened("cca-output/variates.zarr")
    x, y = ds["x_variates"].values, ds["y_variates"].values
    for i in range(rho.size):
        assert np.corrcoef(x[:, i], y[:, i])[0, 1] == pytest.approx(rho[i], abs=1e-6)


def check_kernel_cca(sets: list[str]) -> None:
    """Kernel CCA: correlations in [0, 1], falling, high for the shared signal, and the
    correlations of the variates written; the Nystroem maps and the CCA reload and give them."""
    rho = np.asarray(metrics("kernel-cca-output/metrics.json")["correlations"])
    assert np.all(np.diff(rho) <= 1e-12) and np.all((rho >= 0) & (rho <= 1))
    assert rho[0] > 0.9
    ds = opened("kernel-cca-output/variates.zarr")
    x, y = ds["x_variates"].values, ds["y_variates"].values
    for i in range(rho.size):
        assert np.corrcoef(x[:, i], y[:, i])[0, 1] == pytest.approx(rho[i], abs=1e-6)
    # the saved maps and CCA give the variates written (the scaler refitted: one pass)
    X = open_input("demo.zarr", "X").values[:, :15]
    phi = ddr.load("kernel-cca-output/nystroem-x.model.zarr")
    cca = ddr.load("kernel-cca-output/cca.model.zarr")
    scaled = ddr.StandardScaler().fit(X).transform(X[:500])
    assert phi.n_components_ == 300
    np.testing.assert_allclose(cca.transform(phi.transform(scaled)), x[:500], rtol=1e-8, atol=1e-8)


def check_apply_saved(sets: list[str]) -> None:
    ds = opened("applied-output/applied.zarr")
    new_acc = float((ds["label"] == ds["truth"]).mean())
    nb = ddr.load("models/gaussian-nb.model.zarr")
    X, y = open_input("demo.zarr", "X").values, open_input("demo.zarr", "y").values
    train_acc = nb.score(X, y)
    assert abs(new_acc - train_acc) < 0.06, (new_acc, train_acc)
    assert new_acc > 1 / 5 + 0.1
    assert read_attrs("demo-new.zarr")["ddr:demo"]["seed"] == 0  # the same population


def check_one_pass(sets: list[str]) -> None:
    m = metrics("one-pass-output/metrics.json")
    t = truth("demo.zarr")
    spec = t["spec"]
    total = t["explained_variance"].sum() + (spec.n_features - spec.rank) * t["noise_variance"]
    assert m["total_variance"] == pytest.approx(total, rel=0.1)
    np.testing.assert_allclose(m["nb_priors"], 1 / spec.n_classes, atol=0.04)
    summary = metrics("one-pass-output/run-summary.json")
    assert summary["passes"] == {"X": 1.0, "y": 1.0}


def check_gaussian_mixture(sets: list[str]) -> None:
    """Each fit converged, its passes are the sample and its iterations; the probabilities
    written are the saved 5-component model's on the PCA scores (the labels their argmax);
    its information criteria bound its bic(X) from above by at most twice the last gain;
    its log-likelihood is at least scikit-learn's from its own k-means++ start; the plot is
    drawn."""
    from sklearn.mixture import GaussianMixture

    m = metrics("gaussian-mixture-output/metrics.json")
    assert m["passes"] == m["iterations"] + 1 and m["iterations"] < 1000
    assert sum(m["weights"]) == pytest.approx(1.0, abs=1e-12)
    ds = opened("gaussian-mixture-output/components.zarr")
    proba, k5 = ds["proba5"].values, ds["k5"].values
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(k5, proba.argmax(axis=1))
    for k in range(2, 7):
        assert set(np.unique(ds[f"k{k}"].values)) <= set(range(k))
    gm = ddr.load("gaussian-mixture-output/gm5.model.zarr")
    X = open_input("demo.zarr", "X").values
    Z = ddr.PCA(10).fit(X).transform(X)  # the pipeline's scores, computed again
    np.testing.assert_allclose(gm.predict_proba(Z), proba, rtol=1e-6, atol=1e-9)
    ic = gm.information_criteria()
    assert ic["n_samples"] == X.shape[0] and ic["n_components"] == 5
    gap = 2 * gm.tol * abs(ic["log_likelihood"])
    assert gm.bic(Z) - 1e-6 <= ic["bic"] <= gm.bic(Z) + gap
    sk = GaussianMixture(5, covariance_type="tied", init_params="k-means++", random_state=0)
    assert gm.score(Z) >= sk.fit(Z).score(Z) - 1e-9
    with open("gaussian-mixture-output/bic.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def check_grid_search(sets: list[str]) -> None:
    """Each search read the data twice (planned and counted); the saved models are the
    searches' best, refitted on every row; PCA's held-out likelihood picks the rank of the
    demo's signal (10); the winners are scikit-learn's GridSearchCV's on the same folds (the
    stored float32 rows, in float64); the plots are PNGs."""
    from sklearn import decomposition as skdec
    from sklearn import naive_bayes as sknb
    from sklearn.model_selection import GridSearchCV, KFold

    from ddr.model_selection import HashKFold

    summary = metrics("grid-search-output/run-summary.json")
    steps = {s["id"]: s["passes"] for s in summary["steps"]}
    assert steps == {"nb": {"X": 2.0, "y": 2.0}, "pca": {"X": 2.0}, "lda": {"X": 2.0, "y": 2.0}}
    assert summary["planned_passes"] == {"X": "6", "y": "4"}
    best = metrics("grid-search-output/best.json")
    assert best["pca_best"] == {"n_components": 10}
    X = open_input("demo.zarr", "X").values.astype(np.float64)
    y = open_input("demo.zarr", "y").values
    plan = plan_pipeline(PIPELINES / "grid-search.yaml", sets, resume=True)
    params = plan.pipeline.params
    nb = GridSearchCV(sknb.GaussianNB(), {"var_smoothing": params["smoothing"]}, cv=KFold(5))
    nb.fit(X, y)
    assert best["nb_best"] == nb.best_params_
    assert best["nb_accuracy"] == pytest.approx(nb.best_score_, abs=1e-6)
    pca = GridSearchCV(
        skdec.PCA(), {"n_components": params["components"]}, cv=HashKFold(5, seed=0)
    ).fit(X)
    assert best["pca_loglik"] == pytest.approx(pca.best_score_, rel=1e-6)
    model = ddr.load("grid-search-output/gaussian-nb.model.zarr")
    assert model.var_smoothing == nb.best_params_["var_smoothing"]
    np.testing.assert_allclose(model.theta_, nb.best_estimator_.theta_, rtol=1e-6, atol=1e-9)
    assert ddr.load("grid-search-output/pca.model.zarr").n_components_ == 10
    with xr.open_zarr("grid-search-output/cv-lda.zarr") as ds:
        assert ds.sizes["candidate"] == len(params["shrinkage"])
        assert int(ds["rank_test_score"].values.min()) == 1
    for name in ("gaussian-nb", "pca", "lda"):
        with open(f"grid-search-output/search-{name}.png", "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def check_eof(sets: list[str]) -> None:
    """The maps are the known modes (correlation over the ocean points > 0.99), and equal to
    a numpy reference on the stacked masked array (time x ocean points, float64) to 1e-8:
    EOFs, variance fractions, variances, mean and the time series; land NaN in every map;
    coordinates and their attributes those of the input; the maps plot as xarray draws them."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    data = xr.open_zarr("gridded.zarr")
    eofs = opened("eof-output/eofs.zarr")
    pcs = opened("eof-output/pcs.zarr")["pcs"]
    comp = eofs["components"]
    assert comp.dims == ("component", "lat", "lon")
    assert comp.attrs["long_name"] == "components of PCA" and comp.attrs["ddr:estimator"] == "PCA"
    assert eofs["lat"].attrs["units"] == "degrees_north"
    np.testing.assert_array_equal(eofs["lat"].values, data["lat"].values)
    land = data["land"].values.astype(bool)
    assert np.isnan(comp.values[:, land]).all() and np.isfinite(comp.values[:, ~land]).all()
    assert np.isnan(eofs["mean"].values[land]).all()
    # the known modes: orthonormal over the ocean points, as the EOFs
    truth = data["true_components"].values[:, ~land]
    fitted = comp.values[:, ~land]
    k = truth.shape[0]
    corr = np.abs(np.sum(fitted[:k] * truth, axis=1))
    assert np.all(corr > 0.99), corr
    np.testing.assert_allclose(
        eofs["explained_variance"].values[:k], data["true_explained_variance"].values, rtol=0.15
    )
    # numpy reference: the stacked masked array, centred, its covariance's eigenvectors
    X = data["t2m"].values.reshape(data.sizes["time"], -1)[:, ~land.ravel()].astype(np.float64)
    mean = X.mean(axis=0)
    evals, evecs = np.linalg.eigh(np.cov(X, rowvar=False))
    evals, evecs = evals[::-1], evecs[:, ::-1]
    n = fitted.shape[0]
    ref = evecs[:, :n].T
    ref *= np.sign(np.sum(ref * fitted, axis=1))[:, None]  # the signs are the fit's choice
    np.testing.assert_allclose(fitted, ref, atol=1e-8)
    np.testing.assert_allclose(eofs["explained_variance"].values, evals[:n], rtol=1e-8)
    np.testing.assert_allclose(
        eofs["explained_variance_ratio"].values, evals[:n] / evals.sum(), rtol=1e-8
    )
    np.testing.assert_allclose(eofs["mean"].values[~land], mean, rtol=1e-8)
    assert pcs.dims == ("time", "component")
    np.testing.assert_array_equal(pcs["time"].values, data["time"].values)
    scores = (X - mean) @ fitted.T
    # the time series are stored in the input's dtype (float32): to its precision
    np.testing.assert_allclose(pcs.values, scores, rtol=1e-5, atol=1e-5 * np.abs(scores).max())
    grid = comp.plot(col="component")  # what the page promises
    assert len(grid.axs.ravel()) >= n
    with open("eof-output/eof-maps.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    summary = metrics("eof-output/run-summary.json")
    # one pass to fit, one to write the time series (the first time step, the mask, is
    # read while planning and handed to the fit)
    assert summary["passes"] == {"T": pytest.approx(2.0, abs=0.01)}


CHECKS = {
    "quickstart": check_quickstart,
    "randomized-pca-wide": check_randomized,
    "kernel-pca-nystrom": check_kernel_pca,
    "ppca-missing": check_ppca,
    "factor-analysis": check_factor_analysis,
    "classify": check_classify,
    "kde": check_kde,
    "cca": check_cca,
    "kernel-cca": check_kernel_cca,
    "apply-saved": check_apply_saved,
    "one-pass-statistics": check_one_pass,
    "lsa-plsa": check_lsa_plsa,
    "kmeans": check_kmeans,
    "gaussian-mixture": check_gaussian_mixture,
    "grid-search": check_grid_search,
    "eof": check_eof,
}


def test_every_example_has_a_check_and_a_header():
    for name in example_names():
        assert header_commands(name), f"{name}.yaml has no `ddr ...` commands in its header"
        assert name in CHECKS or name == "fit-once", name  # fit-once: checked by apply-saved


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example_gives_sensible_numbers(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ran: dict = {}

    def record(check):
        def wrapped(sets):
            check(sets)
            ran[name] = True

        return wrapped

    run_header(name, {name: record(CHECKS[name])})
    assert ran.get(name), f"the header of {name}.yaml never runs it"


def test_one_pass_header_plan_is_true(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    checks: dict = {}
    run_header("one-pass-statistics", checks)
    (plan_text,) = checks["plan-output"]
    assert "passes over inputs: X: 1, y: 1" in plan_text
