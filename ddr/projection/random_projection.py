"""Random projections: Gaussian and sparse (Achlioptas; Li, Hastie and Church), and the
Johnson-Lindenstrauss bound.

A random projection needs no pass over the data to fit: only the shape of X is read (for
``n_components="auto"``, the number of samples). The projection matrix is drawn on the client
from ``random_state`` exactly as scikit-learn draws it (the same calls in the same order on
``check_random_state(random_state)``), so for the same seed ddr and scikit-learn produce the
same matrix, bit for bit. The transform ``X @ components_.T`` is blockwise: numpy in, numpy
out; dask in, lazy dask out; DataArray in, DataArray out with a ``component`` dim.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from sklearn.base import BaseEstimator
from sklearn.exceptions import DataDimensionalityWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.random import sample_without_replacement

from ddr.base import FEATURE, fit_context
from ddr.families import Blockwise, LinearProjection, out_dtype
from ddr.stats._input import Rows
from ddr.tags import DDRTags, no_statistics, unknown_passes

__all__ = ["GaussianRandomProjection", "SparseRandomProjection", "johnson_lindenstrauss_min_dim"]


def johnson_lindenstrauss_min_dim(n_samples: Any, *, eps: Any = 0.1) -> Any:
    """A number of components that keeps pairwise distances within ``1 +- eps``.

    ``n_components >= 4 log(n_samples) / (eps^2 / 2 - eps^3 / 3)`` (Dasgupta and Gupta 1999),
    identical to :func:`sklearn.random_projection.johnson_lindenstrauss_min_dim`.

    Parameters
    ----------
    n_samples : int or array-like of int
        Number of samples, > 0.
    eps : float or array-like of float, default=0.1
        Maximum distortion, in (0, 1).

    Returns
    -------
    n_components : numpy int64 or ndarray of int64
    """
    eps = np.asarray(eps)
    n_samples = np.asarray(n_samples)
    if eps.dtype.kind not in "iuf" or n_samples.dtype.kind not in "iuf":
        raise TypeError(
            "johnson_lindenstrauss_min_dim: n_samples and eps must be numbers or arrays of "
            f"numbers; got n_samples={n_samples!r}, eps={eps!r}"
        )
    if np.any(eps <= 0.0) or np.any(eps >= 1):
        raise ValueError(f"The JL bound is defined for eps in ]0, 1[, got {eps!r}")
    if np.any(n_samples <= 0):
        raise ValueError(
            f"The JL bound is defined for n_samples greater than zero, got {n_samples!r}"
        )
    denominator = (eps**2 / 2) - (eps**3 / 3)
    return (4 * np.log(n_samples) / denominator).astype(np.int64)


def gaussian_random_matrix(n_components: int, n_features: int, random_state: Any) -> np.ndarray:
    """Dense (n_components, n_features) matrix with entries N(0, 1 / n_components)."""
    rng = check_random_state(random_state)
    return rng.normal(loc=0.0, scale=1.0 / np.sqrt(n_components), size=(n_components, n_features))


def sparse_random_matrix(
    n_components: int, n_features: int, density: float, random_state: Any
) -> Any:
    """Sparse sign matrix: ``+-sqrt(1 / density) / sqrt(n_components)`` with probability
    ``density / 2`` each, 0 otherwise; CSR (dense when ``density == 1``)."""
    rng = check_random_state(random_state)
    if density == 1:
        signs = rng.binomial(1, 0.5, (n_components, n_features)) * 2 - 1
        return 1 / np.sqrt(n_components) * signs
    indices = []
    offset = 0
    indptr = [offset]
    for _ in range(n_components):
        n_nonzero = rng.binomial(n_features, density)
        indices.append(sample_without_replacement(n_features, n_nonzero, random_state=rng))
        offset += n_nonzero
        indptr.append(offset)
    idx = np.concatenate(indices)
    data = rng.binomial(1, 0.5, size=np.size(idx)) * 2 - 1
    comps = sp.csr_matrix((data, idx, indptr), shape=(n_components, n_features))
    return np.sqrt(1 / density) / np.sqrt(n_components) * comps


# ------------------------------------------------------------------ blockwise functions
def _project_block(X: np.ndarray, components: Any, dtype: Any) -> np.ndarray:
    """``X @ components.T`` for one block (dense or sparse components)."""
    return np.asarray(safe_sparse_dot(X, components.T, dense_output=True), dtype=dtype)


def _inverse_block(X: np.ndarray, inverse_components: np.ndarray, dtype: Any) -> np.ndarray:
    return np.asarray(X @ inverse_components.T, dtype=dtype)


class _BaseRandomProjection(LinearProjection, BaseEstimator):
    """Fit from the shape alone, blockwise transform, pseudo-inverse for inverse_transform."""

    _abstract_estimator = True
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "eps": [Interval(Real, 0, None, closed="neither")],
        "compute_inverse_components": ["boolean"],
        "random_state": ["random_state"],
    }

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        # fit reads only the shape of X: no pass, no statistic (the plan counts it unknown)
        tags.fit.passes = unknown_passes
        tags.fit.statistics = no_statistics
        assert tags.transformer is not None
        if self.n_components == "auto":
            tags.transformer.width = self._auto_width
        tags.transformer.component_prefix = "RP"
        tags.checks.params = {"n_components": 2, "random_state": 0}  # JL's width is too wide
        return tags

    def _auto_width(self, n_samples: Any, n_features: Any) -> int | None:
        """The Johnson-Lindenstrauss width of ``n_components="auto"``."""
        eps = self.eps
        if not n_samples or not 0 < eps < 1:
            return None
        return int(johnson_lindenstrauss_min_dim(n_samples, eps=eps))

    @fit_context
    def fit(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Any:
        """Draw the projection matrix; only the shape of X is used (no pass over the data).

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
        n_samples, n_features = rows.shape
        if self.n_components == "auto":
            if np.isnan(n_samples):
                raise ValueError(
                    "n_components='auto' needs the number of samples, but X has unknown chunk "
                    "sizes; call X.compute_chunk_sizes() or give an int n_components"
                )
            k = int(johnson_lindenstrauss_min_dim(n_samples=n_samples, eps=self.eps))
            if k <= 0:
                raise ValueError(
                    f"eps={self.eps:f} and n_samples={n_samples} lead to a target dimension of "
                    f"{k} which is invalid"
                )
            if k > n_features:
                raise ValueError(
                    f"eps={self.eps:f} and n_samples={n_samples} lead to a target dimension of "
                    f"{k} which is larger than the original space with n_features={n_features}"
                )
        else:
            k = int(self.n_components)
            if k > n_features:
                warnings.warn(
                    "The number of components is higher than the number of features: "
                    f"n_features < n_components ({n_features} < {k}). The dimensionality of the "
                    "problem will not be reduced.",
                    DataDimensionalityWarning,
                    stacklevel=2,
                )
        self.n_components_ = k
        dtype = out_dtype(rows.data.dtype)
        comps = self._make_random_matrix(k, n_features)  # type: ignore[attr-defined]
        self.components_ = comps.astype(dtype, copy=False)
        if self.compute_inverse_components:
            self.inverse_components_ = self._inverse_components()
        return self

    def _inverse_components(self) -> np.ndarray:
        comps = self.components_
        if sp.issparse(comps):
            comps = comps.toarray()
        return linalg.pinv(comps, check_finite=False)

    def _projection(self, rows: Rows) -> Blockwise:
        """``X @ components_.T`` (dense or sparse components)."""
        dtype = np.result_type(out_dtype(rows.data.dtype), self.components_.dtype)
        name = f"{type(self).__name__.lower()}-transform"
        return Blockwise(_project_block, (self.components_, dtype), dtype, name, units=1)

    def _reconstruction(self, rows: Rows) -> Blockwise:
        """Through the pseudo-inverse of ``components_`` (stored at fit, or computed now)."""
        inverse = (
            self.inverse_components_
            if self.compute_inverse_components
            else self._inverse_components()
        )
        dtype = np.result_type(out_dtype(rows.data.dtype), inverse.dtype)
        name = f"{type(self).__name__.lower()}-inverse-transform"
        return Blockwise(_inverse_block, (inverse, dtype), dtype, name, units=1)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class GaussianRandomProjection(_BaseRandomProjection):
    """Project onto ``n_components`` random Gaussian directions, N(0, 1 / n_components).

    Parameters
    ----------
    n_components : int or "auto", default="auto"
        Target dimension; "auto" uses :func:`johnson_lindenstrauss_min_dim` with ``eps``
        and the number of samples of X.
    eps : float, default=0.1
        Distortion for ``n_components="auto"``, in (0, 1).
    compute_inverse_components : bool, default=False
        Store the pseudo-inverse of ``components_`` at fit for ``inverse_transform``.
    random_state : int, RandomState or None, default=None
        Seed of the matrix; the same seed gives the same matrix as scikit-learn.

    Attributes
    ----------
    n_components_ : int
    components_ : ndarray of shape (n_components, n_features)
        The projection matrix, in X's float dtype (float64 for integer X).
    inverse_components_ : ndarray of shape (n_features, n_components)
        With ``compute_inverse_components=True``.
    n_features_in_ : int

    Notes
    -----
    Passes over the data: ``fit`` 0 (only the shape is read), ``transform`` none until
    computed (blockwise, lazy for dask input). The dense matrix takes
    ``8 n_components n_features`` bytes on the client and is shipped to every worker with
    the transform tasks: for very wide data prefer :class:`SparseRandomProjection`.
    """

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.xarray_dims = {"components_": ("component", FEATURE)}
        tags.xarray_units = {"components_": 0}  # numbers drawn at random
        return tags

    def __init__(
        self,
        n_components: int | str = "auto",
        *,
        eps: float = 0.1,
        compute_inverse_components: bool = False,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.eps = eps
        self.compute_inverse_components = compute_inverse_components
        self.random_state = random_state

    def _make_random_matrix(self, n_components: int, n_features: int) -> np.ndarray:
        return gaussian_random_matrix(n_components, n_features, self.random_state)


class SparseRandomProjection(_BaseRandomProjection):
    """Project with a sparse random sign matrix (Achlioptas 2001; Li, Hastie and Church 2006).

    Entries are ``+-sqrt(1 / density) / sqrt(n_components)`` with probability ``density / 2``
    each and 0 otherwise.

    Parameters
    ----------
    n_components : int or "auto", default="auto"
        As for :class:`GaussianRandomProjection`.
    density : float in (0, 1] or "auto", default="auto"
        Fraction of non-zeros; "auto" is ``1 / sqrt(n_features)`` (Li et al.); 1/3 gives
        Achlioptas' matrix.
    eps : float, default=0.1
    dense_output : bool, default=False
        Accepted for scikit-learn compatibility; ddr takes dense input only, so the output is
        always dense.
    compute_inverse_components : bool, default=False
    random_state : int, RandomState or None, default=None
        The same seed gives the same matrix as scikit-learn.

    Attributes
    ----------
    n_components_ : int
    components_ : scipy.sparse.csr_matrix of shape (n_components, n_features)
        (a dense ndarray when ``density == 1``), in X's float dtype.
    density_ : float
    inverse_components_ : ndarray of shape (n_features, n_components)
    n_features_in_ : int

    Notes
    -----
    Passes over the data: ``fit`` 0, ``transform`` blockwise. Saved models store the CSR
    arrays of ``components_`` (``_get_state``/``_set_state``).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **_BaseRandomProjection._parameter_constraints,
        "density": [Interval(Real, 0.0, 1.0, closed="right"), StrOptions({"auto"})],
        "dense_output": ["boolean"],
    }

    def __init__(
        self,
        n_components: int | str = "auto",
        *,
        density: float | str = "auto",
        eps: float = 0.1,
        dense_output: bool = False,
        compute_inverse_components: bool = False,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.density = density
        self.eps = eps
        self.dense_output = dense_output
        self.compute_inverse_components = compute_inverse_components
        self.random_state = random_state

    def _make_random_matrix(self, n_components: int, n_features: int) -> Any:
        self.density_ = 1 / np.sqrt(n_features) if self.density == "auto" else float(self.density)
        return sparse_random_matrix(n_components, n_features, self.density_, self.random_state)

    # persistence: a CSR matrix is stored as its three arrays
    def _get_state(self) -> dict[str, Any]:
        params = self.get_params(deep=False)
        state = {k: v for k, v in vars(self).items() if k not in params}
        comps = state.pop("components_", None)
        if comps is not None and sp.issparse(comps):
            csr = sp.csr_matrix(comps)
            state["components_csr_"] = {
                "data": csr.data,
                "indices": csr.indices,
                "indptr": csr.indptr,
                "shape": list(csr.shape),
            }
        elif comps is not None:
            state["components_"] = comps
        return state

    def _set_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        csr = state.pop("components_csr_", None)
        for k, v in state.items():
            setattr(self, k, v)
        if csr is not None:
            self.components_ = sp.csr_matrix(
                (np.asarray(csr["data"]), np.asarray(csr["indices"]), np.asarray(csr["indptr"])),
                shape=tuple(int(s) for s in csr["shape"]),
            )
