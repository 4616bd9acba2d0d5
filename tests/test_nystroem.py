"""Nystroem: scikit-learn's features from the same landmarks, the kernel matrix reproduced
with every row a landmark, landmarks read in at most one pass, and the seed's modular kernel
methods built on it: kernel PCA, kernel CCA and kernel FDA, in scikit-learn pipelines on dask
input and as pipeline steps."""

from __future__ import annotations

import textwrap
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as SkLDA
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.pipeline import make_pipeline

import ddr
from ddr.demo import DemoSpec, write_demo_data
from ddr.io import open_input
from ddr.kernel_approximation.nystroem import Nystroem
from ddr.linalg.kernels import KernelNotPSDWarning
from ddr.testing import counting_dask_array


def blobs(rng, n=400, d=5):
    centres = rng.standard_normal((3, d)) * 2.0
    labels = np.arange(n) % 3
    return centres[labels] + rng.standard_normal((n, d)), labels


# ------------------------------------------------------------------ the feature map
@pytest.mark.parametrize(
    ("kernel", "params"), [("rbf", {"gamma": 0.3}), ("laplacian", {}), ("rbf", {})]
)
def test_features_equal_sklearn_from_the_same_landmarks(rng, kernel, params):
    X, _ = blobs(rng)
    ours = Nystroem(kernel, n_components=60, random_state=7, **params).fit(X)
    sk = SkNystroem(kernel=kernel, n_components=60, random_state=7, **params).fit(X)
    np.testing.assert_array_equal(ours.component_indices_, sk.component_indices_)
    np.testing.assert_array_equal(ours.components_, sk.components_)
    np.testing.assert_allclose(ours.normalization_, sk.normalization_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.transform(X), sk.transform(X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("kernel", "params"),
    [
        ("linear", {}),
        ("poly", {"degree": 2, "coef0": 0.5, "gamma": 0.2}),
        ("polynomial", {"degree": 2, "coef0": 0.5, "gamma": 0.2}),  # scikit-learn's alias
        ("cosine", {}),
    ],
)
def test_rank_deficient_kernels_give_sklearns_inner_products(rng, kernel, params):
    """Where K_LL is singular (linear and cosine of 5 features, a quadratic kernel: rank 21 <
    60), scikit-learn floors the null eigenvalues at 1e-12 and ddr drops them; the inner
    products of the features, the approximate kernel, agree."""
    X, _ = blobs(rng)
    ours = Nystroem(kernel, n_components=60, random_state=1, **params).fit(X).transform(X)
    sk = SkNystroem(kernel=kernel, n_components=60, random_state=1, **params).fit(X).transform(X)
    G, Gsk = ours @ ours.T, sk @ sk.T
    np.testing.assert_allclose(G, Gsk, rtol=1e-6, atol=1e-7 * np.abs(Gsk).max())


@pytest.mark.parametrize(
    ("kernel", "params"),
    [("rbf", {"gamma": 0.5}), ("laplacian", {"gamma": 0.2}), ("poly", {"degree": 3})],
)
def test_every_row_a_landmark_reproduces_the_kernel_matrix(rng, kernel, params):
    X, _ = blobs(rng, n=150, d=4)
    Xd = da.from_array(X, chunks=(40, -1))
    with dask.config.set(scheduler="threads"):
        F = Nystroem(kernel, n_components=150, **params).fit(Xd).transform(Xd).compute()
    K = pairwise_kernels(X, metric=kernel, **params)
    np.testing.assert_allclose(F @ F.T, K, rtol=0, atol=1e-8 * np.abs(K).max())


def test_landmarks_are_read_in_at_most_one_pass_and_transform_is_lazy(rng):
    X, _ = blobs(rng, n=1000)
    arr, counter = counting_dask_array(X, chunks=(100, -1))
    with dask.config.set(scheduler="threads"):
        m = Nystroem(n_components=4, random_state=3).fit(arr)
        chunks = np.unique(m.component_indices_ // 100).size
        assert counter.passes == pytest.approx(chunks / 10)  # only the chunks holding them
        counter.reset()
        F = m.transform(arr)
        assert isinstance(F, da.Array) and counter.passes == 0
        np.testing.assert_allclose(F.compute(), m.transform(X), rtol=1e-12)
        assert counter.passes == 1.0
    Xa = xr.DataArray(X, dims=("cell", "gene"), coords={"cell": np.arange(1000) + 5})
    out = Nystroem(n_components=4, random_state=3).fit(Xa).transform(Xa)
    assert out.dims == ("cell", "component") and out["cell"][0] == 5


def test_kernel_pca_is_nystroem_then_pca(rng):
    """One implementation, two uses: KernelPCA's Nystrom method with every row a landmark is
    the PCA of the Nystroem features of all rows (eigenvalues: scatter = variance x (n-1))."""
    X, _ = blobs(rng, n=200)
    kpca = ddr.KernelPCA(3, kernel="rbf", gamma=0.2, method="nystrom", n_landmarks=200).fit(X)
    F = Nystroem("rbf", gamma=0.2, n_components=200).fit(X).transform(X)
    pca = ddr.PCA(3).fit(F)
    np.testing.assert_allclose(kpca.eigenvalues_, pca.explained_variance_ * 199, rtol=1e-8)
    Z = kpca.transform(X)
    P = pca.transform(F)
    np.testing.assert_allclose(np.abs(Z), np.abs(P), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- dtypes and tiles
def _f64_reference(model, X):
    """The features of ``X``'s values in float64, from the kernel's own formula."""
    K = pairwise_kernels(
        np.asarray(X, dtype=np.float64), model.components_, metric=model.kernel,
        filter_params=True, gamma=model.gamma_, degree=model.degree or 3,
        coef0=1.0 if model.coef0 is None else model.coef0,
    )  # fmt: skip
    return K @ model.normalization_.T


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e5])
def test_float32_rbf_features_are_float32_within_sklearns_error(rng, offset):
    """float32 rows and the rbf kernel: the features are computed and returned in float32
    (as scikit-learn's); their error against the float64 features of the same float32
    values is of the order of scikit-learn's float32 features' (measured 3e-6 against
    6e-7 here; the exponent is formed in float32), whatever the offset of the data."""
    X, _ = blobs(rng)
    X32 = (X + offset).astype(np.float32)
    model = Nystroem("rbf", gamma=0.3, n_components=60, random_state=7).fit(X32)
    F32 = model.transform(X32)
    assert F32.dtype == np.float32
    ref = _f64_reference(model, X32)
    np.testing.assert_allclose(model.transform(X32.astype(np.float64)), ref, rtol=0, atol=1e-12)
    sk = SkNystroem(kernel="rbf", gamma=0.3, n_components=60, random_state=7).fit(X32)
    sk_err = np.abs(sk.transform(X32) - ref).max()
    err = np.abs(F32 - ref).max()
    assert err < 1e-5 * np.abs(ref).max() and err < 20 * sk_err


@pytest.mark.parametrize(
    ("kernel", "params"),
    [
        ("linear", {}),
        ("poly", {"degree": 2, "coef0": 0.5, "gamma": 0.2}),
        ("sigmoid", {"gamma": 0.05}),
        ("cosine", {}),
        ("laplacian", {"gamma": 0.3}),
    ],
)
def test_other_kernels_of_float32_rows_are_computed_in_float64(rng, kernel, params):
    """Kernels that are not translation invariant lose most digits in float32 on offset data
    (and the laplacian kernel is no GEMM): float32 rows are computed in float64 and rounded
    to float32 at the end."""
    X, _ = blobs(rng)
    X32 = (X + 50.0).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelNotPSDWarning)
        model = Nystroem(kernel, n_components=60, random_state=7, **params).fit(X32)
    F32 = model.transform(X32)
    assert F32.dtype == np.float32
    ref = _f64_reference(model, X32)
    np.testing.assert_allclose(
        F32, ref.astype(np.float32), rtol=1e-6, atol=1e-6 * np.abs(ref).max()
    )
    np.testing.assert_allclose(
        model.transform(X32.astype(np.float64)), ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max()
    )


def test_integer_rows_give_float64_features(rng):
    X = rng.integers(-5, 5, size=(300, 4))
    model = Nystroem("rbf", gamma=0.1, n_components=40).fit(X)
    F = model.transform(X)
    assert F.dtype == np.float64
    np.testing.assert_allclose(F, _f64_reference(model, X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", ["rbf", "poly", "laplacian"])
def test_features_do_not_depend_on_the_chunks(rng, dtype, kernel):
    """The same features to round-off (float32: a small part of their own error against
    float64; float64: 1e-12) in blocks of 1 to 1000 rows, whole and partial tiles. Every
    GEMM is of a whole tile (the last padded): OpenBLAS multiplies products of up to about
    10^6 multiply-adds with other kernels than larger ones, which round in their own order,
    and float32 features of the same rows differed by 4e-6 between chunks of 300 and 1200
    rows before (on this machine they are now the same bits)."""
    X, _ = blobs(rng, n=1000)
    X = X.astype(dtype)
    model = Nystroem(kernel, n_components=300, random_state=0).fit(X)
    F = model.transform(X)
    atol = (2e-6 if dtype == np.float32 else 1e-12) * np.abs(F).max()
    with dask.config.set(scheduler="sync"):
        for chunks in ((1, 1, 1, 6, 291, 700), 7, 300, 777):
            Fd = model.transform(da.from_array(X, chunks=(chunks, -1)))
            assert Fd.dtype == F.dtype == dtype
            np.testing.assert_allclose(Fd.compute(), F, rtol=0, atol=atol)


def test_a_callable_kernel_keeps_its_path(rng):
    """A callable is evaluated as it is (a tile of rows against the landmarks): a vectorised
    rbf gives the named rbf's features."""

    def my_rbf(A, B, scale):
        d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=-1)
        return np.exp(-scale * d2)

    X, _ = blobs(rng)
    ours = Nystroem(my_rbf, kernel_params={"scale": 0.3}, n_components=60, random_state=7)
    named = Nystroem("rbf", gamma=0.3, n_components=60, random_state=7).fit(X)
    np.testing.assert_allclose(ours.fit(X).transform(X), named.transform(X), rtol=1e-9, atol=1e-12)
    assert ours.transform(X.astype(np.float32)).dtype == np.float32


# ------------------------------------------------------------------------ bad input
def test_sigmoid_is_not_psd_and_warns(rng):
    X, _ = blobs(rng)
    with pytest.warns(
        KernelNotPSDWarning,
        match=r"kernel 'sigmoid' is not positive semi-definite: the landmark kernel matrix "
        r"K_LL has negative eigenvalues",
    ):
        m = Nystroem("sigmoid", gamma=0.05, n_components=40).fit(X)
    F = m.transform(X)
    assert np.isfinite(F).all() and F.shape == (400, 40)


def test_more_components_than_rows_warns_and_uses_every_row(rng):
    X, _ = blobs(rng, n=30)
    with pytest.warns(
        UserWarning, match=r"Nystroem: n_components=100 > n_samples=30; n_components was set "
        r"to n_samples=30",
    ):  # fmt: skip
        m = Nystroem().fit(X)
    assert m.n_components_ == 30 and m.transform(X).shape == (30, 30)


def test_bad_input(rng):
    X, _ = blobs(rng, n=50)
    with pytest.raises(ValueError, match="The 'kernel' parameter of Nystroem must be"):
        Nystroem("chi2").fit(X)
    with pytest.raises(ValueError, match="The 'gamma' parameter of Nystroem"):
        Nystroem(gamma=-1.0).fit(X)
    with pytest.raises(ValueError, match="The 'kernel_params' parameter of Nystroem is passed"):
        Nystroem("rbf", kernel_params={"a": 1}).fit(X)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        Nystroem(n_components=10).fit(Xn)
    with pytest.raises(ValueError, match=r"X has 4 features, but Nystroem is expecting 5"):
        Nystroem(n_components=10).fit(X).transform(X[:, :4])


# ------------------------------------------------------------- modular kernel methods
def _exact_kernel_features(K: np.ndarray) -> np.ndarray:
    """Rows whose inner products are K, from its eigendecomposition (no Nystroem code)."""
    lam, U = np.linalg.eigh(K)
    return U * np.sqrt(np.clip(lam, 0.0, None))


def _regularised_cca(Fx: np.ndarray, Fy: np.ndarray, reg: float, k: int) -> np.ndarray:
    """The canonical correlations of seed 004's regularised CCA, in numpy."""
    dx = Fx.shape[1]
    S = np.cov(np.hstack([Fx, Fy]).T)
    Sxx, Syy, Sxy = S[:dx, :dx], S[dx:, dx:], S[:dx, dx:]

    def inv_sqrt(C: np.ndarray) -> np.ndarray:
        C = (1 - reg) * C + reg * np.trace(C) / C.shape[0] * np.eye(C.shape[0])
        lam, U = np.linalg.eigh(C)
        return (U / np.sqrt(lam)) @ U.T

    return np.linalg.svd(inv_sqrt(Sxx) @ Sxy @ inv_sqrt(Syy), compute_uv=False)[:k]


def test_kernel_cca_in_a_sklearn_pipeline_on_dask_input(rng):
    """Kernel CCA = Nystroem on each view + CCA(reg): with every row a landmark, the
    canonical correlations of seed 004's regularised kernel CCA (computed here from the
    Gram matrices' own eigendecompositions); fitted in a scikit-learn Pipeline on dask input,
    transform stays lazy."""
    n = 160
    z = rng.standard_normal((n, 2))
    X = np.c_[np.sin(z[:, 0]), z[:, 1] ** 2, rng.standard_normal(n)]
    X += 0.1 * rng.standard_normal((n, 3))
    Y = np.c_[z[:, 0] ** 3, np.cos(z[:, 1])] + 0.1 * rng.standard_normal((n, 2))
    gx, gy, reg = 0.5, 0.8, 0.2
    Xd, Yd = da.from_array(X, chunks=(50, -1)), da.from_array(Y, chunks=(50, -1))
    with dask.config.set(scheduler="threads"):
        phi_y = Nystroem("rbf", gamma=gy, n_components=n).fit(Yd)
        Fy = phi_y.transform(Yd)
        kcca = make_pipeline(Nystroem("rbf", gamma=gx, n_components=n), ddr.CCA(3, reg=reg))
        kcca.fit(Xd, Fy)
        xs = kcca.transform(Xd)
        assert isinstance(xs, da.Array)
        xs = xs.compute()
    cca = kcca[-1]
    Kx = pairwise_kernels(X, metric="rbf", gamma=gx)
    Ky = pairwise_kernels(Y, metric="rbf", gamma=gy)
    ref = _regularised_cca(_exact_kernel_features(Kx), _exact_kernel_features(Ky), reg, 3)
    np.testing.assert_allclose(cca.singular_values_, ref, rtol=1e-8)
    assert cca.correlations_[0] > 0.9  # the shared nonlinear signal
    xs_np, ys = cca.transform(kcca[0].transform(X), phi_y.transform(Y))
    np.testing.assert_allclose(xs_np, xs, rtol=1e-10, atol=1e-10)
    assert np.corrcoef(xs[:, 0], ys[:, 0])[0, 1] == pytest.approx(cca.correlations_[0], rel=1e-8)


def test_kernel_fda_in_a_sklearn_pipeline_on_dask_input(rng):
    """Kernel FDA = Nystroem + LinearDiscriminantAnalysis, on dask input, equals the same
    pipeline of scikit-learn's estimators on numpy (same landmarks): projections and
    predictions."""
    X, y = blobs(rng, n=600)
    X = np.c_[X, (X**2).sum(axis=1)]
    Xd, yd = da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150)
    with dask.config.set(scheduler="threads"):
        kfda = make_pipeline(
            Nystroem("rbf", gamma=0.1, n_components=40, random_state=2),
            ddr.LinearDiscriminantAnalysis(),
        ).fit(Xd, yd)
        Z = kfda.transform(Xd)
        assert isinstance(Z, da.Array)
        Z = Z.compute()
        pred = kfda.predict(Xd).compute()
    sk = make_pipeline(
        SkNystroem(kernel="rbf", gamma=0.1, n_components=40, random_state=2), SkLDA()
    ).fit(X, y)
    Zsk = sk.transform(X)
    np.testing.assert_allclose(Z * np.sign((Z * Zsk).sum(axis=0)), Zsk, rtol=1e-7, atol=1e-8)
    np.testing.assert_array_equal(pred, sk.predict(X))


def test_kernel_fda_as_pipeline_steps(tmp_path, monkeypatch):
    """The same model from a pipeline file: Nystroem.fit_transform, then LDA on the features;
    the projections written to Zarr equal the Python pipeline's."""
    monkeypatch.chdir(tmp_path)
    with dask.config.set(scheduler="threads"):
        write_demo_data("demo.zarr", DemoSpec(1200, 6, 3, 3, 300, seed=3))
    (tmp_path / "kfda.yaml").write_text(
        textwrap.dedent(
            """
            ddr: 1
            name: kernel-fda
            inputs:
              X: {path: demo.zarr, array: X}
              y: {path: demo.zarr, array: y}
            steps:
              phi:
                op: Nystroem.fit_transform
                inputs: {X: X}
                with: {kernel: rbf, gamma: 0.05, n_components: 50, random_state: 4}
              fda: {op: LinearDiscriminantAnalysis.fit, inputs: {X: phi, y: y}}
              projected: {op: LinearDiscriminantAnalysis.transform, inputs: {model: fda, X: phi}}
            outputs:
              - {kind: zarr, from: projected, path: out/projected.zarr}
              - {kind: model, from: phi.model, path: out/nystroem.model.zarr}
            """
        )
    )
    with dask.config.set(scheduler="threads"):
        summary = ddr.run_pipeline("kfda.yaml")
    assert summary.status == "ok"
    X, y = open_input("demo.zarr", "X").values, open_input("demo.zarr", "y").values
    ref = make_pipeline(
        Nystroem("rbf", gamma=0.05, n_components=50, random_state=4),
        ddr.LinearDiscriminantAnalysis(),
    ).fit(X, y)
    got = xr.open_zarr("out/projected.zarr")["projected"].values
    np.testing.assert_allclose(got, ref.transform(X), rtol=1e-8, atol=1e-10)
    saved = ddr.load("out/nystroem.model.zarr")
    np.testing.assert_array_equal(saved.component_indices_, ref[0].component_indices_)
