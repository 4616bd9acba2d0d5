"""FactorAnalysis: scikit-learn's model run to convergence, EM passes, missing values exactly,
the E-step sums with a diagonal noise against a row-by-row computation, rotations, bad input."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from scipy.stats import multivariate_normal
from sklearn.decomposition import FactorAnalysis as SkFA
from sklearn.exceptions import ConvergenceWarning

import ddr
from ddr.decomposition.factor_analysis import FactorAnalysis
from ddr.stats.ppca_sums import PPCAParams, PPCASums
from ddr.testing import counting_dask_array


def factors(rng, n=3000, d=12, q=3, offset=5.0):
    """Rows ``W z + mu + e`` with a different noise variance per feature; returns X, W, psi."""
    W = rng.standard_normal((d, q)) * np.array([3.0, 2.0, 1.0, 0.8][:q])
    psi = rng.uniform(0.2, 2.0, d)
    X = rng.standard_normal((n, q)) @ W.T + rng.standard_normal((n, d)) * np.sqrt(psi)
    return X + offset * rng.standard_normal(d), W, psi


def sklearn_converged(X, q, **kw):
    return SkFA(q, tol=1e-12, max_iter=100_000, svd_method="lapack", **kw).fit(X)


def matched(A, B):
    """Rows of A with the signs of B's."""
    return A * np.sign((A * B).sum(axis=1))[:, None]


# ---------------------------------------------------------------- against scikit-learn
def test_equals_sklearn_run_to_convergence(rng):
    """Acceptance: model covariance to 1e-4, log-likelihood at least scikit-learn's (to
    round-off); loadings, noise, posterior means and per-row likelihoods agree as well."""
    X, _, _ = factors(rng)
    n = X.shape[0]
    sk = sklearn_converged(X, 3)
    fa = FactorAnalysis(3, tol=1e-12).fit(X)
    C = sk.get_covariance()
    assert np.abs(fa.get_covariance() - C).max() <= 1e-4 * np.abs(C).max()
    ll_sk, ll = sk.score(X) * n, fa.score(X) * n
    assert ll >= ll_sk - 1e-12 * abs(ll_sk)
    np.testing.assert_allclose(fa.noise_variance_, sk.noise_variance_, rtol=1e-4)
    np.testing.assert_allclose(matched(fa.components_, sk.components_), sk.components_, atol=1e-4)
    np.testing.assert_allclose(fa.mean_, sk.mean_, rtol=1e-12)
    Z, Zsk = fa.transform(X[:200]), sk.transform(X[:200])
    np.testing.assert_allclose(Z * np.sign((Z * Zsk).sum(axis=0)), Zsk, atol=1e-4)
    # the default tol: the same model to 1e-6, likelihood within 1e-9 relative
    default = FactorAnalysis(3).fit(X)
    assert np.abs(default.get_covariance() - C).max() <= 1e-6 * np.abs(C).max()
    assert default.score(X) * n >= ll_sk - 1e-9 * abs(ll_sk)
    # scikit-learn's default (tol=1e-2, absolute) stops earlier, lower
    assert ll > SkFA(3).fit(X).score(X) * n


def test_read_outs_equal_sklearn_and_scipy_for_the_same_model(rng):
    """With scikit-learn's FactorAnalysis given ddr's fitted model, every read-out agrees to
    round-off: posterior means, likelihoods, covariance and precision (Woodbury)."""
    X, _, _ = factors(rng, n=800, d=7, q=2)
    fa = FactorAnalysis(2).fit(X)
    sk = SkFA(2).fit(X)
    sk.components_, sk.noise_variance_, sk.mean_ = fa.components_, fa.noise_variance_, fa.mean_
    np.testing.assert_allclose(fa.transform(X), sk.transform(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fa.score_samples(X), sk.score_samples(X), rtol=1e-10)
    np.testing.assert_allclose(fa.get_precision(), sk.get_precision(), rtol=1e-10, atol=1e-12)
    ref = multivariate_normal(fa.mean_, fa.get_covariance()).logpdf(X[:50])
    np.testing.assert_allclose(fa.score_samples(X[:50]), ref, rtol=1e-10)
    assert fa.score(X) == pytest.approx(np.mean(sk.score_samples(X)), rel=1e-12)
    # canonical form: W^T Psi^-1 W diagonal and decreasing, largest loading positive
    G = (fa.components_ / fa.noise_variance_) @ fa.components_.T
    np.testing.assert_allclose(G - np.diag(np.diag(G)), 0.0, atol=1e-10 * G.max())
    assert np.all(np.diff(np.diag(G)) < 0)
    top = np.abs(fa.components_).argmax(axis=1)
    assert np.all(fa.components_[np.arange(2), top] > 0)


@pytest.mark.parametrize("rotation", ["varimax", "quartimax"])
def test_rotations_are_sklearns(rng, rotation):
    X, _, _ = factors(rng, n=2000, d=10, q=3)
    sk = sklearn_converged(X, 3, rotation=rotation)
    fa = FactorAnalysis(3, rotation=rotation, tol=1e-12).fit(X)
    np.testing.assert_allclose(matched(fa.components_, sk.components_), sk.components_, atol=1e-4)
    plain = FactorAnalysis(3, tol=1e-12).fit(X)
    np.testing.assert_allclose(fa.get_covariance(), plain.get_covariance(), rtol=1e-10)
    assert fa.score(X) == pytest.approx(plain.score(X), rel=1e-12)
    R = np.linalg.lstsq(plain.components_.T, fa.components_.T, rcond=None)[0]
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-8)  # an orthogonal rotation


# ------------------------------------------------------------------------- passes
def test_complete_data_reads_once_and_missing_data_once_per_iteration(rng):
    """Complete data: one pass (the moments), whatever the iterations, which run on the
    client; with missing values one pass per EM iteration after it."""
    X, _, _ = factors(rng, n=4000, d=8, q=2)
    ref = FactorAnalysis(2).fit(X)
    with dask.config.set(scheduler="threads"):
        for max_iter in (1, 3, 1000):
            arr, counter = counting_dask_array(X, chunks=(500, -1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter 1 and 3
                fa = FactorAnalysis(2, max_iter=max_iter).fit(arr)
            assert counter.passes == 1.0 and fa.n_iter_ <= max_iter
        assert fa.n_iter_ > 1
        Xm = X.copy()
        Xm[rng.random(X.shape) < 0.2] = np.nan
        arr, counter = counting_dask_array(Xm, chunks=(500, -1))
        fm = FactorAnalysis(2).fit(arr)
        assert fm.n_iter_ > 1 and counter.passes == fm.n_iter_ + 1
    np.testing.assert_allclose(fa.get_covariance(), ref.get_covariance(), rtol=1e-7)


# ----------------------------------------------------------------- missing values
def brute_force_loglik(X, model):
    C, mu = model.get_covariance(), model.mean_
    out = np.zeros(len(X))
    for i, row in enumerate(X):
        o = ~np.isnan(row)
        if o.any():
            out[i] = multivariate_normal(mu[o], C[np.ix_(o, o)]).logpdf(row[o])
    return out


def test_missing_values_use_each_rows_observed_entries(rng):
    X, W, psi = factors(rng, n=3000, d=10, q=2)
    Xm = X.copy()
    mask = rng.random(X.shape) < 0.25
    Xm[mask] = np.nan
    fa = FactorAnalysis(2).fit(Xm)
    assert np.all(np.diff(fa.loglike_) >= -1e-10 * abs(fa.loglike_[-1]))  # EM is monotone
    np.testing.assert_allclose(fa.score_samples(Xm[:200]), brute_force_loglik(Xm[:200], fa),
                               rtol=1e-10)  # fmt: skip
    assert fa.loglike_[-1] == pytest.approx(brute_force_loglik(Xm, fa).sum(), rel=1e-6)
    # posterior of a row = that of the model restricted to its observed features
    Wf, ps = fa.components_.T, fa.noise_variance_
    Z, cov = fa.transform(Xm[:30], return_cov=True)
    for i in range(30):
        o = ~np.isnan(Xm[i])
        M = np.eye(2) + (Wf[o] / ps[o, None]).T @ Wf[o]
        ez = np.linalg.solve(M, (Wf[o] / ps[o, None]).T @ (Xm[i, o] - fa.mean_[o]))
        np.testing.assert_allclose(Z[i], ez, atol=1e-10)
        np.testing.assert_allclose(cov[i], np.linalg.inv(M), atol=1e-12)
    imputed = fa.impute(Xm)
    np.testing.assert_array_equal(imputed[~mask], X[~mask])
    np.testing.assert_allclose(imputed[mask], fa.inverse_transform(fa.transform(Xm))[mask])
    colmean = np.broadcast_to(np.nanmean(Xm, axis=0), X.shape)
    err = np.sqrt(np.mean((imputed[mask] - X[mask]) ** 2))
    assert err < 0.8 * np.sqrt(np.mean((colmean[mask] - X[mask]) ** 2))
    # the truth is recovered: model covariance near W W^T + Psi
    truth = W @ W.T + np.diag(psi)
    assert np.abs(fa.get_covariance() - truth).max() < 0.15 * np.abs(truth).max()


def test_diagonal_noise_sums_against_brute_force(rng):
    """PPCASums with a noise variance per feature (factor analysis's E-step) equal a
    row-by-row computation of the posteriors; their log-likelihood is scipy's."""
    X, _, _ = factors(rng, n=300, d=6, q=2)
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.25] = np.nan
    Xm[:40] = X[:40]
    p = PPCAParams(rng.standard_normal((6, 2)), X.mean(axis=0), rng.uniform(0.3, 2.0, 6))
    s = PPCASums.from_block(Xm, params=p)
    A, b, yy, ll = np.zeros((6, 3, 3)), np.zeros((6, 3)), np.zeros(6), 0.0
    C = p.W @ p.W.T + np.diag(p.s2)
    for row in Xm:
        o = ~np.isnan(row)
        Wo = p.W[o] / p.s2[o, None]
        M = np.eye(2) + Wo.T @ p.W[o]
        y = row[o] - p.mu[o]
        ez = np.linalg.solve(M, Wo.T @ y)
        ezz = np.ones((3, 3))
        ezz[:2, :2] = np.linalg.inv(M) + np.outer(ez, ez)
        ezz[:2, 2] = ezz[2, :2] = ez
        A[o] += ezz
        b[o] += y[:, None] * np.r_[ez, 1.0]
        yy[o] += y**2
        ll += multivariate_normal(p.mu[o], C[np.ix_(o, o)]).logpdf(row[o])
    np.testing.assert_allclose(s.feature_gram(), A, rtol=1e-10)
    np.testing.assert_allclose(s.yz, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.yy, yy, rtol=1e-12)
    assert s.loglik == pytest.approx(ll, rel=1e-12)
    halves = PPCASums.from_block(Xm[:77], params=p).merge(PPCASums.from_block(Xm[77:], params=p))
    np.testing.assert_allclose(halves.yz, s.yz, rtol=1e-12)
    assert halves.loglik == pytest.approx(s.loglik, rel=1e-13)


# ------------------------------------------------------------------ forms, state
def test_dask_xarray_float32_and_offset(rng):
    X, _, _ = factors(rng, n=1500, d=6, q=2)
    ref = FactorAnalysis(2).fit(X)
    with dask.config.set(scheduler="threads"):
        m = FactorAnalysis(2).fit(da.from_array(X, chunks=(333, -1)))
        Z = m.transform(da.from_array(X, chunks=(333, -1)))
        assert isinstance(Z, da.Array)
        # the same optimum: the moments of the one pass differ by round-off, and the
        # quasi-Newton steps and EM's stopping point with them, within tol
        np.testing.assert_allclose(Z.compute(), ref.transform(X), atol=1e-7)
    np.testing.assert_allclose(m.get_covariance(), ref.get_covariance(), rtol=1e-7)
    assert m.score(X) == pytest.approx(ref.score(X), rel=1e-10)
    xa = xr.DataArray(X, dims=("time", "sensor"), coords={"sensor": list("abcdef")})
    mx = FactorAnalysis(2).fit(xa)
    assert mx.as_xarray("noise_variance_").dims == ("sensor",)
    assert mx.transform(xa).dims == ("time", "component")
    shifted = FactorAnalysis(2).fit(X + 1e8)
    np.testing.assert_allclose(shifted.get_covariance(), ref.get_covariance(), rtol=1e-6)
    f32 = FactorAnalysis(2).fit(X.astype(np.float32))
    ref32 = FactorAnalysis(2).fit(X.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(f32.get_covariance(), ref32.get_covariance(), rtol=1e-10)


def test_save_load_and_resume(rng, tmp_path):
    """A fit stopped by max_iter, saved and loaded, resumes with warm_start=True: its
    iterations continue the saved trace (no start pass) to the optimum of one whole fit."""
    X, _, _ = factors(rng, n=1500, d=8, q=2)
    X[rng.random(X.shape) < 0.3] = np.nan
    whole = FactorAnalysis(2, tol=1e-8).fit(X)
    assert whole.n_iter_ > 5
    with pytest.warns(ConvergenceWarning, match="FactorAnalysis: EM did not converge in max_it"):
        part = FactorAnalysis(2, tol=1e-8, max_iter=3).fit(X)
    part.save(tmp_path / "fa.zarr")
    back = ddr.load(tmp_path / "fa.zarr")
    np.testing.assert_array_equal(back.transform(X), part.transform(X))
    arr, counter = counting_dask_array(X, chunks=(300, -1))
    with dask.config.set(scheduler="threads"):
        back.set_params(warm_start=True, max_iter=1000).fit(arr)
    assert back.n_iter_ > 3 and counter.passes == back.n_iter_ - 3
    np.testing.assert_array_equal(back.loglike_[:3], part.loglike_)
    assert np.all(np.diff(back.loglike_) >= -1e-10 * abs(back.loglike_[-1]))
    n = X.shape[0]
    assert back.score(X) * n == pytest.approx(whole.score(X) * n, rel=1e-8)
    C = whole.get_covariance()
    assert np.abs(back.get_covariance() - C).max() <= 1e-5 * np.abs(C).max()


# -------------------------------------------------------------------- bad input
def test_bad_input(rng):
    X, _, _ = factors(rng, n=200, d=5, q=2)
    Xc = X.copy()
    Xc[:, [1, 3]] = 7.0
    with pytest.raises(
        ValueError,
        match=r"FactorAnalysis: feature\(s\) \[1, 3\] \(2 in all\) have zero variance; factor "
        r"analysis gives every feature a noise variance of its own, which would be 0",
    ):
        FactorAnalysis(2).fit(Xc)
    with pytest.raises(ValueError, match=r"feature\(s\) \[1, 3\] \(2 in all\) have zero var"):
        FactorAnalysis(2).fit(da.from_array(Xc, chunks=(50, -1)))
    with pytest.raises(
        ValueError,
        match=r"FactorAnalysis: n_components must satisfy 1 <= n_components <= "
        r"n_features = 5; got n_components=6",
    ):
        FactorAnalysis(6).fit(X)
    with pytest.raises(
        ValueError,
        match=r"noise_variance_init must have one value per feature, shape \(5,\); got "
        r"shape \(3,\)",
    ):
        FactorAnalysis(2, noise_variance_init=[1.0, 1.0, 1.0]).fit(X)
    with pytest.raises(ValueError, match=r"noise_variance_init must be positive and finite"):
        FactorAnalysis(2, noise_variance_init=[1.0, 0.0, 1.0, 1.0, 1.0]).fit(X)
    with pytest.raises(ValueError, match="The 'rotation' parameter of FactorAnalysis"):
        FactorAnalysis(2, rotation="oblimin").fit(X)
    Xn = X.copy()
    Xn[:, 2] = np.nan
    with pytest.raises(ValueError, match=r"feature\(s\) \[2\] \(1 in all\) have no observed"):
        FactorAnalysis(2).fit(Xn)
    with pytest.raises(ValueError, match="FactorAnalysis needs at least 2 samples"):
        FactorAnalysis(2).fit(X[:1])


def test_noise_variance_init_is_a_start_only(rng):
    X, _, _ = factors(rng, n=1000, d=6, q=2)
    a = FactorAnalysis(2, tol=1e-12).fit(X)
    b = FactorAnalysis(2, tol=1e-12, noise_variance_init=np.full(6, 0.5)).fit(X)
    np.testing.assert_allclose(a.get_covariance(), b.get_covariance(), rtol=1e-6)
