"""The op registry: every exported estimator is an op with the methods it has, found from
``ddr._EXPORTS`` (so estimators that land later need no change), parameters checked early."""

from __future__ import annotations

import importlib
import inspect
import sys
import types

import pytest
from sklearn.base import BaseEstimator, TransformerMixin

import ddr
from ddr.base import DDRMixin
from ddr.pipeline import registry
from ddr.tags import DDRTags, fixed_passes, no_statistics


def exported_estimators():
    out = {}
    for name, module in ddr._EXPORTS.items():
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if inspect.isclass(obj) and hasattr(obj, "fit"):
            out[name] = obj
    return out


def test_every_exported_estimator_is_an_op_with_its_methods():
    ops = registry.ops()
    estimators = exported_estimators()
    assert {"PCA", "GaussianNB", "QuadraticDiscriminantAnalysis"} <= set(estimators)
    for name, cls in estimators.items():
        assert f"{name}.fit" in ops
        for method in registry.APPLY_METHODS:
            assert (f"{name}.{method}" in ops) == callable(getattr(cls, method, None)), method
        assert (f"{name}.fit_transform" in ops) == hasattr(cls, "transform")
    for name in ("moments", "class_moments", "categorical_counts", "histogram", "load"):
        assert name in ops


def test_roles_come_from_the_signatures():
    nb = registry.get_op("GaussianNB.fit")
    assert [(r.name, r.required, r.ndim) for r in nb.roles] == [
        ("X", True, 2),
        ("y", True, 1),
        ("sample_weight", False, 1),
    ]
    assert registry.get_op("PCA.fit").role("y").required is False
    transform = registry.get_op("PCA.transform")
    assert [r.name for r in transform.roles] == ["model", "X"]
    assert registry.get_op("GaussianNB.score").outputs == {"value": "metric"}
    assert registry.get_op("class_moments").role("y").required is True
    assert "nan_policy" in registry.get_op("moments").params


class LateEstimator(DDRMixin, TransformerMixin, BaseEstimator):
    """An estimator that appears after the registry was first built."""

    def __init__(self, *, scale: float = 1.0) -> None:
        self.scale = scale

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = fixed_passes(0)
        tags.fit.statistics = no_statistics
        tags.transformer.width = lambda n_samples, n_features: n_features
        return tags

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X

    def impute(self, X):
        return X


def test_an_estimator_added_later_registers_with_no_change(monkeypatch):
    module = types.ModuleType("ddr_late_estimator")
    module.LateEstimator = LateEstimator
    monkeypatch.setitem(sys.modules, "ddr.late_estimator", module)
    monkeypatch.setitem(ddr._EXPORTS, "LateEstimator", "ddr.late_estimator")
    try:
        ops = registry.refresh()
        assert {
            "LateEstimator.fit",
            "LateEstimator.fit_transform",
            "LateEstimator.transform",
            "LateEstimator.impute",
        } <= set(ops)
        assert "LateEstimator.predict" not in ops
        assert list(ops["LateEstimator.fit"].params) == ["scale"]
    finally:
        monkeypatch.undo()
        registry.refresh()
    assert "LateEstimator.fit" not in registry.ops()


def test_missing_modules_are_reported_not_fatal(monkeypatch):
    monkeypatch.setitem(ddr._EXPORTS, "NotYet", "ddr.not_yet_written")
    try:
        registry.refresh()
        assert "NotYet" in registry.unavailable()
        assert "PCA.fit" in registry.ops()
    finally:
        monkeypatch.undo()
        registry.refresh()


@pytest.mark.parametrize(
    ("op", "params", "problem"),
    [
        ("PCA.fit", {"n_component": 2}, "unknown parameter 'n_component' for PCA (did you mean"),
        ("KernelPCA.fit", {"n_components": "two"}, "The 'n_components' parameter of KernelPCA"),
        ("GaussianNB.fit", {"var_smoothing": -1}, "The 'var_smoothing' parameter of GaussianNB"),
        ("moments", {"nan_policy": "drop"}, "The 'nan_policy' parameter of moments must be"),
        ("PPCA.fit", {"solver": "bogus"}, "The 'solver' parameter of PPCA must be a str among"),
        ("KernelDensity.fit", {"kernel": "bogus"}, "The 'kernel' parameter of KernelDensity"),
        ("histogram", {"n_bins": 4}, "The 'n_bins' parameter of histogram must be an int"),
        (
            "LinearDiscriminantAnalysis.fit",
            {"shrinkage": 0.5},
            "The 'shrinkage' parameter of LinearDiscriminantAnalysis must be None with",
        ),
        ("load", {}, "missing required parameter 'path'"),
    ],
)
def test_parameters_are_checked_before_any_data(op, params, problem):
    messages = [m for _, m in registry.check_params(registry.get_op(op), params)]
    assert any(m.startswith(problem) for m in messages), messages


def test_good_parameters_pass():
    assert registry.check_params(registry.get_op("PCA.fit"), {"n_components": 0.9}) == []
    assert (
        registry.check_params(
            registry.get_op("KernelPCA.fit"), {"n_components": 2, "kernel": "rbf"}
        )
        == []
    )


# ------------------------------------------------------------- renamed parameters
def _renamed_pipeline(tmp_path, with_: str) -> str:
    import numpy as np
    import xarray as xr

    if not (tmp_path / "d.zarr").exists():
        X = np.random.default_rng(0).standard_normal((50, 4))
        xr.Dataset({"X": (("sample", "feature"), X)}).to_zarr(
            tmp_path / "d.zarr", zarr_format=3, consolidated=False
        )
    path = tmp_path / f"p{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(
        "ddr: 1\n"
        "name: renamed\n"
        "inputs:\n"
        f"  X: {{path: {tmp_path / 'd.zarr'}, array: X}}\n"
        "steps:\n"
        "  pca:\n"
        "    op: PCA.fit\n"
        "    inputs: {X: X}\n"
        f"    with: {with_}\n"
        f"outputs:\n  - {{kind: model, from: pca, path: {tmp_path / 'pca.zarr'}}}\n"
    )
    return str(path)


def test_old_parameter_names_in_with_warn_at_their_place_and_run_as_the_new(tmp_path):
    """``with: {solver: exact, n_power_iter: 2}`` plans as ``{svd_solver: full,
    iterated_power: 2}`` (the same fingerprint), one FutureWarning per old name or value at
    its line and column."""
    import warnings

    from ddr.config.errors import PipelineError
    from ddr.pipeline import plan_pipeline

    old = _renamed_pipeline(tmp_path, "{n_components: 2, solver: exact, n_power_iter: 2}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = plan_pipeline(old)
    said = sorted(str(w.message) for w in caught if w.category is FutureWarning)
    assert len(said) == 3, said
    assert said[0].startswith(f"{old}:9:29: PCA: the parameter 'solver' is now called")
    assert said[1].startswith(f"{old}:9:37: PCA: svd_solver='exact' is now called")
    assert said[2].startswith(f"{old}:9:44: PCA: the parameter 'n_power_iter' is now called")
    step = plan.steps["pca"]
    assert step.spec.with_ == {"n_components": 2, "svd_solver": "full", "iterated_power": 2}
    new = _renamed_pipeline(tmp_path, "{n_components: 2, svd_solver: full, iterated_power: 2}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert plan_pipeline(new).steps["pca"].fingerprint == step.fingerprint
    both = _renamed_pipeline(tmp_path, "{solver: full, svd_solver: full}")
    with pytest.raises(PipelineError, match="got both 'solver' and 'svd_solver'"):
        plan_pipeline(both)
    bad = _renamed_pipeline(tmp_path, "{solver: bogus}")
    with pytest.warns(FutureWarning), pytest.raises(PipelineError) as err:
        plan_pipeline(bad)
    assert f"{bad}:9:20: The 'svd_solver' parameter of PCA must be" in str(err.value)
