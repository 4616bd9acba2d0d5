"""Helpers for tests of code built on ddr, and ddr's public conformance suites.

- :func:`counting_dask_array` / :class:`CountingArray`: count how often the data is read;
- :func:`start_s3_server` / :class:`S3Server`: a real S3 endpoint on loopback (moto's);
- :func:`parametrize_with_checks` and :func:`estimator_checks`: the checks every ddr
  estimator passes (scikit-learn's ``check_estimator``, parameter validation, save/load,
  one-pass plans, chunking, a 1e8 offset, int/bool/float32, numpy/dask/xarray, xarray
  labels, NaN refused), in the manner of scikit-learn's ``parametrize_with_checks``;
- :func:`parametrize_with_statistic_checks` and :func:`statistic_checks`: the checks every
  mergeable statistic passes (merge associative and commutative, chunking, ``to_dict``
  round trip, 1e8 offset, empty blocks, read-out dims);
- :func:`parametrize_with_output_kind_checks` and :func:`check_output_kind`: what every
  registered output kind does (write, status and fingerprint, ``ddr inspect``, resume, a
  run killed mid-write leaves it incomplete);
- :func:`parametrize_with_backend_checks` and :func:`backend_checks`: what every registered
  cluster backend does without starting anything (its example validates, a misspelled
  keyword is named, the dry run writes and starts nothing, the schema lists it, the memory
  a worker gets is known before start).

A plug-in package runs the same suites on its own classes (see the development guide).
"""

from ddr.testing.backend_checks import (
    backend_checks,
    parametrize_with_backend_checks,
    registered_backends,
)
from ddr.testing.counting import CountingArray, counting_dask_array
from ddr.testing.estimator_checks import (
    estimator_checks,
    exported_estimators,
    parametrize_with_checks,
    suite_data,
    suite_instance,
)
from ddr.testing.output_kinds import (
    OutputKindCase,
    check_output_kind,
    output_kind_cases,
    parametrize_with_output_kind_checks,
)
from ddr.testing.s3 import (
    BUCKET,
    REGION,
    S3Server,
    set_environ,
    start_s3_server,
    stop_s3_server,
)
from ddr.testing.statistic_checks import (
    parametrize_with_statistic_checks,
    public_statistics,
    statistic_checks,
)

__all__ = [
    "BUCKET",
    "REGION",
    "CountingArray",
    "OutputKindCase",
    "S3Server",
    "backend_checks",
    "check_output_kind",
    "counting_dask_array",
    "estimator_checks",
    "exported_estimators",
    "output_kind_cases",
    "parametrize_with_backend_checks",
    "parametrize_with_checks",
    "parametrize_with_output_kind_checks",
    "parametrize_with_statistic_checks",
    "public_statistics",
    "registered_backends",
    "set_environ",
    "start_s3_server",
    "statistic_checks",
    "stop_s3_server",
    "suite_data",
    "suite_instance",
]
