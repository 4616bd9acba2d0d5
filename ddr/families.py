"""Family bases: what estimators of one kind share, written once.

- :class:`ComponentTransformer`: ``transform`` to ``n_components_`` columns on a
  ``component`` dim, blockwise (PCA, TruncatedSVD, random projections, KernelPCA, Nystroem,
  PLSA, PPCA and factor analysis); :class:`LinearProjection` adds ``inverse_transform``
  back to the features through the components (PCA, TruncatedSVD, random projections).
- :class:`SameWidthTransformer`: a transform that keeps the input's features, dims and
  coordinates (StandardScaler).
- :class:`LogLikelihoodScore`: ``score`` as the mean of ``score_samples`` (PCA, PPCA, factor
  analysis, the Gaussian, categorical and kernel densities).

Each family fixes the plumbing (validation, ``ddr.base.map_rows`` with the output's
width, dim, coordinates, dask key and the method named in messages) and asks the estimator
for its blockwise function as a :class:`Blockwise`. A family base declares the tags its
kind shares (a component transformer's output width is an int ``n_components``; a
same-width transformer's is ``n_features``); estimators add theirs.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np
from sklearn.base import (
    ClassNamePrefixFeaturesOutMixin,
    OneToOneFeatureMixin,
    TransformerMixin,
)

from ddr.base import DDRMixin, RowCheck, map_rows
from ddr.stats._input import Rows, is_dask, is_xarray
from ddr.tags import DDRTags, n_components_width

__all__ = [
    "Blockwise",
    "ComponentTransformer",
    "FitThenTransform",
    "LinearProjection",
    "LogLikelihoodScore",
    "SameWidthTransformer",
    "out_dtype",
]


def out_dtype(dtype: Any) -> np.dtype:
    """The float dtype an output keeps: float32 and float64 stay, anything else is float64.

    Parameters
    ----------
    dtype : dtype
        The input's.

    Returns
    -------
    numpy.dtype
    """
    dtype = np.dtype(dtype)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


@dataclasses.dataclass(frozen=True)
class Blockwise:
    """A blockwise function with its fitted arrays: what a family base maps over the rows.

    Parameters
    ----------
    fn : callable
        ``fn(block, *args)``, a module-level function (it is shipped to dask workers).
    args : tuple
        The small fitted arrays it takes.
    dtype : dtype
        Its output dtype.
    name : str
        Prefix of the dask keys (and the name of a DataArray output).
    check : {"output", "input", None}, default "output"
        What ``ddr.base.map_rows`` checks in each block.
    coords : bool, default True
        Give the ``component`` dim of the output the coordinate ``0 .. k-1``.
    allow_nan : bool, default False
        NaN in the rows is accepted (missing values the method handles).
    hint : str, default ""
        Said after a refusal of NaN (what to use instead).
    units : int or None, default None
        The power of the fitted data's units the output is in (1: the data's units, 0:
        dimensionless; ``ddr.stats._units``), its ``units`` attribute when the data had
        units; None: not stated.
    """

    fn: Callable[..., np.ndarray]
    args: tuple[Any, ...]
    dtype: Any
    name: str
    check: RowCheck = "output"
    coords: bool = True
    allow_nan: bool = False
    hint: str = ""
    units: int | None = None


# --------------------------------------------------------------- component outputs
class ComponentTransformer(DDRMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, abc.ABC):
    """``transform`` to ``n_components_`` columns, blockwise, in the input's form.

    A subclass gives ``_projection`` (the blockwise map of validated rows) and, where
    its input is not plain rows, ``_transform_rows``. Its output width is an int
    ``n_components`` unless its tags say otherwise.
    """

    _abstract_estimator = True

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        assert tags.transformer is not None
        tags.transformer.width = n_components_width(getattr(self, "n_components", None))
        return tags

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def _transform_rows(self, X: Any, sample_dim: Hashable | None) -> Rows:
        """The validated rows ``transform`` maps (complete, finite rows by default)."""
        return self._rows(X, reset=False, sample_dim=sample_dim)

    @abc.abstractmethod
    def _projection(self, rows: Rows) -> Blockwise:
        """The blockwise map of ``rows`` to their ``n_components_`` columns."""

    def transform(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Map X onto the fitted components, blockwise (lazy for dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            The rows.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        X_new : same kind as X, shape (n_samples, n_components)
            For a DataArray: dims (sample_dim, "component"), the sample coordinate kept.
        """
        rows = self._transform_rows(X, sample_dim)
        return self._project(rows, self._projection(rows))

    def _project(self, rows: Rows, block: Blockwise) -> Any:
        """``block`` over ``rows``: ``n_components_`` columns on a ``component`` dim."""
        k = self.n_components_
        return map_rows(
            rows,
            block.fn,
            n_out=k,
            dtype=block.dtype,
            new_dim="component",
            new_coords=np.arange(k) if block.coords else None,
            name=block.name,
            args=block.args,
            check=block.check,
            allow_nan=block.allow_nan,
            method=f"{type(self).__name__}.transform",
            hint=block.hint,
            units=self._output_units(block.units),
        )

    def _reconstruct(self, rows: Rows, block: Blockwise) -> Any:
        """``block`` over component rows: back to the ``n_features_in_`` features, with the
        training data's feature dim and coordinate."""
        return map_rows(
            rows,
            block.fn,
            n_out=self.n_features_in_,
            dtype=block.dtype,
            new_dim=getattr(self, "feature_dim_", None) or "feature",
            new_coords=getattr(self, "feature_coords_", None),
            name=block.name,
            args=block.args,
            check=block.check,
            method=f"{type(self).__name__}.inverse_transform",
            units=self._output_units(block.units),
        )


class LinearProjection(ComponentTransformer):
    """A :class:`ComponentTransformer` whose ``inverse_transform`` maps scores back to the
    features through the components (``_reconstruction``).
    """

    _abstract_estimator = True

    @abc.abstractmethod
    def _reconstruction(self, rows: Rows) -> Blockwise:
        """The blockwise map of component rows back to the features."""

    def inverse_transform(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Map component scores back to the feature space, blockwise.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_components)
            Scores, e.g. from :meth:`transform`.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        X_original : same kind as X, shape (n_samples, n_features)
            A DataArray has the training data's feature dim and coordinate.
        """
        rows = self._component_rows(X, sample_dim=sample_dim)
        return self._reconstruct(rows, self._reconstruction(rows))


class FitThenTransform(TransformerMixin):
    """``fit_transform`` as ``fit`` then ``transform``, both given ``sample_dim``."""

    def fit_transform(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Any:
        """Fit, then transform X (the fit reads the data; the transform is lazy for dask).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            The rows.
        y : None
            Ignored (scikit-learn's signature).
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        X_new : same kind as X, shape (n_samples, n_components)
        """
        return self.fit(X, sample_dim=sample_dim).transform(X, sample_dim=sample_dim)  # type: ignore[attr-defined]


# --------------------------------------------------------------- same-width outputs
def _saved_n_features(state: Mapping[str, Any]) -> int | None:
    n = state.get("n_features_in_")
    return n if isinstance(n, int) else None


def _input_width(n_samples: Any, n_features: Any) -> Any:
    return n_features


class SameWidthTransformer(DDRMixin, OneToOneFeatureMixin, TransformerMixin, abc.ABC):
    """A transform (and its inverse) that keeps the features: the output has the input's
    width, feature dim and feature coordinate.

    A subclass gives ``_forward`` and ``_backward``, the blockwise maps of
    validated rows; NaN passes through where scikit-learn's ``input_tags.allow_nan`` says
    the estimator takes it.
    """

    _abstract_estimator = True

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        assert tags.transformer is not None
        tags.transformer.width = _input_width
        tags.transformer.saved_width = _saved_n_features
        return tags

    @abc.abstractmethod
    def _forward(self, rows: Rows) -> Blockwise:
        """The blockwise map of rows to their transform."""

    @abc.abstractmethod
    def _backward(self, rows: Rows) -> Blockwise:
        """The blockwise map of transformed rows back to the input."""

    def _nan_ok(self) -> bool:
        return bool(self.__sklearn_tags__().input_tags.allow_nan)  # type: ignore[attr-defined]

    def transform(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Transform X blockwise (lazy for dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            The rows.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        X_tr : same kind and shape as X
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim, allow_nan=self._nan_ok())
        return self._same_width(rows, self._forward(rows), "transform")

    def inverse_transform(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Undo :meth:`transform` blockwise.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            Transformed rows.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        X_original : same kind and shape as X
        """
        rows = self._component_rows(
            X, sample_dim=sample_dim, n_features=self.n_features_in_, allow_nan=self._nan_ok()
        )
        return self._same_width(rows, self._backward(rows), "inverse_transform")

    def _same_width(self, rows: Rows, block: Blockwise, method: str) -> Any:
        return map_rows(
            rows,
            block.fn,
            n_out=self.n_features_in_,
            dtype=block.dtype,
            new_dim=rows.feature_dim,
            new_coords=_feature_coords(rows),
            name=block.name,
            args=block.args,
            check=block.check,
            allow_nan=block.allow_nan,
            method=f"{type(self).__name__}.{method}",
            units=self._output_units(block.units),
        )


def _feature_coords(rows: Rows) -> Any:
    if rows.kind != "xarray" or rows.feature_dim not in rows.template.coords:
        return None
    return rows.template.coords[rows.feature_dim].values


# ------------------------------------------------------------------------ densities
class LogLikelihoodScore:
    """``score`` from ``score_samples``: the mean log-likelihood per row (one pass over dask
    input).
    """

    def _log_likelihoods(self, X: Any, sample_dim: Hashable | None) -> Any:
        s = self.score_samples(X, sample_dim=sample_dim)  # type: ignore[attr-defined]
        return s.data if is_xarray(s) else s

    def _total_log_likelihood(self, X: Any, sample_dim: Hashable | None) -> tuple[float, int]:
        """The sum of ``score_samples`` over the rows of X, and their number."""
        s = self._log_likelihoods(X, sample_dim)
        return float(s.sum().compute() if is_dask(s) else np.sum(s)), s.shape[0]

    def score(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> float:
        """Mean log-likelihood per sample (computes for dask input).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features)
            The rows to score: one pass over them.
        y : None
            Not used; there for scikit-learn's ``score(X, y)``.
        sample_dim : hashable, optional
            The sample dim of a DataArray X; by default its first dim.

        Returns
        -------
        float
            The mean over the rows of ``score_samples``.
        """
        s = self._log_likelihoods(X, sample_dim)
        return float(s.mean().compute() if is_dask(s) else np.mean(s))
