"""The scenario library: data, installed with the package (pschaos.scenarios), found with
importlib.resources by pschaos.harness.run.library."""
