"""Naive Bayes against scikit-learn on real and synthetic data, passes, forms and bad input."""

from __future__ import annotations

import itertools
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn import naive_bayes as sknb
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.neighbors import KernelDensity as SkKDE

import ddr
from ddr.testing import counting_dask_array

REAL = {"iris": load_iris, "wine": load_wine, "digits": load_digits, "cancer": load_breast_cancer}


def assert_same_probabilities(est, ref, X, rtol=1e-8):
    """Probabilities equal to ``rtol`` relative (where not underflowed), log-probabilities to
    ``rtol`` relative or absolute near 0, identical predictions."""
    pa, pb = np.asarray(est.predict_proba(X)), ref.predict_proba(X)
    big = pb > 1e-300
    np.testing.assert_allclose(pa[big], pb[big], rtol=rtol, atol=0)
    assert np.all(pa[~big] < 1e-290)
    la, lb = np.asarray(est.predict_log_proba(X)), ref.predict_log_proba(X)
    fin = np.isfinite(lb)
    assert np.all(np.abs(la[fin] - lb[fin]) <= rtol * np.maximum(1.0, np.abs(lb[fin])))
    np.testing.assert_array_equal(np.asarray(est.predict(X)), ref.predict(X))


def blobs(rng, n=3000, d=6, k=4, offset=0.0):
    y = rng.integers(0, k, size=n)
    X = rng.standard_normal((k, d))[y] * 3 + rng.standard_normal((n, d)) * (1 + 0.3 * y[:, None])
    return X + offset, y


# ---------------------------------------------------------------------------- GaussianNB
@pytest.mark.parametrize("name", sorted(REAL))
def test_gaussian_nb_matches_sklearn_on_real_data(name):
    X, y = REAL[name](return_X_y=True)
    est, ref = ddr.GaussianNB().fit(X, y), sknb.GaussianNB().fit(X, y)
    np.testing.assert_allclose(est.theta_, ref.theta_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(est.var_, ref.var_, rtol=1e-10)
    np.testing.assert_allclose(est.class_prior_, ref.class_prior_, rtol=1e-15)
    assert est.epsilon_ == pytest.approx(ref.epsilon_, rel=1e-12)
    assert_same_probabilities(est, ref, X)


@pytest.mark.parametrize("chunks", [(1000, -1), (137, -1), ((1, 999, 1000, 500, 500), -1)])
def test_gaussian_nb_dask_any_chunking_same_answer(rng, chunks):
    X, y = blobs(rng, offset=1e4)
    ref = sknb.GaussianNB(var_smoothing=1e-6).fit(X, y)
    Xd = da.from_array(X, chunks=chunks)
    est = ddr.GaussianNB(var_smoothing=1e-6).fit(Xd, da.from_array(y, chunks=(Xd.chunks[0],)))
    np.testing.assert_allclose(est.var_, ref.var_, rtol=1e-9)
    proba = est.predict_proba(Xd)
    assert isinstance(proba, da.Array)
    np.testing.assert_allclose(proba.compute(), ref.predict_proba(X), rtol=1e-8, atol=1e-300)
    np.testing.assert_array_equal(est.predict(Xd).compute(), ref.predict(X))


def test_gaussian_nb_variances_do_not_depend_on_batching_unlike_sklearn(rng):
    """Acceptance: ddr's fitted variances are the same for any batching; scikit-learn's are
    not (it recomputes epsilon from the last batch only)."""
    X, y = blobs(rng, n=2000)
    X[1500:] *= 10  # the last rows spread wider: scikit-learn's epsilon follows the batch
    full = ddr.GaussianNB(var_smoothing=1e-3).fit(X, y)
    batchings = [[2000], [500, 500, 500, 500], [1500, 500], [100, 1700, 200]]
    sk_vars = []
    for sizes in batchings:
        est = ddr.GaussianNB(var_smoothing=1e-3)
        ref = sknb.GaussianNB(var_smoothing=1e-3)
        edges = np.cumsum([0, *sizes])
        for a, b in itertools.pairwise(edges):
            est.partial_fit(X[a:b], y[a:b], classes=np.arange(4))
            ref.partial_fit(X[a:b], y[a:b], classes=np.arange(4))
        np.testing.assert_allclose(est.var_, full.var_, rtol=1e-12)
        sk_vars.append(ref.var_)
    spread = max(np.max(np.abs(v - sk_vars[0]) / sk_vars[0]) for v in sk_vars)
    assert spread > 1e-3  # scikit-learn: the variances change with the batching
    # reversed batch order gives the same model too
    est = ddr.GaussianNB(var_smoothing=1e-3)
    for a in range(1500, -1, -500):
        est.partial_fit(X[a : a + 500], y[a : a + 500], classes=np.arange(4))
    np.testing.assert_allclose(est.var_, full.var_, rtol=1e-12)


def test_gaussian_nb_sample_weight_and_priors(rng):
    X, y = blobs(rng, n=600)
    w = rng.uniform(0.1, 3, size=600)
    est = ddr.GaussianNB(priors=[0.1, 0.2, 0.3, 0.4]).fit(X, y, sample_weight=w)
    ref = sknb.GaussianNB(priors=[0.1, 0.2, 0.3, 0.4]).fit(X, y, sample_weight=w)
    # ddr's epsilon uses the weighted variance (sklearn: unweighted); with the default
    # var_smoothing the difference is below 1e-9 of the variances
    np.testing.assert_allclose(est.var_, ref.var_, rtol=1e-9)
    assert_same_probabilities(est, ref, X, rtol=1e-7)
    # integer weights are repetitions
    wi = rng.integers(0, 3, size=600)
    a = ddr.GaussianNB().fit(X, y, sample_weight=wi)
    b = ddr.GaussianNB().fit(np.repeat(X, wi, axis=0), np.repeat(y, wi))
    np.testing.assert_allclose(a.var_, b.var_, rtol=1e-11)


@pytest.mark.parametrize(
    "labels",
    [
        np.array([3, -7, 12], dtype=np.int8),
        np.array([10, 2, 65000], dtype=np.uint16),
        np.array([5, 1, 3], dtype=np.int64),
        np.array(["setosa", "versicolor", "virginica"]),
        np.array(["b", "a", "c"], dtype=object),
    ],
)
def test_labels_of_any_integer_or_string_dtype(labels):
    X, y = load_iris(return_X_y=True)
    yl = labels[y]
    est, ref = ddr.GaussianNB().fit(X, yl), sknb.GaussianNB().fit(X, yl)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    lazy = est.predict(da.from_array(X, chunks=40)).compute()
    np.testing.assert_array_equal(lazy, ref.predict(X))


def test_xarray_in_xarray_out_with_class_dim():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    t = np.arange(150) * 10
    Xa = xr.DataArray(X.T, dims=("feature", "time"), coords={"time": t, "feature": list("abcd")})
    ya = xr.DataArray(names, dims="time")
    est = ddr.GaussianNB().fit(Xa, ya, sample_dim="time")
    proba = est.predict_proba(Xa, sample_dim="time")
    assert proba.dims == ("time", "class")
    np.testing.assert_array_equal(proba["class"].values, ["setosa", "versicolor", "virginica"])
    np.testing.assert_array_equal(proba["time"].values, t)
    pred = est.predict(Xa.chunk({"time": 50}), sample_dim="time")
    assert pred.dims == ("time",) and isinstance(pred.data, da.Array)
    ref = sknb.GaussianNB().fit(X, names)
    np.testing.assert_array_equal(pred.values, ref.predict(X))
    theta = est.as_xarray("theta_")
    assert theta.dims == ("class", "feature")
    np.testing.assert_array_equal(theta["feature"].values, list("abcd"))


def test_predict_log_proba_does_not_underflow(rng):
    X, y = blobs(rng, n=500)
    est = ddr.GaussianNB().fit(X, y)
    far = np.full((3, X.shape[1]), 1e3)
    lp = est.predict_log_proba(far)
    assert np.all(np.isfinite(lp.max(axis=1)))
    np.testing.assert_allclose(np.logaddexp.reduce(lp, axis=1), 0.0, atol=1e-12)
    # the naive exp-then-normalise underflows here: every joint likelihood is exp(-1e5)
    assert np.all(np.exp(est.predict_joint_log_proba(far)) == 0.0)


# --------------------------------------------------------------------------- passes
def _count(est, X, y, chunks=(250, -1)):
    arr, counter = counting_dask_array(X, chunks=chunks)
    yd = da.from_array(y, chunks=(chunks[0],))
    with dask.config.set(scheduler="threads"):
        est.fit(arr, yd)
        fit_passes = counter.passes
        counter.reset()
        pred = est.predict(arr)
        proba = est.predict_proba(arr)
        assert counter.passes == 0  # lazy: nothing read yet
        pred.compute()
        predict_passes = counter.passes
        counter.reset()
        dask.compute(pred, proba)  # together they still share one read of each block
        assert counter.passes == 1.0
    return fit_passes, predict_passes


@pytest.mark.parametrize(
    "est",
    [
        ddr.GaussianNB(),
        ddr.BernoulliNB(binarize=0.5),
        ddr.KernelNB(algorithm="binned", n_bins=64),
        ddr.KernelNB(algorithm="exact"),
    ],
    ids=["gaussian", "bernoulli", "kernel-binned", "kernel-exact"],
)
def test_fit_reads_once_predict_reads_once(rng, est):
    X, y = blobs(rng, n=1000)
    fit_passes, predict_passes = _count(est, X, y)
    assert fit_passes == 1.0
    assert predict_passes == 1.0


def test_categorical_fit_reads_once(rng):
    X = rng.integers(0, 5, size=(1000, 4))
    y = rng.integers(0, 3, size=1000)
    assert _count(ddr.CategoricalNB(), X, y) == (1.0, 1.0)


def test_gaussian_nb_on_distributed_cluster(client, rng):
    X, y = blobs(rng, n=2000)
    Xd = da.from_array(X, chunks=(400, -1))
    est = ddr.GaussianNB().fit(Xd, da.from_array(y, chunks=400))
    ref = sknb.GaussianNB().fit(X, y)
    np.testing.assert_allclose(est.predict_proba(Xd).compute(), ref.predict_proba(X), rtol=1e-8)
    assert est.score(Xd, y) == pytest.approx(ref.score(X, y))


# ------------------------------------------------------------------ declared classes
def test_declared_class_never_seen_follows_sklearn(rng):
    """A class declared in classes= with no sample: prior 0, probability exactly 0, never
    predicted (scikit-learn's GaussianNB partial_fit does the same)."""
    X, y = blobs(rng, n=600, k=3)
    est = ddr.GaussianNB().partial_fit(X, y, classes=[0, 1, 2, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # sklearn: log(0) prior
        ref = sknb.GaussianNB().partial_fit(X, y, classes=[0, 1, 2, 3])
        ref_proba = ref.predict_proba(X)
    proba = est.predict_proba(X)
    assert np.all(proba[:, 3] == 0.0) and np.all(ref_proba[:, 3] == 0.0)
    np.testing.assert_allclose(proba, ref_proba, rtol=1e-8)
    np.testing.assert_allclose(est.var_[3], ref.var_[3], rtol=1e-12)  # epsilon only
    # a given positive prior for it needs a likelihood that does not exist: clear error
    bad = ddr.GaussianNB(priors=[0.25] * 4).partial_fit(X, y, classes=[0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"declared in classes= but no sample of them"):
        bad.predict(X)
    # once samples arrive the model is defined
    bad.partial_fit(X[:5] + 1, np.full(5, 3))
    assert bad.predict(X).shape == (600,)


def test_declared_class_never_seen_smoothed_categorical_is_defined(rng):
    X = rng.integers(0, 4, size=(300, 3))
    y = rng.integers(0, 2, size=300)
    est = ddr.CategoricalNB(fit_prior=False).partial_fit(X, y, classes=[0, 1, 2])
    ref = sknb.CategoricalNB(fit_prior=False).partial_fit(X, y, classes=[0, 1, 2])
    assert_same_probabilities(est, ref, X)  # uniform posterior-mean likelihood, as sklearn
    no_smoothing = ddr.CategoricalNB(alpha=0, fit_prior=False).partial_fit(X, y, classes=[0, 1, 2])
    with pytest.raises(ValueError, match=r"class\(es\) \[2\] were declared"):
        no_smoothing.predict_proba(X)


def test_partial_fit_class_checks(rng):
    X, y = blobs(rng, n=200, k=3)
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        ddr.GaussianNB().partial_fit(X, y)
    with pytest.raises(ValueError, match=r"target label\(s\) \[2\] in y do not exist"):
        ddr.GaussianNB().partial_fit(X, y, classes=[0, 1])
    est = ddr.GaussianNB().partial_fit(X, y, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="is not the same as on last call"):
        est.partial_fit(X, y, classes=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="at least 2 classes"):
        ddr.GaussianNB().partial_fit(X, np.zeros(200, int), classes=[0])


# -------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("Est", [ddr.GaussianNB, ddr.CategoricalNB, ddr.BernoulliNB, ddr.KernelNB])
def test_only_one_class_is_refused(Est):
    X = np.abs(np.arange(40).reshape(20, 2)) % 3
    with pytest.raises(ValueError, match="at least 2 classes to fit; got 1 class"):
        Est().fit(X, np.ones(20))
    with pytest.raises(ValueError, match="got 1 class"):
        Est().fit(da.from_array(X, chunks=5), da.ones(20, chunks=5))


def test_nan_labels_are_refused(rng):
    X, _ = blobs(rng, n=100)
    y = rng.integers(0, 2, size=100).astype(float)
    y[7] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ddr.GaussianNB().fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        ddr.GaussianNB().fit(da.from_array(X, chunks=30), da.from_array(y, chunks=30))


def test_constant_features_have_a_variance_floor(rng):
    X, y = blobs(rng, n=300, k=3)
    X[:, 2] = 5.0  # constant overall
    X[y == 1, 4] = -1.0  # constant within one class
    est = ddr.GaussianNB().fit(X, y)
    ref = sknb.GaussianNB().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proba = est.predict_proba(X)
    assert np.all(np.isfinite(proba)) and np.all(est.var_ > 0)
    assert_same_probabilities(est, ref, X)
    # every feature constant: epsilon_ = var_smoothing (in the units of X), still finite
    Xc = np.ones((30, 3))
    yc = np.arange(30) % 2
    flat = ddr.GaussianNB().fit(Xc, yc)
    assert flat.epsilon_ == 1e-9
    assert np.all(np.isfinite(flat.predict_log_proba(Xc + 1e-3)))
    with pytest.raises(ValueError, match=r"zero variance .* var_smoothing=0"):
        ddr.GaussianNB(var_smoothing=0).fit(X, y)


def test_gaussian_nb_tiles_and_float32_blocks(rng, monkeypatch):
    """Predictions run over tiles of rows (the smallest, 256 rows, the last one short here)
    with a stiff feature (a class variance tiny beside the feature's spread, summed apart):
    scikit-learn's probabilities, and a float32 block gives what its float64 copy gives."""
    from ddr.generative import classifier

    X, y = blobs(rng, n=1000, k=3, offset=1e3)
    X[y == 1, 4] = X[y == 1, 4].mean() + 1e-5 * rng.standard_normal(np.sum(y == 1))
    whole = ddr.GaussianNB().fit(X, y).predict_log_proba(X)
    monkeypatch.setattr(classifier, "TILE_BYTES", 1)
    assert classifier.tile_rows(2 * X.shape[1]) == 256
    est, ref = ddr.GaussianNB().fit(X, y), sknb.GaussianNB().fit(X, y)
    assert est._jll()[1][3].tolist() == [4]  # the stiff feature
    assert_same_probabilities(est, ref, X)
    np.testing.assert_allclose(est.predict_log_proba(X), whole, rtol=1e-12, atol=1e-12)
    X32 = X.astype(np.float32)
    est32 = ddr.GaussianNB().fit(X32, y)
    np.testing.assert_allclose(
        est32.predict_proba(X32), est32.predict_proba(X32.astype(np.float64)), rtol=1e-12
    )
    np.testing.assert_array_equal(est32.predict(X32), est32.predict(X32.astype(np.float64)))


def test_bad_parameters_name_what_was_given(rng):
    X, y = blobs(rng, n=100, k=2)
    with pytest.raises(ValueError, match="The 'var_smoothing' parameter of"):
        ddr.GaussianNB(var_smoothing=-1).fit(X, y)
    with pytest.raises(ValueError, match="sum of the priors should be 1"):
        ddr.GaussianNB(priors=[0.5, 0.6]).fit(X, y)
    with pytest.raises(ValueError, match="one entry per class"):
        ddr.GaussianNB(priors=[1.0]).fit(X, y)
    with pytest.raises(ValueError, match="requires y to be passed"):
        ddr.GaussianNB().fit(X, None)
    with pytest.raises(TypeError, match="The 'alpha' parameter of"):
        ddr.CategoricalNB(alpha="x").fit(np.abs(X).astype(int), y)


# --------------------------------------------------------------------- CategoricalNB
def _digits_codes():
    X, y = load_digits(return_X_y=True)
    return X.astype(np.int64), y  # pixel intensities 0..16: real categorical data


@pytest.mark.parametrize(
    "params",
    [{}, {"alpha": 0.3}, {"min_categories": 20}, {"fit_prior": False}, {"class_prior": [0.1] * 10}],
)
def test_categorical_nb_matches_sklearn_on_digits(params):
    X, y = _digits_codes()
    est, ref = ddr.CategoricalNB(**params).fit(X, y), sknb.CategoricalNB(**params).fit(X, y)
    np.testing.assert_array_equal(est.n_categories_, ref.n_categories_)
    for a, b in zip(est.category_count_, ref.category_count_, strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    for a, b in zip(est.feature_log_prob_, ref.feature_log_prob_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(est.class_log_prior_, ref.class_log_prior_, rtol=1e-13)
    assert_same_probabilities(est, ref, X)
    lazy = est.predict_proba(da.from_array(X, chunks=(333, -1))).compute()
    np.testing.assert_allclose(lazy, ref.predict_proba(X), rtol=1e-10)


def test_categorical_unseen_categories_are_smoothed(rng):
    X = rng.integers(0, 3, size=(400, 2))
    y = rng.integers(0, 2, size=400)
    X[y == 0, 0] = np.where(X[y == 0, 0] == 2, 1, X[y == 0, 0])  # code 2 never seen in class 0
    est = ddr.CategoricalNB(min_categories=5).fit(X, y)
    ref = sknb.CategoricalNB(min_categories=5).fit(X, y)
    Q = np.array([[2, 0], [4, 1], [3, 3]])  # unseen in a class / never seen at all
    assert_same_probabilities(est, ref, Q)
    # beyond the table (scikit-learn raises IndexError): the smoothed zero-count probability
    far = np.array([[7, 0]])
    jll = est.predict_joint_log_proba(far)[0]
    expect = est.class_log_prior_ + np.log(1.0 / (est.class_count_ + 5.0))
    expect += np.array([est.feature_log_prob_[1][k, 0] for k in range(2)])
    np.testing.assert_allclose(jll, expect, rtol=1e-13)


def test_categorical_codes_must_be_non_negative_integers(rng):
    X = rng.integers(0, 3, size=(50, 2))
    y = np.arange(50) % 2
    est = ddr.CategoricalNB().fit(X, y)
    with pytest.raises(ValueError, match=r"Negative values .* category codes"):
        ddr.CategoricalNB().fit(X - 1, y)
    with pytest.raises(ValueError, match="must hold integer category codes"):
        ddr.CategoricalNB().fit(X + 0.5, y)
    with pytest.raises(ValueError, match="Negative values"):
        est.predict(X - 2)
    with pytest.raises(ValueError, match="integer category codes"):
        est.predict_proba(da.from_array(X + 0.25, chunks=10)).compute()


# ----------------------------------------------------------------------- BernoulliNB
@pytest.mark.parametrize(
    "params",
    [{}, {"binarize": 8.0}, {"alpha": 0.2, "binarize": 4.0}, {"fit_prior": False}],
)
def test_bernoulli_nb_matches_sklearn_on_digits(params):
    X, y = load_digits(return_X_y=True)
    est, ref = ddr.BernoulliNB(**params).fit(X, y), sknb.BernoulliNB(**params).fit(X, y)
    np.testing.assert_allclose(est.feature_count_, ref.feature_count_, rtol=1e-12)
    np.testing.assert_allclose(est.feature_log_prob_, ref.feature_log_prob_, rtol=1e-12)
    assert_same_probabilities(est, ref, X)
    Xd = da.from_array(X, chunks=(500, -1))
    lazy = ddr.BernoulliNB(**params).fit(Xd, y).predict_proba(Xd).compute()
    np.testing.assert_allclose(lazy, ref.predict_proba(X), rtol=1e-8, atol=1e-300)


def test_bernoulli_binarize_none_uses_values_as_given():
    X, y = load_breast_cancer(return_X_y=True)
    Xb = (X > np.median(X, axis=0)).astype(float)
    est = ddr.BernoulliNB(binarize=None, class_prior=[0.3, 0.7]).fit(Xb, y)
    ref = sknb.BernoulliNB(binarize=None, class_prior=[0.3, 0.7]).fit(Xb, y)
    assert_same_probabilities(est, ref, Xb)


# --------------------------------------------------------------------------- KernelNB
def _reference_kernel_nb(est, X, Xtr, ytr):
    """Joint log-likelihood from scikit-learn's KernelDensity per class and feature."""
    jll = np.zeros((X.shape[0], len(est.classes_)))
    for c, label in enumerate(est.classes_):
        Xc = Xtr[ytr == label]
        for j in range(X.shape[1]):
            kde = SkKDE(kernel=est.kernel, bandwidth=est.bandwidth_[c, j]).fit(Xc[:, j : j + 1])
            jll[:, c] += kde.score_samples(X[:, j : j + 1])
        jll[:, c] += np.log(est.class_prior_[c])
    return jll


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "exponential"])
def test_kernel_nb_exact_is_per_class_per_feature_kde(kernel):
    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    est = ddr.KernelNB(kernel=kernel, algorithm="exact", bandwidth=0.8).fit(X, y)
    ref = _reference_kernel_nb(est, X, X, y)
    got = est.predict_joint_log_proba(X)
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-8)
    assert np.all(np.isneginf(got[~fin]) | (ref[~fin] < -30))


def test_kernel_nb_bandwidth_rules():
    X, y = load_iris(return_X_y=True)
    est = ddr.KernelNB(bandwidth="silverman", var_smoothing=0).fit(X, y)
    for c in range(3):
        Xc = X[y == c]
        n = Xc.shape[0]
        expect = (3 * n / 4) ** (-0.2) * Xc.std(axis=0, ddof=1)
        np.testing.assert_allclose(est.bandwidth_[c], expect, rtol=1e-12)
    unscaled = ddr.KernelNB(bandwidth="scott", bandwidth_scaling="none", var_smoothing=0)
    np.testing.assert_allclose(unscaled.fit(X, y).bandwidth_, 50 ** (-0.2), rtol=1e-12)


def test_kernel_nb_binned_approximates_exact(rng):
    """The binned estimate against the exact one on 4000 rows: the documented error, within
    2 (lattice spacing / bandwidth)^2 relative on each density, shrinking with finer lattices."""
    X, y = blobs(rng, n=4000, d=3, k=3)
    exact = ddr.KernelNB(algorithm="exact").fit(X, y)
    Q, _ = blobs(np.random.default_rng(7), n=2000, d=3, k=3)
    je = exact.predict_joint_log_proba(Q)
    bulk = je > np.quantile(je, 0.05)
    errors = []
    for n_bins in (512, 2048):
        binned = ddr.KernelNB(algorithm="binned", n_bins=n_bins).fit(X, y)
        ratio = np.max(binned.histogram_.bin_width / binned.bandwidth_)
        jb = binned.predict_joint_log_proba(Q)
        # joint log-likelihood = sum of 3 per-feature log-densities: absolute error of the
        # log = relative error of the density
        err = np.max(np.abs(jb - je)[bulk])
        assert err < 3 * 2.0 * ratio**2  # 3 features, each within 2 (spacing / h)^2
        errors.append(err)
    assert np.max(np.abs(jb - je) / np.abs(je)) < 1e-2  # tails: relative, in log space
    assert errors[1] < errors[0] / 4  # 4x finer lattice: error down by about 16
    np.testing.assert_allclose(binned.predict_proba(Q), exact.predict_proba(Q), atol=1e-2)
    assert np.mean(binned.predict(Q) == exact.predict(Q)) > 0.99


def test_kernel_nb_partial_fit_equals_fit_and_constant_feature(rng):
    X, y = blobs(rng, n=900, k=3)
    X[:, 1] = 3.0
    full = ddr.KernelNB(algorithm="binned", n_bins=256).fit(X, y)
    inc = ddr.KernelNB(algorithm="binned", n_bins=256)
    for a in range(0, 900, 300):
        inc.partial_fit(X[a : a + 300], y[a : a + 300], classes=[0, 1, 2])
    np.testing.assert_allclose(inc.bandwidth_, full.bandwidth_, rtol=1e-12)
    np.testing.assert_array_equal(inc.histogram_.counts, full.histogram_.counts)
    # bandwidths agree to round-off; far-tail log-likelihoods (~1e5) amplify it slightly
    np.testing.assert_allclose(inc.predict_proba(X), full.predict_proba(X), rtol=1e-8, atol=1e-12)
    assert np.all(full.bandwidth_[:, 1] > 0) and np.all(np.isfinite(full.predict_log_proba(X)))


def test_kernel_nb_bad_bandwidth():
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="The 'bandwidth' parameter of"):
        ddr.KernelNB(bandwidth=-0.5).fit(X, y)
    with pytest.raises(ValueError, match="The 'bandwidth' parameter of"):
        ddr.KernelNB(bandwidth=0.0).fit(X, y)
    with pytest.raises(TypeError, match="The 'bandwidth' parameter of"):
        ddr.KernelNB(bandwidth=[1.0]).fit(X, y)
    with pytest.raises(ValueError, match="The 'kernel' parameter of"):
        ddr.KernelNB(kernel="box").fit(X, y)


def test_save_and_load_round_trip(tmp_path):
    X, y = load_iris(return_X_y=True)
    for est in (ddr.GaussianNB(), ddr.KernelNB(algorithm="binned", n_bins=64)):
        est.fit(X, y)
        est.save(tmp_path / type(est).__name__)
        back = ddr.load(tmp_path / type(est).__name__)
        np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))


# check_estimator of every estimator with its defaults: tests/test_common.py
