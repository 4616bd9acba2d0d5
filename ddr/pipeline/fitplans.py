"""Calling estimators from the runner: arguments by role, and one-pass fit plans.

:func:`fit_plan` asks an estimator for its :class:`ddr.base.FitPlan` (the one-pass fit
protocol). Generative classifiers (naive Bayes, QDA, LDA) whose class does not implement
``_fit_plan`` yet get one built here from the hooks their base class already has
(``_statistics``, ``_store``); once ``BaseGenerativeClassifier._fit_plan`` exists it is used
instead and this fallback is never reached.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ddr.base import FitPlan

__all__ = ["call", "call_kwargs", "fit_plan"]


def _accepts(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _sample_dim(args: dict[str, Any]) -> Any:
    X = args.get("X")
    dims = getattr(X, "dims", None)
    return dims[0] if dims else None


def _aligned(args: dict[str, Any]) -> dict[str, Any]:
    """1-D per-sample arrays named along X's sample dim (labels stored as ``(index,)``), and
    variable-length strings (numpy's StringDType, what Zarr v3 string arrays read as) as
    object arrays of str, the string labels the estimators take."""
    sdim = _sample_dim(args)
    out = {}
    for role, value in args.items():
        dims = getattr(value, "dims", None)
        if (
            sdim is not None
            and role != "X"
            and dims is not None
            and len(dims) == 1
            and dims[0] != sdim
        ):
            value = value.rename({dims[0]: sdim})
        if role != "X" and getattr(getattr(value, "dtype", None), "kind", None) == "T":
            value = value.astype(object)
        out[role] = value
    return out


def call_kwargs(fn: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``fn`` from role values (and ``sample_dim`` when it takes one)."""
    kwargs = _aligned(args)
    sdim = _sample_dim(args)
    if sdim is not None and _accepts(fn, "sample_dim"):
        kwargs["sample_dim"] = sdim
    return kwargs


def call(est: Any, method: str, args: dict[str, Any]) -> Any:
    """``est.<method>(**roles)`` with roles as keywords (``X=``, ``y=``, ``model`` dropped)."""
    fn = getattr(est, method)
    roles = {k: v for k, v in args.items() if k != "model"}
    return fn(**call_kwargs(fn, roles))


def fit_plan(est: Any, args: dict[str, Any]) -> FitPlan | None:
    """The estimator's one-pass fit plan for these arguments, or None (a multi-pass fit)."""
    kwargs = call_kwargs(est.fit, args)
    own = getattr(est, "_fit_plan", None)
    if own is not None:
        rest = dict(kwargs)
        plan = own(rest.pop("X"), **rest)
        if plan is not None:
            return plan
    if _is_generative(est):
        return _generative_plan(est, kwargs)
    return None


def _is_generative(est: Any) -> bool:
    try:
        from ddr.naive_bayes._base import BaseGenerativeClassifier
    except ImportError:
        return False
    # only where ``fit`` is the base class's (DiscriminantBase.fit only delegates to it): a
    # subclass whose fit does more first (KernelNB chooses its algorithm) is fitted by fit
    return (
        isinstance(est, BaseGenerativeClassifier)
        and type(est).fit.__qualname__ in _BASE_FITS
        and all(hasattr(est, h) for h in ("_statistics", "_store", "_validate_y"))
    )


_BASE_FITS = ("BaseGenerativeClassifier.fit", "DiscriminantBase.fit")


def _generative_plan(est: Any, kwargs: dict[str, Any]) -> FitPlan:
    """``BaseGenerativeClassifier.fit`` split into its lazy pass and its solve."""
    from ddr.stats import lazy

    X, y = kwargs["X"], kwargs.get("y")
    sample_weight = kwargs.get("sample_weight")
    sample_dim = kwargs.get("sample_dim")
    if hasattr(est, "_forget"):
        est._forget()
    est._check_params()
    rows = est._rows(X, reset=True, sample_dim=sample_dim, dtype=est._fit_dtype)
    y = est._validate_y(y, rows)
    specs = est._statistics()
    data = est._transform_input(rows.data)
    statistics = lazy(list(specs.values()), data, y, sample_weight)

    def finish(value: Any) -> Any:
        # a single statistic arrives when a single-form request of the same spec shares the
        # dask key (ddr.stats.engine's final key does not include the form)
        value = value if isinstance(value, tuple) else (value,)
        stats = dict(zip(specs, value, strict=True))
        counts = est._class_counts(stats)
        name = type(est).__name__
        if not np.any(counts > 0):
            raise ValueError(
                f"{name}: the sample weights are all zero; at least one sample needs a "
                "positive weight"
            )
        classes = np.asarray(next(iter(stats.values())).classes)
        seen = classes[counts > 0]
        if seen.shape[0] < 2:
            raise ValueError(
                f"{name} needs samples of at least 2 classes to fit; got {seen.shape[0]} class "
                f"with samples ({seen.tolist()})"
            )
        est._store(stats)
        return est

    return FitPlan(statistics, finish)
