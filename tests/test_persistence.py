"""Every estimator saves to a Zarr group and loads back exactly, without pickle."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

import ddr
from ddr.io import output_status, save_model

# name -> (constructor parameters, kind of training data, methods whose outputs must agree)
CASES = {
    "StandardScaler": ({}, "real", ["transform", "inverse_transform"]),
    "PCA": ({"n_components": 3}, "real", ["transform", "score_samples"]),
    "GaussianRandomProjection": ({"n_components": 3, "random_state": 0}, "real", ["transform"]),
    "SparseRandomProjection": ({"n_components": 3, "random_state": 0}, "real", ["transform"]),
    "GaussianDensity": ({}, "real", ["score_samples"]),
    "CategoricalDensity": ({"alpha": 1.0}, "categorical", ["score_samples"]),
    "KernelDensity": ({"bandwidth": 0.5}, "real", ["score_samples"]),
    "GaussianNB": ({}, "labelled", ["predict_proba", "predict"]),
    "CategoricalNB": ({}, "categorical-labelled", ["predict_proba"]),
    "BernoulliNB": ({}, "labelled", ["predict_proba"]),
    "KernelNB": ({}, "labelled", ["predict_proba"]),
    "QuadraticDiscriminantAnalysis": ({}, "labelled", ["predict_proba"]),
    "LinearDiscriminantAnalysis": ({}, "labelled", ["predict_proba", "transform"]),
    "KernelPCA": ({"n_components": 2, "kernel": "rbf"}, "real", ["transform"]),
    "PPCA": ({"n_components": 2}, "real", ["transform", "score_samples"]),
    "CCA": ({"n_components": 2}, "two-view", ["transform"]),
}


def training_data(kind: str, rng: np.random.Generator):
    X = rng.standard_normal((300, 5)) @ rng.standard_normal((5, 5))
    y = np.array(["a", "b", "c"])[rng.integers(0, 3, size=300)]
    X[y == "b"] += 1.5
    if kind == "real":
        return (X,), X
    if kind == "labelled":
        return (X, y), X
    if kind == "categorical":
        C = rng.integers(0, 4, size=(300, 5))
        return (C,), C
    if kind == "categorical-labelled":
        C = rng.integers(0, 4, size=(300, 5))
        C[y == "b", 0] = 3
        return (C, y), C
    if kind == "two-view":
        Y = X[:, :3] @ rng.standard_normal((3, 3)) + 0.5 * rng.standard_normal((300, 3))
        return (X, Y), X
    raise ValueError(kind)


def assert_same_state(a, b, where: str = "") -> None:
    assert type(a) is type(b), where
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.flags.f_contiguous == b.flags.f_contiguous, f"{where}: memory layout"
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same_state(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            assert_same_state(u, v, f"{where}[{i}]")
    elif isinstance(a, ddr.stats.Statistic):
        assert_same_state(a.to_dict(), b.to_dict(), where)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    elif sp.issparse(a):
        assert a.format == b.format and a.shape == b.shape and a.dtype == b.dtype, where
        np.testing.assert_array_equal(a.toarray(), b.toarray(), err_msg=where)
    elif hasattr(a, "get_params"):
        assert_same_state(vars(a), vars(b), where)
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same_state(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    else:
        assert a == b, where


@pytest.mark.parametrize("name", sorted(CASES))
def test_save_load_roundtrip_exact(name, tmp_path: Path, rng):
    params, kind, methods = CASES[name]
    fit_args, X = training_data(kind, rng)
    est = getattr(ddr, name)(**params).fit(*fit_args)
    est.save(tmp_path / "model.zarr")
    assert output_status(tmp_path / "model.zarr") == "complete"
    back = ddr.load(tmp_path / "model.zarr")
    assert back.get_params() == est.get_params() or json.dumps(
        back.get_params(), default=str
    ) == json.dumps(est.get_params(), default=str)
    assert_same_state(vars(back), vars(est), name)
    # the state is bit-exact; outputs computed from it agree to round-off only, because
    # numpy's SIMD loops round differently with the alignment of the buffers they are given
    for method in methods:
        args = (X,) if method != "inverse_transform" else (est.transform(X),)
        got, want = getattr(back, method)(*args), getattr(est, method)(*args)
        if np.asarray(want).dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * np.abs(want).max())
        else:
            np.testing.assert_array_equal(got, want)
    # nothing but Zarr metadata and chunks: no pickle anywhere in the group
    for f in (tmp_path / "model.zarr").rglob("*"):
        if f.is_file():
            assert not f.read_bytes().startswith(b"\x80"), f"{f} looks like a pickle"


def test_save_errors(tmp_path: Path, rng):
    est = ddr.PCA(n_components=2).fit(rng.standard_normal((50, 4)))
    est.save(tmp_path / "m.zarr")
    with pytest.raises(FileExistsError, match="already exists and is complete"):
        est.save(tmp_path / "m.zarr")
    est.save(tmp_path / "m.zarr", if_exists="overwrite")
    seeded = ddr.GaussianRandomProjection(n_components=2, random_state=np.random.RandomState(0))
    with pytest.raises(TypeError, match="parameter random_state is a RandomState; use an int seed"):
        save_model(seeded.fit(rng.standard_normal((20, 4))), tmp_path / "s.zarr")
    with pytest.raises(FileNotFoundError, match="no saved model at"):
        ddr.load(tmp_path / "nothing.zarr")
    g = zarr.open_group(str(tmp_path / "half.zarr"), mode="w")
    g.attrs["ddr:status"] = "incomplete"
    with pytest.raises(ValueError, match="is incomplete"):
        ddr.load(tmp_path / "half.zarr")
    g = zarr.open_group(str(tmp_path / "evil.zarr"), mode="w")
    g.attrs.update({"ddr:status": "complete", "ddr:model": "os.system", "params": {}, "state": {}})
    with pytest.raises(ValueError, match="not a ddr model"):
        ddr.load(tmp_path / "evil.zarr")


# ----------------------------------------------------------------- checksums
def _flip_a_bit(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x04
    path.write_bytes(bytes(raw))


def test_outputs_carry_a_checksum_verified_on_every_read(tmp_path: Path, rng):
    """Every array of an output ends its codecs with crc32c; one flipped bit in a chunk is
    an error on read, through ddr's reader and through xarray, never other values."""
    import dask.array as da
    import xarray as xr
    from zarr.codecs import Crc32cCodec

    from ddr.io import CorruptChunkError, from_zarr, open_input, write_zarr

    data = rng.normal(size=(300, 4))
    write_zarr(da.from_array(data, chunks=(100, 4)), tmp_path / "out.zarr", name="scores")
    group = zarr.open_group(tmp_path / "out.zarr", mode="r")
    for _, arr in group.arrays():
        assert isinstance(arr.metadata.codecs[-1], Crc32cCodec), arr.metadata.codecs
    np.testing.assert_array_equal(open_input(tmp_path / "out.zarr", "scores").values, data)
    _flip_a_bit(tmp_path / "out.zarr" / "scores" / "c" / "1" / "0")
    with pytest.raises(CorruptChunkError, match=r"chunk c/1/0 of .*scores is corrupt .*CRC32C"):
        from_zarr(tmp_path / "out.zarr", "scores").compute()  # how pipelines read inputs
    for read in (
        lambda: open_input(tmp_path / "out.zarr", "scores", protect=False).values,
        lambda: xr.open_zarr(tmp_path / "out.zarr")["scores"].values,
    ):
        with pytest.raises(ValueError, match="checksum"):
            read()


def _model_chunks(model: Path) -> dict[str, Path]:
    """The one chunk file of each top-level array of a saved model, by attribute name."""
    return {p.parent.parent.name.split("_", 1)[1]: p for p in model.glob("*/c/0") if p.is_file()}


def test_a_damaged_or_swapped_model_array_is_refused_on_load(tmp_path: Path, rng):
    """A flipped bit in a model's array fails its chunk checksum; two arrays of the same
    shape swapped (each chunk intact) fail the values' checksum the model recorded."""
    from ddr.io.models import CorruptModelError

    X = rng.normal(size=(200, 300)) * np.arange(1, 301)  # arrays big enough to compress
    ddr.StandardScaler().fit(X).save(tmp_path / "a.zarr")
    ddr.StandardScaler().fit(X).save(tmp_path / "b.zarr")
    chunks = _model_chunks(tmp_path / "a.zarr")
    assert {"mean_", "var_", "scale_"} <= set(chunks), sorted(chunks)
    _flip_a_bit(chunks["var_"])
    with pytest.raises(CorruptModelError, match=r"var_.*cannot be decoded .*CRC32C|checksum"):
        ddr.load(tmp_path / "a.zarr")
    good = _model_chunks(tmp_path / "b.zarr")
    mean, scale = good["mean_"].read_bytes(), good["scale_"].read_bytes()
    good["mean_"].write_bytes(scale)
    good["scale_"].write_bytes(mean)
    with pytest.raises(CorruptModelError, match="are not those saved"):
        ddr.load(tmp_path / "b.zarr")
