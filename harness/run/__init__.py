"""The run pipeline: the scenario schema, the runner, the nemesis, judging and metrics."""
