"""Estimator tags: what ddr asks of an estimator, declared once, checked when a class is
defined or registered (:mod:`ddr.tags`)."""

from __future__ import annotations

import sys
import types

import pytest
from sklearn.base import BaseEstimator, TransformerMixin

import ddr
from ddr.base import DDRMixin
from ddr.pipeline import registry
from ddr.tags import DDRTags, fixed_passes, get_ddr_tags, no_statistics
from ddr.testing import exported_estimators


def test_a_transformer_that_declares_nothing_fails_when_defined_naming_what_is_missing():
    with pytest.raises(TypeError) as err:

        class Forgetful(DDRMixin, TransformerMixin, BaseEstimator):
            def fit(self, X, y=None):
                return self

            def transform(self, X):
                return X

    text = str(err.value)
    assert "Forgetful does not declare what ddr must know of it" in text
    for fact in ("tags.fit.passes", "tags.fit.statistics", "tags.transformer.width"):
        assert fact in text


def test_an_estimator_that_declares_its_facts_is_accepted_and_asked():
    class Declared(DDRMixin, BaseEstimator):
        def __init__(self, *, k: int = 2) -> None:
            self.k = k

        def fit(self, X, y=None):
            return self

        def __ddr_tags__(self) -> DDRTags:
            tags = super().__ddr_tags__()
            tags.fit.passes = fixed_passes(self.k)
            tags.fit.statistics = no_statistics
            return tags

    assert get_ddr_tags(Declared).fit.passes(10, 3) == 2
    assert get_ddr_tags(Declared, k=5).fit.passes(10, 3) == 5
    assert get_ddr_tags(Declared(k=7)).fit.passes(10, 3) == 7
    assert get_ddr_tags(Declared).transformer is None  # no transform, no output width


def test_family_bases_are_checked_in_their_subclasses():
    class Family(DDRMixin, BaseEstimator):
        _abstract_estimator = True

        def fit(self, X, y=None):
            return self

    with pytest.raises(TypeError, match=r"tags\.fit\.passes"):

        class Member(Family):
            pass


def test_get_ddr_tags_refuses_what_is_not_a_ddr_estimator():
    from sklearn.decomposition import PCA

    with pytest.raises(TypeError, match="PCA is not a ddr estimator"):
        get_ddr_tags(PCA)
    with pytest.raises(TypeError, match="parameters are given with a class"):
        get_ddr_tags(ddr.PCA(), n_components=2)


def test_registration_refuses_an_estimator_whose_tags_lost_a_fact(monkeypatch):
    class Late(DDRMixin, BaseEstimator):
        def fit(self, X, y=None):
            return self

        def __ddr_tags__(self) -> DDRTags:
            tags = super().__ddr_tags__()
            tags.fit.passes = fixed_passes(1)
            tags.fit.statistics = no_statistics
            return tags

    monkeypatch.setattr(Late, "__ddr_tags__", lambda self: DDRTags())
    module = types.ModuleType("ddr_late")
    module.Late = Late
    monkeypatch.setitem(sys.modules, "ddr.late", module)
    monkeypatch.setitem(ddr._EXPORTS, "Late", "ddr.late")
    try:
        registry.refresh()
        assert "Late.fit" not in registry.ops()
        assert "tags.fit.passes" in registry.unavailable()["Late"]
    finally:
        monkeypatch.undo()
        registry.refresh()


@pytest.mark.parametrize("cls", exported_estimators(), ids=lambda c: c.__name__)
def test_every_export_declares_its_facts(cls):
    import inspect

    tags = get_ddr_tags(cls)
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert tags.fit.solve_params <= params, tags.fit.solve_params - params
    assert isinstance(tags.fit.mergeable(100, 3), bool)
    assert tags.fit.passes(100, 3) in (None, 1, 2, 3, 4, 5, 6)
    assert all(spec.cls.__name__ for spec, _ in tags.fit.statistics(3))
    if tags.fit.solve_params:  # parameters that enter only the solve: of a one-pass fit
        assert tags.fit.mergeable(100, 3) or tags.fit.searchable(100, 3)
    for method in (tags.translation_invariant, tags.loglik_attribute):
        assert method is None or isinstance(method, str)
    if tags.transformer is not None:
        assert tags.transformer.name(0).endswith("1")
