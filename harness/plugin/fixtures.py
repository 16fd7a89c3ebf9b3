"""The plugin's fixtures, for scenarios written in Python and custom tests: run a scenario, start
a cluster, inject and heal faults, write a history. Each is named `pschaos_*`, so none clashes
with a user's own `cluster` or `history` fixture, and each cleans up what it made."""
from __future__ import annotations

from pathlib import Path

import pytest

from pschaos.harness.plugin.outcome import baselines, explain, out_dir


def _setting(request: pytest.FixtureRequest, key: str):
    m = request.node.get_closest_marker("pschaos")
    if m is not None and m.kwargs.get(key) is not None:
        return m.kwargs[key]
    return request.config.getoption(f"pschaos_{key}")


@pytest.fixture
def pschaos_run_scenario(request: pytest.FixtureRequest):
    """Run a Scenario (or a YAML path) and return its report; fails the test unless it passes
    (pass `expect_pass=False` to judge the report yourself)."""
    from pschaos.harness.run.runner import Runner
    from pschaos.harness.run.scenario import Scenario, load_scenario

    def run(scenario, expect_pass: bool = True) -> dict:
        sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        seed = _setting(request, "seed")
        rep = Runner(sc, seed, out_dir(request.config, sc.name, seed), _setting(request, "backend"), quiet=True,
                     shared=baselines(request.config)).run()
        request.config.hook.pytest_pschaos_report(report=rep, item=request.node)
        if expect_pass and rep["verdict"] != "pass":
            pytest.fail(explain(rep), pytrace=False)
        return rep

    return run


@pytest.fixture
def pschaos_cluster(request: pytest.FixtureRequest, tmp_path: Path):
    """A factory for a running psnodes cluster (process backend), torn down after the test:
    `pschaos_cluster(shards=1, copies=3, proxied=True)`."""
    import uuid

    from pschaos.harness.backends.process.backend import ProcessBackend
    from pschaos.harness.backends.cluster import ClusterSpec

    made = []

    def make(proxied: bool = False, tables: dict[str, int] | None = None, **spec):
        spec.setdefault("workers", 0)
        be = ProcessBackend(ClusterSpec(**spec), tmp_path / f"cluster{len(made)}", f"pt-{uuid.uuid4().hex[:8]}",
                            _setting(request, "seed"), proxied=proxied, tables=tables)
        made.append(be)
        be.start()
        return be

    yield make
    for be in made:
        be.teardown()


@pytest.fixture
def pschaos_history(tmp_path: Path):
    """A history writer for a custom test; `history.events()` reads back what was recorded."""
    from pschaos.harness.history.events import History, read_events

    h = History(tmp_path / "history.jsonl")
    h.events = lambda: read_events(h.path)
    yield h
    h.close()


@pytest.fixture
def pschaos_nemesis(request: pytest.FixtureRequest, pschaos_history):
    """Inject faults into a cluster from `pschaos_cluster`: `f = pschaos_nemesis.inject(be, "latency",
    "workers -> nodes", latency_ms=50)`, `pschaos_nemesis.heal(f)`; every fault still open is
    healed at teardown."""
    history = pschaos_history
    import random

    from pschaos.harness.faults import FaultContext, build
    from pschaos.harness.faults.registry import LINK_KINDS
    from pschaos.harness.faults.targets import resolve

    class Nemesis:
        def __init__(self) -> None:
            self.open = []
            self.rng = random.Random(_setting(request, "seed"))

        def inject(self, backend, kind: str, target: str, **params):
            ctx = FaultContext(backend, self.rng, lambda f, v: history.record(f, v))
            t = target if kind in LINK_KINDS else resolve(target, backend, self.rng)
            fault = build(kind, ctx, t, params)
            fault.inject()
            history.record("fault-start", {"kind": kind, "target": t, **fault.info})
            self.open.append(fault)
            return fault

        def heal(self, fault) -> None:
            if fault in self.open:
                self.open.remove(fault)
                fault.heal()
                history.record("fault-stop", {"kind": fault.info.get("kind"), "target": fault.target,
                                              **({"victims": fault.info["victims"]} if "victims" in fault.info else {})})

    n = Nemesis()
    yield n
    from pschaos.netfaults.errors import NetFaultError

    for f in list(n.open):
        try:
            n.heal(f)
        except NetFaultError:
            pass     # the cluster was torn down first: its proxies and rules went with it
