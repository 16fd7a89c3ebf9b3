"""Checkers: pure functions from a history to a Verdict. Registered by the names scenarios use."""
from .base import Verdict, compose, run_check
from .registry import CHECKERS

__all__ = ["Verdict", "compose", "run_check", "CHECKERS"]
