"""Benchmark suites: each module defines ``run(ctx)`` and records rows with ``ctx.measure``."""
