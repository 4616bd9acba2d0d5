"""Kernel feature maps: the Nystroem approximation, out of core."""
