"""Blockwise products in cache-sized tiles (issue 29): ``centred_product`` against numpy, and
the estimators whose predictions and transforms run through it (LDA, TruncatedSVD, PPCA and
factor analysis), tiled against whole-block references, on float32, float64 and integer
blocks and blocks of missing entries."""

from __future__ import annotations

import numpy as np
import pytest

import ddr
from ddr.decomposition._latent_blocks import _posterior_rows, score_block, transform_block
from ddr.stats._tiled import centred_product


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("n", [0, 1, 257, 5000])
def test_centred_product_is_numpys(rng, dtype, n):
    X = (rng.standard_normal((n, 30)) * 10 + 1e4).astype(dtype)
    M = rng.standard_normal((30, 7))
    shift, offset = np.full(30, 1e4) + rng.standard_normal(30), rng.standard_normal(7)
    ref = (X.astype(np.float64) - shift) @ M - offset
    out = centred_product(X, M, shift=shift, offset=offset)
    assert out.shape == (n, 7) and out.dtype == np.float64
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-10)
    plain = centred_product(X, M, dtype=np.float32)
    assert plain.dtype == np.float32
    np.testing.assert_allclose(plain, X.astype(np.float64) @ M, rtol=2e-6, atol=1e-2)


def test_centred_product_takes_strided_blocks(rng):
    X = rng.standard_normal((3000, 40))[:, ::2]
    M = rng.standard_normal((20, 3))
    np.testing.assert_allclose(centred_product(X, M), X @ M, rtol=1e-12, atol=1e-12)


@pytest.fixture(params=["PPCA", "FactorAnalysis"])
def latent(request, rng):
    # three factors and a noise scale per feature (factor analysis's scales differ)
    X = rng.standard_normal((3000, 3)) @ rng.standard_normal((3, 12)) + 50.0
    X += rng.standard_normal((3000, 12)) * np.linspace(0.5, 2.0, 12)
    model = getattr(ddr, request.param)(3).fit(X)
    return model, X


def test_latent_tiles_equal_the_row_by_row_posteriors(latent):
    """Posterior means and log-likelihoods of complete tiles (one GEMM each) equal those of
    the row-by-row path that serves tiles with missing entries; a missing entry changes
    only the tile it is in, and rows with one are solved from their observed entries."""
    model, X = latent
    args = model._args()
    post = _posterior_rows(X, *args)
    np.testing.assert_allclose(transform_block(X, *args), post.Ez, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(score_block(X, *args), post.loglik, rtol=1e-12)
    Xm = X.copy()
    Xm[[5, 2100], [1, 7]] = np.nan
    post_m = _posterior_rows(Xm, *args)
    np.testing.assert_allclose(model.transform(Xm), post_m.Ez, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model.score_samples(Xm), post_m.loglik, rtol=1e-12)
    complete = np.ones(3000, dtype=bool)
    complete[[5, 2100]] = False
    np.testing.assert_allclose(
        model.transform(Xm)[complete], model.transform(X)[complete], rtol=1e-10, atol=1e-12
    )


def test_latent_float32_blocks_are_their_float64_values(latent):
    model, X = latent
    X32 = X.astype(np.float32)
    np.testing.assert_allclose(
        model.transform(X32), model.transform(X32.astype(np.float64)), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        model.score_samples(X32), model.score_samples(X32.astype(np.float64)), rtol=1e-12
    )


def test_lda_tiles_on_offset_float32_rows(rng):
    """LDA's scores and projections of a float32 block in tiles are those of its float64
    values, computed whole in numpy (centred on the training mean first: exact on data on
    a large offset)."""
    y = np.arange(6000) % 3
    X = (rng.standard_normal((6000, 8)) + y[:, None] + 1e4).astype(np.float32)
    lda = ddr.LinearDiscriminantAnalysis().fit(X, y)
    X64 = X.astype(np.float64)
    shift, coef, intercept = lda._scores_
    jll = (X64 - shift) @ coef.T + intercept
    proba = np.exp(jll - jll.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(lda.predict_proba(X), proba, rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(lda.predict(X), lda.classes_[np.argmax(jll, axis=1)])
    Z = (X64 - lda.xbar_) @ lda.scalings_[:, : lda._max_components]
    np.testing.assert_allclose(lda.transform(X), Z, rtol=1e-10, atol=1e-10)


def test_truncated_svd_dense_tiles_keep_the_dtype(rng):
    X = rng.standard_normal((5000, 20))
    svd = ddr.TruncatedSVD(4).fit(X)
    ref = X @ svd.components_.T
    np.testing.assert_allclose(svd.transform(X), ref, rtol=1e-12, atol=1e-12)
    out32 = svd.transform(X.astype(np.float32))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(
        out32, X.astype(np.float32).astype(np.float64) @ svd.components_.T, rtol=1e-6, atol=1e-5
    )
