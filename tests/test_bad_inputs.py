"""Generated bad inputs (issue 25, item 8): each is built in a fresh directory and given to
the command line, which must refuse it with a clear message and the documented exit code:
never a traceback, a hang, or an odd result given silently.

- Pipeline files and input metadata that are wrong are refused by ``ddr validate`` (and so
  by ``plan`` and ``run``) with ``file:line:col: message`` and exit code 2, before any data
  is read.
- What only the data can tell (a saved model whose chunks do not decode, a KDE bandwidth
  too small for the data) fails the run with exit code 1 and one line that says what is
  wrong.
- The Python API raises a ``ValueError``/``TypeError`` naming the parameter, what was
  expected and what was given.
- A log file on a full disk is said once and given up; the run goes on.

The pure pipeline-file cases also have a file in ``tests/broken_pipelines/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import zarr
from pipeline_support import ReadCounter, files_written
from typer.testing import CliRunner

import ddr
from ddr.cli import app
from ddr.demo import DemoSpec, write_demo_data

runner = CliRunner()

PCA_ON = """\
ddr: 1
name: bad
params: {{data: demo.zarr, out: out}}
inputs:
  X: {{path: "${{params.data}}", array: X{input_extra}}}
steps:
  pca: {{op: PCA.fit, inputs: {{X: X}}, with: {{n_components: {k}}}}}
outputs:
  - {{kind: model, from: pca, path: "{out}"}}
"""

APPLY = """\
ddr: 1
name: apply
inputs:
  X: {path: demo.zarr, array: X}
steps:
  pca: {op: load, with: {path: models/pca.zarr}}
  scores: {op: PCA.transform, inputs: {model: pca, X: X}}
outputs:
  - {kind: zarr, from: scores, path: out/scores.zarr}
"""

KDE = """\
ddr: 1
name: kde
inputs:
  X: {path: demo.zarr, array: X}
steps:
  kde: {op: KernelDensity.fit, inputs: {X: X}, with: {bandwidth: 1e-300}}
  density: {op: KernelDensity.score_samples, inputs: {model: kde, X: X}}
outputs:
  - {kind: zarr, from: density, path: out/density.zarr}
"""

METRICS = """\
ddr: 1
name: metrics
inputs:
  X: {path: demo.zarr, array: X}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 3}}
outputs:
  - {kind: metrics, from: [pca.explained_variance_], path: out/metrics.json}
run: {summary: out/run-summary.json}
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A small demo dataset: X 400 x 8 in chunks of 100 rows, y, consolidated metadata."""
    path = tmp_path_factory.mktemp("bad-inputs-data") / "demo.zarr"
    write_demo_data(path, DemoSpec(400, 8, 3, 3, 100, seed=0))
    return path


# ------------------------------------------------------------------ the breakers
def edit_metadata(store: Path, array: str, edit: Callable[[dict], None]) -> None:
    """Edit an array's ``zarr.json`` and the group's consolidated copy of it alike (a
    metadata document corrupted where zarr reads it, not a stale copy)."""
    own = store / array / "zarr.json"
    doc = json.loads(own.read_text())
    edit(doc)
    own.write_text(json.dumps(doc))
    root = store / "zarr.json"
    group = json.loads(root.read_text())
    consolidated = group.get("consolidated_metadata")
    if consolidated is not None:
        edit(consolidated["metadata"][array])
        root.write_text(json.dumps(group))


def corrupt_copy(here: Path, demo: Path, edit: Callable[[dict], None]) -> None:
    shutil.copytree(demo, here / "demo.zarr")
    edit_metadata(here / "demo.zarr", "X", edit)


def saved_pca(here: Path, demo: Path) -> Path:
    X = np.asarray(zarr.open_array(demo, path="X", mode="r")[...])
    path = here / "models" / "pca.zarr"
    ddr.PCA(n_components=5).fit(X).save(path)
    return path


def replace_model_array(model: Path, key: str) -> None:
    """Replace an array of a saved model by one of another size (metadata consistent)."""
    group = zarr.open_group(model, mode="a", use_consolidated=False)
    del group[key]
    group.create_array(key, shape=(1,), dtype="f8")[...] = 1.0
    zarr.consolidate_metadata(model)


def replace_model_chunk(here: Path, model: Path, key: str) -> None:
    """Replace the stored chunk of a model's array by the chunk of a 1-element array."""
    one = zarr.create_array(here / "one.zarr", shape=(1,), dtype="f8", compressors=None)
    one[...] = 1.0
    (chunk,) = [p for p in (model / key).rglob("*") if p.is_file() and p.name != "zarr.json"]
    shutil.copyfile(here / "one.zarr" / "c" / "0", chunk)


@dataclass(frozen=True)
class Case:
    """One generated bad input: ``build(here, demo)`` writes what the command needs into
    ``here`` and returns the pipeline file's name."""

    build: Callable[[Path, Path], str]
    command: str  # "validate" or "run"
    exit_code: int
    message: str  # a part of the one line that says what is wrong
    where: str | None = None  # "LINE:COL" of the problem in the pipeline file
    pipeline: bool = True  # a pipeline file (else a cluster config: ddr validate only)


def pipeline(text: str, name: str = "bad.yaml") -> Callable[[Path, Path], str]:
    def build(here: Path, demo: Path) -> str:
        if not (here / "demo.zarr").exists():
            (here / "demo.zarr").symlink_to(demo)
        (here / name).write_text(text)
        return name

    return build


def cluster_config(text: str) -> Callable[[Path, Path], str]:
    def build(here: Path, demo: Path) -> str:
        (here / "cluster.yaml").write_text(text)
        return "cluster.yaml"

    return build


def on_corrupt_data(edit: Callable[[dict], None]) -> Callable[[Path, Path], str]:
    def build(here: Path, demo: Path) -> str:
        corrupt_copy(here, demo, edit)
        return pipeline(PCA_ON.format(input_extra="", k=3, out="out/pca.zarr"))(here, demo)

    return build


def corrupt_model(how: str) -> Callable[[Path, Path], str]:
    def build(here: Path, demo: Path) -> str:
        model = saved_pca(here, demo)
        if how == "array":
            replace_model_array(model, "0002_components_")
        else:
            replace_model_chunk(here, model, "0002_components_")
        return pipeline(APPLY)(here, demo)

    return build


def many_rows(rows: int, extra: str = "", chunk_rows: int = 100) -> Callable[[Path, Path], str]:
    def edit(d: dict) -> None:
        d["shape"][0] = rows
        d["chunk_grid"]["configuration"]["chunk_shape"][0] = chunk_rows

    def build(here: Path, demo: Path) -> str:
        corrupt_copy(here, demo, edit)
        return pipeline(PCA_ON.format(input_extra=extra, k=3, out="out/pca.zarr"))(here, demo)

    return build


def with_chunks(size: str) -> str:
    return PCA_ON.format(input_extra=f", chunks: {{sample: {size}}}", k=3, out="out/pca.zarr")


def set_data_type(d: dict) -> None:
    d["data_type"] = "int32"  # the fill value stays "NaN", which no int32 holds


def set_chunk_rows_zero(d: dict) -> None:
    d["chunk_grid"]["configuration"]["chunk_shape"][0] = 0


CASES = {
    "chunks-zero": Case(
        pipeline(with_chunks("0")),
        "validate",
        2,
        "inputs.X.chunks.sample: a chunk size must be a positive number of elements, or -1 "
        "for the whole dim; got 0",
        "5:58",
    ),
    "chunks-negative": Case(
        pipeline(with_chunks("-5")),
        "validate",
        2,
        "inputs.X.chunks.sample: a chunk size must be a positive number of elements, or -1 "
        "for the whole dim; got -5",
        "5:58",
    ),
    "chunks-bool": Case(
        pipeline(with_chunks("true")),
        "validate",
        2,
        "inputs.X.chunks.sample: must be an integer, not a boolean; got True",
        "5:58",
    ),
    "nul-in-output-path": Case(
        pipeline(PCA_ON.format(input_extra="", k=3, out="out/p\\0ca.zarr")),
        "validate",
        2,
        "outputs[0].path: a path cannot hold a NUL byte (\\x00); got 'out/p\\x00ca.zarr'",
        "9:36",
    ),
    "n_components-true": Case(
        pipeline(PCA_ON.format(input_extra="", k="true", out="out/pca.zarr")),
        "validate",
        2,
        "The 'n_components' parameter of PCA must be an int in the range [1, inf), a float in "
        "the range (0.0, 1.0), a str among {'mle'} or None. Got True instead (a bool is not a "
        "number here).",
        "7:59",
    ),
    "unterminated-param": Case(
        pipeline(PCA_ON.format(input_extra="", k=3, out="${params.out/x.zarr")),
        "validate",
        2,
        "unterminated ${ in '${params.out/x.zarr' (character 1): write ${params.NAME}, with its "
        "closing brace",
        "9:36",
    ),
    "data-type-int32": Case(
        on_corrupt_data(set_data_type),
        "validate",
        2,
        "its Zarr metadata is corrupt or not readable by this zarr",
        "5:38",
    ),
    "shape-1e15-rows": Case(
        many_rows(10**15),
        "validate",
        2,
        "its metadata describes 10,000,000,000,000 chunks (shape [1000000000000000, 8] in "
        "chunks of [100, 8]); ddr reads at most 1,000,000 chunks of one input",
        "5:38",
    ),
    "chunk-shape-zero": Case(
        on_corrupt_data(set_chunk_rows_zero),
        "validate",
        2,
        "its Zarr metadata is corrupt: the chunk shape is [0, 8] (shape [400, 8])",
        "5:38",
    ),
    "cluster-config-bool-as-number": Case(
        cluster_config("ddr-cluster: 1\nkind: local\nscale: {n: true}\n"),
        "validate",
        2,
        "scale.n: must be an integer, not a boolean; got True",
        "3:12",
        pipeline=False,
    ),
    "model-array-replaced": Case(
        corrupt_model("array"),
        "validate",
        2,
        "the model at 'models/pca.zarr' is corrupt: components_: its array '0002_components_' "
        "has shape (1,); it was saved as (5, 8)",
        "6:32",
    ),
    "model-chunk-replaced": Case(
        corrupt_model("chunk"),
        "run",
        1,
        # a checksum that does not match (models are saved with crc32c), or, without one,
        # "cannot reshape array of size 1 into shape (5,8)"
        "is corrupt: components_: its array '0002_components_' cannot be decoded (",
    ),
    "kde-bandwidth-underflows": Case(
        pipeline(KDE),
        "run",
        1,
        "bandwidth=1e-300 is too small for this data",
    ),
}


def invoke(args: list[str]):
    """``ddr ARGS`` in this process; an exception that escaped the CLI fails the test (it
    would have been a traceback)."""
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}\n{result.output}"
    )
    assert "Traceback" not in result.output, result.output
    return result


@pytest.mark.parametrize("name", list(CASES))
def test_generated_bad_input_is_refused_clearly(name, demo, tmp_path, monkeypatch):
    case = CASES[name]
    monkeypatch.chdir(tmp_path)
    file = case.build(tmp_path, demo)
    inputs = {p.name for p in tmp_path.iterdir()}
    args = [case.command, file] + (["--cluster", "threads"] if case.command == "run" else [])
    with ReadCounter() as counter:
        result = invoke(args)
    assert result.exit_code == case.exit_code, result.output
    assert case.message in result.output, result.output
    (line,) = [ln for ln in result.output.splitlines() if case.message in ln]
    if case.where is not None:
        assert line.startswith(f"{file}:{case.where}: "), line
        assert not counter.bytes, "data was read before the problem was reported"
        assert files_written(tmp_path, inputs) == []
    else:
        assert line.startswith("ddr: error: run failed: step "), line
    # the same problem from ddr plan and ddr run, before anything is read
    if case.command == "validate" and case.pipeline:
        for command in (["plan"], ["run", "--cluster", "threads"]):
            again = invoke([*command, file])
            assert again.exit_code == 2 and case.message in again.output, again.output
        assert files_written(tmp_path, inputs) == []


# ------------------------------------------------------------------ the Python API
def test_python_api_refuses_a_bool_as_a_number():
    X = np.random.default_rng(0).normal(size=(50, 4))
    with pytest.raises(ValueError, match=r"'n_components' parameter of PCA must be .* Got True"):
        ddr.PCA(n_components=True).fit(X)
    with pytest.raises(ValueError, match=r"'random_state' parameter of KernelPCA .* Got True"):
        ddr.KernelPCA(n_components=2, random_state=True).fit(X)
    with pytest.raises(ValueError, match=r"'bandwidth' parameter of KernelDensity .* Got False"):
        ddr.KernelDensity(bandwidth=False).fit(X)
    # a bool where a bool is declared still passes
    assert ddr.PCA(n_components=2, whiten=True).fit(X).whiten is True


def test_python_api_refuses_a_path_with_a_nul_byte(tmp_path):
    from ddr.io.locations import LocationError

    model = ddr.PCA(n_components=1).fit(np.random.default_rng(0).normal(size=(10, 3)))
    for call in (lambda: model.save(tmp_path / "a\0b.zarr"), lambda: ddr.load("a\0b.zarr")):
        with pytest.raises(LocationError, match=r"a path cannot hold a NUL byte \(\\x00\)"):
            call()


def test_python_api_refuses_a_kde_bandwidth_that_underflows():
    X = np.random.default_rng(0).normal(size=(200, 3)) * 5.0
    for scaling in ("none", "covariance"):
        with pytest.raises(ValueError, match=r"^bandwidth=1e-300 is too small for this data"):
            ddr.KernelDensity(bandwidth=1e-300, bandwidth_scaling=scaling).fit(X)
    # small but computable: finite log-densities
    kde = ddr.KernelDensity(bandwidth=1e-140, bandwidth_scaling="none").fit(X)
    assert np.isfinite(kde.score_samples(X[:5])).all()


def test_python_api_names_a_corrupt_model_and_its_part(demo, tmp_path):
    model = saved_pca(tmp_path, demo)
    shutil.copytree(model, tmp_path / "chunk.zarr")
    replace_model_array(model, "0001_mean_")
    with pytest.raises(ddr.io.models.CorruptModelError) as info:
        ddr.load(model)
    assert str(info.value).startswith(
        f"the model at '{model}' is corrupt: mean_: its array '0001_mean_' has shape (1,); it "
        "was saved as (8,)"
    )
    assert info.value.part == "mean_" and isinstance(info.value, ValueError)
    replace_model_chunk(tmp_path, tmp_path / "chunk.zarr", "0006_moments_/0002_moments_.mean")
    with pytest.raises(ValueError, match=r"is corrupt: moments_\.mean: its array "):
        ddr.load(tmp_path / "chunk.zarr")


def test_python_api_refuses_chunk_sizes_of_zero_negative_or_bool(demo):
    from ddr.io import open_input

    for size, said in [(0, "got 0"), (-5, "got -5"), (True, "not a boolean; got True")]:
        with pytest.raises(ValueError, match=rf"^chunks\['sample'\]: .*{said}$"):
            open_input(demo, "X", chunks={"sample": size}, protect=False)
    assert open_input(demo, "X", chunks={"sample": -1}, protect=False).chunks[0] == (400,)


def test_python_api_names_corrupt_input_metadata(demo, tmp_path):
    from ddr.io import open_input
    from ddr.io.stored_chunks import InputMetadataError

    corrupt_copy(tmp_path, demo, set_data_type)
    with pytest.raises(InputMetadataError, match=r"^array 'X' of '.*demo.zarr': its Zarr meta"):
        open_input(tmp_path / "demo.zarr", "X", protect=False)


# ------------------------------------------------------- the cost of validation
@pytest.mark.parametrize("missing", ["error", "fill"])
def test_validate_on_metadata_of_1e11_rows_is_cheap(demo, tmp_path, monkeypatch, missing):
    # 1e11 rows in chunks of 12 500 rows: 8 000 000 chunks, 4 of them stored (the metadata
    # of issue 25: 24.7 s and 4.4 GiB to validate, building keys and a graph for every chunk)
    from ddr.config.errors import PipelineError
    from ddr.pipeline.planner import plan_pipeline

    monkeypatch.chdir(tmp_path)
    file = many_rows(10**11, f", missing_chunks: {missing}", 12_500)(tmp_path, demo)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(PipelineError, match="describes 8,000,000 chunks"):
            plan_pipeline(file)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 5, f"{seconds:.1f} s"
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MiB"


def test_missing_chunk_check_costs_what_the_stored_keys_cost(tmp_path):
    from ddr.io import MissingChunksError
    from ddr.io.stored_chunks import check_chunks, missing_chunk_keys

    # 900 000 chunks (under the limit), 2 of them stored
    arr = zarr.create_array(tmp_path / "a.zarr", shape=(900_000, 3), chunks=(1, 3), dtype="f4")
    arr[:2] = 1.0
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(MissingChunksError) as info:
            check_chunks(arr, "the array 'a.zarr'")
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 2 and peak < 10 * 2**20, (seconds, peak)
    err = info.value
    assert (err.n_missing, err.n_chunks, len(err.missing)) == (899_998, 900_000, 1000)
    assert err.missing[:2] == ["c/2/0", "c/3/0"]
    assert str(err).startswith(
        "899,998 of 900,000 chunks of the array 'a.zarr' are missing (c/2/0, c/3/0, c/4/0, "
        "c/5/0, c/6/0 and 899,993 more)"
    )
    assert missing_chunk_keys(arr, limit=3) == (["c/2/0", "c/3/0", "c/4/0"], 900_000)


# ---------------------------------------------------------------- a full disk
@contextlib.contextmanager
def full_file(tmp_path: Path):
    """A path whose writes fail with ENOSPC: a file on a 64 KiB tmpfs filled up (when this
    process may mount one), else /dev/full (the kernel's always-full device)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    mounted = False
    if os.geteuid() == 0 and shutil.which("mount"):
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
            capture_output=True,
            check=False,
        )
        mounted = done.returncode == 0
    try:
        if mounted:
            with contextlib.suppress(OSError), open(mount / "filler", "wb", buffering=0) as fh:
                while True:
                    fh.write(b"\0" * 4096)
            yield mount / "run.log", "tmpfs"
        elif Path("/dev/full").exists():
            yield Path("/dev/full"), "/dev/full"
        else:
            pytest.skip("cannot mount a tmpfs here (not root) and there is no /dev/full")
    finally:
        if mounted:
            subprocess.run(["umount", str(mount)], check=False)


def test_a_log_file_on_a_full_disk_is_said_once_and_the_run_goes_on(demo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pipeline(METRICS, "metrics.yaml")(tmp_path, demo)
    (tmp_path / "out").mkdir()
    with full_file(tmp_path) as (target, kind):
        # the run's log goes beside its summary: make that file one the disk cannot hold
        (tmp_path / "out" / "run-summary.log").symlink_to(target)
        result = invoke(["run", "metrics.yaml", "--cluster", "threads", "--no-progress"])
    assert result.exit_code == 0, (kind, result.output)
    assert "Logging error" not in result.output
    said = [ln for ln in result.output.splitlines() if "could not write the log file" in ln]
    assert len(said) == 1 and said[0].startswith("ddr: warning: could not write the log file ")
    assert said[0].endswith("out/run-summary.log: No space left on device; going on without it"), (
        kind,
        result.output,
    )
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert json.loads((tmp_path / "out" / "run-summary.json").read_text())["status"] == "ok"


def test_a_log_file_that_cannot_be_opened_is_said_once(tmp_path):
    import io
    import logging

    from ddr._log import console

    stream = io.StringIO()
    (tmp_path / "taken").mkdir()  # a directory where the log file should be
    with console(0, progress=False, log_file=tmp_path / "taken", stream=stream):
        logging.getLogger("ddr.test").info("still shown")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith(f"ddr: warning: could not write the log file {tmp_path / 'taken'}")
    assert lines[1:] == ["ddr: still shown"]
