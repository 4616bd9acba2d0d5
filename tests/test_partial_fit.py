"""Statistics that travel (issue 30): partial_fit from a fit's plan of mergeable statistics,
models that keep the statistics they were solved from, and federated merges of models
fitted on separate stores (:func:`ddr.merge_fits`, ``ddr merge``).

The common suite (``check_partial_fit_equals_fit``) checks every one-pass estimator's
partial_fit against fit, in any order, across save/load, and merge_fits of two halves; the
tests here are what it does not: separate Zarr stores, the command, passes, refusals."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import zarr
from sklearn.base import is_classifier
from typer.testing import CliRunner

import ddr
from ddr.cli import app
from ddr.io import from_zarr
from ddr.testing import counting_dask_array

runner = CliRunner()


def _sites(tmp_path, rng):
    """Two sites' rows in two separate Zarr stores (different sizes, different chunks)."""
    # well conditioned (1e-12 is round-off of the solve), on a large offset
    X = rng.normal(size=(700, 5)) @ (np.eye(5) + 0.3 * rng.normal(size=(5, 5))) + 1e4
    y = (X[:, 0] > np.median(X[:, 0])).astype(np.int64) + (X[:, 1] > 1e4)
    paths = []
    for name, rows, chunk in (("a", slice(0, 260), 64), ("b", slice(260, 700), 100)):
        path = tmp_path / f"site-{name}.zarr"
        group = zarr.open_group(str(path), mode="w")
        group.create_array("X", data=X[rows], chunks=(chunk, 5))
        group.create_array("y", data=y[rows], chunks=(chunk,))
        paths.append(path)
    return X, y, paths


def _same(a, b, rtol=1e-12):
    for name, value in vars(a).items():
        if name.endswith("_") and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            other = getattr(b, name)
            scale = np.max(np.abs(value[np.isfinite(value)]), initial=1.0)
            np.testing.assert_allclose(other, value, rtol=rtol, atol=rtol * scale, err_msg=name)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ddr.PCA(3),
        # lsqr: no eigenvectors (the other solvers' scalings_ agree to round-off over their
        # eigengap, 1e-10 here)
        lambda: ddr.LinearDiscriminantAnalysis(solver="lsqr"),
        lambda: ddr.QuadraticDiscriminantAnalysis(reg_param=0.1),
        lambda: ddr.GaussianDensity(),
        lambda: ddr.CCA(2),
    ],
    ids=["PCA", "LDA", "QDA", "GaussianDensity", "CCA"],
)
def test_models_fitted_on_two_stores_merge_into_the_fit_of_their_union(make, tmp_path, rng):
    X, y, paths = _sites(tmp_path, rng)
    saved = []
    for path in paths:  # each site reads only its own store and saves its model
        Xs, ys = from_zarr(path, "X"), from_zarr(path, "y")
        est = make()
        if isinstance(est, ddr.CCA):
            est.fit(Xs[:, :3], Xs[:, 3:])
        elif is_classifier(est):
            est.fit(Xs, ys)
        else:
            est.fit(Xs)
        est.save(path.with_suffix(".model.zarr"))
        saved.append(path.with_suffix(".model.zarr"))
    union = tmp_path / "union.model.zarr"
    result = runner.invoke(app, ["merge", *map(str, saved), "-o", str(union)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("merged 2 ")
    merged = ddr.load(union)
    ref = make()
    if isinstance(ref, ddr.CCA):
        ref.fit(X[:, :3], X[:, 3:])
    elif is_classifier(ref):
        ref.fit(X, y)
    else:
        ref.fit(X)
    _same(ref, merged)
    # the Python function gives the same model, and leaves its inputs alone
    a, b = (ddr.load(p) for p in saved)
    before = {k: np.copy(v) for k, v in vars(a).items() if isinstance(v, np.ndarray)}
    _same(ref, ddr.merge_fits(a, b))
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(a, k), v)


def test_a_batch_is_read_once_and_the_model_then_equals_fit(rng):
    X = rng.normal(size=(400, 4)) @ rng.normal(size=(4, 4))
    Y = X[:, :2] @ rng.normal(size=(2, 3)) + rng.normal(size=(400, 3))
    est = ddr.PLSSVD(2)
    for rows in (slice(0, 150), slice(150, 400)):
        arr, counter = counting_dask_array(X[rows], chunks=(40, -1))
        with dask.config.set(scheduler="threads"):
            est.partial_fit(arr, Y[rows])
        assert counter.passes == 1.0
    _same(ddr.PLSSVD(2).fit(X, Y), est)


def test_a_loaded_model_continues_exactly(tmp_path, rng):
    X = rng.normal(size=(300, 4))
    est = ddr.TruncatedSVD(3).partial_fit(X[:100])
    est.save(tmp_path / "m.zarr")
    loaded = ddr.load(tmp_path / "m.zarr").partial_fit(X[100:])
    _same(ddr.TruncatedSVD(3).fit(X), loaded, rtol=1e-11)
    assert isinstance(loaded.fit_statistics_, ddr.stats.GramProduct)


def test_partial_fit_checks_all_rows_so_far_not_one_batch(rng):
    X = rng.normal(size=(40, 4))
    est = ddr.CCA(2).partial_fit(X[:30, :2], X[:30, 2:])
    est.partial_fit(X[30:31, :2], X[30:31, 2:])  # one row: fine, 31 rows in all
    _same(ddr.CCA(2).fit(X[:31, :2], X[:31, 2:]), est)
    with pytest.raises(ValueError, match="needs at least 2 samples; got n_samples=1"):
        ddr.CCA(1).partial_fit(X[:1, :2], X[:1, 2:])


def test_partial_fit_refusals(rng):
    X = rng.normal(size=(60, 4))
    est = ddr.GaussianDensity().partial_fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but GaussianDensity is expecting 4"):
        est.partial_fit(X[:, :3])
    cca = ddr.CCA(1).partial_fit(X[:, :2], X[:, 2:])
    with pytest.raises(
        ValueError, match=r"^Y has 1 features, but CCA was fitted with 2 features in Y$"
    ):
        cca.partial_fit(X[:, :2], X[:, 2:3])
    assert cca.n_features_y_ == 2
    wide = ddr.TruncatedSVD(2, n_oversamples=1)  # 3 of 40 columns: several passes
    with pytest.raises(
        ValueError, match=r"^TruncatedSVD.partial_fit needs a fit that is one pass of statistics"
    ):
        wide.partial_fit(rng.normal(size=(50, 40)))
    sketch = ddr.TruncatedSVD(2, n_oversamples=1, n_iter=0)  # one pass, but a random draw
    with pytest.raises(ValueError, match=r"fit is a one-pass random sketch of the 40 features"):
        sketch.partial_fit(rng.normal(size=(50, 40)))
    several = ddr.TruncatedSVD(2, n_oversamples=1).fit(rng.normal(size=(50, 40)))
    with pytest.raises(ValueError, match="was fitted without keeping the statistics"):
        several.partial_fit(rng.normal(size=(50, 40)))


def test_merge_fits_refusals(rng):
    X = rng.normal(size=(60, 4))
    a = ddr.GaussianDensity().fit(X[:30])
    with pytest.raises(ValueError, match=r"^merge_fits needs at least one fitted model$"):
        ddr.merge_fits()
    with pytest.raises(TypeError, match=r"^merge_fits: model 1 is a PCA, model 0 a Gaussian"):
        ddr.merge_fits(a, ddr.PCA(2).fit(X))
    with pytest.raises(ValueError, match=r"^merge_fits: model 1's parameters differ from"):
        ddr.merge_fits(a, ddr.GaussianDensity(reg_covar=1e-3).fit(X[30:]))
    with pytest.raises(ValueError, match=r"^merge_fits: model 1 \(GaussianDensity\) is not fit"):
        ddr.merge_fits(a, ddr.GaussianDensity())
    with pytest.raises(ValueError, match=r"^merge_fits: model 1 was fitted with 3 features in X"):
        ddr.merge_fits(a, ddr.GaussianDensity().fit(X[:, :3]))
    with pytest.raises(TypeError, match=r"^KMeans does not keep mergeable statistics"):
        ddr.merge_fits(ddr.KMeans(2, n_init=1).fit(X))
    randomized = ddr.PCA(2, svd_solver="randomized", random_state=0)
    with pytest.raises(ValueError, match=r"model 0 \(PCA\) is not fitted, or kept no statistics"):
        ddr.merge_fits(randomized.fit(X[:30]), randomized.fit(X[30:]))


def test_the_merge_command_refusals(tmp_path, rng):
    X = rng.normal(size=(60, 4))
    ddr.GaussianDensity().fit(X).save(tmp_path / "a.zarr")
    ddr.PCA(2).fit(X).save(tmp_path / "b.zarr")
    one = runner.invoke(app, ["merge", str(tmp_path / "a.zarr"), "-o", str(tmp_path / "u")])
    assert one.exit_code == 2 and "ddr merge needs at least two models" in one.output
    mixed = runner.invoke(
        app, ["merge", str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr"), "-o", "u.zarr"]
    )
    assert mixed.exit_code == 1
    assert "ddr: error: merge_fits: model 1 is a PCA, model 0 a GaussianDensity" in mixed.output
    missing = runner.invoke(
        app, ["merge", str(tmp_path / "a.zarr"), str(tmp_path / "nope.zarr"), "-o", "u.zarr"]
    )
    assert missing.exit_code == 1 and "nope.zarr" in missing.output
    exists = runner.invoke(
        app,
        [
            "merge",
            str(tmp_path / "a.zarr"),
            str(tmp_path / "a.zarr"),
            "-o",
            str(tmp_path / "b.zarr"),
        ],
    )
    assert exists.exit_code == 1 and "b.zarr" in exists.output
