"""The units of outputs, from the units of the data (CF's ``units`` attribute).

What an output is in follows from what the data are in, by a power of the data's units:

- 1: the data's units (a mean, a class mean, scores of unit-vector components, a
  reconstruction, a cluster centre, a bandwidth);
- 2: units squared (a variance, a covariance, ``explained_variance_``);
- 0: none, ``"1"`` (unit vectors such as PCA's ``components_``, variance ratios,
  probabilities, counts, correlations, whitened scores);
- -1: inverse units (CCA's weights, LDA's scalings: they map the data to dimensionless
  variates);
- ``None``: not stated, where ddr cannot say (a map in the space of feature weights whose own
  units ddr does not know, a log-density).

Each estimator declares the power of every attribute :meth:`ddr.base.DDRMixin.as_xarray`
gives, once, beside the attribute's dims (``DDRTags.xarray_units`` beside
``DDRTags.xarray_dims``), and each method the power of its output where it computes it
(``map_rows(units=...)``); the pipeline's Zarr outputs are those same DataArrays. This
module turns a power and the data's units into a units string in the grammar of udunits
(what CF asks for):

- power 1 gives the data's units as they are; power 0 gives ``"1"``;
- units that are a product of symbols with integer powers (``K``, ``m s-1``,
  ``kg m-2 s-1``) get their powers multiplied, CF's own spelling of canonical units:
  ``K2``, ``m2 s-2``, ``K-1``, ``kg2 m-4 s-2``;
- any other units are put in parentheses with udunits' ``^``: ``(W/m^2)^2``, ``(%)^2``,
  ``(1e-3 kg/kg)^-1``;
- units with a reference time (``days since 2000-01-01``) are stated for power 1 only (a
  variance of dates has no such spelling).

Data without a ``units`` attribute give outputs without one (not even ``"1"``): ddr says
nothing of units it was not told.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["DataUnits", "common_units", "data_units", "power_units", "units_of", "with_units"]

#: what a fit's data were in: one units string (a DataArray), one per data variable (a
#: Dataset, each variable a block of features), or None (not known)
DataUnits = str | Mapping[str, str | None] | None

#: a udunits symbol with an optional integer power: ``K``, ``m2``, ``s-1``
_FACTOR = re.compile(r"^([A-Za-z_]+)([+-]?[0-9]+)?$")


def power_units(units: str | None, power: int | None) -> str | None:
    """``units`` raised to ``power``, spelt for udunits (see the module docstring).

    Parameters
    ----------
    units : str or None
        The data's units.
    power : int or None
        The power; None: not stated.

    Returns
    -------
    str or None
        None when ``units`` or ``power`` is None, or when the power of units with a
        reference time is asked.
    """
    if units is None or power is None:
        return None
    if power == 0 or units == "1":
        return "1"
    if power == 1:
        return units
    if " since " in f" {units.lower()} ":
        return None
    factors = [_FACTOR.match(f) for f in units.split()]
    if all(factors):
        powers: dict[str, int] = {}  # a symbol twice (kg kg-1) is one factor
        for m in factors:
            assert m is not None  # for the type checker: all() above
            powers[m.group(1)] = powers.get(m.group(1), 0) + int(m.group(2) or 1) * power
        out = [s if p == 1 else f"{s}{p}" for s, p in powers.items() if p]
        return " ".join(out) or "1"
    return f"({units})^{power}"


def units_of(power: int | None, data: DataUnits) -> DataUnits:
    """The units of an output ``power`` of the data's units ``data``: one string, or one
    per data variable of a Dataset fit (None for a variable without units)."""
    if data is None or power is None:
        return None
    if isinstance(data, str):
        return power_units(data, power)
    return {var: power_units(u, power) for var, u in data.items()}


def common_units(units: DataUnits) -> str | None:
    """The units of an output over every variable of a Dataset fit (scores of a
    multivariate EOF analysis): the variables' units where they all agree, else None."""
    if units is None or isinstance(units, str):
        return units
    found = set(units.values())
    if len(found) != 1:
        return None
    return next(iter(found))


def data_units(template: Any) -> DataUnits:
    """What the data of a fit are in: a DataArray's ``units`` attribute, or each data
    variable's for a Dataset (None where there is none, or nothing at all)."""
    if template is None:
        return None
    if hasattr(template, "data_vars"):
        units = {str(v): _units_attr(template[v]) for v in template.data_vars}
        return units if any(u is not None for u in units.values()) else None
    return _units_attr(template)


def with_units(attrs: Mapping[str, Any] | None, units: DataUnits) -> dict[str, Any]:
    """``attrs`` with ``units`` added where they are known (a Dataset's units merged to one
    string, :func:`common_units`)."""
    out = dict(attrs or {})
    said = common_units(units)
    if said is not None:
        out["units"] = said
    return out


def _units_attr(arr: Any) -> str | None:
    units = getattr(arr, "attrs", {}).get("units")
    if not isinstance(units, str) or not units.strip():
        return None
    return units.strip()
