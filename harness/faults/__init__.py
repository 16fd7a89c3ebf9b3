"""Faults the runner can inject, each one small class that knows how to heal.

Process and cluster faults live here; network faults come from netfaults and are wrapped so
that every fault has the same two methods.
"""
from pschaos.harness.faults.base import Fault, FaultContext
from pschaos.harness.faults.registry import ALL_KINDS, LINK_KINDS, PROCESS_KINDS, build, params_error

__all__ = ["Fault", "FaultContext", "ALL_KINDS", "LINK_KINDS", "PROCESS_KINDS", "build", "params_error"]
