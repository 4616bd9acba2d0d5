"""A fit that is one pass of statistics, as a value: the lazy statistics and the solve.

Estimators build a :class:`FitPlan` in ``_fit_plan``; ``fit`` runs it, and the pipeline runner
and :mod:`ddr.model_selection` compute the statistics of several plans over the same input in
one ``dask.compute`` before each solve. Re-exported by :mod:`ddr.base`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddr._merged_fit import MergedFitMixin
from ddr.stats._input import Rows

__all__ = ["FitPlan"]


@dataclass(frozen=True)
class FitPlan:
    """A fit that is one pass of statistics: the lazy statistics and the solve that follows.

    ``statistics`` is a dask ``Delayed`` (from :func:`ddr.stats.lazy`); ``finish`` takes its
    computed value, sets the fitted attributes on the estimator and returns it. Callers that
    fit several estimators on the same input (the pipeline runner) compute all their plans'
    statistics in one ``dask.compute``, so the input is read once, and pass an error of that
    compute to :meth:`explain`, which raises it again with the estimator's own advice when it
    has some (PCA given NaN points to PPCA).
    """

    statistics: Any
    finish: Callable[[Any], Any]
    local: bool = False
    on_error: Callable[[Exception], None] | None = None

    @classmethod
    def over(
        cls,
        rows: Rows,
        statistics: Any,
        finish: Callable[[Any], Any],
        on_error: Callable[[Exception], None] | None = None,
    ) -> FitPlan:
        """A plan over validated ``rows``: in-memory input is reduced in this process."""
        return cls(statistics, finish, local=not rows.is_lazy, on_error=on_error)

    def compute(self) -> Any:
        """The statistics' value. numpy input is reduced with local threads, never shipped to
        a distributed scheduler that happens to be the default."""
        import dask

        try:
            (value,) = dask.compute(self.statistics, scheduler="threads" if self.local else None)
        except Exception as exc:
            self.explain(exc)
            raise
        return value

    def explain(self, exc: Exception) -> None:
        """Raise ``exc`` again with the estimator's advice, if it has some; else return."""
        if self.on_error is not None:
            self.on_error(exc)

    def solve(self, value: Any) -> Any:
        """``finish(value)``: the solve on the client, on one BLAS thread unless the
        statistics are wide. A d x d solve up to d = 1024 is no faster on more threads, and a
        threaded BLAS in the client competes with the workers of a local cluster for the same
        cores (eigh of 100 x 100: 1.2 ms on one thread, 11.6 ms on two on a busy 2-core
        machine)."""
        if _n_features(value) > _THREADED_SOLVE_FEATURES:
            return _keep_statistics(self.finish(value), value)
        from ddr.stats.engine import one_blas_thread

        with one_blas_thread():
            return _keep_statistics(self.finish(value), value)

    def run(self) -> Any:
        """Compute the statistics and finish the fit; returns the fitted estimator."""
        return self.solve(self.compute())


def _keep_statistics(fitted: Any, value: Any) -> Any:
    """``fitted`` keeping the statistics it was solved from where its class merges them
    (:class:`ddr._merged_fit.MergedFitMixin`: ``partial_fit``, :func:`ddr.merge_fits`)."""
    if isinstance(fitted, MergedFitMixin) and fitted._merges(fitted.n_features_in_):
        setattr(fitted, fitted._statistics_attr, value)
    return fitted


#: statistics wider than this are solved with the client's threaded BLAS (see FitPlan.solve)
_THREADED_SOLVE_FEATURES = 1024


def _n_features(value: Any) -> int:
    """The widest ``n_features`` of a statistic or a tuple of them (0 if none says)."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    return max((int(getattr(v, "n_features", 0) or 0) for v in values), default=0)
