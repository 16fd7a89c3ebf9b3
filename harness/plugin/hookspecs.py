"""Hook specifications of the pschaos pytest plugin (kept apart, as pytest-xdist does)."""
import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pschaos_modify_scenario(scenario, config):
    """Change a collected scenario before it runs (e.g. scale a workload down in a smoke job)."""


@hookspec
def pschaos_report(report, item):
    """Called with every scenario's report dict after it ran (e.g. to upload it)."""
