"""The command line: --help everywhere, exit codes 0 / 1 / 2, schema, validate, plan, run,
inspect."""

from __future__ import annotations

import json

import pytest
import zarr
from pipeline_support import BROKEN, CLUSTER_CONFIGS, PIPELINES, make_data
from typer.testing import CliRunner

import ddr
from ddr.cli import app

COMMANDS = ["run", "validate", "plan", "inspect", "schema", "ops", "demo-data", "version"]
runner = CliRunner()

ONE_STEP = """\
ddr: 1
name: one-step
params: {out: out}
inputs:
  X: {path: demo.zarr, array: X}
  y: {path: demo.zarr, array: y}
steps:
  nb: {op: GaussianNB.fit, inputs: {X: X, y: y}}
  pred: {op: GaussianNB.predict, inputs: {model: nb, X: X}}
outputs:
  - {kind: zarr, from: pred, path: "${params.out}/pred.zarr"}
  - {kind: model, from: nb, path: "${params.out}/nb.model.zarr"}
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("cli-data"))


@pytest.fixture
def here(data, tmp_path, monkeypatch):
    (tmp_path / "demo.zarr").symlink_to(data / "demo.zarr")
    (tmp_path / "one.yaml").write_text(ONE_STEP)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_help_on_every_command():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output
        sub = runner.invoke(app, [command, "--help"])
        assert sub.exit_code == 0, command
        assert "Usage" in sub.output
    assert "Exit code" in runner.invoke(app, ["inspect", "--help"]).output


def test_version_and_usage_errors():
    # the same line as ddr --version
    assert runner.invoke(app, ["version"]).output == f"ddr {ddr.__version__}\n"
    assert runner.invoke(app, ["run"]).exit_code == 2  # missing argument
    assert runner.invoke(app, ["nonsense"]).exit_code == 2
    assert runner.invoke(app, ["run", "x.yaml", "--force", "--resume"]).exit_code == 2


def test_schema_prints_json_schema(tmp_path):
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert "PCA.fit" in schema["$defs"]["StepSpec"]["properties"]["op"]["enum"]
    assert runner.invoke(app, ["schema", "--output", str(tmp_path / "s.json")]).exit_code == 0
    assert json.loads((tmp_path / "s.json").read_text()) == schema
    cluster = json.loads(runner.invoke(app, ["schema", "--cluster"]).output)
    assert "ddr-cluster" in cluster["properties"]


def test_ops_lists_roles_and_params():
    result = runner.invoke(app, ["ops"])
    assert result.exit_code == 0
    assert "GaussianNB.fit(X, y, sample_weight?) -> model\n" in result.output
    assert "    var_smoothing: a float in the range [0.0, inf) (default 1e-09)\n" in result.output
    assert "    solver: one of ['closed_form', 'em'] (default 'em')\n" in result.output
    assert "PCA.transform(model, X) -> data" in result.output


def test_validate_exit_codes(here):
    ok = runner.invoke(app, ["validate", "one.yaml", str(CLUSTER_CONFIGS / "slurm.yaml")])
    assert ok.exit_code == 0, ok.output
    assert "one.yaml: valid pipeline" in ok.output
    assert "slurm.yaml: valid cluster config" in ok.output
    bad = runner.invoke(app, ["validate", "one.yaml", str(BROKEN / "cycle.yaml")])
    assert bad.exit_code == 2
    assert f"{BROKEN / 'cycle.yaml'}:7:58: cycle: scaler -> scores" in bad.output
    missing = runner.invoke(app, ["validate", "nope.yaml"])
    assert missing.exit_code == 2 and "nope.yaml: no such file" in missing.output


def test_plan_run_inspect_and_rerun(here):
    plan = runner.invoke(app, ["plan", "one.yaml"])
    assert plan.exit_code == 0, plan.output
    assert "nb: GaussianNB.fit(X=X, y=y)  (one pass)" in plan.output
    assert "passes over inputs: X: 2, y: 1" in plan.output
    as_json = json.loads(runner.invoke(app, ["plan", "one.yaml", "--json"]).output)
    assert as_json["passes"] == {"X": "2", "y": "1"}
    assert [o["action"] for o in as_json["outputs"]] == ["write", "write"]

    run = runner.invoke(
        app,
        ["run", "one.yaml", "--cluster", "threads", "--no-progress", "--summary", "summary.json"],
    )
    assert run.exit_code == 0, run.output
    assert "run one-step: ok in" in run.output
    assert "passes over inputs: X 2.00 passes, y 1.00 passes (planned: X 2, y 1)" in run.output
    summary = json.loads((here / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["scheduler"] == "threads"

    info = runner.invoke(app, ["inspect", "out/pred.zarr"])
    assert info.exit_code == 0, info.output
    assert "out/pred.zarr: complete" in info.output
    assert "pred: (3000,) dims ('sample',) int64" in info.output
    assert "made by pipeline one-step" in info.output and "step nb: GaussianNB.fit" in info.output
    model = json.loads(runner.invoke(app, ["inspect", "out/nb.model.zarr", "--json"]).output)
    assert model["status"] == "complete"
    assert model["model"] == "ddr.naive_bayes.gaussian.GaussianNB"

    # the outputs exist: error without --force / --resume, all at once, exit 2
    again = runner.invoke(app, ["run", "one.yaml", "--cluster", "threads"])
    assert again.exit_code == 2
    assert again.output.count("already exists (complete); pass --force") == 2
    resumed = runner.invoke(app, ["run", "one.yaml", "--cluster", "threads", "--resume"])
    assert resumed.exit_code == 0 and "skipped" in resumed.output
    forced = runner.invoke(
        app, ["run", "one.yaml", "--cluster", "threads", "--force", "--no-progress"]
    )
    assert forced.exit_code == 0 and "complete, --force/overwrite" in forced.output


def test_inspect_exit_codes(here):
    assert runner.invoke(app, ["inspect", "nothing.zarr"]).exit_code == 2
    group = zarr.open_group("half.zarr", mode="w")
    group.attrs["ddr:status"] = "incomplete"
    group.create_array("x", shape=(4,), chunks=(2,), dtype="f8")
    result = runner.invoke(app, ["inspect", "half.zarr"])
    assert result.exit_code == 1
    assert "INCOMPLETE" in result.output and "0/2 chunks written" in result.output
    assert runner.invoke(app, ["inspect", "demo.zarr"]).exit_code == 0
    zarr.open_group("plain.zarr", mode="w").create_array("x", shape=(2,), dtype="f8")
    plain = runner.invoke(app, ["inspect", "plain.zarr"])
    assert plain.exit_code == 3 and "not a ddr output" in plain.output
    (here / "empty.zarr").mkdir()  # what a full disk can leave: nobody's output
    empty = runner.invoke(app, ["inspect", "empty.zarr"])
    assert empty.exit_code == 2 and "empty.zarr: missing" in empty.output


def test_every_way_a_run_ends_has_an_exit_code():
    from ddr.cli.run import EXIT_CODES
    from ddr.pipeline.orchestration import STATUSES

    assert sorted(EXIT_CODES) == sorted(STATUSES)
    assert EXIT_CODES["ok"] == 0 and EXIT_CODES["interrupted"] == 130


def test_run_failure_exits_1(here):
    (here / "fail.yaml").write_text(
        ONE_STEP.replace("inputs: {X: X, y: y}}", "inputs: {X: X, y: y}, with: {priors: [1.0]}}")
    )
    result = runner.invoke(app, ["run", "fail.yaml", "--cluster", "threads", "--no-progress"])
    assert result.exit_code == 1
    assert "ddr: error: run failed: step nb (GaussianNB.fit): ValueError" in result.output


def test_dry_run_reads_and_writes_nothing(here):
    result = runner.invoke(
        app,
        [
            "run",
            str(PIPELINES / "quickstart.yaml"),
            "--dry-run",
            "--cluster",
            str(CLUSTER_CONFIGS / "pbs.yaml"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "passes over inputs: X: 2" in result.output
    assert "kind pbs" in result.output
    assert not (here / "quickstart-output").exists()


def test_bad_cluster_config_exits_2(here, tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("ddr-cluster: 1\nkind: local\nlocal: {n_worker: 2}\n")
    result = runner.invoke(app, ["run", "one.yaml", "--cluster", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:3:9: distributed.LocalCluster has no keyword 'n_worker'" in result.output


# ------------------------------------------------------------ issue 28: consistency
def test_every_command_takes_verbose_and_quiet(here):
    for command in COMMANDS:
        shown = runner.invoke(app, [command, "--help"]).output
        assert "-v, --verbose" in shown and "-q, --quiet" in shown, command
    quiet = runner.invoke(app, ["plan", "-q", "one.yaml"])
    assert quiet.exit_code == 0 and "passes over inputs" in quiet.output
    both = runner.invoke(app, ["ops", "-v", "-q"])
    assert both.exit_code == 2
    assert "ddr: error: --verbose and --quiet contradict each other" in both.output


def test_any_command_shows_the_library_log_as_ddr_lines(here, monkeypatch):
    """A plug-in's warning (logged while `ddr ops` reads the registry) is shown as a ddr
    line, as `ddr run` shows its own; -q keeps warnings, drops notes; -v adds debug."""
    import logging

    from ddr.pipeline import registry

    ops = registry.ops

    def logging_ops():
        log = logging.getLogger("ddr.plugins")
        log.warning("plug-in 'broken' (from broken-dist 1.0) skipped: ImportError: no module")
        log.info("a note")
        log.debug("a detail")
        return ops()

    monkeypatch.setattr(registry, "ops", logging_ops)
    shown = runner.invoke(app, ["ops"]).output
    assert "ddr: warning: plug-in 'broken' (from broken-dist 1.0) skipped" in shown
    assert "ddr: a note\n" in shown and "a detail" not in shown
    quiet = runner.invoke(app, ["ops", "-q"]).output
    assert "ddr: warning: plug-in 'broken'" in quiet and "a note" not in quiet
    assert "ddr: a detail\n" in runner.invoke(app, ["ops", "-v"]).output
    # ddr run shows what planning logs the same way, before its own console is set up
    from ddr.pipeline import planner

    plan = planner.plan_pipeline

    def logging_plan(*args, **kwargs):
        logging.getLogger("ddr.plugins").warning("plug-in 'late' skipped")
        return plan(*args, **kwargs)

    monkeypatch.setattr(planner, "plan_pipeline", logging_plan)
    dry = runner.invoke(app, ["run", "one.yaml", "--dry-run", "--cluster", "threads"])
    assert dry.exit_code == 0, dry.output
    assert "ddr: warning: plug-in 'late' skipped" in dry.output


def test_inspect_names_a_missing_bucket_as_run_does(s3):
    url = "s3://no-such-bucket/x.zarr"
    shown = runner.invoke(app, ["inspect", url])
    assert shown.exit_code == 2
    said = f"the bucket 'no-such-bucket' does not exist (endpoint {s3.endpoint})"
    assert shown.output.splitlines()[0] == f"{url}: missing: {said}"
    assert json.loads(runner.invoke(app, ["inspect", url, "--json"]).output)["reason"] == said
    here = runner.invoke(app, ["inspect", s3.url("nothing.zarr")])  # the bucket exists
    assert here.exit_code == 2 and here.output.strip().endswith("nothing.zarr: missing")


def test_demo_data_has_the_if_exists_choices_it_suggests(tmp_path):
    path = str(tmp_path / "d.zarr")
    small = ["--n-samples", "200", "--n-features", "4", "--rank", "2", "--n-classes", "2"]
    assert runner.invoke(app, ["demo-data", path, *small]).exit_code == 0
    again = runner.invoke(app, ["demo-data", path, *small])
    assert again.exit_code == 2
    assert "pass --force to replace it or --if-exists skip-if-complete to keep it" in again.output
    kept = runner.invoke(app, ["demo-data", path, *small, "--if-exists", "skip-if-complete"])
    assert kept.exit_code == 0 and kept.output.startswith(f"kept {path}: complete")
    other = [*small, "--seed", "1", "--if-exists", "skip-if-complete"]  # another spec
    assert runner.invoke(app, ["demo-data", path, *other]).output.startswith(f"wrote {path}")
    replaced = runner.invoke(app, ["demo-data", path, *small, "--if-exists", "overwrite"])
    assert replaced.exit_code == 0, replaced.output
    bad = runner.invoke(app, ["demo-data", path, "--force", "--if-exists", "skip-if-complete"])
    assert bad.exit_code == 2 and "contradict" in bad.output


def test_summary_says_what_the_run_did_and_what_it_found(here):
    first = runner.invoke(app, ["run", "one.yaml", "--cluster", "threads", "--no-progress"])
    assert first.exit_code == 0, first.output
    assert first.output.count("; was missing)") == 2, first.output
    forced = runner.invoke(app, ["run", "one.yaml", "-c", "threads", "--force", "--no-progress"])
    assert "; was complete, --force/overwrite)" in forced.output


def test_a_rerun_with_nothing_to_do_starts_no_cluster(here, monkeypatch):
    import ddr.cluster

    first = runner.invoke(app, ["run", "one.yaml", "--cluster", "threads", "--no-progress"])
    assert first.exit_code == 0, first.output

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started for a run with nothing to do")

    monkeypatch.setattr(ddr.cluster, "cluster_client", no_cluster)
    again = runner.invoke(app, ["run", "one.yaml", "--resume", "--no-progress"])  # local
    assert again.exit_code == 0, again.output
    assert "ddr: nothing to do: every output is complete (same fingerprint); no cluster" in (
        again.output
    )
    assert "scheduler: none (nothing to do: every output is complete)" in again.output
    assert "cluster start" not in again.output


def test_an_empty_dask_input_is_refused_naming_the_estimator():
    import dask.array as da

    empty = da.zeros((0, 3), chunks=(1, 3))
    with pytest.raises(ValueError, match=r"0 sample\(s\) .* required by GaussianNB\.$"):
        ddr.GaussianNB().fit(empty, da.zeros(0, chunks=1))
    with pytest.raises(ValueError, match=r"required by PCA\.$"):
        ddr.PCA(2).fit(empty)
