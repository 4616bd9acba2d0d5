"""What Jupyter shows (issue 28): a fitted estimator as scikit-learn's estimator diagram
followed by what ddr knows of the fit (the data, its passes, the statistics it was solved
from, components, iterations), and a plan as ``ddr plan`` prints it, as HTML tables."""

from __future__ import annotations

import html
import re

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn import config_context
from sklearn.base import is_classifier
from sklearn.utils import get_tags

import ddr
from ddr.pipeline import plan_pipeline
from ddr.testing import exported_estimators, suite_instance


def small_data():
    rng = np.random.default_rng(3)
    X = np.abs(rng.standard_normal((120, 3))).round(0) + np.arange(120)[:, None] % 3
    return X, np.arange(120) % 3


def fitted(cls: type):
    X, y = small_data()
    est = suite_instance(cls)
    if is_classifier(est):
        return est.fit(X, y)
    if get_tags(est).target_tags.required:  # a second view
        return est.fit(X, X[:, ::-1] + np.arange(120)[:, None] % 2)
    return est.fit(X)


@pytest.mark.parametrize("cls", exported_estimators(), ids=lambda c: c.__name__)
def test_every_estimator_shows_the_diagram_and_then_the_fit(cls):
    unfitted = suite_instance(cls)._repr_html_()
    assert "sk-top-container" in unfitted and cls.__name__ in unfitted
    assert "ddr: the fit" not in unfitted
    shown = fitted(cls)._repr_html_()
    assert "sk-top-container" in shown and "Fitted" in shown  # scikit-learn's diagram
    assert "ddr: the fit" in shown and "fitted on</th>" in shown
    assert "3 features" in shown


def test_the_fit_says_its_data_passes_statistics_and_components():
    rng = np.random.default_rng(0)
    X = da.from_array(rng.normal(size=(400, 20)), chunks=(100, -1))
    with dask.config.set(scheduler="sync"):
        pca = ddr.PCA(n_components=3, svd_solver="randomized", iterated_power=2).fit(X)
        cov = ddr.PCA(n_components=2).fit(X)
    facts = dict(ddr.base.fitted_facts(pca))
    assert facts["fitted on"] == "400 samples x 20 features"
    assert facts["passes over the data"] == str(pca.n_passes_) and pca.n_passes_ > 1
    assert facts["components"] == "3"
    facts = dict(ddr.base.fitted_facts(cov))
    assert facts["passes over the data"] == "1"
    assert facts["statistics"] == "moments_: Moments(full, n_features=20, count=400.0)"
    assert facts["mergeable"].startswith("yes")
    shown = cov._repr_html_()
    assert html.escape("Moments(full, n_features=20, count=400.0)") in shown
    # Jupyter asks for the mime bundle first: the same HTML (but for its element ids)
    bundled = cov._repr_mimebundle_()["text/html"]
    assert re.sub(r"-id-\d+", "", bundled) == re.sub(r"-id-\d+", "", shown)
    with config_context(display="text"):  # scikit-learn's switch still works
        assert "text/html" not in cov._repr_mimebundle_()


def test_em_says_its_iterations():
    X, _ = small_data()
    ppca = ddr.PPCA(n_components=1, init="random", max_iter=500).fit(X)
    facts = dict(ddr.base.fitted_facts(ppca))
    assert facts["iterations"] == str(ppca.n_iter_)


def test_a_plan_shows_what_ddr_plan_prints(tmp_path, monkeypatch):
    from pipeline_support import PIPELINES

    monkeypatch.chdir(tmp_path)
    ddr.demo.write_demo(
        "demo.zarr",
        ddr.demo.demo_spec("dense", n_samples=800, n_features=6, rank=3, chunk_rows=100),
    )
    plan = plan_pipeline(
        PIPELINES / "classify.yaml", ["train_end=600", "test_start=600", "out=o<&>"]
    )
    shown = plan._repr_html_()
    text = plan.format()
    for caption in ("inputs", "steps", "phases", "outputs"):
        assert f'<caption style="text-align: left"><b>{caption}</b>' in shown
    cells = re.findall(r"<td[^>]*>(.*?)</td>", shown)
    # every step as ddr plan prints it; every output's action, path and reason
    for sid in plan.steps:
        assert html.escape(text.split(f"  {sid}: ", 1)[1].split("\n")[0].strip()) in cells
    for out in plan.outputs:
        assert html.escape(out.path.rsplit("/", 1)[-1]) in " ".join(cells)
        assert out.action in cells and html.escape(out.reason) in cells
    assert "o&lt;&amp;&gt;" in shown and "o<&>" not in shown  # escaped
    # the shares of the stored arrays and the passes: train + test rows are one pass
    assert ["X", "demo.zarr [X]", "sample: 600, feature: 6", "float32", "0.75"] == cells[:5]
    assert "<b>passes over inputs</b>: X, X_test: 1, y, y_test: 1" in shown
