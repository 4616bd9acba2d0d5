"""A Dataset chunked along space (issue 32, items 1 and 4): each variable, a block of features
on its own grid, is read as a DataArray is, in row blocks of one task each reading every stored
chunk of its rows (:mod:`ddr.io.row_blocks`), and the variables' blocks are put side by side
one task per row block (which reads the stored chunks itself where the row blocks are the
variable's own): a pass reads each stored byte once (counted in stored bytes, as
tests/test_space_chunked.py counts), and the fits equal those on the same values stored in
row chunks.
"""

from __future__ import annotations

from pathlib import Path

import dask
import numpy as np
import pytest
import xarray as xr

import ddr
from ddr.pipeline._counting import CountingStore, read_counts
from ddr.stats._grid import SampleDims
from ddr.stats._input import as_rows
from ddr.stats._whole_rows import TaskBudget

T = 48
VARIABLES = ("t2m", "sp")


def _dataset(seed: int = 0) -> tuple[xr.Dataset, np.ndarray]:
    """t2m on (lat, lon) with two land points, sp on (y, x) with one, correlated through
    two shared time series; labels of three classes."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((T, 2)) * [3.0, 1.5]
    t2m = (z @ rng.standard_normal((2, 48)) + rng.standard_normal((T, 48))).reshape(T, 6, 8)
    t2m += 280.0
    t2m[:, 0, 0] = t2m[:, 4, 7] = np.nan
    sp = (z @ rng.standard_normal((2, 20)) + rng.standard_normal((T, 20))).reshape(T, 4, 5)
    sp = sp * 10.0 + 1000.0
    sp[:, 2, 3] = np.nan
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K"}),
            "sp": (("time", "y", "x"), sp, {"units": "hPa"}),
        },
        coords={"time": np.arange(T), "lat": np.linspace(-50, 50, 6), "lon": np.arange(8.0)},
    )
    return ds, np.arange(T) % 3


def _store(path: Path, ds: xr.Dataset, chunks: dict) -> Path:
    ds.chunk(chunks).to_zarr(str(path), mode="w", consolidated=False)
    return path


def _open(path: Path) -> xr.Dataset:
    """The Dataset at ``path`` through a store that counts the chunk bytes read."""
    return xr.open_zarr(CountingStore(str(path), read_only=True), consolidated=False)


def _stored(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.name != "zarr.json")


def _passes(store: Path, fn):
    """``fn()`` under the synchronous scheduler, and for each variable the bytes read from
    its array divided by the bytes stored there."""
    keys = {v: f"{store}::{v}" for v in VARIABLES}
    before = {v: read_counts().get(k, 0) for v, k in keys.items()}
    with dask.config.set(scheduler="synchronous"):
        out = fn()
    after = read_counts()
    return out, {v: (after.get(k, 0) - before[v]) / _stored(store / v) for v, k in keys.items()}


def _first_chunks(store: Path, var: str) -> float:
    """The share of ``var``'s stored bytes in its chunks of the first time block: what
    finding the mask reads (the first sample, through the chunks that hold it)."""
    first = sum(f.stat().st_size for f in (store / var / "c" / "0").rglob("*") if f.is_file())
    return first / _stored(store / var)


def close(a, b, rtol=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.max(np.abs(b[np.isfinite(b)]), initial=1.0)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


@pytest.fixture
def stores(tmp_path):
    ds, y = _dataset()
    space = _store(tmp_path / "space.zarr", ds, {"time": 6, "lat": 3, "lon": 4, "y": 2, "x": 5})
    rows = _store(tmp_path / "rows.zarr", ds, {"time": 6})
    return ds, y, space, rows


def test_each_row_block_of_all_variables_is_one_task_reading_their_stored_chunks(stores):
    _, _, space, _ = stores
    data = as_rows(_open(space), sample_dim=SampleDims(("time",))).data
    layers = list(data.__dask_graph__().layers)
    # the joining task reads each variable's stored chunks of its rows itself, copied
    # straight into place: no task reads a variable's row block first, none rechunks
    assert not [n for n in layers if n.startswith("ddr-row-blocks-") or "rechunk" in n]
    (joined,) = [name for name in layers if name.startswith("ddr-dataset-rows-")]
    assert len(data.__dask_graph__().layers[joined]) == 8 and data.chunks == ((6,) * 8, (65,))


def test_fits_read_each_stored_byte_once_and_equal_the_row_chunked_store(stores):
    ds, y, space, rows = stores
    Xs, Xr = _open(space), xr.open_zarr(str(rows), consolidated=False)
    mask = {v: _first_chunks(space, v) for v in VARIABLES}

    pca, read = _passes(space, lambda: ddr.PCA(n_components=3).fit(Xs, sample_dims="time"))
    assert read == pytest.approx({v: 1 + mask[v] for v in VARIABLES}, abs=1e-12)
    ref = ddr.PCA(n_components=3).fit(Xr, sample_dims="time")
    close(pca.components_, ref.components_)
    close(pca.explained_variance_, ref.explained_variance_)
    # against numpy on the stacked masked arrays (the variables' kept columns side by side)
    stacked = np.hstack(
        [ds[v].values.reshape(T, -1)[:, ~np.isnan(ds[v].values[0].ravel())] for v in VARIABLES]
    )
    close(pca.explained_variance_, np.linalg.eigvalsh(np.cov(stacked.T))[::-1][:3])
    # transform: the fitted masks, checked in the pass; one pass
    scores, read = _passes(space, lambda: pca.transform(Xs).compute())
    assert read == pytest.approx(dict.fromkeys(VARIABLES, 1.0), abs=1e-12)
    close(scores, ref.transform(Xr), 1e-9)
    maps = pca.as_xarray("components_")
    assert (
        np.isnan(maps["t2m"].values[:, 0, 0]).all() and np.isnan(maps["sp"].values[:, 2, 3]).all()
    )

    nb, read = _passes(space, lambda: ddr.GaussianNB().fit(Xs, y, sample_dims="time"))
    assert read == pytest.approx({v: 1 + mask[v] for v in VARIABLES}, abs=1e-12)
    nref = ddr.GaussianNB().fit(Xr, y, sample_dims="time")
    close(nb.theta_, nref.theta_)
    close(nb.var_, nref.var_)


@pytest.mark.parametrize(
    ("sp_rows", "read_apart"),
    [(8, {"t2m": 8, "sp": 6}), (12, {"sp": 4})],
    ids=["both-cut", "t2m-in-place"],
)
def test_variables_in_other_time_chunks_are_cut_to_common_row_blocks(tmp_path, sp_rows, read_apart):
    """sp stored in chunks of ``sp_rows`` time steps, t2m of 6: the row blocks are cut where
    either's ends. A variable whose row blocks are cut is read by tasks of its own (one per
    block of it: ``read_apart``), then cut; one whose blocks are the joined ones (t2m beside
    sp's 12) is read by the joining tasks. Each stored chunk is still read by one task only,
    and the fit is the same."""
    ds, _ = _dataset(1)
    path = tmp_path / "mixed.zarr"
    ds[["t2m"]].chunk({"time": 6, "lat": 3, "lon": 4}).to_zarr(
        str(path), mode="w", consolidated=False
    )
    ds[["sp"]].chunk({"time": sp_rows, "y": 2}).to_zarr(str(path), mode="a", consolidated=False)
    X = _open(path)
    data = as_rows(X, sample_dim=SampleDims(("time",))).data
    ends = sorted({*range(6, T + 1, 6), *range(sp_rows, T + 1, sp_rows)})
    assert np.cumsum(data.chunks[0]).tolist() == ends
    layers = data.__dask_graph__().layers
    reads = sorted(len(layers[n]) for n in layers if n.startswith("ddr-row-blocks-"))
    assert reads == sorted(read_apart.values())
    pca, read = _passes(path, lambda: ddr.PCA(n_components=2).fit(X, sample_dims="time"))
    mask = {v: _first_chunks(path, v) for v in VARIABLES}
    assert read == pytest.approx({v: 1 + mask[v] for v in VARIABLES}, abs=1e-12)
    close(pca.components_, ddr.PCA(n_components=2).fit(ds, sample_dims="time").components_)


def test_row_blocks_side_by_side_are_cut_to_what_a_task_holds(stores, monkeypatch):
    ds, _, space, _ = stores
    # 65 columns in float64 and their float64 copy: 1040 bytes a row; a task holds 4 rows
    budget = TaskBudget(2 * 4 * 65 * 16, 2, 1.0, "worker tcp://w:1")
    monkeypatch.setattr("ddr.stats._grid_blocks.task_budget", lambda: budget)
    X = _open(space)
    data = as_rows(X, sample_dim=SampleDims(("time",))).data
    assert data.chunks[0] == (3,) * 16  # each block of 6 stored rows cut in two
    pca, read = _passes(space, lambda: ddr.PCA(n_components=2).fit(X, sample_dims="time"))
    assert read == pytest.approx({v: 1 + _first_chunks(space, v) for v in VARIABLES}, 1e-12)
    close(pca.components_, ddr.PCA(n_components=2).fit(ds, sample_dims="time").components_)


def test_a_row_of_all_variables_that_no_task_holds_is_refused(stores, monkeypatch):
    """A row of each variable fits a task (t2m's 48 values, sp's 20) but not the two side by
    side (65 kept features): refused before the pass, naming the joint row (what was read is
    each variable's first sample, its mask, which says how many features are kept)."""
    _, _, _, rows = stores
    small = TaskBudget(900, 1, 1.0, "worker tcp://w:1")  # 900 bytes: 56 values + copies
    monkeypatch.setattr("ddr.stats._grid_blocks.task_budget", lambda: small)
    monkeypatch.setattr("ddr.stats._whole_rows.task_budget", lambda scheduler=None: small)
    before = {v: read_counts().get(f"{rows}::{v}", 0) for v in VARIABLES}
    with pytest.raises(
        ValueError,
        match=r"^X: a row block of 1 rows x 65 features \(float64\) needs 0\.0 MiB in one task "
        r".* Not even one row of 65 features fits: give each worker more memory "
        r"\(memory_limit\) or fewer threads$",
    ):
        as_rows(_open(rows), sample_dim=SampleDims(("time",)))
    read = {
        v: (read_counts().get(f"{rows}::{v}", 0) - before[v]) / _stored(rows / v) for v in VARIABLES
    }
    assert read == pytest.approx({v: _first_chunks(rows, v) for v in VARIABLES}, abs=1e-12)


def test_a_dataset_with_a_variable_in_memory_and_one_chunked(stores):
    """Variables of both kinds: the one in memory is cut to the other's row blocks."""
    ds, _, space, _ = stores
    X = _open(space)
    mixed = xr.Dataset({"t2m": X["t2m"], "sp": ds["sp"]})
    data = as_rows(mixed, sample_dim=SampleDims(("time",))).data
    assert data.chunks[0] == (6,) * 8
    got = ddr.PCA(n_components=2).fit(mixed, sample_dims="time")
    close(got.components_, ddr.PCA(n_components=2).fit(ds, sample_dims="time").components_)


def test_the_variables_sit_in_the_order_of_their_names(stores):
    """zarr 3 lists a group's arrays in no fixed order (and xarray's data_vars follow it):
    the features are stacked by variable name, so a Dataset in either order gives the same
    bits and the same feature blocks."""
    ds, _, space, _ = stores
    a = ddr.PCA(n_components=2).fit(ds[["t2m", "sp"]], sample_dims="time")
    b = ddr.PCA(n_components=2).fit(ds[["sp", "t2m"]], sample_dims="time")
    np.testing.assert_array_equal(a.components_, b.components_)
    assert list(a.as_xarray("components_").data_vars) == ["sp", "t2m"]
    c = ddr.PCA(n_components=2).fit(_open(space), sample_dims="time")
    close(c.components_, a.components_)


@pytest.mark.parametrize("chunks", [{"time": 6}, {"time": 6, "lat": 3, "y": 2}])
def test_each_variables_mask_and_values_are_checked_where_the_blocks_are_stacked(stores, chunks):
    """The task that puts the variables side by side selects each one's kept features and
    checks them: a masked point with a value and a NaN at a kept point are named by
    variable, feature and sample (the row counted across the row blocks)."""
    ds = stores[0]
    bad = ds.copy(deep=True)
    bad["sp"][30, 2, 3] = 5.0
    with pytest.raises(
        ValueError,
        match=r"^X\['sp'\]: the feature at y\[2\], x\[3\] is NaN at the first sample \(time=0\), "
        r"so it was taken as masked .* but it has a value at sample 30 \(time=30\)",
    ):
        ddr.PCA(n_components=2).fit(bad.chunk(chunks), sample_dims="time")
    bad = ds.copy(deep=True)
    bad["t2m"][40, 1, 1] = np.nan
    with pytest.raises(
        ValueError,
        match=r"^X\['t2m'\]: the feature at lat=-30.0, lon=1.0 is NaN at some samples but not "
        r"at every sample \(NaN at sample 40 \(time=40\)\)",
    ):
        ddr.PCA(n_components=2).fit(bad.chunk(chunks), sample_dims="time")


def test_a_stored_variables_chunks_are_checked_as_they_are_put_in_place(stores, tmp_path):
    """Read by the joining task chunk by chunk, a variable stored along space has the same
    checks and messages: of two masked points with a value in other chunks the one at the
    first sample is named (then the first feature), and a NaN at a kept point by its
    feature and sample."""
    ds = stores[0]
    space = {"time": 6, "lat": 3, "lon": 4, "y": 2, "x": 5}
    bad = ds.copy(deep=True)
    bad["t2m"][31, 4, 7] = 5.0  # the last chunk along space
    bad["t2m"][33, 0, 0] = 6.0  # the first, two samples later
    bad["t2m"][31, 0, 0] = 7.0  # same sample, an earlier feature
    path = _store(tmp_path / "masked.zarr", bad, space)
    with pytest.raises(
        ValueError,
        match=r"^X\['t2m'\]: the feature at lat=-50.0, lon=0.0 is NaN at the first sample "
        r"\(time=0\), so it was taken as masked .* but it has a value at sample 31 \(time=31\)",
    ):
        ddr.PCA(n_components=2).fit(_open(path), sample_dims="time")
    bad = ds.copy(deep=True)
    bad["sp"][40, 3, 4] = np.nan
    bad["sp"][41, 0, 0] = np.nan
    path = _store(tmp_path / "holes.zarr", bad, space)
    with pytest.raises(
        ValueError,
        match=r"^X\['sp'\]: the feature at y\[0\], x\[0\] is NaN at some samples but not "
        r"at every sample \(NaN at sample 41 \(time=41\)\)",
    ):
        ddr.PCA(n_components=2).fit(_open(path), sample_dims="time")
