"""A new output kind is one class: a CSV ``table`` kind and a ``bars`` plot kind, defined
here by subclassing and registering only, are known to ``ddr schema``, checked by ``ddr
validate`` (file:line:col), written by a run, kept by ``--resume``, shown by ``ddr inspect``
and pass the conformance suite, with no other edit anywhere. A class that lacks a piece is
refused when it is registered, naming what is missing."""

from __future__ import annotations

import io
import json
from typing import Any, Literal

import numpy as np
import pytest
from pydantic import Field
from typer.testing import CliRunner

from ddr.cli import app
from ddr.pipeline.outputs import FileKind, OutputSpec, register_output_kind
from ddr.pipeline.outputs.base import unregister_output_kind
from ddr.pipeline.outputs.plots import ModelPlot, register_plot_kind, unregister_plot_kind
from ddr.pipeline.outputs.plots.base import PlotOutput, figure
from ddr.pipeline.spec_types import Name, Ref
from ddr.testing.output_kinds import OutputKindCase, check_output_kind

runner = CliRunner()
PCA = {"op": "PCA.fit", "inputs": {"X": "X"}, "with": {"n_components": 2}}


# ----------------------------------------------------------------- the new kinds
class TableOutput(OutputSpec):
    """Small 1-D values (fitted attributes, read-outs) as the columns of a CSV file."""

    kind: Literal["table"]
    from_: dict[Name, Ref] = Field(alias="from", description="Column name -> reference.")
    delimiter: Literal[",", ";", "\t"] = Field(",", description="Between the columns.")


class TableKind(FileKind):
    """A CSV file: a header, one row per element, then ``# ddr:`` lines (provenance and,
    last, the fingerprint)."""

    name = "table"
    spec = TableOutput
    takes = "`{column: reference}` to 1-D fitted attributes or read-outs"
    writes = "CSV"

    def check(self, ctx, out, metas):
        for key, meta in metas.items():
            if meta.kind in ("model", "array"):
                ctx.problem(
                    ("outputs", out.index, *self.ref_where(out.spec, key)),
                    f"{out.refs[key]!r} is {'a model' if meta.kind == 'model' else 'an array'}"
                    "; a table holds small 1-D values",
                )

    def render(self, w, out):
        columns = {k: np.ravel(np.asarray(w.value(ref))) for k, ref in out.refs.items()}
        sep = out.spec.delimiter
        lines = [sep.join(columns)]
        rows = zip(*columns.values(), strict=True)
        lines += [sep.join(repr(float(v)) for v in row) for row in rows]
        lines.append("# ddr:provenance=" + json.dumps(w.provenance(out), default=str))
        lines.append(f"# ddr:fingerprint={out.fingerprint}")
        return ("\n".join(lines) + "\n").encode()

    def _comments(self, content: bytes) -> dict[str, str]:
        out = {}
        for line in content.decode().splitlines():
            if line.startswith("# ddr:"):
                key, _, value = line[2:].partition("=")
                out[key] = value
        return out

    def fingerprint_in(self, content):
        return self._comments(content).get("ddr:fingerprint")

    def provenance_in(self, content):
        return json.loads(self._comments(content)["ddr:provenance"])

    def contents(self, content):
        rows = [r for r in content.decode().splitlines() if not r.startswith("#")]
        return {"columns": rows[0], "rows": len(rows) - 1}

    def examples(self):
        ratio = {"ratio": "pca.explained_variance_ratio_", "variance": "pca.explained_variance_"}
        return [{"output": {"from": ratio, "path": "ratios.csv"}, "steps": {"pca": PCA}}]


class BarsPlotOutput(PlotOutput):
    """A model's explained variance per component, as bars."""

    plot: Literal["bars"]
    color: str = Field("#4C72B0", description="Colour of the bars.")


class BarsPlot(ModelPlot):
    """Bars of ``explained_variance_``."""

    name = "bars"
    spec = BarsPlotOutput
    takes = "a model with `explained_variance_`"
    draws = "the variance of each component as bars"

    def draw(self, data: dict[str, Any], title):
        variance = np.asarray(data["model"].explained_variance_)
        fig, ax = figure(title, "variance per component")
        ax.bar(np.arange(1, variance.size + 1), variance)
        return fig

    def example(self):
        return {"output": {"from": "pca", "path": "bars.png"}, "steps": {"pca": PCA}}


@pytest.fixture
def registered():
    register_output_kind(TableKind)
    register_plot_kind(BarsPlot)
    yield
    unregister_plot_kind(BarsPlot)
    unregister_output_kind(TableKind)


@pytest.fixture
def here(tmp_path, monkeypatch):
    import dask

    from ddr.demo import DemoSpec, write_demo_data

    with dask.config.set(scheduler="sync"):
        write_demo_data(tmp_path / "demo.zarr", DemoSpec(n_samples=300, n_features=4, rank=2))
    monkeypatch.chdir(tmp_path)
    return tmp_path


PIPELINE = """\
ddr: 1
name: table
inputs:
  X: {path: demo.zarr, array: X}
steps:
  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}
outputs:
  - {kind: table, from: {ratio: pca.explained_variance_ratio_}, path: out/ratios.csv}
  - {kind: plot, plot: bars, from: pca, path: out/bars.png, title: PCA}
"""


def _run(*args):
    return runner.invoke(app, ["run", *args, "--cluster", "sync", "--no-progress"])


# ----------------------------------------------------------------------- tests
def test_schema_lists_the_new_kinds(registered):
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    defs = json.loads(result.stdout)["$defs"]
    assert defs["TableOutput"]["properties"]["kind"]["const"] == "table"
    assert defs["TableOutput"]["properties"]["delimiter"]["enum"] == [",", ";", "\t"]
    assert defs["BarsPlotOutput"]["properties"]["plot"]["const"] == "bars"
    assert "color" in defs["BarsPlotOutput"]["properties"]


def test_validate_reports_bad_fields_of_the_new_kinds(registered, here):
    bad = PIPELINE.replace("path: out/ratios.csv}", "path: t.csv, delimiter: '|', sep: ','}")
    (here / "bad.yaml").write_text(
        bad.replace("title: PCA}", "colour: red}")
        + "  - {kind: tabel, from: {r: pca.explained_variance_}, path: t2.csv}\n"
        + "  - {kind: table, from: {m: pca}, path: t3.csv}\n"
    )
    result = runner.invoke(app, ["validate", "bad.yaml"])
    assert result.exit_code == 2
    said = result.output
    assert "bad.yaml:8:89: outputs[0].delimiter: expected ',', ';' or '\\t'; got '|'" in said
    assert "bad.yaml:8:94: unknown key 'sep'; valid keys: delimiter, description, from" in said
    assert "bad.yaml:9:61: unknown key 'colour' (did you mean 'color'?); valid keys: color" in said
    assert (
        "bad.yaml:10:5: outputs[2]: unknown kind 'tabel'; valid kinds: 'zarr', 'model', "
        "'metrics', 'plot', 'cv_results', 'table'" in said
    )
    assert "bad.yaml:11:29: 'pca' is a model; a table holds small 1-D values" in said


def test_run_resume_and_inspect_the_new_kinds(registered, here):
    (here / "table.yaml").write_text(PIPELINE)
    first = _run("table.yaml")
    assert first.exit_code == 0, first.output
    text = (here / "out/ratios.csv").read_text().splitlines()
    assert text[0] == "ratio" and len(text) == 1 + 2 + 2  # header, 2 rows, 2 ddr lines
    assert text[-1].startswith("# ddr:fingerprint=")
    from PIL import Image

    with Image.open(io.BytesIO((here / "out/bars.png").read_bytes())) as im:
        assert im.text["ddr:fingerprint"]

    again = _run("table.yaml", "--resume")
    assert again.exit_code == 0 and again.output.count("skipped") >= 2, again.output
    before = (here / "out/ratios.csv").read_bytes()
    assert _run("table.yaml", "--resume").exit_code == 0
    assert (here / "out/ratios.csv").read_bytes() == before  # kept, not rewritten

    shown = runner.invoke(app, ["inspect", "out/ratios.csv", "--json"])
    info = json.loads(shown.stdout)
    assert shown.exit_code == 0 and info["kind"] == "table" and info["status"] == "complete"
    assert info["columns"] == "ratio" and info["rows"] == 2
    assert info["fingerprint"] == text[-1].removeprefix("# ddr:fingerprint=")
    plot = json.loads(runner.invoke(app, ["inspect", "out/bars.png", "--json"]).stdout)
    assert plot["kind"] == "plot" and plot["status"] == "complete"


@pytest.mark.parametrize("kind", ["table", "plot"])
def test_the_new_kinds_pass_the_conformance_suite(registered, tmp_path, kind):
    from ddr.testing.output_kinds import output_kind_cases

    cases = [c for c in output_kind_cases() if c.kind == kind]
    if kind == "plot":
        cases = [c for c in cases if c.example["output"]["plot"] == "bars"]
    assert cases
    for case in cases:
        check_output_kind(case, tmp_path / str(case))


def test_a_kind_without_a_required_piece_is_refused_naming_it():
    class Half(FileKind):
        name = "half"
        spec = TableOutput
        takes = writes = "-"

        def check(self, ctx, out, metas):
            pass

    with pytest.raises(TypeError) as err:
        register_output_kind(Half)
    said = str(err.value)
    assert "'Half' cannot be registered; it lacks: examples; fingerprint_in" in said
    assert "render" in said and "spec TableOutput with kind: Literal['half']" not in said

    class Misnamed(TableKind):
        name = "tables"

    with pytest.raises(TypeError, match=r"spec TableOutput with kind: Literal\['tables'\]"):
        register_output_kind(Misnamed)

    class NoDraw(ModelPlot):
        name = "bars"
        spec = BarsPlotOutput
        takes = draws = "-"

    with pytest.raises(TypeError, match="'NoDraw' cannot be registered; it lacks: draw; example"):
        register_plot_kind(NoDraw)
    with pytest.raises(ValueError, match="unknown output kind 'half'; registered: 'zarr', 'model'"):
        from ddr.pipeline.outputs import output_kind

        output_kind("half")


def test_the_case_ids_name_kinds_and_plots():
    assert str(OutputKindCase("plot", 3, {"output": {"plot": "kde"}})) == "plot-kde"
    assert str(OutputKindCase("zarr", 1, {"output": {}})) == "zarr-1"
