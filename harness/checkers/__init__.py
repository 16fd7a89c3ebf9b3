"""Checkers: pure functions from a history to a Verdict. Registered by the names scenarios use."""
from pschaos.harness.checkers.base import Verdict, compose, run_check
from pschaos.harness.checkers.registry import CHECKERS

__all__ = ["Verdict", "compose", "run_check", "CHECKERS"]
