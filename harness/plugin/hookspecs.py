"""Hook specifications of the pschaos pytest plugin (kept apart, as pytest-xdist does).

pytest registers a conftest's or plugin's hook implementation only when its name starts with
`pytest_`, so both hooks carry that prefix: a user's conftest.py implements them by these names.
"""
import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_pschaos_modify_scenario(scenario, config):
    """Change a collected scenario before it runs (e.g. scale a workload down in a smoke job):
    `scenario` is the pydantic Scenario, changed in place; `config` is pytest's config."""


@hookspec
def pytest_pschaos_report(report, item):
    """Called with every scenario's report (the report.json dict) after it ran, from YAML items
    and from `pschaos_run_scenario` alike (e.g. to upload it, or to gate on a figure)."""
