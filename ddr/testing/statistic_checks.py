"""The conformance suite of mergeable statistics (:class:`ddr.stats.Statistic`).

Each check is a function of a statistic class that raises ``AssertionError`` when the class
breaks the contract every fit relies on (``merge`` associative and commutative, results
that do not depend on chunking, exact ``to_dict``/``from_dict``, two-pass accuracy on data
far from the origin, empty blocks as the identity of ``merge``, declared read-out dims).
The rows each check feeds a statistic are asked of the class
(:meth:`~ddr.stats.Statistic.check_data`: category codes, counts, a basis, ...)::

    from ddr.testing import parametrize_with_statistic_checks

    @parametrize_with_statistic_checks([MyStatistic])
    def test_my_statistic(statistic, check):
        check(statistic)
"""

from __future__ import annotations

import json
import unittest
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import dask
import dask.array as da
import numpy as np

from ddr.stats.base import CheckData, Statistic

__all__ = [
    "check_chunking_does_not_change_the_statistic",
    "check_empty_blocks_are_the_identity",
    "check_merge_is_associative_and_commutative",
    "check_offset_data_keep_their_digits",
    "check_readout_dims",
    "check_to_dict_round_trip",
    "parametrize_with_statistic_checks",
    "public_statistics",
    "statistic_checks",
]

#: rows of the suite's data, and the blocks the merge checks cut them into
N = 90
BLOCKS = (slice(0, 7), slice(7, 47), slice(47, 89), slice(89, 90))
#: chunkings a statistic must not notice, among them a one-row last chunk and an empty chunk
CHUNKINGS = {"one": (N,), "uneven": (7, 40, 13, 30), "one-row-last": (89, 1), "empty": (30, 0, 60)}
OFFSET = 1e8

StatisticCheck = Callable[[type[Statistic]], None]


# ------------------------------------------------------------------- registry
def public_statistics() -> list[type[Statistic]]:
    """Every public statistic of :mod:`ddr.stats` (``__all__``), sorted by name, then every
    statistic an installed plug-in registers (:func:`ddr.plugins.statistics`).

    Returns
    -------
    list of type
    """
    import ddr.stats
    from ddr import plugins

    own = [
        obj
        for name in sorted(ddr.stats.__all__)
        if isinstance(obj := getattr(ddr.stats, name), type)
        and issubclass(obj, Statistic)
        and obj is not Statistic
    ]
    return own + [cls for _, cls in sorted(plugins.statistics().items())]


def statistic_checks(statistic: type[Statistic]) -> Iterator[StatisticCheck]:
    """The checks of a statistic class, each a function of it.

    Parameters
    ----------
    statistic : type
        A subclass of :class:`ddr.stats.Statistic`.

    Yields
    ------
    callable
        ``check(statistic)``.
    """
    yield check_to_dict_round_trip
    yield check_merge_is_associative_and_commutative
    yield check_chunking_does_not_change_the_statistic
    yield check_offset_data_keep_their_digits
    yield check_empty_blocks_are_the_identity
    yield check_readout_dims


def parametrize_with_statistic_checks(statistics: Iterable[type[Statistic]]) -> Any:
    """A pytest parametrisation of every check of every statistic, as ``(statistic, check)``.

    Parameters
    ----------
    statistics : iterable of Statistic subclasses

    Returns
    -------
    decorator
        ``pytest.mark.parametrize`` with ids ``"Name-check_name"``.
    """
    import pytest

    cases = [(cls, check) for cls in statistics for check in statistic_checks(cls)]
    ids = [f"{cls.__name__}-{check.__name__}" for cls, check in cases]
    return pytest.mark.parametrize(("statistic", "check"), cases, ids=ids)


# ---------------------------------------------------------------------- helpers
def _data(statistic: type[Statistic], seed: int = 0) -> CheckData:
    return statistic.check_data(np.random.default_rng(seed), N)


def _of(statistic: type[Statistic], data: CheckData, rows: slice | None = None) -> Statistic:
    X = data.X if rows is None else data.X[rows]
    y = data.y if rows is None or data.y is None else data.y[rows]
    return statistic.spec(**data.options).from_block(X, y)


def _observed(stat: Statistic, names: Iterable[str] | None = None) -> dict[str, Any]:
    """What a statistic says: its read-outs (those that apply), or the fields of
    ``to_dict`` for a statistic without read-outs; or the attributes ``names``."""
    fields = {k: v for k, v in stat.to_dict().items() if k != "type"}
    if names is None and not type(stat).readouts:
        return fields
    out = {}
    for name in type(stat).readouts if names is None else names:
        if not hasattr(stat, name):
            out[name] = fields[name]
            continue
        try:
            attr = getattr(stat, name)
            out[name] = attr() if callable(attr) else attr
        except ValueError:  # a read-out that does not apply (covariance of a diagonal)
            continue
    return out


def assert_same_statistic(
    got: Statistic, want: Statistic, rtol: float = 1e-10, names: Iterable[str] | None = None
) -> None:
    """The same read-outs (or ``to_dict`` fields, or attributes ``names``), to ``rtol`` of
    each one's largest magnitude (labels and integers exactly)."""
    assert type(got) is type(want), (type(got).__name__, type(want).__name__)
    a, b = _observed(got, names), _observed(want, names)
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for name in sorted(b):
        x, y = np.asarray(a[name]), np.asarray(b[name])
        assert x.shape == y.shape, (name, x.shape, y.shape)
        if y.dtype.kind not in "fc":
            np.testing.assert_array_equal(x, y, err_msg=name)
            continue
        scale = np.max(np.abs(y[np.isfinite(y)]), initial=0.0)
        np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol * scale, err_msg=name)


# ----------------------------------------------------------------------- checks
def check_to_dict_round_trip(statistic: type[Statistic]) -> None:
    """``to_dict`` holds numpy arrays and JSON scalars only, and ``from_dict`` (and
    :func:`ddr.stats.statistic_from_dict`) rebuild the statistic exactly."""
    from ddr.stats import statistic_from_dict

    stat = _of(statistic, _data(statistic))
    d = stat.to_dict()
    assert d["type"] == statistic.__name__, d["type"]
    for name, value in d.items():
        if not isinstance(value, np.ndarray):
            try:
                json.dumps(value)
            except TypeError as exc:
                raise AssertionError(f"to_dict field {name!r} is not a JSON scalar") from exc
    for back in (statistic.from_dict(d), statistic_from_dict(d)):
        assert type(back) is statistic, type(back).__name__
        again = back.to_dict()
        assert sorted(again) == sorted(d), (sorted(again), sorted(d))
        for name, value in d.items():
            np.testing.assert_array_equal(np.asarray(again[name]), np.asarray(value), name)
            assert np.asarray(again[name]).dtype == np.asarray(value).dtype, name


def check_merge_is_associative_and_commutative(statistic: type[Statistic]) -> None:
    """Blocks merged in any order and any tree, two at a time or all at once
    (``merge_many``), give the statistic of all the rows (to round-off), and that is the
    statistic of the rows as one block."""
    data = _data(statistic)
    a, b, c, d = (_of(statistic, data, rows) for rows in BLOCKS)
    whole = _of(statistic, data)
    left = a.merge(b).merge(c).merge(d)
    for other in (
        a.merge(b.merge(c.merge(d))),
        d.merge(c).merge(b).merge(a),
        b.merge(a).merge(d.merge(c)),
        c.merge(a.merge(d)).merge(b),
        a.merge_many([b, c, d]),  # in one step, as the engine's merge tasks do
        c.merge_many([a, d, b]),
    ):
        assert_same_statistic(other, left)
    assert_same_statistic(left, whole)
    assert a.merge_many([]) is a


def check_chunking_does_not_change_the_statistic(statistic: type[Statistic]) -> None:
    """:func:`ddr.stats.compute` over dask rows in one chunk, uneven chunks, a one-row last
    chunk and with an empty chunk: the statistic of the rows as one block."""
    from ddr.stats import compute

    data = _data(statistic)
    whole = _of(statistic, data)
    spec = statistic.spec(**data.options)
    for name, chunks in CHUNKINGS.items():
        X = da.from_array(data.X, chunks=(chunks, -1))
        y = None if data.y is None else da.from_array(data.y, chunks=(chunks,))
        with dask.config.set(scheduler="sync"):
            got = compute(spec, X, y)
        try:
            assert_same_statistic(got, whole)
        except AssertionError as exc:
            raise AssertionError(f"chunks {name} {chunks}: {exc}") from None


def check_offset_data_keep_their_digits(statistic: type[Statistic]) -> None:
    """Rows on a 1e8 offset: the merge of blocks keeps the digits of one block (an update
    such as ``X^T X - n mu mu^T`` loses them all), and the fields the statistic declares
    invariant (centred sums, counts) are those of the rows at the origin."""
    data = _data(statistic)
    if not data.offset:
        raise unittest.SkipTest(f"{statistic.__name__} takes rows that cannot move (codes, counts)")
    shift = OFFSET * np.array([1.0, -1.0, 0.5, 2.0, -0.5])[: data.X.shape[1]]
    moved = CheckData(data.X + shift, data.y, data.options, data.invariant)
    whole = _of(statistic, moved)
    merged = _of(statistic, moved, BLOCKS[0])
    for rows in BLOCKS[1:]:
        merged = merged.merge(_of(statistic, moved, rows))
    # inputs at 1e8 keep ~8 of their 16 digits
    assert_same_statistic(merged, whole, rtol=1e-7)
    if data.invariant:
        at_origin = _of(statistic, data)
        assert_same_statistic(whole, at_origin, rtol=1e-6, names=data.invariant)


def check_empty_blocks_are_the_identity(statistic: type[Statistic]) -> None:
    """The statistic of no rows merges with any other, on either side, as the identity."""
    data = _data(statistic)
    whole = _of(statistic, data)
    empty = _of(statistic, data, slice(0, 0))
    assert_same_statistic(empty.merge(whole), whole)
    assert_same_statistic(whole.merge(empty), whole)
    assert_same_statistic(empty.merge(empty).merge(whole), whole)


def check_readout_dims(statistic: type[Statistic]) -> None:
    """Every read-out has declared dims (``readout_dims``), as many as its value has."""
    stat = _of(statistic, _data(statistic))
    for name in statistic.readouts:
        assert name in statistic.readout_dims, f"read-out {name!r} has no readout_dims"
        attr = getattr(stat, name)
        value = np.asarray(attr() if callable(attr) else attr)
        declared = statistic.readout_dims[name]
        assert len(declared) == value.ndim, (name, declared, value.shape)
        dims = statistic.dims_of(name, value.ndim, "feature")
        assert all(isinstance(d, str) and "{" not in d for d in dims), (name, dims)
