"""ddr-extrema: a plug-in package for ddr, registered through entry points (pyproject.toml).

- :class:`~ddr_extrema.extrema.Extrema`: the largest absolute value of each feature, a
  mergeable statistic (op ``extrema``);
- :class:`~ddr_extrema.scaler.MaxAbsScaler`: scales each feature by it, in one pass (ops
  ``MaxAbsScaler.fit``, ``MaxAbsScaler.transform``, ...);
- :class:`~ddr_extrema.table.TableKind`: small 1-D values as the columns of a CSV file
  (``kind: table``);
- :class:`~ddr_extrema.lsf.LSF`: workers as LSF jobs through dask-jobqueue's ``LSFCluster``
  (``kind: lsf``).

Nothing here registers itself: the entry points are the registration.
"""

from ddr_extrema.extrema import Extrema
from ddr_extrema.lsf import LSF
from ddr_extrema.scaler import MaxAbsScaler
from ddr_extrema.table import TableKind, TableOutput

__all__ = ["LSF", "Extrema", "MaxAbsScaler", "TableKind", "TableOutput"]
