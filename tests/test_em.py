"""The EM driver (ddr.em): a generic problem against scikit-learn, one pass per iteration,
progress records, the convergence warning, and resumption from a saved state."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, NamedTuple, Self

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

import ddr
from ddr.em import EMState, fit_em
from ddr.progress import PROGRESS_ATTR
from ddr.stats.base import Statistic
from ddr.testing import counting_dask_array


# --------------------------------------------- a problem that is not PPCA: a 1-D mixture
@dataclasses.dataclass(frozen=True)
class MixtureParams:
    weights: np.ndarray
    means: np.ndarray
    variances: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class MixtureSums(Statistic):
    """E-step sums of a 1-D Gaussian mixture: responsibilities, weighted sums and squares."""

    n: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    loglik: float

    @classmethod
    def from_block(cls, X, y=None, sample_weight=None, *, params: MixtureParams) -> Self:
        x = np.asarray(X, dtype=np.float64)[:, 0]
        logp = (
            np.log(params.weights)
            - 0.5 * np.log(2 * np.pi * params.variances)
            - 0.5 * (x[:, None] - params.means) ** 2 / params.variances
        )
        top = logp.max(axis=1, keepdims=True)
        norm = top[:, 0] + np.log(np.exp(logp - top).sum(axis=1))
        r = np.exp(logp - norm[:, None])
        return cls(r.sum(axis=0), r.T @ x, r.T @ x**2, float(norm.sum()))

    def merge(self, other: Self) -> Self:
        return type(self)(
            self.n + other.n, self.s1 + other.s1, self.s2 + other.s2, self.loglik + other.loglik
        )

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"n": self.n, "s1": self.s1, "s2": self.s2}

    def _scalars(self) -> dict[str, Any]:
        return {"loglik": self.loglik}


class Mixture:
    def statistic(self, params: MixtureParams):
        return MixtureSums.spec(params=params)

    def m_step(self, stat: MixtureSums, params: MixtureParams) -> MixtureParams:
        means = stat.s1 / stat.n
        return MixtureParams(stat.n / stat.n.sum(), means, stat.s2 / stat.n - means**2)


def mixture_data(rng, n=3000):
    return np.r_[rng.normal(-2.0, 0.7, n // 3), rng.normal(1.5, 1.2, n - n // 3)][:, None]


START = MixtureParams(np.array([0.5, 0.5]), np.array([-1.0, 1.0]), np.array([1.0, 1.0]))


def test_a_generic_problem_equals_scikit_learn_and_reads_once_per_iteration(rng):
    """A Gaussian mixture written as an EMProblem reaches scikit-learn's EM fixed point from
    the same start (both run until the log-likelihood stops rising); its log-likelihood never
    decreases; each iteration is one pass."""
    X = mixture_data(rng)
    arr, counter = counting_dask_array(X, chunks=(700, -1))
    with dask.config.set(scheduler="threads"):
        state = fit_em(
            arr, Mixture(), EMState(START), tol=0.0, max_iter=2000,
            logger=logging.getLogger("ddr.test"), what="mixture (EM)", owner="mixture",
        )  # fmt: skip
    assert state.converged and counter.passes == state.n_iter == len(state.loglik)
    assert np.all(np.diff(state.loglik) >= -1e-12 * abs(state.loglik[-1]))
    sk = GaussianMixture(
        2, covariance_type="diag", tol=1e-15, max_iter=5000, reg_covar=0.0,
        weights_init=START.weights, means_init=START.means[:, None],
        precisions_init=1 / START.variances[:, None],
    ).fit(X)  # fmt: skip
    np.testing.assert_allclose(state.params.means, sk.means_[:, 0], rtol=1e-6)
    np.testing.assert_allclose(state.params.variances, sk.covariances_[:, 0], rtol=1e-6)
    np.testing.assert_allclose(state.params.weights, sk.weights_, rtol=1e-6)
    assert state.loglik[-1] / len(X) == pytest.approx(sk.score(X), rel=1e-10)


def test_resuming_a_state_continues_the_same_iterations(rng):
    X = mixture_data(rng, n=600)
    kw = dict(logger=logging.getLogger("ddr.test"), what="mixture (EM)", owner="mixture")
    with pytest.warns(ConvergenceWarning, match="max_iter=12"):
        whole = fit_em(X, Mixture(), EMState(START), tol=0.0, max_iter=12, **kw)
    with pytest.warns(ConvergenceWarning, match=r"mixture: EM did not converge in max_iter=5 "):
        part = fit_em(X, Mixture(), EMState(START), tol=0.0, max_iter=5, **kw)
    assert part.n_iter == 5 and not part.converged
    with pytest.warns(ConvergenceWarning, match="max_iter=7"):
        rest = fit_em(X, Mixture(), part, tol=0.0, max_iter=7, **kw)
    assert rest.n_iter == 12 and rest.loglik == whole.loglik
    np.testing.assert_array_equal(rest.params.means, whole.params.means)


def test_a_start_known_to_be_optimal_stops_after_one_pass(rng):
    X = mixture_data(rng, n=600)
    kw = dict(logger=logging.getLogger("ddr.test"), what="m", owner="m")
    ref = fit_em(X, Mixture(), EMState(START), tol=1e-13, max_iter=3000, **kw)
    stat = MixtureSums.from_block(X, params=ref.params)
    again = fit_em(X, Mixture(), EMState(ref.params, start_loglik=stat.loglik), tol=1e-9,
                   max_iter=50, **kw)  # fmt: skip
    assert again.n_iter == 1 and again.converged


def test_progress_records_say_iteration_loglik_and_resumption(rng, caplog):
    caplog.set_level(logging.INFO, logger="ddr")
    X = mixture_data(rng, n=300)
    kw = dict(logger=logging.getLogger("ddr.test"), what="mixture (EM)", owner="mixture")
    with pytest.warns(ConvergenceWarning):
        part = fit_em(X, Mixture(), EMState(START), tol=0.0, max_iter=2, **kw)
    caplog.clear()
    with pytest.warns(ConvergenceWarning):
        fit_em(X, Mixture(), part, tol=0.0, max_iter=2, **kw)
    records = [(r.getMessage(), getattr(r, PROGRESS_ATTR)) for r in caplog.records]
    assert records[0][0].startswith(
        "mixture (EM): at most 2 iterations of one pass each, resumed after 2, until the "
        "log-likelihood's last gain and its estimated remaining gain are below tol=0 "
        "(relative)"
    )
    assert records[1][0].startswith("mixture (EM): iteration 1 (")
    # the first new iteration is compared with the resumed state's last log-likelihood
    assert "change +" in records[1][0] and "change +" in records[2][0]
    assert records[-1][0].startswith("mixture (EM): stopped at max_iter=2 without converging")
    assert records[-1][1].finished


# ------------------------------------------------------------------ the stopping rule
class _Point(NamedTuple):
    loglik: float
    x: np.ndarray


class LinearMap:
    """An EM-like map on the client (``fit_em(None, ...)``): ``F(x) = x* + J (x - x*)`` and a
    quadratic log-likelihood ``L(x) = -c - |x - x*|^2 / 2``. J has a slow real eigenvalue
    (0.999) and a faster rotating pair, whose gains oscillate around their trend."""

    def __init__(self, slow: float = 0.999) -> None:
        theta = 0.9
        rot = 0.9 * np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
        self.J = np.zeros((3, 3))
        self.J[0, 0] = slow
        self.J[1:, 1:] = rot
        self.optimum = np.array([1.0, -2.0, 0.5])
        self.c = 1.0e4

    def loglik(self, x: np.ndarray) -> float:
        return -self.c - 0.5 * float(np.sum((x - self.optimum) ** 2))

    def expectation(self, x: np.ndarray) -> Any:
        return _Point(self.loglik(x), x)

    def statistic(self, x: np.ndarray) -> Any:
        raise AssertionError("a client-side problem makes no pass")

    def m_step(self, stat: Any, x: np.ndarray) -> np.ndarray:
        return self.optimum + self.J @ (stat.x - self.optimum)


class LinearMapVectors(LinearMap):
    """The map in SQUAREM's coordinates, with real eigenvalues 0.999, 0.5 and 0.3 (a
    rotating fast pair defeats SQUAREM's one step length: it amplifies the pair when it
    extrapolates along the slow direction, and the step is refused)."""

    def __init__(self) -> None:
        super().__init__()
        self.J = np.diag([0.999, 0.5, 0.3])

    def to_vector(self, x: np.ndarray) -> np.ndarray:
        return x

    def from_vector(self, v: np.ndarray, x: np.ndarray) -> np.ndarray:
        return v


KW = dict(logger=logging.getLogger("ddr.test"), what="test (EM)", owner="test")


def test_the_stopping_rule_is_not_fooled_by_slow_linear_convergence():
    """At a rate of 0.999 the last gain is 1/500 of what is left: a rule on the gain alone
    stops 500 times too far from the optimum. The windowed Aitken estimate stops within tol
    (relative) of it, through the oscillating gains of the faster components; the client
    iterations read nothing."""
    problem = LinearMap()
    start = np.array([3.0, 1.0, -1.0])
    tol = 1e-10
    state = fit_em(None, problem, EMState(start), tol=tol, max_iter=100_000, **KW)
    assert state.converged and len(state.loglik) == state.n_iter
    bound = tol * problem.c
    gap = -problem.c - state.loglik[-1]
    assert gap <= 2 * bound
    assert state.remaining is not None and state.remaining <= bound
    # where the usual rule (last gain <= tol |loglik|) stops on the same trace
    curve = np.asarray(state.loglik)
    naive = int(np.argmax(np.diff(curve) <= tol * np.abs(curve[1:]))) + 1
    assert -problem.c - curve[naive] > 100 * bound
    assert np.all(np.diff(curve) >= 0)


def test_squarem_reaches_the_same_optimum_in_fewer_iterations():
    """SQUAREM on the same map: the same optimum (to tol), a fraction of the iterations, a
    never-decreasing trace; without vectors, or with accelerate=False, plain EM."""
    start = np.array([3.0, 1.0, -1.0])
    tol = 1e-10
    plain = fit_em(None, LinearMapVectors(), EMState(start), tol=tol, max_iter=100_000,
                   accelerate=False, **KW)  # fmt: skip
    fast = fit_em(None, LinearMapVectors(), EMState(start), tol=tol, max_iter=100_000, **KW)
    bound = tol * 1e4
    assert plain.converged and fast.converged
    for state in (plain, fast):
        assert -1e4 - state.loglik[-1] <= 2 * bound
        assert np.all(np.diff(state.loglik) >= 0)
    assert fast.n_iter * 50 < plain.n_iter and fast.n_refused == 0
    no_vectors = LinearMap()
    no_vectors.J = LinearMapVectors().J
    unchanged = fit_em(None, no_vectors, EMState(start), tol=tol, max_iter=100_000, **KW)
    assert unchanged.n_iter == plain.n_iter and unchanged.loglik == plain.loglik


class AcceleratedMixture(Mixture):
    """The mixture in SQUAREM's coordinates: centred log-weights, means, log-variances."""

    def to_vector(self, p: MixtureParams) -> np.ndarray:
        lw = np.log(p.weights)
        return np.r_[lw - lw.mean(), p.means, np.log(p.variances)]

    def from_vector(self, v: np.ndarray, p: MixtureParams) -> MixtureParams | None:
        k = p.weights.size
        w = np.exp(v[:k] - v[:k].max())
        if not np.all(np.isfinite(v)):
            return None
        return MixtureParams(w / w.sum(), v[k : 2 * k], np.exp(v[2 * k :]))


def test_squarem_over_the_data_saves_passes_and_keeps_the_likelihood_monotone(rng):
    """Over the data (one pass per iteration, counted): SQUAREM reaches plain EM's optimum
    (log-likelihood to 1e-9, parameters to 1e-4) in fewer passes; extrapolated steps that
    lower the likelihood are refused (their pass counted, the trace repeats the best
    value); a state from fit_em resumes the very same iterations (SQUAREM's cycle in it);
    max_iter ends an accelerated fit with the warning."""
    X = mixture_data(rng)
    runs = {}
    for accelerate in (False, True):
        arr, counter = counting_dask_array(X, chunks=(700, -1))
        with dask.config.set(scheduler="threads"):
            state = fit_em(arr, AcceleratedMixture(), EMState(START), tol=1e-10, max_iter=2000,
                           accelerate=accelerate, **KW)  # fmt: skip
        assert state.converged and counter.passes == state.n_iter == len(state.loglik)
        assert np.all(np.diff(state.loglik) >= -1e-12 * abs(state.loglik[-1]))
        runs[accelerate] = state
    plain, fast = runs[False], runs[True]
    assert fast.loglik[-1] == pytest.approx(plain.loglik[-1], rel=1e-9)
    np.testing.assert_allclose(fast.params.means, plain.params.means, rtol=1e-4)
    assert fast.n_iter < plain.n_iter / 2
    whole = fit_em(X, AcceleratedMixture(), EMState(START), tol=1e-10, max_iter=100, **KW)
    k = whole.n_iter // 2 + 1
    with pytest.warns(ConvergenceWarning, match=f"test: EM did not converge in max_iter={k} "):
        part = fit_em(X, AcceleratedMixture(), EMState(START), tol=1e-10, max_iter=k, **KW)
    assert part.n_iter == k and not part.converged
    rest = fit_em(X, AcceleratedMixture(), part, tol=1e-10, max_iter=100, **KW)
    assert rest.loglik == whole.loglik and rest.n_iter == whole.n_iter
    np.testing.assert_array_equal(rest.params.means, whole.params.means)


def test_the_plain_steps_rates_see_a_plateau_the_points_do_not():
    """The remainder of ddr.em's rule on a plateau's shape: the progress between points falls
    geometrically (rate 0.1 a point: the points alone say nothing is left), while the plain
    step from each point gains as much as from the one before (rate 1: a saddle's way out)
    or more; on plain steps that shrink with the points, the same as the points alone."""
    from ddr.em import _remaining

    points = tuple(-1000.0 + 10.0 * (1 - 0.1**j) / 0.9 for j in range(7))
    last = points[-1] - points[-2]
    assert _remaining(points) == pytest.approx(last * 0.1 / 0.9, rel=1e-6)  # geometric
    assert _remaining(points, (0.01,) * 7) == np.inf
    assert _remaining(points, tuple(0.01 * 1.5**j for j in range(7))) == np.inf
    shrinking = tuple(5.0 * 0.1**j for j in range(7))
    assert _remaining(points, shrinking) == pytest.approx(_remaining(points), rel=1e-12)


class CountingDown(Mixture):
    """A problem with its own stopping rule: met at the third M-step."""

    stopping_rule = "three M-steps"

    def __init__(self) -> None:
        self.steps = 0

    def stopping(self, params, new, stat) -> tuple[bool, str]:
        self.steps += 1
        return self.steps >= 3, f"{self.steps} of 3 M-steps"


def test_a_problems_own_stopping_rule_replaces_the_likelihoods(rng, caplog):
    """stopping() decides (the likelihood's rule is not consulted), plain EM, the last
    M-step is the result, and the progress records and the ConvergenceWarning say where it
    stands."""
    caplog.set_level(logging.INFO, logger="ddr")
    X = mixture_data(rng, n=300)
    state = fit_em(X, CountingDown(), EMState(START), tol=1e9, max_iter=50, **KW)
    assert state.converged and state.n_iter == 3
    plain = fit_em(X, Mixture(), EMState(START), tol=0.0, max_iter=3, accelerate=False, **KW)
    np.testing.assert_array_equal(state.params.means, plain.params.means)
    messages = [r.getMessage() for r in caplog.records]
    assert "until three M-steps" in messages[0]
    assert any("iteration 3 (" in m and "3 of 3 M-steps" in m for m in messages)
    with pytest.warns(ConvergenceWarning, match=r"max_iter=2 iterations \(2 of 3 M-steps, "):
        fit_em(X, CountingDown(), EMState(START), tol=0.0, max_iter=2, **KW)


# ------------------------------------------------------------- resuming a saved PPCA fit
def test_ppca_resumes_from_a_saved_model(rng, tmp_path):
    """A fit stopped by max_iter, saved and loaded, continues with warm_start=True: its trace
    goes on from the saved one, only its remaining passes are read, and it reaches the model
    of one uninterrupted fit. (A state from fit_em carries SQUAREM's cycle, and continues
    the very same iterations: test_resuming_a_state_continues_the_same_iterations; a saved
    model starts a new cycle.)"""
    W = rng.standard_normal((8, 2)) * [3.0, 1.5]
    X = rng.standard_normal((1500, 2)) @ W.T + 0.4 * rng.standard_normal((1500, 8)) + 3.0
    X[rng.random(X.shape) < 0.15] = np.nan
    whole = ddr.PPCA(2, init="random", tol=1e-10, max_iter=400).fit(X)
    assert 6 < whole.n_iter_ < 400
    with pytest.warns(ConvergenceWarning, match="continue this fit with warm_start=True"):
        part = ddr.PPCA(2, init="random", tol=1e-10, max_iter=5).fit(X)
    part.save(tmp_path / "part.zarr")
    loaded = ddr.load(tmp_path / "part.zarr").set_params(warm_start=True, max_iter=400)
    arr, counter = counting_dask_array(X, chunks=(400, -1))
    with dask.config.set(scheduler="threads"):
        loaded.fit(arr)
    assert counter.passes == loaded.n_iter_ - 5  # no start pass, one per new iteration
    np.testing.assert_array_equal(loaded.loglik_curve_[:5], whole.loglik_curve_[:5])
    assert np.all(np.diff(loaded.loglik_curve_) >= -1e-12 * abs(loaded.loglik_curve_[-1]))
    assert loaded.loglik_curve_[-1] == pytest.approx(whole.loglik_curve_[-1], rel=1e-10)
    np.testing.assert_allclose(loaded.get_covariance(), whole.get_covariance(), atol=1e-6)
    # warm_start without a fitted model starts afresh; with another width it refuses
    fresh = ddr.PPCA(2, init="random", tol=1e-10, max_iter=400, warm_start=True).fit(X)
    np.testing.assert_array_equal(fresh.loglik_curve_, whole.loglik_curve_)
    with pytest.raises(
        ValueError,
        match=r"PPCA: warm_start=True continues the fitted model of 8 features and 2 "
        r"components; this fit has 7 features and asks for 2 components",
    ):
        loaded.fit(X[:, :7])
    with pytest.raises(ValueError, match=r"asks for 3 components"):
        loaded.set_params(n_components=3).fit(X)


def test_dask_input_with_several_chunks_gives_the_numpy_fit(rng):
    X = mixture_data(rng, n=900)
    kw = dict(tol=1e-12, max_iter=500, logger=logging.getLogger("ddr.t"), what="m", owner="m")
    ref = fit_em(X, Mixture(), EMState(START), **kw)
    with dask.config.set(scheduler="threads"):
        got = fit_em(da.from_array(X, chunks=(101, -1)), Mixture(), EMState(START), **kw)
    np.testing.assert_allclose(got.loglik, ref.loglik, rtol=1e-12)


def _fitted(m):
    return {
        k: np.asarray(v)
        for k, v in vars(m).items()
        if k.endswith("_") and not k.startswith("_") and isinstance(v, (np.ndarray, float, int))
    }


@pytest.mark.parametrize("name", ["FactorAnalysis", "PLSA", "PCA-randomized"])
def test_fits_are_bit_identical_between_runs_on_a_cluster(client, rng, name):
    """The engine's tasks align the arrays distributed hands them (the parameters in the
    graph, per-row parameters and blocks sent between workers) before they multiply them:
    two fits on the same cluster and chunking give the same bits, and so does the threaded
    scheduler. PPCA's test is in test_ppca.py; this covers the other EM fits, FactorAnalysis
    (PPCASums with a noise variance per feature) and pLSA (per-row parameters kept beside
    the blocks between passes), and a multi-pass fit of another kind (randomized PCA, whose
    basis enters the graph as its own key: its results differed by 1e-13 before)."""
    if name == "FactorAnalysis":
        X = rng.standard_normal((6000, 4)) @ rng.standard_normal((4, 30)) + rng.normal(
            0, 1, (6000, 30)
        )
        make = lambda: ddr.FactorAnalysis(4, max_iter=15, tol=0)  # noqa: E731
    elif name == "PLSA":
        topics = rng.dirichlet(np.full(40, 0.1), size=3)
        mixtures = rng.dirichlet(np.full(3, 0.3), size=2000)
        X = np.array([rng.multinomial(60, m @ topics) for m in mixtures]).astype(np.float64)
        make = lambda: ddr.PLSA(3, random_state=0, max_iter=15, tol=0.0)  # noqa: E731
    else:
        X = rng.standard_normal((8000, 30)) @ rng.standard_normal((30, 30)) + 3
        make = lambda: ddr.PCA(5, solver="randomized", random_state=0)  # noqa: E731
    arr = da.from_array(X, chunks=(500, -1))
    fits = []
    for scheduler in (None, None, "threads"):
        with dask.config.set(scheduler=scheduler or client):
            m = make().fit(arr)
            fits.append((_fitted(m), np.asarray(m.transform(arr))))
    (ref, out), *others = fits
    for attrs, got in others:
        assert attrs.keys() == ref.keys()
        for key, value in ref.items():
            np.testing.assert_array_equal(attrs[key], value, err_msg=key)
        np.testing.assert_array_equal(got, out)


def _misaligned(a):
    buf = np.empty(a.nbytes + 16, dtype=np.uint8)
    start = (-buf.ctypes.data) % 8 + 5
    out = buf[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def test_engine_aligns_what_a_task_gets(rng):
    """``ddr.stats.engine.aligned``: misaligned arrays in a block, a spec's options (a
    dataclass such as PPCA's parameters, or a bare basis) and nested containers are copied
    aligned, with the same values; what is aligned already is given back as it is. (What a
    misaligned array does to PPCA's sums: test_ppca.py.)"""
    from ddr.stats.engine import aligned
    from ddr.stats.ppca_sums import PPCAParams, PPCASums
    from ddr.stats.sketch import CentredProduct

    W, mu, V = rng.standard_normal((30, 4)), rng.standard_normal(30), rng.standard_normal((30, 6))
    ok = (W, [mu], {"v": V}, PPCASums.spec(params=PPCAParams(W, mu, 1.0)))
    assert aligned(ok) is ok  # nothing copied
    odd_params = PPCAParams(_misaligned(W), _misaligned(mu), 1.0)
    odd = (
        _misaligned(W),
        [_misaligned(mu)],
        {"v": _misaligned(V)},
        PPCASums.spec(params=odd_params),
        CentredProduct.spec(basis=_misaligned(V)),
    )
    got = aligned(odd)
    np.testing.assert_array_equal(got[0], W)
    assert got[0].flags.aligned and got[1][0].flags.aligned and got[2]["v"].flags.aligned
    params = dict(got[3].options)["params"]
    assert params.W.flags.aligned and params.mu.flags.aligned and params.s2 == 1.0
    np.testing.assert_array_equal(params.W, W)
    assert dict(got[4].options)["basis"].flags.aligned
