"""Decompositions: PCA, kernel PCA, probabilistic PCA, factor analysis."""
