"""ddr.MultinomialNB against scikit-learn on counts (dense and sparse, in memory and as dask
blocks): every fitted array and prediction to 1e-8, one pass, partial_fit, bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from sklearn.datasets import load_digits
from sklearn.naive_bayes import MultinomialNB as SkMultinomialNB

import ddr
from ddr.demo_counts import CountsSpec, counts_block, counts_truth
from ddr.testing import counting_dask_array


@pytest.fixture(autouse=True)
def _threads():
    with dask.config.set(scheduler="threads"):
        yield


@pytest.fixture(scope="module")
def documents() -> tuple[scipy.sparse.csr_matrix, np.ndarray]:
    """2000 documents x 300 words of a 4-topic model, labelled by their main topic."""
    spec = CountsSpec(n_samples=2000, n_features=300, n_topics=4, doc_length=40)
    cdf = (np.cumsum(counts_truth(spec), axis=1) + np.arange(4)[:, None]).ravel()
    from ddr.demo_counts import _mixtures_and_lengths

    theta, _ = _mixtures_and_lengths(spec, 0, 2000)
    return counts_block(spec, cdf, 0, 2000), np.array(["a", "b", "c", "d"])[theta.argmax(1)]


def forms(X, y, chunks=(333, -1)):
    """The same counts as numpy, scipy.sparse, dask of CSR blocks and dense dask."""
    Xs = scipy.sparse.csr_matrix(X)
    blocks = da.from_array(Xs, chunks=chunks)
    yd = da.from_array(y, chunks=(blocks.chunks[0],))
    dense = da.from_array(Xs.toarray(), chunks=chunks)
    return {"numpy": (Xs.toarray(), y), "sparse": (Xs, y), "blocks": (blocks, yd),
            "dense-dask": (dense, yd)}  # fmt: skip


def assert_same_model(ours, theirs, X, X_theirs=None):
    X_theirs = X if X_theirs is None else X_theirs
    for name in ("class_count_", "feature_count_", "feature_log_prob_", "class_log_prior_"):
        np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), rtol=1e-8,
                                   atol=1e-12, err_msg=name)  # fmt: skip
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    for method in ("predict_joint_log_proba", "predict_log_proba", "predict_proba"):
        got = getattr(ours, method)(X)
        got = got.compute() if isinstance(got, da.Array) else got
        np.testing.assert_allclose(got, getattr(theirs, method)(X_theirs), rtol=1e-8, atol=1e-10)
    pred = ours.predict(X)
    np.testing.assert_array_equal(pred.compute() if isinstance(pred, da.Array) else pred,
                                  theirs.predict(X_theirs))  # fmt: skip


@pytest.mark.parametrize(
    "params",
    [{}, {"alpha": 0.01}, {"alpha": 0.0, "force_alpha": True}, {"fit_prior": False},
     {"class_prior": [0.1, 0.2, 0.3, 0.4]}],
)  # fmt: skip
def test_equal_to_scikit_learn_on_word_counts(documents, params):
    X, y = documents
    sk = SkMultinomialNB(**params).fit(X, y)
    for _form, (Xf, yf) in forms(X, y).items():
        ours = ddr.MultinomialNB(**params).fit(Xf, yf)
        assert_same_model(ours, sk, Xf, X)


def test_equal_to_scikit_learn_on_digits_with_weights_and_an_array_alpha():
    X, y = load_digits(return_X_y=True)
    w = np.random.default_rng(0).uniform(0.1, 3.0, len(y))
    alpha = np.linspace(0.1, 2.0, X.shape[1])
    sk = SkMultinomialNB(alpha=alpha).fit(X, y, sample_weight=w)
    Xs = scipy.sparse.csr_matrix(X)
    ours = ddr.MultinomialNB(alpha=alpha).fit(Xs, y, sample_weight=w)
    assert_same_model(ours, sk, Xs)
    blocks = da.from_array(Xs, chunks=(400, -1))
    wd = da.from_array(w, chunks=(blocks.chunks[0],))
    ours = ddr.MultinomialNB(alpha=alpha).fit(blocks, da.from_array(y, chunks=(400,)), wd)
    assert_same_model(ours, sk, X)


def test_one_pass_and_partial_fit_equals_fit(documents):
    X, y = documents
    arr, counter = counting_dask_array(X, chunks=(250, -1))
    ours = ddr.MultinomialNB().fit(arr, da.from_array(y, chunks=(arr.chunks[0],)))
    assert counter.passes == 1.0
    sk = SkMultinomialNB().fit(X, y)
    assert_same_model(ours, sk, X)
    inc = ddr.MultinomialNB()
    inc.partial_fit(X[:700], y[:700], classes=np.unique(y))
    inc.partial_fit(X[700:1500], y[700:1500])
    inc.partial_fit(X[1500:], y[1500:])
    assert_same_model(inc, sk, X)


def test_negative_counts_are_refused_where_they_are_read(documents):
    X, y = documents
    bad = X.copy().astype(np.float64)
    bad.data[5] = -2.0
    msg = r"Negative values in data passed to MultinomialNB \(input X\): counts must be >= 0"
    for _form, (Xf, yf) in forms(bad, y).items():
        with pytest.raises(ValueError, match=msg):
            ddr.MultinomialNB().fit(Xf, yf)
    est = ddr.MultinomialNB().fit(X, y)
    with pytest.raises(ValueError, match=msg + r"; got 1 negative value\(s\), e.g. \[-2.0\]"):
        est.predict(da.from_array(bad, chunks=(500, -1))).compute()


def test_nan_counts_are_refused(documents):
    X, y = documents
    bad = X.copy().astype(np.float64)
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        ddr.MultinomialNB().fit(bad, y)
    blocks = da.from_array(bad, chunks=(500, -1))
    with pytest.raises(ValueError, match="X contains 1 NaN and 0 infinite stored value"):
        ddr.MultinomialNB().fit(blocks, da.from_array(y, chunks=(500,)))
