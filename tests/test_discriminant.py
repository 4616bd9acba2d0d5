"""QDA and LDA against scikit-learn (every solver, real data), the Ledoit-Wolf statistic,
passes, forms, partial_fit and bad input."""

from __future__ import annotations

import itertools
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import discriminant_analysis as skda
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine

import ddr
from ddr.discriminant_analysis._ledoit_wolf import ClassFourthMoments, ledoit_wolf_covariance
from ddr.stats import compute
from ddr.testing import counting_dask_array

REAL = {"iris": load_iris, "wine": load_wine, "digits": load_digits, "cancer": load_breast_cancer}


def assert_same_probabilities(est, ref, X, rtol=1e-8):
    pa, pb = np.asarray(est.predict_proba(X)), ref.predict_proba(X)
    big = pb > 1e-300
    np.testing.assert_allclose(pa[big], pb[big], rtol=rtol, atol=0)
    assert np.all(pa[~big] < 1e-290)
    la, lb = np.asarray(est.predict_log_proba(X)), ref.predict_log_proba(X)
    ok = lb > np.log(1e-300)  # LDA's own log-proba is log(proba): floored where it underflows
    assert np.all(np.abs(la[ok] - lb[ok]) <= rtol * np.maximum(1.0, np.abs(lb[ok])))
    np.testing.assert_array_equal(np.asarray(est.predict(X)), ref.predict(X))


def fit_both(Est, Ref, params, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Est(**params).fit(X, y), Ref(**params).fit(X, y)


def blobs(rng, n=2000, d=5, k=3, offset=0.0):
    y = rng.integers(0, k, size=n)
    A = rng.standard_normal((k, d, d)) * 0.5 + np.eye(d)
    X = rng.standard_normal((k, d))[y] * 2 + np.einsum(
        "nd,nde->ne", rng.standard_normal((n, d)), A[y]
    )
    return X + offset, y


# ---------------------------------------------------------------------------------- QDA
QDA_CASES = {
    "iris": [{}, {"reg_param": 0.1}, {"solver": "eigen", "shrinkage": 0.2},
             {"solver": "eigen", "shrinkage": "auto"}],
    "wine": [{}, {"reg_param": 0.3, "store_covariance": True},
             {"solver": "eigen", "shrinkage": "auto"}],
    "digits": [{"reg_param": 0.1}, {"solver": "eigen", "shrinkage": "auto"}],
    "cancer": [{"reg_param": 0.05}, {"solver": "eigen", "shrinkage": 0.2}],
}  # fmt: skip


@pytest.mark.parametrize(
    "name, params", [(n, p) for n, ps in QDA_CASES.items() for p in ps], ids=str
)
def test_qda_matches_sklearn_on_real_data(name, params):
    X, y = REAL[name](return_X_y=True)
    est, ref = fit_both(ddr.QuadraticDiscriminantAnalysis, skda.QuadraticDiscriminantAnalysis,
                        params, X, y)  # fmt: skip
    np.testing.assert_allclose(est.means_, ref.means_, rtol=1e-12, atol=1e-12)
    for a, b in zip(est.scalings_, ref.scalings_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10 * b.max())
    if params.get("store_covariance"):
        for a, b in zip(est.covariance_, ref.covariance_, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12 * np.abs(b).max())
    assert_same_probabilities(est, ref, X)


@pytest.mark.parametrize("chunks", [(500, -1), (71, -1), ((3, 997, 600, 400), -1)])
def test_qda_dask_any_chunking(rng, chunks):
    X, y = blobs(rng, offset=1e3)
    ref = skda.QuadraticDiscriminantAnalysis(reg_param=0.01).fit(X, y)
    Xd = da.from_array(X, chunks=chunks)
    est = ddr.QuadraticDiscriminantAnalysis(reg_param=0.01).fit(
        Xd, da.from_array(y, chunks=(Xd.chunks[0],))
    )
    proba = est.predict_proba(Xd)
    assert isinstance(proba, da.Array)
    np.testing.assert_allclose(proba.compute(), ref.predict_proba(X), rtol=1e-8, atol=1e-300)
    dec = est.decision_function(X)
    np.testing.assert_allclose(dec, ref.decision_function(X), rtol=1e-8, atol=1e-8)


def test_qda_singular_covariance_suggests_reg_param(rng):
    X, y = blobs(rng, n=300)
    with pytest.raises(ValueError, match="only 1 sample in class 9"):
        ddr.QuadraticDiscriminantAnalysis().fit(X[:41], np.r_[y[:40], 9])
    X[:, 3] = X[:, 1] * 2 - X[:, 0]  # collinear
    with pytest.raises(np.linalg.LinAlgError, match=r"not full rank.*reg_param"):
        ddr.QuadraticDiscriminantAnalysis().fit(X, y)
    assert issubclass(np.linalg.LinAlgError, ValueError)
    est = ddr.QuadraticDiscriminantAnalysis(reg_param=0.01).fit(X, y)
    ref = skda.QuadraticDiscriminantAnalysis(reg_param=0.01).fit(X, y)
    assert_same_probabilities(est, ref, X)
    X[:, 2] = 7.0  # a constant feature: singular too
    with pytest.raises(ValueError, match="reg_param"):
        ddr.QuadraticDiscriminantAnalysis().fit(X, y)
    with pytest.raises(ValueError, match="shrinkage"):
        ddr.QuadraticDiscriminantAnalysis(solver="eigen").fit(X, y)


def test_qda_few_samples_per_class_with_reg_param(rng):
    """More features than samples in a class: scikit-learn's SVD solver refuses; the moments
    solver gives the regularised model (eigenvalues 0 become reg_param)."""
    X, y = blobs(rng, n=60, d=8, k=3)
    X, y = X[:20], y[:20]
    est = ddr.QuadraticDiscriminantAnalysis(reg_param=0.5).fit(X, y)
    for k, c in enumerate(est.classes_):
        Xc = X[y == c] - X[y == c].mean(0)
        cov = (1 - 0.5) * (Xc.T @ Xc / Xc.shape[0]) + 0.5 * np.eye(8)
        np.testing.assert_allclose(np.sort(est.scalings_[k]), np.linalg.eigvalsh(cov), rtol=1e-10)


def test_qda_far_class_and_tiles_match_sklearn(rng, monkeypatch):
    """The classes near the training mean share one GEMM through it; a class whose mean lies
    millions of its standard deviations away is centred on its own mean (through the
    training mean its own rows lose 5 digits: 5e-10 off here). Both over tiles of 256
    rows, on a 1e6 offset, float32 blocks as their float64 copies: scikit-learn's numbers."""
    from ddr.generative import classifier

    monkeypatch.setattr(classifier, "TILE_BYTES", 1)
    y = rng.integers(0, 2, size=1000)
    X = rng.standard_normal((1000, 4)) + 3 * y[:, None]
    y[:12] = 2  # a rare, tight class far away: the training mean stays near the other two
    X[:12] = 1e3 + 1e-3 * rng.standard_normal((12, 4))
    X += 1e6
    est, ref = fit_both(ddr.QuadraticDiscriminantAnalysis,
                        skda.QuadraticDiscriminantAnalysis, {"tol": 1e-12}, X, y)  # fmt: skip
    params = est._jll()[1]
    W, near, far, far_W = params[1], params[3], params[5], params[7]
    assert near.tolist() == [0, 1] and far.tolist() == [2]
    assert W.shape == (4, 8) and far_W.shape == (1, 4, 4)
    assert_same_probabilities(est, ref, X)
    dec, ref_dec = est.decision_function(X), ref.decision_function(X)
    np.testing.assert_allclose(dec, ref_dec, rtol=1e-8)
    np.testing.assert_allclose(dec[:12, 2], ref_dec[:12, 2], rtol=0, atol=1e-12)
    X32 = X.astype(np.float32)
    np.testing.assert_allclose(
        est.predict_log_proba(X32), est.predict_log_proba(X32.astype(np.float64)), rtol=1e-12
    )


def test_qda_solves_with_cholesky_and_decomposes_when_asked(rng, monkeypatch):
    """The fit and the predictions use each class covariance's Cholesky factor; the
    eigendecompositions (scalings_, rotations_) are made when first read, once, and a new
    fit drops them. Where a factorisation fails the eigendecomposition whitens instead,
    with the same probabilities; a model saved with rotations_ and scalings_ (before the
    Cholesky solve) loads and predicts the same."""
    from scipy import linalg

    X, y = blobs(rng, offset=1e3)
    ref = skda.QuadraticDiscriminantAnalysis(reg_param=0.01).fit(X, y)
    est = ddr.QuadraticDiscriminantAnalysis(reg_param=0.01)
    assert not hasattr(est, "scalings_") and not hasattr(est, "rotations_")
    with pytest.raises(AttributeError, match="QuadraticDiscriminantAnalysis is not fitted"):
        _ = est.rotations_
    est.fit(X, y)
    assert "_eigen" not in vars(est)
    assert_same_probabilities(est, ref, X)
    scalings = est.scalings_
    assert est.scalings_ is scalings and "_eigen" in vars(est)
    for k, c in enumerate(est.classes_):
        Xc = X[y == c] - X[y == c].mean(0)
        cov = 0.99 * (Xc.T @ Xc / Xc.shape[0]) + 0.01 * np.eye(5)
        np.testing.assert_allclose(scalings[k], np.linalg.eigvalsh(cov)[::-1], rtol=1e-10)
        R, s = est.rotations_[k], scalings[k]
        np.testing.assert_allclose((R * s) @ R.T, cov, rtol=0, atol=1e-11 * s[0])
    est.fit(X[:1500], y[:1500])
    assert "_eigen" not in vars(est)

    old = {k: v for k, v in vars(est).items() if k not in est.get_params()}
    old["rotations_"], old["scalings_"] = est.rotations_, est.scalings_
    del old["_whiteners"], old["_log_dets"]
    back = ddr.QuadraticDiscriminantAnalysis(reg_param=0.01)
    back._set_state(old)
    np.testing.assert_allclose(back.predict_proba(X), est.predict_proba(X), rtol=1e-12)

    def failing(a, lower=0, clean=0, overwrite_a=0):
        return a, 1

    monkeypatch.setattr(linalg.lapack, "dpotrf", failing)
    whitened = ddr.QuadraticDiscriminantAnalysis(reg_param=0.01).fit(X, y)
    assert_same_probabilities(whitened, ref, X)
    assert "_eigen" not in vars(whitened)
    with pytest.raises(np.linalg.LinAlgError, match="not full rank"):
        ddr.QuadraticDiscriminantAnalysis().fit(np.c_[X, X[:, 0]], y)


# ---------------------------------------------------------------------------------- LDA
LDA_SOLVERS = [
    {},
    {"solver": "lsqr"},
    {"solver": "eigen"},
    {"solver": "lsqr", "shrinkage": 0.3},
    {"solver": "eigen", "shrinkage": 0.1},
    {"solver": "lsqr", "shrinkage": "auto"},
    {"solver": "eigen", "shrinkage": "auto"},
    {"solver": "svd", "priors": [0.2, 0.5, 0.3], "n_components": 1, "store_covariance": True},
]


@pytest.mark.parametrize("name", ["iris", "wine"])
@pytest.mark.parametrize("params", LDA_SOLVERS, ids=str)
def test_lda_matches_sklearn(name, params):
    X, y = REAL[name](return_X_y=True)
    est, ref = fit_both(ddr.LinearDiscriminantAnalysis, skda.LinearDiscriminantAnalysis,
                        params, X, y)  # fmt: skip
    np.testing.assert_allclose(
        est.coef_, ref.coef_, rtol=1e-8, atol=1e-10 * np.abs(ref.coef_).max()
    )
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-8)
    if hasattr(ref, "covariance_"):
        np.testing.assert_allclose(est.covariance_, ref.covariance_, rtol=1e-10, atol=1e-14)
    assert_same_probabilities(est, ref, X)
    if est.solver != "lsqr":
        np.testing.assert_allclose(
            est.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-9, atol=1e-14
        )
        assert_transform_equal_up_to_sign(est.transform(X), ref.transform(X))


def assert_transform_equal_up_to_sign(a, b, rtol=1e-8):
    assert a.shape == b.shape
    signs = np.sign(np.sum(a * b, axis=0))
    np.testing.assert_allclose(a * signs, b, rtol=rtol, atol=rtol * np.abs(b).max())


@pytest.mark.parametrize(
    "name, params",
    [("digits", {}), ("digits", {"solver": "lsqr", "shrinkage": "auto"}),
     ("digits", {"solver": "eigen", "shrinkage": "auto"}), ("cancer", {}),
     ("cancer", {"solver": "lsqr"}), ("cancer", {"solver": "eigen"})],
    ids=str,
)  # fmt: skip
def test_lda_matches_sklearn_on_larger_real_data(name, params):
    """digits (64 features, 10 classes, constant pixels) and breast cancer (2 classes: coef_
    has one row; features spanning 6 orders of magnitude)."""
    X, y = REAL[name](return_X_y=True)
    est, ref = fit_both(ddr.LinearDiscriminantAnalysis, skda.LinearDiscriminantAnalysis,
                        params, X, y)  # fmt: skip
    assert est.coef_.shape == ref.coef_.shape
    assert_same_probabilities(est, ref, X)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X),
                               rtol=1e-7, atol=1e-7)  # fmt: skip
    if est.solver != "lsqr":
        assert_transform_equal_up_to_sign(est.transform(X), ref.transform(X), rtol=1e-7)


@pytest.mark.parametrize("solver", ["svd", "lsqr", "eigen"])
def test_lda_dask_any_chunking_and_lazy_transform(rng, solver):
    X, y = blobs(rng, k=4, offset=500.0)
    ref = skda.LinearDiscriminantAnalysis(solver=solver).fit(X, y)
    for chunks in [(1000, -1), (123, -1), ((1, 1999), -1)]:
        Xd = da.from_array(X, chunks=chunks)
        est = ddr.LinearDiscriminantAnalysis(solver=solver).fit(
            Xd, da.from_array(y, chunks=(Xd.chunks[0],))
        )
        np.testing.assert_allclose(est.predict_proba(Xd).compute(), ref.predict_proba(X), rtol=1e-8)
        if solver != "lsqr":
            T = est.transform(Xd)
            assert isinstance(T, da.Array)
            assert_transform_equal_up_to_sign(T.compute(), ref.transform(X))


def test_lda_xarray_transform_has_component_dim():
    X, y = load_iris(return_X_y=True)
    Xa = xr.DataArray(X, dims=("flower", "feature"), coords={"flower": np.arange(150) + 1000})
    est = ddr.LinearDiscriminantAnalysis().fit(Xa, y)
    T = est.transform(Xa)
    assert T.dims == ("flower", "component") and T.shape == (150, 2)
    np.testing.assert_array_equal(T["flower"].values, np.arange(150) + 1000)
    P = est.predict_proba(Xa.chunk({"flower": 50}))
    assert P.dims == ("flower", "class") and isinstance(P.data, da.Array)
    np.testing.assert_array_equal(P["class"].values, [0, 1, 2])
    assert list(est.get_feature_names_out()) == [
        "lineardiscriminantanalysis0",
        "lineardiscriminantanalysis1",
    ]


def test_lda_singular_eigen_and_bad_n_components():
    X, y = load_digits(return_X_y=True)
    with pytest.raises(ValueError, match="shrinkage"):
        ddr.LinearDiscriminantAnalysis(solver="eigen").fit(X, y)
    with pytest.raises(ValueError, match="n_components cannot be larger"):
        ddr.LinearDiscriminantAnalysis(n_components=10).fit(X, y)
    with pytest.raises(ValueError, match="The 'shrinkage' parameter of"):
        ddr.LinearDiscriminantAnalysis(shrinkage=0.1).fit(X, y)
    with pytest.raises(ValueError, match="The 'shrinkage' parameter of"):
        ddr.LinearDiscriminantAnalysis(solver="lsqr", shrinkage=2.0).fit(X, y)
    with pytest.raises(ValueError, match="the 'lsqr' solver does not compute; use solver='svd'"):
        ddr.LinearDiscriminantAnalysis(solver="lsqr").fit(X, y).transform(X)


def test_lda_priors_renormalised_with_warning():
    X, y = load_iris(return_X_y=True)
    with pytest.warns(UserWarning, match="Renormalizing"):
        est = ddr.LinearDiscriminantAnalysis(priors=[1, 1, 2]).fit(X, y)
    np.testing.assert_allclose(est.priors_, [0.25, 0.25, 0.5])


# -------------------------------------------------------------- one pass, partial_fit
@pytest.mark.parametrize(
    "est",
    [
        ddr.QuadraticDiscriminantAnalysis(),
        ddr.LinearDiscriminantAnalysis(),
        ddr.LinearDiscriminantAnalysis(solver="eigen", shrinkage="auto"),
    ],
    ids=["qda", "lda-svd", "lda-eigen-auto"],
)
def test_fit_reads_once_predict_and_transform_once(rng, est):
    X, y = blobs(rng, n=1200)
    arr, counter = counting_dask_array(X, chunks=(300, -1))
    with dask.config.set(scheduler="threads"):
        est.fit(arr, da.from_array(y, chunks=300))
        assert counter.passes == 1.0
        counter.reset()
        pred = est.predict(arr)
        assert counter.passes == 0
        pred.compute()
        assert counter.passes == 1.0
        if hasattr(est, "transform"):
            counter.reset()
            est.transform(arr).compute()
            assert counter.passes == 1.0


@pytest.mark.parametrize(
    "Est, params",
    [(ddr.QuadraticDiscriminantAnalysis, {}), (ddr.LinearDiscriminantAnalysis, {}),
     (ddr.LinearDiscriminantAnalysis, {"solver": "lsqr", "shrinkage": "auto"})],
)  # fmt: skip
def test_partial_fit_equals_fit(rng, Est, params):
    X, y = blobs(rng, n=900, offset=50.0)
    full = Est(**params).fit(X, y)
    inc = Est(**params)
    for a in (0, 100, 550):
        b = {0: 100, 100: 550, 550: 900}[a]
        inc.partial_fit(X[a:b], y[a:b], classes=[0, 1, 2])
    np.testing.assert_allclose(inc.predict_proba(X), full.predict_proba(X), rtol=1e-9)


def test_declared_class_never_seen(rng):
    X, y = blobs(rng, n=600)
    for Est in (ddr.QuadraticDiscriminantAnalysis, ddr.LinearDiscriminantAnalysis):
        est = Est().partial_fit(X, y, classes=[0, 1, 2, 7])
        proba = est.predict_proba(X)
        assert np.all(proba[:, 3] == 0.0)
        np.testing.assert_allclose(proba[:, :3], Est().fit(X, y).predict_proba(X), rtol=1e-9)
        with pytest.raises(ValueError, match=r"class\(es\) \[7\] were declared in classes="):
            Est(priors=[0.25] * 4).partial_fit(X, y, classes=[0, 1, 2, 7]).predict(X)


@pytest.mark.parametrize("dtype", [np.int16, np.uint8, str, object])
def test_string_and_integer_labels(dtype):
    X, y = load_wine(return_X_y=True)
    names = np.array(["barolo", "grignolino", "barbera"])
    yl = names[y].astype(dtype) if dtype in (str, object) else (y * 7 + 3).astype(dtype)
    for Est, Ref in [
        (ddr.QuadraticDiscriminantAnalysis, skda.QuadraticDiscriminantAnalysis),
        (ddr.LinearDiscriminantAnalysis, skda.LinearDiscriminantAnalysis),
    ]:
        est, ref = Est().fit(X, yl), Ref().fit(X, yl)
        np.testing.assert_array_equal(est.classes_, ref.classes_)
        np.testing.assert_array_equal(est.predict(X), ref.predict(X))
        lazy = est.predict(da.from_array(X, chunks=(50, -1))).compute()
        np.testing.assert_array_equal(lazy, ref.predict(X))


def test_one_class_and_nan_labels(rng):
    X, y = blobs(rng, n=100)
    for Est in (ddr.QuadraticDiscriminantAnalysis, ddr.LinearDiscriminantAnalysis):
        with pytest.raises(ValueError, match="got 1 class"):
            Est().fit(X, np.zeros(100))
        yn = y.astype(float)
        yn[3] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            Est().fit(X, yn)


# ------------------------------------------------------------------- Ledoit-Wolf stats
@settings(max_examples=20, deadline=None)
@given(cuts=st.lists(st.integers(1, 399), max_size=6, unique=True))
def test_fourth_moments_do_not_depend_on_chunking(cuts):
    rng = np.random.default_rng(3)
    X = rng.exponential(size=(400, 4)) * [1, 10, 0.1, 3] + [1e3, 0, -5, 2]
    y = rng.integers(0, 2, size=400)
    edges = [0, *sorted(cuts), 400]
    parts = [ClassFourthMoments.from_block(X[a:b], y[a:b]) for a, b in itertools.pairwise(edges)]
    merged = parts[0]
    for p in parts[1:]:
        merged = merged.merge(p)
    for k in range(2):
        C = X[y == k] - X[y == k].mean(0)
        np.testing.assert_allclose(merged.m4[k], (C**2).T @ C**2, rtol=1e-9)
        np.testing.assert_allclose(
            merged.m3[k], (C**2).T @ C, rtol=1e-7, atol=1e-9 * np.abs((C**2).T @ C).max()
        )
        np.testing.assert_allclose(merged.m2[k], C.T @ C, rtol=1e-10)


def test_ledoit_wolf_from_moments_matches_sklearn(rng):
    from sklearn.discriminant_analysis import _cov

    X = rng.standard_normal((500, 6)) @ rng.standard_normal((6, 6)) * [1, 100, 1, 1, 0.01, 1]
    s = compute(ClassFourthMoments, da.from_array(X, chunks=(77, -1)), np.zeros(500))
    cov, shrink = ledoit_wolf_covariance(s.counts[0], s.means[0], s.m2[0], s.m4[0])
    np.testing.assert_allclose(cov, _cov(X, "auto"), rtol=1e-10)
    assert 0 < shrink < 1


# check_estimator of every estimator with its defaults: tests/test_common.py


@pytest.mark.parametrize("solver", ["svd", "lsqr", "eigen"])
def test_lda_is_translation_invariant_on_a_1e8_offset(rng, solver):
    """Issue 15: lsqr and eigen formed the intercept from uncentred means, and on X + 1e8
    predicted at 0.51-0.60 where every solver predicts at 0.79 without the offset."""
    X, y = blobs(rng, n=2000)
    X += rng.standard_normal(X.shape) * 2.0  # overlapping classes: accuracy well below 1
    split = 1500
    ref = ddr.LinearDiscriminantAnalysis(solver=solver).fit(X[:split], y[:split])
    shifted = ddr.LinearDiscriminantAnalysis(solver=solver).fit(X[:split] + 1e8, y[:split])
    base = ref.score(X[split:], y[split:])
    assert shifted.score(X[split:] + 1e8, y[split:]) == pytest.approx(base, abs=1e-3)
    np.testing.assert_allclose(
        shifted.predict_proba(X[split:] + 1e8), ref.predict_proba(X[split:]), atol=1e-6
    )
