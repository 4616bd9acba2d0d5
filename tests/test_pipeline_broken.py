"""At least 25 broken pipeline files: each reports exactly the problems its trailing
``# expect: LINE:COL: message`` comments list, all at once, before any data is read."""

from __future__ import annotations

import re

import pytest
from pipeline_support import BROKEN, ReadCounter, make_data
from typer.testing import CliRunner

from ddr.cli import app
from ddr.pipeline import PipelineError, plan_pipeline

FILES = sorted(BROKEN.glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (\d+):(\d+): (.+)$", re.MULTILINE)


def expectations(path):
    return [(int(a), int(b), msg) for a, b, msg in EXPECT.findall(path.read_text())]


def test_there_are_at_least_25_broken_files_each_with_expectations():
    assert len(FILES) >= 25
    for f in FILES:
        assert expectations(f), f"{f.name} has no '# expect:' lines"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("broken-data"))


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_broken_file_reports_line_column_and_message(path, data, monkeypatch):
    monkeypatch.chdir(data)
    expected = expectations(path)
    with ReadCounter() as counter, pytest.raises(PipelineError) as info:
        plan_pipeline(path)
    assert not counter.bytes, "data was read before the problems were reported"
    got = [(p.location.line, p.location.col, p.message) for p in info.value.problems]
    assert len(got) == len(expected), "\n".join(map(str, info.value.problems))
    for (line, col, message), (gl, gc, gm) in zip(expected, got, strict=True):
        assert (gl, gc) == (line, col), f"expected {line}:{col}: {message}\ngot {gl}:{gc}: {gm}"
        assert gm.startswith(message), f"{gm!r} does not start with {message!r}"
    for problem in info.value.problems:
        assert str(problem).startswith(f"{path}:{problem.location.line}:{problem.location.col}: ")


def test_cli_reports_all_problems_with_exit_code_2(data, monkeypatch):
    monkeypatch.chdir(data)
    path = BROKEN / "output-kinds.yaml"
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.startswith(str(path))]
    assert [ln.split(": ", 1)[0] for ln in lines] == [
        f"{path}:{a}:{b}" for a, b, _ in expectations(path)
    ]
    assert "5 problems found; nothing was run" in result.output


def test_unknown_op_lists_the_valid_ops(data, monkeypatch):
    monkeypatch.chdir(data)
    with pytest.raises(PipelineError) as info:
        plan_pipeline(BROKEN / "unknown-op.yaml")
    message = info.value.problems[0].message
    for op in ("moments", "class_moments", "load", "PCA.{fit, fit_transform", "GaussianNB.{fit"):
        assert op in message
