"""A fault's preparation (resolving its links, making the run's nft table, reading the routing)
comes before the runner takes its start time: review of session 24 (H1) found the table's nft
call and an etcd read between the recorded start of a partition and its cut."""
from __future__ import annotations

from types import SimpleNamespace

import pschaos.harness.run.runner as runner_mod
from pschaos.harness.faults.link import LinkFaultAdapter
from pschaos.harness.run.runner import Runner


class Clock:
    def __init__(self, log: list) -> None:
        self.log = log

    def now(self) -> float:
        self.log.append("start-time")
        return 1.0


def test_the_runner_prepares_a_fault_before_taking_its_start(monkeypatch):
    log: list = []

    class Fake:
        info: dict = {}

        def prepare(self) -> None:
            log.append("prepare")

        def inject(self) -> None:
            log.append("inject")

    monkeypatch.setattr(runner_mod, "build", lambda kind, ctx, target, params: Fake())
    r = Runner.__new__(Runner)
    r.clock, r.open, r.say = Clock(log), [], lambda *a: None
    r.history = SimpleNamespace(record=lambda kind, data, t=None: log.append(kind))
    spec = SimpleNamespace(kind="partition", target="workers -> nodes", params={}, duration_s=1.0, until=None)
    r._inject_one(None, 0, spec, 0.0, 0)
    assert log[:3] == ["prepare", "start-time", "inject"], log


def test_a_link_fault_is_built_in_prepare_and_injected_once(monkeypatch):
    built = []
    impl = SimpleNamespace(inject=lambda: built.append("cut"))
    be = SimpleNamespace(links=lambda: {}, routing=lambda: {},
                         link_fault=lambda kind, links, params: built.append("built") or impl)
    monkeypatch.setattr("pschaos.harness.faults.link.resolve_links", lambda t, b, rng: ([("worker-0", "shard-0/0")],
                                                                              ["worker-0"], ["shard-0/0"]))
    f = LinkFaultAdapter(SimpleNamespace(backend=be, rng=None), "workers -> nodes", {})
    f.info = {"kind": "partition"}
    f.prepare()
    assert built == ["built"]
    f.inject()
    assert built == ["built", "cut"]
