"""The common estimator suite: every estimator ddr exports is checked here, by being exported.

The checks are ddr's public conformance suite (:mod:`ddr.testing.estimator_checks`), run
over every estimator class of ``ddr._EXPORTS`` with the parameters its tags give for small
data; what a check needs to know of an estimator is asked of it (scikit-learn's tags, its
ddr tags, ``fit``'s signature). No table of names is kept here.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from sklearn.base import is_classifier
from sklearn.utils import get_tags

from ddr.testing import (
    counting_dask_array,
    exported_estimators,
    parametrize_with_checks,
    suite_instance,
)

ESTIMATORS = [suite_instance(cls) for cls in exported_estimators()]


@parametrize_with_checks(ESTIMATORS)
def test_estimator(estimator, check):
    check(estimator)


def test_one_pass_fits_share_one_read():
    """Every export's one-pass fit of the same input, computed together: X is read once."""
    rng = np.random.default_rng(3)
    X = np.abs(rng.standard_normal((120, 3))).round(0) + np.arange(120)[:, None] % 3
    y = np.arange(120) % 3
    arr, counter = counting_dask_array(X, chunks=(30, -1))
    yd = da.from_array(y, chunks=(arr.chunks[0],))
    plans = {}
    with dask.config.set(scheduler="threads"):
        for est in ESTIMATORS:
            if get_tags(est).target_tags.required and not is_classifier(est):
                continue  # a second view is another input
            plan = est._fit_plan(arr, yd if is_classifier(est) else None)
            if plan is not None:
                plans[type(est).__name__] = plan
        assert {"GaussianDensity", "CategoricalDensity", "KernelDensity", "GaussianNB"} <= set(
            plans
        )
        values = dask.compute(*[p.statistics for p in plans.values()])
    assert counter.passes == 1.0
    for plan, value in zip(plans.values(), values, strict=True):
        plan.finish(value)
