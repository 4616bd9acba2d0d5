"""Acceptance on a real S3 endpoint (moto's server): the example pipelines with S3 in and S3
out give the numbers they give on local files; ``ddr inspect s3://...`` says complete; a rerun
resumes from the metadata documents; credentials given in a pipeline appear nowhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dask
import numpy as np
import pytest
import zarr
from pipeline_support import DATASETS, OVERRIDES, PIPELINES
from typer.testing import CliRunner

from ddr.cli import app
from ddr.demo import write_demo_data
from ddr.io.locations import resolve
from ddr.pipeline import plan_pipeline, run_plan

#: pipeline -> the datasets its params read (param -> dataset name)
CASES = {
    "quickstart": {"data": "demo.zarr"},
    "classify": {"data": "demo.zarr", "test": "demo.zarr"},
    "ppca-missing": {"data": "demo-missing.zarr"},
}


@pytest.fixture(scope="module")
def datasets(s3, tmp_path_factory):
    """The small demo datasets, locally and (generated the same way) on S3."""
    local = tmp_path_factory.mktemp("local-data")
    remote = s3.url("data")
    names = sorted({n for case in CASES.values() for n in case.values()})
    with dask.config.set(scheduler="threads"):
        for name in names:
            write_demo_data(local / name, DATASETS[name])
            write_demo_data(f"{remote}/{name}", DATASETS[name])
    return local, remote


def _run(name: str, data_root: str, out: str) -> dict:
    params = [f"{p}={data_root}/{d}" for p, d in CASES[name].items()]
    plan = plan_pipeline(
        PIPELINES / f"{name}.yaml", [*OVERRIDES.get(name, []), *params, f"out={out}"]
    )
    return run_plan(plan).to_dict()


def _zarr_outputs(root: str) -> dict[str, dict[str, np.ndarray]]:
    loc = resolve(root)
    out = {}
    for key in sorted(loc.fs.find(loc.fs_path)):
        if key.endswith(".zarr/zarr.json") and key.count(".zarr/") == 1:
            name = key.rsplit("/", 2)[-2]
            group = zarr.open_group(loc.joinpath(name).store(), mode="r")
            out[name] = {a: np.asarray(arr[...]) for a, arr in sorted(group.arrays())}
            for sub, g in group.groups():  # saved models keep statistics in sub-groups
                for a, arr in g.arrays():
                    out[name][f"{sub}/{a}"] = np.asarray(arr[...])
    return out


def _metrics(root: str) -> dict[str, dict]:
    loc = resolve(root)
    out = {}
    for key in loc.fs.find(loc.fs_path):
        if key.endswith(".json") and "/" not in key[len(loc.fs_path) + 1 :].rstrip("/"):
            if key.endswith("run-summary.json"):
                continue
            data = json.loads(loc.fs.cat_file(key))
            out[key.rsplit("/", 1)[1]] = {k: v for k, v in data.items() if not k.startswith("ddr:")}
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_pipeline_on_s3_gives_the_local_numbers(name, datasets, s3, s3_client, tmp_path):
    local_data, remote_data = datasets
    local_out, remote_out = str(tmp_path / "out"), s3.url(f"{name}-out")
    local = _run(name, str(local_data), local_out)
    remote = _run(name, remote_data, remote_out)
    assert local["status"] == remote["status"] == "ok"
    # the runner measured the same passes over the S3 input as over the local one
    assert sorted(remote["passes"].values()) == pytest.approx(sorted(local["passes"].values()))
    assert remote["passes"] and all(v >= 1 for v in remote["passes"].values())

    got, want = _zarr_outputs(remote_out), _zarr_outputs(local_out)
    assert sorted(got) == sorted(want) and want
    for out_name, arrays in want.items():
        assert sorted(got[out_name]) == sorted(arrays)
        for arr, values in arrays.items():
            if values.dtype.kind == "f":
                np.testing.assert_allclose(got[out_name][arr], values, rtol=1e-12, atol=0)
            else:
                np.testing.assert_array_equal(got[out_name][arr], values)
    assert _metrics(remote_out) == _metrics(local_out)
    pngs = [
        k for k in resolve(remote_out).fs.find(resolve(remote_out).fs_path) if k.endswith(".png")
    ]
    assert len(pngs) == len([p for p in os.listdir(local_out) if p.endswith(".png")])

    summary = json.loads(resolve(f"{remote_out}/run-summary.json").read_bytes())
    assert summary["status"] == "ok"
    zarr_outputs = [o["path"] for o in summary["outputs"] if o["kind"] == "zarr"]
    for path in zarr_outputs:
        assert path.startswith("s3://")
        shown = CliRunner().invoke(app, ["inspect", path])
        assert shown.exit_code == 0, shown.output
        assert shown.output.splitlines()[0] == f"{path}: complete"

    # a rerun keeps every complete output (fingerprints from the metadata documents)
    params = [f"{p}={remote_data}/{d}" for p, d in CASES[name].items()]
    again = plan_pipeline(
        PIPELINES / f"{name}.yaml", [*OVERRIDES.get(name, []), *params, f"out={remote_out}"]
    )
    assert {o.action for o in again.outputs} == {"skip"}


def test_an_output_inside_an_input_url_is_refused(datasets, s3, tmp_path):
    _, remote_data = datasets
    data = f"{remote_data}/demo.zarr"
    for out in (f"{data}/", f"{data}/./scores", data.replace("/data/", "/./data/")):
        pipeline = PIPELINES / "quickstart.yaml"
        with pytest.raises(Exception) as err:
            plan_pipeline(pipeline, [f"data={data}", f"out={out}"])
        text = str(err.value)
        assert (
            "is inside the input" in text
            or "would be inside the input" in text
            or ("the input" in text and "outputs never overwrite inputs" in text)
        ), text
    assert resolve(data).joinpath("scores").exists() is False


SECRET_PIPELINE = """\
ddr: 1
name: secret
params: {data: "", out: "", key: "", secret: ""}
inputs:
  X:
    path: ${params.data}
    array: X
    storage_options: {key: "${params.key}", secret: "${params.secret}"}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 3}}
  scores: {op: PCA.transform, inputs: {model: pca, X: X}}
outputs:
  - kind: zarr
    from: scores
    path: ${params.out}/scores.zarr
    storage_options: {key: "${params.key}", secret: "${params.secret}"}
  - kind: model
    from: pca
    path: ${params.out}/pca.zarr
    storage_options: {key: "${params.key}", secret: "${params.secret}"}
  - kind: metrics
    from: [pca.explained_variance_]
    path: ${params.out}/metrics.json
    storage_options: {key: "${params.key}", secret: "${params.secret}"}
run:
  summary: ${params.out}/summary.json
  storage_options: {key: "${params.key}", secret: "${params.secret}"}
"""


def test_secrets_in_a_pipeline_appear_nowhere(datasets, s3, tmp_path):
    """Credentials given only as pipeline storage_options (and on the command line): the
    run works, and the secret is in no object written, no summary, no output, no log."""
    _, remote_data = datasets
    (tmp_path / "secret.yaml").write_text(SECRET_PIPELINE)
    out = s3.url("secret-out")
    env = s3.env_without_credentials(tmp_path)
    cmd = [
        sys.executable,
        "-m",
        "ddr.cli",
        "run",
        "secret.yaml",
        "--cluster",
        "threads",
        "--no-progress",
        "--set",
        f"data={remote_data}/demo.zarr",
        "--set",
        f"out={out}",
        "--set",
        f"key={s3.key}",
        "--set",
        f"secret={s3.secret}",
        "--summary",
        str(tmp_path / "local-summary.json"),
    ]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert s3.secret not in result.stdout + result.stderr
    keys = s3.keys(out)
    assert any(k.endswith("scores.zarr/zarr.json") for k in keys)
    for key in keys:
        body = s3.client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()
        assert s3.secret.encode() not in body, key
    attrs = json.loads(resolve(f"{out}/scores.zarr/zarr.json").read_bytes())["attributes"]
    prov = attrs["ddr:provenance"]
    assert prov["pipeline"]["resolved"]["inputs"]["X"]["storage_options"] == {
        "key": "***",
        "secret": "***",
    }
    assert prov["pipeline"]["resolved"]["params"]["secret"] == "***"
    assert "secret=***" in prov["run"]["command"]
    assert s3.secret not in (tmp_path / "local-summary.json").read_text()

    # a wrong secret: the run is refused before anything is read, without the secret
    bad = [*cmd[:-2]]
    bad[bad.index(f"secret={s3.secret}")] = "secret=wrong-secret-value-000"
    bad[bad.index(f"out={out}")] = f"out={s3.url('never')}"
    refused = subprocess.run(
        bad, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert refused.returncode == 2
    assert "access denied" in refused.stderr
    assert "wrong-secret-value-000" not in refused.stdout + refused.stderr
