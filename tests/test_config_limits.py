"""Bounded reading of pipeline and cluster files: a params doubling bomb, a YAML alias bomb,
a 50 MB file, deep nesting and their kin are refused at their line and column (exit code
2), in bounded memory, with nothing written. Times are measured by ``python -m
benchmarks.guards``; here the peak of Python allocations while reading is asserted."""

from __future__ import annotations

import tracemalloc

import pytest
from typer.testing import CliRunner

from ddr.cli import app
from ddr.config.document import load_document
from ddr.config.errors import PipelineError
from ddr.config.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_SIZE

runner = CliRunner()
MB = 2**20

# the pipeline part after the params, so the files are valid but for their bombs
TAIL = """\
inputs:
  X: {path: demo.zarr, array: X}
steps:
  pca: {op: PCA.fit, inputs: {X: X}}
outputs:
  - {kind: model, from: pca, path: out/pca.model.zarr}
"""


def doubling_bomb(n: int = 30) -> str:
    """30 params, each the one before twice: 10 * 2**29 characters (5 GB) if expanded."""
    lines = ["ddr: 1", "name: doubling", "params:", "  p0: abcdefghij"]
    lines += [f'  p{i}: "${{params.p{i - 1}}}${{params.p{i - 1}}}"' for i in range(1, n)]
    return "\n".join(lines) + "\n" + TAIL


def alias_bomb(levels: int = 9) -> str:
    """Nine levels of aliases, each repeating the one before nine times: 9**9 values."""
    lines = ["ddr: 1", "name: laughs", 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    prev = "a"
    for name in "bcdefghijklm"[: levels - 1]:
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
        prev = name
    return "\n".join(lines) + "\n" + TAIL


def refused(text: str | None = None, *, path=None, overrides=()):
    """The problems of reading ``text`` (or ``path``), and the peak of Python allocations."""
    tracemalloc.start()
    try:
        with pytest.raises(PipelineError) as info:
            load_document(path if path is not None else "bomb.yaml", list(overrides), text=text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return info.value.problems, peak


def test_params_doubling_bomb_is_refused_at_its_line():
    problems, peak = refused(doubling_bomb())
    assert len(problems) == 1
    (problem,) = problems
    # p0 is 10 characters: the param whose value would pass MAX_SIZE is refused, on its line
    first_over = next(i for i in range(30) if 10 * 2**i > MAX_SIZE // 2)
    assert (problem.location.line, problem.location.col) == (4 + first_over, 8)
    assert problem.message.startswith(
        "with its params substituted, the file expands to more than 524,288 values and "
        "characters, the most a pipeline file may hold: YAML aliases or params repeat too much"
    )
    assert peak < 20 * MB


def test_params_shared_whole_are_measured_as_copies():
    # each param is a list holding the one before twice: shared, not copied, while
    # substituting, but 2**40 values once validated or written to provenance
    lines = ["ddr: 1", "name: lists", "params:", "  p0: [abcdefghij]"]
    lines += [f'  p{i}: ["${{params.p{i - 1}}}", "${{params.p{i - 1}}}"]' for i in range(1, 41)]
    problems, peak = refused("\n".join(lines) + "\n" + TAIL)
    assert [str(p.location) for p in problems] == ["bomb.yaml:20:8"]  # p16: 2**16 * 13 > 2**19
    assert problems[0].message.startswith("with its params substituted, this value expands to")
    assert peak < 20 * MB


def test_params_nested_in_params_are_bounded_in_depth():
    lines = ["ddr: 1", "name: nest", "params:", "  p0: a"]
    lines += [f'  p{i}: ["${{params.p{i - 1}}}"]' for i in range(1, 200)]
    problems, _ = refused("\n".join(lines) + "\n" + TAIL)
    assert [str(p) for p in problems] == [
        f"bomb.yaml:{4 + MAX_DEPTH}:8: with its params substituted, values are nested "
        f"{MAX_DEPTH + 1} deep; at most {MAX_DEPTH} levels are allowed"
    ]


def test_nine_level_alias_bomb_is_refused_while_composing():
    problems, peak = refused(alias_bomb())
    assert [str(p.location) for p in problems] == ["bomb.yaml:8:4"]  # f: about 29 * 9**5 > 2**19
    assert problems[0].message.startswith("this value expands to more than 524,288 values")
    assert peak < 20 * MB


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("a: " + "[" * 50_000, "1:68", f"values are nested {MAX_DEPTH + 1} deep; at most 64"),
        (
            "".join(" " * i + f"k{i}:\n" for i in range(100)),
            f"{MAX_DEPTH}:{MAX_DEPTH}",  # the key k63, inside 64 mappings
            f"values are nested {MAX_DEPTH + 1} deep",
        ),
        ("a: &a [1, *a]\n", "1:4", "a YAML alias refers to a value that holds it (a cycle)"),
        ("a: " + "7" * 5000 + "\n", "1:4", "an integer of 5,000 digits; at most 1000"),
    ],
    ids=["flow", "block", "cycle", "integer"],
)
def test_nesting_cycles_and_huge_integers_are_refused(text, where, message):
    problems, _ = refused(text)
    assert [str(p.location) for p in problems] == [f"bomb.yaml:{where}"]
    assert problems[0].message.startswith(message)


def test_a_50_mb_file_is_refused_after_reading_256_kib(tmp_path):
    path = tmp_path / "big.yaml"
    line = "# " + "x" * 77 + "\n"  # 80 bytes
    with path.open("w") as fh:
        fh.write("ddr: 1\n")
        for _ in range(50 * MB // len(line) // 1000):
            fh.write(line * 1000)
    problems, peak = refused(path=path)
    size = path.stat().st_size
    assert size > 50 * 10**6
    # the bound is crossed in line 1 + (MAX_FILE_BYTES - 7) // 80 + 1 of the file
    line_no = 2 + (MAX_FILE_BYTES - 7) // 80
    col = (MAX_FILE_BYTES - 7) % 80 + 1
    assert [str(p) for p in problems] == [
        f"{path}:{line_no}:{col}: the file is {size:,} bytes; pipeline and cluster files are "
        "limited to 262,144 bytes (256 KiB), reached here"
    ]
    assert peak < 4 * MB


def test_given_text_and_overrides_are_bounded_too():
    problems, _ = refused("x" * (MAX_FILE_BYTES + 1))
    assert problems[0].message.startswith("the file is 262,145 bytes")
    deep = "k=" + "[" * 100
    problems, _ = refused("ddr: 1\nparams: {k: 1}\n", overrides=[deep])
    assert [str(p) for p in problems] == [
        f"--set {deep}: values are nested {MAX_DEPTH + 1} deep; at most {MAX_DEPTH} levels "
        "are allowed"
    ]
    # aliases in an override are shared by the YAML loader; measured as copies when used
    nested = "&a [1, 2, 3, 4, 5, 6, 7, 8]"
    for name in "bcdefghi":
        nested = f"&{name} [{nested}, " + ", ".join([f"*{chr(ord(name) - 1)}"] * 7) + "]"
    problems, _ = refused("ddr: 1\nparams: {k: 1}\n", overrides=[f"k={nested}"])
    assert len(problems) == 1 and str(problems[0]).startswith("--set k=")
    assert "expands to more than 524,288 values" in problems[0].message


def test_cli_refuses_the_bombs_with_exit_code_2_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "doubling.yaml").write_text(doubling_bomb())
    (tmp_path / "laughs.yaml").write_text(alias_bomb())
    for command in ("validate", "plan", "run"):
        for name in ("doubling.yaml", "laughs.yaml"):
            result = runner.invoke(app, [command, name])
            assert result.exit_code == 2, (command, name, result.output)
            assert f"{name}:" in result.output and "expands to more than" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doubling.yaml", "laughs.yaml"]
