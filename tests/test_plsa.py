"""ddr.PLSA: topics of the demo corpus recovered (the example pipeline's settings converge to
them), EM monotone and each pass one step of Hofmann's EM on counts and on non-negative weights
(tf-idf), one pass per iteration, the same model from every input form, chunking and dtype,
negative weights refused."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from pipeline_support import PIPELINES
from ruamel.yaml import YAML
from scipy.optimize import linear_sum_assignment
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.utils._param_validation import InvalidParameterError

import ddr
from ddr.decomposition.plsa import _INIT_FLOOR, _SVD_POWER_ITER, nndsvda_topics
from ddr.demo_counts import CountsSpec, write_counts_data
from ddr.io import open_input
from ddr.stats import PLSASums, compute, plsa_sums
from ddr.stats.engine import compute_with_rows
from ddr.stats.plsa_sums import FOLD_IN_MAX_ITER, FOLD_IN_TOL
from ddr.testing import counting_dask_array


def _corpus(n=300, v=40, k=3, length=60, seed=0):
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(v, 0.1), size=k)
    mixtures = rng.dirichlet(np.full(k, 0.3), size=n)
    X = np.array([rng.multinomial(length, m @ topics) for m in mixtures]).astype(np.float64)
    return X, topics, mixtures


def _matched(found, truth):
    """Total variation distance of each true topic to its matched found topic."""
    cost = 0.5 * np.abs(truth[:, None, :] - found[None, :, :]).sum(axis=-1)
    r, c = linear_sum_assignment(cost)
    return cost[r, c], c


@pytest.fixture(scope="module")
def small():
    return _corpus()


def test_recovers_the_demo_corpus_topics_up_to_order(tmp_path):
    spec = CountsSpec(n_samples=600, n_features=40, n_topics=3, doc_length=150, seed=3)
    write_counts_data(tmp_path / "c.zarr", spec)
    X = open_input(tmp_path / "c.zarr", "X", protect=False).data
    truth = open_input(tmp_path / "c.zarr", "true_topics", protect=False).values
    mixtures = open_input(tmp_path / "c.zarr", "true_mixtures", protect=False).values
    model = ddr.PLSA(3, n_init=2, random_state=0, max_iter=200, tol=1e-6).fit(X)
    tv, order = _matched(model.components_, truth)
    assert tv.max() < 0.1, tv
    np.testing.assert_allclose(model.components_.sum(axis=1), 1.0, rtol=1e-12)
    theta = model.transform(X).compute()
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-9)
    err = np.abs(theta[:, order] - mixtures).sum(axis=1).mean() / 2
    assert err < 0.15, err


def test_loglike_never_decreases_and_is_the_likelihood(small):
    X, _, _ = small
    model = ddr.PLSA(3, random_state=1, max_iter=60, tol=0.0)
    with pytest.warns(Warning, match="did not converge in max_iter=60"):
        model.fit(X)
    ll = model.loglike_
    assert ll.shape == (60,) and model.n_iter_ == 60 and not model.converged_
    assert np.diff(ll).min() > -1e-9 * abs(ll[-1])
    # the last E-step's log-likelihood is that of its topics with the mixtures folded in,
    # within one EM step of the final model's
    final = float(model.score_samples(X).sum())
    assert ll[-1] <= final + 1e-9 * abs(final) and final - ll[-1] < 1e-3 * abs(final)


def test_one_pass_per_iteration_after_the_svds(small):
    """A random start reads nothing; the NNDSVD start reads X in the randomized SVD's
    ``_SVD_POWER_ITER + 1`` passes (fewer for narrow X); then one pass per EM iteration."""
    X, _, _ = small
    Xd, counter = counting_dask_array(scipy.sparse.csr_matrix(X), chunks=((100, 150, 50), -1))
    model = ddr.PLSA(3, init="random", random_state=0, max_iter=7, tol=0.0)
    with pytest.warns(Warning, match="did not converge"):
        model.fit(Xd)
    assert counter.passes == 7.0 == model.n_passes_
    counter.reset()
    model = ddr.PLSA(3, random_state=0, max_iter=7, tol=0.0)
    with pytest.warns(Warning, match="did not converge"):
        model.fit(Xd)
    assert counter.passes == 7.0 + _SVD_POWER_ITER + 1 == model.n_passes_
    counter.reset()
    model = ddr.PLSA(3, n_init=2, random_state=0, max_iter=7, tol=0.0)
    with pytest.warns(Warning, match="did not converge"):
        model.fit(Xd)
    assert counter.passes == 2 * 7.0 + _SVD_POWER_ITER + 1 == model.n_passes_


def test_sparse_dense_dask_chunking_and_dtype_give_the_same_model(small):
    X, _, _ = small
    ref = ddr.PLSA(3, random_state=0).fit(X)
    forms = {
        "csr": scipy.sparse.csr_matrix(X),
        "float32": X.astype(np.float32),
        "int": X.astype(np.int64),
        "dask-dense": da.from_array(X, chunks=((7, 200, 93), -1)),
        "dask-csr": da.from_array(scipy.sparse.csr_matrix(X), chunks=((150, 149, 1), -1)),
    }
    for name, data in forms.items():
        got = ddr.PLSA(3, random_state=0).fit(data)
        assert got.n_iter_ == ref.n_iter_, name
        np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got.loglike_, ref.loglike_, rtol=1e-10)
        theta = np.asarray(da.asarray(got.transform(data)).compute())
        np.testing.assert_allclose(theta, ref.transform(X), rtol=1e-9, atol=1e-12)


def test_n_init_keeps_the_best_fit(small):
    X, _, _ = small
    best = ddr.PLSA(3, init="random", n_init=3, random_state=0, max_iter=15, tol=0.0)
    with pytest.warns(Warning, match="did not converge"):
        best.fit(X)
    rng = np.random.RandomState(0)
    finals = []
    for _ in range(3):  # the inits of n_init=3 are successive draws of one random state
        run = ddr.PLSA(3, init="random", random_state=rng, max_iter=15, tol=0.0)
        with pytest.warns(Warning, match="did not converge"):
            run.fit(X)
        finals.append(run.loglike_[-1])
    assert best.loglike_[-1] == max(finals)


def test_empty_documents_and_unused_words():
    X, _, _ = _corpus(n=200, v=30)
    X[:, 5] = 0  # a word no document holds
    padded = np.vstack([X[:50], np.zeros((3, 30)), X[50:]])  # empty documents
    ref = ddr.PLSA(3, random_state=0, max_iter=400).fit(X)
    got = ddr.PLSA(3, random_state=0, max_iter=400).fit(scipy.sparse.csr_matrix(padded))
    assert ref.converged_ and got.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.loglike_, ref.loglike_, rtol=1e-10)
    assert (got.components_[:, 5] == 0).all()
    theta = got.transform(padded)
    np.testing.assert_allclose(theta[50:53], 1 / 3)
    # a new document holding only the unused word tells nothing: uniform
    only = np.zeros((1, 30))
    only[0, 5] = 4
    np.testing.assert_allclose(got.transform(only), 1 / 3)


@pytest.mark.parametrize("init", ["nndsvda", "random"])
@pytest.mark.parametrize("form", ["numpy", "csr", "dask"])
def test_negative_weights_are_refused(small, form, init):
    message = (
        r"Negative values in data passed to PLSA \(input X\): pLSA models non-negative "
        r"weights \(counts or tf-idf\); got 1 negative value\(s\), e.g. \[-1.0\]"
    )
    X = small[0].copy()
    X[17, 3] = -1.0
    data = {"numpy": X, "csr": scipy.sparse.csr_matrix(X),
            "dask": da.from_array(X, chunks=(100, -1))}[form]  # fmt: skip
    with pytest.raises(ValueError, match=message):
        ddr.PLSA(3, init=init, random_state=0).fit(data)
    fitted = ddr.PLSA(3, random_state=0, max_iter=100, tol=1e-3).fit(small[0])
    for method in (fitted.transform, fitted.score_samples):
        with pytest.raises(ValueError, match=message):
            np.asarray(da.asarray(method(data)).compute())


def test_n_components_limits_and_no_counts():
    X = np.ones((5, 4))
    limit = r"n_components=5 must be at most min\(n_samples=5, n_features=4\)=4: more topics"
    with pytest.raises(ValueError, match=limit):
        ddr.PLSA(5).fit(X)
    with pytest.raises(InvalidParameterError, match="'n_components' parameter of PLSA"):
        ddr.PLSA(0).fit(X)
    with pytest.raises(ValueError, match=r"X holds no counts \(every document is empty\)"):
        ddr.PLSA(2, random_state=0).fit(np.zeros((5, 4)))


def test_statistic_merges_and_round_trips(small):
    X, topics, _ = small
    spec = PLSASums.spec(topics=topics)
    whole = PLSASums.from_block(X, topics=topics)
    parts = compute(spec, da.from_array(scipy.sparse.csr_matrix(X), chunks=((120, 180), -1)))
    np.testing.assert_allclose(parts.topic_word, whole.topic_word, rtol=1e-12)
    assert parts.loglik == pytest.approx(whole.loglik, rel=1e-13)
    assert parts.n_docs == 300 and parts.n_tokens == X.sum()
    # the expected counts redistribute every token: they sum to the counts of each word
    np.testing.assert_allclose(whole.topic_word.sum(axis=0), X.sum(axis=0), rtol=1e-12)
    back = PLSASums.from_dict(whole.to_dict())
    np.testing.assert_array_equal(back.topic_word, whole.topic_word)


def _hofmann_em(X, phi, n_iter):
    """Hofmann's EM written out densely over every (document, word, topic): the reference."""
    theta = np.full((X.shape[0], phi.shape[0]), 1.0 / phi.shape[0])
    curve = []
    for _ in range(n_iter):
        joint = theta[:, :, None] * phi[None, :, :]  # (n, K, V)
        p = joint.sum(axis=1)  # P(w | d)
        curve.append(float((X * np.log(np.where(X > 0, p, 1.0))).sum()))
        q = X[:, None, :] * joint / np.where(p > 0, p, 1.0)[:, None, :]  # n(d, w) q(z | d, w)
        theta = q.sum(axis=2) / X.sum(axis=1, keepdims=True)
        phi = q.sum(axis=0) / q.sum(axis=(0, 2))[:, None]
    return phi, theta, np.array(curve)


@pytest.mark.parametrize("weights", ["counts", "tf-idf"])
def test_each_pass_is_one_step_of_hofmanns_em(small, weights):
    """On counts and on non-negative weights that are not whole numbers (tf-idf: EM maximises
    ``sum n(d, w) log P(w | d)`` for any weights, the Kullback-Leibler NMF objective)."""
    X, _, _ = small
    if weights == "tf-idf":
        X = TfidfTransformer().fit_transform(X).toarray()
        assert (X != np.round(X)).any()
    start = np.random.RandomState(4).dirichlet(np.ones(X.shape[1]), size=3)
    phi, _, curve = _hofmann_em(X, start, 25)
    model = ddr.PLSA(3, init="random", random_state=4, max_iter=25, tol=0.0)
    with pytest.warns(Warning, match="did not converge"):
        model.fit(da.from_array(scipy.sparse.csr_matrix(X), chunks=((70, 130, 100), -1)))
    np.testing.assert_allclose(model.loglike_, curve, rtol=1e-12)
    np.testing.assert_allclose(model.components_, phi, rtol=1e-9, atol=1e-14)


def test_the_block_step_in_cached_chunks_is_the_whole_step(small, monkeypatch):
    """The E-step computes ``P(w | d)`` a chunk of rows at a time, a long row in pieces: the
    same sums and mixtures whatever the chunk size (rows of 1 to 40 entries here: chunks of
    1 and 3 entries cut every row, 64 entries cut none)."""
    X, topics, mixtures = small
    X = X.copy()
    X[5] = 0  # an empty document among them
    ref_stat, ref_theta = PLSASums.from_block_with_rows(X, mixtures, topics=topics)
    # the dense reference of one step
    p = mixtures @ topics
    want_theta = mixtures * ((X / np.where(p > 0, p, 1.0)) @ topics.T)
    want_theta[X.sum(axis=1) > 0] /= X.sum(axis=1)[X.sum(axis=1) > 0, None]
    want_theta[5] = 1 / 3
    np.testing.assert_allclose(ref_theta, want_theta, rtol=1e-12)
    np.testing.assert_allclose(ref_stat.loglik, (X * np.log(np.where(X > 0, p, 1.0))).sum(),
                               rtol=1e-13)  # fmt: skip
    for entries in (1, 3, 64):
        monkeypatch.setattr(plsa_sums, "_CHUNK_BYTES", 8 * 3 * entries)
        stat, theta = PLSASums.from_block_with_rows(X, mixtures, topics=topics)
        np.testing.assert_allclose(theta, ref_theta, rtol=1e-13)
        np.testing.assert_allclose(stat.topic_word, ref_stat.topic_word, rtol=1e-13)
        assert stat.loglik == pytest.approx(ref_stat.loglik, rel=1e-14)


def test_weights_scaled_by_a_constant_give_the_same_topics(small):
    """pLSA of ``c X`` is pLSA of X (the mixtures, topics and the NNDSVD start do not depend
    on the scale), with ``c`` times the log-likelihood's data term."""
    X, _, _ = small
    ref = ddr.PLSA(3, random_state=0).fit(X)
    got = ddr.PLSA(3, random_state=0).fit(0.37 * X)
    assert got.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(got.transform(0.37 * X), ref.transform(X), rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(got.loglike_, 0.37 * ref.loglike_, rtol=1e-10)


def test_nndsvda_topics():
    """The first topic is ``|v_1|``, each further one the larger sign part of ``v_j``, floored
    at half the uniform probability, each a distribution."""
    v = np.array([[0.6, -0.8, 0.0], [0.6, 0.2, 0.6], [0.2, 0.3, -0.8], [0.5, 0.48, 0.0]])
    v = v / np.linalg.norm(v, axis=0)  # (V = 4, 3): three unit right singular vectors
    got = nndsvda_topics(v, 3)
    floor = _INIT_FLOOR / 4
    parts = [np.abs(v[:, 0]), np.maximum(-v[:, 1], 0), np.maximum(-v[:, 2], 0)]
    for row, part in zip(got, parts, strict=True):
        want = np.maximum(part / part.sum(), floor)
        np.testing.assert_allclose(row, want / want.sum(), rtol=1e-14)
    assert (got > 0).all() and got.shape == (3, 4)
    np.testing.assert_allclose(nndsvda_topics(-v, 3), got, rtol=1e-14)  # signs do not matter


@pytest.fixture(scope="module")
def example_corpus(tmp_path_factory):
    """The example pipeline's corpus (``ddr demo-data --kind counts`` with its header's
    options) at a quarter of its documents: 5 000 x 2 000, 10 topics."""
    header = (PIPELINES / "lsa-plsa.yaml").read_text()
    assert "--n-samples 20000 --n-features 2000" in header
    path = tmp_path_factory.mktemp("corpus") / "corpus.zarr"
    write_counts_data(path, CountsSpec(n_samples=5000, n_features=2000))
    return path


def test_the_example_pipelines_settings_converge_to_the_true_topics(example_corpus):
    """lsa-plsa.yaml's PLSA settings, on the demo corpus its header makes (a quarter of the
    documents, to run in a few seconds): EM converges within max_iter, and each topic is
    within Hellinger distance 0.2 of a true topic (0.10-0.11 here, in about 50 iterations;
    0.072-0.075 at the pipeline's 20 000 documents, in about 40)."""
    pipeline = YAML(typ="safe").load((PIPELINES / "lsa-plsa.yaml").read_text())
    settings = dict(pipeline["steps"]["plsa"]["with"])
    assert settings.pop("n_components") == "${params.k}"
    k = pipeline["params"]["k"]
    X = open_input(example_corpus, "X", protect=False).data
    truth = open_input(example_corpus, "true_topics", protect=False).values
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = ddr.PLSA(k, **settings).fit(X)
    assert model.converged_ and model.n_iter_ < settings["max_iter"]
    distance = _hellinger(model.components_, truth)
    assert distance.max() < 0.2, distance


def _hellinger(found, truth):
    """The Hellinger distance of each true topic to the found topic matched to it."""
    cost = np.sqrt(np.maximum(1 - np.sqrt(truth[:, None, :] * found[None, :, :]).sum(-1), 0))
    r, c = linear_sum_assignment(cost)
    return cost[r, c]


def test_mixtures_stay_on_the_workers_between_passes(small, client):
    """On a cluster the per-row mixtures are persisted on the workers, and the fit equals the
    threaded one."""
    X, _, _ = small
    Xd = da.from_array(scipy.sparse.csr_matrix(X), chunks=((100, 150, 50), -1))
    spec = PLSASums.spec(topics=np.random.RandomState(0).dirichlet(np.ones(40), size=3))
    _, rows = compute_with_rows(spec, Xd)
    assert len(rows.blocks) == 3
    held = client.who_has()
    assert all(held[b.key] for b in rows.blocks)  # a future each, in a worker's memory
    stat2, rows2 = compute_with_rows(spec, Xd, rows)
    _, local_rows = compute_with_rows(spec, X)
    local2, _ = compute_with_rows(spec, X, local_rows)
    assert stat2.loglik == pytest.approx(local2.loglik, rel=1e-13)
    np.testing.assert_allclose(stat2.topic_word, local2.topic_word, rtol=1e-12)
    theta = np.vstack(dask.compute(*rows2.blocks))
    assert theta.shape == (300, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    with pytest.warns(Warning, match="did not converge"):
        on_cluster = ddr.PLSA(3, random_state=0, max_iter=5, tol=0.0).fit(Xd)
    with pytest.warns(Warning, match="did not converge"):
        threaded = ddr.PLSA(3, random_state=0, max_iter=5, tol=0.0).fit(X)
    np.testing.assert_allclose(on_cluster.loglike_, threaded.loglike_, rtol=1e-12)


def test_folding_in_is_each_documents_own_em_to_its_tolerance(small):
    """transform: per document, EM over its mixture at the fitted topics until no weight moves
    by FOLD_IN_TOL (at most FOLD_IN_MAX_ITER steps), whatever block it is in."""
    X, _, _ = small
    model = ddr.PLSA(3, random_state=0, max_iter=300, tol=1e-7).fit(X)
    phi = model.components_
    want = np.empty((X.shape[0], 3))
    for i, x in enumerate(X):
        theta = np.full(3, 1 / 3)
        for _ in range(FOLD_IN_MAX_ITER):
            p = theta @ phi
            new = theta * (phi @ np.where(x > 0, x / np.where(p > 0, p, 1), 0)) / x.sum()
            done = np.abs(new - theta).max() < FOLD_IN_TOL
            theta = new
            if done:
                break
        want[i] = theta
    got = model.transform(da.from_array(scipy.sparse.csr_matrix(X), chunks=((1, 298, 1), -1)))
    np.testing.assert_allclose(got.compute(), want, rtol=1e-10, atol=1e-13)
