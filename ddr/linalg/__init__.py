"""Linear algebra on row-blocked arrays: randomized range finding, tall-skinny QR, kernels,
Nystrom maps. Knows nothing of estimators (imports only :mod:`ddr.stats`)."""
