"""ddr demo-data --kind counts: a corpus drawn from a known topic model, sparse in Zarr, whose
stored truth is what generated it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from typer.testing import CliRunner

from ddr.cli import app
from ddr.demo_counts import CountsSpec, counts_truth, write_counts_data
from ddr.io import open_input, output_status, read_attrs


def _read(path):
    X = open_input(path, "X", protect=False).data.compute()
    truth = {k: open_input(path, k, protect=False).values
             for k in ("true_topics", "true_mixtures", "doc_length")}  # fmt: skip
    return X, truth


def test_the_counts_follow_the_stored_topic_model(tmp_path):
    spec = CountsSpec(n_samples=4000, n_features=300, n_topics=5, doc_length=150, chunk_rows=700)
    write_counts_data(tmp_path / "c.zarr", spec)
    assert output_status(tmp_path / "c.zarr") == "complete"
    X, t = _read(tmp_path / "c.zarr")
    assert isinstance(X, scipy.sparse.csr_matrix) and X.shape == (4000, 300)
    assert X.dtype == np.float32 and (X.data > 0).all() and X.has_sorted_indices
    np.testing.assert_array_equal(np.asarray(X.sum(axis=1)).ravel(), t["doc_length"])
    assert t["doc_length"].min() >= 1 and abs(t["doc_length"].mean() - 150) < 2
    np.testing.assert_allclose(t["true_topics"].sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(t["true_mixtures"].sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(t["true_topics"], counts_truth(spec))
    # each word's total count is a sum of independent multinomial draws whose mean the truth
    # gives: E[count_j] = sum_i L_i (theta_i @ beta)_j
    expected = (t["doc_length"][:, None] * t["true_mixtures"]) @ t["true_topics"]
    total = np.asarray(X.sum(axis=0)).ravel()
    big = expected.sum(axis=0) > 50
    z = (total[big] - expected.sum(axis=0)[big]) / np.sqrt(expected.sum(axis=0)[big])
    assert np.abs(z).max() < 5 and abs(z.mean()) < 0.3
    # topics are distinct: few words carry most of each topic's mass
    top = np.sort(t["true_topics"], axis=1)[:, ::-1]
    assert (top[:, :30].sum(axis=1) > 0.8).all()
    attrs = read_attrs(tmp_path / "c.zarr")["ddr:demo"]
    assert attrs["kind"] == "counts" and attrs["n_topics"] == 5


def test_seeds_and_reproducibility(tmp_path):
    base = CountsSpec(n_samples=500, n_features=80, n_topics=3, doc_length=20, chunk_rows=100)
    write_counts_data(tmp_path / "a.zarr", base)
    write_counts_data(tmp_path / "b.zarr", base)
    write_counts_data(tmp_path / "s.zarr", CountsSpec(**{**vars(base), "sample_seed": 1}))
    a, ta = _read(tmp_path / "a.zarr")
    b, _ = _read(tmp_path / "b.zarr")
    s, ts = _read(tmp_path / "s.zarr")
    assert (a != b).nnz == 0
    assert (a != s).nnz > 0
    np.testing.assert_array_equal(ta["true_topics"], ts["true_topics"])  # same population
    other = counts_truth(CountsSpec(**{**vars(base), "seed": 5}))
    assert not np.allclose(other, ta["true_topics"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"n_topics": 0}, r"n_topics must be in \[1, n_features=5000\]; got 0"),
     ({"doc_length": 0.5}, "doc_length must be >= 1; got 0.5"),
     ({"dtype": "int8"}, "dtype must be float32, float64, int32 or int64; got 'int8'"),
     ({"n_features": 1}, "n_features must be >= 2; got 1")],
)  # fmt: skip
def test_bad_specs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CountsSpec(**kwargs)


def test_cli_kind_counts(tmp_path):
    runner = CliRunner()
    out = tmp_path / "corpus.zarr"
    args = ["demo-data", str(out), "--kind", "counts", "--n-samples", "300", "--n-features",
            "40", "--n-topics", "3", "--doc-length", "12", "--dtype", "int32"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "300 documents x 40 words, sparse counts (int32" in res.output
    X = open_input(out, "X", protect=False).data.compute()
    assert X.dtype == np.int32 and X.shape == (300, 40)
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "already exists and is complete" in res.output
    res = runner.invoke(app, ["demo-data", str(tmp_path / "x.zarr"), "--kind", "words"])
    assert res.exit_code == 2
    assert "--kind must be one of dense, counts, gridded; got 'words'" in res.output
    res = runner.invoke(app, ["inspect", str(out)])
    assert "X: (300, 40) int32, sparse (CSR group)" in res.output
