"""Frequency weights (issue 32, item 3) in PCA, CCA, PLSSVD, LDA and QDA: a weight of w gives
the model of the row repeated w times (0: without it), from numpy and from dask weights
chunked otherwise than X, in fit and partial_fit; weights summing to zero refused. (The
naive Bayes family, the densities and StandardScaler had weights already; scikit-learn's
own weight checks run on all of them in the common suite.)"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import ddr


def _data(rng, n=80, d=4):
    X = rng.normal(size=(n, d)) @ (np.eye(d) + 0.3 * rng.normal(size=(d, d))) + 50.0
    Y = X[:, :2] @ rng.normal(size=(2, 3)) + rng.normal(size=(n, 3))
    y = np.repeat(np.arange(3), -(-n // 3))[:n]
    w = rng.integers(0, 4, size=n)
    w[:3] = (0, 2, 3)  # a row dropped, a row doubled, a row tripled
    return X, Y, y, w


def _same(a, b, rtol=1e-12):
    for name, value in vars(a).items():
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
}


def _args(kind, X, Y, y):
    return {"X": (X,), "XY": (X, Y), "Xy": (X, y)}[kind]


@pytest.mark.parametrize("name", list(CASES))
def test_a_weight_is_the_row_repeated(name, rng):
    make, kind = CASES[name]
    X, Y, y, w = _data(rng)
    repeated = make().fit(*(np.repeat(a, w, axis=0) for a in _args(kind, X, Y, y)))
    weighted = make().fit(*_args(kind, X, Y, y), sample_weight=w)
    _same(repeated, weighted)
    # dask rows and weights chunked differently: the weights follow the rows
    Xd = da.from_array(X, chunks=(13, -1))
    args = _args(kind, Xd, da.from_array(Y, chunks=(29, -1)), da.from_array(y, chunks=17))
    _same(repeated, make().fit(*args, sample_weight=da.from_array(w, chunks=31)))


@pytest.mark.parametrize("name", ["PCA", "CCA", "LDA-svd", "QDA"])
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
