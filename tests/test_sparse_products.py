"""GramProduct on scipy.sparse CSR blocks (ddr.stats._sparse): the Gram product ``X^T diag(w)
X V`` against float64 numpy on the dense rows, float32 values multiplied in float32 in runs of
rows (run bounds, long rows and overflow taking float64), the column moments against numpy,
and the TruncatedSVD of float32 counts against float64's."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse

import ddr
from ddr.demo_counts import CountsSpec, counts_block, counts_truth
from ddr.stats import GramProduct, _sparse


@pytest.fixture(scope="module")
def counts() -> scipy.sparse.csr_matrix:
    """2500 documents x 300 words from a 6-topic model, float32 counts."""
    spec = CountsSpec(n_samples=2500, n_features=300, n_topics=6, doc_length=40)
    cdf = (np.cumsum(counts_truth(spec), axis=1) + np.arange(6)[:, None]).ravel()
    return counts_block(spec, cdf, 0, 2500)


@pytest.fixture
def basis() -> np.ndarray:
    return scipy.linalg.qr(np.random.default_rng(5).standard_normal((300, 7)), mode="economic")[0]


def dense_product(X, V, w=None):
    """The float64 reference: ``X^T diag(w) X V`` of the dense rows."""
    A = X.toarray().astype(np.float64)
    return A.T @ ((A @ V) * (1.0 if w is None else w[:, None]))


@pytest.mark.parametrize("run_rows", [2048, 100])
def test_float32_values_give_the_float64_product_to_float32_round_off(
    counts, basis, run_rows, monkeypatch
):
    monkeypatch.setattr(_sparse, "F32_TERMS", run_rows)  # 100: 25 runs, every row shorter
    X = counts.copy()
    assert X.dtype == np.float32 and np.diff(X.indptr).max() < 100
    X.data[::3] *= 2.5  # not only small counts
    w = np.random.default_rng(0).integers(0, 4, X.shape[0]).astype(float)
    for weights in (None, w):
        ref = dense_product(X, basis, weights)
        got = GramProduct.from_block(X, None, weights, basis=basis).product
        assert got.dtype == np.float64
        # float32 products: each entry within float32 round-off of the largest
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6 * np.abs(ref).max())
        # float64 values: float64 products, to float64 round-off
        exact = GramProduct.from_block(X.astype(np.float64), None, weights, basis=basis).product
        np.testing.assert_allclose(exact, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
        assert not np.array_equal(got, exact)  # the float32 products ran


def test_float32_runs_do_not_depend_on_the_block_rows(counts, basis, monkeypatch):
    """Runs of rows start at the block's first row: blocks of a multiple of the run length
    give the same sums, merged in float64, as the whole block."""
    monkeypatch.setattr(_sparse, "F32_TERMS", 100)
    whole = GramProduct.from_block(counts, basis=basis)
    parts = [GramProduct.from_block(counts[i : i + 500], basis=basis) for i in range(0, 2500, 500)]
    merged = parts[0]
    for p in parts[1:]:
        merged = merged.merge(p)
    np.testing.assert_allclose(merged.product, whole.product, rtol=1e-13)
    np.testing.assert_allclose(merged.sq, whole.sq, rtol=1e-11)
    exact = GramProduct.from_block(counts.astype(np.float64), basis=basis)
    assert not np.array_equal(whole.product, exact.product)  # the float32 products ran


def test_float32_rows_longer_than_a_run_take_float64(basis, monkeypatch):
    """A row of more stored values than F32_TERMS (its X V entry would be a longer float32 sum)
    takes the float64 products: the same bits as float64 values."""
    monkeypatch.setattr(_sparse, "F32_TERMS", 20)
    rng = np.random.default_rng(1)
    X = scipy.sparse.random(40, 300, density=0.05, format="csr", random_state=rng)
    X = X.astype(np.float32)
    assert np.diff(X.indptr).max() > 20
    got = GramProduct.from_block(X, basis=basis, moments=False).product
    want = GramProduct.from_block(X.astype(np.float64), basis=basis, moments=False).product
    np.testing.assert_array_equal(got, want)


def test_a_float32_sum_that_overflows_takes_float64(basis):
    """Values near float32's largest: the float32 product overflows, float64's does not."""
    X = scipy.sparse.csr_matrix(np.full((3, 300), 3e37, dtype=np.float32))
    got = GramProduct.from_block(X, basis=basis, moments=False).product
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, dense_product(X, basis), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_column_moments_are_numpys(counts, dtype):
    X = counts.astype(dtype)
    A = X.toarray().astype(np.float64) + 0.0
    for w in (None, np.random.default_rng(2).integers(0, 3, X.shape[0]).astype(float)):
        stat = GramProduct.from_block(X, None, w, basis=np.eye(300)[:, :2])
        weights = np.ones(X.shape[0]) if w is None else w
        mean = np.average(A, axis=0, weights=weights)
        np.testing.assert_allclose(stat.mean, mean, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(stat.sq, weights @ (A - mean) ** 2, rtol=1e-11, atol=1e-12)
        assert stat.count == weights.sum()


def test_column_moments_of_offset_values_keep_their_digits():
    """Stored values on a 1e8 offset (and implicit zeros): the centred sums, not
    sum(x^2) - n mean^2, which would lose every digit."""
    rng = np.random.default_rng(3)
    A = np.where(rng.random((400, 5)) < 0.9, 1e8 + rng.standard_normal((400, 5)), 0.0)
    A[:, 0] = 1e8 + rng.standard_normal(400)  # a column with no zeros
    stat = GramProduct.from_block(scipy.sparse.csr_matrix(A), basis=np.eye(5))
    np.testing.assert_allclose(stat.mean, A.mean(axis=0), rtol=1e-15)
    np.testing.assert_allclose(stat.sq, ((A - A.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-9)


def test_empty_and_zero_weight_blocks_have_no_moments(basis):
    X = scipy.sparse.csr_matrix((0, 300), dtype=np.float32)
    empty = GramProduct.from_block(X, basis=basis)
    assert empty.count == 0 and not empty.mean.any() and not empty.product.any()
    rows = scipy.sparse.random(5, 300, density=0.1, format="csr", random_state=0, dtype=np.float32)
    zero = GramProduct.from_block(rows, None, np.zeros(5), basis=basis)
    assert zero.count == 0 and not zero.sq.any() and not zero.product.any()


def test_sparse_blocks_with_a_basis_of_the_wrong_shape_or_nan_are_refused(basis):
    X = scipy.sparse.random(5, 300, density=0.1, format="csr", random_state=0, dtype=np.float32)
    with pytest.raises(ValueError, match=r"basis must have shape \(n_features=300, n_basis\)"):
        GramProduct.from_block(X, basis=basis[:299])
    X.data[0] = np.nan
    with pytest.raises(ValueError, match=r"^X contains 1 NaN and 0 infinite stored value\(s\)$"):
        GramProduct.from_block(X, basis=basis)


def test_truncated_svd_of_float32_counts_is_float64s_to_1e_6(counts):
    """The float32 products inside a whole fit (6 passes, blocks of 600 rows): singular
    values, vectors (subspace angles) and variance ratios of the float64 fit."""
    with dask.config.set(scheduler="threads"):
        X = da.from_array(counts, chunks=(600, -1))
        f32 = ddr.TruncatedSVD(8, random_state=0).fit(X)
        f64 = ddr.TruncatedSVD(8, random_state=0).fit(X.astype(np.float64))
    np.testing.assert_allclose(f32.singular_values_, f64.singular_values_, rtol=1e-6)
    angles = scipy.linalg.subspace_angles(f32.components_.T, f64.components_.T)
    assert angles.max() < 1e-5
    for i in range(8):  # each vector, not only the subspace
        assert abs(f32.components_[i] @ f64.components_[i] - 1) < 1e-10
    np.testing.assert_allclose(
        f32.explained_variance_ratio_, f64.explained_variance_ratio_, rtol=1e-5
    )


def test_float64_values_give_scipys_products_bit_for_bit(counts, basis):
    X = counts.astype(np.float64)
    w = np.random.default_rng(4).integers(0, 4, X.shape[0]).astype(float)
    for weights in (None, w):
        XV = X @ basis
        want = X.T @ (XV if weights is None else XV * weights[:, None])
        got = GramProduct.from_block(X, None, weights, basis=basis).product
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_without_scipys_kernels_the_public_products_give_the_same(
    counts, basis, dtype, monkeypatch
):
    """A scipy whose compiled kernels cannot be imported: its public products, same bits."""
    X = counts.astype(dtype)
    want = _sparse.gram_product(X, basis, None)
    monkeypatch.setattr(_sparse, "_csr_matvecs", None)
    monkeypatch.setattr(_sparse, "_csc_matvecs", None)
    np.testing.assert_array_equal(_sparse.gram_product(X, basis, None), want)
