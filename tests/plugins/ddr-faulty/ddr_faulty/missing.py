"""A module whose import fails (it needs a package that is not installed)."""

import ddr_not_installed  # noqa: F401
