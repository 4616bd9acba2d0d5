"""Pipelines on grids (issue 32 item 2): an input with ``sample_dims:`` is read as a grid
(time x lat x lon, a land mask), fits on it take the grid path, and what is written of the
model comes back on the grid: maps with the input's coordinates and their attributes, NaN at
the mask; time series on the sample dims. Planned passes are the measured ones: the first
sample (the mask) is read once, while planning, and handed to every fit; bad ``sample_dims``
are refused with their place in the file; the ``maps`` plot draws the maps; ``--update``
reads only the time steps appended since the last run."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import xarray as xr

import ddr
from ddr.config.errors import RunError
from ddr.demo_gridded import GriddedSpec, write_gridded_data
from ddr.pipeline import PipelineError, plan_pipeline, run_plan
from ddr.pipeline.plan import format_plan

SPEC = GriddedSpec(96, 8, 12, chunk_rows=24, seed=3)


@pytest.fixture(scope="module")
def field(tmp_path_factory):
    d = tmp_path_factory.mktemp("grid")
    write_gridded_data(d / "g.zarr", SPEC)
    return d


def write_pipeline(d, inputs: str, outputs: str, steps: str | None = None) -> str:
    steps = (
        steps
        or """
      pca: {op: PCA.fit, inputs: {X: T}, with: {n_components: 2}}
      scores: {op: PCA.transform, inputs: {model: pca, X: T}}
    """
    )
    text = "ddr: 1\nname: grid\ninputs:\n" + textwrap.indent(textwrap.dedent(inputs), "  ")
    text += "steps:\n" + textwrap.indent(textwrap.dedent(steps).strip() + "\n", "  ")
    text += "outputs:\n" + textwrap.indent(textwrap.dedent(outputs).strip() + "\n", "  ")
    (d / "p.yaml").write_text(text)
    return str(d / "p.yaml")


MAPS = """
- {kind: zarr, from: {components: pca.components_, mean: pca.mean_}, path: out/maps.zarr}
- {kind: zarr, from: scores, path: out/scores.zarr}
"""


def problems(path: str) -> list[str]:
    with pytest.raises(PipelineError) as info:
        plan_pipeline(path, [])
    return [str(p) for p in info.value.problems]


def test_fit_on_a_grid_writes_maps_and_time_series(field, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_pipeline(
        tmp_path, f"T: {{path: {field}/g.zarr, array: t2m, sample_dims: time}}\n", MAPS
    )
    plan = plan_pipeline(path, [])
    land = xr.open_zarr(field / "g.zarr")["land"].values.astype(bool)
    # the planner knows the features a fit sees: the ocean points (read from the first
    # time step while planning, and handed to the fit), and the passes: fit, scores
    assert plan.inputs["T"].meta.shape == (96, int((~land).sum()))
    assert plan.passes() == {"T": "2"}
    line = format_plan(plan).splitlines()[2]
    assert f"(time: 96, lat: 8, lon: 12; {(~land).sum()} features, {land.sum()} masked)" in line
    summary = run_plan(plan)
    assert summary.passes == {"T": pytest.approx(2.0, abs=0.01)}
    data = xr.open_zarr(field / "g.zarr")
    maps = xr.open_zarr("out/maps.zarr")
    assert maps["components"].dims == ("component", "lat", "lon")
    assert np.isnan(maps["components"].values[:, land]).all()
    assert np.isfinite(maps["components"].values[:, ~land]).all()
    assert maps["lon"].attrs == {"units": "degrees_east", "standard_name": "longitude"}
    assert maps["mean"].attrs["long_name"] == "mean of PCA"
    made_from = maps.attrs["ddr:provenance"]["inputs"]["T"]
    assert made_from["sample_dims"] == ["time"] and made_from["shape"] == [96, 8, 12]
    assert made_from["dims"] == ["time", "lat", "lon"]
    est = ddr.PCA(n_components=2).fit(data["t2m"], sample_dims="time")
    np.testing.assert_allclose(maps["components"].values, est.as_xarray("components_").values)
    scores = xr.open_zarr("out/scores.zarr")["scores"]
    assert scores.dims == ("time", "component")
    np.testing.assert_array_equal(scores["time"].values, data["time"].values)
    np.testing.assert_allclose(scores.values, est.transform(data["t2m"]).values, rtol=1e-6)


def test_several_sample_dims_and_a_selection(field, tmp_path, monkeypatch):
    """Members x time as the samples; a selection of time steps that does not start at the
    first: its first sample is the mask's; planned = measured, the mask read once while
    planning."""
    monkeypatch.chdir(tmp_path)
    data = xr.open_zarr(field / "g.zarr")["t2m"].load()
    ens = xr.concat([data, data + 1.0], dim="member").transpose("time", "member", "lat", "lon")
    ens.to_dataset(name="t2m").chunk({"time": 24, "member": 1}).to_zarr("ens.zarr")
    inputs = "T: {path: ens.zarr, array: t2m, sample_dims: [time, member], isel: {time: '30:'}}\n"
    plan = plan_pipeline(write_pipeline(tmp_path, inputs, MAPS), [])
    # fit and scores: each reads the chunks that hold time steps 30: (3 of 4 along time)
    assert plan.passes() == {"T": "1.50"}
    land = xr.open_zarr(field / "g.zarr")["land"].values.astype(bool)
    np.testing.assert_array_equal(plan.inputs["T"].grid_mask, land)
    summary = run_plan(plan)
    assert summary.passes["T"] == pytest.approx(float(plan.passes()["T"]), abs=0.01)
    scores = xr.open_zarr("out/scores.zarr")["scores"]
    assert scores.dims == ("time", "member", "component") and scores.sizes["time"] == 66
    rows = ens.isel(time=slice(30, None))
    est = ddr.PCA(n_components=2).fit(rows, sample_dims=("time", "member"))
    np.testing.assert_allclose(scores.values, est.transform(rows).values, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("sample_dims: [time], sample_dim: time", "give sample_dims or sample_dim, not both"),
        ("sample_dims: [time, depth]", "sample_dims ['depth'] are not dims of it"),
        ("sample_dims: [time, time]", "sample_dims names a dim twice: ['time', 'time']"),
        ("sample_dims: [time, lat, lon]", "are all of its dims; the other dims are the features"),
    ],
)
def test_bad_sample_dims_are_refused_at_their_place(field, tmp_path, extra, message):
    inputs = f"T: {{path: {field}/g.zarr, array: t2m, {extra}}}\n"
    (problem,) = problems(write_pipeline(tmp_path, inputs, MAPS))
    col = 3 + len(f"T: {{path: {field}/g.zarr, array: t2m, ") + len("sample_dims: ")
    assert problem.startswith(f"{tmp_path / 'p.yaml'}:4:{col}: input T: "), problem
    assert message in problem


def test_sample_dims_of_the_wrong_type_are_refused(field, tmp_path):
    inputs = f"T: {{path: {field}/g.zarr, array: t2m, sample_dims: 3}}\n"
    (problem,) = problems(write_pipeline(tmp_path, inputs, MAPS))
    assert ":4:" in problem and "sample_dims" in problem


def test_a_grid_is_another_input_than_its_rows(field, tmp_path):
    """The same array read as a grid and as rows: other fingerprints (a rerun refits)."""
    grid = f"T: {{path: {field}/g.zarr, array: t2m, sample_dims: [time]}}\n"
    a = plan_pipeline(write_pipeline(tmp_path, grid, MAPS), []).inputs["T"]
    rows = f"T: {{path: {field}/g.zarr, array: true_amplitudes}}\n"
    b = plan_pipeline(write_pipeline(tmp_path, rows, MAPS), []).inputs["T"]
    assert a.fingerprint != b.fingerprint
    assert b.grid_mask is None and b.meta.shape == (96, 3)


def test_maps_plot_of_an_attribute_the_model_does_not_map(field, tmp_path):
    inputs = f"T: {{path: {field}/g.zarr, array: t2m, sample_dims: [time]}}\n"
    out = "- {kind: plot, plot: maps, from: pca, attribute: noise_variance_, path: m.png}\n"
    (problem,) = problems(write_pipeline(tmp_path, inputs, out))
    assert ":9:" in problem
    assert "PCA has no attribute 'noise_variance_' to draw as a map; it has components_" in (
        problem
    )


def test_maps_plot_draws_one_panel_per_component(field, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inputs = f"T: {{path: {field}/g.zarr, array: t2m, sample_dims: [time]}}\n"
    out = "- {kind: plot, plot: maps, from: pca, path: m.png, components: 2}\n"
    run_plan(plan_pipeline(write_pipeline(tmp_path, inputs, out), []))
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_draw_maps_panels_titles_and_blank_mask(field):
    from ddr.pipeline.outputs.plots import draw_maps

    data = xr.open_zarr(field / "g.zarr")["t2m"]
    est = ddr.PCA(n_components=3).fit(data, sample_dims="time")
    fig = draw_maps(est, None, "components_", 2)
    visible = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    share = est.explained_variance_ratio_
    assert [ax.get_title() for ax in visible] == [f"PC1 ({share[0]:.1%})", f"PC2 ({share[1]:.1%})"]
    mesh = visible[0].collections[0]
    land = xr.open_zarr(field / "g.zarr")["land"].values.astype(bool)
    assert np.ma.getmaskarray(mesh.get_array()).reshape(land.shape).tolist() == land.tolist()
    lo, hi = mesh.get_clim()
    assert lo == -hi  # one scale, centred on 0
    one = draw_maps(est, "t", "mean_")  # an attribute without components: one panel
    assert [ax.get_title() for ax in one.axes if ax.get_title()] == ["mean"]


def test_draw_maps_refuses_three_feature_dims():
    from ddr.pipeline.outputs.plots import draw_maps

    rng = np.random.default_rng(0)
    X = xr.DataArray(rng.standard_normal((20, 2, 3, 4)), dims=("time", "level", "lat", "lon"))
    est = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    with pytest.raises(ValueError, match=r"a maps plot draws 1 or 2 feature dims .*isel"):
        draw_maps(est)


def append_months(path: str, n_now: int, n_new: int, land_value_at: int | None = None) -> None:
    """Append ``n_new`` months of the demo field (as a longer demo run would give them) to
    the store at ``path`` (``n_now`` months); optionally a value over land at one of them
    (the mask changed)."""
    from ddr.demo_gridded import gridded_dataset

    longer = gridded_dataset(GriddedSpec(**{**vars(SPEC), "n_samples": n_now + n_new}))
    new = longer.isel(time=slice(n_now, None))[["t2m", "true_amplitudes"]].load()
    if land_value_at is not None:
        i, j = np.argwhere(longer["land"].values.astype(bool))[0]
        new["t2m"][land_value_at, i, j] = 1.0
    for var in new.variables.values():
        var.encoding = {}
    new.to_zarr(path, append_dim="time")


GRID_STEPS = """
  pca: {op: PCA.fit, inputs: {X: T}, with: {n_components: 2}}
  m: {op: moments, inputs: {X: T}}
"""
GRID_OUTS = """
- {kind: zarr, from: {components: pca.components_, mean: pca.mean_}, path: out/maps.zarr}
- {kind: zarr, from: m, path: out/m.zarr}
"""


def test_update_reads_only_the_appended_time_steps(tmp_path, monkeypatch):
    """``--update`` after months are appended to the field: the fit and the statistic on the
    grid read only the new months (one chunk of five, counted) and merge them into the
    statistics the last run recorded (with the mask read while planning); the maps are
    those of a fit on every month."""
    monkeypatch.chdir(tmp_path)
    write_gridded_data("g.zarr", SPEC)
    path = write_pipeline(
        tmp_path, "T: {path: g.zarr, array: t2m, sample_dims: time}\n", GRID_OUTS, GRID_STEPS
    )
    first = plan_pipeline(path, [])
    assert first.state is not None and first.state.recorded == ["pca", "m"]
    assert first.state.records["T"].identity["sample_dims"] == ["time"]
    assert "mask" in first.state.records["T"].identity
    assert run_plan(first).passes == {"T": pytest.approx(1.0, abs=0.01)}
    append_months("g.zarr", 96, 24)
    plan = plan_pipeline(path, [], update=True)
    assert plan.passes() == {"T": "0.20"}  # the new chunk of five, stored alike
    text = format_plan(plan)
    assert "step pca: reads the 24 new rows (rows 96:120) and merges them into the " in text
    summary = run_plan(plan)
    assert summary.passes == {"T": pytest.approx(0.2, abs=0.005)}
    data = xr.open_zarr("g.zarr")
    assert data.sizes["time"] == 120
    est = ddr.PCA(n_components=2).fit(data["t2m"], sample_dims="time")
    maps = xr.open_zarr("out/maps.zarr")
    np.testing.assert_allclose(
        maps["components"].values, est.as_xarray("components_").values, atol=1e-12
    )
    np.testing.assert_allclose(maps["mean"].values, est.as_xarray("mean_").values, rtol=1e-12)
    x = data["t2m"].values.astype(np.float64)
    land = data["land"].values.astype(bool)
    variance = xr.open_zarr("out/m.zarr")["variance"].values
    np.testing.assert_allclose(variance[~land], x.var(axis=0)[~land], rtol=1e-10)
    assert np.isnan(variance[land]).all()


def test_update_with_appended_time_steps_and_their_scores(tmp_path, monkeypatch):
    """The time series of a model that the new months changed are recomputed from every
    month: the fit reads the new months, the scores every month, as planned."""
    monkeypatch.chdir(tmp_path)
    write_gridded_data("g.zarr", SPEC)
    path = write_pipeline(tmp_path, "T: {path: g.zarr, array: t2m, sample_dims: time}\n", MAPS)
    run_plan(plan_pipeline(path, []))
    append_months("g.zarr", 96, 24)
    plan = plan_pipeline(path, [], update=True)
    assert plan.passes() == {"T": "1.20"}
    summary = run_plan(plan)
    assert summary.passes["T"] == pytest.approx(1.2, abs=0.01)
    data = xr.open_zarr("g.zarr")
    est = ddr.PCA(n_components=2).fit(data["t2m"], sample_dims="time")
    maps = xr.open_zarr("out/maps.zarr")["components"]
    np.testing.assert_allclose(maps.values, est.as_xarray("components_").values, atol=1e-12)
    scores = xr.open_zarr("out/scores.zarr")["scores"]
    assert scores.sizes["time"] == 120
    np.testing.assert_allclose(scores.values, est.transform(data["t2m"]).values, rtol=1e-5)


def test_update_with_another_mask_in_the_new_time_steps_is_refused(tmp_path, monkeypatch):
    """New months with a value over land (the mask changed) are refused in the pass that
    reads them, naming the point and the month; the outputs stay those of the last run."""
    monkeypatch.chdir(tmp_path)
    write_gridded_data("g.zarr", SPEC)
    path = write_pipeline(
        tmp_path, "T: {path: g.zarr, array: t2m, sample_dims: time}\n", GRID_OUTS, GRID_STEPS
    )
    run_plan(plan_pipeline(path, []))
    before = xr.open_zarr("out/maps.zarr")["components"].values
    append_months("g.zarr", 96, 24, land_value_at=5)
    month = str(xr.open_zarr("g.zarr")["time"].values[101])
    with pytest.raises(RunError) as info:
        run_plan(plan_pipeline(path, [], update=True))
    message = str(info.value)
    assert "is masked (NaN at every sample, as the grid's mask found before this fit" in message
    assert f"but has a value at sample 5 (time={month})" in message
    assert "A grid's mask must be the same at every sample (rows appended to a grid" in message
    np.testing.assert_array_equal(xr.open_zarr("out/maps.zarr")["components"].values, before)


def test_update_of_a_grid_over_several_sample_dims_reads_every_row(field, tmp_path, monkeypatch):
    """Members x time: rows appended along time are not appended to the stacked rows, so the
    fit is not recorded and an update fits it again over every row, as the plan says."""
    monkeypatch.chdir(tmp_path)
    data = xr.open_zarr(field / "g.zarr")["t2m"].load()
    ens = xr.concat([data, data + 1.0], dim="member").transpose("time", "member", "lat", "lon")
    ens.to_dataset(name="t2m").chunk({"time": 24, "member": 1}).to_zarr("ens.zarr")
    inputs = "T: {path: ens.zarr, array: t2m, sample_dims: [time, member]}\n"
    path = write_pipeline(tmp_path, inputs, MAPS)
    assert plan_pipeline(path, []).state.recorded == []
    run_plan(plan_pipeline(path, []))
    more = xr.concat([data[:24], data[:24] + 1.0], dim="member").transpose("time", "member", ...)
    more = more.assign_coords(time=data.time.values[:24] + np.timedelta64(3650, "D"))
    more.to_dataset(name="t2m").chunk({"time": 24, "member": 1}).to_zarr(
        "ens.zarr", append_dim="time"
    )
    plan = plan_pipeline(path, [], update=True)
    assert (
        "reads every row (a grid over several sample dims ['time', 'member']: rows appended "
        "along one of them are not appended to its stacked rows" in format_plan(plan)
    )
    assert run_plan(plan).passes["T"] == pytest.approx(float(plan.passes()["T"]), abs=0.01)
    stored = xr.open_zarr("ens.zarr")["t2m"]
    est = ddr.PCA(n_components=2).fit(stored, sample_dims=("time", "member"))
    maps = xr.open_zarr("out/maps.zarr")["components"]
    np.testing.assert_allclose(maps.values, est.as_xarray("components_").values, atol=1e-12)


def test_area_weights_of_the_demo_field(field, tmp_path, monkeypatch):
    """The demo's ``area_weight`` (sqrt(cos(lat)) on lat) as a fit's ``feature_weights``, as
    the docs and pipelines/eof.yaml say: the maps and time series of the direct fit."""
    monkeypatch.chdir(tmp_path)
    inputs = f"""\
        T: {{path: {field}/g.zarr, array: t2m, sample_dims: [time]}}
        area: {{path: {field}/g.zarr, array: area_weight}}
    """
    steps = """
      pca: {op: PCA.fit, inputs: {X: T, feature_weights: area}, with: {n_components: 2}}
      scores: {op: PCA.transform, inputs: {model: pca, X: T}}
    """
    run_plan(plan_pipeline(write_pipeline(tmp_path, inputs, MAPS, steps), []))
    data = xr.open_zarr(field / "g.zarr")
    w = data["area_weight"]
    np.testing.assert_allclose(w.values, np.sqrt(np.cos(np.deg2rad(data["lat"].values))))
    est = ddr.PCA(n_components=2).fit(data["t2m"], sample_dims="time", feature_weights=w)
    maps = xr.open_zarr("out/maps.zarr")["components"]
    np.testing.assert_allclose(maps.values, est.as_xarray("components_").values, atol=1e-12)
    scores = xr.open_zarr("out/scores.zarr")["scores"]
    np.testing.assert_allclose(scores.values, est.transform(data["t2m"]).values, rtol=1e-5)


def test_a_field_chunked_by_space(field, tmp_path, monkeypatch):
    """The demo field stored chunked by space (every time step of a quarter of the grid per
    chunk): the same maps as chunked by time; finding the mask reads the first time step,
    which is in every chunk, while planning: the run reads the fit's and the scores' passes
    only, planned and measured."""
    monkeypatch.chdir(tmp_path)
    write_gridded_data("s.zarr", GriddedSpec(**{**vars(SPEC), "chunk_by": "space"}))
    path = write_pipeline(tmp_path, "T: {path: s.zarr, array: t2m, sample_dims: time}\n", MAPS)
    plan = plan_pipeline(path, [])
    assert plan.passes() == {"T": "2"}
    assert run_plan(plan).passes == {"T": pytest.approx(2.0, abs=0.01)}
    data = xr.open_zarr(field / "g.zarr")
    est = ddr.PCA(n_components=2).fit(data["t2m"], sample_dims="time")
    maps = xr.open_zarr("out/maps.zarr")["components"]
    np.testing.assert_allclose(maps.values, est.as_xarray("components_").values, atol=1e-12)


def test_a_statistic_of_a_grid_is_written_on_the_grid(field, tmp_path, monkeypatch):
    """``moments`` of a grid input: its read-outs as maps (mean, variance on lat x lon;
    covariance on lat x lon x lat_2 x lon_2), NaN at the mask; one pass (the mask was read
    while planning)."""
    monkeypatch.chdir(tmp_path)
    inputs = f"T: {{path: {field}/g.zarr, array: t2m, sample_dims: [time]}}\n"
    steps = "m: {op: moments, inputs: {X: T}}\n"
    out = "- {kind: zarr, from: m, path: out/m.zarr}\n"
    plan = plan_pipeline(write_pipeline(tmp_path, inputs, out, steps), [])
    assert plan.passes() == {"T": "1"}
    assert run_plan(plan).passes == {"T": pytest.approx(1.0, abs=0.01)}
    data = xr.open_zarr(field / "g.zarr")
    land = data["land"].values.astype(bool)
    m = xr.open_zarr("out/m.zarr")
    assert m["mean"].dims == ("lat", "lon") and m["mean"].attrs["long_name"] == "mean of Moments"
    x = data["t2m"].values.astype(np.float64)
    np.testing.assert_allclose(m["mean"].values[~land], x.mean(axis=0)[~land], rtol=1e-12)
    np.testing.assert_allclose(m["variance"].values[~land], x.var(axis=0)[~land], rtol=1e-10)
    assert np.isnan(m["mean"].values[land]).all()
    assert m["covariance"].dims == ("lat", "lon", "lat_2", "lon_2")
    cov = m["covariance"].values
    i, j = np.argwhere(~land)[0]
    np.testing.assert_allclose(np.diag(cov.reshape(96, 96)), m["variance"].values.ravel())
    assert np.isnan(cov[i, j][land]).all() and m["lat"].attrs["units"] == "degrees_north"


@pytest.mark.parametrize("diagonal", [False, True])
def test_read_outs_chosen_by_name_are_maps_as_the_whole_step_writes(
    field, tmp_path, monkeypatch, diagonal
):
    """``from: {variance: m.variance}`` writes the read-out as ``from: m`` does: on the grid
    (its dims, coordinates and their attributes, NaN at the mask, units and long_name),
    named as ``from`` says; a model's attributes chosen by name are maps too (one pass: the
    whole step and its read-outs are one statistic)."""
    monkeypatch.chdir(tmp_path)
    inputs = f"T: {{path: {field}/g.zarr, array: t2m, sample_dims: [time]}}\n"
    steps = f"""
      m: {{op: moments, inputs: {{X: T}}, with: {{diagonal: {str(diagonal).lower()}}}}}
      pca: {{op: PCA.fit, inputs: {{X: T}}, with: {{n_components: 2}}}}
    """
    named = "{var: m.variance, mu: m.mean, n: m.count, total: m.total_variance}"
    out = f"""
    - {{kind: zarr, from: m, path: out/m.zarr}}
    - {{kind: zarr, from: {named}, path: out/named.zarr}}
    - {{kind: zarr, from: {{components: pca.components_, ev: pca.explained_variance_}},
       path: out/pca.zarr}}
    """
    plan = plan_pipeline(write_pipeline(tmp_path, inputs, out, steps), [])
    assert run_plan(plan).passes == {"T": pytest.approx(1.0, abs=0.01)}
    data = xr.open_zarr(field / "g.zarr")
    land = data["land"].values.astype(bool)
    whole, chosen = xr.open_zarr("out/m.zarr"), xr.open_zarr("out/named.zarr")
    assert sorted(chosen.data_vars) == ["mu", "n", "total", "var"]
    assert chosen["n"].dims == whole["count"].dims  # a number (per point if diagonal)
    np.testing.assert_array_equal(chosen["n"].values, whole["count"].values)
    for mine, theirs in [("var", "variance"), ("mu", "mean")]:
        got, want = chosen[mine], whole[theirs]
        assert got.dims == want.dims == ("lat", "lon")
        assert got.attrs == want.attrs and got.attrs["long_name"] == f"{theirs} of Moments"
        np.testing.assert_array_equal(got.values, want.values)
        assert np.isnan(got.values[land]).all() and np.isfinite(got.values[~land]).all()
        for c in ("lat", "lon"):
            np.testing.assert_array_equal(got[c].values, data[c].values)
            assert got[c].attrs == data[c].attrs
    assert chosen["var"].attrs["units"] == "K2" and chosen["mu"].attrs["units"] == "K"
    assert chosen["total"].dims == () and chosen["total"].attrs["units"] == "K2"
    assert chosen["total"].attrs == whole["total_variance"].attrs
    assert float(chosen["total"]) == float(whole["total_variance"])
    x = data["t2m"].values.astype(np.float64)
    np.testing.assert_allclose(chosen["var"].values[~land], x.var(axis=0)[~land], rtol=1e-10)
    maps = xr.open_zarr("out/pca.zarr")
    est = ddr.PCA(n_components=2).fit(data["t2m"], sample_dims="time")
    assert maps["components"].dims == ("component", "lat", "lon")
    assert np.isnan(maps["components"].values[:, land]).all()
    assert maps["components"].attrs["units"] == "1" and maps["ev"].attrs["units"] == "K2"
    np.testing.assert_allclose(maps["components"].values, est.as_xarray("components_").values)
    assert maps["lat"].attrs == data["lat"].attrs


def test_a_statistic_over_several_sample_dims(field, tmp_path, monkeypatch):
    """``moments`` of members x time: the mean over both sample dims (not one per member),
    as a map; a grid's statistics are not recorded for ``--update`` (it reads every row)."""
    monkeypatch.chdir(tmp_path)
    data = xr.open_zarr(field / "g.zarr")["t2m"].load()
    ens = xr.concat([data, data * 0.5 + 3.0], dim="member").transpose("time", "member", ...)
    ens.to_dataset(name="t2m").chunk({"time": 24, "member": 1}).to_zarr("ens.zarr")
    inputs = "T: {path: ens.zarr, array: t2m, sample_dims: [time, member]}\n"
    steps = "m: {op: moments, inputs: {X: T}}\n"
    out = "- {kind: zarr, from: m, path: out/m.zarr}\n"
    plan = plan_pipeline(write_pipeline(tmp_path, inputs, out, steps), [])
    assert plan.state is not None and plan.state.recorded == []
    run_plan(plan)
    mean = xr.open_zarr("out/m.zarr")["mean"]
    assert mean.dims == ("lat", "lon")
    want = ens.astype(np.float64).mean(("time", "member"))
    np.testing.assert_allclose(mean.values, want.values, rtol=1e-12)


def test_a_classifier_on_a_grid_with_labels_along_time(field, tmp_path, monkeypatch):
    """Labels along the grid's sample dim pair with its rows; class means are maps, and the
    predictions are on the time axis."""
    monkeypatch.chdir(tmp_path)
    data = xr.open_zarr(field / "g.zarr")
    season = (data["time"].dt.month.values % 12) // 3
    xr.Dataset(
        {"t2m": data["t2m"], "season": ("time", season)}, coords={"time": data["time"]}
    ).to_zarr("s.zarr")
    inputs = "T: {path: s.zarr, array: t2m, sample_dims: time}\ny: {path: s.zarr, array: season}\n"
    steps = """
      nb: {op: GaussianNB.fit, inputs: {X: T, y: y}}
      pred: {op: GaussianNB.predict, inputs: {model: nb, X: T}}
    """
    out = """
    - {kind: zarr, from: {theta: nb.theta_}, path: out/nb.zarr}
    - {kind: zarr, from: {pred: pred}, path: out/pred.zarr}
    """
    run_plan(plan_pipeline(write_pipeline(tmp_path, inputs, out, steps), []))
    est = ddr.GaussianNB().fit(data["t2m"], season, sample_dims="time")
    theta = xr.open_zarr("out/nb.zarr")["theta"]
    assert theta.dims == ("class", "lat", "lon")
    np.testing.assert_allclose(theta.values, est.as_xarray("theta_").values, rtol=1e-12)
    pred = xr.open_zarr("out/pred.zarr")["pred"]
    assert pred.dims == ("time",)
    np.testing.assert_array_equal(pred.values, est.predict(data["t2m"]).values)


def test_a_grid_search_step_on_a_grid(field, tmp_path, monkeypatch):
    """A fit step with ``search:`` on a grid input: the search of GridSearchCV on the grid in
    Python (the same scores and choice), its best model's maps written on the grid, in the
    search's two passes planned and measured (the mask, read while planning, handed to
    every fold's fit)."""
    monkeypatch.chdir(tmp_path)
    inputs = f"T: {{path: {field}/g.zarr, array: t2m, sample_dims: time}}\n"
    steps = """
      pca:
        op: PCA.fit
        inputs: {X: T}
        search: {param_grid: {n_components: [1, 2, 3, 5]}, cv: {hash_folds: 4, seed: 1}}
      scores: {op: PCA.transform, inputs: {model: pca, X: T}}
    """
    out = MAPS + "- {kind: cv_results, from: pca.search, path: out/cv.zarr}\n"
    plan = plan_pipeline(write_pipeline(tmp_path, inputs, out, steps), [])
    assert plan.passes() == {"T": "3"}  # the search's two, the scores'
    assert "4 folds x 4 candidates: 2 passes" in format_plan(plan)
    assert run_plan(plan).passes == {"T": pytest.approx(3.0, abs=0.01)}
    from ddr.model_selection import GridSearchCV, HashKFold

    data = xr.open_zarr(field / "g.zarr")["t2m"]
    want = GridSearchCV(ddr.PCA(), {"n_components": [1, 2, 3, 5]}, cv=HashKFold(4, seed=1)).fit(
        data, sample_dims="time"
    )
    cv = xr.open_zarr("out/cv.zarr")
    np.testing.assert_allclose(
        cv["mean_test_score"].values, want.cv_results_["mean_test_score"], rtol=1e-10
    )
    maps = xr.open_zarr("out/maps.zarr")["components"]
    assert maps.sizes["component"] == want.best_params_["n_components"]
    best = want.best_estimator_.as_xarray("components_")
    np.testing.assert_allclose(maps.values, best.values, atol=1e-12)
    assert maps.dims == ("component", "lat", "lon")


def test_update_extends_the_time_series_of_a_loaded_model(tmp_path, monkeypatch):
    """A saved model applied to a grid: its time series are extended by the new months only
    (the model did not change), their dates encoded as the output stores them (CF units of
    days since the first month), the same values as the model's transform of every month."""
    monkeypatch.chdir(tmp_path)
    write_gridded_data("g.zarr", SPEC)
    ddr.PCA(n_components=2).fit(xr.open_zarr("g.zarr")["t2m"], sample_dims="time").save(
        "pca.model.zarr"
    )
    steps = """
      pca: {op: load, with: {path: pca.model.zarr}}
      scores: {op: PCA.transform, inputs: {model: pca, X: T}}
    """
    out = "- {kind: zarr, from: scores, path: out/scores.zarr}\n"
    inputs = "T: {path: g.zarr, array: t2m, sample_dims: time}\n"
    path = write_pipeline(tmp_path, inputs, out, steps)
    run_plan(plan_pipeline(path, []))
    append_months("g.zarr", 96, 24)
    plan = plan_pipeline(path, [], update=True)
    assert "extended: rows 96:120 written, rows 0:96 kept" in format_plan(plan)
    assert plan.passes() == {"T": "0.20"}
    assert run_plan(plan).passes == {"T": pytest.approx(0.2, abs=0.005)}
    data = xr.open_zarr("g.zarr")
    scores = xr.open_zarr("out/scores.zarr")["scores"]
    np.testing.assert_array_equal(scores["time"].values, data["time"].values)
    want = ddr.load("pca.model.zarr").transform(data["t2m"])
    np.testing.assert_array_equal(scores.values, want.values)
