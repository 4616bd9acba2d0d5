"""Kernel functions on row blocks, with scikit-learn's names and parameter conventions.

``pairwise_kernel(X, Y, spec)`` evaluates ``k(x_i, y_j)`` for two in-memory blocks in float64.
The kernels and their parameters are scikit-learn's (:func:`sklearn.metrics.pairwise_kernels`):

=============  ==========================================  =====================
kernel         k(x, y)                                     parameters
=============  ==========================================  =====================
``linear``     ``<x, y>``                                  -
``poly``       ``(gamma <x, y> + coef0) ** degree``        gamma, degree, coef0
``rbf``        ``exp(-gamma ||x - y||^2)``                 gamma
``laplacian``  ``exp(-gamma ||x - y||_1)``                 gamma
``sigmoid``    ``tanh(gamma <x, y> + coef0)``              gamma, coef0
``cosine``     ``<x, y> / (||x|| ||y||)``                  -
callable       ``kernel(X, Y, **kernel_params)``           kernel_params
=============  ==========================================  =====================

``gamma=None`` means ``1 / n_features``. A callable takes two 2-D float64 blocks and returns
the (n_x, n_y) matrix at once (vectorised, unlike scikit-learn's per-pair callables: the
kernel is evaluated blockwise on large data, where a Python call per pair would be far too
slow). It must be a positive semi-definite kernel; where it is not, the eigendecompositions
that use it clip the negative part and say so with :class:`KernelNotPSDWarning`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.spatial.distance import cdist

__all__ = [
    "KERNELS",
    "KernelNotPSDWarning",
    "KernelSpec",
    "make_kernel",
    "pairwise_kernel",
]

#: Named kernels, and which of gamma / degree / coef0 each one uses.
KERNELS: dict[str, tuple[str, ...]] = {
    "linear": (),
    "poly": ("gamma", "degree", "coef0"),
    "rbf": ("gamma",),
    "laplacian": ("gamma",),
    "sigmoid": ("gamma", "coef0"),
    "cosine": (),
}

# Kernels whose Gram matrices are positive semi-definite for every input; the others
# (sigmoid, callables) are checked where an eigendecomposition sees them.
PSD_KERNELS = frozenset({"linear", "poly", "rbf", "laplacian", "cosine"})


class KernelNotPSDWarning(UserWarning):
    """A kernel matrix had significant negative eigenvalues; they were clipped to zero."""


@dataclasses.dataclass(frozen=True, eq=False)
class KernelSpec:
    """A validated kernel with its resolved parameters (``gamma`` never None here).

    Build with :func:`make_kernel`. Holds only what a worker needs to evaluate the kernel on a
    block, so it can be shipped with the tasks of a dask graph.

    Parameters
    ----------
    kernel : str or callable
        A name in :data:`KERNELS` or a function of two rows.
    gamma : float or None
        Kernel coefficient of the kernels that use it (resolved by :func:`make_kernel`).
    degree : float, default 3
        Degree of ``poly``.
    coef0 : float, default 1.0
        Constant term of ``poly`` and ``sigmoid``.
    kernel_params : tuple of (str, object) pairs
        Keyword arguments of a callable kernel.
    """

    kernel: str | Callable[..., Any]
    gamma: float | None = None
    degree: float = 3
    coef0: float = 1.0
    kernel_params: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return (
            self.kernel
            if isinstance(self.kernel, str)
            else getattr(self.kernel, "__name__", "callable")
        )

    @property
    def known_psd(self) -> bool:
        """Whether the kernel is positive semi-definite by construction."""
        return isinstance(self.kernel, str) and self.kernel in PSD_KERNELS

    def __call__(self, X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
        return pairwise_kernel(X, Y, self)

    def __dask_tokenize__(self) -> Any:
        from dask.base import tokenize

        return (
            "KernelSpec",
            tokenize(self.kernel),
            self.gamma,
            self.degree,
            self.coef0,
            tokenize(self.kernel_params),
        )


def make_kernel(
    kernel: str | Callable[..., Any],
    *,
    gamma: float | None,
    degree: float,
    coef0: float,
    n_features: int,
    kernel_params: Mapping[str, Any] | None = None,
    owner: str = "KernelPCA",
) -> KernelSpec:
    """Validate a kernel and its parameters; resolve ``gamma=None`` to ``1 / n_features``.

    Parameters
    ----------
    kernel : str or callable
        One of :data:`KERNELS` or a callable ``kernel(X, Y, **kernel_params)``.
    gamma : float or None
        Must be positive when given.
    degree : float
        Degree of the ``poly`` kernel; must be non-negative.
    coef0 : float
        Independent term of ``poly`` and ``sigmoid``.
    n_features : int
        Number of input features (for the default gamma).
    kernel_params : mapping, optional
        Extra keyword arguments of a callable kernel.
    owner : str
        Name used in error messages.

    Raises
    ------
    ValueError
        Unknown kernel name, non-positive gamma, negative degree.
    TypeError
        A kernel that is neither a string nor a callable; non-numeric parameters.
    """
    if isinstance(kernel, str):
        if kernel not in KERNELS:
            raise ValueError(
                f"{owner}: kernel must be one of {sorted(KERNELS)} or a callable; got {kernel!r}"
            )
    elif not callable(kernel):
        raise TypeError(
            f"{owner}: kernel must be a string or a callable; got {type(kernel).__name__}"
        )
    if gamma is not None:
        if isinstance(gamma, bool) or not isinstance(gamma, Real):
            raise TypeError(f"{owner}: gamma must be a positive float or None; got {gamma!r}")
        if not np.isfinite(gamma) or gamma <= 0:
            raise ValueError(
                f"{owner}: gamma must be positive (or None for 1/n_features); got gamma={gamma!r}"
            )
    if isinstance(degree, bool) or not isinstance(degree, Real) or not np.isfinite(degree):
        raise TypeError(f"{owner}: degree must be a non-negative number; got {degree!r}")
    if degree < 0:
        raise ValueError(f"{owner}: degree must be non-negative; got degree={degree!r}")
    if isinstance(coef0, bool) or not isinstance(coef0, Real) or not np.isfinite(coef0):
        raise TypeError(f"{owner}: coef0 must be a finite number; got {coef0!r}")
    if kernel_params is not None and not isinstance(kernel_params, Mapping):
        raise TypeError(
            f"{owner}: kernel_params must be a dict or None; got {type(kernel_params).__name__}"
        )
    if kernel_params and isinstance(kernel, str):
        raise ValueError(
            f"{owner}: kernel_params are passed to a callable kernel only; kernel={kernel!r} "
            f"takes gamma/degree/coef0, got kernel_params={dict(kernel_params)!r}"
        )
    g = 1.0 / n_features if gamma is None else float(gamma)
    deg = int(degree) if isinstance(degree, Integral) else float(degree)
    params = tuple(sorted((kernel_params or {}).items()))
    return KernelSpec(kernel, g, deg, float(coef0), params)


def _sq_norms(A: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", A, A)


def pairwise_kernel(X: np.ndarray, Y: np.ndarray | None, spec: KernelSpec) -> np.ndarray:
    """The kernel matrix ``k(x_i, y_j)`` of two blocks, shape (n_x, n_y), float64.

    Parameters
    ----------
    X : ndarray of shape (n_x, n_features)
    Y : ndarray of shape (n_y, n_features) or None
        None means ``Y = X`` (and the rbf diagonal is exactly 1, as in scikit-learn).
    spec : KernelSpec
    """
    same = Y is None
    X = np.asarray(X, dtype=np.float64)
    Y = X if same else np.asarray(Y, dtype=np.float64)
    kernel = spec.kernel
    if callable(kernel):
        K = np.asarray(kernel(X, Y, **dict(spec.kernel_params)), dtype=np.float64)
        if K.shape != (X.shape[0], Y.shape[0]):
            raise ValueError(
                f"kernel callable returned shape {K.shape}; expected ({X.shape[0]}, "
                f"{Y.shape[0]}) for blocks of {X.shape[0]} and {Y.shape[0]} rows"
            )
        return K
    if kernel in ("linear", "poly", "sigmoid"):
        K = X @ Y.T
        if kernel == "poly":
            K *= spec.gamma
            K += spec.coef0
            K **= spec.degree
        elif kernel == "sigmoid":
            K *= spec.gamma
            K += spec.coef0
            np.tanh(K, out=K)
        return K
    if kernel == "rbf":
        # ||x||^2 + ||y||^2 - 2 <x, y>, clipped at 0 (scikit-learn's euclidean_distances), of
        # rows centred on a common point first: distances do not depend on it, and the
        # expansion then cancels no digits when the data sit on a large offset
        shift = Y.mean(axis=0)
        X = X - shift
        Y = X if same else Y - shift
        K = X @ Y.T
        K *= -2.0
        K += _sq_norms(X)[:, None]
        K += _sq_norms(Y)[None, :]
        np.maximum(K, 0.0, out=K)
        if same:
            np.fill_diagonal(K, 0.0)
        K *= -spec.gamma
        np.exp(K, out=K)
        return K
    if kernel == "laplacian":
        K = cdist(X, Y, metric="cityblock")
        K *= -spec.gamma
        np.exp(K, out=K)
        return K
    if kernel == "cosine":
        nx = np.sqrt(_sq_norms(X))
        ny = nx if same else np.sqrt(_sq_norms(Y))
        # zero rows stay zero (scikit-learn's normalize leaves them unchanged)
        nx = np.where(nx == 0, 1.0, nx)
        ny = np.where(ny == 0, 1.0, ny)
        return (X / nx[:, None]) @ (Y / ny[:, None]).T
    raise ValueError(f"unknown kernel {kernel!r}")  # unreachable after make_kernel
