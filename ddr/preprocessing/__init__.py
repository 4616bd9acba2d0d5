"""Scalers fitted from one pass of moments."""
