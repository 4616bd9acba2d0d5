"""KernelDensity against scikit-learn (unscaled) and scipy's gaussian_kde (covariance-scaled),
kernel normalisation, dask blockwise scoring, the binned mode's error, cv, sampling, input."""

from __future__ import annotations

import itertools
import warnings
from itertools import pairwise
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.stats import gaussian_kde
from sklearn.datasets import load_iris, load_wine
from sklearn.neighbors import KernelDensity as SkKDE
from sklearn.utils.estimator_checks import check_estimator

import ddr
from ddr.density._binned import LatticeHistogram
from ddr.density._kernels import (
    BINNED_KERNELS,
    KERNELS,
    _log_sphere_surface,
    kernel_radius,
    log_kernel,
    log_kernel_norm,
)
from ddr.testing import counting_dask_array

DATA = Path(__file__).parent / "data"


def data(rng, n=500, d=3):
    A = np.array([[1.0, 0.3, 0.0], [0.0, 2.0, 0.5], [0.0, 0.0, 0.7]])[:d, :d]
    return rng.standard_normal((n, d)) @ A + np.array([1.0, -3.0, 10.0])[:d]


def assert_log_density_equal(got, ref, rtol=1e-8):
    """Equal where the reference is finite (relative); -inf exactly where the density is 0
    (scikit-learn's tree returns ~1e-17 instead of 0 at some compact-kernel edges)."""
    got, ref = np.asarray(got), np.asarray(ref)
    fin = np.isfinite(got) & np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=rtol)
    assert np.all(np.isfinite(got) | (ref < -30))
    assert np.all(np.isfinite(ref) | ~np.isfinite(got))


# --------------------------------------------------------------------- vs scikit-learn
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_matches_sklearn_unscaled(rng, kernel, d):
    X, Q = data(rng, d=d), data(rng, n=300, d=d) * 1.2
    est = ddr.KernelDensity(kernel=kernel, bandwidth=0.7, bandwidth_scaling="none").fit(X)
    ref = SkKDE(kernel=kernel, bandwidth=0.7).fit(X)
    if kernel == "cosine" and d == 2:
        # scikit-learn's cosine normalisation is wrong for even d (integrates to 0.36 in 2-D):
        # the shapes agree, the constants differ
        diff = est.score_samples(Q) - ref.score_samples(Q)
        fin = np.isfinite(diff)
        np.testing.assert_allclose(diff[fin], diff[fin][0], rtol=1e-10)
        return
    assert_log_density_equal(est.score_samples(Q), ref.score_samples(Q))
    assert est.score(Q) == pytest.approx(ref.score(Q), rel=1e-8) or not np.isfinite(ref.score(Q))


@pytest.mark.parametrize("rule", ["scott", "silverman"])
def test_rules_unscaled_match_sklearn(rule):
    X, _ = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    est = ddr.KernelDensity(bandwidth=rule, bandwidth_scaling="none").fit(X)
    ref = SkKDE(bandwidth=rule).fit(X)
    assert est.bandwidth_ == pytest.approx(ref.bandwidth_, rel=1e-15)
    assert_log_density_equal(est.score_samples(X), ref.score_samples(X))


# --------------------------------------------------------------------------- vs scipy
@pytest.mark.parametrize("d", [1, 2, 4])
@pytest.mark.parametrize("bw", ["scott", "silverman", 0.35])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_scipy_gaussian_kde_on_iris(d, bw, weighted):
    X, _ = load_iris(return_X_y=True)
    X = X[:, :d]
    w = np.linspace(0.2, 3.0, X.shape[0]) if weighted else None
    # scipy's convention, by name (a number alone is a bandwidth in data units)
    est = ddr.KernelDensity(bandwidth=bw, bandwidth_scaling="covariance").fit(X, sample_weight=w)
    ref = gaussian_kde(X.T, bw_method=bw, weights=w)
    assert est.bandwidth_ == pytest.approx(ref.factor, rel=1e-14)
    np.testing.assert_allclose(est.covariance_, ref.covariance / ref.factor**2, rtol=1e-12)
    Q = X + 0.05
    np.testing.assert_allclose(est.score_samples(Q), ref.logpdf(Q.T), rtol=1e-10)


# --------------------------------------------------------------------- normalisation
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_kernels_integrate_to_one(kernel, d):
    """Radial integral ``S_{d-1} int r^(d-1) c K(r) dr = 1`` for every kernel and dimension."""

    def f(r):
        lk = log_kernel(kernel, np.array([r * r]))[0]
        return np.exp(log_kernel_norm(kernel, d) + _log_sphere_surface(d) + lk) * r ** (d - 1)

    val = integrate.quad(f, 0, kernel_radius(kernel), limit=200, epsabs=1e-13)[0]
    assert val == pytest.approx(1.0, abs=2e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "cosine", "linear"])
def test_two_d_density_integrates_to_one_on_a_grid(kernel):
    X = np.array([[0.0, 0.0], [1.0, 0.5], [-0.5, 1.0]])
    est = ddr.KernelDensity(kernel=kernel, bandwidth=0.6, bandwidth_scaling="none").fit(X)
    g = np.linspace(-6, 6, 601)
    G = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    mass = np.exp(est.score_samples(G)).sum() * (g[1] - g[0]) ** 2
    assert mass == pytest.approx(1.0, abs=2e-3)


@pytest.mark.parametrize("weighted", [False, True])
def test_exact_gaussian_sums_by_tiles_of_pairs(rng, weighted):
    """The gaussian kernel at one bandwidth sums its exponents from one GEMM a tile of pairs
    (queries x training points, more than one tile each way), without the close-pair
    recomputation of the other kernels: the log-sums of numpy's direct distances and
    scipy's logsumexp, for queries near the data, far from it (every term underflows: the
    rows are summed again about their largest term) and at a training point. Where most
    queries of the first tiles are far (as on wide data), every later tile is summed about
    its rows' largest terms at once, near queries too."""
    from scipy.special import logsumexp

    from ddr.density._kernels import log_kernel_sums

    T = rng.standard_normal((5000, 6)) * 3.0
    near = np.vstack([rng.standard_normal((300, 6)), T[:3]])
    far = np.full((2, 6), 400.0)
    far_first = np.vstack([rng.standard_normal((200, 6)) + 60.0, near])
    log_w = np.log(rng.uniform(0.1, 5.0, size=5000)) if weighted else None
    for Q in (np.vstack([near, far]), far_first):
        d2 = ((Q[:, None, :] - T[None, :, :]) ** 2).sum(axis=-1)
        for h in (0.3, 2.0):
            ref = logsumexp(-0.5 * d2 / h**2 + (0.0 if log_w is None else log_w), axis=1)
            got = log_kernel_sums(Q, T, log_w, "gaussian", h)
            np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-11)
            assert np.isfinite(got).all()


def test_binned_lattice_sums_and_points_are_computed_once_per_fit(rng, monkeypatch):
    """The lattice sums (an FFT convolution) and the non-empty lattice points (the tails'
    direct sums) of a fitted model are kept for its later calls of score_samples, shipped
    to every block, and made anew for a new fit; the blocks' log-densities are those of a
    block that finds the points itself."""
    import ddr.density._kde_blocks as kde_module
    from ddr.density._binned import binned_log_sums

    calls: dict[str, int] = {"grid_sums": 0, "lattice_tail": 0}

    def counted(name):
        real = getattr(kde_module, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    for name in calls:
        monkeypatch.setattr(kde_module, name, counted(name))
    X = rng.standard_normal((60_000, 2))
    Q = np.vstack([X[:500], [[9.0, 9.0], [-12.0, 3.0]]])  # two queries in the tails
    kde = ddr.KernelDensity(algorithm="binned").fit(X)
    first = kde.score_samples(Q)
    np.testing.assert_array_equal(kde.score_samples(Q), first)
    lazy = kde.score_samples(da.from_array(Q, chunks=(100, -1))).compute()
    np.testing.assert_array_equal(lazy, first)
    assert calls == {"grid_sums": 1, "lattice_tail": 1}
    H, W, h = kde.histogram_, kde._whitening_, kde.bandwidth_
    f, _ = kde_module.lattice_sums(H, W, h, kde.kernel)
    alone = binned_log_sums(Q, H.counts, f, H.origin, H.spacing, W, h, kde.kernel)
    np.testing.assert_array_equal(alone + kde._log_norm(h), first)
    with pytest.raises(ValueError, match="needs the lattice counts or its tail points"):
        binned_log_sums(Q, None, f, H.origin, H.spacing, W, h, kde.kernel)
    kde.fit(X[::2])
    kde.score_samples(Q)
    assert calls == {"grid_sums": 2, "lattice_tail": 2}


# ---------------------------------------------------------------------- dask, xarray
def test_dask_blockwise_query_x_training_blocks(rng):
    X, Q = data(rng, n=700), data(rng, n=333)
    w = rng.uniform(0.1, 2.0, size=700)
    kde = {"kernel": "epanechnikov", "bandwidth": 0.6, "bandwidth_scaling": "covariance"}
    ref = ddr.KernelDensity(**kde).fit(X, sample_weight=w)
    expect = ref.score_samples(Q)
    for xc, qc in [((700, -1), (333, -1)), ((100, -1), (50, -1)), (((1, 299, 400), -1), (97, -1))]:
        Xd = da.from_array(X, chunks=xc)
        wd = da.from_array(w, chunks=(Xd.chunks[0],))
        est = ddr.KernelDensity(**kde).fit(Xd, sample_weight=wd)
        out = est.score_samples(da.from_array(Q, chunks=qc))
        assert isinstance(out, da.Array)
        assert_log_density_equal(out.compute(), expect, rtol=1e-12)
        assert_log_density_equal(est.score_samples(Q), expect, rtol=1e-12)  # numpy query
    lazy_q = ref.score_samples(da.from_array(Q, chunks=(40, -1)))  # numpy training
    assert_log_density_equal(lazy_q.compute(), expect, rtol=1e-12)


def test_passes(rng):
    X = data(rng, n=800, d=2)
    arr, counter = counting_dask_array(X, chunks=(200, -1))
    with dask.config.set(scheduler="threads"):
        exact = ddr.KernelDensity(algorithm="exact").fit(arr)
        assert counter.passes == 1.0
        counter.reset()
        binned = ddr.KernelDensity(algorithm="binned").fit(arr)
        assert counter.passes == 1.0
        counter.reset()
        q, qc = counting_dask_array(X[:400], chunks=(100, -1))
        binned.score_samples(q).compute()
        assert counter.passes == 0 and qc.passes == 1.0  # binned: the queries only
        exact.score_samples(q).compute()
        # exact: 4 query blocks x 4 training blocks, but each training block is one task
        # shared by every query block: read once
        assert counter.passes == 1.0 and qc.passes == 2.0


def test_xarray_in_and_out(rng):
    X = data(rng, n=300, d=2)
    Xa = xr.DataArray(X, dims=("station", "var"), coords={"station": np.arange(300) * 2})
    est = ddr.KernelDensity().fit(Xa)
    out = est.score_samples(Xa)
    assert out.dims == ("station",)
    np.testing.assert_array_equal(out["station"].values, np.arange(300) * 2)
    lazy = est.score_samples(Xa.chunk({"station": 100}))
    assert isinstance(lazy.data, da.Array)
    np.testing.assert_allclose(lazy.values, out.values, rtol=1e-12)


def test_on_distributed_cluster(client, rng):
    X = data(rng, n=600, d=2)
    Xd = da.from_array(X, chunks=(150, -1))
    est = ddr.KernelDensity(bandwidth=0.3, bandwidth_scaling="covariance").fit(Xd)
    ref = gaussian_kde(X.T, bw_method=0.3)
    np.testing.assert_allclose(est.score_samples(Xd).compute(), ref.logpdf(X.T), rtol=1e-10)


# ---------------------------------------------------------------------------- binned
@pytest.mark.parametrize("kernel", sorted(BINNED_KERNELS))
@pytest.mark.parametrize("d", [1, 2])
def test_binned_error_against_exact(rng, d, kernel):
    """Documented: relative density error within about 2 d (spacing / h)^2 in the bulk for
    the kernels "auto" bins (BINNED_KERNELS); the tails (interpolation unreliable, or outside
    the lattice) are summed over the lattice."""
    X = data(rng, n=30_000, d=d)
    X[:10_000] += 4.0  # bimodal
    binned = ddr.KernelDensity(kernel=kernel, algorithm="binned").fit(X)
    assert binned.algorithm_ == "binned"
    exact = ddr.KernelDensity(kernel=kernel, algorithm="exact").fit(X)
    assert exact.bandwidth_ == binned.bandwidth_
    Q = np.concatenate([data(np.random.default_rng(5), n=400, d=d) * 1.5, X[:5] + 40])
    lb, le = binned.score_samples(Q), exact.score_samples(Q)
    axis = binned.bandwidth_ / np.max(np.linalg.svd(binned._whitening_, compute_uv=False))
    ratio = np.max(binned.histogram_.spacing) / axis
    bulk = le > np.log(1e-4) + le.max()
    err = np.max(np.abs(np.expm1(lb[bulk] - le[bulk])))
    assert err < 2 * d * ratio**2 and err < 1e-2
    assert np.max(np.abs(lb - le) / np.abs(le)) < 1e-2  # tails, far outside: log space
    # the binned lattice is the same whatever the chunking (one mergeable pass)
    again = ddr.KernelDensity(algorithm="binned").fit(da.from_array(X, chunks=(7500, -1)))
    np.testing.assert_allclose(again.score_samples(Q), lb, rtol=1e-10)


@pytest.mark.parametrize("kernel", sorted(set(KERNELS) - BINNED_KERNELS))
def test_binned_error_of_non_smooth_kernels_is_first_order(rng, kernel):
    """Kernels with jumps or kinks miss the second-order bound; asked for, their binned
    estimate is within spacing / h in the bulk (documented)."""
    X = rng.standard_normal((60_000, 1))
    binned = ddr.KernelDensity(kernel=kernel, bandwidth=0.3, algorithm="binned").fit(X)
    exact = ddr.KernelDensity(kernel=kernel, bandwidth=0.3, algorithm="exact").fit(X)
    Q = np.linspace(-2, 2, 101)[:, None]
    err = np.max(np.abs(np.expm1(binned.score_samples(Q) - exact.score_samples(Q))))
    assert err < binned.histogram_.spacing[0] / 0.3


@pytest.mark.parametrize("kernel", KERNELS)
def test_auto_bins_only_kernels_that_meet_the_bound(rng, kernel):
    X = data(rng, n=60_000, d=1)
    est = ddr.KernelDensity(kernel=kernel, bandwidth=0.3, cv_max_samples=2).fit(X)
    assert est.algorithm_ == ("binned" if kernel in BINNED_KERNELS else "exact")
    assert BINNED_KERNELS == {"gaussian"}  # the README says so


@settings(max_examples=25, deadline=None)
@given(
    cuts=st.lists(st.integers(1, 599), max_size=5, unique=True),
    scale=st.sampled_from([1e-3, 1.0, 1e4]),
)
def test_lattice_histogram_merge_is_exact_and_order_free(cuts, scale):
    """2-D multilinear binning merges associatively and commutatively, keeps the total
    weight and the mean of the points exactly (linear binning preserves first moments)."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((600, 2)) * [scale, 3 * scale] + [5 * scale, -scale]
    w = rng.uniform(0.5, 2.0, size=600)
    edges = [0, *sorted(cuts), 600]
    parts = [
        LatticeHistogram.from_block(X[a:b], sample_weight=w[a:b], n_bins=64)
        for a, b in itertools.pairwise(edges)
    ]
    forward = parts[0]
    for p in parts[1:]:
        forward = forward.merge(p)
    backward = parts[-1]
    for p in parts[-2::-1]:
        backward = backward.merge(p)
    np.testing.assert_array_equal(forward.exponent, backward.exponent)
    np.testing.assert_allclose(forward.counts, backward.counts, rtol=1e-12, atol=1e-12)
    assert forward.counts.sum() == pytest.approx(w.sum(), rel=1e-12)
    axes = [forward.origin[a] + np.arange(64) * forward.spacing[a] for a in range(2)]
    G = np.stack(np.meshgrid(*axes, indexing="ij"), -1)
    mean = np.einsum("ij,ijk->k", forward.counts, G) / forward.counts.sum()
    np.testing.assert_allclose(mean, np.average(X, axis=0, weights=w), rtol=1e-10)


def test_auto_algorithm():
    X = np.random.default_rng(0).standard_normal((60_000, 1))
    assert ddr.KernelDensity().fit(X).algorithm_ == "binned"
    assert ddr.KernelDensity().fit(X[:1000]).algorithm_ == "exact"
    X3 = np.random.default_rng(1).standard_normal((60_000, 3))
    assert ddr.KernelDensity().fit(X3).algorithm_ == "exact"  # binned is 1-D and 2-D only


# -------------------------------------------------------------------------------- cv
def _loo_brute_force(X, factor):
    """Mean leave-one-out log-likelihood, kernel covariance ``factor^2 * cov(all data)``."""
    from scipy.stats import multivariate_normal

    H = np.cov(X.T) * factor**2
    n = X.shape[0]
    total = 0.0
    for i in range(n):
        rest = np.delete(X, i, axis=0)
        logs = multivariate_normal(mean=np.zeros(X.shape[1]), cov=H).logpdf(X[i] - rest)
        total += np.logaddexp.reduce(logs) - np.log(n - 1)
    return total / n


def test_cv_picks_the_best_held_out_likelihood(rng):
    X = np.concatenate([rng.standard_normal((60, 2)), rng.standard_normal((60, 2)) * 0.3 + 3])
    cands = np.array([0.05, 0.15, 0.3, 0.6, 1.2])
    est = ddr.KernelDensity(bandwidth="cv", cv_bandwidths=cands).fit(X)
    brute = np.array([_loo_brute_force(X, f) for f in cands])
    np.testing.assert_allclose(est.cv_scores_, brute, rtol=1e-10)
    assert est.bandwidth_ == cands[np.argmax(brute)]
    # dask training data: the same scores (held-out rows read, scored blockwise)
    lazy = ddr.KernelDensity(bandwidth="cv", cv_bandwidths=cands).fit(da.from_array(X, chunks=25))
    np.testing.assert_allclose(lazy.cv_scores_, brute, rtol=1e-10)


def test_binned_cv_close_to_exact_cv(rng):
    """Binned cv treats the lattice weights as the data; against the exact leave-one-out
    score over every row, it agrees to 1e-4 and picks the same bandwidth."""
    X = np.concatenate([rng.standard_normal(1400), rng.standard_normal(600) * 0.2 + 3])[:, None]
    cands = ddr.KernelDensity().fit(X).bandwidth_ * np.geomspace(0.15, 1.0, 8)
    binned = ddr.KernelDensity(bandwidth="cv", algorithm="binned", cv_bandwidths=cands).fit(X)
    exact = ddr.KernelDensity(
        bandwidth="cv", algorithm="exact", cv_bandwidths=cands, cv_max_samples=2000
    ).fit(X)
    np.testing.assert_allclose(binned.cv_scores_, exact.cv_scores_, atol=1e-4)
    assert binned.bandwidth_ == exact.bandwidth_
    assert binned.bandwidth_ < 0.7 * binned._rule("scott")  # bimodal: below the normal rule


# ---------------------------------------------------------------------------- sample
@pytest.mark.parametrize("kernel", KERNELS)
def test_sample_moments(kernel):
    """A draw is a training point plus kernel noise: mean = data mean, covariance = data
    covariance (ddof 0) + h^2 * (kernel's per-coordinate variance) * kernel shape."""
    rng = np.random.default_rng(0)
    X = data(rng, n=200, d=2)
    est = ddr.KernelDensity(kernel=kernel, bandwidth=0.5).fit(X)
    S = est.sample(200_000, random_state=1)
    d = 2

    def second(r):
        lk = log_kernel(kernel, np.array([r * r]))[0]
        return np.exp(log_kernel_norm(kernel, d) + _log_sphere_surface(d) + lk) * r ** (d + 1)

    per_coord = integrate.quad(second, 0, kernel_radius(kernel), limit=200)[0] / d
    expect = np.cov(X.T, ddof=0) + 0.25 * per_coord * est.covariance_
    np.testing.assert_allclose(S.mean(0), X.mean(0), atol=0.02)
    np.testing.assert_allclose(np.cov(S.T), expect, rtol=0.03, atol=0.01)
    assert est.sample(3, random_state=7).tolist() == est.sample(3, random_state=7).tolist()


def test_sample_sklearn_convention_and_binned():
    X = np.random.default_rng(1).standard_normal((100_000, 1)) * 2
    est = ddr.KernelDensity(bandwidth=0.5, bandwidth_scaling="none").fit(X)
    S = est.sample(100_000, random_state=0)
    assert np.var(S) == pytest.approx(np.var(X) + 0.25, rel=0.03)


def test_save_and_load(tmp_path, rng):
    X = data(rng, n=300, d=2)
    for est in (
        ddr.KernelDensity(algorithm="exact").fit(da.from_array(X, chunks=100)),
        ddr.KernelDensity(algorithm="binned", n_bins=64).fit(X),
    ):
        path = tmp_path / est.algorithm_
        est.save(path)
        back = ddr.load(path)
        # the state is bit-exact (tests/test_persistence.py); scores agree to round-off
        np.testing.assert_allclose(back.score_samples(X), est.score_samples(X), rtol=1e-14)


# -------------------------------------------------------------------------- bad input
def test_bad_input():
    X = np.random.default_rng(0).standard_normal((50, 2))
    bad_params = [
        *[("bandwidth", b) for b in (0.0, -1.0, np.nan, np.inf, "normal", [0.1])],
        ("kernel", "triangle"),
        ("bandwidth_scaling", "std"),
        ("cv_bandwidths", [0.1, -1.0]),
    ]
    for name, bad in bad_params:
        with pytest.raises(ValueError, match=rf"The '{name}' parameter of KernelDensity must be"):
            ddr.KernelDensity(**{name: bad}).fit(X)
    with pytest.raises(ValueError, match="algorithm='binned' supports 1-D and 2-D"):
        ddr.KernelDensity(algorithm="binned").fit(np.c_[X, X[:, :1] ** 2])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ddr.KernelDensity().fit(Xn)
    with pytest.raises(ValueError, match="NaN"):
        ddr.KernelDensity().fit(da.from_array(Xn, chunks=10))
    with pytest.raises(ValueError, match="NaN"):
        ddr.KernelDensity(algorithm="binned").fit(da.from_array(Xn, chunks=10))
    with pytest.raises(ValueError, match="NaN"):
        ddr.KernelDensity().fit(X).score_samples(Xn)
    with pytest.raises(ValueError, match="singular"):
        ddr.KernelDensity().fit(np.c_[X, 2 * X[:, 0]])


# --------------------------------------------------------------------- check_estimator
SINGULAR = (
    "the check's weighted data have fewer samples than features; the covariance-scaled "
    "convention needs a non-singular covariance (the unscaled convention passes)"
)


@pytest.mark.parametrize(
    "est, expected",
    [
        (ddr.KernelDensity(bandwidth=1.0), {}),  # the default: tests/test_common.py
        (ddr.KernelDensity(bandwidth="cv", bandwidth_scaling="none"), {}),
    ],
    ids=["unscaled", "cv"],
)
def test_check_estimator(est, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(est, expected_failed_checks=expected)


# ------------------------------------------------------------- issue 15 reproductions
def test_binned_lattice_does_not_depend_on_chunking_with_a_one_row_last_chunk():
    """A block where a feature is constant (the 1-row last chunk) used to pick a coarser
    lattice when |mean|/std is large, and the merge kept it: log-densities were off by a
    factor ~100 against the exact estimate. The lattice is now a function of the range."""
    rng = np.random.default_rng(0)
    t = (1.7e9 + rng.normal(size=100_001))[:, None]
    one = ddr.KernelDensity().fit(t)
    assert one.algorithm_ == "binned"
    q = t[:300]
    exact = ddr.KernelDensity(algorithm="exact").fit(t).score_samples(q)
    for chunks in [(10_000, 1), ((1, 50_000, 50_000), 1), ((100_000, 1), 1)]:
        chunked = ddr.KernelDensity().fit(da.from_array(t, chunks=chunks))
        np.testing.assert_array_equal(chunked.histogram_.counts, one.histogram_.counts)
        np.testing.assert_array_equal(chunked.histogram_.exponent, one.histogram_.exponent)
        np.testing.assert_allclose(chunked.score_samples(q), one.score_samples(q), rtol=1e-10)
        np.testing.assert_allclose(np.exp(chunked.score_samples(q) - exact), 1.0, atol=1e-4)


@pytest.mark.parametrize("d", [1, 2])
def test_lattice_histogram_merge_order_does_not_change_it(rng, d):
    X = rng.standard_normal((1000, d)) * [1.0, 1e-3][:d] + [3e8, -5.0][:d]
    X[-1] = X[0]  # a one-row block below is constant in every feature
    whole = LatticeHistogram.from_block(X, n_bins=256)
    splits = [0, 1, 7, 500, 999, 1000]
    blocks = [LatticeHistogram.from_block(X[a:b], n_bins=256) for a, b in pairwise(splits)]
    for order in (blocks, blocks[::-1], [blocks[2], blocks[0], blocks[4], blocks[1], blocks[3]]):
        merged = order[0]
        for b in order[1:]:
            merged = merged.merge(b)
        np.testing.assert_array_equal(merged.exponent, whole.exponent)
        np.testing.assert_array_equal(merged.start, whole.start)
        np.testing.assert_allclose(merged.counts, whole.counts, atol=1e-9)


def test_kernel_density_bandwidth_is_h_in_data_units_on_old_faithful():
    """Seed 000: p(x) = 1/(N h) sum K((x - x_n) / h), h in data units, on R's Old Faithful
    eruptions (272 rows; h = 0.3348 is R's bw.nrd0). The same as R's density and
    scikit-learn's KernelDensity; scipy's covariance factor stays available by name."""
    x = np.loadtxt(DATA / "faithful.csv", delimiter=",", skiprows=1, usecols=1)
    assert x.shape == (272,)
    h = 0.3348
    est = ddr.KernelDensity(kernel="gaussian", bandwidth=h).fit(x[:, None])
    assert est.bandwidth_ == h and est.bandwidth_scaling_ == "none"
    grid = np.linspace(1.0, 6.0, 501)
    seed = np.exp(-0.5 * ((grid[:, None] - x[None, :]) / h) ** 2).sum(1) / (
        x.size * h * np.sqrt(2 * np.pi)
    )
    np.testing.assert_allclose(np.exp(est.score_samples(grid[:, None])), seed, rtol=1e-10)
    ref = SkKDE(bandwidth=h).fit(x[:, None])
    np.testing.assert_allclose(
        est.score_samples(grid[:, None]), ref.score_samples(grid[:, None]), rtol=1e-10
    )
    scipy_way = ddr.KernelDensity(bandwidth=0.3, bandwidth_scaling="covariance").fit(x[:, None])
    np.testing.assert_allclose(
        scipy_way.score_samples(grid[:, None]),
        gaussian_kde(x, bw_method=0.3).logpdf(grid),
        rtol=1e-10,
    )
