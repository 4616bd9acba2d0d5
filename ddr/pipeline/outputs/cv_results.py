"""``kind: cv_results``: a grid search's ``cv_results_`` as a Zarr group, one row per
candidate (scikit-learn's layout, a table ``xarray.open_zarr(path).to_dataframe()`` reads).

Written from a searched fit step's ``search`` output (``from: nb.search``): variables along
the dim ``candidate``, named as scikit-learn's keys (``mean_test_score``,
``std_test_score``, ``rank_test_score``, ``split<k>_test_score``, ``mean_fit_time``, ...,
``param_<name>``: numbers where the grid gives numbers, else their text), and in the
group's attributes the exact candidates (``params``, JSON), the best one and how the search
was made (``ddr:cv_results``). The driver writes it whole; the completion marker comes last.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
from pydantic import Field

from ddr.pipeline.outputs.base import (
    CheckContext,
    OutputSpec,
    Probe,
    WriteContext,
    register_output_kind,
)
from ddr.pipeline.outputs.stores import StoreKind
from ddr.pipeline.plan import _a
from ddr.pipeline.reports import jsonable
from ddr.pipeline.spec_types import IfExists, Ref

if TYPE_CHECKING:
    from ddr.pipeline.plan import OutputPlan, ValueMeta

__all__ = ["CV_RESULTS_ATTR", "CvResultsKind", "CvResultsOutput", "cv_results_dataset"]

#: the group attribute that says what the search was (and that the group is its results)
CV_RESULTS_ATTR = "ddr:cv_results"


class CvResultsOutput(OutputSpec):
    """A grid search's results, one row per candidate, to a Zarr group."""

    kind: Literal["cv_results"]
    from_: Ref = Field(alias="from", description="A searched fit step's search (e.g. nb.search).")


@register_output_kind
class CvResultsKind(StoreKind):
    """``cv_results_`` of a searched fit step, one row per candidate."""

    name = "cv_results"
    spec = CvResultsOutput
    takes = "a searched fit step's `search` (`from: nb.search`)"
    writes = (
        "a Zarr v3 group along `candidate`: scikit-learn's `cv_results_` keys as variables "
        "(`param_<name>`, `split<k>_test_score`, means, stds, ranks, times), the candidates "
        "and the best one as JSON attributes"
    )

    def check(self, ctx: CheckContext, out: OutputPlan, metas: dict[str, ValueMeta]) -> None:
        meta = next(iter(metas.values()))
        if meta.kind != "search":
            head = out.spec.from_.partition(".")[0]
            ctx.problem(
                ("outputs", out.index, "from"),
                f"cv_results are written from a searched fit step's search (e.g. {head}.search, "
                f"a fit step with search:); {out.spec.from_!r} is {_a(meta.kind)}",
            )

    def write(self, w: WriteContext, out: OutputPlan) -> None:
        from ddr.io import write_zarr

        search = w.value(out.refs[next(iter(out.refs))])
        ds = cv_results_dataset(search)
        pending = write_zarr(
            ds,
            out.location,
            if_exists=cast("IfExists", w.if_exists(out)),
            inputs=[i.location for i in w.plan.inputs.values()],
            attrs={"title": f"{w.plan.pipeline.name}: {out.spec.from_}", **ds.attrs},
            fingerprint=out.fingerprint,
            provenance=w.provenance(out),
            compute=False,
            claim=w.claim(out),
        )
        w.compute([pending.delayed])
        pending.finalize()

    def recognizes(self, probe: Probe) -> int:
        return 2 if not probe.is_file and CV_RESULTS_ATTR in (probe.attrs or {}) else 0

    def examples(self) -> list[dict[str, Any]]:
        nb = {
            "op": "GaussianNB.fit",
            "inputs": {"X": "X", "y": "y"},
            "search": {"param_grid": {"var_smoothing": [1e-9, 1e-3, 0.1]}, "cv": 3},
        }
        return [{"output": {"from": "nb.search", "path": "cv.zarr"}, "steps": {"nb": nb}}]


def _param_column(values: list[Any], given: list[bool]) -> np.ndarray:
    """A ``param_<name>`` column: integers, or floats with NaN where a candidate does not set
    it, where every value set is a number; else each value's text ("" where not set)."""
    set_values = [v for v, g in zip(values, given, strict=True) if g]
    numbers = all(isinstance(v, Real) and not isinstance(v, bool) for v in set_values)
    if numbers and all(given) and all(isinstance(v, Integral) for v in set_values):
        return np.asarray(values, dtype=np.int64)
    if numbers:
        return np.asarray([v if g else np.nan for v, g in zip(values, given, strict=True)], float)
    return np.asarray(
        [str(v) if g else "" for v, g in zip(values, given, strict=True)], dtype=object
    )


def cv_results_dataset(search: Any) -> Any:
    """A fitted search's ``cv_results_`` as an xarray Dataset along ``candidate``.

    Parameters
    ----------
    search : fitted GridSearchCV
        ``ddr.model_selection.GridSearchCV`` (or scikit-learn's, with one scoring).

    Returns
    -------
    xarray.Dataset
        Every array of ``cv_results_`` but ``params`` as a variable of dim ``candidate``
        (``param_<name>`` as :func:`_param_column` makes it); attributes: ``params`` (the
        candidates, JSON) and ``ddr:cv_results`` (the estimator, scoring, folds, best index,
        score and parameters, and the search's cost when ddr's).
    """
    import xarray as xr

    results = search.cv_results_
    params: list[dict[str, Any]] = list(results["params"])
    variables: dict[str, Any] = {}
    for key, value in results.items():
        if key == "params":
            continue
        if key.startswith("param_"):
            name = key.removeprefix("param_")
            column = _param_column(
                [p.get(name) for p in params], [name in p for p in params]
            )  # fmt: skip
        else:
            column = np.asarray(value)
        variables[key] = ("candidate", column)
    plan = getattr(search, "plan_", None)
    about = {
        "estimator": type(search.estimator).__name__,
        "scoring": getattr(search, "scoring_", None) or search.scoring,
        "n_splits": int(search.n_splits_),
        "best_index": int(search.best_index_),
        "best_score": float(search.best_score_),
        "best_params": params[int(search.best_index_)],
        "search": None if plan is None else str(plan),
    }
    attrs = {"params": jsonable(params), CV_RESULTS_ATTR: jsonable(about)}
    return xr.Dataset(
        variables, coords={"candidate": np.arange(len(params), dtype=np.int64)}, attrs=attrs
    )
