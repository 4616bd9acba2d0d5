"""ddr-extrema's own tests: ddr's conformance suites (ddr.testing) on the classes the package
registers, picked from ddr's registries, where the entry points put them."""

from __future__ import annotations

from ddr.testing import (
    check_output_kind,
    exported_estimators,
    output_kind_cases,
    parametrize_with_backend_checks,
    parametrize_with_checks,
    parametrize_with_output_kind_checks,
    parametrize_with_statistic_checks,
    public_statistics,
    registered_backends,
    suite_instance,
)


def _ours(classes: list[type]) -> list[type]:
    return [cls for cls in classes if cls.__module__.startswith("ddr_extrema.")]


ESTIMATORS = _ours(exported_estimators())
STATISTICS = _ours(public_statistics())
TABLES = [case for case in output_kind_cases() if case.kind == "table"]
BACKENDS = _ours(registered_backends())


def test_the_registries_hold_the_plugin_classes():
    assert [cls.__name__ for cls in ESTIMATORS] == ["MaxAbsScaler"]
    assert [cls.__name__ for cls in STATISTICS] == ["Extrema"]
    assert [str(case) for case in TABLES] == ["table-0", "table-1"]
    assert [cls.kind for cls in BACKENDS] == ["lsf"]


@parametrize_with_checks([suite_instance(cls) for cls in ESTIMATORS])
def test_estimator(estimator, check):
    check(estimator)


@parametrize_with_statistic_checks(STATISTICS)
def test_statistic(statistic, check):
    check(statistic)


@parametrize_with_output_kind_checks(TABLES)
def test_output_kind(case, tmp_path):
    check_output_kind(case, tmp_path)


@parametrize_with_backend_checks(BACKENDS)
def test_backend(backend, check, tmp_path):
    check(backend, tmp_path)
