"""Root error of the harness. Messages name the file, the field, the value and the fix."""
from __future__ import annotations


class HarnessError(Exception):
    """Anything the harness refuses or cannot do; the CLI exits 2 with the message."""


class ScenarioError(HarnessError):
    """A scenario file is malformed: names the file, line and field."""


class MissingDependency(HarnessError):
    """A real part (etcd, Toxiproxy, nft, Docker) is absent; the message gives the install command."""
