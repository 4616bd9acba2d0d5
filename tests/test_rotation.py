"""Rotations (ddr.linalg.rotation) and rotated PCA (ddr.RotatedPCA).

References: xeofs 3's ``EOFRotator`` and its numpy rotations on the same data (varimax and
promax, powers 2 to 4), scikit-learn's factor-analysis rotation, a direct maximisation of
the varimax criterion over orthogonal matrices, and a numpy reference of the whole rotated
PCA written here from the definitions (SVD of the centred data, R's varimax iteration,
promax's target fit).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import xeofs as xe
from scipy import linalg, optimize
from sklearn.decomposition._factor_analysis import _ortho_rotation
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils._param_validation import InvalidParameterError
from xeofs.linalg._numpy._rotation import _promax, _varimax

import ddr
from ddr.linalg.rotation import orthomax, promax
from ddr.testing import counting_dask_array

DOC = Path(__file__).resolve().parents[1] / "docs" / "user-guide" / "rotation.md"
POWERS = (1, 2, 3, 4)
#: xeofs 3.0.6 calls xarray's ``dot(dims=...)``, renamed ``dim``
pytestmark = pytest.mark.filterwarnings("ignore:The `dims` argument:PendingDeprecationWarning")


def _data(n: int = 240, d: int = 14, k: int = 4, seed: int = 0) -> np.ndarray:
    """Rows with k strong modes of unequal variance plus noise."""
    rng = np.random.default_rng(seed)
    scale = np.array([4.0, 3.0, 2.0, 1.5, 1.0][:k])
    return (rng.standard_normal((n, k)) * scale) @ rng.standard_normal((k, d)) + (
        0.5 * rng.standard_normal((n, d))
    )


def _loadings(seed: int = 1, p: int = 25, m: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((p, m)) * np.array([3.0, 2.0, 1.0, 0.5][:m])


# ----------------------------------------------------------------------- references
def _reference_varimax(A: np.ndarray, tol: float | None = 1e-8) -> tuple[np.ndarray, np.ndarray]:
    """R's ``stats::varimax`` iteration (normalize=TRUE), stopped as xeofs stops
    (``|d - d_past| <= tol * d``), or run for 3000 sweeps (to round-off) when ``tol`` is
    None: the rotated loadings and R."""
    h = np.sqrt((A**2).sum(axis=1))
    x = A / h[:, None]
    p, m = x.shape
    T = np.eye(m)
    d = 0.0
    for _ in range(3000):
        z = x @ T
        B = x.T @ (z**3 - z @ np.diag((z**2).sum(axis=0)) / p)
        u, s, vt = np.linalg.svd(B)
        T = u @ vt
        d_past, d = d, s.sum()
        if tol is not None and abs(d - d_past) <= tol * d:
            break
    return (x @ T) * h[:, None], T


def _reference_promax(
    A: np.ndarray, power: float, tol: float | None = 1e-8
) -> tuple[np.ndarray, np.ndarray]:
    """Promax from the definitions: varimax, Kaiser-normalised target ``sign(x)|x|^power``
    (columns scaled to a largest magnitude of 1), normal equations, columns scaled to unit
    factor variance. Returns the loadings and phi."""
    V, _ = _reference_varimax(A, tol)
    h = np.sqrt((V**2).sum(axis=1))
    x = V / h[:, None]
    t = x / np.abs(x).max(axis=0)
    target = np.sign(t) * np.abs(t) ** power
    U = np.linalg.solve(x.T @ x, x.T @ target)
    U = U @ np.diag(np.sqrt(np.diag(np.linalg.inv(U.T @ U))))
    Ui = np.linalg.inv(U)
    return (x @ U) * h[:, None], Ui @ Ui.T


def _reference_model(
    X: np.ndarray, k: int, power: float, tol: float | None = 1e-8
) -> dict[str, np.ndarray]:
    """Rotated PCA from an SVD of the centred data and the reference rotations."""
    n = X.shape[0]
    Xc = X - X.mean(axis=0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    ev = s[:k] ** 2 / (n - 1)
    A = Vt[:k].T * np.sqrt(ev)
    if power == 1:
        L, R = _reference_varimax(A, tol)
    else:
        L, _ = _reference_promax(A, power, tol)
        R = np.linalg.lstsq(A, L, rcond=None)[0]
    var = (L**2).sum(axis=0)
    order = np.argsort(-var)
    L, R, var = L[:, order], R[:, order], var[order]
    C = L / np.sqrt(var)
    signs = np.sign(C[np.abs(C).argmax(axis=0), np.arange(k)])
    C, R = C * signs, R * signs
    scores = Xc @ (Vt[:k].T / np.sqrt(ev)) @ np.linalg.inv(R).T * np.sqrt(var)
    return {"components": C.T, "variance": var, "scores": scores}


def _xeofs(X: np.ndarray, k: int, power: float) -> tuple[xe.single.EOFRotator, xr.DataArray]:
    n, d = X.shape
    data = xr.DataArray(X, dims=("time", "x"), coords={"time": np.arange(n), "x": np.arange(d)})
    eof = xe.single.EOF(n_modes=k)
    eof.fit(data, dim="time")
    rot = xe.single.EOFRotator(n_modes=k, power=power)
    rot.fit(eof)
    return rot, data


def _close(a: np.ndarray, b: np.ndarray, atol: float) -> None:
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)


# ------------------------------------------------------------------- the rotations
def test_orthomax_is_xeofs_varimax_and_promax():
    A = _loadings()
    rot = orthomax(A)
    ref, R = _varimax(A.copy())
    _close(rot.loadings, ref, 1e-12)
    _close(rot.rotation, R, 1e-12)
    _close(rot.phi, np.eye(4), 0)
    assert rot.converged and rot.n_iter > 2
    for power in (2, 3, 4):
        got = promax(A, power=power)
        ref, R, phi = _promax(A.copy(), power=power)
        _close(got.loadings, ref, 1e-12)
        _close(got.rotation, R, 1e-12)
        _close(got.phi, phi, 1e-12)
        _close(np.diag(got.phi), np.ones(4), 1e-12)
        _close(got.loadings, A @ got.rotation, 1e-12)


@pytest.mark.parametrize("method, gamma", [("varimax", 1.0), ("quartimax", 0.0)])
def test_orthomax_with_scikit_learns_settings_is_its_rotation(method, gamma):
    A = _loadings(seed=2)
    got = orthomax(A, gamma=gamma, normalize=False, max_iter=100, tol=1e-6, stop="gain")
    _close(got.loadings, _ortho_rotation(A, method=method).T, 1e-13)


def test_varimax_maximises_its_criterion():
    """No orthogonal matrix near the result does better (BFGS over skew-symmetric logs)."""
    A = _loadings(seed=3, m=3)
    h = np.sqrt((A**2).sum(axis=1))

    def criterion(B: np.ndarray) -> float:
        B2 = (B / h[:, None]) ** 2
        return float((B2**2).sum() - (B2.sum(axis=0) ** 2).sum() / B.shape[0])

    rot = orthomax(A, tol=1e-14)
    base = rot.loadings

    def negative(t: np.ndarray) -> float:
        S = np.array([[0, t[0], t[1]], [-t[0], 0, t[2]], [-t[1], -t[2], 0]])
        return -criterion(base @ linalg.expm(S))

    res = optimize.minimize(negative, np.full(3, 0.05), method="BFGS", options={"gtol": 1e-12})
    assert -res.fun <= criterion(base) * (1 + 1e-12)
    np.testing.assert_allclose(res.x, 0, atol=1e-5)


def test_promax_of_power_one_is_varimax_and_columns_follow_signs():
    A = _loadings(seed=4)
    vm = orthomax(A)
    pm = promax(A, power=1)
    _close(pm.loadings, vm.loadings, 0)
    flip = np.array([1.0, -1.0, 1.0, -1.0])
    _close(orthomax(A * flip).loadings, vm.loadings * flip, 1e-12)
    _close(np.abs(promax(A * flip, power=3).phi), np.abs(promax(A, power=3).phi), 1e-12)


def test_a_single_column_and_zero_loadings_need_no_rotation():
    A = _loadings(m=1)
    rot = orthomax(A)
    _close(np.abs(rot.rotation), np.ones((1, 1)), 0)
    zero = orthomax(np.zeros((5, 2)))
    assert zero.converged and zero.n_iter == 1
    _close(zero.loadings, np.zeros((5, 2)), 0)


def test_bad_loadings_are_refused():
    with pytest.raises(
        ValueError, match=r"orthomax: the loadings must be a 2-D array .* got shape \(5,\)"
    ):
        orthomax(np.ones(5))
    with pytest.raises(ValueError, match=r"got shape \(0, 2\)"):
        orthomax(np.ones((0, 2)))
    bad = _loadings()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="orthomax: the loadings contain NaN or infinite values"):
        orthomax(bad)
    with pytest.raises(ValueError, match=r"promax: power must be at least 1; got 0.5"):
        promax(_loadings(), power=0.5)
    A = _loadings()
    A[:, 2] = 0
    with pytest.raises(ValueError, match=r"promax: the loadings of column\(s\) \[2\] are all zero"):
        promax(A, power=2)


def test_orthomax_says_when_it_did_not_converge():
    rot = orthomax(_loadings(), max_iter=2)
    assert not rot.converged and rot.n_iter == 2


# ------------------------------------------------------------------- RotatedPCA
@pytest.mark.parametrize("power", POWERS)
def test_rotated_pca_equals_xeofs_eof_rotator(power):
    X = _data()
    k = 4
    rot, data = _xeofs(X, k, power)
    est = ddr.RotatedPCA(k, power=power).fit(X)
    _close(est.components_, rot.components().transpose("mode", "x").values, 1e-8)
    _close(est.explained_variance_, rot.explained_variance().values, 1e-8)
    _close(est.explained_variance_ratio_, rot.explained_variance_ratio().values, 1e-8)
    _close(est.singular_values_, rot.singular_values().values, 1e-8)
    _close(est.transform(X), rot.scores().transpose("time", "mode").values, 1e-8)
    new = _data(n=50, seed=9)
    new_da = data.isel(time=slice(0, 50)).copy(data=new)
    _close(est.transform(new), rot.transform(new_da).transpose("time", "mode").values, 1e-8)
    # xeofs keeps phi in its unsorted order and its EOFs' signs: compare magnitudes sorted
    order = rot.data["idx_modes_sorted"].values
    phi_x = rot.data["phi_matrix"].values[np.ix_(order, order)]
    _close(np.abs(est.phi_), np.abs(phi_x), 1e-8)


@pytest.mark.parametrize("power", POWERS)
def test_rotated_pca_equals_a_numpy_reference(power):
    X = _data(seed=5)
    est = ddr.RotatedPCA(4, power=power).fit(X)
    ref = _reference_model(X, 4, power)
    _close(est.components_, ref["components"], 1e-10)
    _close(est.explained_variance_, ref["variance"], 1e-10)
    _close(est.transform(X), ref["scores"], 1e-10)


@pytest.mark.parametrize("power", (1, 3))
def test_tol_zero_iterates_until_the_criterion_repeats(power):
    """The criterion is flat at its maximum: stopping on its change leaves the loadings
    about sqrt(tol) from it (xeofs's tol=1e-8: 1e-4); tol=0 goes on until it repeats to the
    bit, within 1e-7 of the rotation iterated 3000 times."""
    X = _data(seed=5)
    converged = _reference_model(X, 4, power, tol=None)
    default = ddr.RotatedPCA(4, power=power).fit(X)
    far = np.abs(default.components_ - converged["components"]).max()
    assert 1e-5 < far < 1e-3
    est = ddr.RotatedPCA(4, power=power, tol=0).fit(X)
    assert est.n_iter_ < 1000
    _close(est.components_, converged["components"], 1e-7)


@pytest.mark.parametrize("power", POWERS)
def test_identities_of_the_rotated_model(power):
    X = _data(seed=6)
    est = ddr.RotatedPCA(3, power=power).fit(X)
    pca = est.pca_
    S = est.transform(X)
    # scores: variance (ddof=1) is explained_variance_, correlation is phi_
    _close(S.var(axis=0, ddof=1), est.explained_variance_, 1e-9)
    _close(np.corrcoef(S.T), est.phi_, 1e-12)
    if power == 1:
        _close(est.phi_, np.eye(3), 1e-12)
        _close(est.rotation_matrix_.T @ est.rotation_matrix_, np.eye(3), 1e-12)
        _close(est.explained_variance_.sum(), pca.explained_variance_.sum(), 1e-9)
    else:
        assert np.abs(est.phi_ - np.eye(3)).max() > 1e-3  # oblique: correlated scores
    _close(np.linalg.norm(est.components_, axis=1), np.ones(3), 1e-12)
    assert np.all(np.diff(est.explained_variance_) <= 0)
    lead = est.components_[np.arange(3), np.abs(est.components_).argmax(axis=1)]
    assert np.all(lead > 0)
    # the rotation matrix maps PCA's loadings to the rotated ones
    unrotated = pca.components_.T * np.sqrt(pca.explained_variance_)
    _close(
        unrotated @ est.rotation_matrix_,
        est.components_.T * np.sqrt(est.explained_variance_),
        1e-10,
    )
    # the documented relation to PCA's scores, and the reconstruction is PCA's
    Z = pca.transform(X) / np.sqrt(pca.explained_variance_)
    _close(S, Z @ np.linalg.inv(est.rotation_matrix_).T * np.sqrt(est.explained_variance_), 1e-9)
    _close(est.inverse_transform(S), pca.inverse_transform(pca.transform(X)), 1e-9)
    _close(
        est.explained_variance_ratio_
        * pca.explained_variance_.sum()
        / pca.explained_variance_ratio_.sum(),
        est.explained_variance_,
        1e-9,
    )


@pytest.mark.parametrize("power", (1, 3))
def test_from_pca_reads_no_data_and_equals_fit(power):
    X = _data(seed=7)
    arr, counter = counting_dask_array(X, chunks=(50, -1))
    est = ddr.RotatedPCA(3, power=power).fit(arr)
    assert counter.passes == 1.0 and est.n_passes_ == 1
    pca = ddr.PCA(3).fit(arr)
    counter.reset()
    rotated = ddr.RotatedPCA.from_pca(pca, power=power)
    assert counter.passes == 0 and rotated.n_passes_ == 0
    for name in ("components_", "explained_variance_", "phi_", "rotation_matrix_", "mean_"):
        _close(getattr(rotated, name), getattr(est, name), 1e-12)
    assert rotated.get_params()["n_components"] == 3 and rotated.power == power
    scores = rotated.transform(arr)
    assert counter.passes == 0  # lazy
    _close(scores.compute(), est.transform(X), 1e-10)
    assert rotated.pca_ is not pca  # a copy: refitting pca changes nothing here
    before = rotated.components_.copy()
    pca.fit(X[:40])
    _close(rotated.transform(X), est.transform(X), 1e-10)
    _close(rotated.components_, before, 0)


def test_the_fit_plan_is_one_pass_shared():
    X = _data(seed=8)
    arr, counter = counting_dask_array(X, chunks=(60, -1))
    plan = ddr.RotatedPCA(3, power=2)._fit_plan(arr)
    assert counter.passes == 0
    est = plan.run()
    assert counter.passes == 1.0
    _close(est.components_, ddr.RotatedPCA(3, power=2).fit(X).components_, 1e-12)


@pytest.mark.parametrize("chunks", [(240, -1), (50, -1), (239, -1), (7, -1)])
def test_chunking_does_not_change_the_model(chunks):
    X = _data()
    ref = ddr.RotatedPCA(4, power=3).fit(X)
    arr, _ = counting_dask_array(X, chunks=chunks)
    est = ddr.RotatedPCA(4, power=3).fit(arr)
    for name in ("components_", "explained_variance_", "phi_"):
        _close(getattr(est, name), getattr(ref, name), 1e-10)
    out = est.transform(arr)
    assert out.chunks[0] == arr.chunks[0]
    _close(out.compute(), ref.transform(X), 1e-9)


@pytest.mark.parametrize("power", (1, 2))
def test_float32_input_and_data_on_a_large_offset(power):
    X = _data(seed=10)
    ref = ddr.RotatedPCA(3, power=power).fit(X)
    est32 = ddr.RotatedPCA(3, power=power).fit(X.astype(np.float32))
    assert est32.components_.dtype == np.float64
    out32 = est32.transform(X.astype(np.float32))
    assert out32.dtype == np.float32
    _close(est32.components_, ref.components_, 1e-5)
    np.testing.assert_allclose(
        out32, ref.transform(X), rtol=0, atol=1e-4 * np.abs(ref.transform(X)).max()
    )
    shifted = ddr.RotatedPCA(3, power=power).fit(X + 1e8)
    _close(shifted.components_, ref.components_, 1e-6)
    _close(
        shifted.explained_variance_, ref.explained_variance_, 1e-6 * ref.explained_variance_.max()
    )
    np.testing.assert_allclose(shifted.transform(X + 1e8), ref.transform(X), rtol=0, atol=1e-5)


def test_a_grid_in_and_maps_out_equal_the_stacked_rows():
    rng = np.random.default_rng(11)
    X = _data(n=120, d=12, seed=11)
    grid = xr.DataArray(
        X.reshape(120, 3, 4),
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(120), "lat": [-10.0, 0.0, 10.0], "lon": [0.0, 90, 180, 270]},
    )
    grid = grid.where(grid.lat < 5).chunk({"time": 50})  # lat=10 masked at every time
    est = ddr.RotatedPCA(2, power=2).fit(grid, sample_dims="time")
    kept = X.reshape(120, 3, 4)[:, :2, :].reshape(120, 8)
    ref = ddr.RotatedPCA(2, power=2).fit(kept)
    _close(est.components_, ref.components_, 1e-10)
    maps = est.as_xarray("components_")
    assert maps.dims == ("component", "lat", "lon")
    assert bool(maps.sel(lat=10.0).isnull().all()) and not bool(maps.sel(lat=0.0).isnull().any())
    scores = est.transform(grid)
    assert scores.dims == ("time", "component")
    np.testing.assert_array_equal(scores.time.values, np.arange(120))
    _close(scores.values, ref.transform(kept), 1e-9)
    assert rng is not None


def test_save_and_load_keep_the_model(tmp_path):
    X = _data(seed=12)
    pca = ddr.PCA(3).fit(X)
    est = ddr.RotatedPCA.from_pca(pca, power=3)
    est.save(tmp_path / "m.zarr")
    back = ddr.load(tmp_path / "m.zarr")
    assert type(back) is ddr.RotatedPCA and back.n_passes_ == 0
    assert isinstance(back.pca_, ddr.PCA)
    for name in ("components_", "explained_variance_", "rotation_matrix_", "phi_"):
        _close(getattr(back, name), getattr(est, name), 0)
    _close(back.transform(X), est.transform(X), 0)


def test_sample_weights_are_pcas():
    X = _data(seed=13)
    w = np.arange(X.shape[0]) % 3
    est = ddr.RotatedPCA(3, power=2).fit(X, sample_weight=w)
    ref = ddr.RotatedPCA(3, power=2).fit(np.repeat(X, w, axis=0))
    _close(est.components_, ref.components_, 1e-10)
    _close(est.singular_values_, ref.singular_values_, 1e-8)


def test_one_component_is_not_rotated():
    X = _data(seed=14)
    est = ddr.RotatedPCA(1).fit(X)
    pca = ddr.PCA(1).fit(X)
    _close(est.components_, pca.components_, 1e-12)
    _close(est.transform(X), pca.transform(X), 1e-9)


# ------------------------------------------------------------------- bad input
def test_bad_parameters_and_input_are_refused():
    X = _data(n=30, d=5)
    with pytest.raises(
        ValueError, match=r"n_components=6 must be at most min\(n_samples=30, n_features=5\) = 5"
    ):
        ddr.RotatedPCA(6).fit(X)
    with pytest.raises(
        InvalidParameterError,
        match=r"The 'power' parameter of RotatedPCA must be a float in the range \[1\.0, inf\)",
    ):
        ddr.RotatedPCA(2, power=0.5).fit(X)
    with pytest.raises(InvalidParameterError, match="The 'n_components' parameter of RotatedPCA"):
        ddr.RotatedPCA(0).fit(X)
    with pytest.raises(InvalidParameterError, match="The 'svd_solver' parameter of RotatedPCA"):
        ddr.RotatedPCA(2, svd_solver="bogus").fit(X)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(
        ValueError, match=r"Input X contains 1 NaN\. PCA needs complete rows.*ddr\.PPCA"
    ):
        ddr.RotatedPCA(2).fit(bad)
    low = np.outer(np.arange(30.0), np.ones(5))  # rank 1
    with pytest.raises(
        ValueError, match=r"principal component\(s\) \[2\] of the n_components=2 have no variance"
    ):
        ddr.RotatedPCA(2).fit(low)
    with pytest.raises(ValueError, match="principal component"):
        ddr.RotatedPCA.from_pca(ddr.PCA(2).fit(low))
    est = ddr.RotatedPCA(2).fit(X)
    with pytest.raises(
        ValueError, match="X has 4 features, but RotatedPCA is expecting 5 features"
    ):
        est.transform(X[:, :4])
    with pytest.raises(
        ValueError, match=r"X has 3 columns, but RotatedPCA.inverse_transform is expecting 2"
    ):
        est.inverse_transform(np.ones((4, 3)))


def test_from_pca_refuses_what_is_not_a_fitted_pca():
    with pytest.raises(
        TypeError, match=r"RotatedPCA\.from_pca rotates a fitted ddr\.PCA; got TruncatedSVD"
    ):
        ddr.RotatedPCA.from_pca(ddr.TruncatedSVD(2))
    with pytest.raises(NotFittedError, match="This PCA instance is not fitted yet"):
        ddr.RotatedPCA.from_pca(ddr.PCA(2))
    with pytest.raises(InvalidParameterError, match="The 'power' parameter of RotatedPCA"):
        ddr.RotatedPCA.from_pca(ddr.PCA(2).fit(_data()), power=0)


def test_a_rotation_that_does_not_converge_warns():
    with pytest.warns(
        ConvergenceWarning, match=r"the varimax rotation did not converge in max_iter=1 iterations"
    ):
        est = ddr.RotatedPCA(3, max_iter=1).fit(_data())
    assert est.n_iter_ == 1


def test_the_examples_of_the_page_run():
    """docs/user-guide/rotation.md: PCA mixes the two hemispheres' patterns, varimax
    separates them; the MCA covariances are those of the paired scores."""
    ns: dict = {}
    for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S):
        exec(compile(block, str(DOC), "exec"), ns)
    mixed = ns["north_share"](ns["pca"].as_xarray("components_"))
    assert np.all((mixed > 0.2) & (mixed < 0.8))
    separated = np.sort(ns["north_share"](ns["maps"]))
    assert separated[0] < 0.02 and separated[1] > 0.98
    assert ns["scores"].dims == ("time", "component")
    phi = ns["promax"].phi_
    assert phi.shape == (2, 2) and abs(phi[0, 1]) > 0.01
    tx, ty = ns["tx"], ns["ty"]
    np.testing.assert_allclose(ns["covariance"], np.cov(tx.T, ty.T)[[0, 1], [2, 3]], rtol=1e-10)
