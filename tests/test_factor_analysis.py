"""FactorAnalysis: scikit-learn's model run to convergence, EM passes, missing values exactly,
the E-step sums with a diagonal noise against a row-by-row computation, rotations, bad input."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from scipy import optimize
from scipy.stats import multivariate_normal
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
from sklearn.decomposition import FactorAnalysis as SkFA
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

import ddr
from ddr.decomposition.factor_analysis import HEYWOOD_FLOOR, FactorAnalysis
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


# ------------------------------------------------- issue 27: the cases, at the optimum
# Independent maximisers, sharing nothing with ddr's fit but the model: the profile
# likelihood of psi for complete data (log|C| + tr(C^-1 S) from numpy's slogdet and
# solve, in psi itself, from a dozen starts), and a direct quasi-Newton maximisation of the
# observed-data Gaussian likelihood over (W, mu, log psi) with missing values.
def profile_maximum(X, q, floor=HEYWOOD_FLOOR, starts=4, seed=0):
    """The highest log-likelihood of complete data over psi >= floor * var (W at its best for
    each psi), from the squared multiple correlations, var / 2 and random starts."""
    n, d = X.shape
    S = np.cov(X.T, ddof=0)
    var = np.diag(S)

    def objective(psi):
        sd = np.sqrt(psi)
        lam, U = np.linalg.eigh(S / np.outer(sd, sd))
        W = sd[:, None] * U[:, -q:] * np.sqrt(np.maximum(lam[-q:], 1.0) - 1.0)
        C = W @ W.T + np.diag(psi)
        Ci = np.linalg.inv(C)
        value = np.linalg.slogdet(C)[1] + np.trace(np.linalg.solve(C, S))
        return value, np.diag(Ci @ (C - S) @ Ci)  # envelope theorem: W is optimal for psi

    rng = np.random.default_rng(seed)
    inits = [(1 - 0.5 * q / d) / np.diag(np.linalg.inv(S)), var / 2]
    inits += [var * rng.uniform(0.05, 0.95, d) for _ in range(starts)]
    bounds = [(floor * v, v) for v in var]
    best = -np.inf
    for p0 in inits:
        with threadpool_limits(1):  # small matrices: BLAS threads only contend
            res = optimize.minimize(
                objective, np.clip(p0, floor * var, var), jac=True, method="L-BFGS-B",
                bounds=bounds, options={"ftol": 1e-14, "gtol": 1e-10, "maxiter": 5000},
            )  # fmt: skip
        best = max(best, -0.5 * n * (d * np.log(2 * np.pi) + res.fun))
    return best


def observed_maximum(X, q, W, mu, psi):
    """The highest observed-data log-likelihood near (W, mu, psi): BFGS over (W, mu, log psi)
    with the analytic gradient, rows grouped by their missingness pattern."""
    d = X.shape[1]
    obs = ~np.isnan(X)
    keys, index = np.unique(obs, axis=0, return_inverse=True)
    groups = [(o, np.where(o, X, 0.0)[index.ravel() == g][:, o]) for g, o in enumerate(keys)]

    def negative(theta):
        W_ = theta[: d * q].reshape(d, q)
        mu_ = theta[d * q : d * q + d]
        psi_ = np.exp(theta[d * q + d :])
        C = W_ @ W_.T + np.diag(psi_)
        ll, G, gmu = 0.0, np.zeros((d, d)), np.zeros(d)
        for o, rows in groups:
            R = rows - mu_[o]
            Co = C[np.ix_(o, o)]
            Ci = np.linalg.inv(Co)
            m = R.shape[0]
            T = R.T @ R
            ll -= 0.5 * (m * (o.sum() * np.log(2 * np.pi) + np.linalg.slogdet(Co)[1]))
            ll -= 0.5 * np.sum(Ci * T)
            G[np.ix_(o, o)] += 0.5 * (Ci @ T @ Ci - m * Ci)  # dL/dC
            gmu[o] += Ci @ R.sum(axis=0)
        grad = np.r_[(2 * G @ W_).ravel(), gmu, np.diag(G) * psi_]
        return -ll, -grad

    theta = np.r_[W.ravel(), mu, np.log(psi)]
    with threadpool_limits(1):
        res = optimize.minimize(negative, theta, jac=True, method="BFGS",
                                options={"gtol": 1e-9, "maxiter": 20_000})  # fmt: skip
    return -res.fun, res


def standardised(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


def test_breast_cancer_reaches_the_higher_optimum_in_one_pass():
    """Issue 27, case 1: standardised breast_cancer, FactorAnalysis(3). scikit-learn's start
    (and ddr's before) stopped at a local optimum, -12155.16; from the squared multiple
    correlations the fit reaches the profile maximum (-11639.60, 516 nats higher, min psi
    3.9e-5), reading the data once."""
    X = standardised(load_breast_cancer().data)
    n = X.shape[0]
    arr, counter = counting_dask_array(X, chunks=(100, -1))
    with dask.config.set(scheduler="threads"), warnings.catch_warnings():
        warnings.simplefilter("error")  # converged, interior: no warning of any kind
        fa = FactorAnalysis(3).fit(arr)
    assert counter.passes == 1.0
    ll, best = fa.score(X) * n, profile_maximum(X, 3, starts=1)
    assert abs(ll - best) <= 1e-8 * abs(best) and ll >= best - 1e-8 * abs(best)
    assert best == pytest.approx(-11639.60, abs=0.01)
    # the full likelihood over (W, mu, log psi), by BFGS from the PCA of the data: the same
    _, s, Vt = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    full, _ = observed_maximum(
        X, 3, Vt[:3].T * s[:3] / np.sqrt(n), X.mean(axis=0), np.full(30, 0.5)
    )
    assert abs(ll - full) <= 1e-8 * abs(full)
    assert ll > SkFA(3).fit(X).score(X) * n + 500
    assert fa.noise_variance_.min() == pytest.approx(3.9e-5, rel=0.02)


def test_diabetes_heywood_case_stops_at_the_floor_and_names_the_features():
    """Issue 27, case 2: standardised diabetes, FactorAnalysis(2). Two noise variances head
    for 0 (s1 and s3): they stop at the floor, 1e-6 of their variance, with a warning naming
    them, at the maximum with that bound (within 1e-3 nats of the supremum, -5054.1659,
    which no noise variance reaches); before, the fit stopped at n_iter_=2, 0.044 nats
    short, without a word."""
    data = load_diabetes(as_frame=True).data
    frame = (data - data.mean()) / data.std(ddof=0)
    with pytest.warns(UserWarning, match=r"Heywood case: the noise variance of feature\(s\) "
                      r"\['s1', 's3'\] \(2 in all\) reached its floor \(1e-06 times"):  # fmt: skip
        fa = FactorAnalysis(2).fit(frame)
    X = frame.to_numpy()
    n = X.shape[0]
    ll, best = fa.score(X) * n, profile_maximum(X, 2)
    assert abs(ll - best) <= 1e-8 * abs(best) and ll >= best - 1e-8 * abs(best)
    assert -5054.1659 - 1.5e-3 < ll < -5054.1659
    np.testing.assert_allclose(fa.noise_variance_[[4, 6]], 1e-6, rtol=1e-9)


def test_wine_with_missing_values_reaches_the_observed_data_maximum():
    """Issue 27, case 3: standardised wine, 20 % of the values of 5 columns missing,
    FactorAnalysis(2). The stopping rule of ddr.em runs EM (one pass per iteration,
    SQUAREM) to the maximum of the observed-data likelihood (a direct BFGS maximisation
    agrees within 1e-8 relative; noise variances and model covariance with it), where the
    old rule stopped short (0.017 nats, noise variances 6x off, on the issue's draw)."""
    rng = np.random.default_rng(27)
    X = standardised(load_wine().data)
    for j in rng.choice(X.shape[1], 5, replace=False):
        X[rng.random(X.shape[0]) < 0.2, j] = np.nan
    n = X.shape[0]
    arr, counter = counting_dask_array(X, chunks=(50, -1))
    with dask.config.set(scheduler="threads"), warnings.catch_warnings():
        warnings.simplefilter("error")  # converged: no ConvergenceWarning
        fa = FactorAnalysis(2).fit(arr)
    assert counter.passes == fa.n_iter_ + 1
    ll = fa.score(X) * n
    best, res = observed_maximum(X, 2, fa.components_.T, fa.mean_, fa.noise_variance_)
    assert abs(ll - best) <= 1e-8 * abs(best) and ll >= best - 1e-8 * abs(best)
    d = X.shape[1]
    W, psi = res.x[: 2 * d].reshape(d, 2), np.exp(res.x[3 * d :])
    np.testing.assert_allclose(fa.noise_variance_, psi, rtol=3e-3)
    C = W @ W.T + np.diag(psi)
    assert np.abs(fa.get_covariance() - C).max() <= 1e-4
    # the same maximum from a start that shares nothing with ddr's: PCA of the
    # mean-imputed data
    filled = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    _, s, Vt = np.linalg.svd(filled - filled.mean(axis=0), full_matrices=False)
    W0 = Vt[:2].T * s[:2] / np.sqrt(n)
    other, _ = observed_maximum(X, 2, W0, filled.mean(axis=0), np.full(d, 0.5))
    assert other <= best + 1e-8 * abs(best)


@pytest.mark.filterwarnings("ignore::UserWarning")  # iris is a Heywood case too
def test_iris_reads_once_whatever_the_iterations():
    """Issue 27, case 4: FactorAnalysis(2).fit(iris) ran 1000 EM iterations and read the
    data 1001 times. Now one pass for any max_iter; with n_init=5 (its likelihood has two
    local maxima; the squared multiple correlations lead to the lower) the profile maximum."""
    X = load_iris().data
    n = X.shape[0]
    with dask.config.set(scheduler="threads"):
        for max_iter in (1, 10, 1000):
            arr, counter = counting_dask_array(X, chunks=(40, -1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fa = FactorAnalysis(2, max_iter=max_iter).fit(arr)
            assert counter.passes == 1.0 and fa.n_iter_ <= max_iter
        assert fa.n_iter_ < 1000  # converged
        arr, counter = counting_dask_array(X, chunks=(40, -1))
        fa = FactorAnalysis(2, n_init=5, random_state=0).fit(arr)
        assert counter.passes == 1.0
    ll, best = fa.score(X) * n, profile_maximum(X, 2)
    assert abs(ll - best) <= 1e-8 * abs(best) and ll >= best - 1e-8 * abs(best)


def test_too_many_components_are_refused_and_an_unidentified_rank_warns(rng):
    """Issue 27, case 4 of 'What was measured': PPCA(5) on 3 x 6 data gave a noise variance
    of 6e-13, FactorAnalysis(5) every noise variance 0, silently. n_components >= n_samples
    is refused by the tags' n_components_limit (what ddr plan checks), at most n_samples - 1
    components; a rank of the data at most n_components warns."""
    from ddr.tags import get_ddr_tags

    X = rng.standard_normal((3, 6))
    for cls, prefix in ((ddr.PPCA, "PPCA"), (FactorAnalysis, "FactorAnalysis")):
        assert get_ddr_tags(cls(5)).transformer.n_components_limit(3, 6) == (2, "n_samples - 1")
        with pytest.raises(
            ValueError,
            match=rf"{prefix}: n_components must satisfy 1 <= n_components <= n_samples - 1 "
            r"= 2; got n_components=5\. More components than that are not identified",
        ):
            cls(5).fit(X)
        with pytest.raises(ValueError, match=r"<= n_samples - 1 = 2; got n_components=3"):
            cls(3).fit(da.from_array(X, chunks=(2, -1)))
    with pytest.warns(UserWarning, match=r"PPCA: the noise variance reached its floor .* rank "
                      r"at most n_components=2, so sigma\^2 is not identified"):  # fmt: skip
        ddr.PPCA(2).fit(X)
    with pytest.warns(UserWarning, match=r"FactorAnalysis: n_components=2 is at least the rank "
                      r"of the data \(2\)"):  # fmt: skip
        FactorAnalysis(2).fit(X)
