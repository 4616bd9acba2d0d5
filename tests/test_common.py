"""The common estimator suite: every estimator ddr exports is checked here, by being exported.

Each test is parametrised over the estimator classes of ``ddr._EXPORTS``; what a test needs
to know of an estimator is asked of it (scikit-learn's tags for the kind of input, ``fit``'s
signature for labels, ``_translation_invariant_output`` for the invariance on offset data).
The data are small so that the suite stays fast (it runs in CI on two interpreters).
"""

from __future__ import annotations

import inspect
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse
import xarray as xr
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import check_estimator, check_param_validation

import ddr
from ddr.base import FitPlan
from ddr.testing import counting_dask_array

ESTIMATORS = sorted(
    name
    for name in ddr._EXPORTS
    if isinstance(getattr(ddr, name), type) and issubclass(getattr(ddr, name), BaseEstimator)
)

#: constructor parameters for the suite's small data (defaults everywhere else): a CCA or a
#: PLS-SVD of a one-column view has one pair of directions; a Johnson-Lindenstrauss width
#: would exceed the few features here
SMALL = {
    "CCA": {"n_components": 1},
    "PLSSVD": {"n_components": 1},
    "PLSA": {"n_components": 2, "random_state": 0},
    "GaussianRandomProjection": {"n_components": 2, "random_state": 0},
    "SparseRandomProjection": {"n_components": 2, "random_state": 0},
}

#: scikit-learn checks a default instance is known to fail, and why
WEIGHTS_SINGULAR = (
    "the check's weighted data have fewer samples than features: the maximum-likelihood "
    "covariance is singular (documented; reg_covar or bandwidth_scaling='none' pass)"
)
CONTINUOUS = (
    "scikit-learn's check feeds continuous values; ddr refuses non-integer category codes "
    "where scikit-learn silently truncates them"
)
NOT_COUNTS = (
    "scikit-learn's checks feed continuous positive values; PLSA refuses counts that are not "
    "whole numbers (a ValueError saying so); the suite's own tests below give it counts"
)
XFAIL = {
    "PLSA": {
        "check_dict_unchanged": NOT_COUNTS,
        "check_dont_overwrite_parameters": NOT_COUNTS,
        "check_dtype_object": NOT_COUNTS,
        "check_estimator_sparse_array": NOT_COUNTS,
        "check_estimator_sparse_matrix": NOT_COUNTS,
        "check_estimator_sparse_tag": NOT_COUNTS,
        "check_estimators_dtypes": NOT_COUNTS,
        "check_estimators_fit_returns_self": NOT_COUNTS,
        "check_estimators_nan_inf": NOT_COUNTS,
        "check_estimators_overwrite_params": NOT_COUNTS,
        "check_estimators_pickle": NOT_COUNTS,
        "check_f_contiguous_array_estimator": NOT_COUNTS,
        "check_fit2d_1feature": NOT_COUNTS,
        "check_fit2d_1sample": NOT_COUNTS,
        "check_fit2d_predict1d": NOT_COUNTS,
        "check_fit_check_is_fitted": NOT_COUNTS,
        "check_fit_idempotent": NOT_COUNTS,
        "check_fit_score_takes_y": NOT_COUNTS,
        "check_methods_sample_order_invariance": NOT_COUNTS,
        "check_methods_subset_invariance": NOT_COUNTS,
        "check_n_features_in": NOT_COUNTS,
        "check_n_features_in_after_fitting": NOT_COUNTS,
        "check_pipeline_consistency": NOT_COUNTS,
        "check_readonly_memmap_input": NOT_COUNTS,
        "check_transformer_data_not_an_array": NOT_COUNTS,
        "check_transformer_general": NOT_COUNTS,
        "check_transformer_n_iter": NOT_COUNTS,
        "check_transformer_preserve_dtypes": NOT_COUNTS,
    },
    "GaussianDensity": {"check_sample_weight_equivalence_on_dense_data": WEIGHTS_SINGULAR},
    "KernelDensity": {"check_sample_weight_equivalence_on_dense_data": WEIGHTS_SINGULAR},
    "CategoricalDensity": {"check_sample_weight_equivalence_on_dense_data": CONTINUOUS},
    "CategoricalNB": {
        "check_sample_weight_equivalence_on_dense_data": CONTINUOUS,
        "check_classifiers_one_label_sample_weights": CONTINUOUS,
    },
}

#: fits that read the data once by loading it, not as a pass of mergeable statistics
LOADS_DATA = {"KernelPCA": "exact kernel PCA (small n) holds the data and its Gram matrix"}

N, D = 90, 3


def make(name: str, **params) -> BaseEstimator:
    return getattr(ddr, name)(**{**SMALL.get(name, {}), **params})


def data(est: BaseEstimator, *, n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
    """Small data of the kind ``est`` takes: category codes for categorical input, three
    separated classes for classifiers, a second view for estimators that require y."""
    rng = np.random.default_rng(seed)
    tags = get_tags(est)
    labels = np.arange(n) % 3
    if tags.input_tags.categorical:
        X = (rng.integers(0, 3, (n, D)) + labels[:, None]) % 4
        return X.astype(np.float64), labels if is_classifier(est) else None
    if tags.input_tags.positive_only:  # counts: a Poisson rate per class and feature
        rates = 1.0 + 4.0 * np.eye(3)[labels]
        X = rng.poisson(rates).astype(np.float64)
        return X, labels if is_classifier(est) else None
    X = rng.standard_normal((n, D)) @ np.array([[2.0, 0.3, 0.0], [0.0, 1.0, 0.5], [0, 0, 0.7]])
    if is_classifier(est):
        X += 1.5 * np.eye(3)[labels]
        return X, labels
    if tags.target_tags.required:
        return X, X[:, :1] * 0.8 + rng.standard_normal((n, 1)) * 0.5
    return X, None


def output_method(est: BaseEstimator) -> str:
    for method in ("predict_proba", "transform", "score_samples"):
        if hasattr(est, method):
            return method
    raise AssertionError(f"{type(est).__name__} has no output method")  # pragma: no cover


def fitted_output(est: BaseEstimator, X, y, Q, **fit_kw):
    est.fit(X, y, **fit_kw) if y is not None or _takes_y(est) else est.fit(X, **fit_kw)
    out = getattr(est, output_method(est))(Q)
    return np.asarray(out.compute() if isinstance(out, da.Array) else out)


def _takes_y(est: BaseEstimator) -> bool:
    return "y" in inspect.signature(est.fit).parameters


def assert_close(a, b, rtol: float):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.max(np.abs(b[np.isfinite(b)]), initial=1.0)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        with dask.config.set(scheduler="threads"):
            yield


# ------------------------------------------------------------------ scikit-learn's checks
@pytest.mark.parametrize("name", ESTIMATORS)
def test_check_estimator(name):
    check_estimator(make(name), expected_failed_checks=XFAIL.get(name, {}))


@pytest.mark.parametrize("name", ESTIMATORS)
def test_every_parameter_is_declared_and_its_bad_values_refused_by_name(name):
    """scikit-learn's own check: ``_parameter_constraints`` covers exactly the constructor's
    parameters, and fit refuses a bad value of each with an InvalidParameterError that names
    it (one generated per declared constraint, and one of a wrong type)."""
    check_param_validation(name, make(name))


# ---------------------------------------------------------------------------- persistence
@pytest.mark.parametrize("name", ESTIMATORS)
def test_save_load_round_trip(name, tmp_path):
    est = make(name)
    X, y = data(est)
    expected = fitted_output(est, X, y, X[:20])
    est.save(tmp_path / "model.zarr")
    loaded = ddr.load(tmp_path / "model.zarr")
    assert type(loaded) is type(est) and loaded.get_params() == est.get_params()
    got = getattr(loaded, output_method(loaded))(X[:20])
    np.testing.assert_array_equal(np.asarray(got), expected)


# ---------------------------------------------------------------------- passes and plans
@pytest.mark.parametrize("name", ESTIMATORS)
def test_a_fit_that_reads_once_is_a_fit_plan_and_equals_fit(name):
    """A fit that reads the data exactly once must say so with ``_fit_plan`` (so a pipeline
    computes it in the same pass as every other one-pass fit of the same input), and the plan
    must give the same model as ``fit``."""
    est = make(name)
    X, y = data(est)
    arr, counter = counting_dask_array(X, chunks=(25, -1))
    yd = None if y is None else da.from_array(y, chunks=(arr.chunks[0], *y.shape[1:]))
    clone(est).fit(arr, yd) if _takes_y(est) else clone(est).fit(arr)
    passes = counter.passes
    counter.reset()
    plan = est._fit_plan(arr, yd)
    assert counter.passes == 0, "_fit_plan read data"
    if passes == 1.0 and name not in LOADS_DATA:
        assert isinstance(plan, FitPlan), f"{name}.fit reads the data once but has no FitPlan"
    if plan is None:
        return
    plan.run()
    assert counter.passes == 1.0
    ref = fitted_output(make(name), X, y, X[:30])
    assert_close(np.asarray(getattr(est, output_method(est))(X[:30])), ref, rtol=1e-10)


def test_one_pass_fits_share_one_read():
    """Every export's one-pass fit of the same input, computed together: X is read once."""
    rng = np.random.default_rng(3)
    X = np.abs(rng.standard_normal((120, D))).round(0) + np.arange(120)[:, None] % 3
    y = np.arange(120) % 3
    arr, counter = counting_dask_array(X, chunks=(30, -1))
    yd = da.from_array(y, chunks=(arr.chunks[0],))
    plans = {}
    for name in ESTIMATORS:
        est = make(name)
        if get_tags(est).target_tags.required and not is_classifier(est):
            continue  # a second view is another input
        plan = est._fit_plan(arr, yd if is_classifier(est) else None)
        if plan is not None:
            plans[name] = plan
    assert {"GaussianDensity", "CategoricalDensity", "KernelDensity", "GaussianNB"} <= set(plans)
    values = dask.compute(*[p.statistics for p in plans.values()])
    assert counter.passes == 1.0
    for plan, value in zip(plans.values(), values, strict=True):
        plan.finish(value)


# ------------------------------------------------------------------------------ sparse rows
@pytest.mark.parametrize("name", ESTIMATORS)
def test_sparse_rows_give_the_dense_model_or_a_clear_refusal(name):
    """Estimators that read sparse rows (scikit-learn's ``input_tags.sparse``) give from a
    scipy.sparse matrix and from a dask array of CSR blocks the model they give from the
    dense rows; the others refuse both with a TypeError that says to densify."""
    est = make(name)
    X, y = data(est)
    Xs = scipy.sparse.csr_matrix(X)
    blocks = da.from_array(Xs, chunks=((7, 40, 13, 30), -1))
    yd = None if y is None else da.from_array(y, chunks=(blocks.chunks[0], *y.shape[1:]))
    if not get_tags(est).input_tags.sparse:
        with pytest.raises(TypeError, match="Sparse data was passed for X, but dense data"):
            fitted_output(make(name), Xs, y, X[:30])
        with pytest.raises(TypeError, match="takes dense rows; X is a dask array of csr_matrix"):
            fitted_output(make(name), blocks, yd, X[:30])
        return
    ref = fitted_output(make(name), X, y, X[:30])
    assert_close(fitted_output(make(name), Xs, y, Xs[:30]), ref, rtol=1e-10)
    assert_close(fitted_output(make(name), blocks, yd, blocks[:30]), ref, rtol=1e-10)


# -------------------------------------------------------------------------- invariances
CHUNKINGS = {"one": (N, -1), "uneven": ((7, 40, 13, 30), -1), "one-row-last": ((89, 1), -1)}


@pytest.mark.parametrize("name", ESTIMATORS)
def test_chunking_does_not_change_the_model(name):
    """One chunk, uneven chunks, a one-row last chunk: the same model to 1e-10."""
    X, y = data(make(name))
    ref = fitted_output(make(name), X, y, X[:30])
    for chunks in CHUNKINGS.values():
        Xd = da.from_array(X, chunks=chunks)
        yd = None if y is None else da.from_array(y, chunks=(Xd.chunks[0], *y.shape[1:]))
        assert_close(fitted_output(make(name), Xd, yd, X[:30]), ref, rtol=1e-10)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_translation_invariance_on_a_1e8_offset(name):
    est = make(name)
    method = est._translation_invariant_output()
    if method is None:
        pytest.skip(f"{name}'s model depends on the data's origin")
    X, y = data(est)
    ref = fitted_output(make(name), X, y, X[:30])
    shift = 1e8 * np.array([1.0, -1.0, 0.5])
    got = fitted_output(est, X + shift, y, X[:30] + shift)
    assert method == output_method(est)
    # inputs at 1e8 keep ~8 of their 16 digits: the outputs keep what the data hold
    assert_close(got, ref, rtol=1e-6)


@pytest.mark.parametrize(
    ("kind", "form"), [("int64", "numpy"), ("bool", "dask"), ("float32", "xarray"),
                       ("int64", "dask"), ("bool", "xarray"), ("float32", "numpy")],
)  # fmt: skip
@pytest.mark.parametrize("name", ESTIMATORS)
def test_integer_bool_and_float32_input(name, kind, form):
    est = make(name)
    X, y = data(est)
    if kind == "bool":
        X = X > np.median(X, axis=0)
    values = np.round(X * 4) if kind == "int64" else X
    Xk = values.astype(kind)
    Xf = Xk.astype(np.float64)
    if kind == "bool" and not is_classifier(est):
        Xk[:3], Xf[:3] = ~Xk[:3], ~Xk[:3]  # no feature constant in every form
    if form == "dask":
        Xk = da.from_array(Xk, chunks=(40, -1))
    elif form == "xarray":
        Xk = xr.DataArray(Xk, dims=("sample", "feature"))
    try:
        ref = fitted_output(make(name), Xf, y, Xf[:20])
    except ValueError as exc:  # e.g. singular covariance of bool data: the same refusal
        with pytest.raises(ValueError, match=str(exc).split(";")[0][:40]):
            fitted_output(est, Xk, y, Xk[:20])
        return
    got = fitted_output(est, Xk, y, Xk[:20])
    assert_close(got, ref, rtol=1e-4 if kind == "float32" else 1e-10)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_output_follows_the_input_form(name):
    est = make(name)
    X, y = data(est)
    est.fit(X, y) if _takes_y(est) else est.fit(X)
    methods = [
        m
        for m in ("transform", "predict", "predict_proba", "score_samples")
        if callable(getattr(est, m, None))
    ]
    Xd = da.from_array(X, chunks=(30, -1))
    Xa = xr.DataArray(X, dims=("row", "feature"), coords={"row": np.arange(N) * 10})
    for m in methods:
        ref = getattr(est, m)(X)
        ref = ref[0] if isinstance(ref, tuple) else ref
        assert isinstance(ref, np.ndarray), m
        lazy = getattr(est, m)(Xd)
        assert isinstance(lazy, da.Array), m
        out = getattr(est, m)(Xa)
        assert isinstance(out, xr.DataArray) and out.dims[0] == "row", m
        np.testing.assert_array_equal(out["row"].values, Xa["row"].values)
        assert_close(lazy.compute() if ref.dtype.kind == "f" else ref, ref, rtol=1e-12)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_xarray_labels_are_aligned_by_coordinate(name):
    est = make(name)
    X, y = data(est)
    if y is None:
        pytest.skip(f"{name} takes no labels")
    Xa = xr.DataArray(X, dims=("sample", "feature"), coords={"sample": np.arange(N) + 100})
    order = np.random.default_rng(1).permutation(N)
    ydims = ("sample",) if y.ndim == 1 else ("sample", "target")
    shuffled = xr.DataArray(y[order], dims=ydims, coords={"sample": Xa["sample"].values[order]})
    ref = fitted_output(make(name), X, y, X[:30])
    assert_close(fitted_output(est, Xa, shuffled, X[:30]), ref, rtol=1e-10)
    other = shuffled.assign_coords(sample=shuffled["sample"].values + 1)
    with pytest.raises(ValueError, match="coordinate does not match X's"):
        make(name).fit(Xa, other)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_rows_with_nan_or_inf_are_refused_by_every_method(name):
    """NaN or infinity in rows that are only predicted, transformed or scored is refused as
    a fit refuses it (never class 0 with NaN probabilities): each method names how many
    values and rows of the block, which rows, and the first. Estimators that take NaN as
    missing values refuse infinity."""
    est = make(name)
    X, y = data(est)
    est.fit(X, y) if _takes_y(est) else est.fit(X)
    nan_ok = get_tags(est).input_tags.allow_nan
    bad = X.copy()
    bad[41, 1] = np.inf
    if not nan_ok:
        bad[37, 0] = np.nan
    first = 41 if nan_ok else 37
    methods = [
        m
        for m in ("transform", "predict", "predict_proba", "predict_log_proba", "score_samples")
        if callable(getattr(est, m, None))
    ]
    assert methods
    for m in methods:
        with pytest.raises(ValueError, match="Input X contains") as err:
            getattr(est, m)(da.from_array(bad, chunks=(30, -1))).compute()
        text = str(err.value)
        assert f"of the 30 rows 30-59 (the first at row {first})" in text, (m, text)
        assert "needs" in text, (m, text)
