"""Classes that are not what their entry points say, or lack a piece."""

from __future__ import annotations

from typing import Any

from sklearn.base import BaseEstimator

from ddr.cluster.backend import Backend
from ddr.pipeline.outputs import ZarrKind


class Untagged(BaseEstimator):
    """An estimator without ddr's tags."""

    def fit(self, X: Any, y: Any = None) -> Untagged:
        return self


class NotAStatistic:
    """Not a subclass of ddr.stats.Statistic."""


class Zarrish(ZarrKind):
    """An output kind under the name of ddr's own ``zarr``."""


class Half(Backend):
    """A backend that sets its kind but not its target."""

    kind = "half"
