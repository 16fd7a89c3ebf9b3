"""`pschaos soak`: one scenario over many seeds, in subprocesses or forks of one warm process."""
