"""ddr.TruncatedSVD (LSA) against ARPACK and scikit-learn, on sparse word counts and dense
data: singular values, vectors, variances, passes counted, chunking, dtypes, bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg
from sklearn.decomposition import TruncatedSVD as SkTruncatedSVD

import ddr
from ddr.demo_counts import CountsSpec, counts_block, counts_truth
from ddr.testing import counting_dask_array


@pytest.fixture(scope="module")
def corpus() -> scipy.sparse.csr_matrix:
    """3000 documents x 400 words from an 8-topic model."""
    spec = CountsSpec(n_samples=3000, n_features=400, n_topics=8, doc_length=60)
    cdf = (np.cumsum(counts_truth(spec), axis=1) + np.arange(8)[:, None]).ravel()
    return counts_block(spec, cdf, 0, 3000)


def arpack(X, k):
    _, s, vt = scipy.sparse.linalg.svds(
        scipy.sparse.csr_matrix(X, dtype=np.float64), k=k, tol=0, random_state=0
    )
    order = np.argsort(s)[::-1]
    return s[order], vt[order]


def max_angle_deg(A, B):
    s = np.linalg.svd(A @ B.T, compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(s.min(), -1, 1))))


@pytest.fixture(autouse=True)
def _threads():
    with dask.config.set(scheduler="threads"):
        yield


@pytest.mark.parametrize("k", [1, 5, 12])
def test_singular_values_equal_arpack_by_default(corpus, k):
    s, vt = arpack(corpus, k)
    blocks = da.from_array(corpus, chunks=(700, -1))
    for X in (corpus, blocks):
        est = ddr.TruncatedSVD(k, random_state=0).fit(X)
        np.testing.assert_allclose(est.singular_values_, s, rtol=1e-5)
        for i in range(k):  # each vector, up to sign (ours: largest |loading| positive)
            assert abs(abs(est.components_[i] @ vt[i]) - 1) < 1e-6
        j = np.argmax(np.abs(est.components_), axis=1)
        assert (est.components_[np.arange(k), j] > 0).all()
        assert est.n_passes_ == 6


def test_explained_variance_is_scikit_learns_formula_on_the_exact_vectors(corpus):
    k = 6
    est = ddr.TruncatedSVD(k, random_state=1).fit(corpus)
    _, vt = arpack(corpus, k)
    Z = corpus @ vt.T
    # s^2 / n - (mean . v)^2 cancels about 1.5 digits of the singular values' 1e-7 here
    np.testing.assert_allclose(est.explained_variance_, np.var(Z, axis=0), rtol=1e-5)
    total = np.var(corpus.toarray(), axis=0).sum()
    np.testing.assert_allclose(est.explained_variance_ratio_, np.var(Z, axis=0) / total, rtol=1e-5)
    exact_mean = np.asarray(corpus.astype(np.float64).mean(axis=0)).ravel()
    np.testing.assert_allclose(est.mean_, exact_mean, rtol=1e-12)
    sk = SkTruncatedSVD(k, algorithm="arpack", tol=0, random_state=0).fit(corpus)
    ratio = sk.explained_variance_ratio_
    np.testing.assert_allclose(est.explained_variance_ratio_, ratio, rtol=1e-5)
    signs = np.sign(np.sum(est.components_ * vt, axis=1))
    np.testing.assert_allclose(est.components_, signs[:, None] * vt, atol=1e-6)
    # scikit-learn runs ARPACK in float32 on float32 counts: its vectors carry that round-off
    np.testing.assert_allclose(est.components_, sk.components_, atol=1e-5)
    Z, ref = est.transform(corpus), sk.transform(corpus)
    assert Z.dtype == ref.dtype == np.float32  # float32 counts give float32 scores
    np.testing.assert_allclose(Z, ref, atol=1e-5 * est.singular_values_[0])


def test_each_power_iteration_costs_one_pass_and_gains_accuracy(corpus):
    s, _ = arpack(corpus, 5)
    errors = []
    for q in range(4):
        arr, counter = counting_dask_array(corpus, chunks=(500, -1))
        est = ddr.TruncatedSVD(5, n_iter=q, random_state=0).fit(arr)
        assert counter.passes == q + 1 == est.n_passes_
        errors.append(np.max(np.abs(est.singular_values_ - s) / s))
    assert errors[3] < errors[1] < errors[0] and errors[3] < 1e-3


def test_chunking_dtype_and_form_do_not_change_the_model(corpus):
    counts = corpus.astype(np.float64)
    ref = ddr.TruncatedSVD(4, random_state=3).fit(counts)
    forms = [
        da.from_array(counts, chunks=(3000, -1)),
        da.from_array(counts, chunks=((1, 1500, 1498, 1), -1)),
        corpus.toarray(),  # float32 dense rows: float64 GEMMs
        da.from_array(corpus.toarray(), chunks=(1000, -1)),
        scipy.sparse.csc_matrix(counts),
        corpus.astype(np.int64),
    ]
    for X in forms:
        est = ddr.TruncatedSVD(4, random_state=3).fit(X)
        np.testing.assert_allclose(est.singular_values_, ref.singular_values_, rtol=1e-10)
        np.testing.assert_allclose(est.components_, ref.components_, atol=1e-10)
    # float32 sparse values are multiplied in float32 (ddr.stats._sparse.gram_product): the
    # float64 model to float32 round-off (3e-8 and 1.2e-7 here), in every chunking and form
    for X in (
        corpus,
        da.from_array(corpus, chunks=((1, 1500, 1498, 1), -1)),
        scipy.sparse.csc_matrix(corpus),
    ):
        f32 = ddr.TruncatedSVD(4, random_state=3).fit(X)
        np.testing.assert_allclose(f32.singular_values_, ref.singular_values_, rtol=1e-6)
        np.testing.assert_allclose(f32.components_, ref.components_, atol=1e-6)
        np.testing.assert_allclose(f32.mean_, ref.mean_, rtol=1e-12)
    assert f32.transform(corpus).dtype == np.float32


def test_transform_is_lazy_and_blockwise_for_sparse_blocks(corpus):
    corpus = corpus.astype(np.float64)
    est = ddr.TruncatedSVD(3, random_state=0).fit(corpus)
    arr, counter = counting_dask_array(corpus, chunks=(600, -1))
    Z = est.transform(arr)
    assert counter.passes == 0 and isinstance(Z, da.Array) and Z.chunks[0] == arr.chunks[0]
    np.testing.assert_allclose(Z.compute(), corpus @ est.components_.T, rtol=1e-12)
    assert counter.passes == 1
    back = est.inverse_transform(Z.compute())
    np.testing.assert_allclose(back, (corpus @ est.components_.T) @ est.components_, rtol=1e-12)


def test_dense_data_equal_scikit_learn_arpack():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 30)) @ np.diag(np.geomspace(10, 0.1, 30)) + 3.0
    est = ddr.TruncatedSVD(5, random_state=0).fit(X)
    sk = SkTruncatedSVD(5, algorithm="arpack", tol=0).fit(X)
    np.testing.assert_allclose(est.singular_values_, sk.singular_values_, rtol=1e-10)
    np.testing.assert_allclose(est.components_, sk.components_, atol=1e-9)
    np.testing.assert_allclose(est.explained_variance_, sk.explained_variance_, rtol=1e-8)


def test_one_pass_when_the_first_block_spans_every_feature():
    rng = np.random.default_rng(1)
    X = scipy.sparse.random(200, 8, density=0.5, format="csr", random_state=rng)
    arr, counter = counting_dask_array(X, chunks=(50, -1))
    est = ddr.TruncatedSVD(3).fit(arr)  # width min(3 + 10, 8) = 8 = n_features
    assert counter.passes == 1 and est.n_passes_ == 1
    s = np.linalg.svd(X.toarray(), compute_uv=False)[:3]
    np.testing.assert_allclose(est.singular_values_, s, rtol=1e-12)


def test_n_components_above_the_rank_limit_is_refused():
    X = scipy.sparse.random(6, 20, density=0.5, format="csr", random_state=0)
    with pytest.raises(ValueError, match=r"n_components=7 must be at most min\(n_samples=6, "):
        ddr.TruncatedSVD(7).fit(X)
    with pytest.raises(ValueError, match=r"n_components=21 must be at most min\(n_samples=6, n"):
        ddr.TruncatedSVD(21).fit(da.from_array(X, chunks=(3, -1)))
    with pytest.raises(ValueError, match="The 'n_components' parameter of TruncatedSVD must be"):
        ddr.TruncatedSVD(0).fit(X)


def test_nan_in_sparse_blocks_is_refused():
    X = scipy.sparse.random(50, 10, density=0.3, format="csr", random_state=0)
    X.data[3] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        ddr.TruncatedSVD(2).fit(X)
    with pytest.raises(ValueError, match="X contains 1 NaN and 0 infinite stored value"):
        ddr.TruncatedSVD(2).fit(da.from_array(X, chunks=(20, -1)))


# ------------------------------------------------------- scikit-learn's other algorithm
@pytest.mark.parametrize("form", ["sparse", "dense", "dask"])
def test_arpack_algorithm_is_scikit_learns(corpus, form):
    """``algorithm="arpack"``: ARPACK on the data in memory, started as scikit-learn's, so the
    fitted attributes are scikit-learn's (one read of dask input)."""
    X = corpus[:600, :120].astype(np.float64)  # scikit-learn's SVD of float32 is in float32
    ref = SkTruncatedSVD(6, algorithm="arpack", random_state=0).fit(X)
    data = {"sparse": X, "dense": X.toarray(), "dask": da.from_array(X.toarray(), chunks=(150, -1))}
    got = ddr.TruncatedSVD(6, algorithm="arpack", random_state=0).fit(data[form])
    for name in ("components_", "singular_values_", "explained_variance_"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(
        got.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-8
    )
    assert got.n_passes_ == 1
    with pytest.raises(ValueError, match="below min\\(n_samples, n_features\\)=120"):
        ddr.TruncatedSVD(120, algorithm="arpack").fit(X)
    with pytest.raises(ValueError, match="'power_iteration_normalizer' parameter"):
        ddr.TruncatedSVD(2, power_iteration_normalizer="LU").fit(X)
