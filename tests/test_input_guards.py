"""Inputs checked before any data is read: arrays of the same group that the pipeline does
not use are not its problem, an empty input is refused where it is declared, and so is an
input whose chunks are not all stored (unless it says ``missing_chunks: fill``)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from pipeline_support import ReadCounter
from typer.testing import CliRunner

import ddr
from ddr.cli import app
from ddr.io import MissingChunksError, open_input
from ddr.io.stored_chunks import missing_chunk_keys
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


# ------------------------------------------------------------------ missing input chunks
def dense_group(path, n=1000, chunk=100):
    """X (n x 3) and labels y, every chunk stored (also y's chunks of class 0 only)."""
    rng = np.random.default_rng(1)
    g = zarr.open_group(path, mode="w", zarr_format=3)
    X = rng.normal(size=(n, 3)) + 5.0
    y = np.repeat(np.arange(n // chunk) % 3, chunk)  # sorted runs: chunks of class 0 only
    config = {"write_empty_chunks": True}
    g.create_array("X", shape=X.shape, chunks=(chunk, 3), dtype="f8", config=config)[...] = X
    g.create_array("y", shape=y.shape, chunks=(chunk,), dtype="i8", config=config)[...] = y
    return X, y


def delete_chunks(store, array, *indices):
    for i in indices:
        key = f"{array}/c/{i}" if array == "y" else f"{array}/c/{i}/0"
        (store / key).unlink()


def test_open_input_refuses_missing_chunks_naming_them(here):
    dense_group(here / "d.zarr")
    delete_chunks(here / "d.zarr", "y", 3)
    with pytest.raises(MissingChunksError) as info:
        open_input("d.zarr", "y")
    assert info.value.missing == ["y/c/3"] and info.value.n_chunks == 10
    assert str(info.value).startswith(
        "1 of 10 chunks of array 'y' of 'd.zarr' are missing (y/c/3): a broken copy or an "
        "interrupted write? Zarr would read them as the fill value. If the array is sparse on "
        "purpose (zarr stores no chunk equal to the fill value unless written with "
        "write_empty_chunks=True), open it with missing_chunks='fill'"
    )
    # a few keys, then a count
    delete_chunks(here / "d.zarr", "X", 0, 1, 2, 4, 5, 6, 9)
    with pytest.raises(MissingChunksError, match=r"^7 of 10 chunks of array 'X' of 'd.zarr' ar"):
        open_input("d.zarr", "X")
    with pytest.raises(MissingChunksError) as info:
        open_input("d.zarr", "X")
    assert "(X/c/0/0, X/c/1/0, X/c/2/0, X/c/4/0, X/c/5/0 and 2 more)" in str(info.value)
    # sparse on purpose: read as the fill value
    y = open_input("d.zarr", "y", missing_chunks="fill").values
    assert not y[300:400].any() and y.shape == (1000,)
    with pytest.raises(ValueError, match="missing_chunks must be 'error' or 'fill'; got 'skip'"):
        open_input("d.zarr", "y", missing_chunks="skip")


def test_missing_chunks_of_v2_bare_and_sharded_arrays(here):
    v2 = zarr.create_array(
        here / "v2.zarr", shape=(10, 2), chunks=(5, 2), dtype="f8", zarr_format=2
    )
    v2[...] = 1.0
    (here / "v2.zarr" / "1.0").unlink()
    with pytest.raises(MissingChunksError, match=r"^1 of 2 chunks of the array 'v2.zarr' are "):
        open_input("v2.zarr")
    with pytest.raises(MissingChunksError) as info:
        open_input("v2.zarr")
    assert info.value.missing == ["1.0"]
    sharded = zarr.create_array(
        here / "sh.zarr", shape=(40, 2), chunks=(5, 2), shards=(10, 2), dtype="f8"
    )
    sharded[...] = 1.0
    (here / "sh.zarr" / "c" / "2" / "0").unlink()  # a whole shard: 2 chunks of 5 rows
    with pytest.raises(MissingChunksError) as info:
        open_input("sh.zarr")
    assert info.value.missing == ["c/2/0"] and info.value.n_chunks == 4


@pytest.mark.parametrize("kind", ["memory", "fsspec"])
def test_missing_chunk_keys_through_the_store_api(here, kind):
    # any zarr store: the listing goes through Store.list_prefix; an in-memory store, and
    # fsspec's (the store of object stores) over local files
    if kind == "memory":
        store = zarr.storage.MemoryStore()
    else:
        url = (here / "f.zarr").as_uri()
        store = zarr.storage.FsspecStore.from_url(url, storage_options={"auto_mkdir": True})
    g = zarr.open_group(store, mode="w")
    a = g.create_array("deep/X", shape=(30, 2), chunks=(10, 2), dtype="f8")
    a[:10] = 1.0
    a[20:] = 2.0
    assert missing_chunk_keys(a) == (["deep/X/c/1/0"], 3)
    a[10:20] = 3.0
    assert missing_chunk_keys(a) == ([], 3)


NB = """\
ddr: 1
name: nb
inputs:
  X: {path: d.zarr, array: X}
  y: {path: d.zarr, array: y}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
outputs:
  - {kind: model, from: nb, path: out/nb.zarr}
"""

SCALE = """\
ddr: 1
name: scale
inputs:
  X: {path: d.zarr, array: X}
  y: {path: d.zarr, array: y}
steps:
  scaler: {op: StandardScaler.fit, inputs: {X: X}}
  ppca: {op: PPCA.fit, inputs: {X: X}, with: {n_components: 1}}
outputs:
  - {kind: model, from: scaler, path: out/scaler.zarr}
  - {kind: model, from: ppca, path: out/ppca.zarr}
"""


@pytest.mark.parametrize(
    ("pipeline", "array", "where"), [(NB, "y", "5:28"), (SCALE, "X", "4:28")], ids=["y", "X"]
)
def test_a_pipeline_refuses_a_deleted_input_chunk_before_reading(here, pipeline, array, where):
    dense_group(here / "d.zarr")
    delete_chunks(here / "d.zarr", array, 7)
    (here / "p.yaml").write_text(pipeline)
    with ReadCounter() as counter:
        result = runner.invoke(app, ["run", "p.yaml", "--cluster", "sync"])
    assert result.exit_code == 2, result.output
    key = "y/c/7" if array == "y" else "X/c/7/0"
    assert (
        f"p.yaml:{where}: input {array}: 1 of 10 chunks of array '{array}' of "
        f"'{here / 'd.zarr'}' are missing ({key}): a broken copy"
    ) in result.output
    assert "`missing_chunks: fill` on the input" in result.output
    assert not counter.bytes
    assert not (here / "out").exists()


def test_missing_chunks_fill_reads_a_sparse_input_as_its_fill_value(here):
    X, y = dense_group(here / "d.zarr")
    delete_chunks(here / "d.zarr", "y", 0, 3)  # class 0 only: what zarr's default leaves out
    (here / "p.yaml").write_text(NB.replace("array: y}", "array: y, missing_chunks: fill}"))
    result = runner.invoke(app, ["run", "p.yaml", "--cluster", "sync"])
    assert result.exit_code == 0, result.output
    model = ddr.load(here / "out" / "nb.zarr")
    expected = ddr.GaussianNB().fit(X, y)
    np.testing.assert_allclose(model.theta_, expected.theta_, rtol=1e-12)
    np.testing.assert_array_equal(model.class_count_, expected.class_count_)


def test_only_inputs_something_reads_are_checked(here):
    dense_group(here / "d.zarr")
    delete_chunks(here / "d.zarr", "y", 2)
    (here / "p.yaml").write_text(
        SCALE.replace(
            "  ppca: {op: PPCA.fit, inputs: {X: X}, with: {n_components: 1}}\n", ""
        ).replace("  - {kind: model, from: ppca, path: out/ppca.zarr}\n", "")
    )
    plan_pipeline("p.yaml")  # y is declared but nothing reads it
    (here / "q.yaml").write_text(
        SCALE.replace(
            "path: out/ppca.zarr}",
            "path: out/ppca.zarr}\n  - {kind: zarr, from: y, path: out/y.zarr}",
        )
    )
    with pytest.raises(PipelineError, match=r"q.yaml:5:28: input y: 1 of 10 chunks"):
        plan_pipeline("q.yaml")


def test_a_deleted_chunk_on_s3_is_refused_by_name(s3, tmp_path, monkeypatch):
    from ddr.io.locations import resolve

    url = s3.url("d.zarr")
    g = zarr.open_group(resolve(url).store(read_only=False), mode="w", zarr_format=3)
    y = g.create_array(
        "y", shape=(30,), chunks=(10,), dtype="i8", config={"write_empty_chunks": True}
    )
    y[...] = np.arange(30) % 3
    loc = resolve(url)
    loc.fs.rm(f"{loc.fs_path}/y/c/1")
    with pytest.raises(MissingChunksError) as info:
        open_input(url, "y")
    assert info.value.missing == ["y/c/1"] and info.value.n_chunks == 3
    assert str(info.value).startswith(f"1 of 3 chunks of array 'y' of '{url}' are missing (y/c/1)")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(
        "ddr: 1\nname: s3\ninputs:\n"
        f"  y: {{path: '{url}', array: y}}\n"
        "outputs:\n  - {kind: zarr, from: y, path: out/y.zarr}\n"
    )
    with pytest.raises(PipelineError) as info:
        plan_pipeline("p.yaml")
    assert [str(p).split(" are missing")[0] for p in info.value.problems] == [
        f"p.yaml:4:{24 + len(url)}: input y: 1 of 3 chunks of array 'y' of '{url}'"
    ]
    assert not (tmp_path / "out").exists()


@pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part")
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_stale_consolidated_metadata_is_refused_naming_both(here, zarr_format):
    """An interrupted append: the array's own metadata says 25 rows, the group's consolidated
    copy 20 (rows 20-24 never written). Refused before reading, naming both documents, in
    Python and in a pipeline; the fresh consolidated store is read as usual."""
    from ddr.io import StaleConsolidatedMetadata

    g = zarr.open_group(here / "d.zarr", mode="w", zarr_format=zarr_format)
    x = g.create_array("X", shape=(20, 3), chunks=(5, 3), dtype="f8", fill_value=0.0)
    x[...] = np.arange(60.0).reshape(20, 3)
    zarr.consolidate_metadata(here / "d.zarr")
    assert open_input("d.zarr", "X").shape == (20, 3)
    own = zarr.open_array(zarr.storage.LocalStore(here / "d.zarr"), path="X", mode="r+")
    own.resize((25, 3))  # the copy in the group still says (20, 3)
    with pytest.raises(StaleConsolidatedMetadata) as info:
        open_input("d.zarr", "X")
    own_doc, copy_doc = (
        ("X/.zarray", ".zmetadata") if zarr_format == 2 else ("X/zarr.json", "zarr.json")
    )
    assert info.value.fields[0] == "shape", info.value.fields
    assert (
        f"the array 'X' of 'd.zarr' has stale consolidated metadata: shape (25, 3) in its own "
        f"metadata, (20, 3) in the consolidated copy ({own_doc} against {copy_doc})"
    ) in str(info.value), str(info.value)
    (here / "p.yaml").write_text(
        "ddr: 1\nname: s\ninputs:\n  X: {path: d.zarr, array: X}\nsteps:\n"
        "  m: {op: moments, inputs: {X: X}}\noutputs:\n"
        "  - {kind: metrics, from: [m.count], path: out/m.json}\n"
    )
    with ReadCounter() as counter:
        result = runner.invoke(app, ["run", "p.yaml", "--cluster", "sync"])
    assert result.exit_code == 2, result.output
    assert "p.yaml:4:" in result.output and "stale consolidated metadata" in result.output
    assert not counter.bytes and not (here / "out").exists()
    zarr.consolidate_metadata(here / "d.zarr")  # the copy made current again: read
    assert open_input("d.zarr", "X", missing_chunks="fill").shape == (25, 3)


DELETED = """\
ddr: 1
name: deleted
inputs:
  X: {path: d.zarr, array: X%s}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}
  scores: {op: PCA.transform, inputs: {model: pca, X: X}}
outputs:
  - {kind: zarr, from: scores, path: out/scores.zarr}
"""


@pytest.mark.parametrize(
    ("extra", "scheduler"),
    [
        ("", "sync"),  # ddr's chunk reader
        (", chunks: {sample: 150}", "sync"),  # zarr's slicing (blocks across stored chunks)
        ("", "client"),  # in a worker process: the error travels back whole
    ],
    ids=["reader", "sliced", "worker"],
)
def test_a_chunk_deleted_after_the_check_is_an_error_when_read(here, request, extra, scheduler):
    """A chunk removed between the plan's check and the pass (another process, a sync
    job) is not read as the fill value: the run fails naming it, and no output is
    complete."""
    import dask

    from ddr.config.errors import RunError
    from ddr.io import output_status
    from ddr.pipeline import run_plan

    dense_group(here / "d.zarr")
    (here / "p.yaml").write_text(DELETED % extra)
    plan = plan_pipeline("p.yaml")  # every chunk is there now
    delete_chunks(here / "d.zarr", "X", 4)
    sched = request.getfixturevalue("client") if scheduler == "client" else "sync"
    with dask.config.set(scheduler=sched), pytest.raises(RunError) as info:
        run_plan(plan)
    text = str(info.value)
    assert "MissingChunksError: 1 of 10 chunks of " in text, text
    assert "are missing (X/c/4/0): a broken copy or an interrupted write?" in text, text
    assert output_status(here / "out" / "scores.zarr") != "complete"


PREDICT = """\
ddr: 1
name: predicted
inputs:
  train: {path: d.zarr, array: X, isel: {sample: "0:500"}}
  labels: {path: d.zarr, array: y, isel: {sample: "0:500"}}
  X: {path: d.zarr, array: X}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: train, y: labels}}
  predicted: {op: GaussianNB.predict, inputs: {model: nb, X: X}}
outputs:
  - {kind: zarr, from: predicted, path: out/predictions.zarr}
"""


def test_nan_in_rows_only_predicted_fails_the_run_naming_them(here):
    """Rows that are only predicted are checked as a fit checks its rows: NaN there is not
    predicted as class 0; the run fails saying how many and where, and the predictions are
    not complete."""
    from ddr.io import output_status

    dense_group(here / "d.zarr")
    x = zarr.open_array(zarr.storage.LocalStore(here / "d.zarr"), path="X", mode="r+")
    row = x[703]
    row[1] = np.nan
    x[703] = row
    (here / "p.yaml").write_text(PREDICT)
    result = runner.invoke(app, ["run", "p.yaml", "--cluster", "sync"])
    assert result.exit_code == 1, result.output
    assert (
        "Input X contains NaN or infinity: 1 NaN value(s) in 1 of the 100 rows 700-799 (the "
        "first at row 703); GaussianNB.predict needs finite values"
    ) in result.output, result.output
    assert "Traceback" not in result.output
    assert output_status(here / "out" / "predictions.zarr") != "complete"
