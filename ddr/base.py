"""What every ddr estimator shares: input in three forms, output in the form of the input.

Estimators subclass scikit-learn's ``BaseEstimator`` and mixins plus :class:`DDRMixin`.
In-memory input goes through scikit-learn's own ``validate_data`` (so messages and
``check_estimator`` behaviour are scikit-learn's); dask and xarray input get the same checks
without computing anything. Outputs follow the input: numpy in -> numpy out, dask in -> lazy
dask out (blockwise over the row blocks), DataArray in -> DataArray out with the sample
coordinate kept and a new named dim.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import check_is_fitted, validate_data

from ddr._fit_plan import FitPlan
from ddr._hooks import saver
from ddr._map_rows import RowCheck, map_rows
from ddr._merged_fit import MergedFitMixin
from ddr.stats._checks import check_rows
from ddr.stats._grid import SampleDims
from ddr.stats._grid_out import fitted_dataarray, take_sample_dims
from ddr.stats._input import Rows, align_to_rows, as_rows, is_sparse, is_xarray
from ddr.stats._units import DataUnits, data_units, units_of
from ddr.tags import FEATURE, DDRTags, TransformerTags, check_estimator_class, get_ddr_tags

__all__ = [
    "FEATURE",
    "DDRMixin",
    "DDRTags",
    "FitPlan",
    "InvalidParameterError",
    "MergedFitMixin",
    "RowCheck",
    "SAMPLE_WEIGHT_CHECKS",
    "check_some_weight",
    "check_rows",
    "fit_context",
    "get_ddr_tags",
    "map_rows",
]

#: scikit-learn's decorator for ``fit``, ``partial_fit`` and ``_fit_plan``: the parameters are
#: checked against ``_parameter_constraints`` (and :meth:`DDRMixin._check_param_combination`)
#: before anything else happens.
fit_context = _fit_context(prefer_skip_nested_validation=True)


#: scikit-learn's estimator checks of ``sample_weight`` (an estimator that takes weights only
#: with some parameters declares them expected failures with the others)
SAMPLE_WEIGHT_CHECKS = (
    "check_sample_weights_pandas_series",
    "check_sample_weights_not_an_array",
    "check_sample_weights_list",
    "check_sample_weights_shape",
    "check_sample_weights_not_overwritten",
    "check_all_zero_sample_weights_error",
    "check_sample_weight_equivalence_on_dense_data",
    "check_sample_weight_equivalence_on_sparse_data",
)


def check_some_weight(total: Any, owner: str) -> None:
    """Refuse frequency weights that sum to zero: there is no model of no rows.

    Parameters
    ----------
    total : float or ndarray
        The summed weight (per feature or class: refused when none is positive).
    owner : str
        Who says it (the estimator's name).
    """
    if not np.any(np.asarray(total) > 0):
        raise ValueError(
            f"{owner}: the sample weights are all zero; at least one row needs a positive weight"
        )


class DDRMixin:
    """The parameter contract, input handling, blockwise output and persistence shared by
    ddr estimators.

    What a subclass declares (the pipeline layer asks these, never a table of class names):

    - ``_parameter_constraints``: scikit-learn's declaration of every constructor parameter
      (``Interval``, ``StrOptions``, ``"boolean"``, ``"array-like"``, ``None``, ...). It is
      the one place parameters are described: ``fit`` checks it (``fit_context``), and
      ``ddr validate``/``plan``, ``ddr schema`` and ``ddr ops`` are generated from it.
    - :meth:`_check_param_combination`: constraints between parameters, checked with them.
    - ``__ddr_tags__()``: what the rest of ddr knows of the estimator (:class:`ddr.tags.DDRTags`:
      passes and statistics of the fit, output width, component names, fitted attributes'
      dims, ...), built per instance as scikit-learn's ``__sklearn_tags__``: each class
      adds to ``super().__ddr_tags__()``. Required facts (``fit.passes``,
      ``fit.statistics``, a transformer's ``transformer.width``) are checked when the class
      is defined, for a default instance: a class that forgets one fails at import, naming
      it. Family bases that are not estimators by themselves set ``_abstract_estimator``.
    - :meth:`_fit_plan` for fits that are one pass of statistics.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    #: parameters renamed to scikit-learn's names: old name -> new name. The old name still
    #: works (``__init__``, ``set_params``, a pipeline's ``with:``) for one release, with a
    #: FutureWarning naming the new one (:func:`ddr._params.take_renamed`)
    _renamed_params: ClassVar[dict[str, str]] = {}
    #: values renamed to scikit-learn's: parameter -> {old value: new value}. Declare the old
    #: values ``StrOptions(..., deprecated=...)``; ``fit`` warns (FutureWarning) and the
    #: estimator reads the new value through :meth:`_param`
    _renamed_values: ClassVar[dict[str, dict[Any, Any]]] = {}
    #: True (in its own class body) for a family base that is not an estimator by itself:
    #: its tags are checked in its subclasses
    _abstract_estimator: ClassVar[bool] = False
    #: what a fit remembers of its input's features (:meth:`_remember_features`): its grid,
    #: coordinates and units, which fitted attributes and outputs are labelled with
    _feature_facts: ClassVar[tuple[str, ...]] = (
        "feature_dim_", "feature_coords_", "feature_layout_", "sample_dims_", "feature_units_"
    )  # fmt: skip

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls._renamed_params and "__init__" in cls.__dict__:
            cls.__init__ = _accepting_old_names(cls.__dict__["__init__"])  # type: ignore[method-assign]
        take_sample_dims(cls)
        _check_declared(cls)

    # ------------------------------------------------------------------- tags
    def __ddr_tags__(self) -> DDRTags:
        """The facts of this estimator (defaults; subclasses add theirs to ``super()``'s)."""
        tags = DDRTags()
        if callable(getattr(self, "transform", None)):
            tags.transformer = TransformerTags()
        return tags

    # ------------------------------------------------------------- parameters
    def _validate_params(self) -> None:
        """Check every parameter against ``_parameter_constraints`` (scikit-learn's
        machinery, ``InvalidParameterError`` naming the parameter; a bool is not a number:
        :func:`ddr._params.validate_parameters`), then their combination."""
        from ddr._params import validate_parameters

        params = self.get_params(deep=False)
        validate_parameters(self._parameter_constraints, params, type(self).__name__)
        self._warn_renamed_values(params)
        self._check_param_combination()

    def _warn_renamed_values(self, params: Mapping[str, Any]) -> None:
        """A FutureWarning for each parameter set to a value that has a new name."""
        import warnings

        from ddr._params import renamed_value_message, renamed_values

        for name, old, new in renamed_values(self._renamed_values, params):
            warnings.warn(
                renamed_value_message(type(self).__name__, name, old, new),
                FutureWarning,
                stacklevel=4,
            )

    def _param(self, name: str) -> Any:
        """Parameter ``name`` with a renamed value read as its new name."""
        value = getattr(self, name)
        renamed = self._renamed_values.get(name, {})
        return renamed.get(value, value) if isinstance(value, str) else value

    def set_params(self, **params: Any) -> Any:
        """Set parameters as scikit-learn's ``set_params``; a renamed parameter's old name
        still works, with a FutureWarning naming the new one.

        Parameters
        ----------
        **params
            Parameter names and values (``step__name`` for nested estimators).

        Returns
        -------
        self
        """
        if self._renamed_params:
            params = _take_renamed(type(self), params, stacklevel=3)
        return super().set_params(**params)  # type: ignore[misc]

    def _check_param_combination(self) -> None:
        """Constraints between parameters that need no data (none here); raise
        :class:`InvalidParameterError` naming the parameters."""

    # ---------------------------------------------------------- one-pass fits
    def _fit_plan(self, X: Any, y: Any = None, **fit_params: Any) -> FitPlan | None:
        """The fit as one lazy pass of statistics plus a client-side solve, or None.

        Estimators whose ``fit`` is a single pass of statistics override this and implement
        ``fit`` as ``self._fit_plan(...)`` computed and finished; multi-pass estimators keep
        the default (None) and are fitted with ``fit``.
        """
        return None

    # ------------------------------------------------------------------ input
    def _rows(
        self,
        X: Any,
        *,
        reset: bool,
        sample_dim: Hashable | None = None,
        dtype: Any = (np.float64, np.float32),
        allow_nan: bool = False,
    ) -> Rows:
        """Validate ``X`` for fit (``reset=True``) or for use after fit (``reset=False``).

        numpy-like input is validated by scikit-learn (dtype conversion, finiteness, 2-D,
        ``n_features_in_``); dask and xarray input are checked for shape and row chunks here,
        and for finiteness inside the blocks as they are read.
        """
        if not reset:
            check_is_fitted(self)
        elif self._merging_into_grid():
            reset = False  # a batch of partial_fit merged into a grid fit: on the fitted grid
        else:
            self._forget_features()
        rows = self._input_rows(X, reset=reset, sample_dim=sample_dim)
        sparse_ok = self.__sklearn_tags__().input_tags.sparse  # type: ignore[attr-defined]
        if rows is not None and rows.is_lazy and rows.is_sparse and not sparse_ok:
            raise TypeError(
                f"{type(self).__name__} takes dense rows; X is a dask array of "
                f"{type(rows.data._meta).__name__} blocks. Densify them with "
                "X.map_blocks(lambda b: b.toarray(), meta=numpy.empty((0, 0))) if they fit, "
                "or use an estimator that reads sparse rows (TruncatedSVD, MultinomialNB, "
                "PLSA, ...: see the README)"
            )
        if rows is None or not rows.is_lazy:
            data = X if rows is None else rows.data
            # scikit-learn's own refusal of sparse input (a TypeError saying to densify)
            # where the estimator does not read sparse rows
            arr = validate_data(
                self,
                data,
                reset=reset,
                accept_sparse="csr" if sparse_ok else False,
                dtype=list(dtype) if isinstance(dtype, tuple) else dtype,
                ensure_all_finite="allow-nan" if allow_nan else True,
            )
            if is_sparse(arr):
                arr = as_rows(arr).data  # CSR, as every sparse block ddr reads
            if rows is None:
                return Rows(arr, "numpy")
            if reset:
                self._remember_features(rows)
            return dataclasses.replace(rows, data=arr)
        n_features = rows.shape[1]
        if reset:
            self.n_features_in_ = n_features
            if rows.kind == "xarray":
                self._remember_features(rows)
        elif n_features != self.n_features_in_:
            raise ValueError(
                f"X has {n_features} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        if rows.shape[0] == 0:
            raise ValueError(
                f"Found array with 0 sample(s) (shape={rows.shape}) while a minimum of 1 is "
                f"required by {type(self).__name__}."
            )
        return rows

    def _component_rows(
        self,
        X: Any,
        *,
        sample_dim: Hashable | None = None,
        n_features: int | None = None,
        allow_nan: bool = False,
    ) -> Rows:
        """Validate the input of ``inverse_transform``: one column per component, or
        ``n_features`` columns for transformers whose output keeps the input's features."""
        from sklearn.utils import check_array

        check_is_fitted(self)
        sample_dim = self._default_sample_dims(X, sample_dim)
        layout = getattr(self, "feature_layout_", None)
        if n_features is not None and layout is not None and is_xarray(X):
            # the features themselves (a same-width transform's output): the fitted grid
            rows = as_rows(X, sample_dim=sample_dim, fitted=layout, missing_ok=allow_nan)
        elif _is_lazy_or_xarray(X):
            # scores have no mask; what they map back to is the fitted grid
            rows = as_rows(X, sample_dim=sample_dim, masks=False)
            rows = dataclasses.replace(rows, layout=layout)
        else:
            rows = as_rows(X)
        if not rows.is_lazy:
            data = check_array(
                rows.data,
                dtype=[np.float64, np.float32],
                ensure_all_finite="allow-nan" if allow_nan else True,
            )
            rows = dataclasses.replace(rows, data=data)
        name = type(self).__name__
        if n_features is not None and rows.shape[1] != n_features:
            raise ValueError(
                f"X has {rows.shape[1]} features, but {name} is expecting {n_features} "
                "features as input."
            )
        if n_features is None and rows.shape[1] != self.n_components_:
            raise ValueError(
                f"X has {rows.shape[1]} columns, but {name}.inverse_transform is expecting "
                f"{self.n_components_} (one per component)"
            )
        return rows

    def _labels(self, y: Any, rows: Rows) -> Any:
        """Labels aligned with ``rows`` (numpy for in-memory rows, dask with the same chunks)."""
        return align_to_rows(y, rows, "y")

    def _input_rows(self, X: Any, *, reset: bool, sample_dim: Hashable | None) -> Rows | None:
        """``as_rows`` of dask or xarray input (None for in-memory arrays). A DataArray fitted
        as a grid is read as one after the fit too: on the fitted feature dims, with the
        fitted mask, and by default over the fitted sample dims."""
        if not _is_lazy_or_xarray(X):
            return None
        layout = None if reset else getattr(self, "feature_layout_", None)
        if not reset:
            sample_dim = self._default_sample_dims(X, sample_dim)
        return as_rows(
            X,
            sample_dim=sample_dim,
            fitted=layout if is_xarray(X) else None,
            # a model fitted without a grid has no mask to find in new input (and reading
            # its first sample would compute something before the lazy output is asked for)
            masks=reset or layout is not None,
            missing_ok=bool(self.__sklearn_tags__().input_tags.allow_nan),  # type: ignore[attr-defined]
        )

    def _default_sample_dims(self, X: Any, sample_dim: Hashable | None) -> Hashable | None:
        """``sample_dim``, or the fitted sample dims where none is given and X has them."""
        fitted = getattr(self, "sample_dims_", None)
        if sample_dim is not None or fitted is None or not is_xarray(X):
            return sample_dim
        return SampleDims(fitted) if set(fitted) <= set(X.dims) else None

    def _merging_into_grid(self) -> bool:
        """Whether ``partial_fit`` (:class:`MergedFitMixin`) is planning a batch that merges
        into a fit on a grid: the batch must have the fitted grid and mask, never its own."""
        merging = getattr(self, "_merging_count", 0.0)
        return bool(merging) and hasattr(self, "feature_layout_")

    def _forget_features(self) -> None:
        """Drop what a previous fit remembered of its input's features."""
        for attr in DDRMixin._feature_facts:
            self.__dict__.pop(attr, None)

    def _remember_features(self, rows: Rows) -> None:
        tmpl = rows.template
        self.feature_dim_ = rows.feature_dim
        # the data's units (CF's attribute; one per variable of a Dataset): what the units
        # of attributes and outputs are said in (ddr.stats._units)
        self.feature_units_ = data_units(tmpl)
        if rows.layout is not None:
            # a grid: feature-shaped attributes go back on it (as_xarray)
            self.feature_layout_ = rows.layout
            self.sample_dims_ = tuple(rows.sample_dims or ())
        elif rows.feature_dim in tmpl.coords:
            self.feature_coords_ = np.asarray(tmpl.coords[rows.feature_dim].values)

    # ----------------------------------------------------------------- output
    def _output_units(self, power: int | None) -> DataUnits:
        """The units of an output ``power`` of the fitted data's units (``map_rows``'s
        ``units``; None where the data had none, ``ddr.stats._units``)."""
        return units_of(power, getattr(self, "feature_units_", None))

    def as_xarray(self, name: str) -> Any:
        """A fitted attribute as a DataArray with named dims and the features' coordinates.

        The attribute itself stays a numpy array (scikit-learn's contract); this is its
        labelled view. Fitted on a DataArray with several feature dims (a grid), each feature
        axis becomes the grid's dims with their coordinates, NaN at masked features: a map
        per component, class or cluster. Attributes ``long_name``, ``ddr:estimator`` and
        ``ddr:attribute`` say what it is, and ``units`` what it is in when the data had
        units (the estimator's ``xarray_units`` tag: e.g. ``mean_`` in the data's units,
        ``explained_variance_`` in their square, ``components_`` "1").

        Parameters
        ----------
        name : str
            A fitted attribute listed in the estimator's ``xarray_dims`` tag.

        Returns
        -------
        xarray.DataArray or xarray.Dataset
            Dims as declared, the feature dim replaced by the training data's feature dims
            (e.g. ``components_``: ``("component", "lat", "lon")``). Fitted on a Dataset, a
            Dataset with one variable per data variable of the input.
        """
        check_is_fitted(self)
        tags = get_ddr_tags(self)
        declared = tags.xarray_dims
        if name not in declared:
            raise ValueError(
                f"{type(self).__name__}.as_xarray: {name!r} is not available; valid names are "
                f"{sorted(declared)}"
            )
        est = type(self).__name__
        coords = {"class": self.classes_} if hasattr(self, "classes_") else {}
        return fitted_dataarray(
            np.asarray(getattr(self, name)),
            declared[name],
            feature_token=FEATURE,
            feature_dim=getattr(self, "feature_dim_", "feature"),
            feature_coords=getattr(self, "feature_coords_", None),
            layout=getattr(self, "feature_layout_", None),
            coords=coords,
            name=name.rstrip("_"),
            attrs={
                "long_name": f"{name.rstrip('_').replace('_', ' ')} of {est}",
                "ddr:estimator": est,
                "ddr:attribute": name,
            },
            units=self._output_units(tags.xarray_units.get(name)),
        )

    # ------------------------------------------------------------ persistence
    def save(
        self,
        path: str | os.PathLike[str],
        *,
        if_exists: str = "error",
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Save the fitted estimator to a Zarr group (arrays as arrays, parameters as JSON).

        Load it back with :func:`ddr.load`. No pickle is written.

        Parameters
        ----------
        path : str or path-like
            A local path or a URL (``s3://...``).
        if_exists : {"error", "overwrite", "skip-if-complete"}, default "error"
            What to do when something is at ``path`` already.
        storage_options : dict, optional
            Options of the URL's filesystem, as for :func:`ddr.io.open_input`.
        """
        # ddr.io writes models and sits above the estimators: its writer is registered in
        # ddr._hooks (by the package root), never imported from here
        saver()(self, path, if_exists=if_exists, storage_options=storage_options)

    # ------------------------------------------------------------------- HTML
    def _html_repr(self) -> str:
        """scikit-learn's estimator diagram (parameters, fitted attributes) followed, once
        fitted, by what ddr knows of the fit (:func:`fitted_facts`): what Jupyter shows."""
        import html

        from sklearn.utils._repr_html.estimator import estimator_html_repr

        diagram = estimator_html_repr(self)
        facts = fitted_facts(self)
        if not facts:
            return diagram
        rows = "".join(
            f'<tr><th style="text-align: left; padding-right: 1em">{html.escape(k)}</th>'
            f'<td style="text-align: left">{html.escape(v)}</td></tr>'
            for k, v in facts
        )
        table = (
            '<table class="ddr-fitted" style="margin-top: 0.5em">'
            f'<caption style="text-align: left"><b>ddr: the fit</b></caption>{rows}</table>'
        )
        return f'<div class="ddr-estimator">{diagram}{table}</div>'


def fitted_facts(est: Any) -> list[tuple[str, str]]:
    """What ddr knows of a fitted estimator, as (label, text) pairs (empty when unfitted): the
    data it was fitted on, the passes it read them in, the statistics it was solved from,
    whether a fit on more rows merges them, the components and EM's iterations.

    Parameters
    ----------
    est : estimator
        A ddr estimator.

    Returns
    -------
    list of (str, str)
    """
    from ddr.stats.base import Statistic

    d = getattr(est, "n_features_in_", None)
    if d is None:
        return []
    stats = {k: v for k, v in vars(est).items() if isinstance(v, Statistic)}
    n = getattr(est, "n_samples_", None)
    if n is None and getattr(est, "class_count_", None) is not None:
        n = float(np.sum(est.class_count_))
    if n is None:  # rows counted by a statistic (per feature where values are missing)
        counts = [np.asarray(v.count, float) for v in stats.values() if hasattr(v, "count")]
        n = float(counts[0].max()) if counts and counts[0].size else None
    features = f"{d} feature{'s' if d != 1 else ''}"
    facts = [("fitted on", f"{_count(n)} samples x {features}" if n else features)]
    tags = get_ddr_tags(est)
    passes = getattr(est, "n_passes_", None)
    if passes is None and n:
        try:
            passes = tags.fit.passes(int(n), int(d))
        except Exception:  # a rule that needs what it was not given
            passes = None
    if passes is not None:
        facts.append(("passes over the data", str(passes)))
    if stats:
        facts.append(("statistics", "; ".join(f"{k}: {v!r}" for k, v in stats.items())))
    mergeable = False
    if n is not None:
        try:
            mergeable = bool(tags.fit.mergeable(int(n), int(d)))
        except Exception:  # a rule that needs what it was not given
            mergeable = False
    if mergeable:
        facts.append(("mergeable", "yes: more rows merge into its statistics (partial_fit)"))
    for attr, label in (("n_components_", "components"), ("n_iter_", "iterations")):
        value = getattr(est, attr, None)
        if value is not None:
            facts.append((label, str(value)))
    if getattr(est, "converged_", None) is not None:
        facts.append(("converged", "yes" if est.converged_ else "no"))
    return facts


def _count(n: Any) -> str:
    return f"{int(n):,}" if float(n).is_integer() else f"{float(n):g}"


def _take_renamed(cls: type, given: dict[str, Any], *, stacklevel: int) -> dict[str, Any]:
    """``given`` with renamed parameters' old names replaced, each with a FutureWarning."""
    import warnings

    from ddr._params import renamed_parameter_message, take_renamed

    out, done = take_renamed(cls.__name__, cls._renamed_params, given)  # type: ignore[attr-defined]
    for old, new in done:
        warnings.warn(
            renamed_parameter_message(cls.__name__, old, new), FutureWarning, stacklevel=stacklevel
        )
    return out


def _accepting_old_names(init: Callable[..., None]) -> Callable[..., None]:
    """``__init__`` that also takes the old names of the class's renamed parameters (a
    FutureWarning each); its signature (what ``get_params`` reads) is ``init``'s."""

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if any(k in type(self)._renamed_params for k in kwargs):
            kwargs = _take_renamed(type(self), kwargs, stacklevel=3)
        init(self, *args, **kwargs)

    return __init__


def _check_declared(cls: type) -> None:
    """At class definition: the tags of a default instance declare every required fact.

    Skipped for family bases (``_abstract_estimator`` in their own body), classes with
    abstract methods, classes without ``fit``, and classes that need constructor arguments
    (their tags are checked when registered and by the conformance suites).
    """
    if cls.__dict__.get("_abstract_estimator", False) or not callable(getattr(cls, "fit", None)):
        return
    if any(getattr(getattr(cls, n, None), "__isabstractmethod__", False) for n in dir(cls)):
        return
    check_estimator_class(cls)


def _is_lazy_or_xarray(X: Any) -> bool:
    from ddr.stats._input import is_dask, is_xarray

    return is_dask(X) or is_xarray(X)
