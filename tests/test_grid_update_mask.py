"""``ddr run --update`` on a grid takes the mask the last run recorded (issue 32): planning
reads no sample where the stored chunks of the first sample are as they were, so an update
of a field chunked by space (whose first time step lies in every chunk) reads the appended
time steps only, planning included; the results are those of a fit on every time step. The
state keeps the mask as packed bits (no pickle); a field rewritten since (another land mask),
a first row block that was partial, or a damaged record read the first sample again, and
another mask makes the update a full run over every row."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import xarray as xr
import zarr

import ddr
from ddr.demo_gridded import GriddedSpec, gridded_dataset, write_gridded_data
from ddr.io.locations import resolve
from ddr.pipeline import plan_pipeline, run_plan
from ddr.pipeline._counting import count_key, read_counts
from ddr.pipeline.plan import format_plan
from ddr.pipeline.run_state import STATE_ATTR, read_state

SPEC = GriddedSpec(96, 8, 12, chunk_rows=24, seed=3)
SPACE = GriddedSpec(**{**vars(SPEC), "chunk_by": "space"})

PIPELINE = """\
ddr: 1
name: grid
inputs:
  T: {path: g.zarr, array: t2m, sample_dims: time}
steps:
  pca: {op: PCA.fit, inputs: {X: T}, with: {n_components: 2}}
  m: {op: moments, inputs: {X: T}}
outputs:
  - {kind: zarr, from: {components: pca.components_}, path: out/maps.zarr}
  - {kind: zarr, from: m, path: out/m.zarr}
"""


def append_months(spec: GriddedSpec, n_new: int) -> None:
    """Append ``n_new`` months of the demo field ``spec`` (as a longer run of the demo would
    give them) to ``g.zarr``, in its stored chunks."""
    longer = gridded_dataset(GriddedSpec(**{**vars(spec), "n_samples": spec.n_samples + n_new}))
    new = longer.isel(time=slice(spec.n_samples, None))[["t2m", "true_amplitudes"]].load()
    for var in new.variables.values():
        var.encoding = {}
    new.to_zarr("g.zarr", append_dim="time")


def planning_reads(plan_args: dict) -> tuple[object, int]:
    """A plan of ``p.yaml`` and the bytes of ``g.zarr/t2m`` read while making it."""
    before = read_counts()
    plan = plan_pipeline("p.yaml", [], **plan_args)
    key = count_key(plan.inputs["T"].store_root, "t2m")
    return plan, read_counts().get(key, 0) - before.get(key, 0)


def chunk_bytes(where: str, block: int | None = None) -> int:
    """Bytes of the stored chunks of ``where`` (those of one row block, ``c/<block>/...``)."""
    from pathlib import Path

    files = [f for f in Path(where, "c").rglob("*") if f.is_file()]
    if block is not None:
        files = [f for f in files if f.relative_to(Path(where, "c")).parts[0] == str(block)]
    return sum(f.stat().st_size for f in files)


def assert_a_fit_on_every_month() -> None:
    """The outputs are those of PCA and moments of every month now stored in ``g.zarr``."""
    data = xr.open_zarr("g.zarr")
    est = ddr.PCA(n_components=2).fit(data["t2m"], sample_dims="time")
    maps = xr.open_zarr("out/maps.zarr")["components"]
    np.testing.assert_allclose(maps.values, est.as_xarray("components_").values, atol=1e-12)
    x = data["t2m"].values.astype(np.float64)
    land = data["land"].values.astype(bool)
    variance = xr.open_zarr("out/m.zarr")["variance"]
    assert variance.dims == ("lat", "lon")
    np.testing.assert_allclose(variance.values[~land], x.var(axis=0)[~land], rtol=1e-10)
    assert np.isnan(variance.values[land]).all()


@pytest.fixture
def first_run(tmp_path, monkeypatch, request):
    """``p.yaml`` run once on the demo field stored as ``request.param`` says."""
    monkeypatch.chdir(tmp_path)
    spec = getattr(request, "param", SPEC)
    write_gridded_data("g.zarr", spec)
    (tmp_path / "p.yaml").write_text(PIPELINE)
    run_plan(plan_pipeline("p.yaml", []))
    return spec


@pytest.mark.parametrize("first_run", [SPACE], indirect=True)
def test_update_of_a_field_chunked_by_space_reads_no_sample_while_planning(first_run):
    """Chunked by space, every chunk holds the first time step: a first plan reads the whole
    store to find the mask; the update's plan reads nothing, and its run reads the chunks
    of the 24 new months only (planned = measured), for the maps and moments of a fit on
    all 120 months."""
    again, read = planning_reads({"resume": True})
    assert read == chunk_bytes("g.zarr/t2m")  # the first sample: every chunk, a whole pass
    append_months(first_run, 24)
    plan, read = planning_reads({"update": True})
    assert read == 0
    np.testing.assert_array_equal(plan.inputs["T"].grid_mask, again.inputs["T"].grid_mask)
    assert "step pca: reads the 24 new rows (rows 96:120) and merges them" in format_plan(plan)
    share = chunk_bytes("g.zarr/t2m", block=1) / chunk_bytes("g.zarr/t2m")
    assert float(plan.passes()["T"]) == pytest.approx(share, abs=0.005)
    assert run_plan(plan).passes["T"] == pytest.approx(share, abs=0.005)
    assert_a_fit_on_every_month()


def test_update_chunked_by_time_reads_no_sample_while_planning(first_run):
    """The same chunked by time: the plan reads nothing (it read the first chunk before),
    the run the new months."""
    append_months(first_run, 24)
    plan, read = planning_reads({"update": True})
    assert read == 0
    assert plan.passes() == {"T": "0.20"}
    assert run_plan(plan).passes["T"] == pytest.approx(0.2, abs=0.005)
    assert_a_fit_on_every_month()


def test_the_state_keeps_the_mask_as_packed_bits(first_run, tmp_path):
    """One bit per grid point in an uint8 array of the state's group (8 x 12 points: 12
    bytes), named by the input; read back as the land mask."""
    group = zarr.open_group(str(tmp_path / "out/grid.state.zarr"), mode="r")
    entry = group.attrs[STATE_ATTR]["masks"]["T"]
    assert entry["shape"] == [8, 12]
    bits = group[entry["bits"]["__array__"]]
    assert bits.dtype == np.uint8 and bits.shape == (12,)
    state, why = read_state(resolve(str(tmp_path / "out/grid.state.zarr")))
    assert why == ""
    land = xr.open_zarr("g.zarr")["land"].values.astype(bool)
    np.testing.assert_array_equal(state.mask("T"), land)
    assert state.mask("absent") is None


def test_a_field_rewritten_with_another_mask_is_fitted_again(first_run):
    """The field rewritten (another land: another population seed) with more months: its
    chunks are not those recorded, so the plan reads the first sample (the new mask, part of
    the input's identity) and fits every month again."""
    other = GriddedSpec(**{**vars(SPEC), "n_samples": 120, "seed": 5})
    write_gridded_data("other.zarr", other)  # (ddr writes no output over an input it read)
    shutil.rmtree("g.zarr")
    shutil.move("other.zarr", "g.zarr")
    land = xr.open_zarr("g.zarr")["land"].values.astype(bool)
    old = read_state(resolve("out/grid.state.zarr"))[0].mask("T")
    assert not np.array_equal(land, old)
    plan, read = planning_reads({"update": True})
    assert read == chunk_bytes("g.zarr/t2m", block=0)  # the first sample's chunk
    np.testing.assert_array_equal(plan.inputs["T"].grid_mask, land)
    assert plan.update is not None and plan.update.full_run is not None
    assert plan.update.full_run == "input T: what the pipeline reads of it changed"
    assert run_plan(plan).passes["T"] == pytest.approx(1.0, abs=0.01)
    assert_a_fit_on_every_month()


@pytest.mark.parametrize(
    "first_run", [GriddedSpec(**{**vars(SPEC), "n_samples": 20})], indirect=True
)
def test_a_first_block_that_was_partial_reads_the_first_sample(first_run):
    """20 months in chunks of 24: appending rewrites the first chunk, so the first sample
    may differ from the one recorded; the plan reads it (that chunk) and merges."""
    append_months(first_run, 24)
    plan, read = planning_reads({"update": True})
    assert read == chunk_bytes("g.zarr/t2m", block=0)
    assert plan.update.full_run is None
    run_plan(plan)
    assert_a_fit_on_every_month()


@pytest.mark.parametrize(
    "damage",
    [
        lambda masks: masks["T"].update(shape=[8, 11]),  # other feature sizes
        lambda masks: masks["T"].update(shape=[12, 8]),  # bits of another grid
        lambda masks: masks["T"].update(bits={"__array__": "absent"}),  # no array
        lambda masks: masks.pop("T"),  # a state written before masks were recorded
    ],
)
def test_a_mask_record_that_cannot_be_used_is_found_again(first_run, damage):
    """A state whose mask entry is not the mask of the input's identity (or is missing) is
    not trusted: the plan reads the first sample, and the update merges as before."""
    group = zarr.open_group("out/grid.state.zarr", mode="r+")
    data = dict(group.attrs[STATE_ATTR])
    damage(data["masks"])
    group.attrs[STATE_ATTR] = data
    append_months(first_run, 24)
    plan, read = planning_reads({"update": True})
    assert read == chunk_bytes("g.zarr/t2m", block=0)
    assert plan.update.full_run is None and plan.passes() == {"T": "0.20"}
    run_plan(plan)
    assert_a_fit_on_every_month()
