"""Mixture models: Gaussian mixtures fitted by EM, one pass per iteration."""
