"""Frequency weights (issue 32, item 3) in PCA, CCA, PLSSVD, LDA, QDA, PPCA, FactorAnalysis and
TruncatedSVD: a weight of w gives the model of the row repeated w times (0: without it), from
numpy and from dask weights chunked otherwise than X, in fit and partial_fit, with missing
values (the EM over the data weighs every E-step) and on sparse rows; weights summing to zero
refused. The statistics under them (PairwiseMoments, PPCASums, GramProduct) are checked
alike. (The naive Bayes family, the densities and StandardScaler had weights already;
scikit-learn's own weight checks run on all of them in the common suite.)"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import ddr
from ddr.stats import GramProduct, PairwiseMoments
from ddr.stats.ppca_sums import PPCAParams, PPCASums


def _data(rng, n=80, d=4):
    X = rng.normal(size=(n, d)) @ (np.eye(d) + 0.3 * rng.normal(size=(d, d))) + 50.0
    Y = X[:, :2] @ rng.normal(size=(2, 3)) + rng.normal(size=(n, 3))
    y = np.repeat(np.arange(3), -(-n // 3))[:n]
    w = rng.integers(0, 4, size=n)
    w[:3] = (0, 2, 3)  # a row dropped, a row doubled, a row tripled
    return X, Y, y, w


def _same(a, b, rtol=1e-12):
    for name, value in vars(a).items():
        if "loglik" in name:  # an EM trace: its length is the iterations to the tolerance
            continue
        if name.endswith("_") and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            scale = np.max(np.abs(value[np.isfinite(value)]), initial=1.0)
            got = getattr(b, name)
            np.testing.assert_allclose(got, value, rtol=rtol, atol=rtol * scale, err_msg=name)


CASES = {
    "PCA": (lambda: ddr.PCA(3), "X"),
    "CCA": (lambda: ddr.CCA(2), "XY"),
    "PLSSVD": (lambda: ddr.PLSSVD(2), "XY"),
    "LDA-svd": (lambda: ddr.LinearDiscriminantAnalysis(), "Xy"),
    "LDA-lsqr-shrinkage": (
        lambda: ddr.LinearDiscriminantAnalysis(solver="lsqr", shrinkage=0.2),
        "Xy",
    ),
    "QDA": (lambda: ddr.QuadraticDiscriminantAnalysis(), "Xy"),
    "PPCA-closed-form": (lambda: ddr.PPCA(2, solver="closed_form"), "X"),
    "PPCA-em": (lambda: ddr.PPCA(2), "X"),
    "PPCA-em-random": (
        lambda: ddr.PPCA(2, init="random", random_state=0, tol=1e-12, max_iter=5000),
        "X",
    ),
    "FactorAnalysis": (lambda: ddr.FactorAnalysis(2), "X"),
    "TruncatedSVD-one-pass": (lambda: ddr.TruncatedSVD(2, n_oversamples=2), "X"),
    "TruncatedSVD-randomized": (lambda: ddr.TruncatedSVD(2, n_iter=4, random_state=0), "X"),
    "TruncatedSVD-arpack": (lambda: ddr.TruncatedSVD(2, algorithm="arpack", random_state=0), "X"),
}
#: EM and the profile-likelihood start stop at a tolerance: the model of the repeated rows
#: and the weighted one agree to it, not to round-off
RTOL = {"FactorAnalysis": 1e-8, "PPCA-em-random": 1e-7}
# the uncentred SVD's variances subtract the squared mean of data at an offset of 50
RTOL.update(dict.fromkeys([k for k in CASES if k.startswith("TruncatedSVD")], 1e-9))


def _args(kind, X, Y, y):
    return {"X": (X,), "XY": (X, Y), "Xy": (X, y)}[kind]


@pytest.mark.parametrize("name", list(CASES))
def test_a_weight_is_the_row_repeated(name, rng):
    make, kind = CASES[name]
    X, Y, y, w = _data(rng)
    repeated = make().fit(*(np.repeat(a, w, axis=0) for a in _args(kind, X, Y, y)))
    weighted = make().fit(*_args(kind, X, Y, y), sample_weight=w)
    rtol = RTOL.get(name, 1e-12)
    _same(repeated, weighted, rtol)
    # dask rows and weights chunked differently: the weights follow the rows
    Xd = da.from_array(X, chunks=(13, -1))
    args = _args(kind, Xd, da.from_array(Y, chunks=(29, -1)), da.from_array(y, chunks=17))
    _same(repeated, make().fit(*args, sample_weight=da.from_array(w, chunks=31)), rtol)


@pytest.mark.parametrize("name", ["PCA", "CCA", "LDA-svd", "QDA", "TruncatedSVD-one-pass"])
def test_weighted_batches_merge_into_the_weighted_fit(name, rng):
    make, kind = CASES[name]
    X, Y, y, w = _data(rng)
    whole = make().fit(*_args(kind, X, Y, y), sample_weight=w)
    est = make()
    extra = {"classes": np.arange(3)} if kind == "Xy" else {}
    for rows in (slice(40, 80), slice(0, 40)):
        est.partial_fit(*(a[rows] for a in _args(kind, X, Y, y)), sample_weight=w[rows], **extra)
    _same(whole, est)


@pytest.mark.parametrize("name", list(CASES))
def test_weights_summing_to_zero_are_refused(name, rng):
    make, kind = CASES[name]
    X, Y, y, _ = _data(rng)
    owner = type(make()).__name__
    with pytest.raises(ValueError, match=f"^{owner}: the sample weights are all zero; at least"):
        make().fit(*_args(kind, X, Y, y), sample_weight=np.zeros(len(X)))


def test_pca_weights_need_the_covariance_solver(rng):
    X, _, _, w = _data(rng)
    with pytest.raises(
        ValueError,
        match=r"^sample_weight needs the covariance solver \(svd_solver='covariance_eigh', "
        r"or 'auto' with n_features <= \d+\); got svd_solver='randomized' with n_features=4$",
    ):
        ddr.PCA(2, svd_solver="randomized").fit(X, sample_weight=w)
    fractional = ddr.PCA(2).fit(X, sample_weight=np.full(len(X), 0.5))
    assert fractional.n_samples_ == 40 and isinstance(fractional.n_samples_, int)
    assert ddr.PCA(2).fit(X, sample_weight=np.full(len(X), 0.25)).n_samples_ == 20
    assert ddr.PCA(1).fit(X[:3], sample_weight=[0.5, 0.5, 1.25]).n_samples_ == 2.25


@pytest.mark.parametrize(
    "make",
    [
        lambda: ddr.PPCA(2, tol=1e-13, max_iter=5000),
        lambda: ddr.FactorAnalysis(2, tol=1e-13, max_iter=5000),
    ],
    ids=["PPCA", "FactorAnalysis"],
)
def test_weights_with_missing_values_weigh_every_em_pass(make, rng):
    """With NaN the E-steps read the data: each pass weighs the rows as the start did."""
    _, _, _, w = _data(rng, n=90, d=5)
    # two factors and noise of each feature's own: no Heywood case, where EM crawls along
    # a flat likelihood and two runs stop at points the tolerance does not tell apart
    X = rng.normal(size=(90, 2)) @ rng.normal(size=(2, 5)) + rng.normal(size=(90, 5)) * 0.7
    X[rng.random(X.shape) < 0.15] = np.nan
    repeated = make().fit(np.repeat(X, w, axis=0))
    weighted = make().fit(da.from_array(X, chunks=(20, -1)), sample_weight=w)
    scale = np.abs(repeated.get_covariance()).max()
    np.testing.assert_allclose(
        weighted.get_covariance(), repeated.get_covariance(), atol=1e-8 * scale
    )
    np.testing.assert_allclose(weighted.mean_, repeated.mean_, atol=1e-8)


def test_truncated_svd_weights_on_sparse_rows(rng):
    X = sp.random(80, 6, density=0.4, random_state=1, format="csr") * 3.0
    w = rng.integers(0, 4, size=80)
    dense_repeat = sp.csr_matrix(np.repeat(X.toarray(), w, axis=0))
    for make in (
        lambda: ddr.TruncatedSVD(2, n_oversamples=4),
        lambda: ddr.TruncatedSVD(2, algorithm="arpack", random_state=0),
    ):
        _same(make().fit(dense_repeat), make().fit(X, sample_weight=w))


def _repeat(X, w):
    return np.repeat(X, w.astype(int), axis=0)


@pytest.mark.parametrize("missing", [False, True], ids=["complete", "missing"])
def test_weighted_statistics_are_the_rows_repeated(missing, rng):
    X = rng.normal(size=(60, 4)) + 100.0
    if missing:
        X[rng.random(X.shape) < 0.2] = np.nan
    w = rng.integers(0, 4, size=60).astype(float)
    a, b = PairwiseMoments.from_block(_repeat(X, w)), PairwiseMoments.from_block(X, None, w)
    np.testing.assert_allclose(b.covariance(), a.covariance(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.pair_count, a.pair_count)
    assert b.total_weight == a.total_weight == w.sum() and b.complete == (not missing)
    for s2 in (1.3, np.linspace(0.5, 2.0, 4)):  # isotropic and diagonal noise
        params = PPCAParams(rng.normal(size=(4, 2)), np.full(4, 100.0), s2)
        a = PPCASums.from_block(_repeat(X, w), params=params)
        b = PPCASums.from_block(X, None, w, params=params)
        for field in ("count", "yz", "yy", "zz_total", "zz_feature"):
            np.testing.assert_allclose(getattr(b, field), getattr(a, field), rtol=1e-12)
        assert b.loglik == pytest.approx(a.loglik, rel=1e-13)
    if not missing:
        basis = rng.normal(size=(4, 2))
        for rows in (X, sp.csr_matrix(np.where(rng.random(X.shape) < 0.5, 0.0, X))):
            dense = rows.toarray() if sp.issparse(rows) else rows
            a = GramProduct.from_block(_repeat(dense, w), basis=basis)
            b = GramProduct.from_block(rows, None, w, basis=basis)
            np.testing.assert_allclose(b.product, a.product, rtol=1e-12)
            np.testing.assert_allclose(b.mean, a.mean, rtol=1e-12)
            np.testing.assert_allclose(b.sq, a.sq, rtol=1e-9)
            assert b.count == a.count


@pytest.mark.parametrize("algorithm", ["exact", "binned"])
def test_kde_weights_are_rows_repeated_at_a_numeric_bandwidth(algorithm, rng):
    """(The rule bandwidths use Kish's effective sample size, as scipy's: there weights are
    reliability weights, documented, and the common suite's check is expected to fail.)"""
    X = rng.normal(size=(70, 2)) + 10.0
    w = rng.integers(0, 4, size=70)
    Q = X[:25] + 0.1
    make = lambda: ddr.KernelDensity(bandwidth=0.4, algorithm=algorithm)  # noqa: E731
    ref = make().fit(np.repeat(X, w, axis=0)).score_samples(Q)
    got = make().fit(da.from_array(X, chunks=(20, -1)), sample_weight=w).score_samples(Q)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-10)
