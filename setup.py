"""Install layout: the repository's top-level folders install under one name, `pschaos`.

The metadata lives in pyproject.toml; this file only maps folders to packages, which
pyproject's tables cannot do for several folders at once: harness/ installs as pschaos.harness,
psnodes/ as pschaos.psnodes, and so on, so that a user's own `harness` or `reports` package
never shadows ours.
"""
from setuptools import find_packages, setup

TOPS = ("harness", "psnodes", "netfaults", "diskfaults", "reports")

packages = ["pschaos", "pschaos.scenarios"]
package_dir = {"pschaos": "pschaos", "pschaos.scenarios": "scenarios"}     # the library: data
for top in TOPS:
    package_dir[f"pschaos.{top}"] = top
    packages += [f"pschaos.{p}" for p in find_packages(include=[top, f"{top}.*"])]

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "pschaos.psnodes.proto": ["*.proto", "*.pyi"],
        "pschaos.reports": ["schemas/*.xsd"],
        "pschaos.harness.backends.sim": ["calibration.json"],
        "pschaos.harness.backends.docker": ["Dockerfile"],
        "pschaos.scenarios": ["*.yaml", "gates/*.yaml", "sweeps/*.yaml"],
        "pschaos.harness.commands": ["templates/*"],
        # not packages: the shim and example scripts run in the job's own Python, the C source is built on use
        "pschaos.harness.backends.jobs": ["shim/*.py", "scripts/*.py"],
        "pschaos.harness.backends.jobs.loopback": ["*.c"],
    },
)
