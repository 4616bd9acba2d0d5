"""GaussianDensity and CategoricalDensity against closed forms, scipy and scikit-learn."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from scipy.stats import multivariate_normal
from sklearn.datasets import load_digits, load_wine
from sklearn.mixture import GaussianMixture
from sklearn.utils.estimator_checks import check_estimator

import ddr
from ddr.testing import counting_dask_array


# ----------------------------------------------------------------------- GaussianDensity
def test_gaussian_matches_scipy_and_gaussian_mixture_on_wine():
    X, _ = load_wine(return_X_y=True)
    est = ddr.GaussianDensity().fit(X)
    np.testing.assert_allclose(est.mean_, X.mean(0), rtol=1e-13)
    np.testing.assert_allclose(est.covariance_, np.cov(X.T, ddof=0), rtol=1e-11)
    ref = multivariate_normal(X.mean(0), np.cov(X.T, ddof=0))
    np.testing.assert_allclose(est.score_samples(X), ref.logpdf(X), rtol=1e-9)
    gm = GaussianMixture(1, covariance_type="full", reg_covar=0.0).fit(X)
    assert est.score(X) == pytest.approx(gm.score(X), rel=1e-9)
    assert est.bic(X) == pytest.approx(gm.bic(X), rel=1e-9)
    assert est.aic(X) == pytest.approx(gm.aic(X), rel=1e-9)


def test_gaussian_ddof_reg_covar_and_weights(rng):
    X = rng.standard_normal((400, 3)) @ rng.standard_normal((3, 3)) + 1e6
    np.testing.assert_allclose(
        ddr.GaussianDensity(ddof=1).fit(X).covariance_, np.cov(X.T), rtol=1e-9
    )
    reg = ddr.GaussianDensity(reg_covar=0.5).fit(X)
    np.testing.assert_allclose(reg.covariance_, np.cov(X.T, ddof=0) + 0.5 * np.eye(3), rtol=1e-9)
    w = rng.integers(0, 4, size=400)
    a = ddr.GaussianDensity().fit(X, sample_weight=w)
    b = ddr.GaussianDensity().fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(a.covariance_, b.covariance_, rtol=1e-9)
    assert a.n_samples_seen_ == w.sum()


def test_gaussian_dask_passes_and_xarray(rng):
    X = rng.standard_normal((1000, 4)) + 50
    arr, counter = counting_dask_array(X, chunks=(130, -1))
    with dask.config.set(scheduler="threads"):
        est = ddr.GaussianDensity().fit(arr)
        assert counter.passes == 1.0
        counter.reset()
        out = est.score_samples(arr)
        assert isinstance(out, da.Array) and counter.passes == 0
        np.testing.assert_allclose(
            out.compute(), ddr.GaussianDensity().fit(X).score_samples(X), rtol=1e-12
        )
        assert counter.passes == 1.0
        counter.reset()
        est.bic(arr)
        assert counter.passes == 1.0
    Xa = xr.DataArray(X, dims=("obs", "var"), coords={"var": list("abcd")})
    est = ddr.GaussianDensity().fit(Xa)
    s = est.score_samples(Xa)
    assert s.dims == ("obs",)
    assert est.as_xarray("mean_").dims == ("var",)


def test_gaussian_sample_and_bic_selects_the_true_model(rng):
    est = ddr.GaussianDensity().fit(rng.standard_normal((2000, 2)) @ [[2, 0], [1, 1]] + [1, -1])
    S = est.sample(200_000, random_state=0)
    np.testing.assert_allclose(S.mean(0), est.mean_, atol=0.02)
    np.testing.assert_allclose(np.cov(S.T), est.covariance_, rtol=0.02)
    # BIC on data from the fitted model beats BIC of a model of shifted data
    X = est.sample(5000, random_state=1)
    other = ddr.GaussianDensity().fit(X + 1.0)
    assert est.bic(X) < other.bic(X)


def test_gaussian_singular_covariance_suggests_reg_covar(rng):
    X = rng.standard_normal((100, 3))
    X[:, 2] = X[:, 0] - X[:, 1]
    with pytest.raises(ValueError, match=r"singular .* reg_covar"):
        ddr.GaussianDensity().fit(X)
    assert np.all(np.isfinite(ddr.GaussianDensity(reg_covar=1e-6).fit(X).score_samples(X)))
    with pytest.raises(ValueError, match="The 'reg_covar' parameter of"):
        ddr.GaussianDensity(reg_covar=-1).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        ddr.GaussianDensity().fit(np.where(X > 2, np.nan, X))


# -------------------------------------------------------------------- CategoricalDensity
def test_categorical_density_is_the_multinomial_mle_on_digits():
    X, _ = load_digits(return_X_y=True)
    X = X.astype(int)
    est = ddr.CategoricalDensity().fit(X)
    for j in (0, 10, 36):
        counts = np.bincount(X[:, j], minlength=est.n_categories_[j])
        freq = counts / X.shape[0]
        np.testing.assert_array_equal(est.category_count_[j], counts)
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(est.feature_log_prob_[j], np.log(freq), rtol=1e-14)
    direct = sum(est.feature_log_prob_[j][X[:, j]] for j in range(X.shape[1]))
    np.testing.assert_allclose(est.score_samples(X), direct, rtol=1e-13)
    lazy = est.score_samples(da.from_array(X, chunks=(400, -1)))
    np.testing.assert_allclose(lazy.compute(), direct, rtol=1e-13)


def test_categorical_density_smoothing_and_unseen(rng):
    X = rng.integers(0, 3, size=(200, 2))
    est = ddr.CategoricalDensity(alpha=1.0, min_categories=[4, 3]).fit(X)
    n = 200
    counts = np.bincount(X[:, 0], minlength=4)
    np.testing.assert_allclose(np.exp(est.feature_log_prob_[0]), (counts + 1) / (n + 4), rtol=1e-14)
    # category 3 of feature 0 never seen; code 9 beyond the table: both smoothed zero counts
    s = est.score_samples(np.array([[3, 0], [9, 0]]))
    assert s[0] == pytest.approx(s[1]) and np.isfinite(s[0])
    mle = ddr.CategoricalDensity(min_categories=4).fit(X)
    assert mle.score_samples(np.array([[3, 0]]))[0] == -np.inf  # the MLE: probability 0
    draws = est.sample(100_000, random_state=0)
    np.testing.assert_allclose(
        np.bincount(draws[:, 0], minlength=4) / 1e5, (counts + 1) / 204, atol=0.01
    )


def test_categorical_density_bad_codes(rng):
    X = rng.integers(0, 3, size=(50, 2))
    with pytest.raises(ValueError, match="Negative values"):
        ddr.CategoricalDensity().fit(X - 1)
    with pytest.raises(ValueError, match="integer category codes"):
        ddr.CategoricalDensity().fit(X + 0.5)
    with pytest.raises(ValueError, match="The 'alpha' parameter of"):
        ddr.CategoricalDensity(alpha=-1).fit(X)
    arr, counter = counting_dask_array(X, chunks=(10, -1))
    with dask.config.set(scheduler="sync"):
        ddr.CategoricalDensity().fit(arr)
    assert counter.passes == 1.0


# --------------------------------------------------------------------- check_estimator
SINGULAR = (
    "the check's weighted data have fewer samples than features: the maximum-likelihood "
    "covariance is singular (reg_covar > 0 passes)"
)
CONTINUOUS = "scikit-learn's check feeds continuous values; category codes must be integers"


@pytest.mark.parametrize(
    "est, expected",
    [
        (ddr.GaussianDensity(reg_covar=1e-6), {}),  # the defaults: tests/test_common.py
    ],
    ids=["gaussian-reg"],
)
def test_check_estimator(est, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(est, expected_failed_checks=expected)
