"""Bandwidth conventions and rules of thumb for kernel density estimation.

Two conventions (``bandwidth_scaling``; by default "none" for a number, "covariance" for a
rule of thumb or "cv"):

- ``"covariance"`` (scipy's ``gaussian_kde``): the kernel is stretched by the data covariance
  ``Sigma``: ``K_H(u) = |H|^(-1/2) K(|H^(-1/2) u|)`` with ``H = bandwidth^2 Sigma``.
  ``bandwidth`` is a dimensionless factor; "scott" is ``n_eff^(-1/(d+4))`` and "silverman"
  ``(n_eff (d+2) / 4)^(-1/(d+4))`` with ``n_eff = (sum w)^2 / sum w^2``. ``Sigma`` is the
  weighted covariance with scipy's ``aweights`` normalisation (``np.cov`` for equal weights).
  For the Gaussian kernel this is exactly ``scipy.stats.gaussian_kde``.
- ``"none"`` (seed 000, scikit-learn's ``KernelDensity``, R's ``density``):
  ``K_h(u) = h^-d K(|u| / h)``, ``bandwidth`` in the units of the data; "scott" and
  "silverman" are the same factors with ``n`` the number of rows, used as absolute bandwidths
  (scikit-learn's behaviour, sensible for standardised data).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self

import numpy as np

from ddr.stats._checks import check_block, check_weights
from ddr.stats.base import Statistic

__all__ = ["RULES", "SCALINGS", "WeightSums", "resolve_scaling", "rule_factor"]

RULES = ("scott", "silverman", "cv")
SCALINGS = ("covariance", "none")


def resolve_scaling(scaling: str | None, bandwidth: Any) -> str:
    """The convention used: the one named, else "none" for a number (a bandwidth in data
    units) and "covariance" for a rule of thumb or "cv"."""
    if scaling is not None:
        return scaling
    return "covariance" if isinstance(bandwidth, str) else "none"


def rule_factor(rule: str, n: float, d: int) -> float:
    """Scott's or Silverman's factor for ``n`` (effective) points in ``d`` dimensions."""
    if rule == "scott":
        return float(n ** (-1.0 / (d + 4)))
    if rule == "silverman":
        return float((n * (d + 2) / 4.0) ** (-1.0 / (d + 4)))
    raise ValueError(f"unknown bandwidth rule {rule!r}")  # pragma: no cover


@dataclasses.dataclass(frozen=True, eq=False)
class WeightSums(Statistic):
    """Rows, total weight and total squared weight: the effective sample size of scipy.

    Parameters
    ----------
    n_rows : int
    sum_w : float
        ``sum w`` (the number of rows when unweighted).
    sum_w2 : float
        ``sum w^2``.
    """

    n_rows: int
    sum_w: float
    sum_w2: float

    @classmethod
    def from_block(
        cls, X: np.ndarray, y: Any = None, sample_weight: np.ndarray | None = None
    ) -> Self:
        X = check_block(X)
        w = check_weights(sample_weight, X.shape[0])
        n = X.shape[0]
        if w is None:
            return cls(n, float(n), float(n))
        return cls(n, float(w.sum()), float(np.dot(w, w)))

    def merge(self, other: Self) -> Self:
        if not isinstance(other, WeightSums):
            raise TypeError(f"cannot merge WeightSums with {type(other).__name__}")
        return type(self)(
            self.n_rows + other.n_rows, self.sum_w + other.sum_w, self.sum_w2 + other.sum_w2
        )

    @property
    def n_eff(self) -> float:
        """Kish's effective sample size ``(sum w)^2 / sum w^2``."""
        return self.sum_w**2 / self.sum_w2 if self.sum_w2 > 0 else 0.0

    def aweights_denominator(self) -> float:
        """``V1 - V2 / V1``: the ddof=1 denominator of ``np.cov(..., aweights=w)``."""
        return self.sum_w - self.sum_w2 / self.sum_w

    def _arrays(self) -> dict[str, np.ndarray]:
        return {}

    def _scalars(self) -> dict[str, Any]:
        return {"n_rows": self.n_rows, "sum_w": self.sum_w, "sum_w2": self.sum_w2}


def default_cv_grid(reference: float, n: int = 16) -> np.ndarray:
    """Candidate bandwidths for ``"cv"``: ``reference * geomspace(1/8, 2, n)``."""
    return reference * np.geomspace(0.125, 2.0, n)
