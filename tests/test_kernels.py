"""Kernels (scikit-learn's formulas) and the out-of-core Nystrom building blocks."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.metrics.pairwise import laplacian_kernel, pairwise_kernels

from ddr.linalg.kernels import KERNELS, KernelNotPSDWarning, make_kernel, pairwise_kernel
from ddr.linalg.nystrom import (
    NystromMoments,
    fit_nystrom,
    kernel_scores,
    sample_rows,
    select_landmarks,
)
from ddr.stats import Moments, compute
from ddr.testing import counting_dask_array


def spec(kernel, d, **kw):
    params = {"gamma": None, "degree": 3, "coef0": 1.0} | kw
    return make_kernel(kernel, n_features=d, **params)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("gamma", [None, 0.37])
def test_kernels_equal_sklearn(rng, kernel, gamma):
    X, Y = rng.standard_normal((40, 6)), rng.standard_normal((25, 6))
    s = spec(kernel, 6, gamma=gamma, degree=2, coef0=0.5)
    if kernel == "laplacian":
        ref, ref_xx = laplacian_kernel(X, Y, gamma=s.gamma), laplacian_kernel(X, gamma=s.gamma)
    else:
        kw = {"gamma": s.gamma, "degree": 2, "coef0": 0.5}
        ref = pairwise_kernels(X, Y, metric=kernel, filter_params=True, **kw)
        ref_xx = pairwise_kernels(X, metric=kernel, filter_params=True, **kw)
    np.testing.assert_allclose(pairwise_kernel(X, Y, s), ref, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(pairwise_kernel(X, None, s), ref_xx, rtol=1e-13, atol=1e-14)
    assert s.gamma == (1 / 6 if gamma is None else gamma)


def test_callable_kernel_and_params(rng):
    X = rng.standard_normal((10, 3))

    def scaled_linear(A, B, scale=1.0):
        return scale * A @ B.T

    s = make_kernel(
        scaled_linear, gamma=None, degree=3, coef0=1, n_features=3, kernel_params={"scale": 2.0}
    )
    np.testing.assert_allclose(pairwise_kernel(X, X[:4], s), 2 * X @ X[:4].T)
    bad = make_kernel(lambda A, B: A @ B[:1].T, gamma=None, degree=3, coef0=1, n_features=3)
    with pytest.raises(ValueError, match=r"returned shape \(10, 1\); expected \(10, 4\)"):
        pairwise_kernel(X, X[:4], bad)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"gamma": 0.0}, ValueError, r"gamma must be positive .*got gamma=0.0"),
        ({"gamma": -1.0}, ValueError, r"gamma must be positive .*got gamma=-1.0"),
        ({"gamma": "big"}, TypeError, r"gamma must be a positive float or None; got 'big'"),
        ({"degree": -2}, ValueError, r"degree must be non-negative; got degree=-2"),
        ({"kernel": "gaussian"}, ValueError, r"kernel must be one of \['cosine', .*'gaussian'"),
        ({"kernel": 3}, TypeError, r"kernel must be a string or a callable; got int"),
        ({"kernel_params": {"a": 1}}, ValueError, r"kernel_params are passed to a callable"),
    ],
)
def test_bad_kernel_parameters(kwargs, exc, match):
    params = {"kernel": "rbf", "gamma": None, "degree": 3, "coef0": 1.0} | kwargs
    with pytest.raises(exc, match=match):
        make_kernel(n_features=4, **params)


def test_nystrom_map_is_exact_against_landmarks(rng):
    """phi(x)^T phi(l) = k(x, l) for every landmark l: the defining property of the map."""
    X = rng.standard_normal((300, 4))
    s = spec("rbf", 4, gamma=0.3)
    fmap = fit_nystrom(X[:60], s)
    approx = fmap.transform(X) @ fmap.transform(X[:60]).T
    np.testing.assert_allclose(approx, pairwise_kernel(X, X[:60], s), atol=1e-9)
    assert np.all(np.diff(fmap.eigenvalues) <= 0) and fmap.eigenvalues.min() > 0


def test_tiny_eigenvalues_are_dropped_not_amplified(rng):
    # duplicated landmarks make K_LL exactly singular: the map keeps the numerical rank
    L = np.repeat(rng.standard_normal((20, 3)), 2, axis=0)
    fmap = fit_nystrom(L, spec("rbf", 3, gamma=0.5))
    assert fmap.n_features_out == 20
    assert np.isfinite(fmap.normalization).all()


def test_not_psd_callable_warns_and_clips(rng):
    X = rng.standard_normal((50, 3))

    def neg_rbf(A, B):
        return -np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)) + 2 * np.eye(
            len(A), len(B)
        )

    s = make_kernel(neg_rbf, gamma=None, degree=3, coef0=1, n_features=3)
    with pytest.warns(KernelNotPSDWarning, match=r"not positive semi-definite.*clipped to zero"):
        fmap = fit_nystrom(X, s)
    assert fmap.eigenvalues.min() > 0 and fmap.n_features_out < 50


def test_nystrom_moments_chunking_invariant(rng):
    X = rng.standard_normal((1000, 5)) + 30
    fmap = fit_nystrom(X[::25], spec("rbf", 5, gamma=0.2))
    ref = Moments.from_block(fmap.transform(X))
    for chunks in ((1000, -1), (137, -1), ((1, 999), -1)):
        got = compute(NystromMoments.spec(feature_map=fmap), da.from_array(X, chunks=chunks))
        assert isinstance(got, NystromMoments)
        scale = np.abs(ref.mean).max()
        np.testing.assert_allclose(got.mean, ref.mean, rtol=1e-10, atol=1e-12 * scale)
        scale = np.abs(ref.scatter).max()
        np.testing.assert_allclose(got.scatter, ref.scatter, rtol=1e-10, atol=1e-12 * scale)


def test_landmarks_read_at_most_one_pass(rng):
    X = rng.standard_normal((2000, 3))
    arr, counter = counting_dask_array(X, chunks=(250, -1))
    with dask.config.set(scheduler="threads"):
        L = select_landmarks(arr, 40, "uniform", np.random.default_rng(0))
        assert counter.passes <= 1.0
        counter.reset()
        K = select_landmarks(arr, 40, "kmeans++", np.random.default_rng(0))
        assert counter.passes <= 1.0
    rows = {tuple(r) for r in X}
    assert all(tuple(r) in rows for r in L) and all(tuple(r) in rows for r in K)
    assert len({tuple(r) for r in L}) == 40
    np.testing.assert_array_equal(sample_rows(arr, np.array([3, 700])), X[[3, 700]])
    # only the chunks holding the rows are read
    counter.reset()
    with dask.config.set(scheduler="sync"):
        sample_rows(arr, np.array([3, 7]))
    assert counter.passes == pytest.approx(250 / 2000)


def test_kmeans_landmarks_cover_clusters(rng):
    # 4 tight clusters, one 50 times smaller: uniform sampling of 8 rows may miss it,
    # k-means++ seeding on the sample does not
    centres = np.array([[0, 0], [10, 0], [0, 10], [10, 10.0]])
    sizes = [2000, 2000, 2000, 40]
    X = np.vstack(
        [c + 0.1 * rng.standard_normal((s, 2)) for c, s in zip(centres, sizes, strict=True)]
    )
    L = select_landmarks(X, 8, "kmeans++", np.random.default_rng(1), sample_size=6040)
    nearest = np.linalg.norm(L[:, None] - centres[None], axis=-1).argmin(axis=1)
    assert set(nearest) == {0, 1, 2, 3}


def test_kernel_scores_row_mean_term(rng):
    X, C = rng.standard_normal((30, 3)), rng.standard_normal((10, 3))
    coef, off, rm = rng.standard_normal((10, 2)), rng.standard_normal(2), rng.standard_normal(2)
    s = spec("rbf", 3)
    K = pairwise_kernel(X, C, s)
    np.testing.assert_allclose(
        kernel_scores(X, C, coef, off, s, rm), K @ coef - off - K.mean(1)[:, None] * rm, rtol=1e-13
    )
