"""Inputs checked before any data is read: arrays of the same group that the pipeline does
not use are not its problem, and an empty input is refused where it is declared."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from pipeline_support import ReadCounter
from typer.testing import CliRunner

from ddr.cli import app
from ddr.io import open_input
from ddr.pipeline import PipelineError, plan_pipeline

runner = CliRunner()


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def xarray_group(path, n=300, n_labels=299):
    """An xarray-style group (every array has dim names): X, labels one row short, and a
    coordinate of X."""
    rng = np.random.default_rng(0)
    g = zarr.open_group(path, mode="w", zarr_format=3)
    x = g.create_array("X", shape=(n, 4), chunks=(100, 4), dtype="f8", dimension_names=("s", "f"))
    x[...] = rng.normal(size=(n, 4))
    x.attrs["coordinates"] = "t"
    y = g.create_array("y", shape=(n_labels,), chunks=(100,), dtype="i8", dimension_names=("s",))
    y[...] = rng.integers(0, 3, n_labels)
    t = g.create_array("t", shape=(n,), chunks=(100,), dtype="f8", dimension_names=("s",))
    t[...] = np.arange(n) * 0.5
    return path


ONLY_X = """\
ddr: 1
name: only-x
inputs:
  X: {path: data.zarr, array: X}
  y: {path: data.zarr, array: y}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}
outputs:
  - {kind: model, from: pca, path: out/pca.zarr}
"""


def test_labels_of_another_length_matter_only_to_a_step_that_uses_them(here):
    xarray_group(here / "data.zarr")
    X = open_input("data.zarr", "X")
    assert X.shape == (300, 4) and set(X.coords) == {"t"}
    np.testing.assert_array_equal(X["t"].values, np.arange(300) * 0.5)
    assert open_input("data.zarr", "y").shape == (299,)
    (here / "only-x.yaml").write_text(ONLY_X)
    plan = plan_pipeline("only-x.yaml")
    assert [o.action for o in plan.outputs] == ["write"]
    (here / "uses-y.yaml").write_text(
        ONLY_X.replace("pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}", "")
        .replace("steps:\n", "steps:\n  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}\n")
        .replace("from: pca", "from: nb")
    )
    with pytest.raises(PipelineError) as info:
        plan_pipeline("uses-y.yaml")
    assert [str(p) for p in info.value.problems] == [
        "uses-y.yaml:7:46: y has 299 rows but X has 300; they must be equal"
    ]


EMPTY = """\
ddr: 1
name: empty
inputs:
  X: {path: data.zarr, array: X}
steps:
  scaler: {op: StandardScaler.fit, inputs: {X: X}}
outputs:
  - {kind: model, from: scaler, path: out/scaler.zarr}
"""


@pytest.mark.parametrize(
    ("shape", "sizes"), [((300, 0), "sample: 300, feature: 0"), ((0, 4), "sample: 0, feature: 4")]
)
@pytest.mark.parametrize("command", ["validate", "plan", "run"])
def test_an_empty_input_is_refused_at_validation(here, shape, sizes, command):
    g = zarr.open_group(here / "data.zarr", mode="w", zarr_format=3)
    g.create_array("X", shape=shape, chunks=(100, 1), dtype="f8")
    (here / "empty.yaml").write_text(EMPTY)
    with ReadCounter() as counter:
        args = ["--cluster", "sync"] if command == "run" else []
        result = runner.invoke(app, [command, "empty.yaml", *args])
    assert result.exit_code == 2, result.output
    assert (
        f"empty.yaml:4:31: input X is empty ({sizes}); ddr needs at least one sample and one "
        "feature"
    ) in result.output
    assert not counter.bytes
    assert not (here / "out").exists()
