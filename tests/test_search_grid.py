"""Grid search and cross-validation on grids (issue 32): ``GridSearchCV(...).fit(da, y,
sample_dims="time")`` folds the stacked samples of an N-D DataArray, its mask found once for
every fold's fit, and gives the scores and choices of the same search on the stacked 2-D
numpy array of the kept points (to round-off); the refitted model keeps the grid
(``as_xarray`` maps, outputs on the sample dims). Reads counted: two passes and the first
sample's chunk once, whatever the folds and candidates.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
import xarray as xr
from sklearn.model_selection import KFold

import ddr
from ddr.model_selection import GridSearchCV, HashKFold, cross_validate
from ddr.testing import counting_dask_array

T, LAT, LON = 120, 3, 4
MASK = np.zeros(LAT * LON, dtype=bool)
MASK[[0, 5, 11]] = True
TOL = 1e-10


def grid(seed: int = 0) -> tuple[xr.DataArray, np.ndarray, np.ndarray]:
    """(time, lat, lon) NaN at three points; the stacked kept columns (T, 9); labels that
    shift the mean of two of the points."""
    rng = np.random.default_rng(seed)
    kept = int((~MASK).sum())
    mix = rng.standard_normal((kept, kept)) * 0.4 + np.diag(np.linspace(3, 0.5, kept))
    y = np.arange(T) % 3
    values = rng.standard_normal((T, kept)) @ mix + 20.0
    values[:, :2] += y[:, None] * 0.8
    full = np.full((T, LAT * LON), np.nan)
    full[:, ~MASK] = values
    X = xr.DataArray(
        full.reshape(T, LAT, LON),
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(T) * 7, "lat": [-5.0, 0.0, 5.0], "lon": [0.0, 1.0, 2.0, 3.0]},
        name="sst",
    )
    return X, values, y


def same_results(got: GridSearchCV, want: GridSearchCV) -> None:
    assert got.best_params_ == want.best_params_ and got.best_index_ == want.best_index_
    assert got.cv_results_["params"] == want.cv_results_["params"]
    for key in ("mean_test_score", "std_test_score", "split0_test_score"):
        np.testing.assert_allclose(got.cv_results_[key], want.cv_results_[key], rtol=TOL)
    np.testing.assert_array_equal(
        got.cv_results_["rank_test_score"], want.cv_results_["rank_test_score"]
    )


# ---------------------------------------------------------------- the stacked reference
@pytest.mark.parametrize("how", [None, 17])
@pytest.mark.parametrize("cv", [4, HashKFold(3, seed=2)], ids=["contiguous", "hashed"])
def test_pca_search_on_a_grid_is_the_search_on_its_stacked_points(how, cv):
    X, values, _ = grid()
    data = X if how is None else X.chunk({"time": how})
    params = {"n_components": [1, 2, 4, 6]}
    got = GridSearchCV(ddr.PCA(), params, cv=cv).fit(data, sample_dims="time")
    want = GridSearchCV(ddr.PCA(), params, cv=cv).fit(values)
    same_results(got, want)
    best = got.best_estimator_
    np.testing.assert_allclose(best.components_, want.best_estimator_.components_, atol=1e-12)
    maps = best.as_xarray("components_")
    assert maps.dims == ("component", "lat", "lon")
    assert np.isnan(maps.values[:, MASK.reshape(LAT, LON)]).all()
    scores = got.transform(data)  # the search's transform: the refitted model's, on the grid
    assert scores.dims == ("time", "component")
    np.testing.assert_allclose(
        scores.values, want.transform(values), rtol=1e-9, atol=1e-9 * np.abs(scores.values).max()
    )


@pytest.mark.parametrize("labels", ["numpy", "dataarray"])
def test_classifier_search_with_labels_and_weights_along_time(labels):
    X, values, y = grid()
    w = np.random.default_rng(4).uniform(0.5, 2.0, T)
    yy, ww = (y, w) if labels == "numpy" else (
        xr.DataArray(y, dims="time", coords={"time": X.time})[::-1],  # aligned by coordinate
        xr.DataArray(w, dims="time", coords={"time": X.time}),
    )  # fmt: skip
    params = {"var_smoothing": [1e-9, 1e-3, 0.1, 1.0]}
    got = GridSearchCV(ddr.GaussianNB(), params, cv=5).fit(
        X.chunk({"time": 25}), yy, sample_dims="time", sample_weight=ww
    )
    want = GridSearchCV(ddr.GaussianNB(), params, cv=5).fit(values, y, sample_weight=w)
    same_results(got, want)
    theta = got.best_estimator_.as_xarray("theta_")
    assert theta.dims == ("class", "lat", "lon")
    pred = got.predict(X)
    assert pred.dims == ("time",)
    np.testing.assert_array_equal(pred.values, want.predict(values))
    assert got.score(X, y, sample_dims="time") == pytest.approx(want.score(values, y), abs=TOL)


def test_cross_validate_on_a_grid_is_on_its_stacked_points():
    X, values, y = grid()
    got = cross_validate(
        ddr.LinearDiscriminantAnalysis(), X.chunk({"time": 30}), y, cv=KFold(4),
        params={"sample_dims": "time"}, return_estimator=True,
    )  # fmt: skip
    want = cross_validate(ddr.LinearDiscriminantAnalysis(), values, y, cv=4)
    np.testing.assert_allclose(got["test_score"], want["test_score"], rtol=TOL)
    for est in got["estimator"]:
        assert est.as_xarray("means_").dims == ("class", "lat", "lon")


def test_area_weights_as_a_dataarray_go_to_every_fold():
    """``feature_weights`` on ``lat`` (broadcast over the grid, the masked points left out)
    reach each fold's fit: the search of the weighted PCA of the stacked points."""
    X, values, _ = grid()
    w = xr.DataArray(np.sqrt(np.cos(np.deg2rad(X.lat.values))), dims="lat", coords={"lat": X.lat})
    flat = np.broadcast_to(w.values[:, None], (LAT, LON)).ravel()[~MASK]
    params = {"n_components": [1, 3, 5]}
    got = GridSearchCV(ddr.PCA(), params, cv=3).fit(
        X.chunk({"time": 40}), sample_dims="time", feature_weights=w
    )
    want = GridSearchCV(ddr.PCA(), params, cv=3).fit(values, feature_weights=flat)
    same_results(got, want)
    np.testing.assert_allclose(got.best_estimator_.feature_weights_, flat, rtol=1e-15)


# ------------------------------------------------------------------ several sample dims
def test_several_sample_dims_are_folded_as_their_stacked_rows():
    """(year, month) as the samples: the folds are of the rows in C order over them, as the
    stacked numpy array's; the refitted model reads the grid by its own sample dims."""
    X, values, y = grid()
    X4 = X.assign_coords(time=np.arange(T)).coarsen(time=12).construct(time=("year", "month"))
    X4 = X4.assign_coords(year=1990 + np.arange(10), month=1 + np.arange(12))
    y4 = xr.DataArray(y.reshape(10, 12), dims=("year", "month"), coords=X4[:, :, 0, 0].coords)
    params = {"var_smoothing": [1e-9, 0.3, 3.0]}
    for data in (X4, X4.chunk({"year": 3})):
        got = GridSearchCV(ddr.GaussianNB(), params, cv=4).fit(
            data, y4.transpose("month", "year"), sample_dims=("year", "month")
        )
        want = GridSearchCV(ddr.GaussianNB(), params, cv=4).fit(values, y)
        same_results(got, want)
        best = got.best_estimator_
        assert best.sample_dims_ == ("year", "month")
        pred = best.predict(data)
        assert pred.dims == ("year", "month")
        np.testing.assert_array_equal(pred.values.ravel(), want.predict(values))


# ------------------------------------------------------------------------ passes
@pytest.mark.parametrize("cv", [5, HashKFold(4, seed=1)], ids=["contiguous", "hashed"])
def test_a_grid_search_reads_twice_and_its_first_sample_once(cv):
    X, _, y = grid()
    arr, counter = counting_dask_array(X.values, chunks=(24, -1, -1))
    Xd = X.copy(data=arr)
    search = GridSearchCV(
        ddr.LinearDiscriminantAnalysis(solver="lsqr"), {"shrinkage": [None, 0.1, "auto"]}, cv=cv
    )
    with dask.config.set(scheduler="synchronous"):
        plan = search.plan(Xd, y, sample_dims="time")
        assert counter.passes == 24 / T  # the mask: the chunk of the first sample
        assert (plan.n_passes, plan.n_candidates, sum(plan.fold_sizes)) == (2, 3, T)
        counter.reset()
        search.fit(Xd, y, sample_dims="time")
    assert counter.passes == 2 + 24 / T  # the folds' fits are handed the mask: no more reads
    counter.reset()
    with dask.config.set(scheduler="synchronous"):
        cross_validate(ddr.GaussianNB(), Xd, y, cv=cv, params={"sample_dims": "time"})
    assert counter.passes == 2 + 24 / T


# ------------------------------------------------------------------------ bad input
def test_a_changed_mask_in_a_fold_is_refused_in_the_pass():
    X, _, y = grid()
    later = X.copy()
    later[100, 0, 0] = 3.0  # a masked point with a value in the last fold
    with pytest.raises(
        ValueError,
        match=r"the feature at lat=-5.0, lon=0.0 is masked .* but has a value at sample .*"
        r"\(time=700\)",
    ):
        GridSearchCV(ddr.GaussianNB(), {"var_smoothing": [1e-9]}, cv=3).fit(
            later.chunk({"time": 30}), y, sample_dims="time"
        )


def test_bad_sample_dims_are_refused():
    X, values, _ = grid()
    search = GridSearchCV(ddr.PCA(), {"n_components": [1, 2]}, cv=3)
    with pytest.raises(TypeError, match=r"give sample_dims or sample_dim, not both"):
        search.fit(X, sample_dims="time", sample_dim="time")
    with pytest.raises(ValueError, match=r"sample_dims='time' names the sample dims of a "
                       r"DataArray X; X is a ndarray"):  # fmt: skip
        search.fit(values, sample_dims="time")
    with pytest.raises(ValueError, match=r"sample_dims=\('depth',\).*'depth' is not a dimension"):
        search.fit(X, sample_dims="depth")
    ds = xr.Dataset({"sst": X, "slp": X.isel(lat=0)})
    with pytest.raises(ValueError, match=r"searches a grid given as a DataArray; X is a Dataset"):
        search.fit(ds, sample_dims="time")
