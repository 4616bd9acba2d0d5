"""PPCA: EM against the closed form, one pass per iteration, exact missing-data handling,
imputation, likelihoods against scipy and scikit-learn, forms, bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from scipy.stats import multivariate_normal
from sklearn.decomposition import PCA as SkPCA
from sklearn.utils.estimator_checks import check_estimator

import ddr
from ddr.decomposition.ppca import PPCA
from ddr.stats import compute
from ddr.stats.pairwise_moments import PairwiseMoments
from ddr.stats.ppca_sums import PPCAParams, PPCASums, spd_inverse_logdet
from ddr.testing import counting_dask_array


def low_rank(rng, n=3000, d=20, q=3, noise=0.5, offset=5.0, scales=(3.0, 2.0, 1.5, 1.2, 1.0)):
    """Rows ``W z + mu + noise`` with orthogonal W of decreasing scale; returns X and W^T."""
    W = np.linalg.qr(rng.standard_normal((d, q)))[0] * np.array(scales[:q])
    X = rng.standard_normal((n, q)) @ W.T + noise * rng.standard_normal((n, d))
    return X + rng.normal(0, offset, d), W.T


def angle_deg(A, B):
    """Largest principal angle between the row spaces of A and B (k x d), sine form."""
    qa, _ = np.linalg.qr(np.asarray(A, dtype=float).T)
    qb, _ = np.linalg.qr(np.asarray(B, dtype=float).T)
    s = np.linalg.norm(qb - qa @ (qa.T @ qb), 2)
    return float(np.degrees(np.arcsin(min(1.0, s))))


def with_missing(rng, X, frac):
    Xm = X.copy()
    mask = rng.random(X.shape) < frac
    Xm[mask] = np.nan
    return Xm, mask


# ---------------------------------------------------------------- closed form and EM
@pytest.mark.parametrize("init", ["random", "pca"])
def test_em_converges_to_closed_form(rng, init):
    """Acceptance: loglik 1e-6 relative, sigma^2 1e-5 relative, subspace below 0.01 degree."""
    X, _ = low_rank(rng)
    cf = PPCA(3, solver="closed_form").fit(X)
    em = PPCA(3, init=init, tol=1e-12).fit(X)
    n = X.shape[0]
    ll_cf, ll_em = cf.score(X) * n, em.score(X) * n
    assert abs(ll_em - ll_cf) <= 1e-6 * abs(ll_cf)
    assert abs(em.noise_variance_ / cf.noise_variance_ - 1) <= 1e-5
    assert angle_deg(em.components_, cf.components_) < 0.01
    np.testing.assert_allclose(em.explained_variance_, cf.explained_variance_, rtol=1e-5)
    np.testing.assert_allclose(em.mean_, cf.mean_, atol=1e-8)
    # the closed-form likelihood read from the moments equals the one summed row by row
    assert cf.loglik_curve_[0] == pytest.approx(ll_cf, rel=1e-12)
    # EM is monotone (PX-EM too) and its curve is what stopped it
    assert np.all(np.diff(em.loglik_curve_) >= -1e-9 * abs(ll_cf))
    assert em.loglik_curve_.size == em.n_iter_


def test_closed_form_is_sklearn_pca_model(rng):
    """components_ are scikit-learn's; variances are its ddof=1 values times (n-1)/n; the
    likelihood equals scikit-learn's score_samples for the same (ML) model and scipy's."""
    X, _ = low_rank(rng, n=2000, d=12, q=4)
    n = X.shape[0]
    cf = PPCA(4, solver="closed_form").fit(X)
    sk = SkPCA(4).fit(X)
    signs = np.sign((cf.components_ * sk.components_).sum(axis=1))
    np.testing.assert_allclose(cf.components_ * signs[:, None], sk.components_, atol=1e-10)
    np.testing.assert_allclose(
        cf.explained_variance_, sk.explained_variance_ * (n - 1) / n, rtol=1e-10
    )
    assert cf.noise_variance_ == pytest.approx(sk.noise_variance_ * (n - 1) / n, rel=1e-10)
    sk.explained_variance_ = sk.explained_variance_ * (n - 1) / n
    sk.noise_variance_ = sk.noise_variance_ * (n - 1) / n
    np.testing.assert_allclose(cf.score_samples(X), sk.score_samples(X), rtol=1e-10)
    ref = multivariate_normal(cf.mean_, cf.get_covariance()).logpdf(X[:50])
    np.testing.assert_allclose(cf.score_samples(X[:50]), ref, rtol=1e-10)
    np.testing.assert_allclose(cf.get_precision() @ cf.get_covariance(), np.eye(12), atol=1e-10)
    assert cf.explained_variance_ratio_ == pytest.approx(sk.explained_variance_ratio_, rel=1e-10)


def test_each_em_iteration_reads_the_data_once(rng):
    X, _ = low_rank(rng, n=4000, d=10)
    arr, counter = counting_dask_array(X, chunks=(500, -1))
    with dask.config.set(scheduler="threads"):
        em = PPCA(3, init="random", tol=1e-10).fit(arr)
        assert em.n_iter_ >= 5
        assert counter.passes == em.n_iter_ + 1  # the start's moments, one per iteration
        counter.reset()
        em = PPCA(3, init="pca").fit(arr)
        # complete data: the pass of the start, whose moments give EM's iterations on the
        # client (the closed form, confirmed by the first)
        assert counter.passes == 1.0 and em.n_iter_ == 1
        counter.reset()
        Xm = X.copy()
        Xm[rng.random(X.shape) < 0.1] = np.nan
        arr_m, counter_m = counting_dask_array(Xm, chunks=(500, -1))
        missing = PPCA(3, init="pca").fit(arr_m)
        assert missing.n_iter_ > 1 and counter_m.passes == missing.n_iter_ + 1
        PPCA(3, solver="closed_form").fit(arr)
        assert counter.passes == 1.0
    ref = PPCA(3, init="pca").fit(X)
    np.testing.assert_allclose(em.components_, ref.components_, atol=1e-10)


# ------------------------------------------------------------------ missing values
def brute_force_loglik(X, model):
    """Marginal log-likelihood of each row's observed entries, one scipy call per row."""
    C, mu = model.get_covariance(), model.mean_
    out = np.zeros(len(X))
    for i, row in enumerate(X):
        o = ~np.isnan(row)
        if o.any():
            out[i] = multivariate_normal(mu[o], C[np.ix_(o, o)]).logpdf(row[o])
    return out


def test_missing_rows_use_their_observed_entries_only(rng):
    X, _ = low_rank(rng, n=500, d=8, q=2)
    Xm, _ = with_missing(rng, X, 0.3)
    Xm[0] = np.nan  # an empty row: likelihood 0, prior posterior
    with pytest.warns(UserWarning, match=r"1 row\(s\) with no observed value"):
        m = PPCA(2).fit(Xm)
    np.testing.assert_allclose(
        m.score_samples(Xm), brute_force_loglik(Xm, m), rtol=1e-10, atol=1e-10
    )
    # posterior mean and covariance of a row = those of the model restricted to its features
    W = m.components_.T * np.sqrt(m.explained_variance_ - m.noise_variance_)
    Z, cov = m.transform(Xm[:20], return_cov=True)
    for i in range(1, 20):
        o = ~np.isnan(Xm[i])
        M = m.noise_variance_ * np.eye(2) + W[o].T @ W[o]
        np.testing.assert_allclose(
            Z[i], np.linalg.solve(M, W[o].T @ (Xm[i, o] - m.mean_[o])), atol=1e-10
        )
        np.testing.assert_allclose(cov[i], m.noise_variance_ * np.linalg.inv(M), atol=1e-12)
    np.testing.assert_array_equal(Z[0], 0.0)
    np.testing.assert_allclose(cov[0], np.eye(2), atol=1e-12)


@pytest.mark.parametrize("patterns", ["random", "shared"])
def test_ppca_sums_against_brute_force_and_merge(rng, patterns):
    """The sums equal a row-by-row computation, for random missingness and for rows sharing
    a few patterns (where each pattern's q x q system is solved once)."""
    X, _ = low_rank(rng, n=300, d=6, q=2)
    if patterns == "random":
        Xm, _ = with_missing(rng, X, 0.25)
    else:
        masks = rng.random((3, 6)) < 0.4
        Xm = np.where(masks[rng.integers(0, 3, 300)], np.nan, X)
    Xm[:40] = X[:40]  # complete rows take the shared path
    p = PPCAParams(rng.standard_normal((6, 2)), rng.standard_normal(6), 0.7)
    s = PPCASums.from_block(Xm, params=p)
    A = np.zeros((6, 3, 3))
    b = np.zeros((6, 3))
    for row in Xm:
        o = ~np.isnan(row)
        M = p.s2 * np.eye(2) + p.W[o].T @ p.W[o]
        ez = np.linalg.solve(M, p.W[o].T @ (row[o] - p.mu[o]))
        ezz = np.ones((3, 3))
        ezz[:2, :2] = p.s2 * np.linalg.inv(M) + np.outer(ez, ez)
        ezz[:2, 2] = ezz[2, :2] = ez
        A[o] += ezz
        b[o] += (row[o] - p.mu[o])[:, None] * np.r_[ez, 1.0]
    np.testing.assert_allclose(s.feature_gram(), A, rtol=1e-10)
    np.testing.assert_allclose(s.yz, b, rtol=1e-10, atol=1e-12)
    merged = PPCASums.from_block(Xm[:123], params=p).merge(PPCASums.from_block(Xm[123:], params=p))
    for name in ("yz", "yy", "count", "zz_total"):
        np.testing.assert_allclose(getattr(merged, name), getattr(s, name), rtol=1e-12)
    np.testing.assert_allclose(merged.feature_gram(), s.feature_gram(), rtol=1e-12)
    assert merged.loglik == pytest.approx(s.loglik, rel=1e-12)
    back = PPCASums.from_dict(s.to_dict())
    np.testing.assert_array_equal(back.zz_feature, s.zz_feature)


@pytest.mark.parametrize("q", [1, 3, 10])
def test_batched_posteriors_equal_numpy_row_by_row(rng, q):
    """The E-step's posteriors of rows with missing entries (one q x q system per row, solved
    for all rows at once in packed storage) equal numpy's per row: M_n^{-1}, log|M_n|, the
    posterior means and b^T M^{-1} b, for random patterns, shared patterns and empty rows; and
    the sums' log-likelihood equals scipy's density of each row's observed entries."""
    from ddr.stats.ppca_sums import missing_posterior, unpack

    d, n = 12, 700
    W = rng.standard_normal((d, q))
    s2 = 0.6
    Y = rng.standard_normal((n, d)) * 2
    obs = (rng.random((n, d)) > 0.3).astype(float)
    obs[:5] = 0.0  # empty rows: the prior
    obs[5:400] = obs[5:8][rng.integers(0, 3, 395)]  # a few shared patterns: factored once
    for rows in (slice(0, n), slice(400, n), slice(5, 400)):  # mixed, random, shared
        o, y = obs[rows], np.where(obs[rows] > 0, Y[rows], 0.0)
        post, Ez, bmb = missing_posterior(y, o, W, s2)
        inv = unpack(post.inverse().T, q)
        for i in range(0, o.shape[0], 37):
            M = s2 * np.eye(q) + (W * o[i][:, None]).T @ W
            b = W.T @ y[i]
            np.testing.assert_allclose(inv[i], np.linalg.inv(M), rtol=1e-10, atol=1e-13)
            assert post.logdet[i] == pytest.approx(np.linalg.slogdet(M)[1], rel=1e-12, abs=1e-12)
            np.testing.assert_allclose(Ez[:, i], np.linalg.solve(M, b), rtol=1e-10, atol=1e-13)
            assert bmb[i] == pytest.approx(b @ np.linalg.solve(M, b), rel=1e-10, abs=1e-13)
    X = np.where(obs > 0, Y, np.nan)
    mu = rng.standard_normal(d)
    psi = rng.uniform(0.3, 2.0, d)
    for noise in (s2, psi):
        p = PPCAParams(W, mu, noise)
        ll = sum(
            multivariate_normal(
                mu[m], (W @ W.T + np.diag(np.broadcast_to(noise, d)))[np.ix_(m, m)]
            ).logpdf(x[m])
            for x in X + mu
            if (m := ~np.isnan(x)).any()
        )
        assert PPCASums.from_block(X + mu, params=p).loglik == pytest.approx(ll, rel=1e-11)


def test_spd_inverse(rng):
    for q in (3, 16):
        A = rng.standard_normal((50, q, q))
        M = A @ A.transpose(0, 2, 1) + np.eye(q)
        inv, logdet = spd_inverse_logdet(M)
        np.testing.assert_allclose(inv, np.linalg.inv(M), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(logdet, np.linalg.slogdet(M)[1], rtol=1e-12)


def test_thirty_percent_missing_recovers_subspace_and_imputes(rng):
    """Acceptance: 30 % missing at random on low-rank data. Documented numbers (this data:
    n=4000, d=30, q=4, noise 0.3): subspace within 1.5 degrees of the truth (measured 0.73,
    0.60 on the complete data), imputation RMSE below 0.3 x the column-mean RMSE (measured
    0.198; the noise alone gives 0.175)."""
    X, truth = low_rank(rng, n=4000, d=30, q=4, noise=0.3, scales=(6, 5, 4, 3))
    Xm, mask = with_missing(rng, X, 0.3)
    m = PPCA(4).fit(Xm)
    assert angle_deg(m.components_, truth) < 1.5
    imputed = m.impute(Xm)
    np.testing.assert_array_equal(imputed[~mask], X[~mask])
    rmse = np.sqrt(np.mean((imputed[mask] - X[mask]) ** 2))
    colmean = np.broadcast_to(np.nanmean(Xm, axis=0), X.shape)
    rmse_mean = np.sqrt(np.mean((colmean[mask] - X[mask]) ** 2))
    assert rmse < 0.3 * rmse_mean
    # the reconstruction and the imputation agree on the missing entries
    recon = m.inverse_transform(m.transform(Xm))
    np.testing.assert_allclose(imputed[mask], recon[mask], rtol=1e-12)
    # EM with missing data is still monotone and the random start reaches the same optimum
    curve = m.loglik_curve_  # (up to round-off: the last iterations gain below it)
    assert np.all(np.diff(curve) > -1e-14 * abs(curve[-1]))
    other = PPCA(4, init="random", tol=1e-11).fit(Xm)
    assert angle_deg(other.components_, m.components_) < 0.01
    assert other.noise_variance_ == pytest.approx(m.noise_variance_, rel=1e-4)


def test_empty_rows_are_ignored(rng):
    X, _ = low_rank(rng, n=800, d=6, q=2)
    Xm, _ = with_missing(rng, X, 0.2)
    with_empty = np.vstack([Xm, np.full((5, 6), np.nan)])
    ref = PPCA(2, tol=1e-12).fit(Xm)
    with pytest.warns(
        UserWarning,
        match=r"5 row\(s\) with no observed value \(all NaN\); "
        r"they carry no information and are ignored",
    ):
        got = PPCA(2, tol=1e-12).fit(with_empty)
    np.testing.assert_allclose(got.components_, ref.components_, atol=1e-6)
    assert got.noise_variance_ == pytest.approx(ref.noise_variance_, rel=1e-6)
    np.testing.assert_allclose(got.impute(with_empty)[-1], got.mean_)


def test_all_nan_column_is_refused(rng):
    X, _ = low_rank(rng, n=200, d=6, q=2)
    X[:, [1, 4]] = np.nan
    for init in ("pca", "random"):
        with pytest.raises(
            ValueError,
            match=r"feature\(s\) \[1, 4\] \(2 in all\) have no "
            r"observed value \(all NaN\)",
        ):
            PPCA(2, init=init).fit(X)
    arr = da.from_array(X, chunks=(50, -1))
    with pytest.raises(ValueError, match=r"feature\(s\) \[1, 4\]"):
        PPCA(2).fit(arr)


# --------------------------------------------------------------------- forms
def test_dask_and_xarray_forms(rng):
    X, _ = low_rank(rng, n=1200, d=5, q=2)
    Xm, _ = with_missing(rng, X, 0.1)
    ref = PPCA(2).fit(Xm)
    arr, counter = counting_dask_array(Xm, chunks=(300, -1))
    with dask.config.set(scheduler="threads"):
        m = PPCA(2).fit(arr)
        np.testing.assert_allclose(m.components_, ref.components_, atol=1e-10)
        counter.reset()
        outs = [m.transform(arr), m.impute(arr), m.score_samples(arr)]
        Z, cov = m.transform(arr, return_cov=True)
        assert all(isinstance(o, da.Array) for o in [*outs, Z, cov]) and counter.passes == 0
        np.testing.assert_allclose(outs[0].compute(), ref.transform(Xm), atol=1e-10)
        np.testing.assert_allclose(outs[1].compute(), ref.impute(Xm), atol=1e-10)
        np.testing.assert_allclose(outs[2].compute(), ref.score_samples(Xm), rtol=1e-10)
        np.testing.assert_allclose(cov.compute(), ref.transform(Xm, return_cov=True)[1], atol=1e-12)
        assert m.score(arr) == pytest.approx(ref.score(Xm), rel=1e-10)
    xa = xr.DataArray(
        Xm.T, dims=("station", "time"), coords={"time": np.arange(1200), "station": list("abcde")}
    )
    mx = PPCA(2).fit(xa, sample_dim="time")
    filled = mx.impute(xa, sample_dim="time")
    assert filled.dims == ("station", "time")
    np.testing.assert_array_equal(filled["station"], xa["station"])
    np.testing.assert_allclose(filled.values.T, ref.impute(Xm), atol=1e-10)
    Z, cov = mx.transform(xa.chunk({"time": 400}), sample_dim="time", return_cov=True)
    assert Z.dims == ("time", "component") and cov.dims == ("time", "component", "component_")
    assert mx.as_xarray("components_").dims == ("component", "station")
    back = mx.inverse_transform(Z)
    assert back.dims == ("time", "station")


def test_float32_input(rng):
    X, _ = low_rank(rng, n=2000, d=8, q=2)
    m32 = PPCA(2).fit(X.astype(np.float32))
    m64 = PPCA(2).fit(X.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(m32.components_, m64.components_, atol=1e-10)
    assert m32.impute(X.astype(np.float32)).dtype == np.float32


# ----------------------------------------------------------------- bad input
def test_bad_input(rng):
    X, _ = low_rank(rng, n=100, d=5, q=2)
    with pytest.raises(
        ValueError,
        match=r"PPCA: n_components must satisfy 1 <= n_components <= n_features - 1 = 4; "
        r"got n_components=5",
    ):
        PPCA(5).fit(X)
    with pytest.raises(ValueError, match=r"got n_components=7"):
        PPCA(7, solver="closed_form").fit(X)
    with pytest.raises(TypeError, match="The 'n_components' parameter of"):
        PPCA(2.5).fit(X)
    Xm = X.copy()
    Xm[3, 1] = np.nan
    with pytest.raises(
        ValueError,
        match=r"solver='closed_form' needs complete data; X has 1 "
        r"missing values \(NaN\)\. Use solver='em'",
    ):
        PPCA(2, solver="closed_form").fit(Xm)
    with pytest.raises(ValueError, match=r"solver='closed_form' needs complete data"):
        PPCA(2, solver="closed_form").fit(da.from_array(Xm, chunks=(30, -1)))
    with pytest.raises(ValueError, match="The 'solver' parameter of"):
        PPCA(2, solver="svd").fit(X)
    with pytest.raises(ValueError, match="The 'init' parameter of"):
        PPCA(2, init="zeros").fit(X)
    with pytest.raises(ValueError, match=r"needs at least 2 features"):
        PPCA().fit(X[:, :1])
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match=r"Input X contains infinity"):
        PPCA(2).fit(Xi)
    with pytest.raises(
        ValueError,
        match=r"X has 3 columns, but PPCA.inverse_transform is expecting "
        r"2",
    ):
        PPCA(2).fit(X).inverse_transform(np.zeros((4, 3)))


def test_not_converged_warns(rng):
    from sklearn.exceptions import ConvergenceWarning

    X, _ = low_rank(rng, n=500, d=6, q=2)
    with pytest.warns(ConvergenceWarning, match=r"EM did not converge in max_iter=2"):
        m = PPCA(2, init="random", max_iter=2).fit(X)
    assert m.n_iter_ == 2


def test_pairwise_moments_init_statistic(rng):
    X, _ = low_rank(rng, n=1000, d=5, q=2, offset=1e6)
    pm = compute(PairwiseMoments, da.from_array(X, chunks=(77, -1)))
    np.testing.assert_allclose(pm.covariance(), np.cov(X.T, ddof=0), rtol=1e-9, atol=1e-9)
    Xm, _ = with_missing(rng, X, 0.3)
    pm = compute(PairwiseMoments, da.from_array(Xm, chunks=(77, -1)))
    i, j = 1, 3
    ok = ~np.isnan(Xm[:, i]) & ~np.isnan(Xm[:, j])
    a, b = Xm[ok, i], Xm[ok, j]
    assert pm.covariance()[i, j] == pytest.approx(
        ((a - a.mean()) * (b - b.mean())).mean(), rel=1e-8
    )
    np.testing.assert_allclose(pm.mean, np.nanmean(Xm, axis=0), rtol=1e-14)
    # a feature missing from the first rows of a block still gets a shift near its values
    Xl = rng.standard_normal((30000, 3)) + 1e6
    Xl[:20000, 1] = np.nan
    pm = PairwiseMoments.from_block(Xl)
    assert pm.covariance()[1, 1] == pytest.approx(Xl[20000:, 1].var(), rel=1e-9)


def test_save_load_and_public_name(rng, tmp_path):
    X, _ = low_rank(rng, n=500, d=6, q=2)
    m = PPCA(2).fit(X)
    assert ddr.PPCA is PPCA
    m.save(str(tmp_path / "ppca.zarr"))
    back = ddr.load(str(tmp_path / "ppca.zarr"))
    np.testing.assert_array_equal(back.transform(X), m.transform(X))
    np.testing.assert_array_equal(back.loglik_curve_, m.loglik_curve_)


@pytest.mark.parametrize(
    ("est", "expected"),
    [
        (PPCA(1, init="random"), {}),  # the default: tests/test_common.py
        (
            PPCA(1, solver="closed_form"),
            {
                "check_transformer_n_iter": "the closed form has no iterations (n_iter_ = 0)",
                "check_estimators_nan_inf": "a fitted PPCA transforms rows with NaN "
                "(missing values) whatever the solver; only the closed-form fit needs "
                "complete data",
            },
        ),
    ],
    ids=["em-random", "closed_form"],
)
def test_check_estimator(est, expected):
    check_estimator(est, expected_failed_checks=expected)


def test_local_cluster(client, rng):
    X, _ = low_rank(rng, n=3000, d=8, q=2)
    Xm, _ = with_missing(rng, X, 0.2)
    arr = da.from_array(Xm, chunks=(750, -1))
    m = PPCA(2).fit(arr)
    ref = PPCA(2).fit(Xm)
    np.testing.assert_allclose(m.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(m.impute(arr).compute(), ref.impute(Xm), atol=1e-10)


@pytest.mark.parametrize("init", ["pca", "random"])
def test_every_start_is_translation_invariant_on_a_1e8_offset(rng, init):
    """Issue 15: the random start sat at mu = 0; on data at a 1e8 offset EM's first residuals
    cancelled every digit and it stalled at sigma^2 ~ 7500. Both starts now start at the mean."""
    X, _ = low_rank(rng, n=3000, d=6, q=2)
    shift = 1e8 * np.linspace(-1.0, 1.0, 6)
    ref = PPCA(2, init=init, tol=1e-12).fit(X)
    got = PPCA(2, init=init, tol=1e-12).fit(X + shift)
    assert got.noise_variance_ == pytest.approx(ref.noise_variance_, rel=1e-6)
    np.testing.assert_allclose(got.transform(X[:50] + shift), ref.transform(X[:50]), atol=1e-5)


# ------------------------------------------------------------------ bit-reproducibility
def _misaligned(a):
    """A copy of ``a`` that starts 3 bytes past an 8-byte boundary, as distributed may hand
    a task an array it deserialised from a message."""
    a = np.ascontiguousarray(a)
    buf = np.empty(a.nbytes + 16, dtype=np.uint8)
    start = (-buf.ctypes.data) % 8 + 3
    out = buf[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert not out.flags.aligned
    return out


def _fitted(m):
    return {
        k: np.asarray(v)
        for k, v in vars(m).items()
        if k.endswith("_") and not k.startswith("_") and isinstance(v, (np.ndarray, float, int))
    }


@pytest.mark.parametrize("missing", [0.0, 0.1])
def test_misaligned_arrays_give_the_same_bits(rng, missing):
    """numpy's matmul skips BLAS for an array that is not aligned and rounds differently:
    the E-step sums and the blockwise maps align what they get first."""
    X, _ = low_rank(rng, n=2000, d=40, q=4)  # wide enough for BLAS to sum differently
    X, _ = with_missing(rng, X, missing)
    params = PPCAParams(rng.standard_normal((40, 4)), np.full(40, 5.0), 0.7)
    odd = PPCAParams(_misaligned(params.W), _misaligned(params.mu), 0.7)
    assert not odd.W.flags.aligned  # PPCAParams keeps what it is given
    ref = PPCASums.from_block(X, params=params)
    got = compute(PPCASums.spec(params=odd), _misaligned(X))
    for name, value in ref._arrays().items():
        np.testing.assert_array_equal(got._arrays()[name], value, err_msg=name)
    assert got.loglik == ref.loglik
    m = PPCA(4, max_iter=5, tol=1e-3).fit(X)
    W, mu = m._args()[:2]
    from ddr.decomposition._latent_blocks import score_block, transform_block

    args = m._args()
    odd_args = (_misaligned(W), _misaligned(mu), *args[2:])
    np.testing.assert_array_equal(transform_block(_misaligned(X), *odd_args), m.transform(X))
    np.testing.assert_array_equal(score_block(_misaligned(X), *odd_args), m.score_samples(X))


def test_two_fits_on_the_cluster_are_bit_identical(client, rng):
    """Two undisturbed fits on the same 2-worker cluster and chunking: every fitted attribute
    and the scores bit for bit (they were 1e-14 apart, the log-likelihood 2e-9, when tasks
    multiplied arrays as their messages left them), and the same bits as the threaded
    scheduler's."""
    X, _ = low_rank(rng, n=8000, d=30, q=4)
    Xm, _ = with_missing(rng, X, 0.1)
    arr = da.from_array(Xm, chunks=(1000, -1))
    fits = []
    for _ in range(2):
        m = PPCA(4, max_iter=30, tol=0).fit(arr)
        fits.append((_fitted(m), m.transform(arr).compute(), m.score_samples(arr).compute()))
    with dask.config.set(scheduler="threads"):
        m = PPCA(4, max_iter=30, tol=0).fit(arr)
        fits.append((_fitted(m), m.transform(arr).compute(), m.score_samples(arr).compute()))
    (ref, scores, ll), *others = fits
    assert ref["n_iter_"] > 5  # tol=0: until the log-likelihood stops rising
    for attrs, got_scores, got_ll in others:
        assert attrs.keys() == ref.keys()
        for name, value in ref.items():
            np.testing.assert_array_equal(attrs[name], value, err_msg=name)
        np.testing.assert_array_equal(got_scores, scores)
        np.testing.assert_array_equal(got_ll, ll)
