"""What the two-view estimators share: paired inputs, one pass of joint moments, scores.

CCA and PLS-SVD see two views of the same rows, X and Y (passed as ``y``, scikit-learn's
convention for cross decomposition). Both fit from ONE pass of :class:`~ddr.stats.Moments` of
the rows ``[x | y]`` (built block by block; Y is aligned to X's row chunks) and a small solve
on the client, and both map each view to its scores blockwise, ``(x - mean) @ weights``.

Y is read as X is: a DataArray on the sample dims of X (``sample_dims=``, or X's sample dim)
with any number of feature dims is a grid, its masked features (NaN at every sample) left
out (:mod:`ddr.stats._grid`); a Dataset is its variables side by side. Its samples are
aligned to X's by coordinate, on each sample dim. What the fit read of Y's features is kept
as X's is (``y_feature_layout_``, ``y_feature_dim_``, ``y_feature_coords_``,
``y_feature_units_``): ``transform(X, Y)`` reads Y on that grid, with that mask, and
:meth:`TwoViewMixin.as_xarray` gives the attributes of Y's features (their dims declared
with ``Y_FEATURE``) on Y's grid, NaN at Y's mask.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

import dask.array as da
import numpy as np
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from ddr.base import DDRMixin, FitPlan, MergedFitMixin, check_some_weight, fit_context, map_rows
from ddr.stats import Moments, lazy
from ddr.stats._grid import SampleDims
from ddr.stats._grid_out import fitted_dataarray
from ddr.stats._input import Rows, align_by_coordinate, as_rows, is_dask, is_xarray
from ddr.stats._units import data_units, units_of
from ddr.tags import (
    DDRTags,
    always,
    fixed_passes,
    get_ddr_tags,
    moments_pass,
    n_components_width,
    rank_limit,
)

__all__ = ["Y_FEATURE", "TwoViewMixin"]

#: Placeholder for "the feature dim of the second view Y" in ``DDRTags.xarray_dims`` (as
#: :data:`ddr.tags.FEATURE` is X's): ``{"y_weights_": (Y_FEATURE, "component")}``
Y_FEATURE = "__y_feature__"

#: what a fit remembers of Y's features (X's are DDRMixin's ``feature_*_``)
_Y_FACTS = ("y_feature_dim_", "y_feature_coords_", "y_feature_layout_", "y_feature_units_")


def _project(X: np.ndarray, weights: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Scores ``(X - mean) @ weights`` of one block."""
    return np.subtract(X, mean, dtype=np.float64) @ weights


class TwoViewMixin(MergedFitMixin, DDRMixin):
    """Fit and transform of estimators of two paired views.

    A subclass defines ``_check_width(n_samples, dx, dy) -> k`` (the number of pairs of
    directions, or a ValueError), ``_finish(moments, dx, dy, k) -> self`` (the solve on the
    client from the joint Moments of ``[x | y]``), ``_projections()``, the
    ``(weights, mean)`` pairs of X and of Y that map each view to its scores, and
    ``_score_units()``, the power of each view's units its scores are in
    (``ddr.stats._units``).
    """

    _abstract_estimator = True
    _feature_facts: ClassVar[tuple[str, ...]] = (*DDRMixin._feature_facts, *_Y_FACTS)

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = fixed_passes(1)
        # the memory check's estimate: a Moments as wide as X (the pass holds [x | y]'s)
        tags.fit.statistics = moments_pass
        tags.fit.mergeable = always
        assert tags.transformer is not None
        tags.transformer.width = n_components_width(self.n_components)  # type: ignore[attr-defined]
        tags.transformer.n_components_limit = rank_limit
        tags.transformer.component_name = self._component_name
        tags.translation_invariant = "transform"
        return tags

    def _component_name(self, i: int, output: str) -> str:
        """Column ``i`` of the scores of X (``output="data"``) or of Y (``"y_data"``)."""
        view = "Y" if output == "y_data" else "X"
        return f"{view} {self._score_name} {i + 1}"

    def _score_units(self) -> int | None:
        """The power of a view's units its scores are in."""
        raise NotImplementedError

    # ----------------------------------------------------------------- inputs
    def _y_rows(
        self, y: Any, rows: Rows, sample_dim: Hashable | None, *, reset: bool = False
    ) -> Rows:
        """Y as rows paired with X's ``rows``: read as X is (a grid on X's sample dims);
        with ``reset`` (a fit) its features are remembered, else they must be the fitted
        ones (grid, coordinates and mask)."""
        name = type(self).__name__
        if y is None:
            raise ValueError(
                f"{name} requires y to be passed, but the target y is None: call fit(X, Y) with "
                "the second view Y of shape (n_samples, n_features_y)"
            )
        if reset:
            for attr in _Y_FACTS:
                self.__dict__.pop(attr, None)
        if is_xarray(y):
            y = _aligned_samples(y, rows)
        if is_xarray(y):
            fitted = None if reset else getattr(self, "y_feature_layout_", None)
            yr = as_rows(
                y, sample_dim=_y_sample_dims(rows, sample_dim, y), name="Y", fitted=fitted,
                masks=reset or fitted is not None,
            )  # fmt: skip
            if reset:
                self._remember_y(yr)
        elif is_dask(y):
            yr = as_rows(y, name="Y")
        else:
            arr = check_array(y, ensure_2d=False, dtype=(np.float64, np.float32), input_name="Y")
            yr = Rows(arr.reshape(-1, 1) if arr.ndim == 1 else arr, "numpy")
        if yr.shape[0] != rows.shape[0]:
            raise ValueError(
                f"{name}: X has {rows.shape[0]} rows but Y has {yr.shape[0]}; the two views must "
                "describe the same samples (paired rows)"
            )
        return yr

    def _remember_y(self, yr: Rows) -> None:
        """What the fit read of Y's features, as ``DDRMixin`` keeps X's."""
        self.y_feature_dim_ = yr.feature_dim
        self.y_feature_units_ = data_units(yr.template)
        if yr.layout is not None:
            self.y_feature_layout_ = yr.layout
        elif yr.feature_dim in yr.template.coords:
            self.y_feature_coords_ = np.asarray(yr.template.coords[yr.feature_dim].values)

    @staticmethod
    def _joint(rows: Rows, yr: Rows) -> Any:
        """``[X | Y]`` row block by row block (lazy when either view is dask)."""
        if not rows.is_lazy and not yr.is_lazy:
            return np.hstack(
                [np.asarray(rows.data, dtype=np.float64), np.asarray(yr.data, dtype=np.float64)]
            )
        X, Y = rows.data, yr.data
        if not rows.is_lazy:
            X = da.from_array(X, chunks=(Y.chunks[0], -1))
        if not yr.is_lazy:
            Y = da.from_array(Y, chunks=(X.chunks[0], -1))
        if Y.chunks[0] != X.chunks[0]:
            Y = Y.rechunk({0: X.chunks[0]})
        dtype = np.result_type(X.dtype, Y.dtype, np.float32)
        return da.concatenate([X.astype(dtype), Y.astype(dtype)], axis=1).rechunk({1: -1})

    # -------------------------------------------------------------------- fit
    @fit_context
    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, sample_dim: Hashable | None = None
    ) -> Any:
        """Fit from one pass of the joint moments of the paired views.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features_x)
        y : array-like, dask array or DataArray of shape (n_samples, n_features_y)
            The second view Y (1-D is taken as one feature).
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Non-negative frequency weights of the pairs (a weight of 2 gives the model of
            the pair repeated, 0 the model without it).
        sample_dim : hashable, optional
            The sample dim of DataArray inputs.

        Returns
        -------
        self
        """
        return self._fit_plan(X, y, sample_weight=sample_weight, sample_dim=sample_dim).run()

    @fit_context
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan:
        sample_dim = fit_params.get("sample_dim")
        rows = self._rows(X, reset=True, sample_dim=sample_dim)
        # a batch merged by partial_fit has the fitted Y (grid, mask), as it has X
        yr = self._y_rows(y, rows, sample_dim, reset=not self._rows_merged())
        # a partial_fit checks the rows of every batch so far, not of this one
        n, dx, dy = rows.shape[0] + int(self._rows_merged()), rows.shape[1], yr.shape[1]
        if self._rows_merged() and dy != self.n_features_y_:
            raise ValueError(
                f"Y has {dy} features, but {type(self).__name__} was fitted with "
                f"{self.n_features_y_} features in Y"
            )
        self._check_width(n, dx, dy)  # refused before any read; the solve checks the count
        if n < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 samples; got n_samples={n}")
        stats = lazy(Moments, self._joint(rows, yr), None, fit_params.get("sample_weight"))
        return FitPlan.over(rows, stats, lambda m: self._solve_statistics(m))

    def _solve_statistics(self, value: Moments) -> Any:
        check_some_weight(value.count, type(self).__name__)
        dx = self.n_features_in_
        # n_features_y_ is set by the solve: the width of Y is what the moments hold beyond X
        dy = value.n_features - dx
        return self._finish(value, dx, dy, self._check_width(int(value.count), dx, dy))

    # -------------------------------------------------------------- transform
    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def transform(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> Any:
        """Project X (and Y when given) onto the fitted directions, blockwise.

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features_x)
            The first view.
        y : array-like, dask array or DataArray of shape (n_samples, n_features_y), optional
            The second view.
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        x_scores : same form as X, shape (n_samples, ``n_components_``)
            The scores of X.
        y_scores : same form as Y, shape (n_samples, ``n_components_``)
            The scores of Y; only when Y is given. A DataArray Y is read on the fitted
            sample dims and Y's fitted grid and mask: its scores are on the sample dims.
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim)
        (wx, mx), (wy, my) = self._projections()
        prefix = type(self).__name__.lower()
        power = self._score_units()
        xs = map_rows(
            rows,
            _project,
            n_out=self.n_components_,
            dtype=np.float64,
            new_dim="component",
            name=f"{prefix}_x_scores",
            args=(wx, mx),
            check="output",
            method=f"{type(self).__name__}.transform",
            units=self._output_units(power),
        )
        if y is None:
            return xs
        yr = self._y_rows(y, rows, sample_dim)
        if yr.shape[1] != self.n_features_y_:
            raise ValueError(
                f"Y has {yr.shape[1]} features, but {type(self).__name__} was fitted with "
                f"{self.n_features_y_} features in Y"
            )
        ys = map_rows(
            yr,
            _project,
            n_out=self.n_components_,
            dtype=np.float64,
            new_dim="component",
            name=f"{prefix}_y_scores",
            args=(wy, my),
            check="output",
            method=f"{type(self).__name__}.transform",
            units=units_of(power, getattr(self, "y_feature_units_", None)),
        )
        return xs, ys

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit, then return ``(x_scores, y_scores)`` (as scikit-learn's).

        Parameters
        ----------
        X : array-like, dask array or DataArray of shape (n_samples, n_features_x)
            The first view.
        y : array-like, dask array or DataArray of shape (n_samples, n_features_y)
            The second view.
        **fit_params
            ``sample_dim``, passed to :meth:`fit` and :meth:`transform`.

        Returns
        -------
        x_scores, y_scores : same form as X and y, shape (n_samples, ``n_components_``)
            The scores of both views.
        """
        return self.fit(X, y, **fit_params).transform(X, y, **fit_params)

    # ----------------------------------------------------------------- output
    def as_xarray(self, name: str) -> Any:
        """A fitted attribute as a DataArray; those of Y's features on Y's grid.

        As every ddr estimator's ``as_xarray`` (X's attributes, ``x_weights_``, on X's
        features); an attribute of Y's features (``y_weights_``, ``y_mean_``, ...: dims with
        ``Y_FEATURE`` in the ``xarray_dims`` tag) gets Y's feature dims and coordinates,
        NaN at Y's mask (a Dataset Y: a Dataset, a variable per block), and the units of
        Y's data.

        Parameters
        ----------
        name : str
            A fitted attribute listed in the estimator's ``xarray_dims`` tag.

        Returns
        -------
        xarray.DataArray or xarray.Dataset
            E.g. ``y_weights_`` of a Y on ``(lat, lon)``: dims ``("lat", "lon",
            "component")``.
        """
        tags = get_ddr_tags(self)
        dims = tags.xarray_dims.get(name)
        if dims is None or not any(d.startswith(Y_FEATURE) for d in dims):
            return super().as_xarray(name)
        check_is_fitted(self)
        est = type(self).__name__
        return fitted_dataarray(
            np.asarray(getattr(self, name)),
            dims,
            feature_token=Y_FEATURE,
            feature_dim=getattr(self, "y_feature_dim_", None) or "y_feature",
            feature_coords=getattr(self, "y_feature_coords_", None),
            layout=getattr(self, "y_feature_layout_", None),
            coords={},
            name=name.rstrip("_"),
            attrs={
                "long_name": f"{name.rstrip('_').replace('_', ' ')} of {est}",
                "ddr:estimator": est,
                "ddr:attribute": name,
            },
            units=units_of(tags.xarray_units.get(name), getattr(self, "y_feature_units_", None)),
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def _y_sample_dims(rows: Rows, sample_dim: Hashable | None, y: Any) -> Hashable | None:
    """The sample dims Y is read over: X's (a grid's, or a 2-D DataArray's sample dim),
    else those given. X's own mask (``sample_dim``'s) is never Y's: Y's is the one Y
    carries (a pipeline's grid input marks its DataArray with the :class:`SampleDims` and
    mask it read while planning, so the fit reads no sample of Y to find it; X need not be
    a grid), else the fit finds it."""
    if rows.sample_dims:
        dims: tuple[Hashable, ...] = tuple(rows.sample_dims)
    elif rows.kind == "xarray" and (sample_dim is None or sample_dim == rows.sample_dim):
        dims = (rows.sample_dim,)
    else:
        return sample_dim
    marked = [
        v for v in getattr(y, "attrs", {}).values()
        if isinstance(v, SampleDims) and v.mask is not None and tuple(v) == dims
    ]  # fmt: skip
    if len(marked) == 1:
        return marked[0]
    return SampleDims(dims) if rows.sample_dims else rows.sample_dim


def _aligned_samples(y: Any, rows: Rows) -> Any:
    """DataArray (or Dataset) ``y`` with its samples in the order of X's: by the coordinate
    of each sample dim (reordered where both have the same labels in another order; labels
    that differ are refused, naming the dim)."""
    sdims = rows.sample_dims or ()
    if len(sdims) < 2:
        return align_by_coordinate(y, rows, "Y")
    for d in sdims:
        ours, theirs = rows.template.indexes.get(d), y.indexes.get(d)
        if ours is None or theirs is None or ours.equals(theirs):
            continue
        if len(theirs) == len(ours) and theirs.is_unique and theirs.isin(ours).all():
            y = y.sel({d: ours})
            continue
        missing = ours.difference(theirs)
        raise ValueError(
            f"Y's {d!r} coordinate does not match X's: {len(missing)} label(s) of X have no Y "
            f"(e.g. {list(missing[:3])}); give Y for exactly X's samples "
            f"(Y.sel({d}=X.{d}))"
        )
    return y
