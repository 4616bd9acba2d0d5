"""``ddr demo-data --kind gridded``: a time x lat x lon field with a land mask and known
spatial modes, the same values whether stored chunked by time or by space, reproducible from
its seeds, with the truth an EOF analysis is checked against."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from ddr.cli import app
from ddr.demo import demo_spec
from ddr.demo_gridded import GriddedSpec, gridded_dataset, gridded_truth, write_gridded_data

SMALL = GriddedSpec(120, 12, 24, chunk_rows=30, seed=1)


def test_truth_is_orthonormal_maps_nan_over_land():
    t = gridded_truth(SMALL)
    land = t["land"]
    assert land.shape == (12, 24) and 0.1 < land.mean() < 0.5
    maps = t["components"]
    assert maps.shape == (3, 12, 24)
    assert np.isnan(maps[:, land]).all() and np.isfinite(maps[:, ~land]).all()
    v = maps[:, ~land]
    np.testing.assert_allclose(v @ v.T, np.eye(3), atol=1e-12)
    # ddr's sign convention: the largest |loading| of each mode is positive
    assert np.all(v[np.arange(3), np.argmax(np.abs(v), axis=1)] > 0)
    np.testing.assert_allclose(t["explained_variance"], [400.25, 200.25, 100.25])


def test_field_is_the_model_and_stored_as_asked(tmp_path):
    """Values: the mean plus the modes times their amplitudes plus noise of the stated
    variance; land NaN at every time step; chunks as asked, the values the same both ways."""
    write_gridded_data(tmp_path / "t.zarr", SMALL)
    write_gridded_data(tmp_path / "s.zarr", GriddedSpec(**{**vars(SMALL), "chunk_by": "space"}))
    by_time, by_space = xr.open_zarr(tmp_path / "t.zarr"), xr.open_zarr(tmp_path / "s.zarr")
    assert by_time["t2m"].encoding["chunks"] == (30, 12, 24)
    assert by_space["t2m"].encoding["chunks"] == (120, 6, 12)
    x = by_time["t2m"].values
    np.testing.assert_array_equal(x, by_space["t2m"].values)
    assert x.dtype == np.float32 and by_time["t2m"].attrs["units"] == "K"
    land = by_time["land"].values.astype(bool)
    assert np.isnan(x[:, land]).all() and np.isfinite(x[:, ~land]).all()
    t = gridded_truth(SMALL)
    signal = by_time["true_amplitudes"].values @ t["components"][:, ~land]
    noise = x[:, ~land] - t["mean"][~land] - signal
    assert noise.std() == pytest.approx(SMALL.noise, rel=0.02)
    assert abs(noise.mean()) < 0.01
    # the amplitudes: a seasonal cycle plus noise, variance 400, 200, 100 (sampled)
    amp = by_time["true_amplitudes"].values
    np.testing.assert_allclose(amp.var(axis=0), [400, 200, 100], rtol=0.3)
    assert list(by_time["time"].dt.month.values[:13]) == [*range(1, 13), 1]
    assert by_time["lat"].attrs["units"] == "degrees_north"
    assert by_time.attrs["ddr:demo"]["kind"] == "gridded"


def test_seeds_and_reproducibility():
    a = gridded_dataset(SMALL)["t2m"].values
    np.testing.assert_array_equal(a, gridded_dataset(SMALL)["t2m"].values)
    other_sample = gridded_dataset(GriddedSpec(**{**vars(SMALL), "sample_seed": 1}))
    b = other_sample["t2m"].values
    assert np.array_equal(np.isnan(a), np.isnan(b)) and not np.allclose(a, b, equal_nan=True)
    other_population = gridded_truth(GriddedSpec(**{**vars(SMALL), "seed": 2}))
    assert not np.array_equal(other_population["land"], gridded_truth(SMALL)["land"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"n_samples": 1}, r"n_samples must be >= 2 \(time steps\); got 1"),
     ({"n_lat": 3}, "n_lat must be >= 4; got 3"),
     ({"n_lon": 2}, "n_lon must be >= 4; got 2"),
     ({"rank": 7}, r"rank must be in \[1, 6\]; got 7"),
     ({"rank": 0}, r"rank must be in \[1, 6\]; got 0"),
     ({"chunk_rows": 0}, "chunk_rows must be >= 1; got 0"),
     ({"chunk_by": "lat"}, "chunk_by must be 'time' or 'space'; got 'lat'"),
     ({"dtype": "int16"}, "dtype must be 'float32' or 'float64'; got 'int16'"),
     ({"seed": -1}, "seed must be >= 0; got -1"),
     ({"sample_seed": -1}, "sample_seed must be >= 0; got -1"),
     ({"noise": 0.0}, "noise must be positive; got 0.0")],
)  # fmt: skip
def test_bad_specs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GriddedSpec(**kwargs)


def test_demo_spec_kind_gridded():
    spec = demo_spec("gridded", n_samples=48, rank=None, n_lat=8, n_lon=8)
    assert isinstance(spec, GriddedSpec) and spec.rank == 3 and spec.chunk_rows == 6


def test_cli_kind_gridded(tmp_path):
    runner = CliRunner()
    out = tmp_path / "g.zarr"
    args = ["demo-data", str(out), "--kind", "gridded", "--n-samples", "48", "--n-lat",
            "8", "--n-lon", "16", "--rank", "2", "--chunk-by", "space", "--dtype",
            "float64"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "t2m 48 x 8 x 16 (time x lat x lon) float64" in res.output
    assert "in chunks of (48, 4, 8) (by space)" in res.output and "(rank 2;" in res.output
    ds = xr.open_zarr(out)
    assert ds["t2m"].shape == (48, 8, 16) and ds["true_components"].shape == (2, 8, 16)
    bad = runner.invoke(app, [*args[:2], "--kind", "gridded", "--n-features", "10"])
    assert bad.exit_code == 2
    assert "--n-features is not an option of --kind gridded: give --n-lat and --n-lon" in (
        bad.output
    )
    bad = runner.invoke(app, ["demo-data", str(tmp_path / "x.zarr"), "--kind", "gridded",
                              "--chunk-by", "lat"])  # fmt: skip
    assert bad.exit_code == 2 and "chunk_by must be 'time' or 'space'; got 'lat'" in bad.output
