"""Every path a run writes passes the same check, whatever its source: the outputs of each
kind, ``run.summary`` and the log beside it, ``run.performance_report``, their command-line
options (``--summary``, ``--performance-report``), ``--set`` overrides and the arguments of
``run_plan``. A path that is, contains or lies inside an input, or overlaps another path the
run writes, is refused before anything is read or written (exit 2 from the command line),
naming where the path came from; the input is left byte for byte as it was.

The first test enumerates the write options themselves (the ``run`` command's FILE options
and the ``run:`` keys that name files), so a new one cannot bypass the check unnoticed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddr.cli import app
from ddr.demo import DemoSpec, write_demo_data
from ddr.pipeline import plan_pipeline, run_plan
from ddr.pipeline.run_files import RUN_FILE_OPTIONS
from ddr.pipeline.schema import RunOptions

runner = CliRunner()

PIPELINE = """\
ddr: 1
name: paths
inputs:
  X: {path: data.zarr, array: X}
  L: {path: runinfo.log, array: X}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}
  scores: {op: PCA.transform, inputs: {model: pca, X: X}}
outputs:
  - {kind: zarr, from: scores, path: out/scores.zarr}
  - {kind: model, from: pca, path: out/pca.model.zarr}
  - {kind: metrics, from: [pca.explained_variance_], path: out/metrics.json}
"""

#: (arguments, where the message says the path came from, what it names as the clash)
CLI_CASES = [
    (["--summary", "data.zarr/zarr.json"], "--summary data.zarr/zarr.json", "the input X"),
    (
        ["--performance-report", "data.zarr/X/zarr.json"],
        "--performance-report data.zarr/X/zarr.json",
        "the input X",
    ),
    (["--summary", "data.zarr"], "--summary data.zarr", "is the input X"),
    (["--summary", "."], "--summary .", "contains the input X"),
    # the log beside the summary: runinfo.json -> runinfo.log, an input
    (["--summary", "runinfo.json"], "--summary runinfo.json", "the run log runinfo.log"),
    (["--summary", "out/metrics.json"], "--summary out/metrics.json", "outputs[2]"),
    (
        ["--performance-report", "out/scores.zarr/x.html"],
        "--performance-report out/scores.zarr/x.html",
        "outputs[0]",
    ),
    (
        ["--summary", "out/scores.zarr.ddr-claim"],
        "--summary out/scores.zarr.ddr-claim",
        "is the claim of outputs[0]",
    ),
    (
        ["--summary", "r.json", "--performance-report", "r.json"],
        "--performance-report r.json",
        "the run summary (",
    ),
    (
        ["--set", "run.summary=data.zarr/X/c/0/0"],
        "--set run.summary=data.zarr/X/c/0/0",
        "the input X",
    ),
    (
        ["--set", "run.performance_report=runinfo.log/zarr.json"],
        "--set run.performance_report=runinfo.log/zarr.json",
        "the input L",
    ),
]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(path)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("write-paths")
    write_demo_data(d / "data.zarr", DemoSpec(400, 6, 2, 2, 100, seed=1))
    write_demo_data(d / "runinfo.log", DemoSpec(400, 6, 2, 2, 100, seed=2))
    return d


@pytest.fixture
def here(data, tmp_path, monkeypatch):
    for name in ("data.zarr", "runinfo.log"):
        (tmp_path / name).symlink_to(data / name)
    (tmp_path / "paths.yaml").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _written(here: Path) -> list[str]:
    return sorted(
        str(p.relative_to(here))
        for p in here.rglob("*")
        if p.is_file()
        and p.relative_to(here).parts[0] not in ("data.zarr", "runinfo.log")
        and p.name != "paths.yaml"
    )


def test_every_write_option_is_checked():
    """The ``run`` command's options that name a file it writes (metavar FILE) and the
    ``run:`` keys that name one are exactly those the check resolves."""
    from typer.main import get_command

    command = get_command(app).commands["run"]
    file_options = {
        max(p.opts, key=len) for p in command.params if getattr(p, "metavar", None) == "FILE"
    }
    assert file_options == set(RUN_FILE_OPTIONS.values())
    described = {
        name
        for name, field in RunOptions.model_fields.items()
        if "here" in (field.description or "")  # "Write ... here."
    }
    assert described == set(RUN_FILE_OPTIONS)


@pytest.mark.parametrize(("args", "origin", "names"), CLI_CASES)
def test_command_line_write_paths_refused(here, data, args, origin, names):
    before = _digest(data)
    result = runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if "refusing to write" in line]
    assert lines, result.output
    line = lines[0]
    assert line.startswith(f"{origin}: refusing to write"), line
    assert names in line, line
    assert "nothing was run" in result.output
    assert _written(here) == []
    assert _digest(data) == before


@pytest.mark.parametrize(
    ("run_block", "key", "names"),
    [
        ("{summary: data.zarr/zarr.json}", "summary", "is inside the input X"),
        ("{performance_report: data.zarr/X/zarr.json}", "performance_report", "the input X"),
        ("{summary: runinfo.json}", "summary", "the run log runinfo.log"),
    ],
)
def test_pipeline_file_write_paths_refused(here, data, run_block, key, names):
    (here / "paths.yaml").write_text(PIPELINE + f"run: {run_block}\n")
    before = _digest(data)
    result = runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync"])
    assert result.exit_code == 2, result.output
    line = next(x for x in result.output.splitlines() if "refusing to write" in x)
    assert line.startswith("paths.yaml:"), line  # file:line:col of run.<key>
    assert names in line, line
    assert _written(here) == [] and _digest(data) == before


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("zarr", "data.zarr/scores.zarr"),
        ("model", "data.zarr/X/model.zarr"),
        ("metrics", "data.zarr/m.json"),
        ("metrics", "runinfo.log/zarr.json"),
    ],
)
def test_output_paths_refused(here, data, kind, path):
    src = {"zarr": "scores", "model": "pca", "metrics": "[pca.explained_variance_]"}[kind]
    text = (
        PIPELINE.split("outputs:")[0]
        + f"outputs:\n  - {{kind: {kind}, from: {src}, path: {path}}}\n"
    )
    (here / "paths.yaml").write_text(text)
    before = _digest(data)
    result = runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync"])
    assert result.exit_code == 2, result.output
    assert "outputs never overwrite inputs" in result.output
    assert _written(here) == [] and _digest(data) == before


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"summary_path": "data.zarr/zarr.json"}, "summary_path='data.zarr/zarr.json'"),
        ({"performance_report": "data.zarr/X/zarr.json"}, "performance_report="),
        ({"summary_path": "out/scores.zarr/s.json"}, "outputs[0]"),
    ],
)
def test_run_plan_arguments_refused(here, data, kwargs, names):
    import dask

    plan = plan_pipeline("paths.yaml")
    before = _digest(data)
    with (
        dask.config.set(scheduler="sync"),
        pytest.raises(ValueError, match="refusing to write") as err,
    ):
        run_plan(plan, **kwargs)
    assert names in str(err.value)
    assert _written(here) == [] and _digest(data) == before


def test_allowed_paths_are_written(here):
    """The same options with paths of their own run, and the log goes beside the summary."""
    result = runner.invoke(
        app, ["run", "paths.yaml", "--cluster", "sync", "--summary", "logs/run.json"]
    )
    assert result.exit_code == 0, result.output
    assert {"logs/run.json", "logs/run.log", "out/metrics.json"} <= set(_written(here))


def test_an_output_whose_claim_would_be_inside_an_input_is_refused(here, data):
    """The claim beside an output (``<output>.ddr-claim``) is a path the run writes too."""
    write_demo_data(here / "odd.ddr-claim", DemoSpec(400, 6, 2, 2, 100, seed=3))
    text = PIPELINE.replace(
        "  L: {path: runinfo.log, array: X}\n",
        "  L: {path: runinfo.log, array: X}\n  O: {path: odd.ddr-claim, array: X}\n",
    ).split("outputs:")[0]
    (here / "paths.yaml").write_text(text + "outputs:\n  - {kind: zarr, from: scores, path: odd}\n")
    result = runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync"])
    assert result.exit_code == 2, result.output
    assert "the claim of the output 'odd' (odd.ddr-claim) would be inside the input" in (
        result.output
    ), result.output
    assert not (here / "odd").exists()


@pytest.mark.parametrize(
    ("link", "target", "kind", "path"),
    [
        # the case that deleted an input's chunks: the output is the input's own array
        ("alias.zarr", "data.zarr", "zarr", "alias.zarr/X"),
        ("alias.zarr", "data.zarr", "zarr", "alias.zarr/scores.zarr"),
        ("alias.zarr", "data.zarr", "model", "alias.zarr/pca.zarr"),
        ("alias.zarr", "data.zarr", "metrics", "alias.zarr/m.json"),
        ("xlink", "data.zarr/X", "zarr", "xlink"),  # a link to the input array itself
        ("outdir", ".", "zarr", "outdir/data.zarr"),  # a link that leads back here
    ],
)
def test_output_paths_through_symbolic_links_refused(here, data, link, target, kind, path):
    """Paths are compared where they lead: an output reached through a symbolic link into an
    input is refused like the input's own path (default if_exists, no --force), and nothing
    of the input is touched."""
    (here / link).symlink_to(here / target)
    src = {"zarr": "scores", "model": "pca", "metrics": "[pca.explained_variance_]"}[kind]
    text = (
        PIPELINE.split("outputs:")[0]
        + f"outputs:\n  - {{kind: {kind}, from: {src}, path: {path}}}\n"
    )
    (here / "paths.yaml").write_text(text)
    before = _digest(data)
    for command in (["validate", "paths.yaml"], ["run", "paths.yaml", "--cluster", "sync"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.output
        assert "(through a symbolic link: " in result.output, result.output
        assert "outputs never overwrite inputs" in result.output, result.output
    assert _digest(data) == before


def test_run_files_through_a_symbolic_link_refused(here, data):
    """The summary and its log, reached through a link into an input, are refused too."""
    (here / "alias.zarr").symlink_to(here / "data.zarr")
    before = _digest(data)
    result = runner.invoke(
        app, ["run", "paths.yaml", "--cluster", "sync", "--summary", "alias.zarr/run.json"]
    )
    assert result.exit_code == 2, result.output
    line = next(x for x in result.output.splitlines() if "refusing to write" in x)
    assert "(through a symbolic link: " in line and "the input X" in line, line
    assert _digest(data) == before


def test_a_bind_mounted_input_is_the_same_place(here, data, tmp_path_factory):
    """A folder reached through a bind mount is compared by device and inode."""
    import os
    import subprocess

    from ddr.io.locations import resolve

    mnt = tmp_path_factory.mktemp("bind")
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root")
    done = subprocess.run(["mount", "--bind", str(data), str(mnt)], capture_output=True)
    if done.returncode:
        pytest.skip(f"mount --bind failed: {done.stderr.decode().strip()}")
    try:
        inp = resolve(data / "data.zarr")
        assert inp.contains(resolve(mnt / "data.zarr" / "scores.zarr"))
        assert resolve(mnt / "data.zarr").overlaps(inp)
        assert not inp.overlaps(resolve(mnt / "runinfo.log"))
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_complete_store_this_pipeline_did_not_write_is_not_replaced(here, data):
    """skip-if-complete (--resume) rewrites this pipeline's own outdated outputs, never a
    demo dataset or another pipeline's output at the same path; --force does, as asked."""
    write_demo_data(here / "out" / "scores.zarr", DemoSpec(400, 6, 2, 2, 100, seed=4))
    before = _digest(here / "out" / "scores.zarr")
    result = runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync", "--resume"])
    assert result.exit_code == 2, result.output
    assert (
        "'out/scores.zarr' holds a dataset written by ddr demo-data, complete; this pipeline "
        "replaces only its own outputs (choose another path, or pass --force to replace it)"
    ) in result.output
    assert _digest(here / "out" / "scores.zarr") == before
    assert runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync", "--force"]).exit_code == 0
    # its own output with other parameters: rewritten; another pipeline's: refused
    (here / "paths.yaml").write_text(PIPELINE.replace("n_components: 2", "n_components: 3"))
    assert runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync", "--resume"]).exit_code == 0
    (here / "paths.yaml").write_text(
        PIPELINE.replace("name: paths", "name: other").replace("n_components: 2", "n_components: 1")
    )
    result = runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync", "--resume"])
    assert result.exit_code == 2, result.output
    assert "holds an output of the pipeline 'paths', complete" in result.output, result.output


def test_an_output_over_the_model_a_load_step_reads_is_refused(here, data):
    """A model output at the path a load step of the same pipeline reads would replace the
    model while it is used: refused like any input."""
    first = runner.invoke(app, ["run", "paths.yaml", "--cluster", "sync"])
    assert first.exit_code == 0, first.output
    before = _digest(here / "out" / "pca.model.zarr")
    (here / "reuse.yaml").write_text(
        "ddr: 1\nname: reuse\ninputs:\n  X: {path: data.zarr, array: X}\nsteps:\n"
        "  old: {op: load, with: {path: out/pca.model.zarr}}\n"
        "  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 3}}\n"
        "outputs:\n  - {kind: model, from: pca, path: out/pca.model.zarr}\n"
        "  - {kind: metrics, from: [old.explained_variance_], path: out/old.json}\n"
    )
    for flag in ([], ["--force"]):
        result = runner.invoke(app, ["run", "reuse.yaml", "--cluster", "sync", *flag])
        assert result.exit_code == 2, result.output
        assert "the output 'out/pca.model.zarr' is the input 'out/pca.model.zarr'" in (
            result.output
        ), result.output
    assert _digest(here / "out" / "pca.model.zarr") == before
