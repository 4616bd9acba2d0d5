"""The Nystroem kernel feature map, with scikit-learn's names, landmarks drawn out of core.

With m landmark rows L drawn from the data, ``phi(x) = k(x, L) K_LL^{+1/2}`` (m columns), so
that ``phi(x)^T phi(y) = k(x, L) K_LL^+ k(L, y)``: the kernel is exact between any row and a
landmark and approximated elsewhere; with every row a landmark the features reproduce the
kernel matrix of the data. It is the *modular method* of seed 004: the rows mapped to
vectors whose inner products are the kernel's, then any linear method on them (kernel CCA =
``Nystroem`` on each view + ``CCA(reg=...)``, kernel FDA = ``Nystroem`` +
``LinearDiscriminantAnalysis``).

The landmarks, the eigensystem of ``K_LL`` (tiny eigenvalues dropped, negative ones clipped
with a warning) and the blockwise map are :mod:`ddr.linalg.nystrom`'s, the code of
:class:`~ddr.KernelPCA`'s Nystrom method.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE, FitPlan, InvalidParameterError, fit_context
from ddr.families import Blockwise, ComponentTransformer
from ddr.kernel_approximation._features import feature_map, nystroem_block
from ddr.linalg.kernels import KERNELS, KernelSpec, make_kernel
from ddr.linalg.nystrom import fit_nystrom, lazy_rows
from ddr.stats._input import Rows
from ddr.tags import DDRTags, fixed_passes, moments_pass, n_components_limit

__all__ = ["Nystroem"]


class Nystroem(ComponentTransformer, BaseEstimator):
    """Approximate a kernel map with m landmark rows (the Nystroem method), out of core.

    Parameters
    ----------
    kernel : {"linear", "poly", "polynomial", "rbf", "laplacian", "sigmoid", "cosine"} or \
callable, default="rbf"
        Kernel, with scikit-learn's formulas (:mod:`ddr.linalg.kernels`; ``"polynomial"`` is
        ``"poly"``, as in scikit-learn). A callable is ``kernel(X, Y, **kernel_params) ->
        (n_x, n_y) ndarray`` evaluated on blocks.
    gamma : float or None, default=None
        Coefficient of rbf, laplacian, poly and sigmoid; None means ``1 / n_features``.
    coef0 : float or None, default=None
        Independent term of poly and sigmoid; None means 1.
    degree : float or None, default=None
        Degree of poly; None means 3.
    kernel_params : dict or None, default=None
        Keyword arguments of a callable kernel.
    n_components : int, default=100
        Number m of landmarks, and of output features. Above the number of rows it is set
        to it, with a warning (as scikit-learn).
    random_state : int or None, default=0
        Seed of the landmark draw, scikit-learn's: the rows ``permutation(n)[:m]`` of
        ``RandomState(random_state)``, so the same seed picks the same landmarks as
        scikit-learn's ``Nystroem``. None draws different landmarks at every fit.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The landmark rows.
    component_indices_ : ndarray of shape (n_components,)
        Their indices in the training data.
    normalization_ : ndarray of shape (n_components, n_components)
        ``K_LL^{+1/2}``: the inverse square root of the landmarks' kernel matrix on its
        numerically positive part. Features are ``k(X, components_) @ normalization_.T``.
    gamma_ : float
        The kernel coefficient used.
    n_components_, n_features_in_ : int

    Notes
    -----
    ``fit`` reads only the landmark rows (for dask input only the chunks that hold them: at
    most one pass); ``transform`` is blockwise and lazy for dask input: the kernel as one
    GEMM and an elementwise map, then the product with ``normalization_``, a cache-sized tile
    of rows at a time (``ddr.kernel_approximation._features``). Float32 rows give float32
    features (as scikit-learn's), computed in float32 for the rbf kernel (errors against the
    float64 features of the same rows about those of scikit-learn's float32 features) and in
    float64 for the others. Where scikit-learn
    floors the eigenvalues of ``K_LL`` at 1e-12 (and amplifies rounding along the null
    directions by 10^6), ddr drops those below ``max * m * eps``; a kernel that is not
    positive semi-definite on the landmarks (sigmoid, some callables) has its negative
    eigenvalues clipped with a :class:`~ddr.linalg.kernels.KernelNotPSDWarning`.
    """

    def __init__(
        self,
        kernel: Any = "rbf",
        *,
        gamma: float | None = None,
        coef0: float | None = None,
        degree: float | None = None,
        kernel_params: dict | None = None,
        n_components: int = 100,
        random_state: int | None = 0,
    ) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.random_state = random_state

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "kernel": [StrOptions(set(KERNELS) | {"polynomial"}), callable],
        "gamma": [Interval(Real, 0, None, closed="neither"), None],
        "coef0": [Interval(Real, None, None, closed="neither"), None],
        "degree": [Interval(Real, 0, None, closed="left"), None],
        "kernel_params": [dict, None],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": [Interval(Integral, 0, 2**32 - 1, closed="both"), None],
    }

    def _check_param_combination(self) -> None:
        if self.kernel_params and isinstance(self.kernel, str):
            raise InvalidParameterError(
                "The 'kernel_params' parameter of Nystroem is passed to a callable kernel "
                f"only; kernel={self.kernel!r} takes gamma/degree/coef0. Got "
                f"{self.kernel_params!r} instead."
            )

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = fixed_passes(1)  # at most: the chunks holding the landmark rows
        # (what the memory check has always been told; the pass holds the landmark rows)
        tags.fit.statistics = moments_pass
        assert tags.transformer is not None
        tags.transformer.width = self._width
        tags.transformer.component_prefix = "NY"
        tags.transformer.n_components_limit = n_components_limit("n_samples")
        if self.kernel in ("rbf", "laplacian"):
            tags.translation_invariant = "transform"
        tags.xarray_dims = {"components_": ("landmark", FEATURE)}
        tags.xarray_units = {"components_": 1}  # rows of the data (the kernel features: none)
        return tags

    def _width(self, n_samples: Any, n_features: Any) -> int:
        """``n_components`` landmarks, or every row when there are fewer."""
        m = int(self.n_components)
        return min(m, n_samples) if n_samples else m

    # ---------------------------------------------------------------------- fit
    def _kernel(self, n_features: int, gamma: float | None) -> KernelSpec:
        return make_kernel(
            "poly" if self.kernel == "polynomial" else self.kernel,
            gamma=gamma,
            degree=3 if self.degree is None else self.degree,
            coef0=1.0 if self.coef0 is None else self.coef0,
            n_features=n_features,
            kernel_params=self.kernel_params,
            owner=type(self).__name__,
        )

    @fit_context
    def fit(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Nystroem:
        """Draw the landmarks and build the feature map.

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
        return self._fit_plan(X, y, sample_dim=sample_dim).run()

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan:
        """The fit as one lazy read of the landmark rows and the map built from them."""
        rows = self._rows(X, reset=True, sample_dim=fit_params.get("sample_dim"))
        n = rows.shape[0]
        m = int(self.n_components)
        if m > n:
            warnings.warn(
                f"Nystroem: n_components={m} > n_samples={n}; n_components was set to "
                f"n_samples={n} (every row a landmark: the features then reproduce the kernel "
                "matrix of the data, at the cost of evaluating the full kernel)",
                UserWarning,
                stacklevel=4,
            )
            m = n
        spec = self._kernel(rows.shape[1], self.gamma)
        indices = check_random_state(self.random_state).permutation(n)[:m]
        selection, landmark_rows = lazy_rows(rows.data, indices)

        def finish(value: Any) -> Nystroem:
            fmap = fit_nystrom(landmark_rows(value), spec, stacklevel=5).symmetric()
            self.components_ = fmap.landmarks
            self.component_indices_ = indices
            self.normalization_ = fmap.normalization
            self.gamma_ = spec.gamma
            self.n_components_ = m
            return self

        return FitPlan.over(rows, selection, finish)

    # ---------------------------------------------------------------- transform
    def _projection(self, rows: Rows) -> Blockwise:
        """The features ``k(X, components_) @ normalization_.T``, in float32 for float32 rows
        (``ddr.kernel_approximation._features``)."""
        spec = self._kernel(self.n_features_in_, self.gamma_)
        fmap = feature_map(self.components_, self.normalization_, spec, rows.data.dtype)
        return Blockwise(
            nystroem_block, fmap.args, fmap.out_dtype, "nystroem_transform", check="input",
            coords=False,
        )  # fmt: skip

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
