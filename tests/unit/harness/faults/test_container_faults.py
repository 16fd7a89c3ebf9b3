"""Faults only containers have: refused by name where the backend cannot do them (nothing left to
heal), and asked of the backend through its container methods where it can."""
from __future__ import annotations

import random

import pytest

from pschaos.harness.errors import HarnessError
from pschaos.harness.faults import ALL_KINDS, FaultContext, build
from pschaos.harness.faults.container import CONTAINER_KINDS, container_kinds_of
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.machinery.tools import REPO


class Plain:
    name = "process"


class Engine:
    name = "docker"
    container_kinds = CONTAINER_KINDS

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def limit_cpu(self, name, cpus):
        self.calls.append(("cpu", name, cpus))

    def oom_kill(self, name, headroom_mb):
        self.calls.append(("oom", name, headroom_mb))
        return {"reason": "OOMKilled", "exit_code": 137}

    def unlimit_memory(self, name):
        self.calls.append(("unlimit", name))

    def restart(self, name):
        self.calls.append(("restart", name))


def ctx(be) -> FaultContext:
    from pschaos.harness.history.clock import WALL

    return FaultContext(be, random.Random(1), lambda f, v: v, clock=WALL)


@pytest.mark.parametrize("kind", CONTAINER_KINDS)
def test_refused_by_name_where_there_are_no_containers(kind):
    assert kind in ALL_KINDS
    f = build(kind, ctx(Plain()), "shard-0/0", {})
    with pytest.raises(HarnessError, match=f"{kind}.*needs containers.*process backend.*--backend docker"):
        f.inject()
    f.heal()          # nothing was done, nothing to undo


def test_cpu_throttle_and_memory_limit_go_through_the_backend():
    be = Engine()
    f = build("cpu-throttle", ctx(be), "shard-0/1", {"cpus": 0.25})
    f.inject()
    f.heal()
    m = build("memory-limit", ctx(be), "shard-0/0", {})
    m.inject()
    m.heal()
    assert be.calls == [("cpu", "shard-0/1", 0.25), ("cpu", "shard-0/1", None), ("oom", "shard-0/0", 16),
                        ("unlimit", "shard-0/0"), ("restart", "shard-0/0")]
    assert m.info["reason"] == "OOMKilled"


def test_library_scenarios_for_each_container_kind():
    found = {k for p in (REPO / "scenarios").glob("*.yaml") for k in container_kinds_of(load_scenario(p))}
    assert found == set(CONTAINER_KINDS)


def test_the_nemesis_draws_container_kinds():
    from pschaos.harness.run.nemesis import schedule
    from pschaos.harness.run.scenario import Nemesis

    drawn = schedule(Nemesis(kinds=list(CONTAINER_KINDS), interval_s=1.0, stop_s=30), 7)
    assert {f.kind for f in drawn} == set(CONTAINER_KINDS)
    assert all(f.target == "replica(shard=any)" for f in drawn)
