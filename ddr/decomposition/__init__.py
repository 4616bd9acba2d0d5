"""Decompositions: PCA, kernel PCA, probabilistic PCA."""
