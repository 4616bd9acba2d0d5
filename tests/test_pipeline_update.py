"""``ddr run --update``: rows appended to the inputs are all an update reads for the one-pass
fits, and what it writes equals a full run on the grown data.

Each test writes a small demo dataset (3000 rows in chunks of 500), runs a pipeline, appends
5 % of rows (150: a partial chunk) the way users do (zarr resize + write + consolidate, or
``xarray.Dataset.to_zarr(append_dim=...)``), updates, and compares with a full run of the
same pipeline on the grown data into another directory: models to 1e-12 (here they are
the same bits: the merge order is the full run's), per-row outputs bit for bit. Reads are
counted chunk file by chunk file (:class:`pipeline_support.ReadCounter`).
"""

from __future__ import annotations

import json
import shutil
import warnings

import dask
import numpy as np
import pytest
import xarray as xr
import zarr
from pipeline_support import ReadCounter

import ddr
from ddr.demo import DemoSpec, write_demo_data
from ddr.io import open_input, output_status, read_attrs
from ddr.io.chunk_records import ArrayRecord, compare_records
from ddr.pipeline import plan_pipeline
from ddr.pipeline import run as run_pipeline

N, D, CHUNK, NEW = 3000, 12, 500, 150

QUICK = """
ddr: 1
name: quick
params: {data: demo.zarr, out: out, k: 4}
inputs:
  X: {path: "${params.data}", array: X, dims: [sample, feature]}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: "${params.k}"}}
  scaler: {op: StandardScaler.fit, inputs: {X: X}}
  scores: {op: PCA.transform, inputs: {model: pca, X: X}}
outputs:
  - {kind: zarr, from: scores, path: "${params.out}/scores.zarr", dims: [sample, component]}
  - {kind: metrics, from: [pca.explained_variance_ratio_, pca.noise_variance_],
     path: "${params.out}/pca-metrics.json"}
  - {kind: model, from: pca, path: "${params.out}/pca.model.zarr"}
  - {kind: model, from: scaler, path: "${params.out}/scaler.model.zarr"}
run: {if_exists: skip-if-complete, summary: "${params.out}/run-summary.json"}
"""

# the model steps alone: an update reads the new rows and nothing else
FITS = """
ddr: 1
name: fits
params: {data: demo.zarr, out: out}
inputs:
  X: {path: "${params.data}", array: X}
  y: {path: "${params.data}", array: y}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 3}}
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  moments: {op: moments, inputs: {X: X}}
outputs:
  - {kind: model, from: pca, path: "${params.out}/pca.model.zarr"}
  - {kind: model, from: nb, path: "${params.out}/nb.model.zarr"}
  - {kind: zarr, from: moments, path: "${params.out}/moments.zarr"}
run: {if_exists: skip-if-complete}
"""

# classify.yaml's layout: train on the first rows, predict the rows after (from inside a chunk)
CLASSIFY = """
ddr: 1
name: classify
params: {data: demo.zarr, out: out, train_end: 2250, test_start: 2250}
inputs:
  X: {path: "${params.data}", array: X, isel: {sample: ":${params.train_end}"}}
  y: {path: "${params.data}", array: y, isel: {sample: ":${params.train_end}"}}
  X_test: {path: "${params.data}", array: X, isel: {sample: "${params.test_start}:"}}
  y_test: {path: "${params.data}", array: y, isel: {sample: "${params.test_start}:"}}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  qda: {op: QuadraticDiscriminantAnalysis.fit, inputs: {X: X, y: y}, with: {reg_param: 1.0e-6}}
  lda: {op: LinearDiscriminantAnalysis.fit, inputs: {X: X, y: y}}
  nb_pred: {op: GaussianNB.predict, inputs: {model: nb, X: X_test}}
  qda_pred: {op: QuadraticDiscriminantAnalysis.predict, inputs: {model: qda, X: X_test}}
  qda_proba: {op: QuadraticDiscriminantAnalysis.predict_proba, inputs: {model: qda, X: X_test}}
  lda_proj: {op: LinearDiscriminantAnalysis.transform, inputs: {model: lda, X: X_test}}
outputs:
  - kind: zarr
    from: {naive_bayes: nb_pred, qda: qda_pred, qda_proba: qda_proba, lda: lda_proj}
    path: ${params.out}/predictions.zarr
    coords: {truth: y_test}
  - {kind: model, from: nb, path: "${params.out}/gaussian-nb.model.zarr"}
  - {kind: model, from: qda, path: "${params.out}/qda.model.zarr"}
  - {kind: model, from: lda, path: "${params.out}/lda.model.zarr"}
run: {if_exists: skip-if-complete}
"""

ALL_ROWS = ["train_end=", "test_start=0"]  # classify's models trained on every row


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        write_demo_data(tmp_path / "demo.zarr", DemoSpec(N, D, 4, 3, CHUNK, seed=0))
    return tmp_path


def write(here, name, text):
    (here / f"{name}.yaml").write_text(text)
    return here / f"{name}.yaml"


def run(path, sets=(), *, update=False):
    with dask.config.set(scheduler="threads"):
        outcome = run_pipeline(path, list(sets), update=update, argv=["ddr", "run"])
    return outcome.check()


def append_zarr(store, n=NEW, seed=1):
    """Append rows the zarr way: resize, write the new rows, consolidate the group."""
    rng = np.random.default_rng(seed)
    group = zarr.open_group(store, mode="r+")
    X, y = group["X"], group["y"]
    old = X.shape[0]
    X.resize((old + n, X.shape[1]))
    X[old:] = rng.normal(size=(n, X.shape[1])).astype(X.dtype)
    y.resize((old + n,))
    y[old:] = rng.integers(1, 3, n).astype(y.dtype)
    with warnings.catch_warnings():  # zarr: consolidated metadata is not in the v3 spec yet
        warnings.simplefilter("ignore", UserWarning)
        zarr.consolidate_metadata(store)


def append_xarray(store, n=NEW, seed=2):
    """Append rows as xarray users do: ``Dataset.to_zarr(append_dim=...)``."""
    rng = np.random.default_rng(seed)
    with xr.open_zarr(store) as ds:
        dtype_x, dtype_y = ds.X.dtype, ds.y.dtype
    new = xr.Dataset(
        {
            "X": (("sample", "feature"), rng.normal(size=(n, D)).astype(dtype_x)),
            "y": (("sample",), rng.integers(1, 3, n).astype(dtype_y)),
        }
    )
    with pytest.warns(UserWarning, match="Consolidated metadata"):
        new.to_zarr(store, append_dim="sample")


def chunk_bytes(store, array, first_row):
    """Bytes of the stored chunks of ``array`` holding rows ``first_row`` on."""
    base = store / array / "c"
    total = 0
    for f in base.rglob("*"):
        if f.is_file() and int(f.relative_to(base).parts[0]) * CHUNK + CHUNK > first_row:
            total += f.stat().st_size
    return total


def assert_models_equal(a_path, b_path):
    a, b = ddr.load(a_path), ddr.load(b_path)
    assert type(a) is type(b)
    for name, value in vars(a).items():
        other = vars(b)[name]
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            np.testing.assert_allclose(value, other, rtol=1e-12, atol=1e-12, err_msg=name)


def assert_zarr_identical(a_path, b_path):
    with xr.open_zarr(a_path) as a, xr.open_zarr(b_path) as b:
        assert set(a.variables) == set(b.variables)
        for name in a.variables:
            assert np.array_equal(a[name].values, b[name].values), name


def full_run(path, sets=()):
    """The same pipeline, run from nothing on the grown data, into ./full."""
    shutil.rmtree("full", ignore_errors=True)
    return run(path, [*sets, "out=full"])


# ----------------------------------------------------------------- one-pass fits
def test_update_reads_only_the_new_rows_for_one_pass_fits(here):
    path = write(here, "fits", FITS)
    run(path)
    append_zarr(here / "demo.zarr")
    plan = plan_pipeline(path, update=True)
    assert plan.update.full_run is None
    assert plan.update.new_rows == {"X": NEW, "y": NEW}
    assert {sid: plan.steps[sid].recording.mode for sid in ("pca", "nb", "moments")} == {
        "pca": "merge",
        "nb": "merge",
        "moments": "merge",
    }
    assert "reads the 150 new rows (rows 3000:3150)" in plan.format()
    with ReadCounter() as counter:
        summary = run(path, update=True)
    # the new rows' chunk of X and of y, once, and nothing else
    assert counter.read(here / "demo.zarr", "X") == chunk_bytes(here / "demo.zarr", "X", N)
    assert counter.read(here / "demo.zarr", "y") == chunk_bytes(here / "demo.zarr", "y", N)
    assert summary.update["new_rows"] == {"X": NEW, "y": NEW}
    assert summary.update["bytes_new_rows"]["X"] == chunk_bytes(here / "demo.zarr", "X", N)
    assert summary.update["passes_every_row"] == {}
    full_run(path)
    for name in ("pca.model.zarr", "nb.model.zarr"):
        assert_models_equal(f"out/{name}", f"full/{name}")
    assert_zarr_identical("out/moments.zarr", "full/moments.zarr")


def test_quickstart_update_equals_a_full_run(here):
    """Zarr resize + write: the PCA merges the new rows; its scores are recomputed (the
    model changed), the small outputs rewritten; all equal to a full run."""
    path = write(here, "quick", QUICK)
    run(path)
    append_zarr(here / "demo.zarr")
    plan = plan_pipeline(path, update=True)
    words = plan.update.outputs
    assert words[0] == "recomputed from every row: pca changed"
    assert words[1] == "rewritten: pca changed" and words[3] == "rewritten: scaler changed"
    summary = run(path, update=True)
    assert summary.update["passes_new_rows"] == {"X": pytest.approx(0.05, abs=0.01)}
    assert summary.update["passes_every_row"] == {"X": 1.0}  # the scores, recomputed
    text = summary.format()
    assert "update: new rows: X 150 (3000 -> 3150)" in text
    assert "passes over the new rows (and rewritten chunks): X 0.05" in text
    saved = json.loads((here / "out/run-summary.json").read_text())
    assert saved["update"]["new_rows"] == {"X": NEW}
    full_run(path)
    assert_models_equal("out/pca.model.zarr", "full/pca.model.zarr")
    assert_models_equal("out/scaler.model.zarr", "full/scaler.model.zarr")
    assert_zarr_identical("out/scores.zarr", "full/scores.zarr")
    ours = json.loads((here / "out/pca-metrics.json").read_text())
    theirs = json.loads((here / "full/pca-metrics.json").read_text())
    for key in ("pca.explained_variance_ratio_", "pca.noise_variance_"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-12)


def test_classify_update_extends_the_predictions(here):
    """xarray's append: the models' training rows did not grow (solved from the recorded
    statistics, nothing read); the predictions of the test rows are extended by the new
    rows only, bit for bit those of a full run."""
    path = write(here, "classify", CLASSIFY)
    run(path)
    append_xarray(here / "demo.zarr")
    plan = plan_pipeline(path, update=True)
    assert plan.update.new_rows == {"X_test": NEW, "y_test": NEW}
    assert {plan.steps[s].action for s in ("nb", "qda", "lda")} == {"recorded"}
    assert plan.outputs[0].extend is not None
    assert [o.refresh for o in plan.outputs[1:]] == [True, True, True]
    model_chunks = {
        p: p.stat().st_mtime_ns
        for p in (here / "out").glob("*.model.zarr/**/c/**/*")
        if p.is_file()
    }
    # the test rows start inside a chunk: the output's chunk [500, 1000) spans an old input
    # chunk and the new one, and only the new one is read
    assert "extended: rows 750:900 written, rows 0:750 kept" in plan.format()
    with ReadCounter() as counter:
        summary = run(path, update=True)
    assert counter.read(here / "demo.zarr", "X") == chunk_bytes(here / "demo.zarr", "X", N)
    assert counter.read(here / "demo.zarr", "y") == chunk_bytes(here / "demo.zarr", "y", N)
    assert summary.update["passes_every_row"] == {}
    assert output_status("out/predictions.zarr") == "complete"
    # the models hold what they held: only their fingerprint and provenance were rewritten
    assert [o.action for o in summary.outputs[1:]] == ["refreshed"] * 3
    assert all(p.stat().st_mtime_ns == t for p, t in model_chunks.items()) and model_chunks
    assert {output_status(f"out/{m}.model.zarr") for m in ("gaussian-nb", "qda", "lda")} == {
        "complete"
    }
    full_run(path)
    assert_zarr_identical("out/predictions.zarr", "full/predictions.zarr")
    for name in ("gaussian-nb", "qda", "lda"):
        assert_models_equal(f"out/{name}.model.zarr", f"full/{name}.model.zarr")


APPLY = """
ddr: 1
name: apply
params: {data: demo.zarr, out: out}
inputs:
  X: {path: "${params.data}", array: X}
  y: {path: "${params.data}", array: y}
steps:
  scaler: {op: load, with: {path: models/scaler.model.zarr}}
  pca: {op: load, with: {path: models/pca.model.zarr}}
  scaled: {op: StandardScaler.transform, inputs: {model: scaler, X: X}}
  scores: {op: PCA.transform, inputs: {model: pca, X: scaled}}
outputs:
  - {kind: zarr, from: {scores: scores}, path: "${params.out}/applied.zarr",
     dims: {scores: [sample, component]}, coords: {truth: y}}
run: {if_exists: skip-if-complete}
"""


def test_saved_models_applied_to_grown_data_are_extended(here):
    """Models loaded from a path (``load`` steps) did not change: their outputs are extended
    by the new rows (transforms chained through a scaler), the same bits as a full run."""
    with dask.config.set(scheduler="threads"):
        X = open_input(here / "demo.zarr", "X")
        scaler = ddr.StandardScaler().fit(X)
        ddr.PCA(3).fit(scaler.transform(X)).save(here / "models" / "pca.model.zarr")
        scaler.save(here / "models" / "scaler.model.zarr")
    path = write(here, "apply", APPLY)
    run(path)
    append_zarr(here / "demo.zarr")
    plan = plan_pipeline(path, update=True)
    assert plan.outputs[0].extend is not None
    with ReadCounter() as counter:
        run(path, update=True)
    assert counter.read(here / "demo.zarr", "X") == chunk_bytes(here / "demo.zarr", "X", N)
    full_run(path)
    assert_zarr_identical("out/applied.zarr", "full/applied.zarr")


def test_classify_on_every_row_merges_and_recomputes(here):
    """Trained on every row: the three models merge the new rows in one pass over them; the
    predictions are recomputed (their models changed)."""
    path = write(here, "classify", CLASSIFY)
    run(path, ALL_ROWS)
    append_xarray(here / "demo.zarr")
    plan = plan_pipeline(path, ALL_ROWS, update=True)
    assert {plan.steps[s].recording.mode for s in ("nb", "qda", "lda")} == {"merge"}
    assert plan.outputs[0].extend is None
    summary = run(path, ALL_ROWS, update=True)
    assert set(summary.update["passes_new_rows"]) == {"X, X_test", "y, y_test"}
    steps = {s.id: s for s in summary.steps}
    assert steps["nb"].shared_with == ["qda", "lda"]
    full_run(path, ALL_ROWS)
    assert_zarr_identical("out/predictions.zarr", "full/predictions.zarr")
    for name in ("gaussian-nb", "qda", "lda"):
        assert_models_equal(f"out/{name}.model.zarr", f"full/{name}.model.zarr")


def test_two_appends_read_the_rewritten_chunk_again(here):
    """The second append rewrites the partial chunk the first one left: the update reads
    it whole again (its old rows are never trusted) and still equals a full run."""
    path = write(here, "quick", QUICK)
    run(path)
    append_zarr(here / "demo.zarr", seed=1)
    run(path, update=True)
    append_zarr(here / "demo.zarr", seed=3)
    plan = plan_pipeline(path, update=True)
    rec = plan.steps["pca"].recording
    assert (rec.read_from, rec.old_rows, rec.rows) == (N, N + NEW, N + 2 * NEW)
    assert plan.update.inputs["X"].rows.clean == N
    with ReadCounter() as counter:
        run(path, update=True)
    stored = chunk_bytes(here / "demo.zarr", "X", 0)
    # the tail chunk for the merge, then every row for the scores
    assert counter.read(here / "demo.zarr", "X") == stored + chunk_bytes(here / "demo.zarr", "X", N)
    full_run(path)
    assert_models_equal("out/pca.model.zarr", "full/pca.model.zarr")
    assert_zarr_identical("out/scores.zarr", "full/scores.zarr")


# ------------------------------------------------------------ what forces a full run
def test_a_changed_old_chunk_forces_a_full_run_naming_it(here):
    path = write(here, "quick", QUICK)
    run(path)
    append_zarr(here / "demo.zarr")
    X = zarr.open_array(here / "demo.zarr" / "X", mode="r+")
    X[1000:1010] = X[1000:1010] + 1  # rows of chunk 2
    plan = plan_pipeline(path, update=True)
    assert plan.update.full_run.startswith("input X: chunk X/c/2/0 was rewritten since the last")
    assert plan.steps["pca"].recording.mode == "full"
    assert "a full run: input X: chunk X/c/2/0" in plan.format()
    summary = run(path, update=True)
    assert summary.update["full_run"].startswith("input X: chunk X/c/2/0")
    assert "update: a full run: input X: chunk X/c/2/0" in summary.format()
    full_run(path)
    assert_models_equal("out/pca.model.zarr", "full/pca.model.zarr")
    assert_zarr_identical("out/scores.zarr", "full/scores.zarr")


def test_a_removed_chunk_is_named(here):
    """(A run refuses an input with a chunk missing before it gets this far; the record
    names the chunk all the same.)"""
    from ddr.io.chunk_records import array_record
    from ddr.io.locations import resolve
    from ddr.pipeline.run_state import read_state

    path = write(here, "quick", QUICK)
    run(path)
    (here / "demo.zarr" / "X" / "c" / "3" / "0").unlink()
    state, _ = read_state(resolve("out/quick.state.zarr"))
    now = array_record(resolve(here / "demo.zarr"), "X", "sample")
    growth = compare_records(state.inputs["X"].array, now, "X")
    assert growth.status == "changed"
    assert growth.why.startswith("chunk X/c/3/0 was removed since the last run (rows 1500-1999)")


def test_nothing_grew_nothing_is_updated(here):
    path = write(here, "quick", QUICK)
    run(path)
    written = {p: p.stat().st_mtime_ns for p in (here / "out").rglob("*") if p.is_file()}
    plan = plan_pipeline(path, update=True)
    assert plan.update.new_rows == {}
    assert all(o.action == "skip" for o in plan.outputs) and plan.state.action == "skip"
    with ReadCounter() as counter:
        summary = run(path, update=True)
    assert counter.read(here / "demo.zarr", "X") == 0
    assert "update: new rows: none" in summary.format()
    assert all(s.action == "skipped" for s in summary.steps)
    after = {p: p.stat().st_mtime_ns for p in (here / "out").rglob("*") if p.is_file()}
    changed = [p.name for p, t in after.items() if written.get(p) != t]
    assert set(changed) <= {"run-summary.json", "run-summary.log"}


def test_an_interrupted_update_resumes(here, monkeypatch):
    """Interrupted after some outputs: the state is still the last run's, complete outputs
    are kept, the rest is written, and the result equals a full run."""
    from ddr.pipeline.outputs.model import ModelKind

    path = write(here, "quick", QUICK)
    run(path)
    append_zarr(here / "demo.zarr")
    calls = []
    original = ModelKind.write

    def interrupted(self, w, out):
        calls.append(out.path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(self, w, out)

    monkeypatch.setattr(ModelKind, "write", interrupted)
    with dask.config.set(scheduler="threads"):
        outcome = run_pipeline(path, update=True, argv=["ddr", "run"])
    assert outcome.status == "interrupted"
    # the Ctrl-C hurried the requests of that run only: this process's next ones (a notebook
    # goes on) have their full bounds again
    from ddr.io.request_bounds import interrupted_at

    assert interrupted_at() is None
    monkeypatch.setattr(ModelKind, "write", original)
    assert output_status("out/pca.model.zarr") == "complete"  # written before the interrupt
    state_fp = read_attrs("out/quick.state.zarr")["ddr:fingerprint"]
    plan = plan_pipeline(path, update=True)
    assert plan.state.old.inputs["X"].rows == N  # the last complete run's state
    assert plan.steps["scaler"].recording.mode == "merge"
    # the model the interrupted update saved is complete: loaded, not fitted again
    assert {o.path.rsplit("/", 1)[1]: o.action for o in plan.outputs}["pca.model.zarr"] == "skip"
    assert plan.steps["pca"].action == "load"
    run(path, update=True)
    assert read_attrs("out/quick.state.zarr")["ddr:fingerprint"] != state_fp
    full_run(path)
    assert_models_equal("out/pca.model.zarr", "full/pca.model.zarr")
    assert_models_equal("out/scaler.model.zarr", "full/scaler.model.zarr")
    assert_zarr_identical("out/scores.zarr", "full/scores.zarr")


def test_no_state_is_a_full_run_and_no_recording_refuses(here):
    path = write(here, "quick", QUICK)
    run(path)
    shutil.rmtree(here / "out" / "quick.state.zarr")
    append_zarr(here / "demo.zarr")
    plan = plan_pipeline(path, update=True)
    assert plan.update.full_run.startswith("no complete state at out/quick.state.zarr")
    from ddr.config.errors import PipelineError

    with pytest.raises(PipelineError, match="--update needs the state the last run recorded"):
        plan_pipeline(path, ["run.state=false"], update=True)


def test_multi_pass_fits_read_every_row(here):
    text = QUICK.replace("scaler: {op: StandardScaler.fit, inputs: {X: X}}", "").replace(
        '{n_components: "${params.k}"}',
        '{n_components: "${params.k}", svd_solver: randomized, random_state: 0}',
    )
    text = "\n".join(line for line in text.splitlines() if "scaler" not in line)
    path = write(here, "quick", text)
    run(path)
    append_zarr(here / "demo.zarr")
    plan = plan_pipeline(path, update=True)
    assert plan.steps["pca"].recording is None
    assert "step pca: reads every row (a fit of several passes" in plan.format()
    summary = run(path, update=True)
    assert summary.update["passes_new_rows"] == {}


def test_state_records_chunks_and_statistics(here):
    path = write(here, "quick", QUICK)
    run(path)
    attrs = read_attrs("out/quick.state.zarr")
    assert attrs["ddr:status"] == "complete"
    state = attrs["ddr:state"]
    rec = state["inputs"]["X"]
    assert rec["rows"] == N and rec["array"]["block_rows"] == CHUNK
    assert sorted(rec["array"]["objects"]) == [f"c/{i}/0" for i in range(N // CHUNK)]
    assert set(state["steps"]) == {"pca", "scaler"}
    assert state["steps"]["pca"]["prefix_rows"] == N
    plan = plan_pipeline(path, update=True)
    whole, prefix = plan.state.old.statistics("pca")
    assert whole.count == N and prefix.count == N
    assert whole.covariance(ddof=0).shape == (D, D)


# -------------------------------------------------------------------- records
def test_compare_records():
    def record(rows, objects):
        return ArrayRecord((rows, 4), "float64", 0, 10, objects)

    old = record(25, {"c/0/0": "8:1", "c/1/0": "8:2", "c/2/0": "4:3"})
    assert compare_records(old, old).status == "same"
    grown = record(37, {"c/0/0": "8:1", "c/1/0": "8:2", "c/2/0": "8:9", "c/3/0": "6:9"})
    found = compare_records(old, grown, "X")
    assert (found.status, found.old_rows, found.rows, found.dirty_from) == ("appended", 25, 37, 20)
    changed = record(37, {"c/0/0": "8:1", "c/1/0": "8:5", "c/2/0": "8:9"})
    assert compare_records(old, changed, "X").why.startswith("chunk X/c/1/0 was rewritten")
    assert compare_records(old, record(15, {})).why.endswith("shrank: 25 -> 15 rows")
    partial = record(25, {"c/0/0": "8:1", "c/1/0": "8:2", "c/2/0": "4:7"})
    assert compare_records(old, partial).status == "changed"
    wider = ArrayRecord((37, 5), "float64", 0, 10, grown.objects)
    assert compare_records(old, wider).status == "changed"
    assert ArrayRecord.from_dict(grown.to_dict()) == grown


# ------------------------------------------------------------------------- S3
def test_update_on_s3(s3, monkeypatch, tmp_path):
    """The same on an object store (moto): tokens are sizes and ETags from one listing."""
    from ddr.io.locations import resolve

    monkeypatch.chdir(tmp_path)
    data, out = s3.url("grow/demo.zarr"), s3.url("grow/out")
    with dask.config.set(scheduler="threads"):
        write_demo_data(data, DemoSpec(N, D, 4, 3, CHUNK, seed=0))
    path = write(tmp_path, "quick", QUICK)
    run(path, [f"data={data}", f"out={out}"])
    store = resolve(data).store(read_only=False)
    rng = np.random.default_rng(4)
    X = zarr.open_group(store, mode="r+")["X"]
    X.resize((N + NEW, D))
    X[N:] = rng.normal(size=(NEW, D)).astype(X.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        zarr.consolidate_metadata(store)
    plan = plan_pipeline(path, [f"data={data}", f"out={out}"], update=True)
    assert plan.update.new_rows == {"X": NEW}
    assert plan.steps["pca"].recording.mode == "merge"
    summary = run(path, [f"data={data}", f"out={out}"], update=True)
    loc = resolve(data).joinpath("X")
    new_chunk = loc.fs.info(f"{loc.fs_path}/c/{N // CHUNK}/0")["size"]
    assert summary.update["bytes_new_rows"] == {"X": new_chunk}
    full = s3.url("grow/full")
    run(path, [f"data={data}", f"out={full}"])
    assert_models_equal(f"{out}/pca.model.zarr", f"{full}/pca.model.zarr")
    assert_zarr_identical(f"{out}/scores.zarr", f"{full}/scores.zarr")
