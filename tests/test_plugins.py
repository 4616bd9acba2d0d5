"""Plug-ins through entry points (ddr.plugins): a package installed beside ddr adds an
estimator, a statistic, an output kind and a cluster backend without an edit to ddr.

Two real distributions are built from their sources in ``tests/plugins/`` (a pyproject.toml
and a package each) as wheels and installed with pip into this test's temporary directory:

- ``ddr-extrema``: a ``MaxAbsScaler`` fitted from a new mergeable ``Extrema`` statistic, a
  CSV ``table`` output kind and an LSF cluster backend (dask-jobqueue's ``LSFCluster``);
- ``ddr-faulty``: entry points that are each wrong in their own way (an import that fails,
  names that are ddr's or the other plug-in's, classes that are not the group's kind or
  lack a piece).

Everything that uses them runs in subprocesses with ``PYTHONPATH`` at that directory, so the
registries of this process never see them: ``ddr ops``, ``ddr schema``, ``ddr validate``, a
pipeline run (the plug-in estimator fitted, its transform and statistic written by the
plug-in output kind), ``ddr run --dry-run`` with an LSF cluster config, ``ddr.load`` of the
saved plug-in model, and ddr's conformance suites run by pytest in the plug-in's own test
file. Each faulty entry point is logged once, naming its distribution, and skipped.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zarr

import ddr

PLUGINS = Path(__file__).resolve().parent / "plugins"

PIPELINE = """\
ddr: 1
name: plugins
inputs:
  X: {path: demo.zarr, array: X}
steps:
  scaler: {op: MaxAbsScaler.fit, inputs: {X: X}}
  scaled: {op: MaxAbsScaler.transform, inputs: {model: scaler, X: X}}
  ext: {op: extrema, inputs: {X: X}}
outputs:
  - {kind: table, from: {x: scaled}, path: out/scaled.csv}
  - {kind: table, from: {scale: scaler.scale_, max_abs: ext.max_abs}, path: out/scale.csv}
  - {kind: zarr, from: scaled, path: out/scaled.zarr}
  - {kind: zarr, from: ext, path: out/extrema.zarr}
  - {kind: model, from: scaler, path: out/scaler.model}
"""

APPLY = """\
ddr: 1
name: apply
inputs:
  X: {path: demo.zarr, array: X}
steps:
  model: {op: load, with: {path: out/scaler.model}}
  t: {op: MaxAbsScaler.transform, inputs: {model: model, X: X}}
outputs:
  - {kind: table, from: {t: t}, path: applied/t.csv}
"""

LSF = """\
ddr-cluster: 1
kind: lsf
lsf: {cores: 4, memory: 16GB, queue: normal, walltime: "01:00", log_directory: lsf-logs}
scale: {jobs: 2}
"""

#: what ddr-faulty's entry points are, as the log says it (group entry point -> problem)
FAULTS = {
    "ddr.estimators entry point Missing = ddr_faulty.missing:Missing": "importing it failed: "
    "ModuleNotFoundError: No module named 'ddr_not_installed'",
    "ddr.estimators entry point PCA = ddr_faulty.kinds:Untagged": "its name 'PCA' is ddr's own",
    "ddr.estimators entry point Untagged = ddr_faulty.kinds:Untagged": "Untagged has no "
    "__ddr_tags__ (subclass ddr.base.DDRMixin)",
    "ddr.statistics entry point notastat = ddr_faulty.kinds:NotAStatistic": "is <class "
    "'ddr_faulty.kinds.NotAStatistic'>, not a statistic class",
    "ddr.outputs entry point zarr = ddr_faulty.kinds:Zarrish": "the output kind name 'zarr' is "
    "ddr's own (ddr.pipeline.outputs.zarr.ZarrKind)",
    "ddr.outputs entry point table = ddr_faulty.kinds:Zarrish": "the name 'table' is "
    "'ddr-extrema''s already",
    "ddr.cluster_backends entry point half = ddr_faulty.kinds:Half": "cluster backend Half "
    "cannot be registered; it does not set: target",
}


# ------------------------------------------------------------------ the installation
def build_wheel(source: Path, out: Path) -> Path:
    """A wheel of the pure-Python distribution at ``source``: its packages, and metadata
    and entry points from its pyproject.toml (what any build backend writes for them)."""
    project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    files: dict[str, bytes] = {}
    for init in sorted(source.glob("*/__init__.py")):
        for path in sorted(init.parent.rglob("*.py")):
            files[path.relative_to(source).as_posix()] = path.read_bytes()
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    files[f"{info}/METADATA"] = metadata.encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: ddr-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/entry_points.txt"] = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
        for group, entries in project["entry-points"].items()
    ).encode()
    record = []
    for arcname, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = out / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for arcname, data in files.items():
            zf.writestr(arcname, data)
    return wheel


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Both plug-in distributions, installed by pip into a directory of their own."""
    base = tmp_path_factory.mktemp("plugins")
    wheels = [str(build_wheel(PLUGINS / name, base)) for name in ("ddr-extrema", "ddr-faulty")]
    target = base / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
         "--disable-pip-version-check", "--target", str(target), *wheels],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "ddr_extrema-0.1.0.dist-info" / "entry_points.txt").exists()
    return target


@pytest.fixture(scope="module")
def work(site, tmp_path_factory) -> Path:
    """A working directory with demo data, the pipeline and the LSF cluster config."""
    import dask

    from ddr.demo import DemoSpec, write_demo_data

    here = tmp_path_factory.mktemp("work")
    spec = DemoSpec(n_samples=400, n_features=4, rank=2, chunk_rows=100, seed=3)
    with dask.config.set(scheduler="sync"):
        write_demo_data(here / "demo.zarr", spec)
    (here / "pipeline.yaml").write_text(PIPELINE)
    (here / "lsf.yaml").write_text(LSF)
    return here


def run(site: Path, cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python *args`` with the plug-ins on the path (and ddr where this process has it)."""
    path = [str(site), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def cli(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run(site, cwd, "-m", "ddr.cli", *args)


def _faults_logged(stderr: str, groups: tuple[str, ...]) -> None:
    """Every fault of ``groups`` is logged exactly once, naming ddr-faulty and what is wrong."""
    for where, problem in FAULTS.items():
        if where.split()[0] not in groups:
            continue
        lines = [line for line in stderr.splitlines() if f"'ddr-faulty' ({where})" in line]
        assert len(lines) == 1, (where, stderr)
        assert problem in lines[0], (problem, lines[0])


# ------------------------------------------------------------------------- the tests
def test_this_process_sees_no_plugin():
    from ddr.pipeline import registry

    assert "MaxAbsScaler.fit" not in registry.ops() and "extrema" not in registry.ops()


def test_ops_lists_the_plugin_estimator_and_statistic(site, work):
    done = cli(site, work, "ops")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "MaxAbsScaler.fit(X, y?, sample_weight?) -> model" in lines
    assert "MaxAbsScaler.fit_transform(X, y?, sample_weight?) -> data, model" in lines
    assert "MaxAbsScaler.inverse_transform(model, X) -> data" in lines
    assert "extrema(X, sample_weight?) -> statistic" in lines
    # ddr's own PCA, not ddr-faulty's
    assert "PCA.fit(X, y?, sample_weight?, feature_weights?) -> model" in lines
    assert not any(line.startswith(("Untagged.", "Missing.", "notastat")) for line in lines)
    _faults_logged(done.stderr, ("ddr.estimators", "ddr.statistics"))


def test_schema_lists_the_plugin_ops_kind_and_backend(site, work):
    done = cli(site, work, "schema")
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    ops = schema["$defs"]["StepSpec"]["properties"]["op"]["enum"]
    assert {"MaxAbsScaler.fit", "MaxAbsScaler.transform", "extrema"} <= set(ops)
    table = schema["$defs"]["TableOutput"]["properties"]
    assert table["kind"]["const"] == "table" and table["delimiter"]["enum"] == [",", ";", "\t"]
    cluster = cli(site, work, "schema", "--cluster")
    assert cluster.returncode == 0, cluster.stderr
    props = json.loads(cluster.stdout)["properties"]
    assert props["kind"]["enum"][-1] == "lsf" and "half" not in props["kind"]["enum"]
    assert props["lsf"]["description"] == "dask_jobqueue.LSFCluster keyword arguments."
    _faults_logged(cluster.stderr, ("ddr.cluster_backends",))


def test_validate_checks_plugin_steps_and_outputs(site, work):
    good = cli(site, work, "validate", "pipeline.yaml")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = (
        PIPELINE.replace("X: X}}\n  scaled", "X: X}, with: {copy: true}}\n  scaled")
        .replace("path: out/scaled.csv}", "path: out/scaled.csv, delimiter: '|'}")
        .replace("{kind: zarr, from: ext,", "{kind: tabel, from: ext,")
        .replace("inputs: {X: X}}\noutputs", "inputs: {X: X}, with: {bins: 3}}\noutputs")
    )
    (work / "bad.yaml").write_text(bad)
    done = cli(site, work, "validate", "bad.yaml")
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "bad.yaml:6:" in said and "unknown parameter 'copy' for MaxAbsScaler" in said
    assert "unknown parameter 'bins' for extrema" in said
    assert "outputs[0].delimiter: expected ',', ';' or '\\t'; got '|'" in said
    assert (
        "unknown kind 'tabel'; valid kinds: 'zarr', 'model', 'metrics', 'plot', 'cv_results', "
        "'table'" in said
    )


@pytest.fixture(scope="module")
def ran(site, work) -> subprocess.CompletedProcess:
    """The pipeline, run once."""
    done = cli(site, work, "run", "pipeline.yaml", "--cluster", "sync", "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_run_fits_the_plugin_estimator_and_writes_with_the_plugin_kind(site, work, ran):
    X = zarr.open_group(str(work / "demo.zarr"), mode="r")["X"][...]
    max_abs = np.abs(X).max(axis=0)
    # the plug-in output kind: the transform streamed in the final pass, and small values
    scaled = np.loadtxt(work / "out/scaled.csv", delimiter=",", skiprows=1, comments="#")
    np.testing.assert_allclose(scaled, X / max_abs, rtol=1e-12)
    header = (work / "out/scaled.csv").read_text().splitlines()[0]
    assert header == "x_0,x_1,x_2,x_3"
    scale = np.loadtxt(work / "out/scale.csv", delimiter=",", skiprows=1, comments="#")
    np.testing.assert_array_equal(scale, np.column_stack([max_abs, max_abs]))
    # ddr's own kinds label the plug-ins' values with the dims their classes declare
    import xarray as xr

    with xr.open_zarr(work / "demo.zarr") as demo:
        sample, feature = demo["X"].dims
    with xr.open_zarr(work / "out/scaled.zarr") as out:
        assert dict(out.sizes) == {sample: 400, feature: 4}
    with xr.open_zarr(work / "out/extrema.zarr") as out:
        assert out["max_abs"].dims == (feature,) and out["count"].dims == ()
        np.testing.assert_array_equal(out["max_abs"].values, max_abs)
    # a rerun keeps what is complete
    again = cli(site, work, "run", "pipeline.yaml", "--cluster", "sync", "--resume")
    assert again.returncode == 0 and again.stdout.count("skip") >= 5, again.stdout
    shown = cli(site, work, "inspect", "out/scaled.csv", "--json")
    info = json.loads(shown.stdout)
    assert info["kind"] == "table" and info["status"] == "complete" and info["rows"] == 400
    _faults_logged(ran.stderr, ("ddr.estimators", "ddr.statistics", "ddr.outputs"))


def test_load_imports_registered_plugin_classes_only(site, work, ran):
    # a module on the path that no entry point registers, and a class of the plug-in that is
    # not registered as an estimator or statistic (a backend)
    (work / "sneaky.py").write_text(
        "open('sneaky-was-imported', 'w').close()\nclass Payload: ...\n"
    )
    for name, target in (("sneaky.model", "sneaky.Payload"), ("lsf.model", "ddr_extrema.lsf.LSF")):
        shutil.copytree(work / "out/scaler.model", work / name, dirs_exist_ok=True)
        zarr.open_group(str(work / name), mode="r+").attrs["ddr:model"] = target
    script = (
        "import numpy as np, ddr\n"
        "m = ddr.load('out/scaler.model')\n"
        "print(type(m).__module__, type(m).__name__, type(m.extrema_).__name__)\n"
        "print(np.asarray(m.max_abs_).tolist())\n"
        "for path in ('sneaky.model', 'lsf.model'):\n"
        "    try:\n"
        "        ddr.load(path)\n"
        "    except ValueError as exc:\n"
        "        print('refused:', exc)\n"
    )
    done = run(site, work, "-c", script)
    assert done.returncode == 0, done.stderr
    kind, values, sneaky, lsf = done.stdout.splitlines()
    assert kind == "ddr_extrema.scaler MaxAbsScaler Extrema"
    X = zarr.open_group(str(work / "demo.zarr"), mode="r")["X"][...]
    np.testing.assert_array_equal(json.loads(values), np.abs(X).max(axis=0))
    assert "'sneaky.Payload' is neither a class of ddr nor an estimator or statistic" in sneaky
    assert "'ddr_extrema.lsf.LSF' is neither a class of ddr nor an estimator" in lsf
    assert not (work / "sneaky-was-imported").exists()
    # a pipeline's load step: the plug-in model, applied by the plug-in op, written by the
    # plug-in output kind
    (work / "apply.yaml").write_text(APPLY)
    applied = cli(site, work, "run", "apply.yaml", "--cluster", "sync", "--no-progress")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    got = np.loadtxt(work / "applied/t.csv", delimiter=",", skiprows=1, comments="#")
    np.testing.assert_allclose(got, X / np.abs(X).max(axis=0), rtol=1e-12)
    # and without the plug-in installed its model is refused, naming the class
    with pytest.raises(ValueError, match=re.escape("ddr:model='ddr_extrema.scaler.MaxAbsScaler'")):
        ddr.load(work / "out/scaler.model")
    assert "ddr_extrema" not in sys.modules


def test_dry_run_with_the_plugin_backend_prints_the_lsf_job_script(site, work):
    fresh = work / "dry"
    fresh.mkdir()
    for name in ("demo.zarr", "pipeline.yaml", "lsf.yaml"):
        (fresh / name).symlink_to(work / name)
    done = cli(site, fresh, "run", "pipeline.yaml", "--dry-run", "--cluster", "lsf.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout
    assert "cluster (lsf.yaml, kind lsf):" in said
    assert "# LSFCluster: job script (scale: {'jobs': 2})" in said
    assert "#BSUB -q normal" in said and "#BSUB -W 01:00" in said
    assert "#BSUB -n 4" in said and "#BSUB -e lsf-logs/ddr-worker-%J.err" in said
    assert sorted(p.name for p in fresh.iterdir()) == ["demo.zarr", "lsf.yaml", "pipeline.yaml"]
    # every group was used: every fault logged once, and everything else worked
    _faults_logged(done.stderr, tuple({w.split()[0] for w in FAULTS}))
    (fresh / "lsf-typo.yaml").write_text(LSF.replace("queue: normal", "queues: normal"))
    typo = cli(site, fresh, "run", "pipeline.yaml", "--dry-run", "--cluster", "lsf-typo.yaml")
    assert typo.returncode == 2
    assert (
        "lsf-typo.yaml:3:31: dask_jobqueue.LSFCluster has no keyword 'queues' "
        "(did you mean 'queue'?)" in typo.stdout + typo.stderr
    )


def test_the_plugin_passes_ddrs_conformance_suites_in_its_own_tests(site, tmp_path):
    tests = tmp_path / "plugin-tests"
    shutil.copytree(PLUGINS / "ddr-extrema" / "tests", tests)
    (tests / "pytest.ini").write_text("[pytest]\n")  # its own root, not ddr's
    done = run(site, tests, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", ".", timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|skipped)", summary)}
    # the registry check, 13 estimator checks, 6 statistic checks, 2 examples of the table
    # kind, 5 backend checks
    assert counts.get("passed", 0) + counts.get("skipped", 0) == 27, summary


# ------------------------------------------------- loading, in this process (no registry)
@pytest.fixture
def entry_points(monkeypatch, tmp_path):
    """Entry points of the ``ddr.statistics`` group as given (``(name, value, dist)``), over
    modules in ``tmp_path``; ddr.plugins forgets them afterwards."""
    import importlib.metadata
    from types import SimpleNamespace

    from ddr import plugins

    listed: list[SimpleNamespace] = []

    def fake(group=None):
        return [ep for ep in listed if group == "ddr.statistics"]

    def give(*items):
        for name, value, dist in items:
            listed.append(SimpleNamespace(name=name, value=value, dist=SimpleNamespace(name=dist)))

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins._reset()
    yield give
    plugins._reset()
    for name in ("early_stat", "late_stat"):
        sys.modules.pop(name, None)


def test_an_entry_point_of_a_module_being_imported_is_loaded_on_the_next_use(
    entry_points, tmp_path, caplog
):
    """A plug-in module that uses a ddr registry while it is imported (its group is read
    then) is not reported broken: its own entry point is imported on the next use."""
    from ddr import plugins

    (tmp_path / "early_stat.py").write_text("class Early: ...\n")
    (tmp_path / "late_stat.py").write_text(
        "from ddr import plugins\n"
        "SEEN = [p.name for p in plugins.load('ddr.statistics')]\n"
        "class Late: ...\n"
    )
    entry_points(
        ("early", "early_stat:Early", "dist-a"),
        ("late", "late_stat:Late", "dist-b"),
        ("late", "early_stat:Early", "dist-c"),  # the same name in another distribution
    )
    import late_stat

    assert late_stat.SEEN == ["early"]
    assert [(p.name, p.obj.__name__) for p in plugins.load("ddr.statistics")] == [
        ("early", "Early"),
        ("late", "Late"),
    ]
    assert [(str(p), problem) for p, problem in plugins.skipped()] == [
        (
            "'dist-c' (ddr.statistics entry point late = early_stat:Early)",
            "the name 'late' is 'dist-b''s already",
        )
    ]
    assert caplog.text.count("skipped") == 1
