"""Acceptance: a pipeline needing moments, class moments, GaussianNB and QDA of one input
reads it ONCE (``ddr plan`` says 1 pass; a counting Zarr store proves it), and the results
equal the same fits made directly."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from pipeline_support import PIPELINES, ReadCounter, make_data
from typer.testing import CliRunner

import ddr
from ddr.cli import app
from ddr.io import open_input
from ddr.pipeline import plan_pipeline, run_plan
from ddr.stats import ClassMoments, Moments, compute

PIPELINE = PIPELINES / "one-pass-statistics.yaml"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("onepass-data"))


def test_plan_says_one_pass(data, monkeypatch):
    monkeypatch.chdir(data)
    result = CliRunner().invoke(app, ["plan", str(PIPELINE), "--set", "out=plan-out"])
    assert result.exit_code == 0, result.output
    assert "passes over inputs: X: 1, y: 1" in result.output
    assert (
        "one shared pass computes the statistics of moments, class_moments, nb, qda, lda"
        in result.output
    )
    plan = plan_pipeline(PIPELINE, ["out=plan-out"])
    assert [p.kind for p in plan.phases] == ["batch"]
    assert plan.passes() == {"X": "1", "y": "1"}


def test_run_reads_the_input_once(data, monkeypatch):
    monkeypatch.chdir(data)
    plan = plan_pipeline(PIPELINE, ["out=run-out"])
    with dask.config.set(scheduler="threads"), ReadCounter() as counter:
        summary = run_plan(plan)
    assert counter.passes(data / "demo.zarr", "X") == pytest.approx(1.0)
    assert counter.passes(data / "demo.zarr", "y") == pytest.approx(1.0)
    # the runner's own measurement agrees and is reported per step and in total
    assert summary.passes == {"X": 1.0, "y": 1.0}
    fits = {s.id: s for s in summary.steps}
    assert set(fits) == {"moments", "class_moments", "nb", "qda", "lda"}
    for step in fits.values():
        assert step.passes == {"X": 1.0, "y": 1.0}
        assert len(step.shared_with) == 4

    # the results are those of the direct fits
    X = open_input(data / "demo.zarr", "X")
    y = open_input(data / "demo.zarr", "y")
    with dask.config.set(scheduler="threads"):
        nb = ddr.GaussianNB().fit(X, y)
        qda = ddr.QuadraticDiscriminantAnalysis(reg_param=0.0).fit(X, y)
        mom = compute(Moments, X.data)
        cm = compute(ClassMoments.spec(diagonal=True), X.data, y.data)
    saved_nb = ddr.load(data / "run-out" / "gaussian-nb.model.zarr")
    saved_qda = ddr.load(data / "run-out" / "qda.model.zarr")
    np.testing.assert_array_equal(saved_nb.theta_, nb.theta_)
    np.testing.assert_array_equal(saved_nb.var_, nb.var_)
    for a, b in zip(saved_qda.rotations_, qda.rotations_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    import xarray as xr

    with xr.open_zarr(data / "run-out" / "moments.zarr", consolidated=False) as ds:
        np.testing.assert_allclose(ds["mean"].values, mom.mean, rtol=1e-12)
        np.testing.assert_allclose(ds["covariance"].values, mom.covariance(0), rtol=1e-12)
    with xr.open_zarr(data / "run-out" / "class-moments.zarr", consolidated=False) as ds:
        np.testing.assert_allclose(ds["means"].values, cm.means, rtol=1e-12)
        np.testing.assert_array_equal(ds["counts"].values, cm.counts)


def test_densities_share_the_pass_issue_15(data, tmp_path, monkeypatch):
    """Issue 15: a pipeline with moments + GaussianDensity read X twice (the densities had
    no FitPlan); now one read, with KernelDensity's fit in it too (the common suite checks
    every export's one-pass fit shares the read; saving an exact KDE reads its training rows,
    so only the Gaussian model is written here)."""
    monkeypatch.chdir(data)
    path = tmp_path / "densities.yaml"
    path.write_text(
        "ddr: 1\n"
        "name: densities\n"
        "inputs:\n"
        "  X: {path: demo.zarr, array: X}\n"
        "steps:\n"
        "  moments: {op: moments, inputs: {X: X}}\n"
        "  gauss: {op: GaussianDensity.fit, inputs: {X: X}}\n"
        "  kde: {op: KernelDensity.fit, inputs: {X: X}, with: {algorithm: exact}}\n"
        "outputs:\n"
        "  - {kind: metrics, from: [moments.mean], path: dens-out/m.json}\n"
        "  - {kind: model, from: gauss, path: dens-out/g.zarr}\n"
        "  - {kind: metrics, from: [kde.bandwidth_], path: dens-out/k.json}\n"
    )
    plan = plan_pipeline(path)
    assert [p.kind for p in plan.phases] == ["batch"]
    assert plan.passes() == {"X": "1"}
    with dask.config.set(scheduler="threads"), ReadCounter() as counter:
        run_plan(plan)
    assert counter.passes(data / "demo.zarr", "X") == pytest.approx(1.0)
    X = open_input(data / "demo.zarr", "X")
    with dask.config.set(scheduler="threads"):
        direct = ddr.GaussianDensity().fit(X)
    np.testing.assert_allclose(
        ddr.load(data / "dens-out" / "g.zarr").covariance_, direct.covariance_, rtol=1e-12
    )
