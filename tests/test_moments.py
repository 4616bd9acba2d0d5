"""Moments against numpy on exact data, on large offsets, chunked and merged in any tree."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddr.stats import Moments, compute, merge_all


def low_rank(rng, n=3000, d=6, offset=0.0, dtype=np.float64):
    scales = np.array([10.0, 5.0, 2.0, 1.0, 0.5, 0.1])[:d]
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = (rng.standard_normal((n, d)) * scales) @ Q.T + offset
    return X.astype(dtype)


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b))


def exact_cov(X, ddof=0):
    """Two-pass covariance in extended precision: the reference."""
    Xl = np.asarray(X, dtype=np.longdouble)
    Xc = Xl - Xl.mean(axis=0)
    return np.asarray(Xc.T @ Xc / (X.shape[0] - ddof), dtype=np.float64)


def test_matches_numpy_on_plain_data(rng):
    X = low_rank(rng)
    m = Moments.from_block(X)
    assert m.count == X.shape[0]
    np.testing.assert_allclose(m.mean, X.mean(axis=0), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(m.covariance(ddof=1), np.cov(X.T), rtol=1e-12)
    np.testing.assert_allclose(m.covariance(), np.cov(X.T, ddof=0), rtol=1e-12)
    np.testing.assert_allclose(m.variance(ddof=1), X.var(axis=0, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(m.std(), X.std(axis=0), rtol=1e-12)
    np.testing.assert_allclose(m.correlation(), np.corrcoef(X.T), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(m.gram(), X.T @ X, rtol=1e-11)
    assert m.total_variance(ddof=1) == pytest.approx(np.trace(np.cov(X.T)), rel=1e-12)


def test_eigenvalues_on_1e8_offset_float64(rng):
    """Acceptance: float64 on a 1e8 offset, eigenvalue relative error <= 1e-8."""
    X = low_rank(rng, n=20000, offset=1e8)
    ref = np.linalg.eigvalsh(exact_cov(X))
    chunked = compute(Moments, da.from_array(X, chunks=(200, -1)))
    got = np.linalg.eigvalsh(chunked.covariance())
    assert np.max(np.abs(got - ref) / ref) <= 1e-8


def test_eigenvalues_on_1e3_offset_float32(rng):
    """Acceptance: float32 on a 1e3 offset, eigenvalue relative error <= 1e-4."""
    X = low_rank(rng, n=20000, offset=1e3, dtype=np.float32)
    ref = np.linalg.eigvalsh(exact_cov(X))
    got = np.linalg.eigvalsh(compute(Moments, da.from_array(X, chunks=(2000, -1))).covariance())
    assert np.max(np.abs(got - ref) / ref) <= 1e-4


def test_textbook_formula_fails_where_moments_hold(rng):
    """``X^T X / n - mu mu^T`` (scikit-learn's covariance_eigh, Spark) loses every digit."""
    X = low_rank(rng, n=20000, offset=1e8)
    ref = np.linalg.eigvalsh(exact_cov(X))
    n = X.shape[0]
    mu = X.sum(axis=0) / n
    naive = X.T @ X / n - np.outer(mu, mu)
    naive_err = np.max(np.abs(np.linalg.eigvalsh(naive) - ref) / ref)
    ours = np.max(np.abs(np.linalg.eigvalsh(Moments.from_block(X).covariance()) - ref) / ref)
    assert naive_err > 1.0  # worse than useless
    assert ours < 1e-9


def test_float32_input_accumulates_in_float64(rng):
    X = low_rank(rng, n=5000, offset=1e3, dtype=np.float32)
    m = Moments.from_block(X)
    assert m.mean.dtype == np.float64 and m.scatter.dtype == np.float64
    np.testing.assert_allclose(m.covariance(), exact_cov(X), rtol=1e-9)


def test_integer_input(rng):
    X = rng.integers(-50, 50, size=(1000, 4))
    m = Moments.from_block(X)
    np.testing.assert_allclose(m.covariance(ddof=1), np.cov(X.T.astype(float)), rtol=1e-12)


def test_diagonal_form(rng):
    X = low_rank(rng, offset=1e6)
    m = compute(Moments.spec(diagonal=True), da.from_array(X, chunks=(700, -1)))
    assert m.diagonal and m.scatter.shape == (X.shape[1],)
    np.testing.assert_allclose(m.variance(), np.diagonal(exact_cov(X)), rtol=1e-9)
    with pytest.raises(ValueError, match=r"covariance\(\) needs the full form"):
        m.covariance()


def test_weights_match_numpy_and_repetition(rng):
    X = low_rank(rng, n=500)
    w = rng.integers(0, 4, size=500).astype(float)
    m = compute(Moments, X, sample_weight=w)
    np.testing.assert_allclose(m.mean, np.average(X, axis=0, weights=w), rtol=1e-12)
    np.testing.assert_allclose(
        m.covariance(ddof=1), np.cov(X.T, fweights=w.astype(int)), rtol=1e-11
    )
    repeated = Moments.from_block(np.repeat(X, w.astype(int), axis=0))
    np.testing.assert_allclose(m.scatter, repeated.scatter, rtol=1e-11)
    diag = compute(
        Moments.spec(diagonal=True),
        da.from_array(X, chunks=100),
        sample_weight=da.from_array(w, chunks=50),
    )
    np.testing.assert_allclose(diag.variance(), np.diagonal(m.covariance()), rtol=1e-11)


def test_nan_omit_diagonal_counts_per_feature(rng):
    X = low_rank(rng, n=2000)
    mask = rng.random(X.shape) < 0.2
    Xn = np.where(mask, np.nan, X)
    m = compute(Moments.spec(diagonal=True, nan_policy="omit"), da.from_array(Xn, chunks=333))
    np.testing.assert_array_equal(m.count, (~mask).sum(axis=0))
    np.testing.assert_allclose(m.mean, np.nanmean(Xn, axis=0), rtol=1e-12)
    np.testing.assert_allclose(m.variance(ddof=1), np.nanvar(Xn, axis=0, ddof=1), rtol=1e-11)
    assert m.n_rows == 2000


def test_nan_omit_full_keeps_complete_rows(rng):
    X = low_rank(rng, n=2000)
    Xn = X.copy()
    Xn[rng.random(2000) < 0.1, 2] = np.nan
    m = compute(Moments.spec(nan_policy="omit"), da.from_array(Xn, chunks=250))
    complete = X[~np.isnan(Xn).any(axis=1)]
    assert m.count == complete.shape[0] and m.n_rows == 2000
    np.testing.assert_allclose(m.covariance(), np.cov(complete.T, ddof=0), rtol=1e-11)


def test_constant_feature_variance_zero_and_correlation_nan(rng):
    X = low_rank(rng, n=100)
    X[:, 1] = 3.25
    m = Moments.from_block(X)
    assert m.variance()[1] == 0.0
    corr = m.correlation()
    assert np.isnan(corr[1]).all() and np.isnan(corr[:, 1]).all()


def test_roundtrip_dict(rng):
    for m in (
        Moments.from_block(low_rank(rng)),
        Moments.from_block(low_rank(rng), diagonal=True),
        Moments.from_block(
            np.where(rng.random((50, 6)) < 0.3, np.nan, 1.0), diagonal=True, nan_policy="omit"
        ),
    ):
        back = Moments.from_dict(m.to_dict())
        np.testing.assert_array_equal(back.scatter, m.scatter)
        np.testing.assert_array_equal(back.mean, m.mean)
        np.testing.assert_array_equal(back.count, m.count)
        assert back.n_rows == m.n_rows


def test_merge_with_empty_is_identity(rng):
    m = Moments.from_block(low_rank(rng))
    e = Moments.empty(m.n_features)
    for merged in (m.merge(e), e.merge(m)):
        np.testing.assert_array_equal(merged.scatter, m.scatter)
        np.testing.assert_array_equal(merged.mean, m.mean)
    empty_block = Moments.from_block(np.empty((0, m.n_features)))
    np.testing.assert_allclose(m.merge(empty_block).scatter, m.scatter)


@st.composite
def splits(draw):
    n = draw(st.integers(2, 400))
    cuts = sorted(draw(st.lists(st.integers(1, n - 1), max_size=12, unique=True)))
    order_seed = draw(st.integers(0, 2**32 - 1))
    return n, cuts, order_seed


@settings(max_examples=80, deadline=None)
@given(splits(), st.floats(-100, 100), st.booleans())
def test_any_chunking_and_merge_tree_agree(split, offset, diagonal):
    """Acceptance: any row chunking and any merge tree give the same statistic to 1e-12.

    Offsets stay within 200x the smallest scale here: beyond that the inputs themselves
    only determine the scatter to ``eps * offset / scale`` (the large-offset accuracy is
    checked against an extended-precision reference above).
    """
    n, cuts, seed = split
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * [1.0, 3.0, 0.5, 7.0] + offset
    whole = Moments.from_block(X, diagonal=diagonal)
    parts = [Moments.from_block(b, diagonal=diagonal) for b in np.split(X, cuts)]
    # a random binary merge tree
    while len(parts) > 1:
        i = int(rng.integers(0, len(parts) - 1))
        a, b = parts.pop(i), parts.pop(i)
        parts.insert(i, a.merge(b) if rng.random() < 0.5 else b.merge(a))
    tree = parts[0]
    assert tree.count == whole.count
    np.testing.assert_allclose(tree.mean, whole.mean, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(
        tree.scatter, whole.scatter, rtol=1e-12, atol=1e-12 * np.abs(whole.scatter).max()
    )


def test_merge_all_and_errors(rng):
    X = low_rank(rng)
    parts = [Moments.from_block(b) for b in np.array_split(X, 5)]
    np.testing.assert_allclose(merge_all(parts).scatter, Moments.from_block(X).scatter, rtol=1e-12)
    with pytest.raises(ValueError, match="cannot merge Moments of 6 features with Moments of 3"):
        parts[0].merge(Moments.from_block(X[:, :3]))
    with pytest.raises(ValueError, match="cannot merge diagonal Moments with full Moments"):
        parts[0].merge(Moments.from_block(X, diagonal=True))
    with pytest.raises(TypeError, match="cannot merge Moments with int"):
        parts[0].merge(3)
    with pytest.raises(ValueError, match="no statistics to merge"):
        merge_all([])


def test_bad_input_messages(rng):
    with pytest.raises(
        ValueError,
        match=r"X must be 2-D \(n_samples, n_features\); got an array "
        r"with ndim=1",
    ):
        Moments.from_block(np.ones(5))
    X = low_rank(rng, n=50)
    X[3, 1] = np.nan
    X[4, 2] = np.inf
    with pytest.raises(ValueError, match="X contains 1 NaN and 1 infinite value"):
        Moments.from_block(X)
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        Moments.from_block(X, nan_policy="drop")
    with pytest.raises(TypeError, match="numeric dtype; got dtype <U1"):
        Moments.from_block(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match=r"needs more than ddof=1 samples; only 1 were seen"):
        Moments.from_block(np.ones((1, 3))).covariance(ddof=1)
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(50,\)"):
        Moments.from_block(low_rank(rng, n=50), sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="sample_weight must be finite and non-negative"):
        Moments.from_block(low_rank(rng, n=50), sample_weight=-np.ones(50))
    with pytest.raises(ValueError, match="values too large to accumulate"):
        Moments.from_block(np.full((4, 2), 1e308))


def test_drifting_block_is_exact_although_its_first_rows_are_not_typical(rng):
    # the shift is the first sub-block's mean; on a trend of 1e3 standard deviations over the
    # block the centred sums still hold to round-off (the shift stays within the block's spread)
    n, d = 50_000, 5
    X = 1e8 + np.linspace(0, 1e3, n)[:, None] * np.arange(1, d + 1) + rng.standard_normal((n, d))
    Xl = np.asarray(X, dtype=np.longdouble)
    ref = np.asarray((Xl - Xl.mean(axis=0)).T @ (Xl - Xl.mean(axis=0)), dtype=np.float64)
    got = Moments.from_block(X)
    np.testing.assert_allclose(got.scatter, ref, rtol=1e-9)
    np.testing.assert_allclose(got.mean, np.asarray(Xl.mean(axis=0), dtype=np.float64), rtol=1e-15)


def test_scratch_buffers_are_reused_per_key_and_per_thread():
    import threading

    from ddr.stats._centring import _POOLED_BYTES, scratch

    a = scratch("test.a", (10, 4))
    assert a.shape == (10, 4) and a.dtype == np.float64 and a.flags.c_contiguous
    assert np.shares_memory(a, scratch("test.a", (3, 2), np.float32))  # same key: reused
    assert not np.shares_memory(a, scratch("test.b", (10, 4)))  # another key: its own
    big = scratch("test.a", (100, 100))  # larger than before: grows
    assert big.shape == (100, 100) and np.shares_memory(big, scratch("test.a", (10, 4)))
    other = []
    thread = threading.Thread(target=lambda: other.append(scratch("test.a", (10, 4))))
    thread.start()
    thread.join()
    assert not np.shares_memory(other[0], scratch("test.a", (10, 4)))  # another thread
    rows = _POOLED_BYTES // 8 // 1000 + 1  # above the pool's limit: a fresh array each time
    assert not np.shares_memory(scratch("test.c", (rows, 1000)), scratch("test.c", (rows, 1000)))
