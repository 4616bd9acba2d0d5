"""CCA: the closed form, scikit-learn's correlations, regularisation, one pass, forms, bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn.cross_decomposition import CCA as SkCCA
from sklearn.utils.estimator_checks import check_estimator

import ddr
from ddr.cross_decomposition.cca import CCA
from ddr.testing import counting_dask_array


def two_views(rng, n=3000, dx=6, dy=4, k=3, offset=10.0):
    Z = rng.standard_normal((n, k))
    X = Z @ rng.standard_normal((k, dx)) + rng.standard_normal((n, dx)) + offset
    Y = Z @ rng.standard_normal((k, dy)) + rng.standard_normal((n, dy)) - offset
    return X, Y


def inv_sqrt(C):
    lam, U = np.linalg.eigh(C)
    return (U / np.sqrt(lam)) @ U.T


def closed_form(X, Y):
    dx = X.shape[1]
    S = np.cov(np.hstack([X, Y]).T)
    Sxx, Syy, Sxy = S[:dx, :dx], S[dx:, dx:], S[:dx, dx:]
    return np.linalg.svd(inv_sqrt(Sxx) @ Sxy @ inv_sqrt(Syy), compute_uv=False), S


def test_equals_closed_form(rng):
    """Acceptance: singular values of Sxx^-1/2 Sxy Syy^-1/2 to 1e-8."""
    X, Y = two_views(rng)
    m = CCA(4).fit(X, Y)
    s, S = closed_form(X, Y)
    np.testing.assert_allclose(m.correlations_, s[:4], rtol=0, atol=1e-8)
    np.testing.assert_allclose(m.singular_values_, s[:4], rtol=0, atol=1e-8)
    # the weights give uncorrelated, unit-variance canonical variates in each view
    Sxx, Syy = S[:6, :6], S[6:, 6:]
    np.testing.assert_allclose(m.x_weights_.T @ Sxx @ m.x_weights_, np.eye(4), atol=1e-10)
    np.testing.assert_allclose(m.y_weights_.T @ Syy @ m.y_weights_, np.eye(4), atol=1e-10)
    xs, ys = m.transform(X, Y)
    corr = [np.corrcoef(xs[:, j], ys[:, j])[0, 1] for j in range(4)]
    np.testing.assert_allclose(corr, s[:4], atol=1e-10)


def test_matches_sklearn_correlations(rng):
    """Acceptance: scikit-learn's CCA (NIPALS, converged tightly) gives the same correlations
    on well-conditioned data."""
    X, Y = two_views(rng, n=2000, dx=5, dy=4)
    sk = SkCCA(3, max_iter=5000, tol=1e-14).fit(X, Y)
    a, b = sk.transform(X, Y)
    ref = np.array([np.corrcoef(a[:, j], b[:, j])[0, 1] for j in range(3)])
    m = CCA(3).fit(X, Y)
    np.testing.assert_allclose(m.correlations_, ref, atol=1e-8)
    # same directions: the variates are perfectly correlated with scikit-learn's
    xs = m.transform(X)
    for j in range(3):
        assert abs(np.corrcoef(xs[:, j], a[:, j])[0, 1]) == pytest.approx(1.0, abs=1e-8)


def test_regularisation_interpolates(rng):
    X, Y = two_views(rng, n=1500)
    S = np.cov(np.hstack([X, Y]).T)
    Sxy = S[:6, 6:]
    m1 = CCA(2, reg=1.0).fit(X, Y)
    U, _, Vt = np.linalg.svd(Sxy)
    # reg=1: maximum covariance, the singular vectors of Sxy (up to scale and sign)
    for j in range(2):
        cx = m1.x_weights_[:, j] @ U[:, j] / np.linalg.norm(m1.x_weights_[:, j])
        cy = m1.y_weights_[:, j] @ Vt[j] / np.linalg.norm(m1.y_weights_[:, j])
        assert abs(cx) == pytest.approx(1, abs=1e-10) and abs(cy) == pytest.approx(1, abs=1e-10)
    # regularising can only lower the first canonical correlation, continuously in reg
    c = [CCA(1, reg=r).fit(X, Y).correlations_[0] for r in (0.0, 1e-6, 0.3, 1.0)]
    assert c[0] >= c[2] >= c[3] and c[1] == pytest.approx(c[0], abs=1e-6)
    # reg makes a view with more features than rows workable
    Xw = np.hstack([X[:40], rng.standard_normal((40, 60))])
    with pytest.raises(
        ValueError,
        match=r"covariance of X is singular \(rank \d+ < 66 "
        r"features\) with reg=0.0.*Use reg > 0",
    ):
        CCA(2).fit(Xw, Y[:40])
    m = CCA(2, reg=0.5).fit(Xw, Y[:40])
    assert np.isfinite(m.x_weights_).all() and np.all(np.abs(m.correlations_) <= 1)


def test_one_pass_over_both_views(rng):
    X, Y = two_views(rng, n=4000)
    ref = CCA(3).fit(X, Y)
    ax, cx = counting_dask_array(X, chunks=(500, -1))
    ay, cy = counting_dask_array(Y, chunks=(700, -1))  # different chunks: aligned to X's
    with dask.config.set(scheduler="threads"):
        m = CCA(3).fit(ax, ay)
        assert cx.passes == 1.0 and cy.passes == 1.0
        xs, ys = m.transform(ax, ay)
        assert isinstance(xs, da.Array) and isinstance(ys, da.Array)
        np.testing.assert_allclose(xs.compute(), ref.transform(X), atol=1e-10)
        # numpy X with dask Y
        mixed = CCA(3).fit(X, da.from_array(Y, chunks=(1000, -1)))
    np.testing.assert_allclose(m.x_weights_, ref.x_weights_, atol=1e-10)
    np.testing.assert_allclose(mixed.y_weights_, ref.y_weights_, atol=1e-10)


def test_fit_plan_is_one_statistic(rng):
    X, Y = two_views(rng, n=500)
    est = CCA(2)
    plan = est._fit_plan(X, Y)
    (value,) = dask.compute(plan.statistics)
    assert plan.finish(value) is est
    np.testing.assert_allclose(est.correlations_, CCA(2).fit(X, Y).correlations_, rtol=1e-14)


def test_xarray_views(rng):
    X, Y = two_views(rng, n=800)
    t = np.arange(800)
    xa = xr.DataArray(X, dims=("time", "px"), coords={"time": t})
    ya = xr.DataArray(Y.T, dims=("word", "time"), coords={"time": t}).chunk({"time": 200})
    m = CCA(2).fit(xa, ya, sample_dim="time")
    ref = CCA(2).fit(X, Y)
    np.testing.assert_allclose(m.correlations_, ref.correlations_, rtol=1e-12)
    xs, ys = m.transform(xa, ya, sample_dim="time")
    assert xs.dims == ("time", "component") and ys.dims == ("time", "component")
    np.testing.assert_allclose(ys.values, ref.transform(X, Y)[1], atol=1e-10)
    assert m.as_xarray("x_weights_").dims == ("px", "component")


def test_bad_input(rng):
    X, Y = two_views(rng, n=100)
    with pytest.raises(
        ValueError,
        match=r"X has 100 rows but Y has 99; the two views must "
        r"describe the same samples",
    ):
        CCA(2).fit(X, Y[:99])
    with pytest.raises(ValueError, match=r"X has 100 rows but Y has 99"):
        CCA(2).fit(da.from_array(X, chunks=(30, -1)), da.from_array(Y[:99], chunks=(30, -1)))
    with pytest.raises(
        ValueError,
        match=r"n_components must be in \[1, min\(n_features_x, "
        r"n_features_y\)\] = \[1, 4\]; got n_components=5",
    ):
        CCA(5).fit(X, Y)
    with pytest.raises(ValueError, match="The 'reg' parameter of"):
        CCA(2, reg=1.5).fit(X, Y)
    with pytest.raises(ValueError, match=r"requires y to be passed"):
        CCA(2).fit(X, None)
    with pytest.raises(ValueError, match=r"Y has 3 features, but CCA was fitted with 4"):
        CCA(2).fit(X, Y).transform(X, Y[:, :3])
    Yc = Y.copy()
    Yc[:, 1] = 3.0  # a constant feature: singular Syy
    with pytest.raises(ValueError, match=r"covariance of Y is singular"):
        CCA(2).fit(X, Yc)


def test_save_load_and_public_name(rng, tmp_path):
    X, Y = two_views(rng, n=300)
    m = CCA(2).fit(X, Y)
    assert ddr.CCA is CCA
    m.save(str(tmp_path / "cca.zarr"))
    back = ddr.load(str(tmp_path / "cca.zarr"))
    np.testing.assert_array_equal(back.transform(X), m.transform(X))


@pytest.mark.parametrize("est", [CCA(1, reg=0.2)], ids=["reg"])  # CCA(1): test_common
def test_check_estimator(est):
    check_estimator(est)


def test_local_cluster(client, rng):
    X, Y = two_views(rng, n=2000)
    m = CCA(2).fit(da.from_array(X, chunks=(500, -1)), da.from_array(Y, chunks=(500, -1)))
    np.testing.assert_allclose(m.correlations_, CCA(2).fit(X, Y).correlations_, rtol=1e-12)


# ------------------------------------------------------------------ likelihood
def _model_covariance(m):
    """Probabilistic CCA's covariance of [x | y], built explicitly (Bach and Jordan, 2005)."""
    Cx, Cy = m.x_covariance_, m.y_covariance_
    cross = Cx @ m.x_weights_ @ np.diag(m.singular_values_) @ m.y_weights_.T @ Cy
    return np.block([[Cx, cross], [cross.T, Cy]])


def test_score_samples_with_every_pair_is_the_sample_gaussian(rng):
    """With all min(dx, dy) pairs at reg=0 the model is the Gaussian of the sample mean and
    covariance (ddof=1): scipy's density of [x | y]."""
    from scipy.stats import multivariate_normal

    X, Y = two_views(rng, n=800)
    XY = np.hstack([X, Y])
    m = CCA(4).fit(X, Y)
    ref = multivariate_normal(XY.mean(axis=0), np.cov(XY.T)).logpdf(XY)
    np.testing.assert_allclose(m.score_samples(X, Y), ref, rtol=1e-10, atol=1e-10)
    assert m.score(X, Y) == pytest.approx(ref.mean(), rel=1e-12)
    # without Y: the marginal density of X, N(x_mean_, x_covariance_)
    marginal = multivariate_normal(X.mean(axis=0), np.cov(X.T)).logpdf(X)
    np.testing.assert_allclose(m.score_samples(X), marginal, rtol=1e-10, atol=1e-10)
    assert m.score(X) == pytest.approx(marginal.mean(), rel=1e-12)


@pytest.mark.parametrize(("k", "reg"), [(1, 0.0), (2, 0.0), (3, 0.1)])
def test_score_samples_is_the_probabilistic_cca_density(rng, k, reg):
    """Fewer pairs, and regularised view covariances: the density of the explicit model
    covariance, on numpy, dask (lazy) and xarray (the sample coordinate kept)."""
    from scipy.stats import multivariate_normal

    X, Y = two_views(rng, n=600)
    m = CCA(k, reg=reg).fit(X, Y)
    XY = np.hstack([X, Y])
    ref = multivariate_normal(XY.mean(axis=0), _model_covariance(m)).logpdf(XY)
    np.testing.assert_allclose(m.score_samples(X, Y), ref, rtol=1e-10, atol=1e-10)
    lazy = m.score_samples(da.from_array(X, chunks=(97, -1)), da.from_array(Y, chunks=(150, -1)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), ref, rtol=1e-10, atol=1e-10)
    t = np.arange(600) * 3
    Xa = xr.DataArray(X, dims=("t", "f"), coords={"t": t})
    Ya = xr.DataArray(Y, dims=("t", "g"), coords={"t": t})
    got = m.score_samples(Xa, Ya)
    assert got.dims == ("t",) and (got["t"].values == t).all()
    np.testing.assert_allclose(got.values, ref, rtol=1e-10, atol=1e-10)
    assert m.score(X, Y) == pytest.approx(ref.mean(), rel=1e-12)


def test_score_samples_refuses_what_is_no_density_and_a_wrong_y(rng):
    """A canonical correlation of 1, and a regularised fit whose singular values reach 1 (the
    ridge shrinks the view covariances below what the cross-covariance needs)."""
    X, _ = two_views(rng, n=200)
    Y = X[:, :2] @ np.array([[1.0, 0.5], [0.0, 2.0]])  # exactly linear in X
    with pytest.raises(ValueError, match="canonical correlation is 1"):
        CCA(1).fit(X, Y).score_samples(X, Y)
    X, Y = two_views(rng, n=600)
    strong = CCA(3, reg=0.8).fit(X, Y)
    assert strong.singular_values_.max() > 1
    with pytest.raises(ValueError, match=r"reg=0\.8 the singular values"):
        strong.score_samples(X, Y)
    with pytest.raises(ValueError, match="fitted with 4 features in Y"):
        CCA(1).fit(X, Y).score_samples(X, X[:, :3])
