"""ddr/ type-checks with mypy, as pyproject.toml configures it (``[tool.mypy]``: every function
annotated, strict equality, no unused ``type: ignore``; the modules still listed under "Type
debt" have the error codes named there disabled)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ddr_type_checks():
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
