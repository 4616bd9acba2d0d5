"""Clustering: k-means by Lloyd's iterations, one pass each (not ``ddr.cluster``, which starts
dask clusters)."""
