"""ddr-faulty: a plug-in package whose every entry point is wrong, each in its own way."""
