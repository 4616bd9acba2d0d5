"""``python -m ddr.cli``: the ``ddr`` command."""

from ddr.cli import main

main()
