"""Plots a scientist would keep: what is drawn is checked (axis labels, tick values, titles,
legends, annotations), not pixels."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from pipeline_support import PIPELINES, make_data

import ddr
from ddr.pipeline import plan_pipeline, run_plan
from ddr.pipeline.lineage import rows_role
from ddr.pipeline.outputs.plots import (
    component_name,
    draw_confusion,
    draw_kde,
    draw_loglik,
    draw_scatter,
    draw_scree,
)

pytest.importorskip("matplotlib")


def texts(fig) -> list[str]:
    """Every piece of text on a figure (titles, labels, annotations, legend entries)."""
    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text()]


def tick_labels(axis) -> list[str]:
    axis.figure.canvas.draw()
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def number(label: str) -> float:
    return float(label.replace("\u2212", "-").replace(",", ""))


@pytest.fixture
def low_rank(rng):
    Z = rng.normal(size=(600, 3)) * np.array([5.0, 3.0, 2.0])
    return Z @ np.linalg.qr(rng.normal(size=(8, 3)))[0].T + 0.3 * rng.normal(size=(600, 8))


def test_ppca_loglik_has_integer_iterations_and_plain_values(low_rank, rng):
    X = low_rank * 1000 + 1e5  # a log-likelihood in the millions, as in the issue
    X[rng.random(X.shape) < 0.05] = np.nan
    ppca = ddr.PPCA(n_components=3, max_iter=40, tol=1e-7).fit(X)
    fig = draw_loglik(ppca)
    top, bottom = fig.axes
    assert top.get_ylabel() == "log-likelihood" and bottom.get_xlabel() == "EM iteration"
    assert bottom.get_ylabel() == "relative gain" and bottom.get_yscale() == "log"
    ticks = [number(t) for t in tick_labels(bottom.xaxis)]
    assert ticks and all(t == int(t) for t in ticks)  # iterations are whole numbers
    assert top.yaxis.get_offset_text().get_text() == ""  # no "-9.3874e6" offset
    values = [number(t) for t in tick_labels(top.yaxis)]
    curve = ppca.loglik_curve_
    lo, hi = top.get_ylim()
    shown = [v for v in values if lo <= v <= hi]
    assert shown and min(shown) >= curve.min() - (hi - lo) and max(shown) <= curve.max() + (hi - lo)
    assert f"tol = {ppca.tol:g}" in texts(fig)
    assert f"final {curve[-1]:,.1f} after {curve.size} iterations" in texts(fig)
    # the gain per iteration is what is drawn on the log axis
    gain = bottom.lines[0].get_ydata()
    np.testing.assert_allclose(gain, np.abs(np.diff(curve)) / np.abs(curve[1:]), rtol=1e-12)


def test_scree_of_kernel_pca_is_the_share_of_the_total(low_rank):
    kpca = ddr.KernelPCA(n_components=4, kernel="rbf", method="exact").fit(low_rank)
    fig = draw_scree(kpca)
    (ax,) = fig.axes
    assert ax.get_ylabel() == "share of the total variance"
    bars = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(bars, kpca.explained_variance_ratio_, rtol=1e-12)
    assert sum(bars) < 1  # of the total, not of the 4 computed
    assert tick_labels(ax.xaxis) == ["KPC1", "KPC2", "KPC3", "KPC4"]
    legend = ax.get_legend()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box, axes_box = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.y1 <= axes_box.y0  # below the axes: on no bar and no line
    assert sorted(t.get_text() for t in legend.get_texts()) == [
        "cumulative",
        "share of the total variance",
    ]
    assert "100%" in tick_labels(ax.yaxis) and ax.get_ylim()[1] == pytest.approx(1.02)


def test_scree_of_pca_names_principal_components(low_rank):
    fig = draw_scree(ddr.PCA(n_components=3).fit(low_rank))
    assert tick_labels(fig.axes[0].xaxis) == ["PC1", "PC2", "PC3"]


def test_kde_shows_the_data_and_the_bandwidth(rng):
    x = rng.normal(2.0, 3.0, size=(5000, 1))
    kde = ddr.KernelDensity(bandwidth="scott").fit(x)
    edges = np.linspace(2 - 12, 2 + 12, 61)
    counts, _ = np.histogram(x[:, 0], edges)
    fig = draw_kde(kde, (counts, edges))
    (ax,) = fig.axes
    bars = ax.patches
    assert len(bars) == 60
    mass = sum(b.get_height() * b.get_width() for b in bars)
    assert mass == pytest.approx(1.0, rel=1e-12)  # a density histogram of the rows drawn
    kernel_sd = kde.bandwidth_ * np.sqrt(kde.covariance_[0, 0])
    assert (
        f"bandwidth {kde.bandwidth_:.3g} (kernel sd {kernel_sd:.3g} in data units), scott"
        in texts(fig)
    )
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == [
        "data",
        "density estimate",
    ]
    assert ax.get_ylabel() == "density"


def test_scatter_names_its_axes_and_prints_the_correlation(rng):
    x = rng.normal(size=400)
    y = 0.8 * x + 0.6 * rng.normal(size=400)
    fig = draw_scatter(x, y, x > 0, 4000, "X canonical variate 1", "Y canonical variate 1")
    (ax,) = fig.axes
    assert ax.get_xlabel() == "X canonical variate 1"
    assert ax.get_ylabel() == "Y canonical variate 1"
    r = np.corrcoef(x, y)[0, 1]
    assert f"correlation {r:+.3f} on 400 of 4000 rows (evenly sampled)" in texts(fig)
    assert fig.texts[0].get_text() == "Y canonical variate 1 against X canonical variate 1"


def test_confusion_says_which_rows_and_labels_its_colour_bar():
    fig = draw_confusion(
        ["0", "1"], np.array([[30, 10], [5, 55]]), "held-out rows (not used to fit)"
    )
    ax, bar = fig.axes
    assert fig.texts[0].get_text() == "Confusion matrix (held-out rows)"
    assert ax.get_title() == "accuracy 0.850 on 100 held-out rows (not used to fit)"
    assert bar.get_ylabel() == "rows"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("predicted class", "true class")


def test_component_names_are_asked_of_the_estimator():
    assert component_name(ddr.PCA, 0) == "PC1"
    assert component_name(ddr.KernelPCA, 2) == "KPC3"
    assert component_name(ddr.LinearDiscriminantAnalysis, 1) == "LD2"
    assert component_name(ddr.CCA, 0) == "X canonical variate 1"
    assert component_name(ddr.CCA, 0, "y_data") == "Y canonical variate 1"
    assert component_name(ddr.StandardScaler, 0) == "component 1"


# ------------------------------------------------------------ from pipelines
@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("plots-data"))


@pytest.fixture
def here(data, monkeypatch, tmp_path):
    for name in ("demo.zarr", "demo-new.zarr"):
        (tmp_path / name).symlink_to(data / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_rows_used_to_fit(here):
    split = ["train_end=2000", "test_start=2000"]
    plan = plan_pipeline(PIPELINES / "classify.yaml", split)
    assert rows_role(plan.steps, plan.inputs, "nb_pred", None) == "held-out rows (not used to fit)"
    plan = plan_pipeline(PIPELINES / "classify.yaml", ["train_end=2000", "test_start=1500"])
    assert rows_role(plan.steps, plan.inputs, "qda_pred", None) == "rows partly used to fit"
    plan = plan_pipeline(PIPELINES / "classify.yaml", ["train_end=2000", "test_start=0"])
    assert rows_role(plan.steps, plan.inputs, "lda_pred", None) == "rows partly used to fit"
    plan = plan_pipeline(PIPELINES / "classify.yaml", ["test=demo-new.zarr", "test_start=0"])
    assert rows_role(plan.steps, plan.inputs, "nb_pred", None) == "held-out rows (not used to fit)"
    text = (PIPELINES / "classify.yaml").read_text()
    same = text.replace(
        'isel: {sample: "${params.test_start}:"}', 'isel: {sample: ":${params.train_end}"}'
    )
    (here / "same.yaml").write_text(same)
    plan = plan_pipeline(here / "same.yaml")
    assert rows_role(plan.steps, plan.inputs, "nb_pred", None) == "training rows"


def test_loaded_model_rows_come_from_its_provenance(here):
    with dask.config.set(scheduler="threads"):
        run_plan(plan_pipeline(PIPELINES / "fit-once.yaml"))
    for data, role in (
        ("demo-new.zarr", "held-out rows (not used to fit)"),
        ("demo.zarr", "training rows"),
    ):
        plan = plan_pipeline(PIPELINES / "apply-saved.yaml", [f"data={data}"])
        path = str(here / "models" / "gaussian-nb.model.zarr")
        assert rows_role(plan.steps, plan.inputs, "predicted", path) == role
