"""The bug zoo (registry.py): mutants of psnodes that `pschaos selftest` runs the suite against."""
