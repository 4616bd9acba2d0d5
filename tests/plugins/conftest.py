"""The plug-in packages here are built, installed and tested by tests/test_plugins.py, in
subprocesses (their own tests import them); ddr's suite does not collect them itself."""

collect_ignore_glob = ["*"]
