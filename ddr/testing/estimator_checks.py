"""The conformance suite of ddr estimators: every check a ddr estimator must pass.

In the manner of scikit-learn's :func:`~sklearn.utils.estimator_checks.parametrize_with_checks`:
each check is a function of an (unfitted) estimator instance that raises ``AssertionError``
when the estimator breaks ddr's contract, or :class:`unittest.SkipTest` when the check does
not apply to it. :func:`estimator_checks` lists the checks for one estimator and
:func:`parametrize_with_checks` makes a pytest parametrisation of them::

    from ddr.testing import parametrize_with_checks, suite_instance

    @parametrize_with_checks([suite_instance(MyEstimator)])
    def test_my_estimator(estimator, check):
        check(estimator)

What a check needs to know of an estimator is asked of it: scikit-learn's tags for the kind
of input (categorical codes, counts, a second view, classes), ``fit``'s signature for
labels, and its ddr tags (:func:`ddr.tags.get_ddr_tags`) for the translation invariance,
whether a one-pass fit loads the data, and the known failures of scikit-learn's checks.
The data are small (90 rows, 3 features) so that the suite stays fast; each check runs
under dask's threaded scheduler with scikit-learn's UserWarnings silenced.
"""

from __future__ import annotations

import functools
import inspect
import tempfile
import unittest
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import scipy.sparse
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.utils import get_tags

from ddr.tags import get_ddr_tags
from ddr.testing.counting import counting_dask_array

__all__ = [
    "check_chunking_does_not_change_the_model",
    "check_fit_plan",
    "check_integer_bool_and_float32_input",
    "check_nan_and_inf_refused_by_every_method",
    "check_output_follows_the_input_form",
    "check_param_validation",
    "check_sample_weight_is_rows_repeated",
    "check_save_load_round_trip",
    "check_sklearn_estimator",
    "check_sparse_rows",
    "check_translation_invariance",
    "check_xarray_labels_aligned_by_coordinate",
    "estimator_checks",
    "exported_estimators",
    "parametrize_with_checks",
    "suite_data",
    "suite_instance",
]

#: rows and features of the suite's data
N, D = 90, 3
#: chunkings a fit must not notice: one chunk, uneven chunks, a one-row last chunk
CHUNKINGS = {"one": (N, -1), "uneven": ((7, 40, 13, 30), -1), "one-row-last": ((89, 1), -1)}
#: (dtype, form) pairs of the integer, bool and float32 check
KINDS = [
    ("int64", "numpy"),
    ("bool", "dask"),
    ("float32", "xarray"),
    ("int64", "dask"),
    ("bool", "xarray"),
    ("float32", "numpy"),
]

Check = Callable[[BaseEstimator], None]


# ------------------------------------------------------------------- registry
def exported_estimators() -> list[type]:
    """Every estimator class ddr exports (``ddr._EXPORTS``), sorted by name, then every
    estimator an installed plug-in registers (:func:`ddr.plugins.estimators`): being
    registered is being tested.

    Returns
    -------
    list of type
    """
    import ddr
    from ddr import plugins

    own = [
        obj
        for name in sorted(ddr._EXPORTS)
        if isinstance(obj := getattr(ddr, name), type) and issubclass(obj, BaseEstimator)
    ]
    return own + [cls for _, cls in sorted(plugins.estimators().items())]


def suite_instance(estimator_class: type, **params: Any) -> BaseEstimator:
    """An instance for the suite's small data: its tags' ``checks.params`` (and
    ``params``) over the defaults.

    Parameters
    ----------
    estimator_class : type
        A ddr estimator class.
    **params
        Parameters over those.

    Returns
    -------
    estimator
    """
    return estimator_class(**{**get_ddr_tags(estimator_class).checks.params, **params})


def estimator_checks(estimator: BaseEstimator) -> Iterator[Check]:
    """The checks that apply to ``estimator``, each a function of it.

    Parameters
    ----------
    estimator : estimator
        An unfitted instance (e.g. :func:`suite_instance`).

    Yields
    ------
    callable
        ``check(estimator)``.
    """
    yield check_sklearn_estimator
    yield check_param_validation
    yield check_save_load_round_trip
    yield check_fit_plan
    yield check_partial_fit_equals_fit
    yield check_sparse_rows
    yield check_chunking_does_not_change_the_model
    yield check_sample_weight_is_rows_repeated
    yield check_translation_invariance
    yield check_integer_bool_and_float32_input
    yield check_output_follows_the_input_form
    yield check_xarray_labels_aligned_by_coordinate
    yield check_nan_and_inf_refused_by_every_method


def parametrize_with_checks(estimators: Iterable[BaseEstimator]) -> Any:
    """A pytest parametrisation of every check of every estimator, as ``(estimator, check)``.

    Parameters
    ----------
    estimators : iterable of estimators
        Unfitted instances.

    Returns
    -------
    decorator
        ``pytest.mark.parametrize`` with ids ``"Name-check_name"``.
    """
    import pytest

    cases = [(est, check) for est in estimators for check in estimator_checks(est)]
    ids = [f"{type(est).__name__}-{check.__name__}" for est, check in cases]
    return pytest.mark.parametrize(("estimator", "check"), cases, ids=ids)


def _quiet(check: Callable[..., None]) -> Callable[..., None]:
    """Run a check under dask's threaded scheduler, scikit-learn's UserWarnings silenced."""

    @functools.wraps(check)
    def run(estimator: BaseEstimator) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            with dask.config.set(scheduler="threads"):
                check(estimator)

    return run


# ---------------------------------------------------------------------- data
def suite_data(
    estimator: BaseEstimator, *, n: int = N, seed: int = 0
) -> tuple[np.ndarray, np.ndarray | None]:
    """Small data of the kind ``estimator`` takes: category codes for categorical input,
    Poisson counts for positive input, three separated classes for classifiers, a second
    view for estimators that require y.

    Parameters
    ----------
    estimator : estimator
    n : int, default 90
        Rows.
    seed : int, default 0

    Returns
    -------
    X : ndarray of shape (n, 3)
    y : ndarray or None
        Labels or the second view, where the estimator takes them.
    """
    rng = np.random.default_rng(seed)
    tags = get_tags(estimator)
    labels = np.arange(n) % 3
    if tags.input_tags.categorical:
        X = (rng.integers(0, 3, (n, D)) + labels[:, None]) % 4
        return X.astype(np.float64), labels if is_classifier(estimator) else None
    if tags.input_tags.positive_only:  # counts: a Poisson rate per class and feature
        rates = 1.0 + 4.0 * np.eye(3)[labels]
        X = rng.poisson(rates).astype(np.float64)
        return X, labels if is_classifier(estimator) else None
    X = rng.standard_normal((n, D)) @ np.array([[2.0, 0.3, 0.0], [0.0, 1.0, 0.5], [0, 0, 0.7]])
    if is_classifier(estimator):
        X += 1.5 * np.eye(3)[labels]
        return X, labels
    if tags.target_tags.required:
        return X, X[:, :1] * 0.8 + rng.standard_normal((n, 1)) * 0.5
    return X, None


def output_method(estimator: BaseEstimator) -> str:
    """The method whose output the checks compare: probabilities, scores or densities."""
    for method in ("predict_proba", "transform", "score_samples"):
        if hasattr(estimator, method):
            return method
    raise AssertionError(f"{type(estimator).__name__} has no output method")


def takes_y(estimator: BaseEstimator) -> bool:
    return "y" in inspect.signature(estimator.fit).parameters


def fitted_output(estimator: BaseEstimator, X: Any, y: Any, Q: Any, **fit_kw: Any) -> np.ndarray:
    """Fit ``estimator`` on ``(X, y)`` and return its output on ``Q``, computed."""
    if y is not None or takes_y(estimator):
        estimator.fit(X, y, **fit_kw)
    else:
        estimator.fit(X, **fit_kw)
    out = getattr(estimator, output_method(estimator))(Q)
    return np.asarray(out.compute() if isinstance(out, da.Array) else out)


def assert_close(a: Any, b: Any, rtol: float) -> None:
    """``a`` equals ``b`` to ``rtol`` of the largest finite magnitude of ``b``."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.max(np.abs(b[np.isfinite(b)]), initial=1.0)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


def _labels_like(y: np.ndarray | None, X: da.Array) -> Any:
    return None if y is None else da.from_array(y, chunks=(X.chunks[0], *y.shape[1:]))


# --------------------------------------------------------------------- checks
@_quiet
def check_sklearn_estimator(estimator: BaseEstimator) -> None:
    """scikit-learn's own ``check_estimator``, less the failures the tags expect."""
    from sklearn.utils.estimator_checks import check_estimator

    expected = get_ddr_tags(estimator).checks.expected_failed_checks
    check_estimator(clone(estimator), expected_failed_checks=expected)


@_quiet
def check_param_validation(estimator: BaseEstimator) -> None:
    """``_parameter_constraints`` covers exactly the constructor's parameters, and fit
    refuses a bad value of each with an InvalidParameterError naming it (scikit-learn's
    check: one bad value generated per declared constraint, and one of a wrong type)."""
    from sklearn.utils.estimator_checks import check_param_validation as sklearn_check

    sklearn_check(type(estimator).__name__, clone(estimator))


@_quiet
def check_save_load_round_trip(estimator: BaseEstimator) -> None:
    """``save`` then :func:`ddr.load` gives the same class, parameters and outputs."""
    import ddr

    est = clone(estimator)
    X, y = suite_data(est)
    expected = fitted_output(est, X, y, X[:20])
    with tempfile.TemporaryDirectory() as tmp:
        est.save(Path(tmp) / "model.zarr")
        loaded = ddr.load(Path(tmp) / "model.zarr")
        assert type(loaded) is type(est) and loaded.get_params() == est.get_params()
        got = getattr(loaded, output_method(loaded))(X[:20])
    np.testing.assert_array_equal(np.asarray(got), expected)


@_quiet
def check_fit_plan(estimator: BaseEstimator) -> None:
    """A fit that reads the data once says so with ``_fit_plan`` (so a pipeline computes
    it in the pass it shares with every other one-pass fit of the same input), unless its
    tags say it loads the data; the plan reads nothing until run, then once, and gives
    the model ``fit`` gives."""
    from ddr.base import FitPlan

    est = clone(estimator)
    X, y = suite_data(est)
    arr, counter = counting_dask_array(X, chunks=(25, -1))
    yd = _labels_like(y, arr)
    clone(est).fit(arr, yd) if takes_y(est) else clone(est).fit(arr)
    passes = counter.passes
    counter.reset()
    plan = est._fit_plan(arr, yd)
    assert counter.passes == 0, "_fit_plan read data"
    if passes == 1.0 and get_ddr_tags(est).fit.loads_data is None:
        name = type(est).__name__
        assert isinstance(plan, FitPlan), f"{name}.fit reads the data once but has no FitPlan"
    if plan is None:
        return
    plan.run()
    assert counter.passes == 1.0
    ref = fitted_output(clone(estimator), X, y, X[:30])
    assert_close(np.asarray(getattr(est, output_method(est))(X[:30])), ref, rtol=1e-10)


def _partial_fit(est: BaseEstimator, X: Any, y: Any, classes: Any) -> BaseEstimator:
    """``est.partial_fit`` of a batch, with ``classes`` where partial_fit takes them."""
    kw = {"classes": classes} if "classes" in inspect.signature(est.partial_fit).parameters else {}
    if y is not None or takes_y(est):
        return est.partial_fit(X, y, **kw)
    return est.partial_fit(X, **kw)


@_quiet
def check_partial_fit_equals_fit(estimator: BaseEstimator) -> None:
    """A fit that is one pass of mergeable statistics (the tags' ``fit.mergeable``) has
    ``partial_fit``; batches in any order (numpy and dask), and a model saved and loaded
    between batches, give ``fit``'s model on all rows to 1e-12; two models fitted on
    disjoint rows merge into it (:func:`ddr.merge_fits`) when the class keeps its
    statistics."""
    import ddr

    X, y = suite_data(estimator)
    n, d = X.shape
    if not get_ddr_tags(estimator).fit.mergeable(n, d):
        return
    name = type(estimator).__name__
    assert hasattr(estimator, "partial_fit"), (
        f"{name}: fit is one mergeable pass but no partial_fit"
    )
    classes = None if y is None or y.ndim != 1 else np.unique(y)
    ref = fitted_output(clone(estimator), X, y, X[:30])
    cuts = [slice(61, n), slice(0, 17), slice(17, 61)]  # out of order, uneven
    yb = (lambda s: None) if y is None else (lambda s: y[s])
    est = clone(estimator)
    for s in cuts:
        _partial_fit(est, X[s], yb(s), classes)
    assert_close(getattr(est, output_method(est))(X[:30]), ref, rtol=1e-12)
    est = clone(estimator)
    for s in cuts:
        Xd = da.from_array(X[s], chunks=(11, -1))
        _partial_fit(est, Xd, _labels_like(yb(s), Xd), classes)
    got = getattr(est, output_method(est))(X[:30])
    assert_close(np.asarray(got), ref, rtol=1e-12)
    est = _partial_fit(clone(estimator), X[cuts[0]], yb(cuts[0]), classes)
    with tempfile.TemporaryDirectory() as tmp:
        est.save(Path(tmp) / "model.zarr")
        loaded = ddr.load(Path(tmp) / "model.zarr")
    for s in cuts[1:]:
        _partial_fit(loaded, X[s], yb(s), classes)
    assert_close(getattr(loaded, output_method(loaded))(X[:30]), ref, rtol=1e-12)
    if callable(getattr(estimator, "_fit_statistics", None)):
        halves = [slice(0, 45), slice(45, n)]
        parts = []
        for s in halves:
            part = clone(estimator)
            parts.append(part.fit(X[s], yb(s)) if takes_y(part) else part.fit(X[s]))
        merged = ddr.merge_fits(*parts)
        assert_close(getattr(merged, output_method(merged))(X[:30]), ref, rtol=1e-12)


@_quiet
def check_sparse_rows(estimator: BaseEstimator) -> None:
    """Estimators that read sparse rows (scikit-learn's ``input_tags.sparse``) give from a
    scipy.sparse matrix and from a dask array of CSR blocks the model of the dense rows; the
    others refuse both with a TypeError that says to densify."""
    X, y = suite_data(estimator)
    Xs = scipy.sparse.csr_matrix(X)
    blocks = da.from_array(Xs, chunks=((7, 40, 13, 30), -1))
    yd = _labels_like(y, blocks)
    if not get_tags(estimator).input_tags.sparse:
        try:
            fitted_output(clone(estimator), Xs, y, X[:30])
        except TypeError as exc:
            assert "Sparse data was passed for X, but dense data" in str(exc), exc
        else:
            raise AssertionError("sparse X was accepted by an estimator of dense rows")
        try:
            fitted_output(clone(estimator), blocks, yd, X[:30])
        except TypeError as exc:
            assert "takes dense rows; X is a dask array of csr_matrix" in str(exc), exc
        else:
            raise AssertionError("CSR blocks were accepted by an estimator of dense rows")
        return
    ref = fitted_output(clone(estimator), X, y, X[:30])
    assert_close(fitted_output(clone(estimator), Xs, y, Xs[:30]), ref, rtol=1e-10)
    assert_close(fitted_output(clone(estimator), blocks, yd, blocks[:30]), ref, rtol=1e-10)


@_quiet
def check_chunking_does_not_change_the_model(estimator: BaseEstimator) -> None:
    """One chunk, uneven chunks, a one-row last chunk: the same model to 1e-10."""
    X, y = suite_data(estimator)
    ref = fitted_output(clone(estimator), X, y, X[:30])
    for chunks in CHUNKINGS.values():
        Xd = da.from_array(X, chunks=chunks)
        got = fitted_output(clone(estimator), Xd, _labels_like(y, Xd), X[:30])
        assert_close(got, ref, rtol=1e-10)


@_quiet
def check_sample_weight_is_rows_repeated(estimator: BaseEstimator) -> None:
    """``fit`` with ``sample_weight`` (where it takes them) is the fit on the rows repeated:
    weights of 0 drop rows, 2 and 3 repeat them, on numpy rows and on dask rows whose
    weights are chunked otherwise (to 1e-10; 1e-7 for fits that iterate to a tolerance,
    whose two runs stop at points it does not tell apart)."""
    if "sample_weight" not in inspect.signature(estimator.fit).parameters:
        return
    if (
        "check_sample_weight_is_rows_repeated"
        in get_ddr_tags(estimator).checks.expected_failed_checks
    ):
        return  # the tags say why weights are not repeated rows there
    X, y = suite_data(estimator)
    w = np.resize(np.array([1, 0, 2, 1, 3, 1]), X.shape[0])
    repeat = np.repeat(np.arange(X.shape[0]), w)
    ref = fitted_output(clone(estimator), X[repeat], None if y is None else y[repeat], X[:30])
    n, d = X.shape
    rtol = 1e-7 if get_ddr_tags(estimator).fit.passes(n, d) is None else 1e-10
    got = fitted_output(clone(estimator), X, y, X[:30], sample_weight=w)
    assert_close(got, ref, rtol=rtol)
    Xd = da.from_array(X, chunks=(23, -1))
    wd = da.from_array(w, chunks=31)
    got = fitted_output(clone(estimator), Xd, _labels_like(y, Xd), X[:30], sample_weight=wd)
    assert_close(got, ref, rtol=rtol)


@_quiet
def check_translation_invariance(estimator: BaseEstimator) -> None:
    """The method the tags name (``translation_invariant``) gives the same output when the
    data are moved to a 1e8 offset (inputs at 1e8 keep ~8 of their 16 digits, so do the
    outputs)."""
    method = get_ddr_tags(estimator).translation_invariant
    if method is None:
        raise unittest.SkipTest(f"{type(estimator).__name__}'s model depends on the origin")
    X, y = suite_data(estimator)
    ref = fitted_output(clone(estimator), X, y, X[:30])
    shift = 1e8 * np.array([1.0, -1.0, 0.5])
    est = clone(estimator)
    got = fitted_output(est, X + shift, y, X[:30] + shift)
    assert method == output_method(est), (method, output_method(est))
    assert_close(got, ref, rtol=1e-6)


@_quiet
def check_integer_bool_and_float32_input(estimator: BaseEstimator) -> None:
    """int64, bool and float32 rows, as numpy, dask and xarray, give the model of the same
    values as float64 (or the same refusal)."""
    import xarray as xr

    for kind, form in KINDS:
        est = clone(estimator)
        X, y = suite_data(est)
        if kind == "bool":
            X = X > np.median(X, axis=0)
        values = np.round(X * 4) if kind == "int64" else X
        Xk = values.astype(kind)
        Xf = Xk.astype(np.float64)
        if kind == "bool" and not is_classifier(est):
            Xk[:3], Xf[:3] = ~Xk[:3], ~Xk[:3]  # no feature constant in every form
        if form == "dask":
            Xk = da.from_array(Xk, chunks=(40, -1))
        elif form == "xarray":
            Xk = xr.DataArray(Xk, dims=("sample", "feature"))
        try:
            ref = fitted_output(clone(estimator), Xf, y, Xf[:20])
        except ValueError as exc:  # e.g. singular covariance of bool data: the same refusal
            expected = str(exc).split(";")[0][:40]
            try:
                fitted_output(est, Xk, y, Xk[:20])
            except ValueError as got:
                assert expected in str(got), (kind, form, str(got))
            else:
                raise AssertionError(f"{kind} {form} input was not refused: {expected}") from None
            continue
        got = fitted_output(est, Xk, y, Xk[:20])
        assert_close(got, ref, rtol=1e-4 if kind == "float32" else 1e-10)


@_quiet
def check_output_follows_the_input_form(estimator: BaseEstimator) -> None:
    """numpy in, numpy out; dask in, lazy dask out; DataArray in, DataArray out with the
    sample dim and coordinate kept; all equal."""
    import xarray as xr

    est = clone(estimator)
    X, y = suite_data(est)
    est.fit(X, y) if takes_y(est) else est.fit(X)
    methods = [
        m
        for m in ("transform", "predict", "predict_proba", "score_samples")
        if callable(getattr(est, m, None))
    ]
    Xd = da.from_array(X, chunks=(30, -1))
    Xa = xr.DataArray(X, dims=("row", "feature"), coords={"row": np.arange(N) * 10})
    for m in methods:
        ref = getattr(est, m)(X)
        ref = ref[0] if isinstance(ref, tuple) else ref
        assert isinstance(ref, np.ndarray), m
        lazy = getattr(est, m)(Xd)
        assert isinstance(lazy, da.Array), m
        out = getattr(est, m)(Xa)
        assert isinstance(out, xr.DataArray) and out.dims[0] == "row", m
        np.testing.assert_array_equal(out["row"].values, Xa["row"].values)
        assert_close(lazy.compute() if ref.dtype.kind == "f" else ref, ref, rtol=1e-12)


@_quiet
def check_xarray_labels_aligned_by_coordinate(estimator: BaseEstimator) -> None:
    """Labels (or a second view) given as a DataArray are aligned to X by the sample
    coordinate, not by position; a coordinate that does not match is refused."""
    import xarray as xr

    X, y = suite_data(estimator)
    if y is None:
        raise unittest.SkipTest(f"{type(estimator).__name__} takes no labels")
    Xa = xr.DataArray(X, dims=("sample", "feature"), coords={"sample": np.arange(N) + 100})
    order = np.random.default_rng(1).permutation(N)
    ydims = ("sample",) if y.ndim == 1 else ("sample", "target")
    shuffled = xr.DataArray(y[order], dims=ydims, coords={"sample": Xa["sample"].values[order]})
    ref = fitted_output(clone(estimator), X, y, X[:30])
    assert_close(fitted_output(clone(estimator), Xa, shuffled, X[:30]), ref, rtol=1e-10)
    other = shuffled.assign_coords(sample=shuffled["sample"].values + 1)
    try:
        clone(estimator).fit(Xa, other)
    except ValueError as exc:
        assert "coordinate does not match X's" in str(exc), exc
    else:
        raise AssertionError("labels with another sample coordinate were accepted")


@_quiet
def check_nan_and_inf_refused_by_every_method(estimator: BaseEstimator) -> None:
    """NaN or infinity in rows that are only predicted, transformed or scored is refused as
    a fit refuses it (never class 0 with NaN probabilities): each method names how many
    values and rows of the block, which rows, and the first. Estimators that take NaN as
    missing values refuse infinity."""
    est = clone(estimator)
    X, y = suite_data(est)
    est.fit(X, y) if takes_y(est) else est.fit(X)
    nan_ok = get_tags(est).input_tags.allow_nan
    bad = X.copy()
    bad[41, 1] = np.inf
    if not nan_ok:
        bad[37, 0] = np.nan
    first = 41 if nan_ok else 37
    methods = [
        m
        for m in ("transform", "predict", "predict_proba", "predict_log_proba", "score_samples")
        if callable(getattr(est, m, None))
    ]
    assert methods, "no method to check"
    for m in methods:
        try:
            getattr(est, m)(da.from_array(bad, chunks=(30, -1))).compute()
        except ValueError as exc:
            text = str(exc)
        else:
            raise AssertionError(f"{m} accepted rows with NaN or infinity")
        assert "Input X contains" in text, (m, text)
        assert f"of the 30 rows 30-59 (the first at row {first})" in text, (m, text)
        assert "needs" in text, (m, text)
