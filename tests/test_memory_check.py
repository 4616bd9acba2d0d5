"""Memory checked before a run: each pass's working set per task, asked of the estimator and
statistic classes, against each worker's memory_limit and measured baseline."""

from __future__ import annotations

import re

import dask
import numpy as np
import pytest
from pipeline_support import files_written
from typer.testing import CliRunner

from ddr.cli import app
from ddr.demo import DemoSpec, write_demo_data
from ddr.pipeline import plan_pipeline
from ddr.pipeline.memory import pass_memory, task_memory
from ddr.stats import ClassMoments, Moments
from ddr.stats.ppca_sums import PPCASums
from ddr.stats.sketch import CentredProduct

PIPELINE = """\
ddr: 1
name: fits
params: {solver: covariance}
inputs:
  X: {path: data.zarr, array: X}
  y: {path: data.zarr, array: y}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 5, solver: "${params.solver}"}}
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  ppca: {op: PPCA.fit, inputs: {X: X}, with: {n_components: 4, max_iter: 3}}
outputs:
  - {kind: metrics, from: [pca.explained_variance_, nb.class_prior_, ppca.noise_variance_],
     path: out/metrics.json}
"""


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        write_demo_data(tmp_path / "data.zarr", DemoSpec(20000, 300, 4, 3, 20000, seed=0))
    (tmp_path / "fits.yaml").write_text(PIPELINE)
    return tmp_path


def test_working_sets_come_from_the_statistic_classes(here):
    plan = plan_pipeline(here / "fits.yaml")
    chunk = 20000 * 300 * 4
    d = 300
    pca = task_memory(plan, "pca")
    assert (pca.stored, pca.decoded) == (chunk, chunk)
    assert pca.statistics == Moments.value_nbytes(d) == 8 * (d * d + 2 * d)
    assert pca.scratch == 8 * 1024 * d  # the centring buffer: at least 1024 rows
    assert pca.merge == (16 + 1) * pca.statistics  # split_every 16 at d = 300
    nb = task_memory(plan, "nb")
    assert nb.statistics == ClassMoments.value_nbytes(d, diagonal=True) == 8 * 3 * d
    ppca = task_memory(plan, "ppca")
    q1 = 5
    assert ppca.statistics == 8 * (d * (q1 * q1 + q1 + 2) + 3 * q1 * q1)
    assert ppca.scratch == PPCASums.block_nbytes(20000, d, params=_params(d, 4))
    # PCA and GaussianNB share one pass: one task holds both statistics
    shared = next(t for t in pass_memory(plan) if "shared" in t.step)
    assert shared.statistics == pca.statistics + nb.statistics
    # the randomized solver's passes hold a d x (k + n_oversamples) product
    randomized = task_memory(plan_pipeline(here / "fits.yaml", ["solver=randomized"]), "pca")
    basis = np.broadcast_to(0.0, (d, 15))
    assert randomized.statistics == CentredProduct.value_nbytes(d, basis=basis)
    assert randomized.statistics == 8 * (d * 15 + 3 * d + 15)


def _params(d, q):
    from ddr.stats.ppca_sums import PPCAParams

    return PPCAParams(np.zeros((d, q)), np.zeros(d), 1.0)


def test_memory_limit_too_small_exit_1_nothing_written(here):
    cluster = here / "small.yaml"
    cluster.write_text(
        "ddr-cluster: 1\nkind: local\nlocal:\n  n_workers: 1\n  threads_per_worker: 8\n"
        "  memory_limit: 450MiB\n  dashboard_address: null\n"
    )
    result = CliRunner().invoke(
        app, ["run", "fits.yaml", "--cluster", str(cluster), "--no-progress"]
    )
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert re.search(
        r"ddr: error: run failed: not enough memory per worker: worker tcp://\S+ has memory_limit "
        r"450 MiB; it holds \d+ MiB before any task \(measured\) and each of its 8 thread\(s\) "
        r"needs up to \d+ MiB for one task of the pass shared by step pca, step nb \(chunk of "
        r"20000 x 300 float32: 23 MiB stored \+ 23 MiB decoded, statistics 0.7 MiB, scratch "
        r"2.5 MiB; a merge task 12 MiB\): in all \d+ MiB, more than the 360 MiB \(0.8 of the "
        r"limit\) at which dask stops the worker",
        text,
    ), text
    assert files_written(here, {"data.zarr", "fits.yaml", "small.yaml"}) == []
