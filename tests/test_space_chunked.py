"""Data chunked along features (issue 32, item 4): row blocks assembled from every feature
chunk of their rows inside one reading task, each stored byte read once per pass.

Every fit on a store chunked along features (a 2-D array, a (time, lat, lon) grid chunked by
lat and lon) is compared with the same fit on the same values stored in row chunks, and its
reads are counted in stored bytes (:class:`ddr.pipeline._counting.CountingStore`: the bytes
of every chunk file read, whoever reads it). Also: the graph (one task per row block), the
grouping of thin row chunks, a generic dask array chunked along features (merged by dask
only where each chunk is read once), the memory check and the wide-data PCA solver.
"""

from __future__ import annotations

from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import ddr
from ddr.io import from_zarr
from ddr.io.row_blocks import block_rows, row_blocks
from ddr.io.zarr_chunks import StoredChunks
from ddr.pipeline._counting import CountingStore, read_counts
from ddr.stats import ClassMoments, Moments, compute
from ddr.stats._grid import SampleDims
from ddr.stats._input import as_rows
from ddr.stats._whole_rows import TaskBudget, merge_feature_chunks, task_budget
from ddr.testing import counting_dask_array

N, D = 120, 30
T, LAT, LON = 48, 6, 8
MASKED = [(0, 0), (2, 5), (5, 7)]


# ------------------------------------------------------------------------ data
def _table(rng):
    """(N, D) correlated columns on an offset, and labels of three classes."""
    mix = rng.standard_normal((D, D)) * 0.3 + np.diag(np.linspace(3, 1, D))
    X = rng.standard_normal((N, D)) @ mix + 1e3
    return X, np.arange(N) % 3


def _store(path: Path, values: np.ndarray, chunks: tuple[int, ...]) -> Path:
    z = zarr.create_array(str(path), shape=values.shape, chunks=chunks, dtype=values.dtype)
    z[...] = values
    return path


def _counted(path: Path) -> zarr.Array:
    """The array at ``path`` through a store that counts the chunk bytes read from it."""
    return zarr.open_array(store=CountingStore(str(path), read_only=True), mode="r")


def _stored(path: Path) -> int:
    """Bytes of the chunk files under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.name != "zarr.json")


def _passes(path: Path, fn):
    """``fn()`` under the synchronous scheduler, and the bytes it read from the array at
    ``path`` (opened through a :class:`CountingStore` at it or at its group) divided by the
    bytes stored there."""
    keys = (f"{path}::", f"{path.parent}::{path.name}")
    before = sum(read_counts().get(k, 0) for k in keys)
    with dask.config.set(scheduler="synchronous"):
        out = fn()
    return out, (sum(read_counts().get(k, 0) for k in keys) - before) / _stored(path)


def _grid(rng):
    """(time, lat, lon) with three land points (NaN at every time), and labels."""
    kept = LAT * LON - len(MASKED)
    mix = rng.standard_normal((kept, kept)) * 0.2 + np.diag(np.linspace(3, 1, kept))
    values = rng.standard_normal((T, kept)) @ mix + 280.0
    mask = np.zeros((LAT, LON), dtype=bool)
    for at in MASKED:
        mask[at] = True
    full = np.full((T, LAT * LON), np.nan)
    full[:, ~mask.ravel()] = values
    X = xr.DataArray(
        full.reshape(T, LAT, LON),
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(T), "lat": np.linspace(-50, 50, LAT), "lon": np.arange(LON)},
        name="t2m",
    )
    return X, np.arange(T) % 3


def _grid_store(path: Path, X: xr.DataArray, chunks: dict) -> Path:
    X.to_dataset().chunk(chunks).to_zarr(str(path), mode="w", consolidated=False)
    return path / X.name


def close(a, b, rtol=1e-12):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.max(np.abs(b[np.isfinite(b)]), initial=1.0)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


# ------------------------------------------------------------------------ the graph
def test_a_row_block_is_one_task_reading_every_feature_chunk_of_its_rows(tmp_path, rng):
    X, _ = _table(rng)
    path = _store(tmp_path / "space.zarr", X, (12, 8))
    x = da.from_zarr(str(path))
    assert x.numblocks == (10, 4)
    rows = as_rows(x).data
    graph = rows.__dask_graph__()
    # one layer, one task per row block, nothing else (no rechunk, no per-chunk reads)
    assert list(graph.layers) == [rows.name] and rows.name.startswith("ddr-row-blocks-")
    assert rows.chunks == ((12,) * 10, (D,))
    assert len(graph) == 10
    np.testing.assert_array_equal(rows.compute(scheduler="synchronous"), X)
    # ddr's own from_zarr reads the same way, with its missing-chunk policy kept
    mine = as_rows(from_zarr(str(path), missing_chunks="fill")).data
    assert list(mine.__dask_graph__().layers) == [mine.name] and len(mine.__dask_graph__()) == 10
    np.testing.assert_array_equal(mine.compute(scheduler="synchronous"), X)


def test_thin_row_chunks_are_grouped_to_the_target_size(tmp_path, rng):
    X, _ = _table(rng)
    path = _store(tmp_path / "thin.zarr", X, (1, 8))  # one row, a quarter of the features
    x = da.from_zarr(str(path))
    with dask.config.set({"array.chunk-size": f"{5 * D * 8}B"}):
        rows = as_rows(x).data
    assert rows.chunks == ((5,) * 24, (D,))  # five stored rows per block: 5 x D x 8 bytes
    # the default target (128 MiB) groups at most so that there are 8 blocks at least
    assert as_rows(x).data.chunks[0] == (15,) * 8
    np.testing.assert_array_equal(rows.compute(scheduler="synchronous"), X)


def test_block_rows_keeps_whole_stored_chunks_and_the_cap():
    # 1000 rows stored 10 at a time, 1 KiB a row: 64 KiB blocks are 6 chunks of 10 rows
    assert block_rows(10, 1000, 1024, 64 * 1024) == 60
    assert block_rows(10, 1000, 1024, 64 * 1024, cap=25) == 20  # what a task holds
    assert block_rows(10, 1000, 1024, 64 * 1024, cap=3) == 10  # never less than a chunk
    assert block_rows(10, 50, 1024, 2**30) == 10  # 5 chunks: fewer than 8 blocks, not grouped


def test_row_blocks_cover_every_stored_chunk_once_at_the_edges(tmp_path, rng):
    values = rng.standard_normal((7, 5, 9))
    path = _store(tmp_path / "edges.zarr", values, (3, 2, 4))  # partial chunks on every axis
    src = StoredChunks(zarr.open_array(str(path), mode="r"))
    for whole in [(1, 2), (2,), (0, 2)]:
        out = row_blocks(src, whole)
        assert all(len(out.chunks[a]) == 1 for a in whole)
        np.testing.assert_array_equal(out.compute(scheduler="synchronous"), values)


# ------------------------------------------------------------------------ fits and passes
def test_fits_on_a_store_chunked_along_features_equal_fits_on_row_chunks(tmp_path, rng):
    X, y = _table(rng)
    space = _store(tmp_path / "space.zarr", X, (12, 8))
    rows = _store(tmp_path / "rows.zarr", X, (12, D))
    xs, xr_ = da.from_zarr(_counted(space)), da.from_zarr(str(rows))

    m, passes = _passes(space, lambda: compute(Moments, xs))
    assert passes == 1
    ref = compute(Moments, xr_)
    close(m.mean, ref.mean)
    close(m.covariance(), ref.covariance())
    cm, passes = _passes(space, lambda: compute(ClassMoments.spec(diagonal=True), xs, y))
    assert passes == 1
    close(cm.means, compute(ClassMoments.spec(diagonal=True), xr_, y).means)

    pca, passes = _passes(space, lambda: ddr.PCA(n_components=4).fit(xs))
    assert passes == pca.n_passes_ == 1
    pref = ddr.PCA(n_components=4).fit(xr_)
    close(pca.components_, pref.components_)
    close(pca.explained_variance_, pref.explained_variance_)
    nb, passes = _passes(space, lambda: ddr.GaussianNB().fit(xs, y))
    assert passes == 1
    nref = ddr.GaussianNB().fit(xr_, y)
    close(nb.theta_, nref.theta_)
    close(nb.var_, nref.var_)
    # the transform reads the space-chunked store once too
    scores, passes = _passes(space, lambda: pca.transform(xs).compute())
    assert passes == 1
    close(scores, pref.transform(X))


def test_a_grid_chunked_by_lat_and_lon_fits_as_the_grid_chunked_by_time(tmp_path, rng):
    X, y = _grid(rng)
    space = _grid_store(tmp_path / "space.zarr", X, {"time": 6, "lat": 3, "lon": 4})
    by_time = _grid_store(tmp_path / "time.zarr", X, {"time": 6, "lat": -1, "lon": -1})
    Xs = xr.open_zarr(CountingStore(str(space.parent), read_only=True), consolidated=False)
    Xs = Xs[X.name]
    Xt = xr.open_zarr(str(by_time.parent), consolidated=False)[X.name]
    assert Xs.data.numblocks == (8, 2, 2)
    # the mask is read from the first sample: the four chunks of the first time chunk, once
    first = sum(f.stat().st_size for f in (space / "c" / "0").rglob("*") if f.is_file())
    extra = first / _stored(space)

    pca, passes = _passes(space, lambda: ddr.PCA(n_components=3).fit(Xs, sample_dims="time"))
    assert passes == pytest.approx(1 + extra, abs=1e-12)
    pref = ddr.PCA(n_components=3).fit(Xt, sample_dims="time")
    close(pca.components_, pref.components_)
    close(pca.explained_variance_ratio_, pref.explained_variance_ratio_)
    # transform: lazy, then one pass (the fitted mask is checked, not read again)
    scores, passes = _passes(space, lambda: pca.transform(Xs).compute())
    assert passes == 1
    close(scores, pref.transform(Xt))
    maps = pca.as_xarray("components_")
    assert pca.components_.shape == (3, LAT * LON - len(MASKED))
    assert all(np.isnan(maps.values[:, i, j]).all() for i, j in MASKED)
    nb, passes = _passes(space, lambda: ddr.GaussianNB().fit(Xs, y, sample_dims="time"))
    assert passes == pytest.approx(1 + extra, abs=1e-12)
    nref = ddr.GaussianNB().fit(Xt, y, sample_dims="time")
    close(nb.theta_, nref.theta_)
    close(nb.var_, nref.var_)
    m, passes = _passes(space, lambda: compute(Moments, Xs, sample_dim=("time",)))
    assert passes == pytest.approx(1 + extra, abs=1e-12)
    close(m.covariance(), compute(Moments, Xt, sample_dim=("time",)).covariance())
    # the grid's feature dims in another order than stored (lon, lat, time) read the same
    # (features in that order: compared as maps)
    Xr = Xs.transpose("lon", "lat", "time")
    other = ddr.PCA(n_components=3).fit(Xr, sample_dims="time").as_xarray("components_")
    close(other.transpose(*maps.dims), maps)


def test_the_grid_is_stacked_from_one_row_block_task_per_time_block(tmp_path, rng):
    X, _ = _grid(rng)
    space = _grid_store(tmp_path / "space.zarr", X, {"time": 6, "lat": 3, "lon": 4})
    Xs = xr.open_zarr(str(space.parent), consolidated=False)[X.name]
    rows = as_rows(Xs, sample_dim=SampleDims(("time",))).data
    reads = [n for n in rows.__dask_graph__().layers if n.startswith("ddr-row-blocks-")]
    assert len(reads) == 1 and len(rows.__dask_graph__().layers[reads[0]]) == 8
    assert not [n for n in rows.__dask_graph__().layers if "rechunk" in n]


# ------------------------------------------------------------------------ generic dask
def test_a_dask_array_chunked_along_features_is_merged_with_one_read_per_chunk(rng):
    X, y = _table(rng)
    x, counter = counting_dask_array(X, chunks=(20, 8))
    with dask.config.set(scheduler="synchronous"):
        pca = ddr.PCA(n_components=3).fit(x)
        assert counter.reads == x.npartitions  # each chunk read once: one pass
        counter.reset()
        nb = ddr.GaussianNB().fit(x, y)
        assert counter.reads == x.npartitions
    close(pca.components_, ddr.PCA(n_components=3).fit(X).components_)
    close(nb.theta_, ddr.GaussianNB().fit(X, y).theta_)
    # a grid of dask chunks along lat and lon, not from a Zarr store
    G, labels = _grid(rng)
    ref = ddr.GaussianNB().fit(G, labels, sample_dims="time")
    got = ddr.GaussianNB().fit(
        G.chunk({"time": 10, "lat": 3, "lon": 4}), labels, sample_dims="time"
    )
    close(got.theta_, ref.theta_)


def test_a_merge_that_is_not_a_concatenation_is_refused():
    x = da.zeros((8, 10), chunks=(4, 5))
    assert merge_feature_chunks(x, (1,)) is not None
    # dask's rechunk of unknown row chunks is no plan at all
    unknown = da.zeros((8, 10), chunks=(4, 5))[da.zeros(8, chunks=4) == 0]
    assert merge_feature_chunks(unknown, (1,)) is None
    with pytest.raises(
        ValueError,
        match=r"X is chunked along features \(column chunks \(5, 5\)\); ddr reads whole rows. "
        r"Rechunk with X.rechunk\(\{1: -1\}\)",
    ):
        as_rows(unknown)


def test_a_grid_whose_merge_is_not_a_concatenation_is_refused_with_the_rechunk(rng, monkeypatch):
    G, _ = _grid(rng)
    monkeypatch.setattr("ddr.stats._grid.merge_feature_chunks", lambda x, axes: None)
    with pytest.raises(
        ValueError,
        match=r"^G is chunked along its feature dims \('lon': 2 chunks\); ddr reads whole "
        r"rows \(every feature of a sample in one block\). Rechunk with "
        r"G.chunk\(\{'lon': -1\}\)",
    ):
        as_rows(G.chunk({"time": 20, "lon": 4}), sample_dim=SampleDims(("time",)), name="G")


# ------------------------------------------------------------------------ memory check
def _budget(per_task: int) -> TaskBudget:
    return TaskBudget(per_task * 2, 2, 1.0, "worker tcp://w:1")


def test_a_row_block_a_task_cannot_hold_is_refused_before_any_read(tmp_path, monkeypatch):
    # never written: nothing could be read, and the stored chunks are 600 rows x a quarter
    path = tmp_path / "big.zarr"
    zarr.create_array(str(path), shape=(1200, 400), chunks=(600, 100), dtype="float32")
    # 600 x 400 x (4 + 8) bytes = 2.7 MiB in a task; a task holds 1 MiB: 218 rows
    monkeypatch.setattr("ddr.stats._whole_rows.task_budget", lambda scheduler=None: _budget(2**20))
    monkeypatch.setattr("ddr.io.row_blocks.task_budget", lambda: _budget(2**20))
    x = da.from_zarr(_counted(path))
    with pytest.raises(
        ValueError,
        match=r"^X: a row block of 600 rows x 400 features \(float32\) needs 2\.7 MiB in one "
        r"task \(the block as read, 0\.9 MiB, and the float64 copy the statistics work on\), "
        r"more than a task can hold: worker tcp://w:1 has memory_limit 2\.0 MiB and runs 2 "
        r"task\(s\) at once: 1\.0 MiB per task before dask pauses it \(100% of the limit\)\. Give "
        r"X row blocks of at most 218 rows: X.rechunk\(\{0: 218, 1: -1\}\) \(or store the "
        r"Zarr array with chunks of at most 218 rows, e.g. chunks=\(218, 400\)\)$",
    ):
        _passes(path, lambda: ddr.PCA(n_components=2).fit(x))
    assert read_counts().get(f"{path}::", 0) == 0
    # a grid: the chunking along its sample dim, with the feature dims whole
    G = xr.DataArray(
        da.zeros((1200, 20, 20), chunks=(600, 10, 20), dtype="f4"), dims=("time", "lat", "lon")
    )
    with pytest.raises(
        ValueError,
        match=r"^G: a row block of 600 rows x 400 features .* Give G row blocks of at most "
        r"218 rows: G.chunk\(\{'time': 218, 'lat': -1, 'lon': -1\}\) \(or store the Zarr "
        r"array with chunks of at most 218 along 'time'\)$",
    ):
        as_rows(G, sample_dim=SampleDims(("time",)), name="G")
    # not one row fits
    monkeypatch.setattr("ddr.stats._whole_rows.task_budget", lambda scheduler=None: _budget(100))
    with pytest.raises(
        ValueError,
        match=r"Not even one row of 400 features fits: give each worker more memory "
        r"\(memory_limit\) or fewer threads$",
    ):
        as_rows(x)


def test_the_budget_is_the_smallest_worker_per_thread_of_the_active_cluster(client):
    budget = task_budget()
    assert budget is not None and budget.where.startswith("worker ")
    assert budget.limit == 2**30 and budget.nthreads == 1
    assert budget.per_task == int(0.8 * 2**30)
    local = task_budget(scheduler="synchronous")
    assert local is not None and local.where == "this machine"


def test_row_block_tasks_run_on_a_distributed_cluster(tmp_path, rng, client):
    """The reading tasks (ddr's reader inside them) travel to worker processes."""
    X, y = _table(rng)
    path = _store(tmp_path / "space.zarr", X, (12, 8))
    nb = ddr.GaussianNB().fit(da.from_zarr(str(path)), y)
    ref = ddr.GaussianNB().fit(X, y)
    close(nb.theta_, ref.theta_)
    close(nb.var_, ref.var_)


def test_row_blocks_are_never_grouped_beyond_what_a_task_holds(tmp_path, rng, monkeypatch):
    X, _ = _table(rng)
    path = _store(tmp_path / "thin.zarr", X, (1, 8))
    # a task holds 3 rows of D float64 (plus their float64 copy): blocks of 3 stored rows
    monkeypatch.setattr("ddr.io.row_blocks.task_budget", lambda: _budget(3 * D * 16))
    with dask.config.set({"array.chunk-size": "1GiB"}):
        assert as_rows(da.from_zarr(str(path))).data.chunks[0] == (3,) * 40


# ------------------------------------------------------------------------ wide data
def test_auto_takes_the_randomized_solver_for_wide_space_chunked_data(tmp_path, rng):
    from ddr.decomposition.pca import AUTO_COVARIANCE_MAX_FEATURES

    d = AUTO_COVARIANCE_MAX_FEATURES + 52
    basis = np.linalg.qr(rng.standard_normal((d, 3)))[0].T
    X = (rng.standard_normal((60, 3)) * [30.0, 20.0, 10.0]) @ basis
    X += 0.01 * rng.standard_normal((60, d))
    space = _store(tmp_path / "wide.zarr", X, (20, 700))
    rows = _store(tmp_path / "rows.zarr", X, (20, d))
    xs = da.from_zarr(_counted(space))
    pca, passes = _passes(space, lambda: ddr.PCA(n_components=3, random_state=0).fit(xs))
    assert pca.solver_ == "randomized"
    assert passes == pca.n_passes_  # every pass reads each stored byte once
    ref = ddr.PCA(n_components=3, random_state=0).fit(da.from_zarr(str(rows)))
    close(pca.components_, ref.components_, 1e-10)
    close(pca.explained_variance_, ref.explained_variance_, 1e-10)


def test_a_pipeline_reads_a_store_chunked_along_features(tmp_path, monkeypatch):
    """A pipeline input stored in chunks along features (once refused at validation): the
    PCA step's model and the scores it writes are the row-chunked store's, bit for bit, in the
    passes planned and counted (fit, then scores: 2)."""
    import json

    from ddr.pipeline import plan_pipeline, run_plan

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 5)) @ rng.normal(size=(5, 24)) + rng.normal(size=(2000, 24))
    for name, chunks in (("rows", (400, 24)), ("space", (400, 6))):
        group = zarr.open_group(f"{name}.zarr", mode="w")
        group.create_array(
            "X", shape=X.shape, chunks=chunks, dtype="f4", dimension_names=("sample", "feature")
        )[...] = X.astype("f4")
        Path(f"{name}.yaml").write_text(
            f"ddr: 1\nname: {name}\ninputs:\n  X: {{path: {name}.zarr, array: X}}\nsteps:\n"
            "  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 3}}\n"
            "  scores: {op: PCA.transform, inputs: {model: pca, X: X}}\noutputs:\n"
            f"  - {{kind: zarr, from: {{scores: scores}}, path: out-{name}/scores.zarr}}\n"
            f"run:\n  summary: out-{name}/run-summary.json\n"
        )
        run_plan(plan_pipeline(f"{name}.yaml", []))
        summary = json.loads(Path(f"out-{name}/run-summary.json").read_text())
        assert summary["passes"] == {"X": 2.0} and summary["planned_passes"] == {"X": "2"}
    got = xr.open_zarr("out-space/scores.zarr")["scores"].values
    np.testing.assert_array_equal(got, xr.open_zarr("out-rows/scores.zarr")["scores"].values)
