"""pytest plugin (entry point `pytest11`): scenario YAML files are test items.

`pytest scenarios/` collects every scenario file as one test that runs it and passes when its
verdict is pass; a failure shows the failing checks, their evidence and the rerun command.
Scenarios written in Python use the `run_scenario` fixture (and the `pschaos` marker to set seed
or backend per test); `cluster`, `nemesis` and `history` fixtures give direct access for custom
tests. Options: --backend, --seed, --pschaos-out. Safe under pytest-xdist: every run has its own
ports, proxies, nftables table and output folder.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("pschaos", "pschaos chaos scenarios")
    g.addoption("--backend", default="process", choices=["process", "docker", "sim"],
                help="backend that runs scenarios (default: process)")
    g.addoption("--seed", type=int, default=1, help="seed of every scenario run (default: 1)")
    g.addoption("--pschaos-out", default="out/pytest", help="where runs write reports (default: out/pytest)")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pschaos.harness.plugin import hookspecs as pytest_hooks

    pluginmanager.add_hookspecs(pytest_hooks)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pschaos(seed=None, backend=None): settings of a Python scenario test")
    config.addinivalue_line("markers", "pschaos_scenario: a test item collected from a scenario YAML file")


def _looks_like_scenario(path: Path) -> bool:
    try:
        head = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return path.parent.name == "scenarios"     # a broken file in scenarios/ still reports its error
    return isinstance(head, dict) and "name" in head and bool({"cluster", "faults", "workload", "nemesis"} & set(head))


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if file_path.suffix in (".yaml", ".yml") and _looks_like_scenario(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def out_dir(config: pytest.Config, name: str, seed: int) -> Path:
    worker = getattr(config, "workerinput", {}).get("workerid")   # set only inside an xdist worker
    base = Path(config.getoption("pschaos_out"))
    return base / (f"{name}-{seed}" + (f"-{worker}" if worker else ""))


def as_expected(scenario, report: dict) -> bool:
    """A scenario passes as a test when its verdict is pass, or, when it names checks it `finds`
    (a system known to lose acknowledged updates), when exactly those failed, each with failure
    kinds it accepts (by default those a system causes, not a harness misclassification), and
    every other check held: a finding that comes with an unknown, an unexpected failure or a
    missing check is no finding. A check it `may_find` must be decided: pass, or fail as a finding."""
    from pschaos.harness.checkers.updates import SYSTEM_BUG_KINDS

    finds, may = scenario.expect.finds_kinds(), set(scenario.expect.may_find)
    if not finds and not may:
        return report["verdict"] == "pass"
    checks = report["checks"]
    if not (set(finds) | may) <= checks.keys():
        return False

    def found(name: str, c: dict) -> bool:
        accepted = finds.get(name) if finds.get(name) is not None else SYSTEM_BUG_KINDS.get(name)
        kinds = (c.get("details") or {}).get("kinds")
        if accepted is None:           # a check without failure kinds: its failing is the finding
            return c["valid"] is False
        return c["valid"] is False and bool(kinds) and set(kinds) <= set(accepted)

    def holds(name: str, c: dict) -> bool:
        if name in finds:
            return found(name, c)
        if name in may:                # decided either way: never unknown, a failure only as a finding
            return c["valid"] is True or found(name, c)
        return c["valid"] is True

    return all(holds(name, c) for name, c in checks.items())


class ScenarioFailed(Exception):
    def __init__(self, report: dict) -> None:
        super().__init__(report["verdict"])
        self.report = report


def explain(report: dict) -> str:
    expect = (report.get("scenario_spec") or {}).get("expect", {})
    finds = [f if isinstance(f, str) else next(iter(f)) for f in expect.get("finds") or []]
    may = expect.get("may_find") or []
    lines = [f"scenario {report['scenario']} (seed {report['seed']}, {report['backend']}): {report['verdict'].upper()}"
             + (f" (expected to find: {', '.join(finds)} failing, every other check holding)" if finds else "")
             + (f" (may find: {', '.join(may)}: decided either way, never unknown)" if may else "")]
    for name, c in report["checks"].items():
        if c["valid"] is not True:
            lines.append(f"  {name}: {c['valid']}")
            lines.append("    " + json.dumps(c["details"], default=str)[:1500])
    lines.append(f"rerun: {report['rerun']}")
    return "\n".join(lines)


class ScenarioFile(pytest.File):
    def collect(self):
        from pschaos.harness.run.scenario import load_scenario

        sc = load_scenario(self.path)
        yield ScenarioItem.from_parent(self, name=sc.name, scenario=sc)

    def repr_failure(self, excinfo):
        from pschaos.harness.errors import ScenarioError

        if isinstance(excinfo.value, ScenarioError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario, **kw) -> None:
        super().__init__(**kw)
        self.scenario = scenario
        self.add_marker(pytest.mark.pschaos_scenario)

    def runtest(self) -> None:
        from pschaos.harness.backends.adapters import system_named
        from pschaos.harness.errors import HarnessError
        from pschaos.harness.faults.container import container_kinds_of
        from pschaos.harness.run.runner import Runner

        cfg = self.config
        seed = cfg.getoption("seed")
        sc = self.scenario
        cfg.hook.pschaos_modify_scenario(scenario=sc, config=cfg)
        only = container_kinds_of(sc)
        if only and cfg.getoption("backend") != "docker":     # pschaos run refuses them by name (unknown)
            pytest.skip(f"{sc.name}: fault kinds {', '.join(only)} need containers; run it with --backend docker")
        try:       # another system's adapter runs where it can (redis-sentinel and etcd: processes)
            system_named(sc.system).backend_factory(cfg.getoption("backend"))
        except HarnessError as e:
            pytest.skip(f"{sc.name}: {e}")
        rep = Runner(sc, seed, out_dir(cfg, sc.name, seed), cfg.getoption("backend"), quiet=True).run()
        self.user_properties.append(("report", str(out_dir(cfg, sc.name, seed) / "report.json")))
        cfg.hook.pschaos_report(report=rep, item=self)
        if not as_expected(sc, rep):
            raise ScenarioFailed(rep)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ScenarioFailed):
            return explain(excinfo.value.report)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"scenario: {self.name}"


# ------------------------------------------------------------------ fixtures
def _setting(request: pytest.FixtureRequest, key: str):
    m = request.node.get_closest_marker("pschaos")
    if m is not None and m.kwargs.get(key) is not None:
        return m.kwargs[key]
    return request.config.getoption(key)


@pytest.fixture
def run_scenario(request: pytest.FixtureRequest):
    """Run a Scenario (or a YAML path) and return its report; fails the test unless it passes
    (pass `expect_pass=False` to judge the report yourself)."""
    from pschaos.harness.run.runner import Runner
    from pschaos.harness.run.scenario import Scenario, load_scenario

    def run(scenario, expect_pass: bool = True) -> dict:
        sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        seed = _setting(request, "seed")
        rep = Runner(sc, seed, out_dir(request.config, sc.name, seed), _setting(request, "backend"), quiet=True).run()
        request.config.hook.pschaos_report(report=rep, item=request.node)
        if expect_pass and rep["verdict"] != "pass":
            pytest.fail(explain(rep), pytrace=False)
        return rep

    return run


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path):
    """A factory for a running cluster (process backend): `cluster(shards=1, copies=3, network="proxied")`."""
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
def history(tmp_path: Path):
    """A history writer for a custom test; `history.events()` reads back what was recorded."""
    from pschaos.harness.history.events import History, read_events

    h = History(tmp_path / "history.jsonl")
    h.events = lambda: read_events(h.path)
    yield h
    h.close()


@pytest.fixture
def nemesis(request: pytest.FixtureRequest, history):
    """Inject faults into a cluster from `cluster`: `f = nemesis.inject(be, "latency", "workers -> nodes",
    latency_ms=50)`, `nemesis.heal(f)`; every fault still open is healed at teardown."""
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
