"""Feature weights of the decompositions: EOF analysis's area weights (``sqrt(cos(lat))``).

As eofs (``Eof(data, weights=w)``) and xeofs (``EOF().fit(X, dim, weights=w)``) apply them,
the weights multiply the *centred* data before the decomposition (the raw data for
:class:`~ddr.TruncatedSVD`, which does not centre): the model is the decomposition of

    X_w = (X - mean_) * w

so ``components_`` are the maps in the weighted space (orthonormal there) and the variances
are those of ``X_w``. ``transform`` weights new rows the same way, ``inverse_transform``
unweights the reconstruction, and ``as_xarray("components_", weighted=False)`` gives the maps
in the data's own units: ``components_ / w``, the pattern the scores multiply to rebuild the
data (``X ~ mean_ + scores @ (components_ / w)``), NaN where a weight is 0 (there the data
said nothing).

The weights never touch the data's statistics: the covariance solver's one pass of moments
is the unweighted one and the weights enter its solve (``diag(w) S diag(w)``); the randomized
solvers apply the scatter to the weighted basis ``w * V`` and weight the product, so the
column means stay the data's own at every feature (:func:`weighted_scatter_eigh`).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Literal

import dask
import numpy as np

from ddr.base import FitPlan
from ddr.linalg.randomized import (
    RandomizedEigh,
    extend_basis,
    initial_basis,
    lazy_pass,
    nystrom_eigh,
    randomized_passes,
)
from ddr.stats import compute as stats_compute
from ddr.stats._grid_blocks import FeatureBlocks
from ddr.stats._input import Rows, is_dask

__all__ = [
    "FeatureWeighted",
    "fit_weights",
    "is_lazy",
    "plan_with_weights",
    "resolve_feature_weights",
    "same_weights",
    "scale_columns",
    "weighted_gram",
    "weighted_scatter_eigh",
    "weighted_statistic",
]

_NAME = "feature_weights"


# --------------------------------------------------------------------------- the weights
def resolve_feature_weights(weights: Any, rows: Rows, estimator: str) -> np.ndarray | None:
    """The feature weights of a fit as a float64 vector over the features the model sees.

    Parameters
    ----------
    weights : None, array-like, xarray.DataArray or xarray.Dataset
        None (no weights); a 1-D array of ``n_features`` (the columns of ``rows``) or, for a
        grid, of every grid point (masked points included) or of the grid's shape; a
        DataArray whose dims are some of the grid's feature dims, broadcast over the others
        (``sqrt(cos(lat))`` on ``(lat,)`` for a ``(lat, lon)`` grid) and matched by
        coordinate values; for a Dataset fit, a DataArray broadcast over each variable's
        grid or a Dataset with a weight per variable.
    rows : Rows
        The validated rows of the fit (their ``layout`` is the grid and its mask).
    estimator : str
        Names the estimator in messages.

    Returns
    -------
    ndarray of shape (n_features,) or None
        Non-negative finite weights, not all zero. Weights at masked points are dropped
        before they are checked.

    Raises
    ------
    TypeError
        Weights that are not real numbers, or a Dataset for a fit on a DataArray.
    ValueError
        A wrong length, shape or dims, coordinates that are not the grid's, negative or
        non-finite weights, or weights that are all zero.
    """
    if weights is None:
        return None
    n = rows.shape[1]
    layout = rows.layout
    if hasattr(weights, "data_vars") or hasattr(weights, "dims"):
        w = _labelled(weights, rows, estimator)
    else:
        w = _numeric(weights, estimator)
        grid = getattr(layout, "shape", None)
        if grid is not None and w.shape == tuple(grid):
            w = w.reshape(-1)
        if w.ndim != 1:
            raise ValueError(
                f"{estimator}: {_NAME} must be 1-D (one weight per feature) or a DataArray on "
                f"the feature dims; got an array of shape {w.shape}"
            )
        full = getattr(layout, "n_features", n)
        if w.size == full and full != n:
            w = _kept(w, layout)
        elif w.size != n:
            sizes = f"{n}" if full == n else f"{n} (the unmasked features) or {full} (the grid)"
            raise ValueError(f"{estimator}: {_NAME} has {w.size} weights; X has {sizes} features")
    return _checked(w, estimator)


def is_lazy(weights: Any) -> bool:
    """Whether ``weights`` are a dask array or a DataArray of one (read when needed)."""
    return is_dask(weights) or is_dask(getattr(weights, "data", None))


def _numeric(values: Any, estimator: str) -> np.ndarray:
    if is_dask(values):
        values = values.compute()
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf" or isinstance(values, (str, bytes)):
        raise TypeError(
            f"{estimator}: {_NAME} must hold real numbers; got dtype {arr.dtype} "
            f"({type(values).__name__})"
        )
    return arr.astype(np.float64)


def _checked(w: np.ndarray, estimator: str) -> np.ndarray:
    bad = np.flatnonzero(~np.isfinite(w))
    if bad.size:
        raise ValueError(
            f"{estimator}: {_NAME} must be finite; {bad.size} are not (the first at feature "
            f"{int(bad[0])}: {w[bad[0]]!r}). Weights at masked points are ignored; elsewhere "
            "give 0 to leave a feature out"
        )
    neg = np.flatnonzero(w < 0)
    if neg.size:
        raise ValueError(
            f"{estimator}: {_NAME} must be non-negative; {neg.size} are negative (the first "
            f"at feature {int(neg[0])}: {w[neg[0]]!r})"
        )
    if not np.any(w > 0):
        raise ValueError(f"{estimator}: {_NAME} are all zero: every feature would be left out")
    return np.ascontiguousarray(w)


def _kept(values: np.ndarray, layout: Any) -> np.ndarray:
    """The values of every grid point (of every variable's grid, for a Dataset fit) at the
    features the model sees."""
    if isinstance(layout, FeatureBlocks):
        edges = np.cumsum([0] + [sub.n_features for sub in layout.layouts])
        parts = zip(layout.layouts, itertools.pairwise(edges), strict=True)
        return np.concatenate([_kept(values[lo:hi], sub) for sub, (lo, hi) in parts])
    kept = getattr(layout, "kept", None)
    return values if kept is None else values[kept]


def _labelled(weights: Any, rows: Rows, estimator: str) -> np.ndarray:
    """A DataArray (or Dataset) of weights as a vector over the kept features of ``rows``."""
    layout = rows.layout
    if isinstance(layout, FeatureBlocks):  # a Dataset fit: feature blocks, one per variable
        parts = []
        for var, sub in zip(layout.variables, layout.layouts, strict=True):
            if hasattr(weights, "data_vars"):
                if var not in weights.data_vars:
                    raise ValueError(
                        f"{estimator}: {_NAME} is a Dataset without the variable {var!r} of X "
                        f"(X has {list(layout.variables)})"
                    )
                part = weights[var]
            else:
                part = weights
            parts.append(_on_grid(part, sub, f"{_NAME} of {var!r}", estimator))
        return np.concatenate(parts)
    if hasattr(weights, "data_vars"):
        raise TypeError(
            f"{estimator}: {_NAME} is a Dataset; X is not (give a DataArray on X's feature dims)"
        )
    if layout is not None:
        return _on_grid(weights, layout, _NAME, estimator)
    # a 2-D DataArray (or an array fitted without labels): one feature dim
    dim = rows.feature_dim if rows.feature_dim is not None else "feature"
    if tuple(weights.dims) != (dim,):
        raise ValueError(
            f"{estimator}: {_NAME} must lie along X's feature dim ({dim!r},); got dims "
            f"{tuple(weights.dims)}"
        )
    tmpl = rows.template
    if tmpl is not None and dim in tmpl.coords and dim in weights.coords:
        _check_coord(weights.coords[dim].values, tmpl.coords[dim].values, str(dim), estimator)
    w = _numeric(weights.data, estimator)
    if w.size != rows.shape[1]:
        raise ValueError(
            f"{estimator}: {_NAME} has {w.size} weights along {dim!r}; X has {rows.shape[1]}"
        )
    return w


def _on_grid(weights: Any, layout: Any, what: str, estimator: str) -> np.ndarray:
    """A DataArray on some of ``layout``'s feature dims, broadcast over the others and
    flattened in the grid's (C) order, masked points dropped."""
    dims = tuple(weights.dims)
    extra = [d for d in dims if d not in layout.dims]
    if extra:
        raise ValueError(
            f"{estimator}: {what} has dims {extra} that are not feature dims of X "
            f"(those are {list(layout.dims)}; weights lie along features, never samples)"
        )
    sizes = dict(zip(layout.dims, layout.shape, strict=True))
    for d in dims:
        if weights.sizes[d] != sizes[d]:
            raise ValueError(
                f"{estimator}: {what} has {weights.sizes[d]} values along {d!r}; X has {sizes[d]}"
            )
        coord = layout.coords.get(d)
        if coord is not None and coord[0] == (d,) and d in weights.coords:
            _check_coord(weights.coords[d].values, coord[1], d, estimator)
    values = _numeric(weights.transpose(*[d for d in layout.dims if d in dims]).data, estimator)
    shape = tuple(sizes[d] if d in dims else 1 for d in layout.dims)
    full = np.broadcast_to(values.reshape(shape), tuple(layout.shape)).reshape(-1)
    return _kept(full, layout)


def _check_coord(given: np.ndarray, fitted: np.ndarray, dim: str, estimator: str) -> None:
    same = given.shape == fitted.shape and bool(
        np.all((given == fitted) | ((given != given) & (fitted != fitted)))
    )
    if not same:
        raise ValueError(
            f"{estimator}: {_NAME}'s coordinate {dim!r} is not X's (weights are matched to "
            f"the grid by coordinate value; select or interpolate them onto X's {dim!r})"
        )


def fit_weights(est: Any, weights: Any, rows: Rows, *, merging: bool) -> np.ndarray | None:
    """Resolve ``weights`` for ``est`` and set its ``feature_weights_``.

    A batch merged into a fitted model (``partial_fit``; ``merging``) keeps the model's
    weights: the merged statistics are solved with one set. Giving them again is allowed,
    other weights are a ``ValueError``.
    """
    name = type(est).__name__
    w = resolve_feature_weights(weights, rows, name)
    if merging and hasattr(est, "feature_weights_"):
        held = est.feature_weights_
        if w is not None and not same_weights(w, held):
            raise ValueError(
                f"{name}.partial_fit: feature_weights differ from those of the model; the "
                "merged statistics are solved with one set of weights (give the same, or none)"
            )
        return held
    est.feature_weights_ = w
    return w


def plan_with_weights(
    plan: FitPlan, est: Any, weights: Any, rows: Rows, *, merging: bool = False
) -> FitPlan:
    """``plan`` (whose pass does not depend on the weights) with ``est``'s weights set: now,
    or, for lazy weights (a pipeline's input), in its solve after the pass, so that planning
    a fit reads nothing."""
    if not is_lazy(weights):
        fit_weights(est, weights, rows, merging=merging)
        return plan
    solve = plan.finish

    def finish(value: Any) -> Any:
        fit_weights(est, weights, rows, merging=merging)
        return solve(value)

    return dataclasses.replace(plan, finish=finish)


def same_weights(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Whether two fits' feature weights are the same (None: no weights)."""
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(np.array_equal(a, b))


# ---------------------------------------------------------------- weighted statistics
def weighted_statistic(stat: Any, w: np.ndarray | None) -> Any:
    """A :class:`~ddr.stats.CentredProduct` or :class:`~ddr.stats.GramProduct` computed
    for the basis ``w * V`` turned into the statistic of the weighted data for ``V``:
    ``(X_w^T X_w) V = w * (X^T X (w * V))``; the diagonal (the trace) scales by ``w**2``;
    the count and the column means stay the data's own."""
    if w is None:
        return stat
    sq = stat.sq * w**2 if stat.sq.size else stat.sq
    return dataclasses.replace(stat, product=stat.product * w[:, None], sq=sq)


def weighted_gram(stat: Any, w: np.ndarray | None) -> Any:
    """A :class:`~ddr.stats.GramProduct` for the identity basis (``X^T X`` itself) turned
    into the weighted data's: ``diag(w) X^T X diag(w)``; the diagonal scales by ``w**2``.
    Statistics that merge stay the data's own, whatever the weights."""
    if w is None:
        return stat
    sq = stat.sq * w**2 if stat.sq.size else stat.sq
    return dataclasses.replace(stat, product=stat.product * w[:, None] * w[None, :], sq=sq)


def weighted_scatter_eigh(
    rows: Rows,
    n_basis: int,
    weights: np.ndarray,
    *,
    n_power_iter: int,
    random_state: np.random.RandomState,
    on_error: Any = None,
    centre: bool = True,
    sample_weight: Any = None,
) -> RandomizedEigh:
    """:func:`ddr.linalg.randomized.randomized_scatter_eigh` of the weighted data
    ``X_w = (X - mean) * w`` (``X * w`` with ``centre=False``), never forming ``X_w``.

    Each pass applies the data's scatter to the weighted basis ``w * V`` and weights the
    product (:func:`weighted_statistic`): the same passes, the same block Krylov iteration
    and Nystrom step on ``diag(w) S diag(w)``. The result's ``mean`` is the data's own
    (unweighted) and its ``trace`` the weighted one.

    Parameters
    ----------
    rows : Rows
        As ``randomized_scatter_eigh``'s.
    n_basis : int
        Block width, at most ``n_features``.
    weights : ndarray of shape (n_features,)
        The feature weights.
    n_power_iter, random_state, on_error, centre, sample_weight
        As ``randomized_scatter_eigh``'s.

    Returns
    -------
    RandomizedEigh
    """
    d = rows.shape[1]
    V = initial_basis(d, n_basis, random_state)
    stat = _pass(rows, V, weights, None, on_error, centre, sample_weight)
    mean, count, trace = stat.mean, stat.count, float(np.maximum(stat.sq, 0).sum())
    blocks, images = [V], [stat.product]
    for _ in range(min(n_power_iter, randomized_passes(d, n_basis, n_power_iter) - 1)):
        K = np.column_stack(blocks)
        width = min(n_basis, d - K.shape[1])
        V = extend_basis(K, images[-1][:, :width])
        stat = _pass(rows, V, weights, mean, on_error, centre, sample_weight)
        blocks.append(V)
        images.append(stat.product)
    lam, U = nystrom_eigh(np.column_stack(blocks), np.column_stack(images))
    return RandomizedEigh(count, mean, trace, lam, U, len(blocks))


def _pass(
    rows: Rows,
    V: np.ndarray,
    w: np.ndarray,
    center: np.ndarray | None,
    on_error: Any,
    centre: bool,
    sample_weight: Any,
) -> Any:
    """One read of the data: the weighted statistic for basis ``V``."""
    from ddr.stats import CentredProduct, GramProduct

    Vw = V * w[:, None]
    try:
        if rows.is_lazy:
            (stat,) = dask.compute(
                lazy_pass(rows.data, Vw, center, centre=centre, sample_weight=sample_weight)
            )
        else:
            first = center is None
            spec = (
                CentredProduct.spec(basis=Vw, center=center, diagonal=first)
                if centre
                else GramProduct.spec(basis=Vw, moments=first)
            )
            stat = stats_compute(spec, rows.data, None, sample_weight)
    except ValueError as exc:
        if on_error is not None:
            on_error(exc)
        raise
    return weighted_statistic(stat, w)


def scale_columns(X: Any, w: np.ndarray) -> Any:
    """``X * w`` column by column, dense or scipy.sparse (kept sparse), in float64."""
    import scipy.sparse

    if scipy.sparse.issparse(X):
        return scipy.sparse.csr_matrix(X, dtype=np.float64) @ scipy.sparse.diags(w)
    return np.asarray(X, dtype=np.float64) * w


# ------------------------------------------------------------------------ the mixin
class FeatureWeighted:
    """What a decomposition fitted with ``feature_weights`` adds: the weights
    (``feature_weights_``), the projection and reconstruction maps that apply them, and
    ``as_xarray(..., weighted=False)``.

    For classes with ``components_``, ``n_features_in_`` and ddr's ``as_xarray``.
    """

    feature_weights_: np.ndarray | None
    components_: np.ndarray

    def _weights(self) -> np.ndarray | None:
        """The fitted weights (None: unweighted, or a model saved before they existed)."""
        return getattr(self, "feature_weights_", None)

    def _weighted_units(self, power: int) -> int | None:
        """The power of the data's units a quantity of the weighted space ``X_w`` is in
        (scores, variances, singular values): ``power`` without weights; not stated with
        them, whose units ddr is not told (``sqrt(cos(lat))`` has none, ``1 / std`` the
        inverse of the data's), so the units of ``X_w`` are not known."""
        return power if self._weights() is None else None

    def _weighted_projection(self, components: np.ndarray) -> np.ndarray:
        """``components`` (k, d) of the weighted space as a map of the data's rows:
        ``((x - mean) * w) @ C.T = (x - mean) @ (C * w).T``."""
        w = self._weights()
        return components if w is None else components * w

    def _unweighted(self, components: np.ndarray) -> np.ndarray:
        """``components / w``: the maps in the data's units (NaN where ``w`` is 0)."""
        w = self._weights()
        if w is None:
            return components
        with np.errstate(divide="ignore", invalid="ignore"):
            out = components / w
        out[..., w == 0] = np.nan
        return out

    def _reconstruction_check(self) -> Literal["input", "output"]:
        """What ``inverse_transform`` checks: its output, unless a weight of 0 makes it NaN
        by design there (then the scores it reads)."""
        w = self._weights()
        return "input" if w is not None and bool(np.any(w == 0)) else "output"

    def as_xarray(self, name: str, *, weighted: bool = True) -> Any:
        """A fitted attribute as a DataArray with named dims and the features' coordinates.

        As every ddr estimator's ``as_xarray``, plus ``weighted``: with ``weighted=False``
        the maps of a fit with ``feature_weights`` (``components_``) are given in the data's
        own units, ``components_ / feature_weights_`` (NaN where a weight is 0): the
        patterns the scores multiply to rebuild the data, as ``inverse_transform`` does.

        Parameters
        ----------
        name : str
            A fitted attribute listed in the estimator's ``xarray_dims`` tag.
        weighted : bool, default=True
            The maps in the weighted space (as eofs and xeofs give them) or unweighted.
            Only ``components_`` is in the weighted space; ``weighted=False`` on another
            attribute is an error.

        Returns
        -------
        xarray.DataArray or xarray.Dataset
        """
        out = super().as_xarray(name)  # type: ignore[misc]
        if weighted:
            return out
        if name != "components_":
            raise ValueError(
                f"{type(self).__name__}.as_xarray({name!r}, weighted=False): only "
                "'components_' is in the weighted space; the other attributes are the same "
                "either way"
            )
        if self._weights() is None:
            return out
        import xarray as xr

        # the weights' own map (NaN at masked points) divides the maps point by point
        wmap = super().as_xarray("feature_weights_")  # type: ignore[misc]
        with xr.set_options(keep_attrs=True):
            unweighted = out / wmap.where(wmap > 0)
        if hasattr(unweighted, "data_vars"):
            for var in unweighted.data_vars:
                unweighted[var].attrs = dict(out[var].attrs)
        else:
            unweighted.attrs = dict(out.attrs)
            unweighted.name = out.name
        for item in [unweighted] + [unweighted[v] for v in getattr(unweighted, "data_vars", ())]:
            if "long_name" in item.attrs:
                item.attrs["long_name"] = f"{item.attrs['long_name']}, unweighted"
            # in the inverse of the weights' units, which ddr is not told (_weighted_units)
            item.attrs.pop("units", None)
        return unweighted
