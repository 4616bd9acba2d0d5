"""ddr benchmarks: ddr beside numpy, dask, scikit-learn and dask-ml on the same data, one run."""
