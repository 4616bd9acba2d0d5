"""ddr demo-data: reproducible chunked generation whose stored truth matches the model."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB
from typer.testing import CliRunner

from ddr.cli import app
from ddr.demo import DemoSpec, _model, demo_dataset, demo_truth, write_demo_data
from ddr.io import open_input, output_status, read_attrs


def test_truth_is_the_population_covariance():
    spec = DemoSpec(n_samples=10, n_features=12, rank=4, n_classes=3, noise=0.5)
    m = _model(spec)
    V, p = m["components"], m["priors"]
    c = m["class_offsets"]
    dc = c - p @ c
    sigma = V.T @ (np.diag(m["signal_variances"]) + (dc * p[:, None]).T @ dc) @ V
    sigma += 0.25 * np.eye(12)
    evals, evecs = np.linalg.eigh(sigma)
    truth = demo_truth(spec)
    np.testing.assert_allclose(truth["explained_variance"], evals[::-1][:4], rtol=1e-12)
    overlap = np.abs(truth["components"] @ evecs[:, ::-1][:, :4])
    np.testing.assert_allclose(overlap, np.eye(4), atol=1e-10)
    np.testing.assert_allclose(truth["mean"], m["mu"] + (p @ c) @ V, rtol=1e-12)


def test_sample_statistics_approach_truth():
    spec = DemoSpec(
        n_samples=60_000,
        n_features=20,
        rank=3,
        n_classes=2,
        chunk_rows=7_000,
        dtype="float64",
        offset=1e4,
    )
    ds = demo_dataset(spec)
    X = ds["X"].values
    truth = demo_truth(spec)
    cov = np.cov(X.T)
    evals, evecs = np.linalg.eigh(cov)
    np.testing.assert_allclose(evals[::-1][:3], truth["explained_variance"], rtol=0.05)
    s = np.linalg.svd(evecs[:, ::-1][:, :3].T @ truth["components"].T, compute_uv=False)
    assert np.degrees(np.arccos(s.min())) < 2.0
    np.testing.assert_allclose(X.mean(axis=0), truth["mean"], atol=0.2)
    assert abs(truth["mean"].mean() - 1e4) < 5
    y = ds["y"].values
    np.testing.assert_allclose(np.bincount(y) / len(y), [0.5, 0.5], atol=0.01)
    for k in range(2):
        np.testing.assert_allclose(X[y == k].mean(axis=0), truth["class_means"][k], atol=0.3)


def test_reproducible_missing_and_written(tmp_path):
    spec = DemoSpec(n_samples=5000, n_features=8, rank=2, chunk_rows=900, missing=0.3, seed=7)
    write_demo_data(tmp_path / "d.zarr", spec)
    assert output_status(tmp_path / "d.zarr") == "complete"
    X = open_input(tmp_path / "d.zarr", "X", protect=False)
    assert X.dtype == np.float32 and X.chunks[0][0] == 900 and X.dims == ("sample", "feature")
    values = X.values
    np.testing.assert_array_equal(values, demo_dataset(spec)["X"].values, strict=True)
    assert abs(np.isnan(values).mean() - 0.3) < 0.02
    assert read_attrs(tmp_path / "d.zarr")["ddr:demo"]["missing"] == 0.3
    other = demo_dataset(DemoSpec(n_samples=5000, n_features=8, rank=2, seed=8))["X"].values
    assert not np.allclose(np.nan_to_num(values), other)


def test_bad_specs():
    for kwargs, message in [
        ({"rank": 0}, r"rank must be in \[1, n_features=50\]; got 0"),
        ({"missing": 1.0}, r"missing must be in \[0, 1\); got 1.0"),
        ({"dtype": "int8"}, "dtype must be 'float32' or 'float64'; got 'int8'"),
        ({"n_samples": 0}, "n_samples must be >= 1; got 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            DemoSpec(**kwargs)


def test_cli_demo_data(tmp_path):
    runner = CliRunner()
    out = tmp_path / "demo.zarr"
    res = runner.invoke(
        app,
        [
            "demo-data",
            str(out),
            "--n-samples",
            "2000",
            "--n-features",
            "6",
            "--rank",
            "2",
            "--chunk-rows",
            "500",
            "--seed",
            "3",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and output_status(out) == "complete"
    res = runner.invoke(app, ["demo-data", str(out), "--n-samples", "2000"])
    assert res.exit_code == 2 and "already exists and is complete" in res.output
    res = runner.invoke(app, ["demo-data", str(out), "--n-samples", "2000", "--force"])
    assert res.exit_code == 0
    res = runner.invoke(app, ["demo-data", str(tmp_path / "x.zarr"), "--missing", "2"])
    assert res.exit_code == 2 and "missing must be in [0, 1); got 2.0" in res.output


def test_sample_seed_draws_new_rows_of_the_same_population():
    base = DemoSpec(n_samples=6000, n_features=10, rank=3, n_classes=5, chunk_rows=1000, seed=1)
    other = DemoSpec(**{**vars(base), "sample_seed": 1})
    elsewhere = DemoSpec(**{**vars(base), "seed": 11})
    for key, value in demo_truth(base).items():  # the population is the seed's alone
        np.testing.assert_array_equal(demo_truth(other)[key], value, strict=True)
    assert not np.allclose(demo_truth(elsewhere)["mean"], demo_truth(base)["mean"])
    X, y = (demo_dataset(base)[k].values for k in ("X", "y"))
    X1, y1 = (demo_dataset(other)[k].values for k in ("X", "y"))
    X2, y2 = (demo_dataset(elsewhere)[k].values for k in ("X", "y"))
    assert not np.allclose(X, X1)
    nb = GaussianNB().fit(X, y)
    same, train = nb.score(X1, y1), nb.score(X, y)
    assert abs(same - train) < 0.03 and train > 0.35  # new rows, same accuracy
    assert nb.score(X2, y2) < 0.27  # another population: chance (0.2), as issue 18 found


def test_default_chunks_split_the_rows_for_parallel_reads():
    assert DemoSpec().chunk_rows == 12_500  # 100 000 rows in 8 chunks
    assert DemoSpec(n_samples=10).chunk_rows == 2
    wide = DemoSpec(n_samples=1_000_000, n_features=2000, rank=5, dtype="float64")
    assert wide.chunk_rows == 64 * 2**20 // (2000 * 8)  # at most 64 MiB a chunk
    assert DemoSpec(chunk_rows=300).chunk_rows == 300


def test_bad_seeds():
    with pytest.raises(ValueError, match="sample_seed must be >= 0; got -1"):
        DemoSpec(sample_seed=-1)
    with pytest.raises(ValueError, match="seed must be >= 0; got -2"):
        DemoSpec(seed=-2)
