"""Units on outputs (issue 32): when the data have a ``units`` attribute, every map
``as_xarray`` gives and every output of a method says what it is in, CF-style, in the spelling
of udunits; the relation of each attribute to the data's units is declared once
(``DDRTags.xarray_units``) and the pipeline's Zarr outputs carry the same attributes.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import xarray as xr

import ddr
from ddr.demo_gridded import GriddedSpec, write_gridded_data
from ddr.pipeline import plan_pipeline, run_plan
from ddr.stats._units import common_units, data_units, power_units, units_of
from ddr.tags import get_ddr_tags
from ddr.testing import exported_estimators


def field(units: str | None = "K", n: int = 90, seed: int = 0) -> tuple[xr.DataArray, np.ndarray]:
    """(time, lat, lon) of three classes with a land point, in ``units``; its labels."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    values = rng.standard_normal((n, 3, 4)) + y[:, None, None] + 280.0
    values[:, 1, 2] = np.nan
    attrs = {} if units is None else {"units": units, "long_name": "temperature"}
    X = xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(n), "lat": [-10.0, 0.0, 10.0], "lon": [0.0, 1.0, 2.0, 3.0]},
        name="t",
        attrs=attrs,
    )
    return X, y


# ------------------------------------------------------------------------ the spelling
@pytest.mark.parametrize(
    ("units", "power", "expected"),
    [
        ("K", 1, "K"),
        ("K", 2, "K2"),
        ("K", -1, "K-1"),
        ("K", 0, "1"),
        ("m s-1", 2, "m2 s-2"),
        ("kg m-2 s-1", -1, "kg-1 m2 s"),
        ("kg kg-1", 2, "1"),  # a symbol twice is one factor
        ("m2", 2, "m4"),
        ("W/m^2", 2, "(W/m^2)^2"),
        ("%", 2, "(%)^2"),
        ("1e-3 kg/kg", -1, "(1e-3 kg/kg)^-1"),
        ("days since 2000-01-01", 1, "days since 2000-01-01"),
        ("days since 2000-01-01", 2, None),  # a variance of dates has no spelling
        ("1", 2, "1"),
        ("K", None, None),
        (None, 2, None),
    ],
)
def test_units_to_a_power_in_udunits_spelling(units, power, expected):
    assert power_units(units, power) == expected


def test_the_data_units_of_a_dataarray_and_of_a_dataset():
    X, _ = field()
    assert data_units(X) == "K"
    assert data_units(X.assign_attrs(units=" ")) is None  # blank: not said
    assert data_units(field(None)[0]) is None
    ds = xr.Dataset({"t": X, "p": X.isel(lat=0).assign_attrs(units="hPa")})
    assert data_units(ds) == {"t": "K", "p": "hPa"}
    assert units_of(2, data_units(ds)) == {"t": "K2", "p": "hPa2"}
    assert common_units({"t": "K", "p": "hPa"}) is None
    assert common_units({"t": "1", "p": "1"}) == "1"


def test_every_mapped_attribute_declares_its_units():
    """An attribute ``as_xarray`` gives without a declared relation would silently go without
    units: every exported estimator declares one (None: "not stated", on purpose)."""
    missing = {}
    for cls in exported_estimators():
        tags = get_ddr_tags(cls())
        undeclared = set(tags.xarray_dims) - set(tags.xarray_units)
        if undeclared:
            missing[cls.__name__] = sorted(undeclared)
    assert missing == {}


# ------------------------------------------------------------------------ as_xarray
def test_pca_maps_and_outputs_say_their_units():
    X, _ = field()
    pca = ddr.PCA(n_components=2).fit(X.chunk({"time": 30}), sample_dims="time")
    units = {name: pca.as_xarray(name).attrs.get("units") for name in get_ddr_tags(pca).xarray_dims}
    assert units == {
        "components_": "1",  # unit vectors
        "mean_": "K",
        "explained_variance_": "K2",
        "explained_variance_ratio_": "1",
        "singular_values_": "K",
    }
    scores = pca.transform(X)
    assert scores.attrs["units"] == "K"
    assert pca.inverse_transform(scores).attrs["units"] == "K"
    white = ddr.PCA(n_components=2, whiten=True).fit(X, sample_dims="time")
    assert white.transform(X).attrs["units"] == "1"
    assert white.inverse_transform(white.transform(X)).attrs["units"] == "K"


def test_no_units_where_the_data_have_none():
    X, y = field(units=None)
    pca = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    for name in get_ddr_tags(pca).xarray_dims:
        assert "units" not in pca.as_xarray(name).attrs
    assert "units" not in pca.transform(X).attrs
    assert "units" not in ddr.GaussianNB().fit(X, y).predict_proba(X).attrs


def test_weighted_maps_say_only_what_is_known():
    """With feature weights the weighted space's quantities are in the data's units times the
    weights', which ddr is not told: no units on them; unit vectors are still "1"."""
    X, _ = field()
    w = np.sqrt(np.cos(np.deg2rad(X["lat"])))
    pca = ddr.PCA(n_components=2).fit(X, sample_dims="time", feature_weights=w)
    said = {n: pca.as_xarray(n).attrs.get("units") for n in get_ddr_tags(pca).xarray_dims}
    assert said == {
        "components_": "1",
        "mean_": "K",
        "explained_variance_": None,
        "explained_variance_ratio_": "1",
        "singular_values_": None,
        "feature_weights_": None,
    }
    assert "units" not in pca.as_xarray("components_", weighted=False).attrs
    assert "units" not in pca.transform(X).attrs
    assert pca.inverse_transform(pca.transform(X)).attrs["units"] == "K"  # unweighted back
    rot = ddr.RotatedPCA(n_components=2).fit(X, sample_dims="time", feature_weights=w)
    assert rot.as_xarray("explained_variance_").attrs.get("units") is None
    assert rot.as_xarray("components_").attrs["units"] == "1"
    svd = ddr.TruncatedSVD(n_components=2).fit(X, sample_dims="time", feature_weights=w)
    assert "units" not in svd.as_xarray("singular_values_").attrs
    unweighted = ddr.RotatedPCA(n_components=2).fit(X, sample_dims="time")
    assert unweighted.as_xarray("explained_variance_").attrs["units"] == "K2"
    assert unweighted.transform(X).attrs["units"] == "K"


@pytest.mark.parametrize(
    ("make", "expected", "methods"),
    [
        (
            lambda: ddr.GaussianNB(),
            {"theta_": "K", "var_": "K2", "class_prior_": "1", "class_count_": "1"},
            {"predict_proba": "1", "predict_log_proba": "1", "predict_joint_log_proba": None},
        ),
        (
            lambda: ddr.LinearDiscriminantAnalysis(store_covariance=True),
            {
                "means_": "K",
                "priors_": "1",
                "class_count_": "1",
                "scalings_": "K-1",
                "covariance_": "K2",
            },
            {"transform": "1", "predict_proba": "1", "predict": None},
        ),
        (
            lambda: ddr.QuadraticDiscriminantAnalysis(reg_param=0.1),
            {"means_": "K", "priors_": "1", "class_count_": "1"},
            {"predict_proba": "1"},
        ),
    ],
)
def test_classifier_maps_and_outputs(make, expected, methods):
    X, y = field()
    est = make().fit(X, y, sample_dims="time")
    said = {n: est.as_xarray(n).attrs.get("units") for n in get_ddr_tags(est).xarray_dims}
    assert said == expected
    for method, units in methods.items():
        assert getattr(est, method)(X).attrs.get("units") == units, method


def test_other_estimators_maps_and_outputs():
    X, _ = field()
    cases = [
        (ddr.StandardScaler(), {"mean_": "K", "var_": "K2", "scale_": "K"}, "1"),
        (ddr.StandardScaler(with_std=False), {"mean_": "K"}, "K"),
        (ddr.KMeans(3, random_state=0), {"cluster_centers_": "K", "cluster_sizes_": "1"}, "K"),
        (ddr.FactorAnalysis(1), {"components_": "K", "mean_": "K", "noise_variance_": "K2"}, "1"),
        (ddr.PPCA(1), {"components_": "1", "mean_": "K"}, "1"),
        (ddr.GaussianRandomProjection(2, random_state=0), {"components_": "1"}, "K"),
    ]
    for est, expected, transformed in cases:
        est.fit(X, sample_dims="time")
        for name, units in expected.items():
            assert est.as_xarray(name).attrs.get("units") == units, (est, name)
        assert est.transform(X).attrs.get("units") == transformed, est
    gm = ddr.GaussianMixture(2, covariance_type="diag", random_state=0).fit(X, sample_dims="time")
    said = {n: gm.as_xarray(n).attrs.get("units") for n in get_ddr_tags(gm).xarray_dims}
    assert said == {"means_": "K", "weights_": "1", "covariances_": "K2"}
    assert gm.predict_proba(X).attrs["units"] == "1"
    assert ddr.GaussianDensity().fit(X).as_xarray("covariance_").attrs["units"] == "K2"
    ppca = ddr.PPCA(1, solver="em", random_state=0).fit(X, sample_dims="time")
    assert ppca.impute(X).attrs["units"] == "K"
    assert ppca.inverse_transform(ppca.transform(X)).attrs["units"] == "K"


def test_a_dataset_fit_gives_each_variable_its_units():
    X, _ = field()
    ds = xr.Dataset({"t": X, "p": (X.isel(lat=0) * 10).assign_attrs(units="hPa")})
    pca = ddr.PCA(n_components=2).fit(ds, sample_dims="time")
    mean = pca.as_xarray("mean_")
    assert {v: mean[v].attrs["units"] for v in mean.data_vars} == {"t": "K", "p": "hPa"}
    comps = pca.as_xarray("components_")
    assert {v: comps[v].attrs["units"] for v in comps.data_vars} == {"t": "1", "p": "1"}
    assert "units" not in pca.transform(ds).attrs  # scores over K and hPa: no one unit
    back = pca.inverse_transform(pca.transform(ds))
    assert {v: back[v].attrs["units"] for v in back.data_vars} == {"t": "K", "p": "hPa"}
    same = ddr.PCA(n_components=2).fit(
        ds.assign(p=ds["p"].assign_attrs(units="K")), sample_dims="time"
    )
    assert same.transform(ds).attrs["units"] == "K"


def test_units_of_a_2d_dataarray_and_of_a_saved_model(tmp_path):
    X, _ = field()
    X2 = X.isel(lat=0)  # (time, lon): the plain 2-D input
    sc = ddr.StandardScaler().fit(X2)
    assert sc.as_xarray("var_").attrs["units"] == "K2"
    assert sc.inverse_transform(sc.transform(X2)).attrs["units"] == "K"
    pca = ddr.PCA(n_components=2).fit(X, sample_dims="time")
    pca.save(tmp_path / "m.zarr")
    loaded = ddr.load(tmp_path / "m.zarr")
    assert loaded.as_xarray("explained_variance_").attrs["units"] == "K2"
    assert loaded.transform(X).attrs["units"] == "K"


def test_units_survive_a_zarr_round_trip(tmp_path):
    X, _ = field()
    pca = ddr.PCA(n_components=2).fit(X.chunk({"time": 30}), sample_dims="time")
    maps = xr.Dataset(
        {
            "components": pca.as_xarray("components_"),
            "explained_variance": pca.as_xarray("explained_variance_"),
            "mean": pca.as_xarray("mean_"),
        }
    )
    maps.to_zarr(tmp_path / "maps.zarr", consolidated=False)
    scores = pca.transform(X.chunk({"time": 30})).to_dataset(name="scores")
    scores.to_zarr(tmp_path / "scores.zarr", consolidated=False)
    back = xr.open_zarr(tmp_path / "maps.zarr", consolidated=False)
    assert back["components"].attrs["units"] == "1"
    assert back["explained_variance"].attrs["units"] == "K2"
    assert back["mean"].attrs["units"] == "K"
    assert (
        xr.open_zarr(tmp_path / "scores.zarr", consolidated=False)["scores"].attrs["units"] == "K"
    )


# ------------------------------------------------------------------------ pipelines
def test_a_pipeline_writes_the_units_of_maps_and_time_series(tmp_path, monkeypatch):
    """The demo field is in K: the maps and time series the pipeline writes say what they
    are in, as the estimator's ``as_xarray`` and ``transform`` do."""
    monkeypatch.chdir(tmp_path)
    write_gridded_data("g.zarr", GriddedSpec(48, 6, 8, chunk_rows=12, seed=3))
    text = textwrap.dedent(
        """\
        ddr: 1
        name: units
        inputs:
          T: {path: g.zarr, array: t2m, sample_dims: time}
        steps:
          pca: {op: PCA.fit, inputs: {X: T}, with: {n_components: 2}}
          scores: {op: PCA.transform, inputs: {model: pca, X: T}}
          nb: {op: StandardScaler.fit, inputs: {X: T}}
          m: {op: moments, inputs: {X: T}}
        outputs:
          - kind: zarr
            from: {components: pca.components_, mean: pca.mean_,
                   explained_variance: pca.explained_variance_,
                   explained_variance_ratio: pca.explained_variance_ratio_}
            path: out/maps.zarr
          - {kind: zarr, from: scores, path: out/scores.zarr}
          - {kind: zarr, from: {var: nb.var_}, path: out/var.zarr}
          - {kind: zarr, from: m, path: out/m.zarr}
        """
    )
    (tmp_path / "p.yaml").write_text(text)
    run_plan(plan_pipeline("p.yaml", []))
    maps = xr.open_zarr("out/maps.zarr")
    assert {v: maps[v].attrs["units"] for v in maps.data_vars} == {
        "components": "1",
        "mean": "K",
        "explained_variance": "K2",
        "explained_variance_ratio": "1",
    }
    assert maps["lat"].attrs["units"] == "degrees_north"  # the coordinates' own, as before
    assert xr.open_zarr("out/scores.zarr")["scores"].attrs["units"] == "K"
    assert xr.open_zarr("out/var.zarr")["var"].attrs["units"] == "K2"
    # a statistic's read-outs, as the statistic declares them (readout_units)
    m = xr.open_zarr("out/m.zarr")
    said = {v: m[v].attrs.get("units") for v in ("mean", "variance", "std", "covariance")}
    assert said == {"mean": "K", "variance": "K2", "std": "K", "covariance": "K2"}
    assert m["correlation"].attrs["units"] == "1"


def test_statistics_declare_units_of_their_readouts_only():
    from ddr.stats.base import Statistic

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    import importlib
    import pkgutil

    import ddr.stats

    for module in pkgutil.iter_modules(ddr.stats.__path__):
        importlib.import_module(f"ddr.stats.{module.name}")  # every statistic ddr has
    for cls in subclasses(Statistic):
        assert set(cls.readout_units) <= set(cls.readouts), cls.__name__
        # every read-out says its units, but the class labels, which are in none
        assert set(cls.readouts) - set(cls.readout_units) <= {"classes"}, cls.__name__
    from ddr.stats import ClassMoments, Moments

    assert Moments.readout_units["variance"] == 2 and ClassMoments.readout_units["means"] == 1
