"""The statistic suite: every public statistic of ``ddr.stats`` passes ddr's conformance
checks (:mod:`ddr.testing.statistic_checks`), by being public."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ddr.stats import Moments, Statistic
from ddr.testing import parametrize_with_statistic_checks, public_statistics, statistic_checks


@parametrize_with_statistic_checks(public_statistics())
def test_statistic(statistic, check):
    check(statistic)


def test_every_public_statistic_is_checked():
    names = {cls.__name__ for cls in public_statistics()}
    assert {"Moments", "ClassMoments", "CategoricalCounts", "Histogram", "PPCASums"} <= names
    assert "Statistic" not in names


@dataclasses.dataclass(frozen=True, eq=False)
class _ForgetsTheChanTerm(Moments):
    """Moments whose merge drops ``n_a n_b / n d d^T``: what the suite is there to catch."""

    def _merge(self, other):
        n = self.count + other.count
        mean = (self.count * self.mean + other.count * other.mean) / max(n, 1.0)
        return type(self)(n, mean, self.scatter + other.scatter, self.n_rows + other.n_rows)


@pytest.mark.parametrize(
    "check",
    [
        "check_merge_is_associative_and_commutative",
        "check_chunking_does_not_change_the_statistic",
        "check_offset_data_keep_their_digits",
    ],
)
def test_the_checks_catch_a_wrong_merge(check):
    checks = {c.__name__: c for c in statistic_checks(_ForgetsTheChanTerm)}
    with pytest.raises(AssertionError):
        checks[check](_ForgetsTheChanTerm)


def test_a_read_out_without_dims_is_refused_when_the_class_is_defined():
    with pytest.raises(TypeError, match=r"read-outs \['total'\] have no readout_dims entry"):

        @dataclasses.dataclass(frozen=True, eq=False)
        class _NoDims(Moments):
            readouts = ("total",)


def test_the_base_class_coerces_and_guards():
    m = Moments(3, [1, 2], [[1, 0], [0, 1]], 3.0)
    assert isinstance(m.count, float) and m.mean.dtype == np.float64 and m.n_rows == 3
    with pytest.raises(TypeError, match="cannot merge Moments with ClassSums"):
        m.merge(_class_sums())
    with pytest.raises(ValueError, match="cannot merge Moments of 2 features with Moments of 1"):
        m.merge(Moments(1, [0.0], [[0.0]], 1))


def _class_sums() -> Statistic:
    from ddr.stats import ClassSums

    return ClassSums(None, np.ones(1), np.ones((1, 2)))


def test_dims_of_asks_the_statistic():
    from ddr.stats import ClassMoments, Histogram

    assert ClassMoments.dims_of("means", 2, "gene") == ("class", "gene")
    assert Moments.dims_of("covariance", 2, "gene") == ("gene", "gene_2")
    assert Histogram.dims_of("counts", 3, "f") == ("class", "f", "bin")
    # a value with other dims than declared (the per-feature count of a diagonal form)
    assert Moments.dims_of("count", 1, "gene") == ("count_dim_0",)


def test_a_pipeline_labels_a_statistic_with_the_dims_it_declares():
    from ddr.pipeline.outputs.arrays import statistic_dataset
    from ddr.stats import ClassSums, Histogram

    X = np.random.default_rng(0).standard_normal((40, 3))
    y = np.arange(40) % 2
    sums = statistic_dataset(ClassSums.from_block(X, y), "gene")
    assert sums["sums"].dims == ("class", "gene")
    hist = statistic_dataset(Histogram.from_block(X, y), "gene")
    assert hist["counts"].dims == ("class", "gene", "bin")
    assert hist["bin_width"].dims == ("gene",)
    moments = statistic_dataset(Moments.from_block(X, diagonal=True, nan_policy="omit"), "g")
    assert moments["count"].dims == ("count_dim_0",)  # per-feature: not the declared scalar
    assert moments["mean"].dims == ("g",)
