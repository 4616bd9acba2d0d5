"""ddr's public names and the modules that define them.

The package root (``ddr/__init__.py``) exports these lazily. The table is here, in a module
that imports nothing, so that the layers below the root can tell ddr's own names from a
plug-in's (:mod:`ddr.plugins` refuses a plug-in estimator that takes one of them).
"""

from __future__ import annotations

__all__ = ["EXPORTS"]

#: public name -> module that defines it
EXPORTS: dict[str, str] = {
    "stats": "ddr.stats",
    "io": "ddr.io",
    "load": "ddr.io.models",
    "run_pipeline": "ddr.pipeline",
    "model_selection": "ddr.model_selection",
    "merge_fits": "ddr._merged_fit",
    # linear reductions
    "StandardScaler": "ddr.preprocessing.scaler",
    "PCA": "ddr.decomposition.pca",
    "RotatedPCA": "ddr.decomposition.rotated_pca",
    "TruncatedSVD": "ddr.decomposition.truncated_svd",
    "GaussianRandomProjection": "ddr.projection.random_projection",
    "SparseRandomProjection": "ddr.projection.random_projection",
    "johnson_lindenstrauss_min_dim": "ddr.projection.random_projection",
    # generative classifiers and densities
    "GaussianDensity": "ddr.density.gaussian",
    "CategoricalDensity": "ddr.density.categorical",
    "KernelDensity": "ddr.density.kde",
    "GaussianNB": "ddr.naive_bayes.gaussian",
    "CategoricalNB": "ddr.naive_bayes.categorical",
    "BernoulliNB": "ddr.naive_bayes.bernoulli",
    "MultinomialNB": "ddr.naive_bayes.multinomial",
    "KernelNB": "ddr.naive_bayes.kernel",
    "QuadraticDiscriminantAnalysis": "ddr.discriminant_analysis.qda",
    "LinearDiscriminantAnalysis": "ddr.discriminant_analysis.lda",
    # nonlinear and probabilistic reductions
    "KernelPCA": "ddr.decomposition.kernel_pca",
    "Nystroem": "ddr.kernel_approximation.nystroem",
    "PPCA": "ddr.decomposition.ppca",
    "FactorAnalysis": "ddr.decomposition.factor_analysis",
    "PLSA": "ddr.decomposition.plsa",
    "CCA": "ddr.cross_decomposition.cca",
    "PLSSVD": "ddr.cross_decomposition.pls",
    # clustering and mixtures
    "KMeans": "ddr.clustering.kmeans",
    "GaussianMixture": "ddr.mixture.gaussian_mixture",
}
