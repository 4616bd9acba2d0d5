"""Grid search as a pipeline op (issue 31 item 2): a fit step's ``search:`` block.

Reference tests: the pipeline's cv_results (the ``cv_results`` output) equal
ddr.model_selection.GridSearchCV's and scikit-learn's GridSearchCV on the same KFold (or
HashKFold) folds to 1e-10 on float64 data; the passes the run counts are 2 per search (and
planned so); the saved model is ``best_estimator_`` (ddr.load); the plot is a PNG whose
panels are the grid's parameters; a rerun keeps what is complete, but searches again when
the search's results are to be written; ``--update`` searches again over every row and the
plan says so; every bad configuration is refused before any data is read, at its line and
column.
"""

from __future__ import annotations

import re
import warnings

import dask
import numpy as np
import pytest
import xarray as xr
import zarr
from pipeline_support import ReadCounter
from sklearn import decomposition as skdec
from sklearn import discriminant_analysis as skda
from sklearn import naive_bayes as sknb
from sklearn.model_selection import GridSearchCV as SkGridSearchCV
from sklearn.model_selection import KFold

import ddr
from ddr.demo import DemoSpec, write_demo_data
from ddr.model_selection import GridSearchCV, HashKFold
from ddr.pipeline import PipelineError, plan_pipeline, run_plan
from ddr.pipeline.outputs.plots.search import draw_search, parameter_axis, profile

pytest.importorskip("matplotlib")

TOL = 1e-10

PIPELINE = """\
ddr: 1
name: searches
inputs:
  X: {path: data.zarr, array: X}
  y: {path: data.zarr, array: y}
steps:
  nb:
    op: GaussianNB.fit
    inputs: {X: X, y: y}
    search:
      param_grid: {var_smoothing: [1.0e-9, 1.0e-3, 0.05, 0.3, 1.0]}
      cv: 5
  pca:
    op: PCA.fit
    inputs: {X: X}
    search:
      param_grid: {n_components: [1, 2, 3, 4, 5]}
      cv: {hash_folds: 4, seed: 3}
      scoring: mean_log_likelihood
  lda:
    op: LinearDiscriminantAnalysis.fit
    inputs: {X: X, y: y}
    with: {solver: lsqr}
    search:
      param_grid: {shrinkage: [0.001, 0.1, 0.5, auto]}
      cv: 5
      scoring: accuracy
outputs:
  - {kind: model, from: nb, path: out/nb.model.zarr}
  - {kind: model, from: pca, path: out/pca.model.zarr}
  - {kind: model, from: lda, path: out/lda.model.zarr}
  - {kind: plot, plot: search, from: nb.search, path: out/nb.png}
  - {kind: plot, plot: search, from: lda.search, path: out/lda.png}
  - {kind: cv_results, from: nb.search, path: out/nb-cv.zarr}
  - {kind: cv_results, from: pca.search, path: out/pca-cv.zarr}
  - {kind: cv_results, from: lda.search, path: out/lda-cv.zarr}
  - {kind: metrics, from: {nb: nb.best_params_, score: nb.best_score_}, path: out/best.json}
"""

#: the searches of PIPELINE: ddr's estimator, scikit-learn's, the grid, the folds
SEARCHES = {
    "nb": (
        ddr.GaussianNB(), sknb.GaussianNB(), {"var_smoothing": [1e-9, 1e-3, 0.05, 0.3, 1.0]},
        5, None,
    ),
    "pca": (
        ddr.PCA(), skdec.PCA(), {"n_components": [1, 2, 3, 4, 5]}, HashKFold(4, seed=3),
        "mean_log_likelihood",
    ),
    "lda": (
        ddr.LinearDiscriminantAnalysis(solver="lsqr"),
        skda.LinearDiscriminantAnalysis(solver="lsqr"),
        {"shrinkage": [0.001, 0.1, 0.5, "auto"]}, 5, "accuracy",
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """PIPELINE run once on float64 data of 600 rows in 6 chunks (threads), its summary and
    the data in memory."""
    here = tmp_path_factory.mktemp("search")
    spec = DemoSpec(600, 6, 3, 3, 100, dtype="float64", seed=0)
    with dask.config.set(scheduler="threads"):
        write_demo_data(here / "data.zarr", spec)
    (here / "p.yaml").write_text(_absolute(PIPELINE, here))
    with ReadCounter() as counter, dask.config.set(scheduler="threads"):
        plan = plan_pipeline(here / "p.yaml")
        summary = run_plan(plan)
    X = np.asarray(ddr.io.open_input(here / "data.zarr", "X"))
    y = np.asarray(ddr.io.open_input(here / "data.zarr", "y"))
    return here, plan, summary, counter, X, y


def _absolute(text, here):
    """The pipeline with its paths under ``here`` (module fixtures cannot change the
    working directory)."""
    return text.replace("path: data.zarr", f"path: {here}/data.zarr").replace(
        "path: out/", f"path: {here}/out/"
    )


def _results(path):
    with xr.open_zarr(path) as ds:
        return ds.load()


# ------------------------------------------------------------------ reference tests
@pytest.mark.parametrize("sid", list(SEARCHES))
def test_cv_results_equal_ddr_and_scikit_learn_searches(ran, sid):
    here, *_, X, y = ran
    est, ref, grid, cv, scoring = SEARCHES[sid]
    assert X.dtype == np.float64
    ours = GridSearchCV(est, grid, cv=cv, scoring=scoring).fit(X, y)
    sk_cv = KFold(cv) if isinstance(cv, int) else cv
    # scikit-learn's PCA.score is the mean PPCA log-likelihood (it has no such scorer name)
    sk_scoring = None if scoring == "mean_log_likelihood" else scoring
    theirs = SkGridSearchCV(ref, grid, cv=sk_cv, scoring=sk_scoring).fit(X, y)
    ds = _results(here / "out" / f"{sid}-cv.zarr")
    assert ds.sizes == {"candidate": len(theirs.cv_results_["params"])}
    n_splits = ours.n_splits_
    for key in [f"split{k}_test_score" for k in range(n_splits)] + [
        "mean_test_score",
        "std_test_score",
    ]:
        np.testing.assert_allclose(ds[key].values, ours.cv_results_[key], rtol=0, atol=TOL)
        np.testing.assert_allclose(ds[key].values, theirs.cv_results_[key], rtol=0, atol=TOL)
    np.testing.assert_array_equal(
        ds["rank_test_score"].values, theirs.cv_results_["rank_test_score"]
    )
    assert ds.attrs["params"] == theirs.cv_results_["params"]
    about = ds.attrs["ddr:cv_results"]
    assert about["best_index"] == theirs.best_index_ == ours.best_index_
    assert about["best_params"] == theirs.best_params_
    assert abs(about["best_score"] - theirs.best_score_) <= TOL
    assert about["n_splits"] == n_splits and "2 passes" in about["search"]
    # the table reads as scikit-learn's, a parameter column per grid parameter
    (name,) = grid
    column = ds[f"param_{name}"].values
    values = grid[name]
    if all(isinstance(v, (int, float)) for v in values):
        np.testing.assert_array_equal(column, values)
    else:
        assert list(column) == [str(v) for v in values]


@pytest.mark.parametrize("sid", list(SEARCHES))
def test_the_saved_model_is_the_best_estimator(ran, sid):
    here, *_, X, y = ran
    est, _, grid, cv, scoring = SEARCHES[sid]
    best = GridSearchCV(est, grid, cv=cv, scoring=scoring).fit(X, y).best_estimator_
    saved = ddr.load(here / "out" / f"{sid}.model.zarr")
    assert type(saved) is type(best)
    assert saved.get_params() == best.get_params()
    fitted = [k for k in vars(best) if k.endswith("_") and not k.startswith("_")]
    assert fitted
    for key in fitted:
        a, b = getattr(saved, key), getattr(best, key)
        if isinstance(b, np.ndarray) and b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=key)
        elif isinstance(b, (np.ndarray, list, tuple)):
            np.testing.assert_array_equal(a, b, err_msg=key)
    # refitted from the merge of all folds: the model of every row
    np.testing.assert_allclose(saved.score(X, y), best.score(X, y), rtol=1e-12)


def test_each_search_is_two_passes_planned_and_counted(ran):
    here, plan, summary, counter, *_ = ran
    for sid in SEARCHES:
        step = plan.steps[sid]
        assert step.passes == 2 and step.search.n_passes == 2 and step.one_pass is False
    assert plan.steps["nb"].search.n_splits == 5 and plan.steps["nb"].search.n_candidates == 5
    assert plan.steps["lda"].search.n_statistics == 2  # "auto" adds the fourth moments
    assert [p.kind for p in plan.phases] == ["search"] * 3
    assert plan.passes() == {"X": "6", "y": "4"}
    text = plan.format()
    assert "nb: GaussianNB.fit(X=X, y=y)  (grid search by its own score, contiguous folds: " in text
    assert "5 folds x 5 candidates: 2 passes over the data" in text
    assert (
        "grid search by mean_log_likelihood, hashed folds, seed 3: 4 folds x 5 candidates" in text
    )
    assert "1. search  two-pass grid search of nb; reads" in text
    data = plan.to_dict()["steps"]["lda"]["search"]
    assert data["n_passes"] == 2 and data["n_candidates"] == 4 and data["cv"] == 5
    # what the run measured: two passes per search, the same as an independent count
    steps = {s.id: s.passes for s in summary.steps}
    assert steps == {"nb": {"X": 2.0, "y": 2.0}, "pca": {"X": 2.0}, "lda": {"X": 2.0, "y": 2.0}}
    assert summary.passes == {"X": 6.0, "y": 4.0}
    assert counter.passes(here / "data.zarr", "X") == pytest.approx(6.0)
    assert counter.passes(here / "data.zarr", "y") == pytest.approx(4.0)
    note = next(s for s in summary.steps if s.id == "nb").note
    assert note.startswith("5 folds x 5 candidates: 2 passes")


def test_the_best_results_are_metrics(ran):
    import json

    here, *_, X, y = ran
    est, _, grid, cv, _ = SEARCHES["nb"]
    ours = GridSearchCV(est, grid, cv=cv).fit(X, y)
    m = json.loads((here / "out" / "best.json").read_text())
    assert m["nb"] == ours.best_params_
    assert m["score"] == pytest.approx(ours.best_score_, abs=TOL)


# ----------------------------------------------------------------------- the plot
def test_the_plot_is_a_png_with_a_panel_per_parameter(ran):
    here, *_, X, y = ran
    for name in ("nb", "lda"):
        assert (here / "out" / f"{name}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    search = GridSearchCV(
        ddr.LinearDiscriminantAnalysis(solver="lsqr"),
        {"shrinkage": [0.001, 0.01, 0.1], "tol": [1e-4, 1e-2]},
        cv=3,
    ).fit(X, y)
    fig = draw_search(search)
    shrink, tol = fig.axes
    assert shrink.get_xlabel() == "shrinkage (log scale)" and shrink.get_xscale() == "log"
    assert tol.get_xlabel() == "tol (log scale)"
    # the line through the best: mean scores with the std over the folds as error bars
    res, best = search.cv_results_, search.best_index_
    line = profile(res["params"], best, "shrinkage")
    assert len(line) == 3 and best in line
    (bars,) = shrink.containers
    x, y_ = bars.lines[0].get_data()
    order = sorted(line, key=lambda i: res["params"][i]["shrinkage"])
    np.testing.assert_allclose(y_, res["mean_test_score"][order])
    np.testing.assert_allclose(x.astype(float), [res["params"][i]["shrinkage"] for i in order])
    segments = bars.lines[2][0].get_segments()  # one vertical bar per point: mean +- std
    np.testing.assert_allclose(
        [s[1, 1] - s[0, 1] for s in segments], 2 * res["std_test_score"][order], rtol=1e-12
    )
    star = [ln for ln in shrink.lines if ln.get_marker() == "*"]
    assert star and star[0].get_ydata()[0] == res["mean_test_score"][best]
    assert "best:" in fig.texts[-1].get_text()


def test_a_candidate_without_a_score_is_said_not_drawn():
    from sklearn.exceptions import FitFailedWarning

    X = np.random.default_rng(0).normal(size=(90, 4))
    with pytest.warns(FitFailedWarning):  # 9 components of 4 features: scored NaN
        search = GridSearchCV(ddr.PCA(), {"n_components": [1, 2, 9]}, cv=3).fit(X)
    fig = draw_search(search)
    (ax,) = fig.axes
    (bars,) = ax.containers
    np.testing.assert_array_equal(bars.lines[0].get_data()[0].astype(float), [1, 2])
    assert "no score (the fit or scoring failed): n_components=9" in fig.texts[-1].get_text()


def test_parameter_axes():
    assert parameter_axis([1e-9, 1e-3, 1.0]) == ("log", [1e-9, 1e-3, 1.0])
    assert parameter_axis([3, 1, 2, 2]) == ("linear", [1, 2, 3])
    assert parameter_axis([0.0, 0.5, 1.0]) == ("linear", [0.0, 0.5, 1.0])  # zero: no log
    assert parameter_axis([0.1, 0.5, "auto", None]) == ("category", [0.1, 0.5, "auto", None])
    assert parameter_axis([True, False]) == ("category", [True, False])


# --------------------------------------------------------- reruns, and --update
def test_a_rerun_loads_the_model_unless_the_search_is_wanted(ran):
    here, *_ = ran
    plan = plan_pipeline(here / "p.yaml", resume=True)
    assert all(o.action == "skip" for o in plan.outputs)
    (here / "out" / "nb.png").unlink()  # the plot needs the search: nb is searched again
    plan = plan_pipeline(here / "p.yaml", resume=True)
    assert plan.steps["nb"].action == "run" and plan.steps["nb"].passes == 2
    assert plan.steps["lda"].action == "skip"
    with dask.config.set(scheduler="threads"):
        run_plan(plan)
    assert (here / "out" / "nb.png").read_bytes().startswith(b"\x89PNG")


def test_another_grid_is_another_search(ran):
    here, *_ = ran
    text = (here / "p.yaml").read_text().replace("0.05, 0.3, 1.0]", "0.05, 0.3]")
    (here / "p2.yaml").write_text(text)
    plan = plan_pipeline(here / "p2.yaml", resume=True)
    assert plan.steps["nb"].action == "run" and plan.steps["lda"].action == "skip"
    out = next(o for o in plan.outputs if o.path.endswith("nb.model.zarr"))
    assert out.action == "overwrite" and "nb.search" in out.reason, out.reason


def test_an_update_searches_again_over_every_row(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        write_demo_data(tmp_path / "data.zarr", DemoSpec(400, 4, 2, 3, 100, seed=0))
    text = (
        PIPELINE.split("  pca:")[0] + "outputs:\n  - {kind: model, from: nb, path: out/nb.zarr}\n"
    )
    (tmp_path / "p.yaml").write_text(text)
    with dask.config.set(scheduler="threads"):
        run_plan(plan_pipeline(tmp_path / "p.yaml"))
    group = zarr.open_group(tmp_path / "data.zarr", mode="r+")
    X, y = group["X"], group["y"]
    rng = np.random.default_rng(1)
    X.resize((450, 4))
    X[400:] = rng.normal(size=(50, 4)).astype(X.dtype)
    y.resize((450,))
    y[400:] = rng.integers(0, 3, 50).astype(y.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        zarr.consolidate_metadata(tmp_path / "data.zarr")
    plan = plan_pipeline(tmp_path / "p.yaml", update=True)
    assert plan.state is not None and "nb" not in plan.state.recorded
    assert "step nb: reads every row (a grid search: searched again over every row" in plan.format()
    with dask.config.set(scheduler="threads"):
        summary = run_plan(plan)
    nb = next(s for s in summary.steps if s.id == "nb")
    assert nb.passes == {"X": 2.0, "y": 2.0}
    Xa = np.asarray(ddr.io.open_input(tmp_path / "data.zarr", "X"))
    ya = np.asarray(ddr.io.open_input(tmp_path / "data.zarr", "y"))
    assert Xa.shape == (450, 4)
    best = GridSearchCV(ddr.GaussianNB(), SEARCHES["nb"][2], cv=5).fit(Xa, ya).best_estimator_
    np.testing.assert_allclose(ddr.load(tmp_path / "out" / "nb.zarr").theta_, best.theta_)


CHAINED = """\
ddr: 1
name: chained
inputs:
  X: {path: data.zarr, array: X}
  y: {path: data.zarr, array: y}
steps:
  pca:
    op: PCA.fit_transform
    inputs: {X: X}
    search: {param_grid: {n_components: [1, 2, 3]}, scoring: mean_log_likelihood, cv: 3}
  nb:
    op: GaussianNB.fit
    inputs: {X: pca.data, y: y}
    search: {param_grid: {var_smoothing: [1.0e-9, 0.1]}, cv: 3}
  pred: {op: GaussianNB.predict, inputs: {model: nb, X: pca.data}}
outputs:
  - {kind: zarr, from: {scores: pca.data, pred: pred}, path: out/scores.zarr}
  - {kind: metrics, from: {k: pca.best_params_}, path: out/k.json}
"""


def test_a_searched_transform_feeds_another_search(tmp_path):
    """PCA's scores (their width the best n_components, known once searched) are searched
    again by GaussianNB: 2 passes each, planned as measured."""
    import json

    with dask.config.set(scheduler="threads"):
        write_demo_data(tmp_path / "data.zarr", DemoSpec(300, 5, 2, 3, 100, seed=0))
    (tmp_path / "p.yaml").write_text(_absolute(CHAINED, tmp_path))
    plan = plan_pipeline(tmp_path / "p.yaml")
    assert plan.steps["nb"].passes == 2 and plan.steps["nb"].search is None  # width unknown
    assert "nb: GaussianNB.fit(X=pca.data, y=y)  (grid search by its own score" in plan.format()
    with dask.config.set(scheduler="threads"):
        summary = run_plan(plan)
    planned = {k: float(v) for k, v in plan.passes().items()}
    assert summary.passes == planned == {"X": 5.0, "y": 2.0}  # 2 + 2 + the scores written
    k = json.loads((tmp_path / "out" / "k.json").read_text())["k"]["n_components"]
    X = np.asarray(ddr.io.open_input(tmp_path / "data.zarr", "X"))
    best = GridSearchCV(ddr.PCA(), {"n_components": [1, 2, 3]}, cv=3).fit(X)
    assert k == best.best_params_["n_components"]
    scores = _results(tmp_path / "out" / "scores.zarr")["scores"].values
    np.testing.assert_allclose(scores, best.transform(X), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ bad configs
BASE = """\
ddr: 1
name: bad
inputs:
  X: {path: data.zarr, array: X}
  y: {path: data.zarr, array: y}
steps:
  nb:
    op: OP
    inputs: INPUTS
    WITH
    search: SEARCH
outputs:
  - OUTPUT
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    here = tmp_path_factory.mktemp("bad")
    with dask.config.set(scheduler="threads"):
        write_demo_data(here / "data.zarr", DemoSpec(120, 4, 2, 3, 40, seed=0))
    return here


def _refused(here, *, search, op="GaussianNB.fit", with_="", inputs="{X: X, y: y}",
             output="{kind: model, from: nb, path: out/nb.zarr}", before=""):  # fmt: skip
    text = (
        BASE.replace("steps:\n", "steps:\n" + before)
        .replace("OP", op)
        .replace("INPUTS", inputs)
        .replace("WITH", f"with: {with_}" if with_ else "")
        .replace("SEARCH", search)
        .replace("OUTPUT", output)
    )
    (here / "bad.yaml").write_text(_absolute(text, here))
    with pytest.raises(PipelineError) as err:
        plan_pipeline(here / "bad.yaml")
    assert not (here / "out").exists()  # refused before anything was read or written
    return str(err.value)


BAD = {
    "unknown parameter": (
        'var_smothing',
        dict(search="{param_grid: {var_smothing: [1.0e-9]}}"),
        r"GaussianNB has no parameter 'var_smothing' to search \(did you "
        r"mean 'var_smoothing'\?\)",
    ),
    "searched and set": (
        'var_smoothing',
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}}", with_="{var_smoothing: 0.1}"),
        r"'var_smoothing' is both set in with: and searched",
    ),
    "a value the class refuses": (
        '-1.0',
        dict(search="{param_grid: {var_smoothing: [1.0e-9, -1.0]}}"),
        r"var_smoothing=-1\.0: The 'var_smoothing' parameter of GaussianNB "
        r"must be a float in the range \[0(\.0)?, inf\)",
    ),
    "a value of the wrong type": (
        'two',
        dict(search="{param_grid: {n_components: [2, two]}}", op="PCA.fit", inputs="{X: X}"),
        r"n_components=\'two\': The 'n_components' parameter of PCA must be",
    ),
    "more components than features": (
        '9]',
        dict(search="{param_grid: {n_components: [2, 9]}}", op="PCA.fit", inputs="{X: X}"),
        r"n_components=9 is more than .* = 4 of the data",
    ),
    "not a fit": (
        None,
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}}", op="GaussianNB.predict",
             inputs="{model: nb0, X: X}",
             before="  nb0: {op: GaussianNB.fit, inputs: {X: X, y: y}}\n"),
        r"only a fit step \(Estimator\.fit\) can search a grid; GaussianNB\.predict is not one",
    ),
    "a fit of several passes": (
        '{',
        dict(search="{param_grid: {n_clusters: [2, 3]}}", op="KMeans.fit", inputs="{X: X}"),
        r"KMeans\.fit: candidate \{n_clusters: 2\}: KMeans's fit is not one "
        r"pass of mergeable statistics",
    ),
    "a solver of several passes": (
        '{',
        dict(search="{param_grid: {n_components: [1, 2]}}", op="PCA.fit", inputs="{X: X}",
             with_="{svd_solver: randomized}"),
        r"candidate \{n_components: 1\}: PCA's fit is not one pass of mergeable statistics",
    ),
    "a scoring the estimator cannot give": (
        '{',
        dict(search="{param_grid: {n_components: [1, 2]}, scoring: accuracy}", op="PCA.fit",
             inputs="{X: X}"),
        r"PCA\.fit: scoring='accuracy' needs PCA\.predict",
    ),
    "an unknown scoring": (
        'roc_auc',
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}, scoring: roc_auc}"),
        r"scoring must be one of \[.*'accuracy'.*\] \(or left out: the estimator's own score\); "
        r"got 'roc_auc'",
    ),
    "one fold": (
        '1}',
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}, cv: 1}"),
        r"a search needs at least 2 folds; got 1",
    ),
    "a negative seed": (
        '-1',
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}, cv: {hash_folds: 3, seed: -1}}"),
        r"seed: must be greater than or equal to 0; got -1",
    ),
    "more folds than rows": (
        '{',
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}, cv: 121}"),
        r"GaussianNB\.fit: Cannot have number of splits n_splits=121 greater "
        r"than the number of samples: n_samples=120",
    ),
    "an empty list of values": (
        '[]',
        dict(search="{param_grid: {var_smoothing: []}}"),
        r"var_smoothing: must not be empty",
    ),
    "a search plot of a model": (
        None,
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}}",
             output="{kind: plot, plot: search, from: nb, path: out/s.png}"),
        r"a search plot is drawn from a searched fit step's search \(e\.g\. nb\.search, a fit "
        r"step with search:\); 'nb' is a model",
    ),
    "cv_results of a model": (
        None,
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}}",
             output="{kind: cv_results, from: nb, path: out/cv.zarr}"),
        r"cv_results are written from a searched fit step's search .*; 'nb' is a model",
    ),
    "a search as metrics": (
        None,
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}}",
             output="{kind: metrics, from: [nb.search], path: out/m.json}"),
        r"'nb\.search' is a grid search; name its small results \(nb\.best_params_, "
        r"nb\.best_score_, nb\.best_index_\), or write its cv_results with kind: cv_results",
    ),
    "a search as arrays": (
        None,
        dict(search="{param_grid: {var_smoothing: [1.0e-9]}}",
             output="{kind: zarr, from: nb.search, path: out/z.zarr}"),
        r"'nb\.search' is a grid search; write its results with kind: cv_results",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_searches_are_refused_before_reading(small, case):
    """Each refused with its message, at the line and column of what is wrong (the value, or
    the search block when it is the search as a whole)."""
    token, kwargs, pattern = BAD[case]
    message = _refused(small, **kwargs)
    assert re.search(pattern, message), message
    if token is not None:  # line 11: the search block, which starts at column 13
        col = 13 + kwargs["search"].index(token)
        assert f"bad.yaml:11:{col}: " in message, message


def test_a_step_without_search_has_no_search_output(small):
    message = _refused(
        small,
        search="null",
        output="{kind: plot, plot: search, from: nb.search, path: out/s.png}",
    )
    assert "'nb.search': step nb (GaussianNB.fit) has no output 'search'" in message
