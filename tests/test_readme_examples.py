"""Every python example in README.md and in the user guide (docs/**/*.md) runs as written, on
small data under the names it uses. An example whose first line is ``# continues the example
above`` runs after the examples of its page that it continues."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr

import ddr
from ddr.demo import DemoSpec, write_demo_data
from ddr.demo_counts import CountsSpec, write_counts_data

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
# (where, code) of every python block, in page order
EXAMPLES = [
    (f"{page.relative_to(ROOT)} python example {i}", code)
    for page in PAGES
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
]
BLOCKS = [code for _, code in EXAMPLES]
IDS = [where for where, _ in EXAMPLES]
CONTINUES = "# continues the example above"


def _chain(index: int) -> list[int]:
    """The examples to run for example ``index``: those of its page it continues, then it."""
    page = IDS[index].rsplit(" python example ", 1)[0]
    chain = [index]
    while BLOCKS[chain[0]].startswith(CONTINUES):
        before = chain[0] - 1
        assert before >= 0 and IDS[before].startswith(page + " "), (
            f"{IDS[index]} continues an example, but none comes before it on its page"
        )
        chain.insert(0, before)
    return chain


def _sst(path: Path, rng: np.random.Generator) -> None:
    """A (time, lat, lon) field with NaN over a fixed 'land' block, as an xarray Zarr store."""
    import xarray as xr

    time = np.arange("2000-01", "2005-01", dtype="datetime64[M]")
    lat, lon = np.linspace(-60, 60, 9), np.linspace(0, 330, 12)
    values = rng.normal(size=(time.size, lat.size, lon.size)).astype("f4")
    values[:, 2:4, 3:6] = np.nan
    coords = {"time": time, "lat": lat, "lon": lon}
    sst = xr.DataArray(values, dims=("time", "lat", "lon"), coords=coords, name="sst")
    sst.chunk({"time": 20}).to_dataset().to_zarr(str(path), mode="w")


def _views(path: Path, rng: np.random.Generator) -> None:
    """Two views of the same 600 rows sharing a 3-dimensional latent signal."""
    latent = rng.normal(size=(600, 3))
    group = zarr.open_group(str(path), mode="w")
    for name, d in (("images", 8), ("text", 6)):
        data = latent @ rng.normal(size=(3, d)) + 0.5 * rng.normal(size=(600, d))
        group.create_array(name, shape=data.shape, chunks=(200, d), dtype="f8")[...] = data


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """The stores the examples read, generated once."""
    base = tmp_path_factory.mktemp("readme-data")
    spec = DemoSpec(n_samples=2400, n_features=12, rank=4, n_classes=3, chunk_rows=600, seed=5)
    write_demo_data(base / "data.zarr", spec)
    shutil.copytree(base / "data.zarr", base / "demo.zarr")
    write_demo_data(base / "sensors.zarr", DemoSpec(**{**vars(spec), "missing": 0.05}))
    _views(base / "views.zarr", np.random.default_rng(5))
    _sst(base / "sst.zarr", np.random.default_rng(6))
    corpus = CountsSpec(n_samples=600, n_features=80, n_topics=3, doc_length=30, chunk_rows=150)
    write_counts_data(base / "corpus.zarr", corpus)
    shutil.copytree(ROOT / "pipelines", base / "pipelines")
    return base


def _names_for(index: int, rng: np.random.Generator) -> dict:
    """Variables an example takes from the text around it."""
    if "X_wide" in BLOCKS[index]:
        return {"X_wide": dask.array.from_array(rng.normal(size=(300, 2100)), chunks=(100, -1))}
    if "noisy_train" in BLOCKS[index]:
        clean = rng.normal(size=(200, 2)) @ rng.normal(size=(2, 5))
        return {
            "ddr": ddr,
            "noisy_train": clean + 0.1 * rng.normal(size=clean.shape),
            "noisy": clean[:50] + 0.1 * rng.normal(size=(50, 5)),
        }
    return {"ddr": ddr}


def test_readme_and_docs_have_the_examples_this_file_runs():
    assert len(BLOCKS) >= 8
    assert any(where.startswith("README.md") for where in IDS)


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=IDS)
def test_readme_example_is_ruff_formatted(index):
    ruff = [sys.executable, "-m", "ruff", "format", "--line-length", "100", "--diff", "-"]
    result = subprocess.run(ruff, input=BLOCKS[index], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# the examples' sizes are for real data: 256 random projections of 12 features say so
@pytest.mark.filterwarnings("ignore:The number of components is higher than the number")
@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=IDS)
def test_readme_example_runs(index, data_dir, tmp_path, monkeypatch):
    for entry in data_dir.iterdir():  # each example writes into a directory of its own
        (tmp_path / entry.name).symlink_to(entry, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    namespace = _names_for(index, np.random.default_rng(index))
    with dask.config.set(scheduler="threads"):
        for i in _chain(index):
            exec(compile(BLOCKS[i], IDS[i], "exec"), namespace)
