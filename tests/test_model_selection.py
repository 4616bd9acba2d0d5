"""Model selection in two passes: scores against scikit-learn's GridSearchCV and
cross_validate on the same folds, against the loop of ddr fits, the passes counted, hashed
folds' chunking invariance, the input forms, the refit, and bad input."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from sklearn import decomposition as skdec
from sklearn import discriminant_analysis as skda
from sklearn import naive_bayes as sknb
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.model_selection import GridSearchCV as SkGridSearchCV
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.model_selection import cross_validate as sk_cross_validate

import ddr
from ddr.model_selection import GridSearchCV, HashKFold, cross_validate
from ddr.testing import counting_dask_array

TOL = 1e-10


def _classes(n=300, d=4, seed=1):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return rng.normal(size=(n, d)) + 0.7 * y[:, None], y


def _correlated(n=400, d=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 5.0


def _counts(n=300, d=5, seed=2):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return rng.poisson(2 + y[:, None], size=(n, d)), y


def assert_same_results(ours, ref, n_splits):
    for k in range(n_splits):
        key = f"split{k}_test_score"
        np.testing.assert_allclose(ours.cv_results_[key], ref.cv_results_[key], rtol=0, atol=TOL)
    for key in ("mean_test_score", "std_test_score"):
        np.testing.assert_allclose(ours.cv_results_[key], ref.cv_results_[key], rtol=0, atol=TOL)
    np.testing.assert_array_equal(
        ours.cv_results_["rank_test_score"], ref.cv_results_["rank_test_score"]
    )
    assert ours.cv_results_["params"] == ref.cv_results_["params"]
    assert ours.best_params_ == ref.best_params_
    assert ours.best_index_ == ref.best_index_
    assert abs(ours.best_score_ - ref.best_score_) <= TOL


# ------------------------------------------------------------- against scikit-learn
CASES = {
    "PCA n_components": (
        ddr.PCA(), skdec.PCA(), {"n_components": [1, 2, 3, 4, 5]}, "correlated", None
    ),
    "GaussianNB var_smoothing": (
        ddr.GaussianNB(), sknb.GaussianNB(), {"var_smoothing": [1e-9, 1e-3, 0.1, 1.0, 3.0]},
        "classes", None,
    ),
    "QDA reg_param": (
        ddr.QuadraticDiscriminantAnalysis(), skda.QuadraticDiscriminantAnalysis(),
        {"reg_param": [0.0, 0.1, 0.5, 0.9]}, "classes", None,
    ),
    "LDA shrinkage": (
        ddr.LinearDiscriminantAnalysis(solver="lsqr"),
        skda.LinearDiscriminantAnalysis(solver="lsqr"),
        {"shrinkage": [None, 0.1, 0.5, 0.99, "auto"]}, "classes", None,
    ),
    "MultinomialNB alpha": (
        ddr.MultinomialNB(), sknb.MultinomialNB(), {"alpha": [0.01, 0.1, 1.0, 10.0, 100.0]},
        "counts", None,
    ),
    "GaussianNB neg_log_loss": (
        ddr.GaussianNB(), sknb.GaussianNB(), {"var_smoothing": [1e-9, 1e-2, 0.3, 3.0]},
        "classes", "neg_log_loss",
    ),
}  # fmt: skip


def _data(kind):
    if kind == "correlated":
        return _correlated(), None
    return _classes() if kind == "classes" else _counts()


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_grid_search_equals_scikit_learn(case):
    est, ref, grid, kind, scoring = CASES[case]
    X, y = _data(kind)
    ours = GridSearchCV(est, grid, cv=5, scoring=scoring).fit(X, y)
    theirs = SkGridSearchCV(ref, grid, cv=KFold(5), scoring=scoring).fit(X, y)
    assert_same_results(ours, theirs, 5)
    assert ours.n_splits_ == 5 and ours.plan_.n_passes == 2


def test_pca_on_dask_input_equals_scikit_learn_and_refits_the_same_model():
    X = _correlated(n=403)
    grid = {"n_components": [1, 2, 3, 4]}
    ours = GridSearchCV(ddr.PCA(), grid, cv=KFold(4)).fit(da.from_array(X, chunks=(37, -1)))
    theirs = SkGridSearchCV(skdec.PCA(), grid, cv=KFold(4)).fit(X)
    assert_same_results(ours, theirs, 4)
    best, ref = ours.best_estimator_, theirs.best_estimator_
    np.testing.assert_allclose(best.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(best.noise_variance_, ref.noise_variance_, rtol=1e-10)
    assert best.n_samples_ == 403
    np.testing.assert_allclose(ours.score(X), theirs.score(X), rtol=1e-12)
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), atol=1e-9)


def test_cross_validate_equals_scikit_learn():
    X, y = _classes()
    ours = cross_validate(ddr.QuadraticDiscriminantAnalysis(reg_param=0.2), X, y, cv=4)
    theirs = sk_cross_validate(skda.QuadraticDiscriminantAnalysis(reg_param=0.2), X, y, cv=KFold(4))
    np.testing.assert_allclose(ours["test_score"], theirs["test_score"], atol=TOL)
    assert ours["fit_time"].shape == ours["score_time"].shape == (4,)
    Xp = _correlated()
    ours = cross_validate(ddr.PCA(3), Xp, cv=5, return_estimator=True)
    theirs = sk_cross_validate(skdec.PCA(3), Xp, cv=KFold(5), return_estimator=True)
    np.testing.assert_allclose(ours["test_score"], theirs["test_score"], atol=TOL)
    for a, b in zip(ours["estimator"], theirs["estimator"], strict=True):
        np.testing.assert_allclose(a.explained_variance_, b.explained_variance_, rtol=1e-10)


# ---------------------------------------------------- against the loop of ddr fits
LOOP = {
    "GaussianDensity reg_covar": (ddr.GaussianDensity(), {"reg_covar": [0.0, 0.1, 1.0]}, "x"),
    "CCA n_components": (ddr.CCA(), {"n_components": [1, 2]}, "xy"),
    "BernoulliNB alpha": (ddr.BernoulliNB(), {"alpha": [0.1, 1.0]}, "classes"),
}


@pytest.mark.parametrize("case", LOOP, ids=list(LOOP))
def test_scores_equal_a_ddr_fit_per_fold(case):
    est, grid, kind = LOOP[case]
    X, y = _classes(n=240)
    if kind == "x":
        y = None
    elif kind == "xy":
        X, y = X[:, :2], X[:, 2:] + 0.5 * X[:, :2]
    search = GridSearchCV(est, grid, cv=3).fit(X, y)
    for i, params in enumerate(search.cv_results_["params"]):
        for k, (train, test) in enumerate(KFold(3).split(X)):
            model = clone(est).set_params(**params)
            model.fit(X[train], None if y is None else y[train])
            want = model.score(X[test], None if y is None else y[test])
            got = search.cv_results_[f"split{k}_test_score"][i]
            assert abs(got - want) <= TOL * max(1.0, abs(want))


# ------------------------------------------------------------------------- passes
@pytest.mark.parametrize("cv", [5, HashKFold(5, seed=3)], ids=["contiguous", "hashed"])
def test_a_whole_search_reads_the_data_twice(cv):
    X, y = _classes(n=2000)
    Xd, counter = counting_dask_array(X, chunks=(211, 4))
    search = GridSearchCV(
        ddr.LinearDiscriminantAnalysis(solver="lsqr"),
        {"shrinkage": [None, 0.05, 0.2, 0.5, "auto"], "tol": [1e-4, 1e-3]},
        cv=cv,
    )
    plan = search.plan(Xd, y)
    assert counter.passes == 0  # planning reads nothing
    assert (plan.n_passes, plan.n_statistics, plan.n_candidates) == (2, 2, 10)
    assert (plan.n_solves, plan.n_scores, plan.sklearn_fits) == (51, 50, 51)
    assert "2 passes" in str(plan)
    with dask.config.set(scheduler="threads"):
        search.fit(Xd, y)
    assert counter.passes == 2.0  # the refit merges the folds: no third pass
    assert search.best_estimator_.class_count_.sum() == 2000
    counter.reset()
    with dask.config.set(scheduler="threads"):
        cross_validate(ddr.GaussianNB(), Xd, y, cv=cv)
    assert counter.passes == 2.0


# ------------------------------------------------------------------- hashed folds
def test_hashed_folds_are_scikit_learns_with_the_same_splitter():
    X, y = _classes(n=500)
    cv = HashKFold(4, seed=7)
    grid = {"var_smoothing": [1e-9, 0.1, 1.0]}
    ours = GridSearchCV(ddr.GaussianNB(), grid, cv=cv).fit(X, y)
    theirs = SkGridSearchCV(sknb.GaussianNB(), grid, cv=cv).fit(X, y)
    assert_same_results(ours, theirs, 4)
    assert sum(ours.plan_.fold_sizes) == 500 and len(set(ours.plan_.fold_sizes)) > 1


def test_hashed_folds_do_not_depend_on_chunking():
    X = _correlated(n=997)
    grid = {"n_components": [1, 2, 3]}
    cv = HashKFold(5, seed=11)
    results = [
        GridSearchCV(ddr.PCA(), grid, cv=cv).fit(da.from_array(X, chunks=(c, -1))).cv_results_
        for c in (997, 100, 37)
    ] + [GridSearchCV(ddr.PCA(), grid, cv=cv).fit(X).cv_results_]
    for other in results[1:]:
        for k in range(5):
            key = f"split{k}_test_score"
            np.testing.assert_allclose(other[key], results[0][key], rtol=1e-12)


def test_hash_folds_are_a_function_of_the_row_and_seed():
    cv = HashKFold(5, seed=1)
    folds = cv.fold_of(np.arange(100_000))
    assert set(np.unique(folds)) == set(range(5))
    np.testing.assert_array_equal(cv.fold_of(np.arange(500, 600)), folds[500:600])
    assert np.abs(np.bincount(folds) / 100_000 - 0.2).max() < 0.01
    assert not np.array_equal(HashKFold(5, seed=2).fold_of(np.arange(100)), folds[:100])
    train, test = next(cv.split(np.zeros((50, 2))))
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(50))


# --------------------------------------------------------------------- input forms
def test_xarray_and_dask_labels_give_the_numpy_scores():
    X, y = _classes(n=240)
    grid = {"var_smoothing": [1e-9, 0.5]}
    ref = GridSearchCV(ddr.GaussianNB(), grid, cv=3).fit(X, y).cv_results_
    Xa = xr.DataArray(X.T, dims=("feature", "sample"), coords={"sample": np.arange(240) * 10})
    ya = xr.DataArray(y, dims=("sample",), coords={"sample": np.arange(240) * 10})
    for Xin, yin, params in (
        (Xa, ya[::-1], {"sample_dim": "sample"}),  # y aligned by coordinate
        (Xa.chunk({"sample": 50}), y, {"sample_dim": "sample"}),
        (da.from_array(X, chunks=(64, -1)), da.from_array(y, chunks=100), {}),
    ):
        got = GridSearchCV(ddr.GaussianNB(), grid, cv=3).fit(Xin, yin, **params)
        for k in range(3):
            key = f"split{k}_test_score"
            np.testing.assert_allclose(got.cv_results_[key], ref[key], atol=TOL)
        assert got.predict(Xin, **params).shape == (240,)


def test_sparse_counts_and_string_labels():
    import scipy.sparse as sp

    X, y = _counts()
    labels = np.array(["a", "b", "c"], dtype=object)[y]
    grid = {"alpha": [0.1, 1.0]}
    ours = GridSearchCV(ddr.MultinomialNB(), grid, cv=3).fit(sp.csr_matrix(X), labels)
    theirs = SkGridSearchCV(sknb.MultinomialNB(), grid, cv=KFold(3)).fit(X, labels)
    assert_same_results(ours, theirs, 3)
    assert list(ours.classes_) == ["a", "b", "c"]


def test_sample_weight_is_split_with_the_rows():
    X, y = _classes(n=240)
    w = np.random.default_rng(3).uniform(0.5, 2.0, 240)
    ours = cross_validate(ddr.GaussianNB(), X, y, cv=3, params={"sample_weight": w})
    for k, (train, test) in enumerate(KFold(3).split(X)):
        model = sknb.GaussianNB().fit(X[train], y[train], sample_weight=w[train])
        assert abs(ours["test_score"][k] - model.score(X[test], y[test])) <= TOL


# ---------------------------------------------------------------- results, refit
def test_results_layout_for_a_list_of_grids():
    X, y = _classes()
    grid = [{"shrinkage": [None, 0.3]}, {"shrinkage": [0.1], "tol": [1e-3]}]
    search = GridSearchCV(ddr.LinearDiscriminantAnalysis(solver="lsqr"), grid, cv=3).fit(X, y)
    res = search.cv_results_
    assert res["param_tol"].mask.tolist() == [True, True, False]
    assert res["param_shrinkage"].tolist() == [None, 0.3, 0.1]
    for key in ("mean_fit_time", "std_fit_time", "mean_score_time", "std_score_time"):
        assert res[key].shape == (3,) and np.all(res[key] >= 0)
    assert search.scoring_ == "accuracy" and not search.multimetric_
    assert set(search.pass_times_) == {"statistics", "solves", "scores"}


def test_refit_false_keeps_the_best_parameters_and_no_model():
    X = _correlated()
    search = GridSearchCV(ddr.PCA(), {"n_components": [1, 2]}, cv=3, refit=False).fit(X)
    assert search.best_params_ == {"n_components": 2}
    assert not hasattr(search, "best_estimator_")
    with pytest.raises(AttributeError, match="refit=False"):
        search.transform(X)
    assert search.plan_.n_solves == 6


def test_a_failing_candidate_scores_error_score_with_a_warning():
    X = _correlated(d=4)
    grid = {"n_components": [2, 5]}  # 5 of 4 features: refused by each fold's solve
    with pytest.warns(FitFailedWarning, match="5 fits failed out of a total of 10"):
        search = GridSearchCV(ddr.PCA(), grid, cv=5).fit(X)
    assert np.isnan(search.cv_results_["mean_test_score"][1])
    assert search.cv_results_["rank_test_score"].tolist() == [1, 2]
    assert search.best_params_ == {"n_components": 2}
    with pytest.raises(ValueError, match="must be between 1 and"):
        GridSearchCV(ddr.PCA(), grid, cv=5, error_score="raise").fit(X)
    with pytest.raises(ValueError, match="All the 5 fits failed"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        GridSearchCV(ddr.PCA(), {"n_components": [5]}, cv=5).fit(X)


# ---------------------------------------------------------------------- bad input
def test_refuses_what_it_cannot_search():
    X, y = _classes(n=60)
    with pytest.raises(ValueError, match="not fitted by one pass of mergeable statistics"):
        GridSearchCV(ddr.PCA(svd_solver="randomized"), {"n_components": [1, 2]}).fit(X)
    with pytest.raises(ValueError, match="not fitted by one pass"):
        GridSearchCV(ddr.KMeans(), {"n_clusters": [2, 3]}).fit(X)
    with pytest.raises(TypeError, match="not a ddr estimator"):
        GridSearchCV(skdec.PCA(), {"n_components": [1, 2]}).fit(X)
    with pytest.raises(ValueError, match="Invalid parameter 'n_compnents' for estimator PCA"):
        GridSearchCV(ddr.PCA(), {"n_compnents": [1, 2]}).fit(X)
    with pytest.raises(ValueError, match="requires at least one train/test split"):
        GridSearchCV(ddr.PCA(), {"n_components": [1]}, cv=1).fit(X)
    with pytest.raises(ValueError, match="greater than the number of samples: n_samples=60"):
        GridSearchCV(ddr.PCA(), {"n_components": [1]}, cv=61).fit(X)
    with pytest.raises(ValueError, match=r"fold\(s\) .* empty"):
        cross_validate(ddr.PCA(1), X[:4], cv=HashKFold(4, seed=0))
    with pytest.raises(ValueError, match="HashKFold"):
        GridSearchCV(ddr.PCA(), {"n_components": [1]}, cv=KFold(3, shuffle=True)).fit(X)
    with pytest.raises(TypeError, match="stratified"):
        GridSearchCV(ddr.GaussianNB(), {"var_smoothing": [1e-9]}, cv=StratifiedKFold(3)).fit(X, y)
    with pytest.raises(ValueError, match="scoring must be None or one of"):
        GridSearchCV(ddr.GaussianNB(), {"var_smoothing": [1e-9]}, scoring="roc_auc").fit(X, y)
    with pytest.raises(ValueError, match="StandardScaler has no score method"):
        cross_validate(ddr.StandardScaler(), X)
    with pytest.raises(ValueError, match=r"needs PCA\.predict"):
        cross_validate(ddr.PCA(2), X, scoring="accuracy")
    with pytest.raises(ValueError, match="y has 59 rows but X has 60"):
        cross_validate(ddr.GaussianNB(), X, y[:59])
    with pytest.raises(ValueError, match="non-negative int"):
        HashKFold(3, seed=-1)
    with pytest.raises(ValueError, match="refit must be True or False"):
        GridSearchCV(ddr.PCA(), {"n_components": [1]}, refit="n_components").fit(X)
