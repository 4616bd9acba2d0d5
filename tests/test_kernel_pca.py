"""KernelPCA: exact equals scikit-learn, Nystrom equals exact at m = n and converges with m,
passes, input forms, the pre-image and its denoising, bad input."""

from __future__ import annotations

import itertools

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn.decomposition import PCA as SkPCA
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.metrics.pairwise import laplacian_kernel
from sklearn.utils.estimator_checks import check_estimator

import ddr
from ddr.decomposition import kernel_pca as kpca_module
from ddr.decomposition.kernel_pca import KernelPCA
from ddr.linalg.kernels import KernelNotPSDWarning
from ddr.testing import counting_dask_array


def circles(rng, n=600, noise=0.05):
    t = rng.uniform(0, 2 * np.pi, n)
    r = np.where(rng.random(n) < 0.5, 1.0, 2.0)
    return np.c_[r * np.cos(t), r * np.sin(t)] + noise * rng.standard_normal((n, 2))


def aligned(a, b):
    """``a`` with each column's sign matched to ``b`` (eigenvectors are defined up to sign)."""
    return a * np.where((a * b).sum(axis=0) < 0, -1.0, 1.0)


def angle_deg(A, B):
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    s = np.linalg.norm(qb - qa @ (qa.T @ qb), 2)
    return float(np.degrees(np.arcsin(min(1.0, s))))


KERNEL_CASES = [
    ("rbf", {"gamma": 0.5}),
    ("rbf", {}),
    ("poly", {"degree": 2, "coef0": 1.0}),
    ("linear", {}),
    ("cosine", {}),
    ("sigmoid", {"gamma": 0.01, "coef0": 0.0}),
]


@pytest.mark.filterwarnings("ignore::ddr.linalg.kernels.KernelNotPSDWarning")  # sigmoid
@pytest.mark.parametrize(("kernel", "kw"), KERNEL_CASES)
def test_exact_equals_sklearn_dense(rng, kernel, kw):
    """Acceptance: exact == sklearn KernelPCA(eigen_solver='dense') to 1e-8, out-of-sample too."""
    X, Xnew = rng.standard_normal((250, 5)) + 3, rng.standard_normal((40, 5)) + 3
    sk = SkKernelPCA(6, kernel=kernel, eigen_solver="dense", fit_inverse_transform=True, **kw).fit(
        X
    )
    me = KernelPCA(6, kernel=kernel, method="exact", fit_inverse_transform=True, **kw).fit(X)
    scale = np.abs(sk.transform(X)).max()
    np.testing.assert_allclose(me.eigenvalues_, sk.eigenvalues_, rtol=1e-10)
    for data in (X, Xnew):
        ref = sk.transform(data)
        np.testing.assert_allclose(aligned(me.transform(data), ref), ref, atol=1e-8 * scale)
    # same sign rule as scikit-learn (svd_flip): no flips needed at all
    np.testing.assert_allclose(me.transform(Xnew), sk.transform(Xnew), atol=1e-8 * scale)
    Z = sk.transform(Xnew)
    np.testing.assert_allclose(me.inverse_transform(Z), sk.inverse_transform(Z), atol=1e-8)


@pytest.mark.filterwarnings("ignore::ddr.linalg.kernels.KernelNotPSDWarning")  # sigmoid
@pytest.mark.parametrize(("kernel", "kw"), [KERNEL_CASES[0], KERNEL_CASES[5]])
def test_exact_lanczos_path_equals_sklearn_dense(rng, monkeypatch, kernel, kw):
    """Beyond DENSE_MAX_SAMPLES rows the top eigenpairs come from Lanczos: still sklearn's
    dense result to 1e-8 (here the limit is lowered to exercise it on small data)."""
    monkeypatch.setattr(kpca_module, "DENSE_MAX_SAMPLES", 100)
    X, Xnew = rng.standard_normal((400, 5)), rng.standard_normal((30, 5))
    sk = SkKernelPCA(5, kernel=kernel, eigen_solver="dense", **kw).fit(X)
    me = KernelPCA(5, kernel=kernel, method="exact", **kw).fit(X)
    np.testing.assert_allclose(me.eigenvalues_, sk.eigenvalues_, rtol=1e-10)
    ref = sk.transform(Xnew)
    np.testing.assert_allclose(aligned(me.transform(Xnew), ref), ref, atol=1e-8 * np.abs(ref).max())


def test_exact_all_components_and_laplacian(rng):
    X, Xnew = rng.standard_normal((120, 3)), rng.standard_normal((10, 3))
    sk = SkKernelPCA(kernel="rbf", eigen_solver="dense").fit(X)
    me = KernelPCA(kernel="rbf", method="exact").fit(X)
    assert me.n_components_ == sk.eigenvalues_.size
    np.testing.assert_allclose(me.eigenvalues_, sk.eigenvalues_, rtol=1e-8, atol=1e-12)
    ref = sk.transform(Xnew)
    top = 20  # the tail components have tiny, ill-determined eigenvalues
    np.testing.assert_allclose(aligned(me.transform(Xnew), ref)[:, :top], ref[:, :top], atol=1e-8)
    # laplacian: scikit-learn's KernelPCA has no such name; compare through a precomputed Gram
    sk = SkKernelPCA(4, kernel="precomputed", eigen_solver="dense").fit(laplacian_kernel(X))
    me = KernelPCA(4, kernel="laplacian", method="exact").fit(X)
    ref = sk.transform(laplacian_kernel(Xnew, X))
    np.testing.assert_allclose(aligned(me.transform(Xnew), ref), ref, atol=1e-8)


@pytest.mark.parametrize(("kernel", "kw"), KERNEL_CASES[:5])
def test_nystrom_with_all_rows_equals_exact(rng, kernel, kw):
    """Acceptance: with as many landmarks as rows, Nystrom == exact to 1e-6."""
    X, Xnew = rng.standard_normal((300, 4)), rng.standard_normal((30, 4))
    ex = KernelPCA(5, kernel=kernel, method="exact", fit_inverse_transform=True, **kw).fit(X)
    ny = KernelPCA(
        5, kernel=kernel, method="nystrom", n_landmarks=300, fit_inverse_transform=True, **kw
    ).fit(X)
    np.testing.assert_allclose(ny.eigenvalues_, ex.eigenvalues_, rtol=1e-6)
    for data in (X, Xnew):
        ref = ex.transform(data)
        scale = np.abs(ref).max()
        np.testing.assert_allclose(aligned(ny.transform(data), ref), ref, atol=1e-6 * scale)
    Z = ex.transform(Xnew)
    np.testing.assert_allclose(
        ny.inverse_transform(aligned(Z, ny.transform(Xnew))), ex.inverse_transform(Z), atol=1e-6
    )


def test_nystrom_error_falls_with_landmarks(rng):
    X = circles(rng, n=1000)
    ex = KernelPCA(5, kernel="rbf", gamma=1.0, method="exact").fit(X)
    ev_err, angles = [], []
    for m in (25, 50, 100, 200, 400):
        ny = KernelPCA(5, kernel="rbf", gamma=1.0, method="nystrom", n_landmarks=m).fit(X)
        ev_err.append(np.abs(ny.eigenvalues_ / ex.eigenvalues_ - 1).max())
        angles.append(angle_deg(ny.transform(X), ex.transform(X)))
    assert all(b < a for a, b in itertools.pairwise(ev_err)), ev_err
    assert all(b < a for a, b in itertools.pairwise(angles)), angles
    assert ev_err[-1] < 1e-6 and angles[-1] < 1e-3  # 400 landmarks: converged


def test_kmeans_landmarks_fit(rng):
    X = circles(rng, n=800)
    ex = KernelPCA(3, kernel="rbf", gamma=1.0, method="exact").fit(X)
    km = KernelPCA(
        3, kernel="rbf", gamma=1.0, method="nystrom", n_landmarks=60, landmarks="kmeans++"
    ).fit(X)
    assert angle_deg(km.transform(X), ex.transform(X)) < 5.0
    np.testing.assert_allclose(km.eigenvalues_, ex.eigenvalues_, rtol=0.05)


def test_passes_and_lazy_transform(rng):
    """Nystrom fit: at most two passes; transform is lazy and reads once when computed."""
    X = rng.standard_normal((4000, 5))
    arr, counter = counting_dask_array(X, chunks=(500, -1))
    with dask.config.set(scheduler="threads"):
        m = KernelPCA(3, kernel="rbf", n_landmarks=200, fit_inverse_transform=True).fit(arr)
        assert m.method_ == "nystrom"
        assert counter.passes == 2.0  # 200 uniform landmarks touch every chunk: 1 + 1
        counter.reset()
        Z = m.transform(arr)
        assert isinstance(Z, da.Array) and counter.passes == 0
        ref = KernelPCA(3, kernel="rbf", n_landmarks=200, fit_inverse_transform=True).fit(X)
        np.testing.assert_allclose(Z.compute(), ref.transform(X), atol=1e-10)
        assert counter.passes == 1.0
        counter.reset()
        KernelPCA(3, kernel="rbf", method="exact").fit(arr[:1000])
        assert counter.passes == 0.25  # exact: the 1000 rows read once


def test_chunking_invariance_and_determinism(rng):
    X = rng.standard_normal((3000, 4))
    ref = KernelPCA(4, kernel="poly", degree=2, n_landmarks=150).fit(X)
    for chunks in ((3000, -1), (211, -1)):
        got = KernelPCA(4, kernel="poly", degree=2, n_landmarks=150).fit(
            da.from_array(X, chunks=chunks)
        )
        np.testing.assert_allclose(got.projection_, ref.projection_, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(got.eigenvalues_, ref.eigenvalues_, rtol=1e-10)


def test_xarray_input_and_output(rng):
    X = rng.standard_normal((1500, 3))
    xa = xr.DataArray(
        X.T, dims=("var", "time"), coords={"time": np.arange(1500) * 10, "var": ["a", "b", "c"]}
    )
    m = KernelPCA(2, kernel="rbf", n_landmarks=100, fit_inverse_transform=True)
    Z = m.fit(xa, sample_dim="time").transform(xa, sample_dim="time")
    assert Z.dims == ("time", "component")
    np.testing.assert_array_equal(Z["time"], xa["time"])
    ref = KernelPCA(2, kernel="rbf", n_landmarks=100).fit(X).transform(X)
    np.testing.assert_allclose(Z.values, ref, atol=1e-10)
    back = m.inverse_transform(Z)
    assert back.dims == ("time", "var") and list(back["var"].values) == ["a", "b", "c"]
    lazy_z = m.transform(xa.chunk({"time": 500}), sample_dim="time")
    assert isinstance(lazy_z.data, da.Array)
    np.testing.assert_allclose(lazy_z.values, ref, atol=1e-10)
    assert m.as_xarray("landmarks_").dims == ("landmark", "var")


@pytest.mark.parametrize("method", ["exact", "nystrom"])
def test_denoising_with_the_learned_preimage(rng, method):
    """Noisy points on a circle in 10-D: transform -> inverse_transform removes most noise,
    and more of it than linear PCA with the same number of components."""
    Q = np.linalg.qr(rng.standard_normal((10, 2)))[0]

    def ring(n):
        t = rng.uniform(0, 2 * np.pi, n)
        return (2 * np.c_[np.cos(t), np.sin(t)]) @ Q.T

    train = ring(600) + 0.25 * rng.standard_normal((600, 10))
    clean = ring(300)
    noisy = clean + 0.25 * rng.standard_normal(clean.shape)
    m = KernelPCA(
        2,
        kernel="rbf",
        gamma=0.2,
        alpha=0.1,
        fit_inverse_transform=True,
        method=method,
        n_landmarks=300,
    ).fit(train)
    denoised = m.inverse_transform(m.transform(noisy))

    def rms(a):
        return float(np.sqrt(((a - clean) ** 2).sum(axis=1).mean()))

    lin = SkPCA(2).fit(train)
    linear = lin.inverse_transform(lin.transform(noisy))
    assert rms(denoised) < 0.45 * rms(noisy)  # measured 0.36 (exact), 0.37 (nystrom)
    assert rms(denoised) < 0.9 * rms(linear)  # measured 0.77 (exact), 0.80 (nystrom)


def test_bad_input(rng):
    X = rng.standard_normal((50, 3))
    with pytest.raises(
        ValueError,
        match=r"n_landmarks=80 is larger than the number of rows "
        r"\(50\)",
    ):
        KernelPCA(2, method="nystrom", n_landmarks=80).fit(X)
    with pytest.raises(ValueError, match="The 'gamma' parameter of"):
        KernelPCA(2, kernel="rbf", gamma=0).fit(X)
    with pytest.raises(ValueError, match="The 'gamma' parameter of"):
        KernelPCA(2, kernel="rbf", gamma=-0.5, method="nystrom", n_landmarks=10).fit(X)
    with pytest.raises(ValueError, match="The 'method' parameter of KernelPCA must be"):
        KernelPCA(2, method="fast").fit(X)
    with pytest.raises(ValueError, match="The 'landmarks' parameter of"):
        KernelPCA(2, landmarks="random").fit(X)
    with pytest.raises(ValueError, match=r"inverse_transform needs fit_inverse_transform=True"):
        KernelPCA(2).fit(X).inverse_transform(np.zeros((3, 2)))
    with pytest.raises(
        ValueError,
        match=r"X has 3 columns, but KernelPCA.inverse_transform "
        r"is expecting 2",
    ):
        KernelPCA(2, fit_inverse_transform=True).fit(X).inverse_transform(np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"X has 4 features, but KernelPCA is expecting 3"):
        KernelPCA(2).fit(X).transform(np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"Input X contains NaN"):
        KernelPCA(2).fit(np.where(X > 2, np.nan, X))


def test_exact_refused_beyond_limit(rng, monkeypatch):
    monkeypatch.setattr(kpca_module, "EXACT_MAX_SAMPLES", 100)
    X = rng.standard_normal((150, 3))
    with pytest.raises(
        ValueError,
        match=r"limited to 100 rows; X has 150\. Use "
        r"method='nystrom'",
    ):
        KernelPCA(2, method="exact").fit(X)
    # auto switches to Nystrom instead of refusing (all rows as landmarks if m > n)
    m = KernelPCA(2, n_landmarks=1000).fit(X)
    assert m.method_ == "nystrom" and m.n_landmarks_ == 150
    assert KernelPCA(2, n_landmarks=50).fit(X).method_ == "nystrom"


def test_not_psd_callable_kernel_warns_and_clips(rng):
    X = rng.standard_normal((80, 3))

    def minus_rbf(A, B):  # -k is negative definite: everything but the centring is clipped
        return 2.0 - np.exp(-((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    for method in ("exact", "nystrom"):
        with pytest.warns(
            KernelNotPSDWarning,
            match=r"kernel 'minus_rbf' is not positive "
            r"semi-definite.*clipped to zero",
        ):
            m = KernelPCA(3, kernel=minus_rbf, method=method, n_landmarks=80).fit(X)
        assert np.all(m.eigenvalues_ >= 0)
        assert np.isfinite(m.transform(X)).all()


def test_auto_method_and_public_name(rng):
    X = rng.standard_normal((300, 3))
    assert ddr.KernelPCA is KernelPCA
    assert KernelPCA(2, n_landmarks=500).fit(X).method_ == "exact"
    assert KernelPCA(2, n_landmarks=100).fit(X).method_ == "nystrom"


def test_save_and_load_roundtrip(rng, tmp_path):
    X = rng.standard_normal((400, 3))
    m = KernelPCA(3, kernel="rbf", n_landmarks=100, fit_inverse_transform=True).fit(X)
    m.save(str(tmp_path / "kpca.zarr"))
    back = ddr.load(str(tmp_path / "kpca.zarr"))
    np.testing.assert_array_equal(back.transform(X), m.transform(X))
    Z = m.transform(X[:5])
    np.testing.assert_array_equal(back.inverse_transform(Z), m.inverse_transform(Z))


@pytest.mark.parametrize(
    "est",
    [KernelPCA(2, kernel="rbf", method="nystrom", n_landmarks=5, fit_inverse_transform=True)],
    ids=["nystrom"],  # the default (exact): tests/test_common.py
)
def test_check_estimator(est):
    check_estimator(est)


def test_local_cluster(client, rng):
    # 400 landmarks: the feature map (1.3 MB) travels as one graph key (a Delayed)
    X = rng.standard_normal((3000, 4))
    arr = da.from_array(X, chunks=(600, -1))
    m = KernelPCA(3, kernel="rbf", n_landmarks=400, fit_inverse_transform=True).fit(arr)
    ref = KernelPCA(3, kernel="rbf", n_landmarks=400, fit_inverse_transform=True).fit(X)
    np.testing.assert_allclose(m.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(m.transform(arr).compute(), ref.transform(X), atol=1e-10)


@pytest.mark.parametrize("method", ["exact", "nystrom"])
def test_rbf_kernel_pca_is_translation_invariant_on_a_1e8_offset(rng, method):
    """Issue 15: kernel evaluations on offset data. The rbf kernel depends on distances only,
    so the fit of X + c must transform X + c as the fit of X transforms X."""
    X = rng.standard_normal((300, 4))
    shift = 1e8 * np.array([1.0, -2.0, 0.5, 3.0])
    kw = {"kernel": "rbf", "gamma": 0.3, "method": method, "n_landmarks": 150}
    ref = KernelPCA(3, **kw).fit(X).transform(X[:50])
    got = KernelPCA(3, **kw).fit(X + shift).transform(X[:50] + shift)
    np.testing.assert_allclose(got, ref, atol=1e-6 * np.abs(ref).max())


def test_kmeans_landmarks_are_translation_invariant_on_a_1e8_offset(rng):
    """k-means++ seeding compares expanded squared distances: on the raw offset rows it chose
    other landmarks (scores 14 % off); on centred rows it chooses the same ones."""
    X = rng.standard_normal((1500, 3)) + np.repeat(np.eye(3) * 4, 500, axis=0)
    shift = 1e8 * np.array([1.0, -1.0, 0.5])
    kw = {"kernel": "rbf", "gamma": 0.2, "method": "nystrom", "n_landmarks": 60}
    ref = KernelPCA(2, landmarks="kmeans++", **kw).fit(X)
    got = KernelPCA(2, landmarks="kmeans++", **kw).fit(X + shift)
    np.testing.assert_allclose(got.landmarks_ - shift, ref.landmarks_, atol=1e-6)
    out, expect = got.transform(X[:40] + shift), ref.transform(X[:40])
    np.testing.assert_allclose(out, expect, atol=1e-6 * np.abs(expect).max())


# ------------------------------------------------- scikit-learn's eigensolver parameters
@pytest.mark.parametrize("eigen_solver", ["dense", "arpack"])
def test_eigen_solver_tol_and_max_iter_are_scikit_learns(rng, eigen_solver):
    """``eigen_solver`` picks the exact method's eigensolver, ``tol`` and ``max_iter`` tune
    ARPACK: the same components as scikit-learn's solver of that name."""
    X, Xnew = circles(rng, n=300), circles(rng, n=40)
    kw = dict(kernel="rbf", gamma=2.0, eigen_solver=eigen_solver, tol=1e-12, max_iter=5000)
    sk = SkKernelPCA(4, random_state=0, **kw).fit(X)
    me = KernelPCA(4, method="exact", **kw).fit(X)
    np.testing.assert_allclose(me.eigenvalues_, sk.eigenvalues_, rtol=1e-9)
    ref = sk.transform(Xnew)
    np.testing.assert_allclose(aligned(me.transform(Xnew), ref), ref, atol=1e-8)
    with pytest.raises(ValueError, match="fewer eigenpairs than the 300 rows"):
        KernelPCA(300, eigen_solver="arpack").fit(X)


def test_remove_zero_eig_drops_null_components_as_scikit_learn(rng):
    """A linear kernel of 2 features has 2 positive eigenvalues: asked for 5 components,
    ``remove_zero_eig=True`` keeps 2 (exact and Nystrom), as scikit-learn's."""
    X = rng.standard_normal((200, 2))
    sk = SkKernelPCA(5, kernel="linear", remove_zero_eig=True).fit(X)
    for method in ("exact", "nystrom"):
        me = KernelPCA(5, kernel="linear", remove_zero_eig=True, method=method, n_landmarks=200)
        Z = me.fit_transform(X)
        assert me.n_components_ == sk.eigenvalues_.shape[0] == 2 and Z.shape == (200, 2)
    assert KernelPCA(5, kernel="linear", method="exact").fit(X).n_components_ == 5
