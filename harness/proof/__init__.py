"""The proof tools: many seeds (soak), fault search and shrinking (hunt), the bug zoo (selftest), protocol fuzzing, benchmarks and the twin's calibration against real runs."""
