"""`pschaos bench`: speed and memory as ratios against a baseline measured in the same run."""
