"""Canonical correlation analysis from one pass of joint moments."""
