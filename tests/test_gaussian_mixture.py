"""ddr.GaussianMixture: from the same parameters each EM iteration is scikit-learn's (full, tied,
diag, spherical; with its reg_covar), the fit ends at least as high as scikit-learn's and at the
maximum an independent maximiser finds, n_init keeps the best start, the read-outs of a fitted
model are scikit-learn's, the model does not depend on the blocks or on an offset of the data,
one pass per iteration, bad input refused with its reason, and the BIC plot of several fits."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from graph_support import task_nbytes
from scipy import optimize, stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as SkGM
from sklearn.utils._param_validation import InvalidParameterError

import ddr
import ddr.mixture._gaussian_starts as starts_module
import ddr.mixture.gaussian_mixture as gm_module
from ddr.testing import counting_dask_array

CTS = ("full", "tied", "diag", "spherical")
K = 3


def _mixture(n=1500, seed=0):
    """Three 3-D Gaussian components of different shapes, weights 0.2, 0.3 and 0.5."""
    rng = np.random.default_rng(seed)
    means = np.array([[0.0, 0.0, 0.0], [4.0, 1.0, -2.0], [-3.0, 3.0, 1.0]])
    factors = [np.eye(3), np.array([[2.0, 0, 0], [0.8, 0.6, 0], [0, -0.5, 1.2]]), 0.7 * np.eye(3)]
    labels = rng.choice(3, size=n, p=[0.2, 0.3, 0.5])
    Z = rng.standard_normal((n, 3))
    return np.stack([means[c] + factors[c] @ z for c, z in zip(labels, Z, strict=True)])


def _start(X, ct):
    """A deliberately rough start: three rows as means, equal weights, unit-ish precisions of
    the layout of ``ct`` (different per component where the layout allows)."""
    d = X.shape[1]
    scale = np.array([0.5, 1.0, 2.0])
    if ct == "full":
        A = np.array([[1.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 1.0]])
        prec = np.stack([s * A for s in scale])
    elif ct == "tied":
        prec = np.array([[1.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 1.0]])
    elif ct == "diag":
        prec = np.outer(scale, np.linspace(0.5, 1.5, d))
    else:
        prec = scale.copy()
    return np.full(K, 1.0 / K), X[[0, 10, 20]].copy(), prec


def _sklearn(X, ct, start, max_iter, **kw):
    w, m, p = start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SkGM(K, covariance_type=ct, weights_init=w, means_init=m, precisions_init=p,
                    max_iter=max_iter, **kw).fit(X)  # fmt: skip


def _ours(X, ct, start, max_iter, **kw):
    w, m, p = start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return ddr.GaussianMixture(K, covariance_type=ct, weights_init=w, means_init=m,
                                   precisions_init=p, max_iter=max_iter, **kw).fit(X)  # fmt: skip


def _params(model):
    return model.weights_, model.means_, model.precisions_


def _assert_same_model(ours, ref, rtol):
    for name in ("weights_", "means_", "covariances_", "precisions_cholesky_", "precisions_"):
        a, b = getattr(ours, name), getattr(ref, name)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max(), err_msg=name)


def _computed(a):
    return np.asarray(a.compute() if hasattr(a, "compute") else a)


# ----------------------------------------------------------- against scikit-learn
@pytest.mark.parametrize("reg_covar", [1e-6, 0.3])
@pytest.mark.parametrize("form", ["numpy", "dask"])
@pytest.mark.parametrize("ct", CTS)
def test_each_em_iteration_is_scikit_learns(ct, form, reg_covar):
    """One iteration from each of scikit-learn's iterates 0..4 gives its next iterate to
    1e-10 (weights, means, covariances, precisions), and the log-likelihood of the E-step
    its lower_bound_; plain EM from the start equals scikit-learn's after 1 and 2 iterations
    (SQUAREM extrapolates from the third on: checked at convergence below)."""
    X = _mixture()
    data = X if form == "numpy" else da.from_array(X, chunks=(377, -1))
    start = _start(X, ct)
    params = start
    for it in (1, 2, 3, 4, 5):
        sk = _sklearn(X, ct, start, it, tol=0, reg_covar=reg_covar)
        step = _ours(data, ct, params, 1, tol=0, reg_covar=reg_covar)
        _assert_same_model(step, sk, rtol=1e-10)
        assert step.lower_bound_ == pytest.approx(sk.lower_bound_, rel=1e-12)
        assert step.n_iter_ == 1 and step.n_passes_ == 1
        if it <= 2:
            whole = _ours(data, ct, start, it, tol=0, reg_covar=reg_covar)
            _assert_same_model(whole, sk, rtol=1e-10)
            assert whole.lower_bound_ == pytest.approx(sk.lower_bound_, rel=1e-12)
        params = _params(sk)
    # reg_covar is on every diagonal as scikit-learn puts it: the variances are at least it
    var = {"full": lambda c: np.diagonal(c, axis1=1, axis2=2), "tied": np.diagonal}.get(
        ct, lambda c: c
    )(step.covariances_)
    assert np.all(var >= reg_covar)


@pytest.mark.parametrize("ct", CTS)
def test_converges_at_least_as_high_as_scikit_learn(ct):
    """From the same start: the default fit ends higher than scikit-learn's default
    (tol=1e-3 per row, absolute); with tol=1e-12 as high as scikit-learn run to tol=1e-12,
    in fewer iterations (SQUAREM)."""
    X = _mixture()
    start = _start(X, ct)
    ours = _ours(X, ct, start, 1000)
    assert ours.converged_
    assert ours.score(X) >= _sklearn(X, ct, start, 1000).score(X)
    sk = _sklearn(X, ct, start, 100_000, tol=1e-12)
    tight = _ours(X, ct, start, 10_000, tol=1e-12)
    assert tight.score(X) >= sk.score(X) - 1e-12 * abs(sk.score(X))
    assert tight.n_iter_ < sk.n_iter_
    _assert_same_model(tight, sk, rtol=1e-5)
    # the trace never falls, and the fitted parameters are at least as likely as its end
    assert np.all(np.diff(ours.lower_bounds_) >= -1e-13 * abs(ours.lower_bound_))
    assert ours.score(X) >= ours.lower_bound_ - 1e-13 * abs(ours.lower_bound_)


def _two_normals_loglik(theta, x):
    """Log-likelihood of a 1-D two-component mixture at (logit w, mu1, mu2, log s1, log s2)."""
    w = 1.0 / (1.0 + np.exp(-theta[0]))
    a = np.log(w) + stats.norm.logpdf(x, theta[1], np.exp(theta[3]))
    b = np.log1p(-w) + stats.norm.logpdf(x, theta[2], np.exp(theta[4]))
    return float(np.logaddexp(a, b).sum())


def test_one_dimension_two_components_at_the_maximum_of_an_independent_optimiser():
    """scipy's BFGS on the exact log-likelihood, from several starts, finds nothing higher than
    ddr's fit, and its maximiser is ddr's parameters."""
    rng = np.random.default_rng(4)
    x = np.where(rng.random(2000) < 0.35, rng.normal(-1.0, 0.6, 2000), rng.normal(1.2, 1.1, 2000))
    ours = ddr.GaussianMixture(2, tol=1e-12, max_iter=1000, random_state=0).fit(x[:, None])
    best = -np.inf
    theta_best = None
    for s in range(4):
        theta0 = np.array([0.0, -2.0 + s, 2.0 - 0.5 * s, 0.0, 0.3 * s])
        res = optimize.minimize(
            lambda t: -_two_normals_loglik(t, x), theta0, method="BFGS", options={"gtol": 1e-9}
        )
        if -res.fun > best:
            best, theta_best = -res.fun, res.x
    ll = ours.score(x[:, None]) * x.size
    assert ll >= best - 1e-10 * abs(best)
    order = np.argsort(ours.means_[:, 0])
    w = 1.0 / (1.0 + np.exp(-theta_best[0]))
    mus, sds = theta_best[1:3], np.exp(theta_best[3:5])
    theirs = np.argsort(mus)
    np.testing.assert_allclose(ours.means_[order, 0], mus[theirs], atol=1e-5)
    np.testing.assert_allclose(np.sqrt(ours.covariances_[order, 0, 0]), sds[theirs], atol=1e-5)
    np.testing.assert_allclose(ours.weights_[order], np.array([w, 1 - w])[theirs], atol=1e-5)


def test_as_high_as_the_best_of_many_scikit_learn_starts():
    X = _mixture(n=2000, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sk = SkGM(K, n_init=10, tol=1e-10, max_iter=5000, random_state=0).fit(X)
    ours = ddr.GaussianMixture(K, n_init=3, random_state=0).fit(da.from_array(X, chunks=(500, -1)))
    assert ours.score(X) >= sk.score(X) - 1e-7 * abs(sk.score(X))


def _overlapping_clusters():
    """Three overlapping 2-D clusters of 200 rows sharing one covariance."""
    rng = np.random.default_rng(0)
    centres = np.array([[-1.5, 0.0], [1.5, 0.0], [0.0, 2.5]])
    cov = np.array([[1.0, 0.3], [0.3, 0.8]])
    return np.concatenate([rng.multivariate_normal(c, cov, 200) for c in centres])


def test_a_plateau_is_crossed_to_the_maximum(monkeypatch):
    """Tied covariances, two components started 2e-4 apart at one place (a symmetric start):
    EM first nears the saddle where the two are one, its gains falling below tol |L|, then
    leaves it. The rule on the progress points alone (ddr.em before the plain steps' rates)
    stopped on that plateau 55 nats short; the fit at the default tol reaches the maximum of
    the best of 5 scikit-learn runs to tol=1e-12, within 1e-8 relative."""
    from ddr.em import _remaining

    X = _overlapping_clusters()
    states = []
    real = gm_module.fit_em

    def recording(*args, **kwargs):
        states.append(real(*args, **kwargs))
        return states[-1]

    monkeypatch.setattr(gm_module, "fit_em", recording)
    means = np.array([[1e-4, 0.5], [-1e-4, 0.5], [0.0, 2.0]])
    ours = ddr.GaussianMixture(
        3, covariance_type="tied", weights_init=np.full(3, 1 / 3), means_init=means,
        precisions_init=np.linalg.inv(np.cov(X.T)),
    ).fit(X)  # fmt: skip
    assert ours.converged_ and ours.tol == 1e-6
    loglik = ours.score(X) * X.shape[0]
    # the plateau: where the rule on the progress points alone stops
    points = states[0].cycle.points
    stop = next(
        j
        for j in range(2, len(points))
        if 0 < points[j] - points[j - 1] <= 1e-6 * abs(points[j])
        and _remaining(points[: j + 1]) <= 1e-6 * abs(points[j])
    )
    assert points[stop] < loglik - 50.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        best = max(
            SkGM(3, covariance_type="tied", tol=1e-12, max_iter=20_000, random_state=s)
            .fit(X)
            .score(X)
            for s in range(5)
        ) * X.shape[0]  # fmt: skip
    assert abs(loglik - best) <= 1e-8 * abs(best)


def test_n_init_keeps_the_best_start(monkeypatch):
    """Every start's EM is run; the one with the highest log-likelihood is kept; the sample
    of the starts is drawn once (one pass) and shared."""
    X = _mixture(n=1200, seed=5)
    runs = []
    real = gm_module.fit_em

    def recording(*args, **kwargs):
        state = real(*args, **kwargs)
        runs.append(state)
        return state

    monkeypatch.setattr(gm_module, "fit_em", recording)
    arr, counter = counting_dask_array(X, chunks=(300, -1))
    gm = ddr.GaussianMixture(
        5, n_init=4, init_params="random_from_data", max_iter=30, random_state=1
    )
    with dask.config.set(scheduler="sync"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a start of five for three
        gm.fit(arr)
    assert len(runs) == 4
    finals = [r.loglik[-1] for r in runs]
    assert len(set(finals)) > 1  # the starts reached different optima
    best = runs[int(np.argmax(finals))]
    assert gm.lower_bound_ == max(finals) / X.shape[0]
    assert gm.n_iter_ == best.n_iter
    np.testing.assert_array_equal(gm.means_, best.params.params.means)
    assert counter.passes == gm.n_passes_ == 1 + sum(r.n_iter for r in runs)


@pytest.mark.parametrize("ct", CTS)
def test_read_outs_are_scikit_learns_for_the_same_parameters(ct):
    X = _mixture(n=1000, seed=1)
    gm = ddr.GaussianMixture(K, covariance_type=ct, random_state=0).fit(X)
    sk = SkGM(K, covariance_type=ct)
    for name in ("weights_", "means_", "covariances_", "precisions_cholesky_", "precisions_"):
        setattr(sk, name, getattr(gm, name))
    sk.n_features_in_ = 3
    Q = _mixture(n=400, seed=2) + 0.5
    np.testing.assert_array_equal(gm.predict(Q), sk.predict(Q))
    np.testing.assert_allclose(gm.predict_proba(Q), sk.predict_proba(Q), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(gm.score_samples(Q), sk.score_samples(Q), rtol=1e-10)
    assert gm.score(Q) == pytest.approx(sk.score(Q), rel=1e-12)
    assert gm.bic(Q) == pytest.approx(sk.bic(Q), rel=1e-12)
    assert gm.aic(Q) == pytest.approx(sk.aic(Q), rel=1e-12)
    # dask in, lazy dask out with the same values; a DataArray keeps its rows and names
    Qd = da.from_array(Q, chunks=(150, -1))
    lazy = gm.predict_proba(Qd)
    assert isinstance(lazy, da.Array) and isinstance(gm.predict(Qd), da.Array)
    np.testing.assert_allclose(lazy.compute(), sk.predict_proba(Q), rtol=1e-10, atol=1e-14)
    assert gm.bic(Qd) == pytest.approx(sk.bic(Q), rel=1e-12)
    Qx = xr.DataArray(Q, dims=("obs", "var"), coords={"obs": np.arange(400) * 2})
    proba = gm.predict_proba(Qx)
    assert proba.dims == ("obs", "component") and proba["obs"].values[-1] == 798
    assert gm.predict(Qx).dims == ("obs",)


def test_large_parameters_go_into_a_prediction_graph_once():
    """The fitted parameters (a dataclass of arrays) are one key of a prediction's graph, not
    a copy in every block's task: on 2 000 features a full mixture's precision factors are
    160 MB, which distributed sent to a worker with each of its tasks."""
    from ddr.stats.engine import SHIP_BYTES

    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 60))
    gm = ddr.GaussianMixture(3, max_iter=5, random_state=0).fit(X)
    assert gm.precisions_cholesky_.nbytes > SHIP_BYTES
    Xd = da.from_array(X, chunks=(100, -1))
    for method in ("predict", "predict_proba", "score_samples"):
        out = getattr(gm, method)(Xd)
        sizes = task_nbytes(out)
        blocks = [n for k, n in sizes.items() if "gmm-" in str(k)]
        assert len(blocks) == 6 and max(blocks) < SHIP_BYTES, (method, blocks)
        assert sum(n > gm.precisions_cholesky_.nbytes for n in sizes.values()) == 1
        np.testing.assert_allclose(out.compute(), getattr(gm, method)(X), rtol=1e-12)


# ------------------------------------------------------------------- invariances
@pytest.mark.parametrize("ct", CTS)
def test_the_model_does_not_depend_on_the_blocks(ct):
    """The default start (k-means on a blocking-independent sample), EM and the stopping
    rule: numpy and dask in blocks of any size (a 1-row last one too) give the same model
    to round-off, in the same number of iterations."""
    X = _mixture(n=1200, seed=6)
    ref = ddr.GaussianMixture(K, covariance_type=ct, random_state=0).fit(X)
    for chunks in ((7, 600, 593), (1199, 1), (250,) * 4 + (200,)):
        other = ddr.GaussianMixture(K, covariance_type=ct, random_state=0)
        other.fit(da.from_array(X, chunks=(chunks, -1)))
        _assert_same_model(other, ref, rtol=1e-12)
        assert other.n_iter_ == ref.n_iter_
        assert other.lower_bound_ == pytest.approx(ref.lower_bound_, rel=1e-13)


@pytest.mark.parametrize("ct", CTS)
def test_data_on_an_offset_keep_their_digits(ct):
    """Rows and means are moved by the components' weighted mean before anything is
    multiplied: an iteration on data moved by 1e6 is the iteration on the data to the digits
    the moved input keeps (ulp(1e6) = 1.2e-10); a fit on data moved by 1e8 is the same
    model moved (at 1e8 scikit-learn's tied, diag and spherical fits of these data fail as
    ill-defined)."""
    X = _mixture(n=1200, seed=6)
    w, m, p = _start(X, ct)
    for offset, digits in ((1e6, 1e-10), (1e8, 1e-7)):
        shift = offset * np.array([1.0, -2.0, 0.5])
        moved = X + shift
        back = moved - shift  # exact: the data the moved input holds
        for it in (1, 3):
            ours = _ours(back, ct, (w, m, p), it, tol=0)
            far = _ours(da.from_array(moved, chunks=(500, -1)), ct, (w, m + shift, p), it, tol=0)
            # means at |x| ~ 2 offset are held to ulp(2 offset): 2.2 digits of spread
            np.testing.assert_allclose(far.means_ - shift, ours.means_, atol=20 * digits)
            for name in ("weights_", "covariances_"):
                a, b = getattr(far, name), getattr(ours, name)
                np.testing.assert_allclose(a, b, rtol=10 * digits, atol=10 * digits * b.max())
            assert far.lower_bound_ == pytest.approx(ours.lower_bound_, rel=10 * digits)
    ref = ddr.GaussianMixture(K, covariance_type=ct, random_state=0).fit(back)
    far = ddr.GaussianMixture(K, covariance_type=ct, random_state=0)
    far.fit(da.from_array(moved, chunks=(500, -1)))
    np.testing.assert_allclose(far.means_ - shift, ref.means_, atol=1e-6)
    np.testing.assert_allclose(far.covariances_, ref.covariances_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(far.weights_, ref.weights_, rtol=1e-6)
    np.testing.assert_array_equal(_computed(far.predict(moved)), ref.predict(back))


def test_float32_input_is_fitted_in_float64():
    X32 = _mixture(n=1000, seed=7).astype(np.float32)
    gm = ddr.GaussianMixture(K, random_state=0).fit(da.from_array(X32, chunks=(300, -1)))
    ref = ddr.GaussianMixture(K, random_state=0).fit(X32.astype(np.float64))
    _assert_same_model(gm, ref, rtol=1e-12)
    assert gm.means_.dtype == gm.covariances_.dtype == np.float64
    assert gm.predict_proba(X32).dtype == np.float64


@pytest.mark.parametrize("init_params", ["kmeans", "k-means++", "random", "random_from_data"])
def test_one_pass_per_em_iteration(init_params):
    """Counted: the starts' passes (the sample: one; k-means: one more, of every row's
    cluster at the sample's k-means centres), then one pass per EM iteration; given all of
    weights, means and precisions, EM's passes only."""
    X = _mixture(n=1200, seed=8)
    arr, counter = counting_dask_array(X, chunks=(300, -1))
    with dask.config.set(scheduler="sync"):
        gm = ddr.GaussianMixture(K, init_params=init_params, random_state=0).fit(arr)
    assert counter.passes == gm.n_passes_
    assert gm.n_passes_ == (2 if init_params == "kmeans" else 1) + gm.n_iter_
    arr, counter = counting_dask_array(X, chunks=(300, -1))
    with dask.config.set(scheduler="sync"):
        given = _ours(arr, "full", _start(X, "full"), 7, tol=0)
    assert counter.passes == given.n_passes_ == given.n_iter_ == 7


@pytest.mark.parametrize("ct", CTS)
def test_the_kmeans_start_is_the_m_step_of_a_k_means_labelling_of_all_rows(ct, monkeypatch):
    """init_params="kmeans": the sample's k-means centres (here given), every row labelled
    with its nearest centre in one pass, and the components start as scikit-learn's
    ``_initialize`` makes them from those one-hot responsibilities: the first iteration is
    scikit-learn's from that start."""
    from sklearn.metrics import pairwise_distances_argmin
    from sklearn.mixture._gaussian_mixture import _estimate_gaussian_parameters

    X = _mixture(n=5000, seed=6)
    centres = X[[1, 2, 3]] + 0.25
    monkeypatch.setattr(starts_module, "best_sample_centres", lambda *args: centres)
    resp = np.eye(K)[pairwise_distances_argmin(X, centres)]
    w, m, cov = _estimate_gaussian_parameters(X, resp, 1e-6, ct)
    prec = {"full": lambda c: np.linalg.inv(c), "tied": np.linalg.inv}.get(ct, lambda c: 1 / c)
    start = (w / X.shape[0], m, prec(cov))
    for it in (1, 2):  # (SQUAREM's iterates are not scikit-learn's after the second)
        sk = _sklearn(X, ct, start, it, tol=0)
        arr, counter = counting_dask_array(X, chunks=(1200, -1))
        with dask.config.set(scheduler="sync"), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            ours = ddr.GaussianMixture(K, covariance_type=ct, max_iter=it, tol=0).fit(arr)
        _assert_same_model(ours, sk, rtol=1e-10)
        assert ours.lower_bound_ == pytest.approx(sk.lower_bound_, rel=1e-12)
        assert counter.passes == ours.n_passes_ == 2 + it  # the sample, the labels, EM


def test_the_sample_k_means_keeps_its_lowest_inertia_run():
    from ddr.clustering.kmeans import best_sample_centres, initial_centres

    X = _mixture(n=900, seed=9)
    got = best_sample_centres(X, 5, np.random.RandomState(3), 3)
    rng = np.random.RandomState(3)
    runs = [initial_centres(X, 5, "k-means++", rng) for _ in range(3)]

    def inertia(c):
        return float(((X[:, None, :] - c[None]) ** 2).sum(axis=2).min(axis=1).sum())

    assert inertia(got) == pytest.approx(min(inertia(c) for c in runs), rel=1e-12)
    assert any(np.array_equal(got, c) for c in runs)


# --------------------------------------------------------------------- refusals
def test_bad_input_is_refused_with_its_reason():
    X = _mixture(n=60)
    eye = np.stack([np.eye(3)] * K)

    def fit(**kw):
        return ddr.GaussianMixture(K, **kw).fit(X)

    with pytest.raises(ValueError, match=r"'weights' should have the shape of \(3,\), but got"):
        fit(weights_init=[0.5, 0.5])
    with pytest.raises(ValueError, match=r"'weights' should be normalized, but got sum"):
        fit(weights_init=[0.2, 0.2, 0.2])
    with pytest.raises(ValueError, match=r"'weights' should be in the range \[0, 1\]"):
        fit(weights_init=[1.5, -0.25, -0.25])
    with pytest.raises(ValueError, match=r"'means' should have the shape of \(3, 3\), but got"):
        fit(means_init=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="'means' contains NaN or infinity"):
        fit(means_init=np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match=r"'full precision' should have the shape of \(3, 3, 3\)"):
        fit(precisions_init=np.eye(3))
    with pytest.raises(ValueError, match=r"'tied precision' should have the shape of \(3, 3\)"):
        fit(covariance_type="tied", precisions_init=eye)
    with pytest.raises(ValueError, match=r"'diag precision' should have the shape of \(3, 3\)"):
        fit(covariance_type="diag", precisions_init=np.ones(3))
    with pytest.raises(ValueError, match=r"'spherical precision' should have the shape of \(3,\)"):
        fit(covariance_type="spherical", precisions_init=np.ones((3, 3)))
    indefinite = eye.copy()
    indefinite[1, 2, 2] = -1.0
    with pytest.raises(ValueError, match="'full precision' should be symmetric, positive-definite"):
        fit(precisions_init=indefinite)
    asymmetric = eye.copy()
    asymmetric[0, 0, 1] = 0.5
    with pytest.raises(ValueError, match="'full precision' should be symmetric, positive-definite"):
        fit(precisions_init=asymmetric)
    with pytest.raises(ValueError, match="'tied precision' should be symmetric, positive-definite"):
        fit(covariance_type="tied", precisions_init=-np.eye(3))
    with pytest.raises(ValueError, match="'diag precision' should be positive"):
        fit(covariance_type="diag", precisions_init=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="'spherical precision' should be positive"):
        fit(covariance_type="spherical", precisions_init=np.array([1.0, 0.0, 2.0]))
    with pytest.raises(
        ValueError,
        match=r"Expected n_samples >= n_components but got n_components = 61, n_samples = 60",
    ):
        ddr.GaussianMixture(61).fit(X)
    with pytest.raises(ValueError, match=r"Expected n_samples >= 2 but got n_samples = 1"):
        ddr.GaussianMixture(1).fit(X[:1])
    with pytest.raises(InvalidParameterError, match=r"'covariance_type' parameter of Gaussian"):
        ddr.GaussianMixture(2, covariance_type="bogus").fit(X)
    with pytest.raises(InvalidParameterError, match=r"'reg_covar' parameter of GaussianMixture"):
        ddr.GaussianMixture(2, reg_covar=-1.0).fit(X)
    bad = X.copy()
    bad[17, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        ddr.GaussianMixture(2, random_state=0).fit(bad)
    with pytest.raises(ValueError, match=r"X contains 1 NaN value"):
        ddr.GaussianMixture(2, random_state=0).fit(da.from_array(bad, chunks=(20, -1)))
    # a component collapsed on one row with no regularisation: scikit-learn's message
    collapsed = np.vstack([X, [[100.0, 100.0, 100.0]]])
    with pytest.raises(ValueError, match="ill-defined empirical covariance"):
        _ours(collapsed, "full", (np.full(3, 1 / 3), np.vstack([X[:2], collapsed[-1:]]), eye),
              3, reg_covar=0.0)  # fmt: skip
    gm = ddr.GaussianMixture(2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 2 features, but GaussianMixture is expecting 3"):
        gm.predict(X[:, :2])


# ------------------------------------------------------------------- BIC plot
def _fits(X, ks, ct="full"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return {
            f"gm{k}{ct[0]}": ddr.GaussianMixture(k, covariance_type=ct, random_state=0).fit(X)
            for k in ks
        }


def test_information_criteria_need_no_pass_and_bound_bic():
    """From the fit's last E-step: -2 n lower_bound_ + p log n, at least bic(X) of the fitted
    parameters (EM's last M-step only raised the likelihood), within the last gain."""
    X = _mixture(n=900, seed=9)
    arr, counter = counting_dask_array(X, chunks=(300, -1))
    with dask.config.set(scheduler="sync"):
        gm = ddr.GaussianMixture(K, random_state=0).fit(arr)
        passes = counter.passes
        crit = gm.information_criteria()
        assert counter.passes == passes
    n, p = 900, K * 3 * 4 / 2 + K * 3 + K - 1
    assert crit["n_samples"] == gm.n_samples_ == n and crit["n_parameters"] == p
    assert crit["n_components"] == K
    assert crit["bic"] == pytest.approx(-2 * n * gm.lower_bound_ + p * np.log(n), rel=1e-15)
    assert crit["aic"] == pytest.approx(-2 * n * gm.lower_bound_ + 2 * p, rel=1e-15)
    gap = 2 * gm.tol * abs(crit["log_likelihood"])
    assert gm.bic(X) - 1e-9 <= crit["bic"] <= gm.bic(X) + gap
    assert gm.aic(X) - 1e-9 <= crit["aic"] <= gm.aic(X) + gap


def test_bic_plot_draws_each_models_criteria(tmp_path):
    from ddr.pipeline.outputs.plot import png_bytes
    from ddr.pipeline.outputs.plots import draw_bic

    X = _mixture(n=900, seed=10)
    models = {**_fits(X, (1, 2, 3, 4)), **_fits(X, (2, 3), "diag")}
    fig = draw_bic(models, None)
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    for ct, ks in (("full", (1, 2, 3, 4)), ("diag", (2, 3))):
        crit = [models[f"gm{k}{ct[0]}"].information_criteria() for k in ks]
        bic = lines[f"BIC (covariance_type='{ct}')"]
        aic = lines[f"AIC (covariance_type='{ct}')"]
        np.testing.assert_array_equal(bic.get_xdata(), ks)
        np.testing.assert_allclose(bic.get_ydata(), [c["bic"] for c in crit], rtol=1e-15)
        np.testing.assert_allclose(aic.get_ydata(), [c["aic"] for c in crit], rtol=1e-15)
        assert aic.get_linestyle() == "--"
    every = {name: m.information_criteria()["bic"] for name, m in models.items()}
    name = min(every, key=every.get)
    assert name == "gm3f"  # three components, each its own full covariance: the truth
    star = lines[f"lowest BIC {every[name]:,.1f}: {name}"]
    assert star.get_xdata()[0] == 3 and star.get_ydata()[0] == every[name]
    assert ax.get_xlabel() == "number of components (900 rows)"
    assert fig.get_suptitle() == "GaussianMixture: BIC and AIC by number of components"
    path = tmp_path / "bic.png"
    path.write_bytes(png_bytes(fig, None, None))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    # one setting: plain labels, AIC in its own colour
    single = draw_bic(_fits(X, (1, 2)), "mine")
    labels = [line.get_label() for line in single.axes[0].get_lines()]
    assert labels[:2] == ["BIC", "AIC"] and single.get_suptitle() == "mine"


def test_bic_plot_refuses_what_it_cannot_compare():
    from ddr.pipeline.outputs.plots import draw_bic

    X = _mixture(n=300, seed=11)
    with pytest.raises(ValueError, match=r"needs models with information_criteria\(\).*'pca'"):
        draw_bic({"gm": ddr.GaussianMixture(2, random_state=0).fit(X), "pca": ddr.PCA(2).fit(X)})
    with pytest.raises(ValueError, match=r"different numbers of rows \(a: 300, b: 200\)"):
        draw_bic(
            {
                "a": ddr.GaussianMixture(2, random_state=0).fit(X),
                "b": ddr.GaussianMixture(3, random_state=0).fit(X[:200]),
            }
        )


def test_bic_plot_is_checked_before_any_data_is_read(tmp_path, monkeypatch):
    """A pipeline naming one model, or a model without criteria, is refused at plan time
    with the place in the file."""
    from ddr.demo import DemoSpec, write_demo_data
    from ddr.pipeline import PipelineError, plan_pipeline

    monkeypatch.chdir(tmp_path)
    write_demo_data(tmp_path / "d.zarr", DemoSpec(300, 3, 2, 3, 100))
    head = (
        "ddr: 1\nname: bic\ninputs:\n  X: {path: d.zarr, array: X}\nsteps:\n"
        "  gm2: {op: GaussianMixture.fit, inputs: {X: X}, with: {n_components: 2}}\n"
        "  pca: {op: PCA.fit, inputs: {X: X}, with: {n_components: 2}}\noutputs:\n"
    )
    for outputs, message in [
        ("  - {kind: plot, plot: bic, from: [gm2], path: b.png}\n",
         r"p.yaml:9:35: a bic plot compares two or more fitted models; name them in a list"),
        ("  - {kind: plot, plot: bic, from: [gm2, pca], path: b.png}\n",
         r"p.yaml:9:41: a bic plot needs models with information_criteria\(\) "
         r"\(GaussianMixture\); 'pca' is a PCA"),
        ("  - {kind: plot, plot: bic, from: gm2, path: b.png}\n",
         r"p.yaml:9:35: outputs\[0\].from: must be a valid list; got 'gm2'"),
    ]:  # fmt: skip
        path = tmp_path / "p.yaml"
        path.write_text(head + outputs)
        with pytest.raises(PipelineError, match=message):
            plan_pipeline(path)


def test_the_plan_states_the_passes_known_before_the_fit(tmp_path, monkeypatch):
    """`ddr plan` says what it knows of a fit's passes: the start's, and one per EM
    iteration up to max_iter (what the run counts is decided as it converges)."""
    from ddr.demo import DemoSpec, write_demo_data
    from ddr.pipeline import plan_pipeline
    from ddr.pipeline.plan import format_plan

    monkeypatch.chdir(tmp_path)
    write_demo_data(tmp_path / "d.zarr", DemoSpec(300, 3, 2, 3, 100))
    steps = {
        "gm": "{n_components: 2}",
        "gm_pp": "{n_components: 2, init_params: k-means++, n_init: 3, max_iter: 50}",
        "km": None,
    }
    text = "ddr: 1\nname: p\ninputs:\n  X: {path: d.zarr, array: X}\nsteps:\n"
    for name, params in steps.items():
        op = "KMeans.fit" if params is None else "GaussianMixture.fit"
        text += f"  {name}: {{op: {op}, inputs: {{X: X}}, with: {params or '{n_clusters: 2}'}}}\n"
    text += "outputs:\n" + "".join(
        f"  - {{kind: model, from: {name}, path: {name}.model.zarr}}\n" for name in steps
    )
    (tmp_path / "p.yaml").write_text(text)
    text = format_plan(plan_pipeline(tmp_path / "p.yaml"))
    for fact in (
        "(passes decided at run time: 1 for a sample of rows and 1 for its k-means labels, "
        "then one per EM iteration, at most 100)",
        "(passes decided at run time: 1 for a sample of rows, then one per EM iteration, at "
        "most 50 per start (3 starts))",
        "(passes decided at run time: 1 for a sample, then per start one per Lloyd iteration "
        "(at most 300) and one at its final centres unless they are a fixed point)",
    ):
        assert fact in text
    given = ddr.GaussianMixture(2, weights_init=[0.5, 0.5], means_init=[[0], [1]],
                                precisions_init=[[[1.0]], [[1.0]]])  # fmt: skip
    tags = ddr.tags.get_ddr_tags(given)
    assert tags.fit.passes_note == "no pass for the start, then one per EM iteration, at most 100"
