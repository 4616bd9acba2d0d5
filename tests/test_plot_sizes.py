"""``plot: sizes``: the bars are the model's rows per cluster (asked of the estimator's tags),
labelled with their counts and shares; a pipeline writes the PNG without a pass of its own and
refuses, before reading data, a model that has no clusters."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from sklearn.datasets import make_blobs

import ddr
from ddr.demo import DemoSpec, write_demo_data
from ddr.pipeline import PipelineError, plan_pipeline, run_plan
from ddr.pipeline.outputs.plots import draw_sizes
from ddr.pipeline.outputs.plots.sizes import cluster_sizes
from ddr.tags import get_ddr_tags

pytest.importorskip("matplotlib")


def _texts(fig) -> list[str]:
    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text()]


@pytest.fixture(scope="module")
def fitted():
    # clusters of 400, 150 and 50 rows, far apart: the fit finds them exactly
    X, _ = make_blobs([400, 150, 50], 3, cluster_std=0.5, random_state=0)
    return ddr.KMeans(3, random_state=0).fit(X)


def test_the_bars_are_the_rows_per_cluster(fitted):
    km = fitted
    counts = np.bincount(km.labels_, minlength=3)
    assert sorted(counts) == [50, 150, 400]
    np.testing.assert_array_equal(cluster_sizes(km), counts)
    fig = draw_sizes(km)
    (ax,) = fig.axes
    np.testing.assert_array_equal([b.get_height() for b in ax.patches], counts)
    np.testing.assert_array_equal([b.get_x() + b.get_width() / 2 for b in ax.patches], [0, 1, 2])
    texts = _texts(fig)
    for c in counts:  # each bar's count and share of the rows
        assert f"{c:,}\n{c / 600:.1%}" in texts
    small, large = int(np.argmin(counts)), int(np.argmax(counts))
    assert ax.get_title() == (
        f"3 clusters, 600 rows; smallest: cluster {small} (50), largest: cluster {large} (400)"
    )
    assert fig.texts[0].get_text() == "KMeans: rows per cluster"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("cluster", "training rows")


def test_sizes_are_asked_of_the_class():
    assert get_ddr_tags(ddr.KMeans).cluster_sizes is not None
    assert get_ddr_tags(ddr.PCA).cluster_sizes is None
    with pytest.raises(ValueError, match=r"declares its cluster sizes.*PCA declares none"):
        draw_sizes(ddr.PCA(2).fit(np.random.default_rng(0).normal(size=(20, 3))))


def test_expected_rows_of_a_soft_model_are_drawn_with_a_decimal():
    class Soft:  # a mixture's weights times its rows, declared through the tags
        def __ddr_tags__(self):
            tags = get_ddr_tags(ddr.KMeans)
            tags.cluster_sizes = lambda model: np.array([12.25, 7.75])
            return tags

    fig = draw_sizes(Soft(), "mixture")
    (ax,) = fig.axes
    assert [b.get_height() for b in ax.patches] == [12.25, 7.75]
    assert ax.get_ylabel() == "training rows (expected)"
    assert "12.2\n61.3%" in _texts(fig)


PIPELINE = """\
ddr: 1
name: sizes
inputs:
  X: {path: small.zarr, array: X}
steps:
  km: {op: KMeans.fit, inputs: {X: X}, with: {n_clusters: 4, random_state: 0}}
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}
outputs:
  - {kind: plot, plot: sizes, from: FROM, path: out/sizes.png}
  - {kind: model, from: km, path: out/km.model.zarr}
"""


@pytest.fixture
def here(tmp_path, monkeypatch):
    with dask.config.set(scheduler="threads"):
        write_demo_data(tmp_path / "small.zarr", DemoSpec(900, 5, 3, 4, 300, seed=0))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_pipeline_writes_the_png_from_the_fitted_model(here):
    (here / "p.yaml").write_text(PIPELINE.replace("FROM", "km"))
    with dask.config.set(scheduler="threads"):
        summary = run_plan(plan_pipeline(here / "p.yaml"))
    assert summary.status == "ok"
    png = (here / "out" / "sizes.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    km = ddr.load(here / "out" / "km.model.zarr")
    X = np.asarray(ddr.io.open_input(here / "small.zarr", "X"))
    np.testing.assert_array_equal(km.cluster_sizes_, np.bincount(km.predict(X), minlength=4))


def test_a_model_without_clusters_is_refused_before_reading(here):
    (here / "p.yaml").write_text(PIPELINE.replace("FROM", "pca"))
    with pytest.raises(PipelineError, match=r"a sizes plot is drawn from a clustering model"):
        plan_pipeline(here / "p.yaml")
