"""Reports: confusion counts equal scikit-learn's, scatter sampling is even and bounded,
files are written atomically with their fingerprint inside, read back by their kind."""

from __future__ import annotations

import json

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.metrics import confusion_matrix

from ddr.io.locations import resolve
from ddr.pipeline import reports
from ddr.pipeline.outputs import output_kind, read_fingerprint
from ddr.pipeline.outputs.plot import png_bytes
from ddr.pipeline.outputs.plots import confusion_blocks, merge_confusion, plot_kind, sample_rows


def test_confusion_counts_equal_sklearn(rng):
    truth = rng.integers(0, 4, size=1000)
    pred = np.where(rng.random(1000) < 0.7, truth, rng.integers(0, 4, size=1000))
    parts = confusion_blocks(da.from_array(pred, chunks=137), da.from_array(truth, 200))
    with dask.config.set(scheduler="sync"):
        labels, counts = merge_confusion(parts.compute())
    assert labels == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(counts, confusion_matrix(truth, pred))


def test_confusion_with_string_labels_and_unseen_prediction():
    truth = np.array(["b", "a", "a", "c"])
    pred = np.array(["b", "a", "z", "c"])
    parts = confusion_blocks(da.from_array(pred, 2), da.from_array(truth, 2))
    labels, counts = merge_confusion(parts.compute(scheduler="sync"))
    assert labels == ["a", "b", "c", "z"]
    assert counts[0].tolist() == [1, 0, 0, 1] and counts.sum() == 4


def test_sample_rows_is_even_and_bounded():
    x = da.arange(10_000, chunks=1000)
    s = sample_rows(x, 101).compute(scheduler="sync")
    assert s.shape == (101,) and s[0] == 0 and s[-1] == 9999
    assert np.all(np.diff(s) > 0)
    assert sample_rows(x, 20_000) is x


def _save_plot(name, path, fingerprint, title, provenance=None, **data):
    fig = plot_kind(name).draw(data, title)
    resolve(path).write_bytes(png_bytes(fig, fingerprint, provenance))


def test_files_are_atomic_and_fingerprinted(tmp_path):
    pytest.importorskip("matplotlib")
    reports.write_json(
        tmp_path / "m.json", {"a": np.float64(1.5), "b": np.arange(3), "c": float("nan")}, "fp1"
    )
    data = json.loads((tmp_path / "m.json").read_text())
    assert data == {"a": 1.5, "b": [0, 1, 2], "c": "nan", "ddr:fingerprint": "fp1"}
    assert read_fingerprint(tmp_path / "m.json") == "fp1"
    metrics = output_kind("metrics")
    assert metrics.status(resolve(tmp_path / "m.json")) == ("complete", "fp1")

    class Model:
        explained_variance_ratio_ = np.array([0.5, 0.3, 0.1])

    _save_plot("scree", str(tmp_path / "s.png"), "fp2", None, model=Model())
    assert read_fingerprint(tmp_path / "s.png") == "fp2"
    _save_plot(
        "confusion",
        str(tmp_path / "c.png"),
        "fp3",
        "t",
        confusion=(["0", "1"], np.array([[3, 1], [0, 4]])),
    )
    scores = np.random.default_rng(0).normal(size=(50, 2))
    _save_plot(
        "scatter",
        str(tmp_path / "p.png"),
        None,
        None,
        {"steps": {"pca": {"op": "PCA.fit"}}},
        x=scores[:, 0],
        y=scores[:, 1],
        labels=np.arange(50) % 3,
        n_total=500,
    )
    assert read_fingerprint(tmp_path / "p.png") is None
    plot = output_kind("plot")
    assert plot.status(resolve(tmp_path / "p.png")) == ("not-ddr", None)
    provenance = plot.read_provenance(resolve(tmp_path / "p.png"))
    assert provenance == {"steps": {"pca": {"op": "PCA.fit"}}}  # it rides along, as JSON
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.png", "m.json", "p.png", "s.png"]
    (tmp_path / "other.png").write_bytes(b"not a png")
    assert read_fingerprint(tmp_path / "other.png") is None
    # each kind reads only its own format: a PNG is no metrics file, a JSON no plot
    assert metrics.status(resolve(tmp_path / "s.png")) == ("not-ddr", None)
    assert plot.status(resolve(tmp_path / "m.json")) == ("not-ddr", None)


def test_scree_needs_explained_variance(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match="needs a model with explained_variance_ratio_"):
        _save_plot("scree", str(tmp_path / "s.png"), None, None, model=object())
