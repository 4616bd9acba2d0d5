"""Quadratic and linear discriminant analysis (with the Fisher projection)."""
