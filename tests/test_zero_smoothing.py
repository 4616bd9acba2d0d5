"""Naive Bayes without smoothing (``alpha=0``): MultinomialNB, CategoricalNB and BernoulliNB.

A class that cannot have produced a row (it never showed one of the row's feature values)
gets probability exactly 0; the posterior over the other classes is the direct computation
from the maximum-likelihood probabilities (``0 log 0 = 0`` for values the row does not
hold) and the limit of the smoothed posterior as alpha tends to 0. A row that no class can
have produced has no posterior: ``predict_joint_log_proba`` gives ``-inf`` for every class,
the methods that need the posterior refuse it, for numpy and dask input alike (scikit-learn
gives NaN probabilities and predicts the first class; its BernoulliNB gives NaN for every
row once a class shows a feature always on or always off).
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

import ddr

NO_CLASS = r"have probability 0 under every class: the joint log-likelihood is -inf for all"


@pytest.fixture(autouse=True)
def _threads():
    with dask.config.set(scheduler="threads"):
        yield


def _log(p):
    with np.errstate(divide="ignore"):
        return np.log(p)


def _xlogp(x, p):
    """``x log p`` with ``0 log 0 = 0`` (the limit) and ``x log 0 = -inf`` for ``x > 0``."""
    return np.where(x == 0, 0.0, x * _log(np.where(x == 0, 1.0, p)))


def _posterior(jll):
    """The posterior from a joint log-likelihood, over the classes with finite values."""
    top = jll.max(axis=1, keepdims=True)
    w = np.exp(jll - top)
    return w / w.sum(axis=1, keepdims=True)


def _check_model(fitted, smoothed, Q, jll, impossible_row, Q_bad):
    """``fitted`` (alpha=0) on the possible rows ``Q`` against the direct ``jll``, and the
    refusal of ``Q_bad`` whose row ``impossible_row`` no class can produce."""
    got = fitted.predict_joint_log_proba(Q)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(jll))
    finite = np.isfinite(jll)
    np.testing.assert_allclose(got[finite], jll[finite], rtol=1e-12)
    want = _posterior(jll)
    proba = fitted.predict_proba(Q)
    np.testing.assert_allclose(proba, want, rtol=1e-12, atol=0)
    assert (proba[~finite] == 0).all() and np.isfinite(proba).all()
    log_proba = fitted.predict_log_proba(Q)
    assert np.array_equal(np.isneginf(log_proba), ~finite)
    np.testing.assert_allclose(log_proba[finite], np.log(want[finite]), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(fitted.predict(Q), fitted.classes_[jll.argmax(axis=1)])
    # the limit: smoothing with alpha -> 0 gives the same posterior (an impossible class's
    # probability falls as alpha to the power of the weight it misses: 0.5 here at most)
    np.testing.assert_allclose(smoothed.predict_proba(Q), want, atol=1e-6)
    # a row no class can produce: -inf joint log-likelihood for each class, no posterior
    joint = fitted.predict_joint_log_proba(Q_bad)
    assert np.isneginf(joint[impossible_row]).all()
    for method in ("predict", "predict_proba", "predict_log_proba"):
        with pytest.raises(ValueError, match=NO_CLASS):
            getattr(fitted, method)(Q_bad)
    with pytest.raises(ValueError, match=NO_CLASS):
        fitted.score(Q_bad, np.zeros(len(Q_bad), dtype=fitted.classes_.dtype))
    # dask: refused where the block is computed, the row counted from its block's first row
    lazy = da.from_array(Q_bad, chunks=(impossible_row, -1))  # the row starts block 2
    for method in ("predict", "predict_proba", "predict_log_proba"):
        out = getattr(fitted, method)(lazy)
        with pytest.raises(ValueError, match=r"1 row\(s\) of this block of .* \(at 0, "):
            out.compute()
    assert np.isneginf(fitted.predict_joint_log_proba(lazy).compute()[impossible_row]).all()


def test_multinomial_nb_without_smoothing():
    # three classes over six words, weights not whole numbers (tf-idf)
    X = np.array(
        [[2.0, 1.5, 0.5, 0, 0, 0], [1.0, 0, 1.0, 0, 0, 0],  # a: words 0, 1, 2
         [0, 0, 1.0, 2.0, 0.5, 0], [0, 0, 0, 1.0, 1.5, 0],  # b: words 2, 3, 4
         [1.0, 0, 0, 0, 2.0, 1.0], [0.5, 0, 0, 0, 0, 3.0]],  # c: words 0, 4, 5
    )  # fmt: skip
    y = np.array(["a", "a", "b", "b", "c", "c"])
    fitted = ddr.MultinomialNB(alpha=0.0).fit(X, y)
    smoothed = ddr.MultinomialNB(alpha=1e-16).fit(X, y)
    N = np.stack([X[y == c].sum(axis=0) for c in "abc"])
    p = N / N.sum(axis=1, keepdims=True)
    prior = np.array([2, 2, 2]) / 6
    Q = np.array(
        [[1.0, 1.0, 0, 0, 0, 0],  # only a
         [0, 0, 2.0, 0.5, 0, 0],  # only b
         [1.0, 0, 0.5, 0, 0, 0],  # a (words 0, 2); c lacks word 2, b word 0
         [0, 0, 0, 0, 1.0, 0],  # b and c
         [0, 0, 0, 0, 0, 0]],  # empty: the prior
    )  # fmt: skip
    jll = np.log(prior) + np.stack([_xlogp(Q, pc).sum(axis=1) for pc in p], axis=1)
    assert np.isneginf(jll).any(axis=1)[:4].all() and np.isfinite(jll[3, 1:]).all()
    Q_bad = np.vstack([Q, [[0, 1.0, 0, 1.0, 0, 0]]])  # words 1 and 3: no class emits both
    _check_model(fitted, smoothed, Q, jll, 5, Q_bad)


def test_categorical_nb_without_smoothing():
    X = np.array([[0, 1], [0, 2], [1, 1], [1, 0], [2, 0], [2, 2]])
    y = np.array([0, 0, 1, 1, 2, 2])
    fitted = ddr.CategoricalNB(alpha=0.0).fit(X, y)
    smoothed = ddr.CategoricalNB(alpha=1e-16).fit(X, y)
    Q = np.array([[0, 1], [1, 0], [2, 2], [0, 2]])
    jll = np.full((len(Q), 3), np.log(1 / 3))
    for k in range(3):
        rows = X[y == k]
        for j in range(2):
            counts = np.array([(rows[:, j] == c).sum() for c in range(3)])
            jll[:, k] += _log(counts[Q[:, j]] / len(rows))
    assert np.isneginf(jll).any() and np.isfinite(jll).any(axis=1).all()
    # feature 0 = 1 only in class 1, feature 1 = 2 never in class 1: no class has both; a code
    # beyond the training table is impossible for every class too
    Q_bad = np.vstack([Q, [[1, 2], [3, 0]]])
    _check_model(fitted, smoothed, Q, jll, 4, Q_bad[:5])
    with pytest.raises(ValueError, match=NO_CLASS + r".*"):
        fitted.predict(Q_bad[5:])


def test_bernoulli_nb_without_smoothing():
    # class 0 always has feature 0 on, class 1 always off; feature 2 never on in class 0
    X = np.array([[1, 1, 0], [1, 0, 0], [0, 1, 1], [0, 0, 1], [0, 1, 0]])
    y = np.array([0, 0, 1, 1, 1])
    fitted = ddr.BernoulliNB(alpha=0.0).fit(X, y)
    smoothed = ddr.BernoulliNB(alpha=1e-16).fit(X, y)
    Q = np.array([[1, 0, 0], [0, 1, 1], [1, 1, 0], [0, 0, 0]])
    p = np.stack([X[y == k].mean(axis=0) for k in (0, 1)])
    prior = np.array([2, 3]) / 5
    jll = np.log(prior) + np.stack(
        [(_xlogp(Q, pk) + _xlogp(1 - Q, 1 - pk)).sum(axis=1) for pk in p], axis=1
    )
    assert np.isneginf(jll).any() and np.isfinite(jll).any(axis=1).all()
    Q_bad = np.vstack([Q, [[1, 0, 1]]])  # feature 0 on (not class 1) and 2 on (not class 0)
    _check_model(fitted, smoothed, Q, jll, 4, Q_bad)


def test_bernoulli_nb_with_constant_features_and_alpha_0_is_not_nan():
    """scikit-learn's BernoulliNB(alpha=0) gives NaN for every row as soon as a class shows
    a feature always on or always off; here only impossible classes get -inf."""
    rng = np.random.default_rng(0)
    X = (rng.random((200, 8)) < 0.4).astype(float)
    y = rng.integers(0, 2, 200)
    X[y == 0, 3] = 1.0  # always on in class 0
    X[y == 1, 5] = 0.0  # always off in class 1
    est = ddr.BernoulliNB(alpha=0.0).fit(X, y)
    proba = est.predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # rows with feature 3 off are class 1 for sure, rows with feature 5 on class 0
    assert (proba[X[:, 3] == 0, 0] == 0).all() and (proba[X[:, 5] == 1, 1] == 0).all()
    assert 0 < proba[(X[:, 3] == 1) & (X[:, 5] == 0), 0].min()
    sure = (X[:, 3] == 0) | (X[:, 5] == 1)
    np.testing.assert_array_equal(est.predict(X[sure]), y[sure])
