"""Density estimation: Gaussian and categorical MLE densities, kernel density estimation."""
