"""`pschaos selftest`: bugs planted in a copy of the code (mutants), run against the library, scored."""
