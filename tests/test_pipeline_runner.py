"""The runner: results equal direct fits, outputs are complete with provenance, reruns resume
by fingerprint, saved models are loaded instead of refitted, failures are reported."""

from __future__ import annotations

import json

import dask
import numpy as np
import pytest
import xarray as xr
import zarr
from pipeline_support import PIPELINES, ReadCounter, make_data

import ddr
from ddr.io import open_input, output_status, read_attrs
from ddr.pipeline import RunError, plan_pipeline, run_plan
from ddr.pipeline.outputs import read_fingerprint

QUICKSTART = PIPELINES / "quickstart.yaml"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("runner-data"))


@pytest.fixture
def here(data, monkeypatch, tmp_path):
    """Run in a fresh directory that sees the module's datasets as ./demo.zarr etc."""
    for name in ("demo.zarr", "demo-new.zarr", "demo-missing.zarr", "wide.zarr"):
        (tmp_path / name).symlink_to(data / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(path, overrides=(), *, force=False, resume=False):
    plan = plan_pipeline(path, list(overrides), force=force, resume=resume)
    with dask.config.set(scheduler="threads"):
        return run_plan(plan)


def open_zarr(path):
    return xr.open_zarr(path, consolidated=False)


def test_quickstart_equals_direct_pca(here):
    summary = run(QUICKSTART)
    assert summary.status == "ok"
    X = open_input("demo.zarr", "X")
    with dask.config.set(scheduler="threads"):
        pca = ddr.PCA(n_components=10).fit(X)
        direct = pca.transform(X).values
    with open_zarr("quickstart-output/scores.zarr") as ds:
        assert ds["scores"].dims == ("sample", "component")
        np.testing.assert_allclose(ds["scores"].values, direct, rtol=1e-12, atol=1e-12)
    metrics = json.loads((here / "quickstart-output/pca-metrics.json").read_text())
    np.testing.assert_allclose(
        metrics["pca.explained_variance_ratio_"], pca.explained_variance_ratio_, rtol=1e-12
    )
    assert (here / "quickstart-output/scree.png").stat().st_size > 1000
    assert read_fingerprint(here / "quickstart-output/scree.png") is not None
    # one pass to fit, one to stream the scores
    assert summary.passes == {"X": 2.0}
    assert summary.planned_passes == {"X": "2"}


def test_outputs_carry_provenance_and_are_complete(here):
    run(QUICKSTART)
    attrs = read_attrs("quickstart-output/scores.zarr")
    assert attrs["ddr:status"] == "complete"
    assert len(attrs["ddr:fingerprint"]) == 32
    prov = attrs["ddr:provenance"]
    assert prov["pipeline"]["name"] == "quickstart"
    assert prov["pipeline"]["resolved"]["params"]["k"] == 10
    assert prov["steps"]["pca"]["op"] == "PCA.fit"
    assert prov["steps"]["pca"]["with"] == {"n_components": 10}
    assert prov["inputs"]["X"]["shape"] == [3000, 12]
    assert len(prov["inputs"]["X"]["fingerprint"]) == 32
    assert {"ddr", "numpy", "dask", "zarr", "xarray"} <= set(prov["versions"])
    assert attrs["history"].count("\n") == 0 and "Z: " in attrs["history"]
    metrics = json.loads((here / "quickstart-output/pca-metrics.json").read_text())
    assert metrics["ddr:provenance"]["output"]["kind"] == "metrics"
    assert len(metrics["ddr:fingerprint"]) == 32
    summary = json.loads((here / "quickstart-output/run-summary.json").read_text())
    assert summary["status"] == "ok" and summary["wall_seconds"] > 0
    assert [s["id"] for s in summary["steps"]] == ["pca", "scores"]
    assert summary["steps"][0]["passes"] == {"X": 1.0}


def test_rerun_skips_complete_outputs_without_reading(here):
    run(QUICKSTART)
    with ReadCounter() as counter:
        plan = plan_pipeline(QUICKSTART)
        assert all(o.action == "skip" for o in plan.outputs)
        assert plan.phases == []
        summary = run(QUICKSTART)
    assert counter.read(here / "demo.zarr", "X") == 0
    assert all(o.action == "skipped" for o in summary.outputs)
    assert all(s.action == "skipped" for s in summary.steps)


def test_changed_param_rewrites_outdated_outputs(here):
    run(QUICKSTART)
    old = read_attrs("quickstart-output/scores.zarr")["ddr:fingerprint"]
    plan = plan_pipeline(QUICKSTART, ["k=3"])
    # every output (Zarr, PNG, JSON) says what changed, from the provenance stored in it
    assert {o.reason for o in plan.outputs} == {
        "complete but outdated: pca.with.n_components 10 -> 3"
    }
    run(QUICKSTART, ["k=3"])
    assert read_attrs("quickstart-output/scores.zarr")["ddr:fingerprint"] != old
    with open_zarr("quickstart-output/scores.zarr") as ds:
        assert ds["scores"].shape == (3000, 3)


NB_PIPELINE = """\
ddr: 1
name: nb
inputs:
  X: {path: demo.zarr, array: X}
  y: {path: demo.zarr, array: y}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  proba: {op: GaussianNB.predict_proba, inputs: {model: nb, X: X}}
outputs:
  - {kind: model, from: nb, path: out/nb.model.zarr}
  - {kind: zarr, from: proba, path: out/proba.zarr}
run: {if_exists: skip-if-complete}
"""


def test_resume_loads_a_complete_model_instead_of_refitting(here):
    (here / "nb.yaml").write_text(NB_PIPELINE)
    run("nb.yaml")
    model_attrs = read_attrs("out/nb.model.zarr")
    assert model_attrs["ddr:model"] == "ddr.naive_bayes.gaussian.GaussianNB"
    assert model_attrs["ddr:provenance"]["output"]["kind"] == "model"
    model_fp = model_attrs["ddr:fingerprint"]
    # an interrupted run: the output lost its completion marker
    group = zarr.open_group("out/proba.zarr", mode="r+")
    group.attrs["ddr:status"] = "incomplete"
    plan = plan_pipeline("nb.yaml")
    assert plan.steps["nb"].action == "load"
    actions = {o.path.rsplit("/", 1)[-1]: o.action for o in plan.outputs}
    assert actions == {"proba.zarr": "overwrite", "nb.model.zarr": "skip"}
    with ReadCounter() as counter:
        summary = run("nb.yaml")
    steps = {s.id: s for s in summary.steps}
    assert steps["nb"].action == "loaded" and steps["nb"].passes == {}
    assert counter.passes(here / "demo.zarr", "X") == pytest.approx(1.0)  # the output only
    assert counter.read(here / "demo.zarr", "y") == 0  # labels are needed only to fit
    assert output_status("out/proba.zarr") == "complete"
    assert read_attrs("out/nb.model.zarr")["ddr:fingerprint"] == model_fp


def test_fit_once_apply_many_equals_direct(here):
    run(PIPELINES / "fit-once.yaml")
    for data in ("demo-new.zarr", "demo.zarr"):
        summary = run(PIPELINES / "apply-saved.yaml", [f"data={data}", f"out=applied-{data}"])
        assert {s.id: s.action for s in summary.steps}["pca"] == "loaded"
    X = open_input("demo.zarr", "X")
    y = open_input("demo.zarr", "y")
    with dask.config.set(scheduler="threads"):
        scaler = ddr.StandardScaler().fit(X)
        pca = ddr.PCA(n_components=5).fit(scaler.transform(X))
        nb = ddr.GaussianNB().fit(X, y)
        for data in ("demo-new.zarr", "demo.zarr"):
            X2 = open_input(data, "X")
            with open_zarr(f"applied-{data}/applied.zarr") as ds:
                np.testing.assert_allclose(
                    ds["scores"].values,
                    pca.transform(scaler.transform(X2)).values,
                    rtol=1e-10,
                    atol=1e-10,
                )
                np.testing.assert_array_equal(ds["label"].values, nb.predict(X2).values)


def test_score_op_and_statistic_readouts(here, tmp_path):
    text = """
ddr: 1
name: scores
inputs:
  X: {path: demo.zarr, array: X}
  y: {path: demo.zarr, array: y}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  acc: {op: GaussianNB.score, inputs: {model: nb, X: X, y: y}}
  mom: {op: moments, inputs: {X: X}, with: {diagonal: true}}
outputs:
  - {kind: metrics, from: {accuracy: acc, mean: mom.mean, var: mom.variance}, path: m.json}
  - {kind: zarr, from: {theta: nb.theta_}, path: theta.zarr}
"""
    path = tmp_path / "scores.yaml"
    path.write_text(text)
    summary = run(path)
    X = open_input("demo.zarr", "X")
    y = open_input("demo.zarr", "y")
    with dask.config.set(scheduler="threads"):
        nb = ddr.GaussianNB().fit(X, y)
        acc = nb.score(X, y)
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["accuracy"] == pytest.approx(acc, abs=1e-12)
    np.testing.assert_allclose(metrics["mean"], X.values.astype(np.float64).mean(0), rtol=1e-6)
    np.testing.assert_allclose(metrics["var"], X.values.astype(np.float64).var(0), rtol=1e-6)
    with open_zarr(tmp_path / "theta.zarr") as ds:
        assert ds["theta"].dims == ("class", "feature")
        np.testing.assert_array_equal(ds["theta"].values, nb.theta_)
    assert {s.id: s.action for s in summary.steps}["acc"] == "computed"
    # one shared pass fits nb and the moments; the score is a pass of its own
    assert summary.planned_passes == {"X": "2", "y": "2"}
    assert summary.passes == {"X": 2.0, "y": 2.0}


def test_failed_step_is_reported_and_leaves_no_complete_output(here, tmp_path):
    text = """
ddr: 1
name: fails
inputs:
  X: {path: demo.zarr, array: X, isel: {sample: "0:3"}}
  y: {path: demo.zarr, array: y, isel: {sample: "0:3"}}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}, with: {priors: [0.5, 0.25, 0.25]}}
  pred: {op: GaussianNB.predict, inputs: {model: nb, X: X}}
outputs:
  - {kind: zarr, from: pred, path: pred.zarr}
run: {summary: summary.json}
"""
    path = tmp_path / "fails.yaml"
    path.write_text(text)
    labels = open_input("demo.zarr", "y").values[:3]
    assert len(np.unique(labels)) != 3  # so the given priors cannot match the classes
    with pytest.raises(RunError, match=r"step nb \(GaussianNB.fit\): ValueError"):
        run(path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and "GaussianNB.fit" in summary["error"]
    assert output_status(tmp_path / "pred.zarr") == "missing"


@pytest.mark.parametrize("batched", [False, True])
def test_nan_into_pca_gives_the_ppca_hint_naming_the_step(here, tmp_path, batched):
    """The shared one-pass compute fails in a block; the fit that has advice for it says so
    (PCA points to PPCA), as the Python API does."""
    extra = "  mom: {op: moments, inputs: {X: X}}\n" if batched else ""
    text = f"""
ddr: 1
name: nan
inputs:
  X: {{path: demo-missing.zarr, array: X}}
steps:
{extra}  pca: {{op: PCA.fit, inputs: {{X: X}}, with: {{n_components: 2}}}}
outputs:
  - {{kind: model, from: pca, path: pca.model.zarr}}
"""
    path = tmp_path / "nan.yaml"
    path.write_text(text)
    with pytest.raises(RunError) as info:
        run(path)
    message = str(info.value)
    assert message.startswith("step pca (PCA.fit): ValueError: X contains ")
    assert message.endswith(
        "use ddr.PPCA(solver='em'), which fits principal components with NaN treated as missing"
    )
    with pytest.raises(ValueError, match=r"use ddr.PPCA\(solver='em'\)"):  # the API's words
        ddr.PCA(n_components=2).fit(open_input("demo-missing.zarr", "X"))


def test_netcdf_input_fit_transform_inverse_and_coords(here, tmp_path):
    X = open_input("demo.zarr", "X").values
    y = open_input("demo.zarr", "y").values
    xr.Dataset(
        {"X": (("time", "channel"), X), "label": (("time",), y)},
        coords={"time": np.arange(X.shape[0]) * 10},
    ).to_netcdf(tmp_path / "data.nc")
    text = """
ddr: 1
name: netcdf
inputs:
  X: {path: data.nc, array: X, dims: [time, channel], chunks: {time: 1000}}
  label: {path: data.nc, array: label}
steps:
  pca: {op: PCA.fit_transform, inputs: {X: X}, with: {n_components: 3}}
  back: {op: PCA.inverse_transform, inputs: {model: pca.model, X: pca}}
outputs:
  - {kind: zarr, from: {scores: pca, back: back}, coords: {label: label},
     path: out.zarr, attrs: {title: round trip, units: none},
     dims: {scores: [time, component]}}
"""
    path = tmp_path / "nc.yaml"
    path.write_text(text)
    run(path)
    pca = ddr.PCA(n_components=3).fit(X)
    with open_zarr(tmp_path / "out.zarr") as ds:
        np.testing.assert_allclose(ds["scores"].values, pca.transform(X), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(
            ds["back"].values, pca.inverse_transform(pca.transform(X)), rtol=1e-9, atol=1e-6
        )
        assert ds["scores"].dims == ("time", "component")
        np.testing.assert_array_equal(ds["time"].values, np.arange(X.shape[0]) * 10)
        np.testing.assert_array_equal(ds["label"].values, y)
        assert ds.attrs["title"] == "round trip" and ds.attrs["units"] == "none"
    prov = read_attrs(tmp_path / "out.zarr")["ddr:provenance"]
    assert prov["inputs"]["X"]["path"].endswith("data.nc")


def test_two_view_transform_gives_both_variates(here, tmp_path):
    text = """
ddr: 1
name: two-views
inputs:
  A: {path: demo.zarr, array: X, isel: {feature: "0:6"}}
  B: {path: demo.zarr, array: X, isel: {feature: "6:"}}
steps:
  cca: {op: CCA.fit, inputs: {X: A, y: B}, with: {n_components: 2}}
  v: {op: CCA.transform, inputs: {model: cca, X: A, y: B}}
outputs:
  - {kind: zarr, from: {a: v, b: v.y_data}, path: v.zarr}
"""
    path = tmp_path / "cca.yaml"
    path.write_text(text)
    with ReadCounter() as counter:
        run(path)
    assert counter.passes(here / "demo.zarr", "X") == pytest.approx(2.0)  # fit + stream
    X = open_input("demo.zarr", "X").values
    cca = ddr.CCA(n_components=2).fit(X[:, :6], X[:, 6:])
    a, b = cca.transform(X[:, :6], X[:, 6:])
    with open_zarr(tmp_path / "v.zarr") as ds:
        np.testing.assert_allclose(ds["a"].values, a, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(ds["b"].values, b, rtol=1e-9, atol=1e-9)


def test_string_labels_from_zarr_v3(here, tmp_path):
    X = open_input("demo.zarr", "X").values
    labels = np.array(["alpha", "beta", "gamma"])[open_input("demo.zarr", "y").values]
    xr.Dataset(
        {
            "X": (("sample", "feature"), X),
            "y": (("sample",), labels.astype(np.dtypes.StringDType())),
        }
    ).chunk({"sample": 500}).to_zarr(tmp_path / "str.zarr", zarr_format=3, consolidated=False)
    text = """
ddr: 1
name: strings
inputs:
  X: {path: str.zarr, array: X}
  y: {path: str.zarr, array: y}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  pred: {op: GaussianNB.predict, inputs: {model: nb, X: X}}
outputs:
  - {kind: zarr, from: pred, coords: {truth: y}, path: out.zarr}
  - {kind: plot, plot: confusion, from: pred, labels: y, path: confusion.png}
"""
    (tmp_path / "s.yaml").write_text(text)
    with ReadCounter() as counter:
        run(tmp_path / "s.yaml")
    # one pass to fit, one to write the predictions and count the confusion matrix
    assert counter.passes(tmp_path / "str.zarr", "X") == pytest.approx(2.0)
    expected = ddr.GaussianNB().fit(X, labels).predict(X)
    with open_zarr(tmp_path / "out.zarr") as ds:
        np.testing.assert_array_equal(ds["pred"].values.astype(object).astype(str), expected)
        np.testing.assert_array_equal(ds["truth"].values.astype(object).astype(str), labels)


SORTED_PIPELINE = """\
ddr: 1
name: sorted
inputs:
  X: {path: sorted.zarr, array: X}
  y: {path: sorted.zarr, array: y}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  pred: {op: GaussianNB.predict, inputs: {model: nb, X: X}}
outputs:
  - {kind: zarr, from: pred, coords: {truth: y}, path: out/pred.zarr}
run: {if_exists: skip-if-complete}
"""


def test_output_chunks_equal_to_the_fill_value_are_written(here, tmp_path):
    # labels sorted by class: the first chunks of the `truth` coordinate are all class 0,
    # the fill value of an integer Zarr array
    order = np.argsort(open_input("demo.zarr", "y").values, kind="stable")
    X, y = open_input("demo.zarr", "X").values[order], open_input("demo.zarr", "y").values[order]
    xr.Dataset({"X": (("sample", "feature"), X), "y": (("sample",), y)}).chunk(
        {"sample": 500}
    ).to_zarr(tmp_path / "sorted.zarr", zarr_format=3, consolidated=False, write_empty_chunks=True)
    (tmp_path / "sorted.yaml").write_text(SORTED_PIPELINE)
    summary = run(tmp_path / "sorted.yaml")
    assert [o.action for o in summary.outputs] == ["written"]
    assert output_status(tmp_path / "out/pred.zarr") == "complete"
    group = zarr.open_group(tmp_path / "out/pred.zarr", mode="r")
    for name in ("pred", "truth"):
        assert group[name].nchunks_initialized == group[name].nchunks == 6, name
    expected = ddr.GaussianNB().fit(X, y).predict(X)
    assert not y[:500].any()  # a whole chunk of `truth` equal to the fill value
    with open_zarr(tmp_path / "out/pred.zarr") as ds:
        np.testing.assert_array_equal(ds["pred"].values, expected)
        np.testing.assert_array_equal(ds["truth"].values, y)
    with ReadCounter() as counter:
        again = run(tmp_path / "sorted.yaml")
    assert [o.action for o in again.outputs] == ["skipped"]
    assert counter.read(tmp_path / "sorted.zarr", "X") == 0


# ------------------------------------------------------- ddr.pipeline.run, from Python
def test_pipeline_run_is_what_ddr_run_does(here):
    """A pipeline file, overrides and a cluster by name: the run starts the cluster, and its
    outcome carries the summary and where it was written (the whole wall time in parts)."""
    import ddr.pipeline

    assert ddr.run_pipeline is ddr.pipeline.run
    text = NB_PIPELINE.replace("skip-if-complete}", "skip-if-complete, summary: out/s.json}")
    (here / "nb.yaml").write_text(text)
    outcome = ddr.pipeline.run("nb.yaml", ["run.if_exists=error"], cluster="threads")
    assert outcome.status == "ok" and outcome.ok and outcome.error is None
    assert outcome.summary_file.path == str(here / "out" / "s.json")
    summary = outcome.check()
    assert summary is outcome.summary and summary.scheduler == "threads"
    assert list(summary.timings)[:2] == ["start-up", "cluster start"]
    assert list(summary.timings)[-1] == "cluster shutdown"
    assert json.loads((here / "out" / "s.json").read_text())["status"] == "ok"
    assert output_status(here / "out" / "proba.zarr") == "complete"
    # planning options go to plan_pipeline when the plan is made already
    with pytest.raises(ValueError, match="options of planning"):
        ddr.pipeline.run(plan_pipeline("nb.yaml"), force=True)


def test_pipeline_run_returns_a_failure_and_check_raises_it(here, tmp_path):
    import ddr.pipeline

    text = NB_PIPELINE.replace("skip-if-complete}", "skip-if-complete, summary: out/s.json}")
    (here / "fails.yaml").write_text(
        text.replace("inputs: {X: X, y: y}}", "inputs: {X: X, y: y}, with: {priors: [1.0]}}")
    )
    with dask.config.set(scheduler="threads"):  # no cluster named: the active scheduler
        outcome = ddr.pipeline.run("fails.yaml")
    assert outcome.status == "failed" and "step nb (GaussianNB.fit): ValueError" in outcome.error
    assert outcome.summary.status == "failed" and outcome.summary_file is not None
    assert "cluster start" not in outcome.summary.timings
    with pytest.raises(RunError, match=r"step nb \(GaussianNB.fit\)") as err:
        outcome.check()
    assert err.value.ddr_summary is outcome.summary
    assert not list(here.glob("out/*.ddr-claim"))  # released


def test_pipeline_run_refused_while_another_run_holds_an_output(here):
    """Refused before any cluster starts and before anything is read or written; the
    claims of the run that holds the outputs are untouched."""
    import ddr.pipeline
    from ddr.io.claims import ClaimError
    from ddr.pipeline.ownership import claim_outputs

    (here / "nb.yaml").write_text(NB_PIPELINE)
    plan = plan_pipeline("nb.yaml")
    with claim_outputs(plan, wait=False, argv=["another", "run"]), ReadCounter() as counter:
        outcome = ddr.pipeline.run(plan, cluster="local", wait=False)
        assert outcome.status == "refused" and outcome.summary is None
        assert "is being written by another run" in outcome.error
        # the other run's (its two outputs and the run's state), kept
        assert len(list(here.glob("out/*.ddr-claim"))) == 3
        with pytest.raises(ClaimError):
            outcome.check()
    assert counter.read(here / "demo.zarr", "X") == 0
    assert output_status(here / "out" / "proba.zarr") == "missing"
