"""pytest plugin (entry point `pytest11`): scenario YAML files are test items.

`pytest scenarios/` collects every scenario file as one test that runs it and passes when its
verdict is pass; a failure shows the failing checks, their evidence and the rerun command.
Scenarios written in Python use the `pschaos_run_scenario` fixture (and the `pschaos` marker to
set seed or backend per test); the `pschaos_cluster`, `pschaos_nemesis` and `pschaos_history`
fixtures (fixtures.py) give direct access for custom tests. Every option, hook and fixture is
prefixed, as pytest's conventions ask of a plugin: --pschaos-backend, --pschaos-seed,
--pschaos-out; a conftest's `pytest_pschaos_modify_scenario` and `pytest_pschaos_report`
(hookspecs.py). Safe under pytest-xdist: every run has its own ports, proxies, nftables table and
output folder.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pschaos.harness.plugin.outcome import BASELINES_DIR, SHARED_KEY, ScenarioFailed, as_expected, baselines, explain, out_dir

# the fixtures: a module of their own, registered with this plugin by name
pytest_plugins = ["pschaos.harness.plugin.fixtures"]


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("pschaos", "pschaos chaos scenarios")
    g.addoption("--pschaos-backend", default="process", choices=["process", "docker", "sim"],
                help="backend that runs scenarios (default: process)")
    g.addoption("--pschaos-seed", type=int, default=1, help="seed of every scenario run (default: 1)")
    g.addoption("--pschaos-out", default="out/pytest", help="where runs write reports (default: out/pytest)")
    g.addoption("--pschaos-on", default=None, metavar="ray[=ADDRESS]",
                help="run each scenario item as a Ray task: on the cluster at ADDRESS, or on a local one on 127.0.0.1 "
                     "(pip install 'pschaos[ray]'); its report comes back into --pschaos-out")
    g.addoption("--pschaos-fresh-baselines", action="store_true",
                help="every run that compares with a fault-free run makes its own (by default scenarios that "
                     "ask for the same one in a session share it: same scenario less its faults, seed, backend)")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pschaos.harness.plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pschaos(seed=None, backend=None): settings of a Python scenario test")
    config.addinivalue_line("markers", "pschaos_scenario: a test item collected from a scenario YAML file")
    if not hasattr(config, "workerinput") and not config.getoption("pschaos_fresh_baselines"):
        from pschaos.harness.run.shared_runs import open_session      # the session's own store (not a worker's)

        setattr(config, SHARED_KEY, str(open_session(Path(config.getoption("pschaos_out")) / BASELINES_DIR)))


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.getoption("pschaos_on", None):
        from pschaos.harness.plugin.on_ray import close

        close(config)
    root = getattr(config, SHARED_KEY, None)
    if root and not hasattr(config, "workerinput"):
        from pschaos.harness.run.shared_runs import close_session

        close_session(Path(root))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: each worker gets the session's store (the controller made it)."""
    root = getattr(node.config, SHARED_KEY, None)
    if root:
        node.workerinput[SHARED_KEY] = root


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
        from pschaos.harness.backends.systems import system_named
        from pschaos.harness.errors import HarnessError
        from pschaos.diskfaults.mounts import available as disk_missing
        from pschaos.harness.faults.container import container_kinds_of
        from pschaos.harness.faults.storage import NOT_ON_DOCKER, not_in_the_twin, storage_kinds_of
        from pschaos.harness.run.runner import Runner

        cfg = self.config
        seed, backend = cfg.getoption("pschaos_seed"), cfg.getoption("pschaos_backend")
        sc = self.scenario
        cfg.hook.pytest_pschaos_modify_scenario(scenario=sc, config=cfg)
        only = container_kinds_of(sc)
        if only and backend != "docker":     # pschaos run refuses them by name (unknown)
            pytest.skip(f"{sc.name}: fault kinds {', '.join(only)} need containers; run it with "
                        "--pschaos-backend docker")
        disk = storage_kinds_of(sc)
        cannot = storage_kinds_of(sc, NOT_ON_DOCKER) if backend == "docker" else \
            (not_in_the_twin(sc) if backend == "sim" else [])
        if cannot:                           # pschaos run refuses them by name (exit 2 on docker, unknown on sim)
            pytest.skip(f"{sc.name}: fault kinds {', '.join(cannot)} are not faults of the {backend} backend's "
                        "disks; run it with --pschaos-backend process")
        on_ray = cfg.getoption("pschaos_on")
        if disk and backend == "process" and disk_missing() and not on_ray:      # a node may have it: it says
            pytest.skip(f"{sc.name}: fault kinds {', '.join(disk)} need the power-loss disk: {disk_missing()}")
        try:       # another system's adapter runs where it can (redis-sentinel and etcd: processes)
            system_named(sc.system).backend_factory(backend)
        except HarnessError as e:
            pytest.skip(f"{sc.name}: {e}")
        if on_ray:
            from pschaos.harness.plugin.on_ray import run_on_ray

            rep = run_on_ray(cfg, sc, seed, backend, out_dir(cfg, sc.name, seed))
        else:
            rep = Runner(sc, seed, out_dir(cfg, sc.name, seed), backend, quiet=True, shared=baselines(cfg)).run()
        self.user_properties.append(("report", str(out_dir(cfg, sc.name, seed) / "report.json")))
        cfg.hook.pytest_pschaos_report(report=rep, item=self)
        if not as_expected(sc, rep):
            raise ScenarioFailed(rep)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ScenarioFailed):
            return explain(excinfo.value.report)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"scenario: {self.name}"

