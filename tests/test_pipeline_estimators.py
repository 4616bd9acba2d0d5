"""Every ddr estimator works as pipeline ops: fit, then each method it has (transform,
inverse_transform, predict, predict_proba, predict_log_proba, decision_function,
score_samples, impute, score: the registry's apply methods), with results equal to calling
the estimator directly on the same data; per-row outputs carry the rows of their input."""

from __future__ import annotations

import json

import dask
import numpy as np
import pytest
import xarray as xr
from sklearn.utils import get_tags

import ddr
from ddr.pipeline import plan_pipeline, registry, run_plan
from ddr.tags import get_ddr_tags

N, D = 600, 6


def _case(name: str) -> tuple[dict, str]:
    """The constructor parameters (the small-data parameters the estimator's tags give its
    checks) and the kind of training data ("real", "labelled", "categorical",
    "categorical-labelled" or "two-view"), asked of the class: no list of estimators."""
    cls = getattr(ddr, name)
    params = dict(get_ddr_tags(cls).checks.params)
    tags = get_tags(cls(**params))
    if tags.target_tags.required and tags.estimator_type != "classifier":
        return params, "two-view"
    counts = tags.input_tags.categorical or tags.input_tags.positive_only
    kind = "categorical" if counts else "real"
    if tags.estimator_type == "classifier":
        kind = "categorical-labelled" if counts else "labelled"
    return params, kind


#: every exported estimator the pipeline has ops for
NAMES = sorted(n for n in ddr._EXPORTS if f"{n}.fit" in registry.ops())


def test_the_exported_estimators_have_ops():
    assert len(NAMES) >= 20 and {"PCA", "GaussianNB", "CCA", "PLSA"} <= set(NAMES)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("estimators")
    rng = np.random.default_rng(7)
    y = rng.integers(0, 3, size=N)
    X = (rng.standard_normal((N, D)) @ rng.standard_normal((D, D)) + 2.0 * y[:, None]).astype(
        np.float32
    )
    C = np.clip(np.floor(X + 3.0), 0, 7).astype(np.int64)
    ds = xr.Dataset(
        {
            "X": (("sample", "feature"), X),
            "C": (("sample", "feature"), C),
            "y": (("sample",), y),
        }
    ).chunk({"sample": 200})
    ds.to_zarr(d / "data.zarr", zarr_format=3, consolidated=False)
    return d, X, C, y


def _pipeline(name: str, params: dict, kind: str) -> str:
    cls = getattr(ddr, name)
    array = "C" if kind.startswith("categorical") else "X"
    inputs = {"X": f"{{path: data.zarr, array: {array}}}", "y": "{path: data.zarr, array: y}"}
    fit_inputs = "{X: X, y: y}" if kind.endswith("labelled") else "{X: X}"
    if kind == "two-view":
        inputs = {
            "X": "{path: data.zarr, array: X, isel: {feature: '0:3'}}",
            "Y": "{path: data.zarr, array: X, isel: {feature: '3:'}}",
        }
        fit_inputs = "{X: X, y: Y}"
    lines = [
        "ddr: 1",
        f"name: {name.lower()}",
        "inputs:",
        *[f"  {k}: {v}" for k, v in inputs.items()],
        "steps:",
        f"  model: {{op: {name}.fit, inputs: {fit_inputs}, with: {json.dumps(params)}}}",
    ]
    arrays, metrics = [], []
    for method in registry.APPLY_METHODS:
        if not callable(getattr(cls, method, None)):
            continue
        if method == "inverse_transform":
            if "transform" not in arrays:
                continue
            role_inputs = "{model: model, X: transform}"
        elif kind == "two-view" and method in ("score_samples", "score"):
            role_inputs = "{model: model, X: X, y: Y}"  # the likelihood of the pairs
        elif method == "score":
            role_inputs = (
                "{model: model, X: X, y: y}"
                if kind.endswith("labelled")
                else "{model: model, X: X}"
            )
        else:
            role_inputs = "{model: model, X: X}"
        lines.append(f"  {method}: {{op: {name}.{method}, inputs: {role_inputs}}}")
        (metrics if method == "score" else arrays).append(method)
    lines.append("outputs:")
    lines.append("  - {kind: model, from: model, path: out/model.zarr}")
    if arrays:
        mapping = ", ".join(f"{m}: {m}" for m in arrays)
        lines.append(f"  - {{kind: zarr, from: {{{mapping}}}, path: out/arrays.zarr}}")
    if metrics:
        lines.append("  - {kind: metrics, from: {score: score}, path: out/metrics.json}")
    return "\n".join(lines) + "\n", arrays, metrics


@pytest.mark.parametrize("name", NAMES)
def test_estimator_ops_equal_direct_calls(name, data, tmp_path, monkeypatch):
    d, X, C, y = data
    params, kind = _case(name)
    (tmp_path / "data.zarr").symlink_to(d / "data.zarr")
    monkeypatch.chdir(tmp_path)
    text, arrays, metrics = _pipeline(name, params, kind)
    (tmp_path / "p.yaml").write_text(text)
    with dask.config.set(scheduler="threads"):
        summary = run_plan(plan_pipeline("p.yaml"))
    assert summary.status == "ok"

    train = C if kind.startswith("categorical") else X
    est = getattr(ddr, name)(**params)
    if kind == "two-view":
        est.fit(X[:, :3], X[:, 3:])
    elif kind.endswith("labelled"):
        est.fit(train, y)
    else:
        est.fit(train)
    saved = ddr.load("out/model.zarr")
    assert type(saved) is type(est)
    Xa = X[:, :3] if kind == "two-view" else train
    with xr.open_zarr("out/arrays.zarr", consolidated=False) as ds:
        for method in arrays:
            if method == "inverse_transform":
                expected = est.inverse_transform(est.transform(Xa))
            elif kind == "two-view" and method == "score_samples":
                expected = est.score_samples(Xa, X[:, 3:])
            else:
                expected = getattr(est, method)(Xa)
            got = ds[method].values
            if np.asarray(expected).dtype.kind in "fc":
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=method)
            else:
                np.testing.assert_array_equal(got, expected, err_msg=method)
    if metrics:
        score = json.loads((tmp_path / "out/metrics.json").read_text())["score"]
        if kind == "two-view":
            expected = est.score(Xa, X[:, 3:])
        else:
            expected = est.score(train, y) if kind.endswith("labelled") else est.score(train)
        assert score == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_per_row_outputs_carry_the_rows_of_the_input(data, tmp_path, monkeypatch):
    """A prediction over ``isel: {sample: "400:"}`` is written with the rows it came from
    (the input has no coordinate: its row numbers); labels of those rows stored in another
    array (numbered from 0) are still paired with them by position, in the fit and in the
    output, as rows without a coordinate always were."""
    d, X, _, y = data
    (tmp_path / "data.zarr").symlink_to(d / "data.zarr")
    xr.Dataset({"y_test": (("sample",), y[400:])}).to_zarr(
        tmp_path / "test.zarr", zarr_format=3, consolidated=False
    )
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(
        """\
ddr: 1
name: rows
inputs:
  train: {path: data.zarr, array: X, isel: {sample: ":400"}}
  labels: {path: data.zarr, array: y, isel: {sample: ":400"}}
  test: {path: data.zarr, array: X, isel: {sample: "400:"}}
  test_labels: {path: test.zarr, array: y_test}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: train, y: labels}}
  refit: {op: GaussianNB.fit, inputs: {X: test, y: test_labels}}
  predicted: {op: GaussianNB.predict, inputs: {model: nb, X: test}}
  log_proba: {op: GaussianNB.predict_log_proba, inputs: {model: nb, X: test}}
  accuracy: {op: GaussianNB.score, inputs: {model: nb, X: test, y: test_labels}}
outputs:
  - {kind: zarr, from: {predicted: predicted, log_proba: log_proba}, path: out/pred.zarr}
  - {kind: zarr, from: {predicted: predicted, label: test_labels}, path: out/paired.zarr}
  - {kind: model, from: refit, path: out/refit.zarr}
  - {kind: metrics, from: {accuracy: accuracy}, path: out/metrics.json}
"""
    )
    with dask.config.set(scheduler="threads"):
        assert run_plan(plan_pipeline("p.yaml")).status == "ok"
    est = ddr.GaussianNB().fit(X[:400], y[:400])
    with xr.open_zarr("out/pred.zarr", consolidated=False) as ds:
        np.testing.assert_array_equal(ds["sample"].values, np.arange(400, N))
        assert ds["sample"].attrs["long_name"] == "row number in input test"
        np.testing.assert_array_equal(ds["predicted"].values, est.predict(X[400:]))
        np.testing.assert_allclose(ds["log_proba"].values, est.predict_log_proba(X[400:]))
    with xr.open_zarr("out/paired.zarr", consolidated=False) as ds:
        assert ds.sizes["sample"] == N - 400  # paired by position, not spread over 0..599
        np.testing.assert_array_equal(ds["label"].values, y[400:])
        np.testing.assert_array_equal(ds["predicted"].values, est.predict(X[400:]))
    refit = ddr.load("out/refit.zarr")
    np.testing.assert_allclose(refit.theta_, ddr.GaussianNB().fit(X[400:], y[400:]).theta_)
    score = json.loads((tmp_path / "out/metrics.json").read_text())["accuracy"]
    assert score == pytest.approx(est.score(X[400:], y[400:]))


def test_rows_with_a_stored_coordinate_keep_it(tmp_path, monkeypatch):
    """An input whose samples have a coordinate (times) gives per-row outputs that coordinate,
    selected rows included."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 4))
    times = np.datetime64("2020-01-01") + np.arange(300).astype("timedelta64[D]")
    xr.Dataset({"X": (("time", "feature"), X)}, coords={"time": times}).chunk(
        {"time": 100}
    ).to_zarr(tmp_path / "t.zarr", zarr_format=3, consolidated=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(
        """\
ddr: 1
name: times
inputs:
  X: {path: t.zarr, array: X}
  late: {path: t.zarr, array: X, isel: {time: "250:"}}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}
  scores: {op: PCA.transform, inputs: {model: pca, X: late}}
outputs:
  - {kind: zarr, from: scores, path: out/scores.zarr}
"""
    )
    with dask.config.set(scheduler="threads"):
        assert run_plan(plan_pipeline("p.yaml")).status == "ok"
    with xr.open_zarr("out/scores.zarr", consolidated=False) as ds:
        np.testing.assert_array_equal(ds["time"].values, times[250:])
        np.testing.assert_allclose(
            ds["scores"].values, ddr.PCA(2).fit(X).transform(X[250:]), rtol=1e-10
        )
