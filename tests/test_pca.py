"""PCA against scikit-learn and exact references: covariance and exact solvers, the API,
transforms in the input's form, the probabilistic model, and bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn.decomposition import PCA as SkPCA
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from ddr.decomposition.pca import PCA
from ddr.tags import get_ddr_tags
from ddr.testing import counting_dask_array


def spectrum_data(rng, n=2000, d=20, offset=0.0, dtype=np.float64):
    """Rows with well separated variances 100 ... 0.25 along random orthogonal axes."""
    scales = np.geomspace(10.0, 0.5, d)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = (rng.standard_normal((n, d)) * scales) @ Q.T + offset
    return X.astype(dtype)


def exact_spectrum(X):
    """Two-pass covariance eigenvalues in extended precision (ddof=1), decreasing."""
    Xl = np.asarray(X, dtype=np.longdouble)
    Xc = np.asarray(Xl - Xl.mean(axis=0), dtype=np.float64)
    resid = Xc.mean(axis=0)
    Xc = Xc - resid
    lam = np.linalg.eigvalsh(Xc.T @ Xc / (X.shape[0] - 1))
    return lam[::-1]


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b)))


# ------------------------------------------------------------------ scikit-learn equality
@pytest.mark.parametrize("solver", ["covariance_eigh", "full", "auto"])
@pytest.mark.parametrize("n_components", [None, 7, 0.9])
def test_equal_to_sklearn_full_float64(rng, solver, n_components):
    """Acceptance: components (with sign) and explained variances to 1e-10 relative."""
    X = spectrum_data(rng)
    ref = SkPCA(n_components, svd_solver="full").fit(X)
    got = PCA(n_components, svd_solver=solver).fit(X)
    assert got.n_components_ == ref.n_components_
    assert got.n_samples_ == ref.n_samples_ and got.n_features_in_ == ref.n_features_in_
    np.testing.assert_allclose(got.components_, ref.components_, rtol=0, atol=1e-10)
    assert rel(got.explained_variance_, ref.explained_variance_) < 1e-10
    assert rel(got.explained_variance_ratio_, ref.explained_variance_ratio_) < 1e-10
    assert rel(got.singular_values_, ref.singular_values_) < 1e-10
    np.testing.assert_allclose(got.mean_, ref.mean_, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got.noise_variance_, ref.noise_variance_, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(got.transform(X), ref.transform(X), rtol=0, atol=1e-9)


@pytest.mark.parametrize("solver", ["covariance_eigh", "full"])
def test_equal_to_sklearn_full_float32(rng, solver):
    """Acceptance: float32 input to 1e-4; scores come back as float32."""
    X = spectrum_data(rng, offset=3.0, dtype=np.float32)
    ref = SkPCA(8, svd_solver="full").fit(X)
    got = PCA(8, svd_solver=solver).fit(X)
    np.testing.assert_allclose(got.components_, ref.components_, rtol=0, atol=1e-4)
    assert rel(got.explained_variance_, ref.explained_variance_) < 1e-4
    Z = got.transform(X)
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z, ref.transform(X), rtol=0, atol=1e-3)
    # accumulating in float64 makes ddr closer to the exact spectrum than float32 LAPACK
    exact = exact_spectrum(X)[:8]
    assert rel(got.explained_variance_, exact) < 1e-6


def test_offset_1e6_covariance_solver_exact_where_covariance_eigh_is_not(rng):
    """Acceptance: on a 1e6 offset the one-pass covariance solver stays within 1e-8 of exact;
    scikit-learn's covariance_eigh (X^T X - n mu mu^T) does not."""
    X = spectrum_data(rng, n=20000, d=8, offset=1e6)
    exact = exact_spectrum(X)
    chunked = da.from_array(X, chunks=(1000, -1))
    got = PCA(svd_solver="covariance_eigh").fit(chunked)
    assert rel(got.explained_variance_, exact) < 1e-8
    sk = SkPCA(svd_solver="covariance_eigh").fit(X)
    assert rel(sk.explained_variance_, exact) > 1e-4  # measured ~1e-2: most digits gone


# ------------------------------------------------------------------------- chunking, passes
def test_chunking_invariance_and_one_pass(rng):
    X = spectrum_data(rng, n=3000, d=12, offset=50.0)
    ref = PCA(5, svd_solver="covariance_eigh").fit(X)
    for chunks in ((3000, -1), (1, -1), (333, -1), ((100, 2900), -1)):
        arr, counter = counting_dask_array(X, chunks=chunks)
        with dask.config.set(scheduler="threads"):
            got = PCA(5, svd_solver="covariance_eigh").fit(arr)
        assert counter.passes == 1.0
        np.testing.assert_allclose(got.components_, ref.components_, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got.explained_variance_, ref.explained_variance_, rtol=1e-12)
        assert got.n_passes_ == 1


def test_exact_solver_reads_dask_once(rng):
    X = spectrum_data(rng, n=500, d=6)
    arr, counter = counting_dask_array(X, chunks=(100, -1))
    with dask.config.set(scheduler="sync"):
        got = PCA(3, svd_solver="full").fit(arr)
    assert counter.passes == 1.0
    ref = SkPCA(3, svd_solver="full").fit(X)
    np.testing.assert_allclose(got.components_, ref.components_, atol=1e-10)


def test_auto_chooses_by_width(rng):
    X = spectrum_data(rng, n=300, d=10)
    assert PCA(3).fit(X).solver_ == "covariance_eigh"
    wide = da.zeros((40, 3000), chunks=(20, -1)) + da.random.default_rng(0).random((40, 3000))
    assert PCA(3, random_state=0).fit(wide).solver_ == "randomized"


def test_partial_fit_equals_fit(rng):
    X = spectrum_data(rng, n=1200, d=9, offset=1e3)
    inc = PCA(4)
    for part in np.array_split(X, 5):
        inc.partial_fit(part)
    inc.partial_fit(da.from_array(X[:50], chunks=(25, -1)))  # dask batches too
    full = PCA(4).fit(np.vstack([X, X[:50]]))
    np.testing.assert_allclose(inc.components_, full.components_, atol=1e-11)
    np.testing.assert_allclose(inc.explained_variance_, full.explained_variance_, rtol=1e-11)
    assert inc.n_samples_ == 1250
    with pytest.raises(AttributeError, match="has no attribute 'partial_fit'") as info:
        PCA(2, svd_solver="randomized").partial_fit(X)
    assert "partial_fit accumulates the d x d covariance" in str(info.value.__cause__)
    assert not hasattr(PCA(svd_solver="full"), "partial_fit")


# ------------------------------------------------------------------------------ identities
@pytest.mark.parametrize("solver", ["covariance_eigh", "randomized"])
def test_identities(rng, solver):
    X = spectrum_data(rng, n=1500, d=15, offset=-7.0)
    pca = PCA(6, svd_solver=solver, random_state=0).fit(X)
    Z = pca.transform(X)
    # the variance of the scores is the explained variance; the scores are uncorrelated
    np.testing.assert_allclose(Z.var(axis=0, ddof=1), pca.explained_variance_, rtol=1e-10)
    C = np.cov(Z.T)
    np.testing.assert_allclose(C - np.diag(np.diag(C)), 0, atol=1e-9)
    np.testing.assert_allclose((Z**2).sum(axis=0), pca.singular_values_**2, rtol=1e-10)
    np.testing.assert_allclose(pca.transform(pca.mean_[None]), 0, atol=1e-12)
    # whitened scores have unit variance and invert exactly
    white = PCA(6, svd_solver=solver, whiten=True, random_state=0).fit(X)
    W = white.transform(X)
    np.testing.assert_allclose(W.var(axis=0, ddof=1), 1.0, rtol=1e-10)
    np.testing.assert_allclose(white.inverse_transform(W), pca.inverse_transform(Z), atol=1e-10)
    # with every component, inverse_transform is the identity
    allc = PCA(svd_solver="covariance_eigh").fit(X)
    np.testing.assert_allclose(allc.inverse_transform(allc.transform(X)), X, atol=1e-10)
    np.testing.assert_allclose(allc.explained_variance_ratio_.sum(), 1.0, rtol=1e-12)


# --------------------------------------------------------------- probabilistic PCA model
@pytest.mark.parametrize("whiten", [False, True])
@pytest.mark.parametrize("n_components", [3, 0.95])
def test_probabilistic_model_matches_sklearn(rng, whiten, n_components):
    X = spectrum_data(rng, n=800, d=10, offset=2.0)
    ref = SkPCA(n_components, svd_solver="full", whiten=whiten).fit(X)
    got = PCA(n_components, svd_solver="covariance_eigh", whiten=whiten).fit(X)
    np.testing.assert_allclose(got.get_covariance(), ref.get_covariance(), atol=1e-10)
    np.testing.assert_allclose(got.get_precision(), ref.get_precision(), rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(got.score_samples(X), ref.score_samples(X), rtol=1e-10)
    assert got.score(X) == pytest.approx(ref.score(X), rel=1e-11)
    lazy = got.score_samples(da.from_array(X, chunks=(300, -1)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), ref.score_samples(X), rtol=1e-10)
    assert got.score(da.from_array(X, chunks=(300, -1))) == pytest.approx(ref.score(X), rel=1e-11)


@pytest.mark.parametrize("n_components", [3, 4])
def test_score_on_rank_deficient_data_is_a_number_like_sklearn(rng, n_components):
    # issue 15: the discarded eigenvalues round to zero (n < d, or data of rank 3 in 6-D);
    # scikit-learn returns a (meaningless) number there, and so does ddr (a finite one)
    for X in (spectrum_data(rng, n=5, d=8), rng.normal(size=(50, 3)) @ rng.normal(size=(3, 6))):
        pca = PCA(n_components).fit(X)
        ref = SkPCA(n_components, svd_solver="full").fit(X)
        np.testing.assert_allclose(pca.noise_variance_, ref.noise_variance_, atol=1e-12)
        assert np.isfinite(pca.score(X))
        assert np.all(np.isfinite(pca.score_samples(X)))


# ------------------------------------------------------------- numpy / dask / xarray forms
def test_dask_outputs_are_lazy_and_equal(rng):
    X = spectrum_data(rng, n=1000, d=8)
    pca = PCA(3, svd_solver="covariance_eigh").fit(X)
    arr, counter = counting_dask_array(X, chunks=(250, -1))
    Z = pca.transform(arr)
    ll = pca.score_samples(arr)
    back = pca.inverse_transform(Z)
    assert isinstance(Z, da.Array) and isinstance(ll, da.Array) and isinstance(back, da.Array)
    assert counter.passes == 0  # nothing computed yet
    assert Z.chunks == ((250,) * 4, (3,))
    with dask.config.set(scheduler="threads"):
        np.testing.assert_allclose(Z.compute(), pca.transform(X), atol=1e-12)
        np.testing.assert_allclose(back.compute(), pca.inverse_transform(pca.transform(X)))
    fitted_dask = PCA(3, svd_solver="covariance_eigh").fit_transform(
        da.from_array(X, chunks=(300, -1))
    )
    assert isinstance(fitted_dask, da.Array)


def test_xarray_in_xarray_out(rng):
    X = spectrum_data(rng, n=400, d=5)
    feats = ["a", "b", "c", "d", "e"]
    times = np.arange(400) * 10
    xa = xr.DataArray(X.T, dims=("var", "time"), coords={"var": feats, "time": times})
    pca = PCA(2, svd_solver="covariance_eigh")
    Z = pca.fit_transform(xa, sample_dim="time")
    assert Z.dims == ("time", "component")
    np.testing.assert_array_equal(Z["time"].values, times)
    np.testing.assert_allclose(Z.values, PCA(2).fit(X).transform(X), atol=1e-12)
    comps = pca.as_xarray("components_")
    assert comps.dims == ("component", "var")
    assert list(comps["var"].values) == feats
    assert pca.as_xarray("mean_").dims == ("var",)
    assert pca.as_xarray("explained_variance_").dims == ("component",)
    back = pca.inverse_transform(Z)
    assert back.dims == ("time", "var") and list(back["var"].values) == feats
    lazy = pca.transform(xa.chunk({"time": 100}), sample_dim="time")
    assert isinstance(lazy.data, da.Array) and lazy.dims == ("time", "component")
    np.testing.assert_allclose(lazy.values, Z.values, atol=1e-12)


def test_feature_names_out(rng):
    pca = PCA(3).fit(spectrum_data(rng, n=50, d=5))
    assert list(pca.get_feature_names_out()) == ["pca0", "pca1", "pca2"]


def test_integer_input_is_upcast(rng):
    Xi = rng.integers(-50, 50, size=(300, 6))
    got = PCA(3).fit(Xi)
    ref = PCA(3).fit(Xi.astype(np.float64))
    np.testing.assert_allclose(got.components_, ref.components_, atol=1e-12)
    assert got.transform(Xi).dtype == np.float64
    lazy = PCA(3).fit(da.from_array(Xi, chunks=(100, -1)))
    np.testing.assert_allclose(lazy.explained_variance_, ref.explained_variance_, rtol=1e-12)
    assert lazy.transform(da.from_array(Xi, chunks=(100, -1))).dtype == np.float64


def test_unknown_chunk_sizes(rng):
    X = spectrum_data(rng, n=600, d=5)
    arr = da.from_array(X, chunks=(100, -1))
    filtered = arr[arr[:, 0] > -np.inf]
    got = PCA(2).fit(filtered)
    ref = PCA(2).fit(X)
    assert got.n_samples_ == 600
    np.testing.assert_allclose(got.components_, ref.components_, atol=1e-12)
    rnd = PCA(2, svd_solver="randomized", random_state=0).fit(filtered)
    np.testing.assert_allclose(rnd.explained_variance_, ref.explained_variance_, rtol=1e-9)


# -------------------------------------------------------------------------- bad input
def test_n_components_too_large_or_not_positive(rng):
    X = spectrum_data(rng, n=30, d=6)
    for solver in ("covariance_eigh", "randomized", "full"):
        with pytest.raises(
            ValueError, match=r"n_components=7 must be between 1 and min\(n_samples, n_features\)=6"
        ):
            PCA(7, svd_solver=solver).fit(X)
    with pytest.raises(ValueError, match=r"n_components=9 must be between 1 and .*=5 "):
        PCA(9).fit(X[:5])
    for bad in (0, -2):
        with pytest.raises(ValueError, match=r"The 'n_components' parameter of PCA must be"):
            PCA(bad).fit(X)
    with pytest.raises(ValueError, match="n_components=7 must be between 1 and"):
        PCA(7).fit(da.from_array(X, chunks=(10, -1)))


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.2])
def test_fraction_outside_open_interval(rng, bad):
    with pytest.raises(
        ValueError, match=r"a float in the range \(0.0, 1.0\), a str among {'mle'} or None. Got"
    ):
        PCA(bad).fit(spectrum_data(rng, n=30, d=4))


def test_bad_parameters(rng):
    X = spectrum_data(rng, n=30, d=4)
    with pytest.raises(ValueError, match="The 'n_components' parameter of PCA must be"):
        PCA("most").fit(X)
    with pytest.raises(ValueError, match="The 'svd_solver' parameter of"):
        PCA(2, svd_solver="lobpcg").fit(X)
    with pytest.raises(ValueError, match="The 'iterated_power' parameter of"):
        PCA(2, svd_solver="randomized", iterated_power=-1).fit(X)
    with pytest.raises(ValueError, match="The 'power_iteration_normalizer' parameter of"):
        PCA(2, svd_solver="randomized", power_iteration_normalizer="LU").fit(X)
    with pytest.raises(ValueError, match="The 'n_oversamples' parameter of"):
        PCA(2, svd_solver="randomized", n_oversamples=2.5).fit(X)
    with pytest.raises(ValueError, match="n_components=None asks for all"):
        PCA(svd_solver="randomized").fit(X)


def test_transform_wrong_number_of_features(rng):
    pca = PCA(2).fit(spectrum_data(rng, n=40, d=5))
    with pytest.raises(ValueError, match="X has 3 features, but PCA is expecting 5 features"):
        pca.transform(np.ones((4, 3)))
    with pytest.raises(ValueError, match="X has 3 features, but PCA is expecting 5 features"):
        pca.transform(da.ones((4, 3), chunks=(2, -1)))
    with pytest.raises(ValueError, match=r"X has 3 columns, but PCA\.inverse_transform is expect"):
        pca.inverse_transform(np.ones((4, 3)))


def test_use_before_fit():
    for method in ("transform", "inverse_transform", "score_samples"):
        with pytest.raises(NotFittedError, match="This PCA instance is not fitted yet"):
            getattr(PCA(), method)(np.ones((3, 2)))
    with pytest.raises(NotFittedError):
        PCA().get_covariance()


def test_nan_input_points_to_ppca(rng):
    X = spectrum_data(rng, n=200, d=4)
    X[17, 2] = np.nan
    for solver in ("covariance_eigh", "randomized", "full"):
        with pytest.raises(ValueError, match=r"contains 1 NaN.*ddr\.PPCA"):
            PCA(2, svd_solver=solver, random_state=0).fit(X)
        with pytest.raises(ValueError, match=r"NaN.*ddr\.PPCA"):
            PCA(2, svd_solver=solver, random_state=0).fit(da.from_array(X, chunks=(50, -1)))
    pca = PCA(2).fit(np.nan_to_num(X))
    with pytest.raises(ValueError, match=r"NaN.*ddr\.PPCA"):
        pca.transform(X)
    with pytest.raises(ValueError, match=r"NaN.*ddr\.PPCA"):
        pca.transform(da.from_array(X, chunks=(50, -1))).compute()


def test_wide_array_chunked_along_features(rng):
    """Chunks along features are merged into whole rows inside the pass (each chunk read
    once: tests/test_space_chunked.py counts it); the model is the row-chunked one's."""
    X = da.from_array(spectrum_data(rng, n=100, d=40), chunks=(50, 10))
    got = PCA(3, svd_solver="covariance_eigh").fit(X)
    want = PCA(3, svd_solver="covariance_eigh").fit(X.rechunk({1: -1}))
    np.testing.assert_allclose(got.components_, want.components_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got.explained_variance_, want.explained_variance_, rtol=1e-12)


# ------------------------------------------------------------------ cluster and sklearn
def test_on_local_cluster(client, rng):
    X = spectrum_data(rng, n=4000, d=30, offset=1e4, dtype=np.float32)
    arr = da.from_array(X, chunks=(500, -1))
    ref = PCA(5, svd_solver="full").fit(X)
    cov = PCA(5, svd_solver="covariance_eigh").fit(arr)
    rnd = PCA(5, svd_solver="randomized", random_state=0).fit(arr)
    for got in (cov, rnd):
        np.testing.assert_allclose(got.components_, ref.components_, atol=1e-8)
        np.testing.assert_allclose(got.explained_variance_, ref.explained_variance_, rtol=1e-9)
    Z = cov.transform(arr).compute()
    np.testing.assert_allclose(Z, ref.transform(X), atol=1e-3)


@parametrize_with_checks(
    [
        PCA(2, whiten=True),
        PCA(0.8, svd_solver="covariance_eigh"),
        PCA(2, svd_solver="randomized", random_state=0),
        PCA(svd_solver="full"),
    ],
    # what the tags expect to fail (sample_weight with the solvers that take none)
    expected_failed_checks=lambda est: get_ddr_tags(est).checks.expected_failed_checks,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_scores_too_large_for_float32_are_refused_not_inf():
    """float32 data near float32's largest value: the scores overflow when cast back to
    float32. That is said (how many rows, where, what to do), never written as inf."""
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(400, 50)) * 1e37 + 1e37).astype(np.float32)
    X[350, :] = 3.0e38  # a row whose score is beyond float32
    assert np.isfinite(X).all()
    pca = PCA(n_components=3).fit(X.astype(np.float64))
    for form in (X, da.from_array(X, chunks=(100, -1))):
        with pytest.raises(ValueError) as err:
            out = pca.transform(form)
            out.compute() if hasattr(out, "compute") else out
        text = str(err.value)
        assert "the output of PCA.transform is not finite in 1 of the" in text, text
        assert "too large for float32; scale X, or give it as float64" in text
    assert np.isfinite(pca.transform(X.astype(np.float64))).all()


# ------------------------------------------------------------ scikit-learn's names
@pytest.mark.parametrize("solver", ["auto", "full", "covariance_eigh", "randomized", "arpack"])
def test_every_svd_solver_of_scikit_learn(rng, solver):
    """``svd_solver`` takes scikit-learn's values, with scikit-learn's attributes."""
    X = spectrum_data(rng, n=600, d=12)
    ref = SkPCA(4, svd_solver=solver, random_state=0).fit(X)
    got = PCA(4, svd_solver=solver, random_state=0).fit(X)
    assert got.solver_ == ("covariance_eigh" if solver == "auto" else solver)
    for name in ("components_", "explained_variance_", "explained_variance_ratio_"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-8, atol=1e-12)
    assert got.noise_variance_ == pytest.approx(ref.noise_variance_, rel=1e-8)


def test_arpack_and_mle_limits(rng):
    X = spectrum_data(rng, n=40, d=6)
    with pytest.raises(ValueError, match="min\\(n_samples, n_features\\) - 1 = 5"):
        PCA(6, svd_solver="arpack").fit(X)
    with pytest.raises(ValueError, match="must be an int with svd_solver='arpack'"):
        PCA(0.5, svd_solver="arpack").fit(X)
    with pytest.raises(ValueError, match="cannot be 'mle' with svd_solver='randomized'"):
        PCA("mle", svd_solver="randomized").fit(X)
    with pytest.raises(ValueError, match="only supported if n_samples >= n_features"):
        PCA("mle").fit(X[:4])


@pytest.mark.parametrize("dataset", ["iris", "wine", "digits", "diabetes", "low-rank"])
def test_mle_dimension_is_scikit_learns(rng, dataset):
    """``n_components="mle"``: Minka's estimate from the eigenvalues the covariance pass
    already has, the same k (and model) as scikit-learn's on the same data, dask too."""
    from sklearn import datasets

    if dataset == "low-rank":
        X = rng.standard_normal((800, 5)) @ rng.standard_normal((5, 40)) * 3
        X += rng.standard_normal((800, 40))
    else:
        X = getattr(datasets, f"load_{dataset}")().data
    ref = SkPCA("mle", svd_solver="full").fit(X)
    for solver in ("auto", "covariance_eigh", "full"):
        got = PCA("mle", svd_solver=solver).fit(X)
        assert got.n_components_ == ref.n_components_, solver
        np.testing.assert_allclose(got.explained_variance_, ref.explained_variance_, rtol=1e-8)
        assert got.noise_variance_ == pytest.approx(ref.noise_variance_, rel=1e-8)
    lazy = PCA("mle").fit(da.from_array(X, chunks=(97, -1)))
    assert lazy.n_components_ == ref.n_components_ and lazy.n_passes_ == 1


def test_mle_dimension_on_spectra_against_scikit_learns_loop(rng):
    """The O(d^2) update of every rank's terms equals scikit-learn's O(d^3) loop."""
    from sklearn.decomposition._pca import _infer_dimension

    from ddr.decomposition._pca_solvers import mle_dimension

    for d, k in [(8, 1), (30, 4), (60, 12), (120, 30)]:
        X = rng.standard_normal((400, k)) @ rng.standard_normal((k, d)) * 2
        X += rng.standard_normal((400, d))
        spectrum = np.linalg.eigvalsh(np.cov(X.T))[::-1]
        assert mle_dimension(spectrum, 400) == _infer_dimension(spectrum, 400)


def test_old_names_still_work_with_a_future_warning(rng, tmp_path):
    """``solver`` and ``n_power_iter`` (and the values "covariance", "exact") still work for a
    release: a FutureWarning naming the new name, the same model, and get_params, clone and
    repr in the new names only; a model saved under the old names loads."""
    import zarr
    from sklearn.base import clone

    import ddr

    X = spectrum_data(rng, n=300, d=8)
    with pytest.warns(FutureWarning, match="'solver' is now called 'svd_solver'"):
        old = PCA(3, solver="full")
    assert old.get_params()["svd_solver"] == "full" and "solver" not in old.get_params()
    with pytest.warns(FutureWarning, match="'n_power_iter' is now called 'iterated_power'"):
        PCA(3, svd_solver="randomized", n_power_iter=2)
    with pytest.warns(FutureWarning, match="'solver' is now called 'svd_solver'"):
        old = PCA(3).set_params(solver="covariance")
    with pytest.warns(FutureWarning, match="svd_solver='covariance' is now called svd_solver="):
        old.fit(X)
    assert old.solver_ == "covariance_eigh"
    np.testing.assert_array_equal(
        old.components_, PCA(3, svd_solver="covariance_eigh").fit(X).components_
    )
    assert repr(clone(old)) == "PCA(n_components=3, svd_solver='covariance')"
    with pytest.warns(FutureWarning, match="svd_solver='exact' is now called svd_solver='full'"):
        PCA(2, svd_solver="exact").fit(X)
    with pytest.raises(TypeError, match="got both 'solver' and 'svd_solver'"):
        PCA(3, solver="full", svd_solver="full")
    with pytest.raises(TypeError, match="unexpected keyword argument 'solvr'"):
        PCA(3, solvr="full")
    # a model saved by ddr 0.1 (parameters under their old names) loads, with the warning
    model = PCA(3, svd_solver="full").fit(X)
    model.save(tmp_path / "pca.zarr")
    group = zarr.open_group(tmp_path / "pca.zarr", mode="r+")
    params = dict(group.attrs["params"])
    params["solver"] = params.pop("svd_solver")
    params["n_power_iter"] = params.pop("iterated_power")
    group.attrs["params"] = params
    with pytest.warns(FutureWarning, match="'solver' is now called 'svd_solver'"):
        back = ddr.load(tmp_path / "pca.zarr")
    assert back.svd_solver == "full" and back.iterated_power == 3
    np.testing.assert_array_equal(back.transform(X), model.transform(X))
