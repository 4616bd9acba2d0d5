"""ClassMoments, CategoricalCounts and Histogram against direct numpy computations."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddr.stats import CategoricalCounts, ClassMoments, Histogram, compute, statistic_from_dict


def blobs(rng, n=3000, d=4, k=3):
    y = rng.integers(0, k, size=n)
    centres = rng.standard_normal((k, d)) * 4
    X = centres[y] + rng.standard_normal((n, d)) * (1 + y[:, None])
    return X, y


# ----------------------------------------------------------------------------- ClassMoments
def test_class_moments_match_numpy(rng):
    X, y = blobs(rng)
    cm = compute(ClassMoments, da.from_array(X, chunks=(400, -1)), y)
    np.testing.assert_array_equal(cm.classes, [0, 1, 2])
    np.testing.assert_array_equal(cm.counts, np.bincount(y))
    np.testing.assert_allclose(cm.priors(), np.bincount(y) / len(y))
    for k in range(3):
        Xk = X[y == k]
        np.testing.assert_allclose(cm.means[k], Xk.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(cm.covariances(ddof=1)[k], np.cov(Xk.T), rtol=1e-11)
        np.testing.assert_allclose(cm.variances()[k], Xk.var(axis=0), rtol=1e-11)
    within = sum(
        (X[y == k] - X[y == k].mean(0)).T @ (X[y == k] - X[y == k].mean(0)) for k in range(3)
    )
    np.testing.assert_allclose(cm.within_scatter(), within, rtol=1e-11)
    np.testing.assert_allclose(cm.pooled_covariance(), within / len(y), rtol=1e-11)
    np.testing.assert_allclose(cm.pooled_covariance(ddof=1), within / (len(y) - 3), rtol=1e-11)
    mu = X.mean(axis=0)
    between = sum(
        np.sum(y == k) * np.outer(X[y == k].mean(0) - mu, X[y == k].mean(0) - mu) for k in range(3)
    )
    np.testing.assert_allclose(cm.between_scatter(), between, rtol=1e-10)
    # total scatter = within + between
    total = (X - mu).T @ (X - mu)
    np.testing.assert_allclose(cm.within_scatter() + cm.between_scatter(), total, rtol=1e-10)
    np.testing.assert_allclose(cm.total().covariance(), np.cov(X.T, ddof=0), rtol=1e-11)


@pytest.mark.parametrize("n_classes", [3, 40])  # a scan per class, and the sort for many
@pytest.mark.parametrize("weighted", [False, True])
def test_class_moments_many_sub_blocks(rng, n_classes, weighted):
    # d = 64 centres 2048 rows at a time: every class spans several gathered sub-blocks
    n, d = 20_000, 64
    y = rng.integers(0, n_classes, size=n)
    X = (1e3 + y[:, None] + rng.standard_normal((n, d))).astype(np.float32)
    w = rng.random(n) if weighted else None
    cm = ClassMoments.from_block(X, y, w)
    cd = ClassMoments.from_block(X, y, w, diagonal=True)
    for k in range(n_classes):
        Xk = X[y == k].astype(np.float64)
        wk = np.ones(len(Xk)) if w is None else w[y == k]
        mean = np.average(Xk, axis=0, weights=wk)
        scatter = (wk[:, None] * (Xk - mean)).T @ (Xk - mean)
        assert cm.moments[k].n_rows == len(Xk)
        np.testing.assert_allclose(cm.counts[k], wk.sum(), rtol=1e-13)
        np.testing.assert_allclose(cm.means[k], mean, rtol=1e-13)
        np.testing.assert_allclose(cm.moments[k].scatter, scatter, rtol=1e-9, atol=1e-9 * wk.sum())
        np.testing.assert_allclose(cd.moments[k].scatter, np.diag(scatter), rtol=1e-10)


@pytest.mark.parametrize("diagonal", [False, True])
def test_class_moments_of_a_block_sorted_by_class(rng, diagonal):
    # later classes first appear far below the first sub-block, where their shift is taken
    n, d = 12_000, 50
    y = np.sort(rng.integers(0, 4, size=n))
    X = 1e6 + 10.0 * y[:, None] + rng.standard_normal((n, d))
    cm = ClassMoments.from_block(X, y, diagonal=diagonal)
    for k in range(4):
        Xk = X[y == k]
        scatter = (Xk - Xk.mean(axis=0)).T @ (Xk - Xk.mean(axis=0))
        np.testing.assert_allclose(cm.means[k], Xk.mean(axis=0), rtol=1e-14)
        want = np.diag(scatter) if diagonal else scatter
        np.testing.assert_allclose(cm.moments[k].scatter, want, rtol=1e-8, atol=1e-8 * len(Xk))


@pytest.mark.parametrize(
    "y",
    [
        np.array([3, -2, 3, 7, -2], dtype=np.int8),
        np.array([127, -128, 0, 127], dtype=np.int8),  # the range overflows int8
        np.array([2**64 - 1, 2**64 - 3, 2**64 - 1], dtype=np.uint64),
        np.array([2**64 - 1, 5, 2**64 - 1, 2**63], dtype=np.uint64),
        np.array([10**15, -(10**15), 0, 10**15]),  # a range too wide to tabulate: sorted
        np.array([4, 4, 4], dtype=np.int16),
        np.array([], dtype=np.int64),
        np.array([1.5, -0.5, 1.5]),
        np.array(["b", "a", "b"]),
    ],
)
def test_unique_labels_is_numpy_unique(y):
    from ddr.stats._checks import unique_labels

    classes, inverse = unique_labels(y)
    want_classes, want_inverse = np.unique(y, return_inverse=True)
    np.testing.assert_array_equal(classes, want_classes)
    assert classes.dtype == want_classes.dtype
    np.testing.assert_array_equal(inverse, want_inverse)


def test_classes_discovered_across_blocks_and_string_labels(rng):
    X, y = blobs(rng, n=600, k=4)
    labels = np.array(["ant", "bee", "cat", "dog"])[y]
    order = np.argsort(y, kind="stable")  # each block sees only some classes
    cm = compute(
        ClassMoments.spec(diagonal=True), da.from_array(X[order], chunks=100), labels[order]
    )
    np.testing.assert_array_equal(cm.classes, ["ant", "bee", "cat", "dog"])
    np.testing.assert_array_equal(cm.counts, np.bincount(y))
    for k, name in enumerate(cm.classes):
        np.testing.assert_allclose(cm.variances()[k], X[labels == name].var(axis=0), rtol=1e-11)
    obj = labels.astype(object)
    assert compute(ClassMoments, X, obj).classes.dtype.kind == "U"


def test_class_moments_merge_many_of_parts_with_other_classes(rng):
    """Partials that hold other classes (one holds none of a class, one a class alone, one
    is declared empty) merged in one step: the numbers of merging them one by one and of
    the rows as one block, and the same classes; a part of another width is refused."""
    X, y = blobs(rng, n=900, k=4)
    X += 1e6  # the merged mean is made from differences to the first part's
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    cuts = [(0, 150), (150, 500), (500, 520), (520, 900)]
    parts = [ClassMoments.from_block(X[a:b], y[a:b]) for a, b in cuts]
    parts.append(ClassMoments.empty(np.array([0, 9]), X.shape[1]))
    at_once = parts[0].merge_many(parts[1:])
    one_by_one = parts[0]
    for p in parts[1:]:
        one_by_one = one_by_one.merge(p)
    whole = ClassMoments.from_block(X, y).merge(ClassMoments.empty(np.array([9]), X.shape[1]))
    for got in (at_once, one_by_one):
        np.testing.assert_array_equal(got.classes, [0, 1, 2, 3, 9])
        np.testing.assert_array_equal(got.counts, whole.counts)
        np.testing.assert_allclose(got.means, whole.means, rtol=1e-15)
        for k in range(4):
            np.testing.assert_allclose(
                got.moments[k].covariance(), whole.moments[k].covariance(), rtol=1e-9, atol=1e-9
            )
            np.testing.assert_array_equal(got.moments[k].scatter, got.moments[k].scatter.T)
    with pytest.raises(
        ValueError, match="cannot merge ClassMoments of 4 features with ClassMoments of 3"
    ):
        parts[0].merge_many([parts[1], ClassMoments.from_block(X[:10, :3], y[:10])])


def test_declared_classes_and_weights(rng):
    X, y = blobs(rng, n=300)
    w = rng.random(300)
    declared = ClassMoments.empty(np.array([0, 1, 2, 7]), X.shape[1])
    cm = declared.merge(ClassMoments.from_block(X, y, w))
    np.testing.assert_array_equal(cm.classes, [0, 1, 2, 7])
    np.testing.assert_allclose(cm.counts, [w[y == 0].sum(), w[y == 1].sum(), w[y == 2].sum(), 0])
    np.testing.assert_allclose(cm.means[1], np.average(X[y == 1], axis=0, weights=w[y == 1]))


def test_class_moments_roundtrip_and_errors(rng):
    X, y = blobs(rng, n=200)
    cm = ClassMoments.from_block(X, y)
    back = statistic_from_dict(cm.to_dict())
    assert isinstance(back, ClassMoments)
    np.testing.assert_array_equal(back.within_scatter(), cm.within_scatter())
    np.testing.assert_array_equal(back.counts, cm.counts)
    with pytest.raises(
        TypeError,
        match="cannot merge ClassMoments with numeric labels and ClassMoments with string labels",
    ):
        cm.merge(ClassMoments.from_block(X, y.astype(str)))
    with pytest.raises(
        ValueError, match="cannot merge ClassMoments of 4 features with ClassMoments of 2 features"
    ):
        cm.merge(ClassMoments.from_block(X[:, :2], y))
    with pytest.raises(ValueError, match="y has 199 labels but X has 200 samples"):
        ClassMoments.from_block(X, y[:-1])
    with pytest.raises(ValueError, match="y contains NaN or infinite labels"):
        ClassMoments.from_block(X, np.where(y == 1, np.nan, y))
    with pytest.raises(ValueError, match="ClassMoments needs class labels y; got y=None"):
        ClassMoments.from_block(X)
    with pytest.raises(TypeError, match="object labels must all be strings"):
        ClassMoments.from_block(X[:2], np.array(["a", 1], dtype=object))


# ------------------------------------------------------------------------- CategoricalCounts
def test_categorical_counts_match_direct_count(rng):
    n, d = 1000, 3
    X = rng.integers(0, [3, 5, 2], size=(n, d))
    y = rng.choice(["no", "yes"], size=n)
    cc = compute(CategoricalCounts, da.from_array(X, chunks=(128, -1)), y)
    assert cc.counts.shape == (2, 3, 5)
    np.testing.assert_array_equal(cc.n_categories, [3, 5, 2])
    for k, label in enumerate(cc.classes):
        for j in range(d):
            np.testing.assert_array_equal(
                cc.counts[k, j, :], np.bincount(X[y == label, j], minlength=5)
            )
    np.testing.assert_array_equal(cc.class_counts, [np.sum(y == "no"), np.sum(y == "yes")])
    freqs = cc.frequencies(alpha=1.0)
    cnt = np.bincount(X[y == "no", 1], minlength=5)
    np.testing.assert_allclose(freqs[1][0], (cnt + 1) / (cnt.sum() + 5))
    back = CategoricalCounts.from_dict(cc.to_dict())
    np.testing.assert_array_equal(back.counts, cc.counts)


def test_categorical_categories_discovered_and_unlabelled(rng):
    a = CategoricalCounts.from_block(np.array([[0, 1], [1, 0]]))
    b = CategoricalCounts.from_block(np.array([[4, 0]]))
    m = a.merge(b)
    assert m.classes is None and m.counts.shape == (1, 2, 5)
    np.testing.assert_array_equal(m.counts[0, 0], [1, 1, 0, 0, 1])
    np.testing.assert_array_equal(m.n_categories, [5, 2])
    w = CategoricalCounts.from_block(np.array([[0.0, 2.0]]), sample_weight=np.array([2.5]))
    np.testing.assert_array_equal(w.counts[0, 1], [0, 0, 2.5])


def test_categorical_bad_input():
    with pytest.raises(ValueError, match=r"non-negative category codes 0, 1, 2, \.\.\.; got -1"):
        CategoricalCounts.from_block(np.array([[0, -1]]))
    with pytest.raises(
        ValueError,
        match="integer category codes; got non-integer values such "
        r"as \[0.5\]",
    ):
        CategoricalCounts.from_block(np.array([[0.5, 1.0]]))
    with pytest.raises(ValueError, match="above max_categories=10"):
        CategoricalCounts.from_block(np.array([[12, 1]]), max_categories=10)
    with pytest.raises(ValueError, match="cannot merge labelled CategoricalCounts with unlabelled"):
        CategoricalCounts.from_block(np.array([[1]]), np.array([0])).merge(
            CategoricalCounts.from_block(np.array([[1]]))
        )


# -------------------------------------------------------------------------------- Histogram
def linear_binning(x, width, origin_index, n_points):
    """Reference: linear binning of 1-D points onto ``(origin_index + i) * width``."""
    out = np.zeros(n_points)
    t = x / width - origin_index
    g = np.floor(t).astype(int)
    f = t - g
    np.add.at(out, g, 1 - f)
    np.add.at(out, g + 1, f)
    return out


def test_histogram_linear_binning_matches_reference(rng):
    x = rng.standard_normal((5000, 1)) * 3 + 10
    h = Histogram.from_block(x, n_bins=256)
    width = h.bin_width[0]
    assert width == 2.0 ** np.floor(np.log2(width))  # a power of two
    ref = linear_binning(x[:, 0], width, h.start[0], 256)
    np.testing.assert_allclose(h.counts[0, 0], ref, atol=1e-9)
    assert h.counts.sum() == pytest.approx(5000)
    # linear binning preserves the mean exactly
    assert (h.grid(0) * h.counts[0, 0]).sum() / 5000 == pytest.approx(x.mean(), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.floats(0.01, 1e4))
def test_histogram_merge_equals_binning_at_final_width(seed, n_parts, spread):
    """Coarsening by two is exact, so any split merges to the histogram binned at the end width."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(400) * spread + rng.uniform(-1e3, 1e3)
    y = rng.integers(0, 2, size=400)
    parts = [
        Histogram.from_block(b[:, None], yb, n_bins=64)
        for b, yb in zip(np.array_split(x, n_parts), np.array_split(y, n_parts), strict=True)
    ]
    merged = parts[0]
    for p in parts[1:]:
        merged = merged.merge(p)
    width = merged.bin_width[0]
    for k in (0, 1):
        ref = linear_binning(x[y == k], width, merged.start[0], 64 + 2)[:64]
        np.testing.assert_allclose(merged.counts[k, 0], ref, atol=1e-9 * 400)
    assert merged.counts.sum() == pytest.approx(400)


def test_histogram_dask_classes_and_roundtrip(rng):
    X, y = blobs(rng, n=2000, d=2)
    h = compute(Histogram.spec(n_bins=128), da.from_array(X, chunks=300), y)
    np.testing.assert_allclose(h.class_counts, np.bincount(y))
    whole = Histogram.from_block(X, y, n_bins=128)
    np.testing.assert_array_equal(h.exponent, np.maximum(h.exponent, whole.exponent))
    back = Histogram.from_dict(h.to_dict())
    np.testing.assert_array_equal(back.counts, h.counts)
    const = Histogram.from_block(np.full((10, 1), 2.5))
    assert const.counts.sum() == pytest.approx(10)
    assert (const.grid(0) * const.counts[0, 0]).sum() == pytest.approx(25.0)


def test_histogram_bad_input():
    with pytest.raises(ValueError, match="X contains 1 NaN value"):
        Histogram.from_block(np.array([[1.0], [np.nan]]))
    with pytest.raises(ValueError, match="n_bins must be at least 16; got 4"):
        Histogram.from_block(np.ones((3, 1)), n_bins=4)
    with pytest.raises(
        ValueError,
        match="cannot merge a Histogram of 1 features x 64 bins with one of 1 features x 32 bins",
    ):
        Histogram.from_block(np.ones((3, 1)), n_bins=64).merge(
            Histogram.from_block(np.ones((3, 1)), n_bins=32)
        )
