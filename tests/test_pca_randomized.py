"""The randomized PCA solver: the CentredProduct statistic, passes, default accuracy on
benchmark-like data and scikit-learn's digits, 100 000 columns, float32, offsets."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA as SkPCA

from ddr.decomposition.pca import PCA
from ddr.linalg.randomized import lazy_pass
from ddr.stats import compute, statistic_from_dict
from ddr.stats.sketch import CentredProduct
from ddr.testing import counting_dask_array


def principal_angle_deg(A, B):
    """Largest principal angle between the row spaces of A and B (k x d), sine form."""
    qa, _ = np.linalg.qr(np.asarray(A, dtype=np.float64).T)
    qb, _ = np.linalg.qr(np.asarray(B, dtype=np.float64).T)
    s = np.linalg.norm(qb - qa @ (qa.T @ qb), 2)
    return float(np.degrees(np.arcsin(min(1.0, s))))


def exact_top(X, k=10):
    """Float64 two-pass reference: top-k components (k, d) and variances (ddof=1)."""
    X = np.asarray(X, dtype=np.float64)
    Xc = X - X.mean(axis=0)
    _, s, vt = np.linalg.svd(Xc, full_matrices=False)
    return vt[:k], (s**2 / (X.shape[0] - 1))[:k]


def benchmark_like(rng, n=20000, d=200, dtype=np.float32):
    """The benchmark generator's model (ddr.demo): rank-10 signal with variances 100 ... 4,
    5 class offsets in the signal subspace, unit noise, feature means N(0, 5^2)."""
    q, _ = np.linalg.qr(rng.standard_normal((d, 10)))
    z = rng.standard_normal((n, 10)) * np.sqrt(np.geomspace(100.0, 4.0, 10))
    z += rng.normal(0.0, 1.5, size=(5, 10))[rng.integers(0, 5, size=n)]
    X = z @ q.T + rng.standard_normal((n, d)) + rng.normal(0.0, 5.0, size=d)
    return X.astype(dtype)


def exact_centred_product(X, V):
    """The rows centred in long double (as float64) and ``Xc^T Xc V``."""
    Xl = np.asarray(X, dtype=np.longdouble)
    Xc = np.asarray(Xl - Xl.mean(axis=0), dtype=np.float64)
    return Xc, Xc.T @ (Xc @ V)


# ---------------------------------------------------------------- the product statistic
def test_centred_product_matches_definition_and_merges_in_any_tree(rng):
    X = rng.standard_normal((900, 7)) * np.arange(1, 8) + 1e8
    V = np.linalg.qr(rng.standard_normal((7, 3)))[0]
    Xc, ref = exact_centred_product(X, V)
    whole = CentredProduct.from_block(X, basis=V)
    np.testing.assert_allclose(whole.product, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(whole.sq, (Xc**2).sum(axis=0), rtol=1e-9)
    for chunks in ((1, -1), (100, -1), ((5, 895), -1)):
        got = compute(CentredProduct.spec(basis=V), da.from_array(X, chunks=chunks), split_every=3)
        np.testing.assert_allclose(got.product, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
        assert got.count == 900 and got.n_rows == 900
    centred = CentredProduct.from_block(X, basis=V, center=whole.mean)
    np.testing.assert_allclose(centred.product, whole.product, rtol=1e-10, atol=1e-6)
    # frequency weights are repeated rows
    w = rng.integers(0, 3, size=900)
    weighted = CentredProduct.from_block(X, basis=V, sample_weight=w)
    repeated = CentredProduct.from_block(np.repeat(X, w, axis=0), basis=V)
    np.testing.assert_allclose(weighted.product, repeated.product, rtol=1e-8, atol=1e-6)
    light = CentredProduct.from_block(X, basis=V, center=whole.mean, diagonal=False)
    np.testing.assert_allclose(light.product, whole.product, rtol=1e-10, atol=1e-6)
    assert light.sq.size == 0 and light.merge(whole).sq.size == 0
    with pytest.raises(ValueError, match="total_variance needs the diagonal"):
        light.total_variance()
    assert whole.total_variance(ddof=1) == pytest.approx(X.var(axis=0, ddof=1).sum(), rel=1e-9)
    back = statistic_from_dict(whole.to_dict())
    np.testing.assert_array_equal(back.product, whole.product)
    with pytest.raises(ValueError, match=r"basis must have shape \(n_features=7, n_basis\)"):
        CentredProduct.from_block(X, basis=V[:5])
    with pytest.raises(ValueError, match="both must use the same basis"):
        whole.merge(CentredProduct.from_block(X, basis=V[:, :2]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_centred_product_of_a_drifting_block(rng, dtype):
    # without a centre the block is centred on its first rows' mean; on a trend across the
    # block (first rows far from the block mean) the product still holds to round-off
    n, d = 30_000, 6
    offset = 1e8 if dtype == np.float64 else 1e3
    trend = np.linspace(0, 50, n)[:, None] * rng.standard_normal(d)
    X = (offset + trend + rng.standard_normal((n, d))).astype(dtype)
    V = np.linalg.qr(rng.standard_normal((d, 3)))[0]
    Xc, ref = exact_centred_product(X, V)
    got = CentredProduct.from_block(X, basis=V)
    np.testing.assert_allclose(got.product, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
    np.testing.assert_allclose(got.sq, (Xc**2).sum(axis=0), rtol=1e-10)
    mean = np.asarray(np.asarray(X, dtype=np.longdouble).mean(axis=0), np.float64)
    np.testing.assert_allclose(got.mean, mean, rtol=1e-14)


def test_basis_is_one_graph_key_not_embedded_in_every_task():
    """A 16 MB basis (d = 100 000) must reach each worker once, not once per block task."""
    from dask.core import get_dependencies

    X = da.zeros((100, 500), chunks=(10, -1))
    V = np.ones((500, 3))
    pass_ = lazy_pass(X, V, None)
    graph = dict(pass_.__dask_graph__())
    values = {k: getattr(v, "value", v) for k, v in graph.items()}  # unwrap dask DataNodes
    basis_keys = [k for k, v in values.items() if isinstance(v, np.ndarray) and v.shape == V.shape]
    assert len(basis_keys) == 1
    blocks = [k for k in graph if isinstance(k, tuple) and str(k[0]).startswith("ddr-stats-block")]
    assert len(blocks) == 10
    for key in blocks:
        assert basis_keys[0] in get_dependencies(graph, key)


# --------------------------------------------------------------------------------- passes
@pytest.mark.parametrize("q", [0, 1, 3])
def test_passes_are_iterated_power_plus_one(rng, q):
    """Acceptance: at most iterated_power + 2 passes (it makes iterated_power + 1)."""
    X = benchmark_like(rng, n=4000, d=100)
    arr, counter = counting_dask_array(X, chunks=(500, -1))
    with dask.config.set(scheduler="threads"):
        pca = PCA(10, svd_solver="randomized", iterated_power=q, random_state=0).fit(arr)
    assert counter.passes == q + 1 <= q + 2
    assert pca.n_passes_ == q + 1


def test_stops_when_the_krylov_space_is_complete(rng):
    """With d = 50 and blocks of 20, three blocks span R^50: S is then known exactly."""
    X = benchmark_like(rng, n=2000, d=50, dtype=np.float64)
    arr, counter = counting_dask_array(X, chunks=(500, -1))
    with dask.config.set(scheduler="threads"):
        pca = PCA(10, svd_solver="randomized", iterated_power=5, random_state=0).fit(arr)
    assert counter.passes == 3 == pca.n_passes_
    ref = PCA(10, svd_solver="full").fit(X)
    np.testing.assert_allclose(pca.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(pca.explained_variance_, ref.explained_variance_, rtol=1e-12)


# ------------------------------------------------------------------- default accuracy
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_default_accuracy_on_benchmark_like_data(rng, dtype):
    """Acceptance: top-10 angle below 0.1 degree, variances within 1e-6, default parameters."""
    X = benchmark_like(rng, dtype=dtype)
    comps, ev = exact_top(X)
    arr = da.from_array(X, chunks=(2500, -1))
    for seed in range(3):
        pca = PCA(10, svd_solver="randomized", random_state=seed).fit(arr)
        assert principal_angle_deg(pca.components_, comps) < 0.01
        np.testing.assert_allclose(pca.explained_variance_, ev, rtol=1e-6)
        assert pca.n_passes_ == 4


def test_default_accuracy_on_digits():
    """Acceptance on real data: scikit-learn's bundled digits (1797 x 64, slow spectral decay)."""
    X = load_digits().data
    ref = SkPCA(10, svd_solver="full").fit(X)
    for seed in range(5):
        pca = PCA(10, svd_solver="randomized", random_state=seed).fit(X)
        assert principal_angle_deg(pca.components_, ref.components_) < 0.1
        np.testing.assert_allclose(pca.explained_variance_, ref.explained_variance_, rtol=1e-6)
        np.testing.assert_allclose(pca.components_, ref.components_, atol=1e-5)  # same signs


def test_beats_svd_compressed_in_float32_with_fewer_passes(rng):
    """Re-orthonormalised block Krylov in 3 passes against dask's svd_compressed (q=2: 6
    passes, no re-orthonormalisation) on the same centred float32 data."""
    X = benchmark_like(rng, n=20000, d=100)
    comps, _ = exact_top(X)
    arr = da.from_array(X, chunks=(2500, -1))
    ours = PCA(10, svd_solver="randomized", iterated_power=2, random_state=0).fit(arr)
    _, _, vt = da.linalg.svd_compressed(arr - arr.mean(axis=0), k=10, n_power_iter=2, seed=0)
    theirs = principal_angle_deg(vt.compute(), comps)
    mine = principal_angle_deg(ours.components_, comps)
    assert mine * 10 < theirs


# -------------------------------------------------------------------------- wide data
def test_one_hundred_thousand_columns(rng):
    """Acceptance: d = 100 000 works (a d x d matrix would need 80 GB) in q + 1 passes."""
    n, d = 60, 100_000
    signal = rng.standard_normal((n, 5)) * np.array([20.0, 15.0, 10.0, 6.0, 4.0])
    X = signal @ rng.standard_normal((5, d)) / np.sqrt(d) * 30 + rng.standard_normal((n, d))
    comps, ev = exact_top(X, k=5)
    arr, counter = counting_dask_array(X, chunks=(20, -1))
    with dask.config.set(scheduler="threads"):
        pca = PCA(5, random_state=0).fit(arr)  # auto -> randomized for d > 2048
    assert pca.solver_ == "randomized"
    assert counter.passes == pca.iterated_power + 1
    assert principal_angle_deg(pca.components_, comps) < 0.01
    np.testing.assert_allclose(pca.explained_variance_, ev, rtol=1e-6)
    Z = pca.transform(arr)
    assert isinstance(Z, da.Array) and Z.shape == (n, 5)
    with dask.config.set(scheduler="threads"):
        np.testing.assert_allclose(Z.compute(), (X - X.mean(axis=0)) @ pca.components_.T)


# -------------------------------------------------------------- fractions, offsets, seeds
def test_fraction_of_variance(rng):
    X = benchmark_like(rng, n=5000, d=80, dtype=np.float64)
    ref = PCA(0.8, svd_solver="covariance_eigh").fit(X)
    got = PCA(0.8, svd_solver="randomized", random_state=0).fit(X)
    assert got.n_components_ == ref.n_components_
    np.testing.assert_allclose(got.explained_variance_ratio_, ref.explained_variance_ratio_)
    flat = rng.standard_normal((400, 300))
    with pytest.raises(ValueError, match="the top 100 components explain only"):
        PCA(0.99, svd_solver="randomized", random_state=0).fit(flat)


def test_offset_does_not_cost_digits(rng):
    X = benchmark_like(rng, n=5000, d=50, dtype=np.float64)
    arr = da.from_array(X, chunks=(700, -1))
    plain = PCA(10, svd_solver="randomized", random_state=1).fit(arr)
    shifted = PCA(10, svd_solver="randomized", random_state=1).fit(arr + 1e6)
    np.testing.assert_allclose(shifted.explained_variance_, plain.explained_variance_, rtol=1e-8)
    np.testing.assert_allclose(shifted.components_, plain.components_, atol=1e-8)
    np.testing.assert_allclose(shifted.mean_ - 1e6, plain.mean_, atol=1e-8)


def test_deterministic_and_chunking_invariant(rng):
    X = benchmark_like(rng, n=3000, d=40, dtype=np.float64)
    a = PCA(5, svd_solver="randomized", random_state=7).fit(da.from_array(X, chunks=(300, -1)))
    b = PCA(5, svd_solver="randomized", random_state=7).fit(da.from_array(X, chunks=(1000, -1)))
    c = PCA(5, svd_solver="randomized", random_state=7).fit(X)
    for other in (b, c):
        np.testing.assert_allclose(other.components_, a.components_, atol=1e-12)
        np.testing.assert_allclose(other.explained_variance_, a.explained_variance_, rtol=1e-12)
