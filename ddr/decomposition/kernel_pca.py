"""Kernel PCA: exact for small n, Nystrom for data of any size, with a learned pre-image.

Exact (``method="exact"``) is scikit-learn's algorithm: the centred Gram matrix
``K - EK - KE + EKE`` (E the n x n matrix of 1/n), its top eigenvectors ``alpha`` scaled to
norm ``1/sqrt(lambda)``, and out-of-sample projections ``k_c(x, X) alpha / sqrt(lambda)``
centred consistently with the training Gram matrix (beyond :data:`DENSE_MAX_SAMPLES` rows,
with few components, the top eigenpairs come from Lanczos instead of the dense solver). It
holds the n x n matrix, so it is refused beyond ``EXACT_MAX_SAMPLES`` rows.

Nystrom (``method="nystrom"``) never holds more than a few row blocks:

1. pass 1 reads m landmark rows (uniform sampling, or k-means++ seeding on a sample);
2. on the client, ``K_LL = U S U^T`` gives the map ``phi(x) = k(x, L) U S^{-1/2}`` (tiny and
   negative eigenvalues clipped);
3. pass 2 computes the :class:`~ddr.stats.Moments` of ``phi(x)`` blockwise, and the centred
   PCA of the mapped features is kernel PCA of the Nystrom kernel
   ``k(x, L) K_LL^+ k(L, y)``; projections are ``k(x, L) A - offset`` with ``A`` (m x k).

With ``m = n`` landmarks the Nystrom kernel equals the kernel on the data, and the fit equals
the exact one (tested to 1e-6).

The pre-image (``fit_inverse_transform=True``) is scikit-learn's kernel ridge regression from
scores back to inputs (Bakir, Weston and Schoelkopf, 2004), trained on the exact fit's rows or
on the landmark rows (a uniform sample already in memory after pass 1): it costs no pass.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ddr.base import FEATURE, InvalidParameterError, fit_context
from ddr.families import Blockwise, ComponentTransformer
from ddr.linalg.kernels import KERNELS, KernelSpec, make_kernel, pairwise_kernel
from ddr.linalg.nystrom import (
    LANDMARK_METHODS,
    NystromMoments,
    clip_psd_eigenvalues,
    fit_nystrom,
    kernel_scores,
    select_landmarks,
)
from ddr.linalg.signs import component_signs
from ddr.progress import Passes
from ddr.stats import compute
from ddr.stats._input import Rows
from ddr.tags import DDRTags, n_components_limit, n_components_width

__all__ = ["DENSE_MAX_SAMPLES", "EXACT_MAX_SAMPLES", "KernelPCA"]

logger = logging.getLogger(__name__)

#: Largest n for ``method="exact"``: the centred Gram matrix and its eigenvectors take
#: 2 n^2 float64 (1.6 GB at 10 000 rows) and the dense eigensolver O(n^3) time (about 30 s
#: at 10 000 rows on one core).
EXACT_MAX_SAMPLES = 10_000

_METHODS = ("auto", "exact", "nystrom")


def _share(eigenvalues: np.ndarray, total: float) -> np.ndarray:
    """Each eigenvalue's share of the total (the trace of the centred kernel matrix)."""
    return eigenvalues / total if total > 0 else np.zeros_like(eigenvalues)


def _preimage(Z: np.ndarray, packed: tuple) -> np.ndarray:
    """Kernel ridge prediction ``k(Z, Z_fit) @ dual_coef`` for one block of scores."""
    fit_scores, dual_coef, kernel = packed
    return kernel_scores(Z, fit_scores, dual_coef, None, kernel)


def _packed_scores(X: np.ndarray, packed: tuple) -> np.ndarray:
    """:func:`~ddr.linalg.nystrom.kernel_scores` with its fitted arrays in one argument."""
    return kernel_scores(X, *packed)


#: Beyond this n, a few top eigenpairs of the n x n Gram matrix come from Lanczos (ARPACK):
#: O(n^2) per iteration instead of the O(n^3) dense reduction (10 000 rows, 5 components:
#: seconds instead of minutes). Below it, and for many components, the dense solver is
#: scikit-learn's (eigen_solver="dense"), whose results exact mode reproduces bit for bit.
DENSE_MAX_SAMPLES = 2000


def _top_eigenpairs(
    K: np.ndarray,
    k: int,
    *,
    need_smallest: bool,
    seed: int,
    solver: str = "auto",
    tol: float = 0.0,
    max_iter: int | None = None,
) -> tuple[np.ndarray, np.ndarray, float | None]:
    """The k largest eigenpairs of the symmetric K (ascending), and its smallest eigenvalue
    when asked for and not among them. ``solver``: ``"dense"`` (LAPACK), ``"arpack"``
    (Lanczos, with ``tol`` and ``max_iter``) or ``"auto"`` (Lanczos beyond
    :data:`DENSE_MAX_SAMPLES` rows for at most n / 20 components, dense otherwise)."""
    from scipy.sparse.linalg import eigsh

    n = K.shape[0]
    if solver == "arpack" and k >= n:
        raise ValueError(
            f"KernelPCA: eigen_solver='arpack' computes fewer eigenpairs than the {n} rows; "
            f"got n_components={k}. Use eigen_solver='dense' (or 'auto') for all of them"
        )
    lanczos = solver == "arpack" or (solver == "auto" and n > DENSE_MAX_SAMPLES and k <= n // 20)
    if lanczos:
        # deterministic start (scikit-learn's _init_arpack_v0); tol=0: machine precision
        v0 = np.random.default_rng(seed).uniform(-1, 1, n)
        lam, vecs = eigsh(K, k, which="LA", v0=v0, tol=tol, maxiter=max_iter)
        order = np.argsort(lam)
        lam, vecs = lam[order], vecs[:, order]
    else:
        lam, vecs = linalg.eigh(K, subset_by_index=(n - k, n - 1))
    smallest = None
    if need_smallest and k < n:
        if lanczos:
            v0 = np.random.default_rng(seed + 1).uniform(-1, 1, n)
            smallest = float(eigsh(K, 1, which="SA", v0=v0, tol=0, return_eigenvectors=False)[0])
        else:
            smallest = float(linalg.eigh(K, eigvals_only=True, subset_by_index=(0, 0))[0])
    return lam, vecs, smallest


class KernelPCA(ComponentTransformer, BaseEstimator):
    """Kernel principal component analysis, exact or by the Nystrom method, out-of-core.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components. None keeps every component with a positive eigenvalue (as in
        scikit-learn; with Nystrom at most the kept rank of K_LL, <= n_landmarks).
    kernel : {"linear", "poly", "rbf", "laplacian", "sigmoid", "cosine"} or callable, \
default="linear"
        Kernel, with scikit-learn's formulas (:mod:`ddr.linalg.kernels`). A callable is
        ``kernel(X, Y, **kernel_params) -> (n_x, n_y) ndarray`` evaluated on blocks; if it is
        not positive semi-definite the negative eigenvalues are clipped with a
        :class:`~ddr.linalg.kernels.KernelNotPSDWarning`.
    gamma : float or None, default=None
        Kernel coefficient of rbf, laplacian, poly and sigmoid; None means 1/n_features.
        Must be positive.
    degree : float, default=3
        Degree of the poly kernel.
    coef0 : float, default=1
        Independent term of the poly and sigmoid kernels.
    kernel_params : dict or None, default=None
        Keyword arguments of a callable kernel.
    alpha : float, default=1.0
        Ridge penalty of the pre-image regression (``fit_inverse_transform=True``).
    fit_inverse_transform : bool, default=False
        Learn the pre-image map used by :meth:`inverse_transform`.
    eigen_solver : {"auto", "dense", "arpack"}, default="auto"
        The eigensolver of the exact method's n x n centred Gram matrix: ``"dense"``
        (LAPACK, scikit-learn's ``"dense"``, bit for bit), ``"arpack"`` (Lanczos, for few
        components), ``"auto"``: Lanczos beyond ``DENSE_MAX_SAMPLES`` (2000) rows for at
        most n / 20 components, dense otherwise. Nystrom's m x m problems are always
        solved densely.
    tol : float, default=0
        Convergence tolerance of ARPACK (0: machine precision).
    max_iter : int or None, default=None
        Most ARPACK iterations (None: ARPACK's default).
    remove_zero_eig : bool, default=False
        Drop the components with a zero eigenvalue (whose scores are 0) even when
        ``n_components`` is given; with ``n_components=None`` they are always dropped.
    method : {"auto", "exact", "nystrom"}, default="auto"
        ``exact`` holds the n x n Gram matrix (n <= ``EXACT_MAX_SAMPLES``); ``nystrom``
        uses ``n_landmarks`` landmarks; ``auto`` is exact when n <= n_landmarks (where
        Nystrom could not be cheaper) and Nystrom otherwise.
    n_landmarks : int, default=1000
        Number m of Nystrom landmarks; at most the number of rows. Accuracy improves with m
        (see the benchmarks); the fit costs O(n m (d + m)) flops and O(m^2) memory.
    landmarks : {"uniform", "kmeans++"}, default="uniform"
        How landmarks are chosen: uniformly without replacement (one indexed read), or by
        k-means++ seeding on a uniform sample of ``max(5 m, 1000)`` rows.
    random_state : int, default=0
        Seed of the landmark choice (fits are deterministic).

    Attributes
    ----------
    method_ : str
        The method used ("exact" or "nystrom").
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues of the centred kernel matrix (scikit-learn's scale: sums over the n
        training rows), descending.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Each eigenvalue's share of the total variance in feature space: of the trace of the
        centred kernel matrix (Nystrom: of the centred scatter of the mapped rows), which
        counts the components that were not computed too.
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        Exact only: unit eigenvectors of the centred Gram matrix (scikit-learn's).
    X_fit_ : ndarray of shape (n_samples, n_features)
        Exact only: the training rows.
    landmarks_ : ndarray of shape (n_landmarks, n_features)
        Nystrom only: the landmark rows.
    components_ : ndarray of shape (n_components, r)
        Nystrom only: principal axes in the Nystrom feature space (r = kept rank of K_LL).
    feature_mean_ : ndarray of shape (r,)
        Nystrom only: mean of the Nystrom features of the training rows.
    projection_ : ndarray of shape (n_centres, n_components)
        Coefficients of the projection ``k(x, centres) @ projection_ - projection_offset_``
        (centres: ``X_fit_`` or ``landmarks_``).
    projection_offset_ : ndarray of shape (n_components,)
    projection_row_mean_ : ndarray of shape (n_components,) or None
        Exact only: coefficient of the row mean of ``k(x, X_fit_)`` (Gram centring).
    dual_coef_ : ndarray of shape (n_centres, n_features)
        Pre-image regression coefficients (``fit_inverse_transform=True``).
    X_transformed_fit_ : ndarray of shape (n_centres, n_components)
        Scores of the rows the pre-image was trained on.
    gamma_ : float
        The kernel coefficient used.
    n_components_ : int
    n_features_in_ : int

    Notes
    -----
    Passes over the data: exact reads X once (and then holds it); Nystrom reads it twice
    (landmark rows, then the moments of the mapped features); the pre-image adds no pass.
    Transform is blockwise (lazy for dask input, a DataArray with a ``component`` dim for
    xarray input).
    """

    def __init__(
        self,
        n_components: int | None = None,
        *,
        kernel: Any = "linear",
        gamma: float | None = None,
        degree: float = 3,
        coef0: float = 1,
        kernel_params: dict | None = None,
        alpha: float = 1.0,
        fit_inverse_transform: bool = False,
        eigen_solver: str = "auto",
        tol: float = 0,
        max_iter: int | None = None,
        remove_zero_eig: bool = False,
        method: str = "auto",
        n_landmarks: int = 1000,
        landmarks: str = "uniform",
        random_state: int = 0,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.fit_inverse_transform = fit_inverse_transform
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.remove_zero_eig = remove_zero_eig
        self.method = method
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.random_state = random_state

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions(set(KERNELS)), callable],
        "gamma": [Interval(Real, 0, None, closed="neither"), None],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_inverse_transform": ["boolean"],
        "eigen_solver": [StrOptions({"auto", "dense", "arpack"})],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "remove_zero_eig": ["boolean"],
        "method": [StrOptions(set(_METHODS))],
        "n_landmarks": [Interval(Integral, 1, None, closed="left")],
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        "random_state": [Interval(Integral, 0, None, closed="left")],
    }

    def _check_param_combination(self) -> None:
        if self.kernel_params and isinstance(self.kernel, str):
            raise InvalidParameterError(
                "The 'kernel_params' parameter of KernelPCA is passed to a callable kernel "
                f"only; kernel={self.kernel!r} takes gamma/degree/coef0. Got "
                f"{self.kernel_params!r} instead."
            )

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = self._passes
        tags.fit.statistics = self._widest_pass
        if self.method in ("exact", "auto"):
            tags.fit.loads_data = "exact kernel PCA (small n) holds the data and its Gram matrix"
        assert tags.transformer is not None
        tags.transformer.component_prefix = "KPC"
        tags.transformer.n_components_limit = n_components_limit("n_samples")
        if self.remove_zero_eig:  # as many columns as positive eigenvalues: known once fitted
            tags.transformer.width = n_components_width(None)
        if self.kernel in ("rbf", "laplacian"):
            tags.translation_invariant = "transform"
        tags.xarray_dims = {"landmarks_": ("landmark", FEATURE), "X_fit_": ("sample", FEATURE)}
        # rows of the data; the kernel scores have no units ddr can say
        tags.xarray_units = {"landmarks_": 1, "X_fit_": 1}
        # the suites (and the pipeline's op tests) exercise the learned pre-image too
        tags.checks.params = {"fit_inverse_transform": True}
        return tags

    # --------------------------------------------------------------- validation
    def _method(self, n_samples: int) -> str:
        """The method used for ``n_samples`` rows (``auto`` resolved), or a ValueError."""
        name = type(self).__name__
        m = self.n_landmarks
        method = self.method
        if method == "auto":
            method = "exact" if n_samples <= min(m, EXACT_MAX_SAMPLES) else "nystrom"
            # (n_landmarks > n only reaches Nystrom when n is beyond the exact limit: all rows
            # are then the landmarks, see _n_landmarks)
        elif method == "nystrom" and m > n_samples:
            raise ValueError(
                f"{name}: n_landmarks={m} is larger than the number of rows ({n_samples}); "
                f"use at most {n_samples} landmarks (n_landmarks=n_samples reproduces "
                "method='exact')"
            )
        if method == "exact" and n_samples > EXACT_MAX_SAMPLES:
            raise ValueError(
                f"{name}: method='exact' holds the n x n kernel matrix and is limited to "
                f"{EXACT_MAX_SAMPLES} rows; X has {n_samples}. Use method='nystrom' "
                "(n_landmarks sets the accuracy) for larger data"
            )
        return method

    def _passes(self, n_samples: int, n_features: int) -> int | None:
        try:
            return 1 if self._method(n_samples) == "exact" else 2
        except (TypeError, ValueError):  # fit says what is wrong
            return None

    # ---------------------------------------------------------------------- fit
    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        """The moments of the Nystrom features: one column per landmark."""
        from ddr.stats import Moments

        return [(Moments.spec(), int(self.n_landmarks))]

    @fit_context
    def fit(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> KernelPCA:
        """Fit kernel PCA to the rows of X.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
        y : ignored
        sample_dim : hashable, optional
            The sample dim of a DataArray X.

        Returns
        -------
        self
        """
        rows = self._rows(X, reset=True, sample_dim=sample_dim)
        n, d = rows.shape
        if n < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 samples (kernel centring leaves "
                f"nothing of one); got n_samples={n}"
            )
        method = self._method(n)
        self._kernel_spec = make_kernel(
            self.kernel,
            gamma=self.gamma,
            degree=self.degree,
            coef0=self.coef0,
            n_features=d,
            kernel_params=self.kernel_params,
            owner=type(self).__name__,
        )
        self.gamma_ = self._kernel_spec.gamma
        for attr in (
            "eigenvectors_",
            "X_fit_",
            "landmarks_",
            "components_",
            "feature_mean_",
            "dual_coef_",
            "X_transformed_fit_",
        ):
            if hasattr(self, attr):
                delattr(self, attr)
        if method == "exact":
            self._fit_exact(rows)
        else:
            self._fit_nystrom(rows)
        self.method_ = method
        self.n_components_ = int(self.eigenvalues_.shape[0])
        if self.fit_inverse_transform:
            self._fit_preimage()
        return self

    def _fit_exact(self, rows: Any) -> None:
        data = rows.data.compute() if rows.is_lazy else rows.data
        X = np.asarray(data, dtype=np.float64)
        if not np.isfinite(X).all():
            from ddr.stats._checks import check_finite

            check_finite(X)
        spec = self._kernel_spec
        n = X.shape[0]
        K = pairwise_kernel(X, None, spec)
        fit_rows = K.mean(axis=0)
        fit_all = float(fit_rows.mean())
        # K - EK - KE + EKE, in place (the kernel centring of the seeds)
        K -= fit_rows[None, :]
        K -= K.mean(axis=1)[:, None]
        total = float(np.trace(K))  # the sum of all eigenvalues, computed or not
        k = n if self.n_components is None else min(n, self.n_components)
        lam, alphas, smallest = _top_eigenpairs(
            K,
            k,
            need_smallest=not spec.known_psd,
            seed=self.random_state,
            solver=self.eigen_solver,
            tol=self.tol,
            max_iter=self.max_iter,
        )
        lam, _ = clip_psd_eigenvalues(
            lam,
            size=n,
            kernel=spec,
            what="the centred kernel matrix",
            smallest=smallest,
            stacklevel=4,
        )
        # scikit-learn also zeroes eigenvalues below 1e-12 of the largest
        lam[lam < 1e-12 * lam.max()] = 0.0
        alphas = alphas * component_signs(alphas, axis=0)
        order = np.argsort(lam)[::-1]
        lam, alphas = lam[order], alphas[:, order]
        if self.n_components is None or self.remove_zero_eig:
            alphas, lam = alphas[:, lam > 0], lam[lam > 0]
        self.eigenvalues_ = lam
        self.explained_variance_ratio_ = _share(lam, total)
        self.eigenvectors_ = np.ascontiguousarray(alphas)
        self.X_fit_ = X
        coef = np.zeros_like(alphas)
        nz = lam > 0
        coef[:, nz] = alphas[:, nz] / np.sqrt(lam[nz])
        colsum = coef.sum(axis=0)
        self.projection_ = coef
        self.projection_row_mean_ = colsum
        self.projection_offset_ = fit_rows @ coef - fit_all * colsum

    def _fit_nystrom(self, rows: Any) -> None:
        spec = self._kernel_spec
        rng = np.random.default_rng(self.random_state)
        m = min(self.n_landmarks, rows.shape[0])  # auto may get here with n_landmarks > n
        passes = Passes(logger, "KernelPCA (Nystrom)", total=2)
        passes.start(f"2 passes: {m} landmarks ({self.landmarks}), then the mapped moments")
        with passes.step("landmarks drawn"):
            L = select_landmarks(rows.data, m, self.landmarks, rng)  # pass 1
        fmap = fit_nystrom(L, spec, stacklevel=4)
        # pass 2; the map (m x d landmarks, m x r normalisation) is one key of the graph,
        # not a copy in every block task
        with passes.step("moments of the mapped rows"):
            mom = compute(NystromMoments.spec(feature_map=fmap), rows.data)
        r = fmap.n_features_out
        k = r if self.n_components is None else min(r, self.n_components)
        lam, V = linalg.eigh(mom.scatter, subset_by_index=(r - k, r - 1))
        lam, V = lam[::-1], V[:, ::-1]
        lam = np.where(lam > max(lam.max(), 0) * r * np.finfo(float).eps, lam, 0.0)
        if self.n_components is None or self.remove_zero_eig:
            V, lam = V[:, lam > 0], lam[lam > 0]
        else:
            # as exact: min(n_components, n) components, those beyond the rank r of the
            # Nystrom features with eigenvalue 0 and zero scores
            extra = min(self.n_components, rows.shape[0]) - k
            if extra > 0:
                lam = np.concatenate([lam, np.zeros(extra)])
                V = np.hstack([V, np.zeros((r, extra))])
        coef = fmap.normalization @ V
        signs = component_signs(coef, axis=0)
        V, coef = V * signs, coef * signs
        self.eigenvalues_ = lam
        self.explained_variance_ratio_ = _share(lam, float(np.trace(mom.scatter)))
        self.landmarks_ = fmap.landmarks
        self.components_ = np.ascontiguousarray(V.T)
        self.feature_mean_ = mom.mean
        self.projection_ = np.ascontiguousarray(coef)
        self.projection_offset_ = mom.mean @ V
        self.projection_row_mean_ = None
        self.n_landmarks_ = int(L.shape[0])
        self.nystrom_rank_ = int(r)

    def _centres(self) -> np.ndarray:
        return self.X_fit_ if self.method_ == "exact" else self.landmarks_

    def _fit_preimage(self) -> None:
        """Kernel ridge regression from scores to inputs on the exact rows or the landmarks."""
        centres = self._centres()
        if self.method_ == "exact":
            scores = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
        else:
            scores = kernel_scores(
                centres, centres, self.projection_, self.projection_offset_, self._kernel_spec
            )
        K = pairwise_kernel(scores, None, self._kernel_spec)
        K.flat[:: K.shape[0] + 1] += self.alpha
        self.dual_coef_ = linalg.solve(K, centres, assume_a="pos", overwrite_a=True)
        self.X_transformed_fit_ = scores

    # ---------------------------------------------------------------- transform
    def _spec(self) -> KernelSpec:
        spec = getattr(self, "_kernel_spec", None)
        if spec is None:  # after load(): rebuild from the parameters
            spec = make_kernel(
                self.kernel,
                gamma=self.gamma_,
                degree=self.degree,
                coef0=self.coef0,
                n_features=self.n_features_in_,
                kernel_params=self.kernel_params,
            )
            self._kernel_spec = spec
        return spec

    def _projection(self, rows: Rows) -> Blockwise:
        """The kernel scores of the rows against the exact rows or the landmarks."""
        packed = (
            self._centres(),
            self.projection_,
            self.projection_offset_,
            self._spec(),
            self.projection_row_mean_,
        )
        return Blockwise(
            _packed_scores,
            (packed,),
            np.float64,
            "kernel_pca_transform",
            check="input",
            coords=False,
        )

    def inverse_transform(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Map scores back to the input space with the learned pre-image, blockwise.

        As in scikit-learn, the pre-image is a kernel ridge regression without intercept
        from the training scores to the training rows (``fit_inverse_transform=True``).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_components)
            Scores, e.g. the output of :meth:`transform`.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        ndarray, dask array or DataArray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        if not hasattr(self, "dual_coef_"):
            raise ValueError(
                f"{type(self).__name__}: inverse_transform needs fit_inverse_transform=True "
                "at fit time (the pre-image map is learned during fit)"
            )
        rows = self._component_rows(X, sample_dim=sample_dim)
        packed = (self.X_transformed_fit_, self.dual_coef_, self._spec())
        block = Blockwise(_preimage, (packed,), np.float64, "kernel_pca_preimage", units=1)
        return self._reconstruct(rows, block)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
