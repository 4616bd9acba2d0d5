"""Random projections (no pass over the data to fit)."""
