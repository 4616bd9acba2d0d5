"""What the generative estimator families share, below all of them.

- :mod:`ddr.generative.classifier`: the base of every generative classifier (naive Bayes,
  QDA, LDA): one pass of class statistics, ``partial_fit`` by merge, predictions blockwise
  from the joint log-likelihood, class priors.
- :mod:`ddr.generative.categories`: category codes and their smoothed probabilities
  (categorical naive Bayes and the categorical density).

The families themselves (:mod:`ddr.naive_bayes`, :mod:`ddr.discriminant_analysis`,
:mod:`ddr.density`) import this package and not each other, except that kernel naive Bayes
is built on :mod:`ddr.density`'s kernel density estimates.
"""
