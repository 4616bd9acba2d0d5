"""A statistic's read-outs in ``kind: zarr`` outputs: chosen by name (``from: {var:
m.variance}``) they are written as the whole step (``from: m``) writes them, with the dims the
statistic declares (the input's feature dim, ``class``), their units and values; one that
does not apply to the statistic (the covariance of diagonal moments) is an error naming it.
On a grid both are maps (tests/test_pipeline_grid.py)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import xarray as xr

from ddr.config.errors import RunError
from ddr.pipeline import plan_pipeline, run_plan


@pytest.fixture
def genes(tmp_path, monkeypatch):
    """300 samples x 4 genes (units "counts"), labels of 3 classes."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4)) * [1.0, 2.0, 3.0, 4.0] + 1e3
    ds = xr.Dataset(
        {
            "X": (("sample", "gene"), X, {"units": "counts"}),
            "y": (("sample",), rng.integers(0, 3, 300)),
        },
        coords={"gene": ["a", "b", "c", "d"]},
    )
    ds.chunk({"sample": 100}).to_zarr("d.zarr")
    return X, ds["y"].values


def run(steps: str, outputs: str) -> None:
    text = "ddr: 1\nname: s\ninputs:\n"
    text += "  X: {path: d.zarr, array: X}\n  y: {path: d.zarr, array: y}\n"
    text += "steps:\n" + textwrap.indent(textwrap.dedent(steps).strip() + "\n", "  ")
    text += "outputs:\n" + textwrap.indent(textwrap.dedent(outputs).strip() + "\n", "  ")
    with open("p.yaml", "w") as f:
        f.write(text)
    run_plan(plan_pipeline("p.yaml", []))


def test_read_outs_chosen_by_name_have_the_dims_of_the_whole_step(genes):
    X, y = genes
    run(
        """
        m: {op: moments, inputs: {X: X}}
        c: {op: class_moments, inputs: {X: X, y: y}}
        """,
        """
        - {kind: zarr, from: m, path: m.zarr}
        - {kind: zarr, from: c, path: c.zarr}
        - {kind: zarr, from: {var: m.variance, cov: m.covariance, n: m.count}, path: named.zarr}
        - {kind: zarr, from: {means: c.means, counts: c.counts}, path: class.zarr}
        """,
    )
    whole, named = xr.open_zarr("m.zarr"), xr.open_zarr("named.zarr")
    assert named["var"].dims == whole["variance"].dims == ("gene",)
    assert named["cov"].dims == whole["covariance"].dims
    assert named["cov"].dims[0] == "gene" and len(named["cov"].dims) == 2
    for mine, theirs in [("var", "variance"), ("cov", "covariance"), ("n", "count")]:
        np.testing.assert_array_equal(named[mine].values, whole[theirs].values)
        assert named[mine].attrs == whole[theirs].attrs
    assert named["var"].attrs["units"] == "counts2" and named["n"].attrs["units"] == "1"
    np.testing.assert_allclose(named["var"].values, X.var(axis=0), rtol=1e-12)
    np.testing.assert_allclose(named["cov"].values, np.cov(X.T, bias=True), rtol=1e-10)
    per_class, chosen = xr.open_zarr("c.zarr"), xr.open_zarr("class.zarr")
    for mine, theirs in [("means", "means"), ("counts", "counts")]:
        assert chosen[mine].dims == per_class[theirs].dims
        np.testing.assert_array_equal(chosen[mine].values, per_class[theirs].values)
    assert chosen["means"].dims == ("class", "gene")
    want = np.stack([X[y == k].mean(axis=0) for k in range(3)])
    np.testing.assert_allclose(chosen["means"].values, want, rtol=1e-12)


def test_a_read_out_that_does_not_apply_is_an_error_naming_it(genes):
    with pytest.raises(RunError) as info:
        run(
            "m: {op: moments, inputs: {X: X}, with: {diagonal: true}}",
            "- {kind: zarr, from: {cov: m.covariance}, path: named.zarr}",
        )
    assert "covariance() needs the full form; these Moments are diagonal" in str(info.value)
