"""Naive Bayes classifiers fitted from one pass of class statistics."""
