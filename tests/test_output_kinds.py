"""The output-kind conformance suite (:mod:`ddr.testing.output_kinds`) over every registered
kind: registering a kind is what puts it under test."""

from __future__ import annotations

import pytest

from ddr.testing.output_kinds import check_output_kind, parametrize_with_output_kind_checks

pytest.importorskip("matplotlib")


@parametrize_with_output_kind_checks()
def test_output_kind_conforms(case, tmp_path):
    check_output_kind(case, tmp_path)
