"""The twin held against real runs: `pschaos sim calibrate` and `pschaos sim validate`."""
