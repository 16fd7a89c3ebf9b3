"""The Docker backend fails closed where the engine can quietly do less than asked: each test
drives the backend's own code against a fake engine object that answers as a real one did."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pschaos.harness.backends.docker.backend import DockerBackend
from pschaos.harness.errors import HarnessError
from pschaos.harness.faults import params_error


class FakeContainer:
    """Answers `update` as dockerd does, and keeps what a reload would read back."""

    def __init__(self, warnings=None, applies: bool = True) -> None:
        self.warnings, self.applies = warnings, applies
        self.attrs = {"HostConfig": {"CpuQuota": 0, "CpuPeriod": 0}}

    def update(self, **kw):
        if self.applies and "cpu_quota" in kw and kw["cpu_quota"]:    # the SDK drops a falsy quota
            self.attrs["HostConfig"]["CpuQuota"] = kw["cpu_quota"]
        return {"Warnings": self.warnings}

    def reload(self) -> None:
        pass


def backend(c: FakeContainer):
    return SimpleNamespace(handle=lambda name: SimpleNamespace(container=c))


def test_a_zero_cpu_quota_is_refused_naming_the_field():
    err = params_error("cpu-throttle", {"cpus": 0})
    assert err and "params.cpus" in err and "0.01" in err
    assert params_error("cpu-throttle", {"cpus": 0.01}) is None


def test_cpu_quota_is_read_back():
    c = FakeContainer()
    assert DockerBackend.limit_cpu(backend(c), "shard-0/0", 0.25) == 25_000
    assert DockerBackend.limit_cpu(backend(c), "shard-0/0", None) == -1


def test_engine_warnings_fail_the_throttle():
    c = FakeContainer(warnings=["Your kernel does not support CPU cfs quota. Quota discarded."], applies=False)
    with pytest.raises(HarnessError, match="cpu-throttle shard-0/0.*did not apply.*cfs quota"):
        DockerBackend.limit_cpu(backend(c), "shard-0/0", 0.1)


def test_a_quota_the_engine_does_not_report_fails_the_throttle():
    with pytest.raises(HarnessError, match="reports 0"):
        DockerBackend.limit_cpu(backend(FakeContainer(applies=False)), "shard-0/0", 0.1)


# ------------------------------------------------------------------ disk-full evidence
class DiskBackend:
    """What disk-full asks of a backend: the volume's path, filling, the node's event file."""

    name = "docker"
    container_kinds = ("disk-full",)

    def __init__(self, tmp_path, events: list[dict]) -> None:
        self.data = tmp_path / "data"
        self.data.mkdir()
        self.events = tmp_path / "events.jsonl"
        self.events.write_text("".join(__import__("json").dumps(e) + "\n" for e in events))
        self.spec = SimpleNamespace(checkpoint_interval_s=0.1)
        self.freed = False

    def fill_disk(self, name):
        return 0

    def free_disk(self, name):
        self.freed = True

    def data_path(self, name):
        return self.data

    def events_path(self, name):
        return self.events


def disk_fault(be):
    import random

    from pschaos.harness.history.clock import WALL
    from pschaos.harness.faults import FaultContext, build

    return build("disk-full", FaultContext(be, random.Random(1), lambda f, v: v, clock=WALL), "shard-0/0", {})


def full_disk(monkeypatch):
    import pschaos.harness.faults.disk_full as m

    monkeypatch.setattr(m.os, "statvfs", lambda p: SimpleNamespace(f_bavail=0))


def test_disk_full_refuses_a_volume_that_is_not_full(tmp_path):
    f = disk_fault(DiskBackend(tmp_path, []))          # a plain folder: fill_disk filled nothing
    with pytest.raises(HarnessError, match="still has .* free block"):
        f.inject()
    f.heal()


def test_disk_full_without_an_enospc_write_is_no_evidence(tmp_path, monkeypatch):
    full_disk(monkeypatch)
    be = DiskBackend(tmp_path, [])
    f = disk_fault(be)
    f.inject()
    with pytest.raises(HarnessError, match="no checkpoint write hit ENOSPC"):
        f.heal()
    assert be.freed


def test_disk_full_with_an_enospc_write_in_the_window(tmp_path, monkeypatch):
    import time

    full_disk(monkeypatch)
    be = DiskBackend(tmp_path, [{"t": time.time() - 60, "f": "checkpoint-error",        # before: no evidence
                                 "value": {"error": "[Errno 28] No space left on device"}}])
    f = disk_fault(be)
    f.inject()
    with be.events.open("a") as fh:
        fh.write(__import__("json").dumps({"t": time.time(), "f": "checkpoint-error",
                                           "value": {"error": "[Errno 28] No space left on device: 'x'"}}) + "\n")
    with pytest.raises(HarnessError, match="no local checkpoint"):      # evidence seen; no checkpoint to keep
        f.heal()
    assert f.info["enospc_errors"] == 1


def test_nodes_back_holds_disk_full_to_its_promise():
    from pschaos.harness.checkers.evidence import nodes_back

    h = [{"t": 0, "f": "run-start", "value": {}},
         {"t": 1, "f": "fault-start", "value": {"kind": "disk-full", "target": "shard-0/0"}},
         {"t": 2, "f": "fault-stop", "value": {"kind": "disk-full", "target": "shard-0/0"}},
         {"t": 3, "f": "final-state", "value": {"node": "shard-0/0", "alive": False}}]
    assert nodes_back(h, {}).valid is False


# ------------------------------------------------------------------ fill only our tmpfs
def volumes_at(path):
    from pschaos.harness.backends.docker.volumes import DataVolumes

    client = SimpleNamespace(volumes=SimpleNamespace(get=lambda n: SimpleNamespace(attrs={"Mountpoint": str(path)})))
    launcher = SimpleNamespace(run_id="r1")
    return DataVolumes(client, launcher, ["shard-0/0"], lambda n: path, path)


def test_fill_refuses_a_mountpoint_that_is_a_plain_folder(tmp_path):
    v = volumes_at(tmp_path)
    with pytest.raises(HarnessError, match="no mount point here"):
        v.fill("shard-0/0")
    with pytest.raises(HarnessError, match="no mount point here"):
        v.wipe("shard-0/0")
    assert list(tmp_path.iterdir()) == []          # nothing written


def test_fill_refuses_a_mount_of_another_size():
    import os

    with pytest.raises(HarnessError, match="not the 64 MiB tmpfs"):
        volumes_at("/").fill("shard-0/0")          # a mount point, but the root file system
    assert not os.path.exists("/.pschaos-disk-full")


# ------------------------------------------------------------------ teardown goes on
def api_error(code: int, text: str):
    import docker
    import requests

    r = requests.Response()
    r.status_code, r.url, r.reason = code, "http+docker://localhost/v1.41/containers/3f2/kill", ""
    return docker.errors.APIError(text, response=r, explanation=text)


class ExitedContainer:
    """A container whose node exited between our liveness check and the engine call."""

    def __init__(self, err) -> None:
        self.err, self.called = err, False
        self.attrs = {"State": {"Status": "exited", "Running": False, "ExitCode": 0}}

    def kill(self, **kw):
        self.called = True          # the engine saw it exited: so does the pidfd from now on
        raise self.err

    stop = pause = unpause = kill

    def wait(self, **kw):
        return {"StatusCode": 0}

    def reload(self):
        pass


def exited_handle(err):
    from pschaos.harness.backends.docker.containers import ContainerHandle

    h = ContainerHandle.__new__(ContainerHandle)
    h.name, h.container, h.paused, h.pid = "shard-0/0", ExitedContainer(err), False, 1
    h.ref = SimpleNamespace(alive=lambda: not h.container.called, close=lambda: None)
    return h


@pytest.mark.parametrize("err", ["Container 3f2 is not running", "Container 3f2 is not paused", "not found"])
def test_a_container_that_already_exited_is_no_error(err):
    import signal

    import docker

    e = docker.errors.NotFound(err) if err == "not found" else api_error(409, err)
    for act in (lambda h: h.signal(signal.SIGKILL), lambda h: h.terminate(), lambda h: h.signal(signal.SIGSTOP),
                lambda h: h.stop(0.5)):
        h = exited_handle(e)
        act(h)
        assert h.container.called


def test_other_engine_errors_still_raise():
    import docker

    with pytest.raises(docker.errors.APIError):
        exited_handle(api_error(500, "driver failed")).terminate()


def test_teardown_runs_every_step_after_an_error(monkeypatch):
    import pschaos.harness.backends.process.backend as bp

    done: list[str] = []

    def boom(*a, **kw):
        done.append("stop_all")
        raise api_error(500, "engine broke")
    monkeypatch.setattr(bp, "stop_all", boom)
    monkeypatch.setattr(bp.registry, "unregister", lambda run_id: done.append("unregister"))
    launcher = SimpleNamespace(begin_close=lambda: None, handles=[], close=lambda: done.append("remove_run"))
    be = SimpleNamespace(closing=False, launcher=launcher, _grace=lambda full: full, net=None, proxied=False, disks=None,
                         toxiproxy=None, procs={}, hurry=False, run_id="pschaos-test-none", client=None,
                         etcd_server=SimpleNamespace(stop=lambda timeout: done.append("etcd")))
    import docker

    with pytest.raises(docker.errors.APIError, match="engine broke"):
        bp.ProcessBackend.teardown(be)
    assert done == ["stop_all", "stop_all", "etcd", "remove_run", "unregister"]


# ------------------------------------------------------------------ removal says what is left
class FakeEngine:
    """Containers by name; `stuck` ones refuse removal every time, `flaky` ones once; `late` is
    created when the first listing has been answered (one started while teardown began)."""

    def __init__(self, names, stuck=(), flaky=(), late=()) -> None:
        import docker

        self.alive = set(names)
        self.stuck, self.flaky, self.late, self.listings = set(stuck), set(flaky), list(late), 0
        engine = self

        class C:
            def __init__(self, name):
                self.name = name

            def remove(self, force):
                if self.name in engine.stuck or self.name in engine.flaky:
                    engine.flaky.discard(self.name)
                    raise docker.errors.APIError("device or resource busy")
                engine.alive.discard(self.name)

        def listing(all, filters):
            self.listings += 1
            out = [C(n) for n in sorted(self.alive)]
            if self.listings == 1:
                self.alive |= set(self.late)
            return out
        self.containers = SimpleNamespace(list=listing)
        self.volumes = SimpleNamespace(list=lambda filters: [])
        self.images = SimpleNamespace(list=lambda filters: [])


def test_remove_run_retries_and_finds_a_late_container():
    from pschaos.harness.backends.docker.containers import remove_run

    e = FakeEngine(["a", "b"], flaky=["b"], late=["c"])
    gone = remove_run(e, "r1")
    assert sorted(gone) == ["container a", "container b", "container c"] and not e.alive


def test_remove_run_raises_naming_what_is_left():
    from pschaos.harness.backends.docker.containers import remove_run

    e = FakeEngine(["a", "b"], stuck=["b"])
    with pytest.raises(HarnessError, match=r"1 thing\(s\) still on the engine.*container b \(APIError: device or"):
        remove_run(e, "r1")
    assert e.alive == {"b"}


def test_clean_goes_on_past_a_run_it_cannot_remove(monkeypatch):
    import docker

    import pschaos.harness.backends.docker.reap as reap

    things = [SimpleNamespace(attrs={"Labels": {"pschaos.run": r, "pschaos.owner": "1", "pschaos.owner_start": "1"}})
              for r in ("ra", "rb")]
    client = SimpleNamespace(ping=lambda: True, close=lambda: None,
                             containers=SimpleNamespace(list=lambda all, filters: things),
                             volumes=SimpleNamespace(list=lambda filters: []),
                             images=SimpleNamespace(list=lambda filters: []))
    monkeypatch.setattr(docker, "from_env", lambda timeout: client)

    def remove_run(c, run_id):
        if run_id == "ra":
            raise HarnessError("run ra: 1 thing(s) still on the engine")
        return ["container rb-0"]
    monkeypatch.setattr(reap, "remove_run", remove_run)
    assert reap.reap_engine(all_runs=True) == (["container rb-0"], ["run ra: 1 thing(s) still on the engine"], None)


# ------------------------------------------------------------------ Compose is not ours to reap
def test_compose_objects_carry_no_run_label():
    import yaml

    from pschaos.harness.machinery.tools import REPO

    doc = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    labelled = [*doc["services"].values(), *doc["volumes"].values()]
    assert all("pschaos.run" not in (x.get("labels") or {}) for x in labelled)
    assert all((x.get("labels") or {}).get("pschaos.compose") == "true" for x in labelled)


def test_a_thing_without_an_owner_label_is_foreign():
    from pschaos.harness.backends.docker.reap import _dead

    assert _dead({"pschaos.run": "compose"}) is False
    assert _dead({"pschaos.run": "r1", "pschaos.owner": "999999999", "pschaos.owner_start": "1.0"}) is True


# ------------------------------------------------------------------ the network rule
def networks(*nets):
    return SimpleNamespace(networks=SimpleNamespace(list=lambda names: [
        SimpleNamespace(name=n, attrs={"IPAM": {"Config": [{"Subnet": s}] if s else []}}) for n, s in nets]))


def test_an_engine_with_a_bridge_breaks_the_network_rule(monkeypatch):
    from pschaos.harness.backends.docker.engine import network_rule_violation

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert network_rule_violation(networks(("host", None), ("none", None))) is None
    assert network_rule_violation(networks(("bridge-ish", "10.9.0.0/16"))) is None     # a substring match only
    why = network_rule_violation(networks(("bridge", "172.17.0.0/16")))
    assert "172.17.0.0/16" in why and '"bridge": "none"' in why and "daemon.json" in why


def test_the_docker_backend_refuses_a_remote_engine(monkeypatch, tmp_path):
    from pschaos.harness.backends.cluster import ClusterSpec

    monkeypatch.setenv("DOCKER_HOST", "tcp://192.0.2.1:2375")
    with pytest.raises(HarnessError, match="DOCKER_HOST=tcp://192.0.2.1:2375 is not a local unix socket"):
        DockerBackend(ClusterSpec(), tmp_path, "r1", 1)
    assert list(tmp_path.iterdir()) == []


def test_doctor_reports_an_engine_whose_version_call_fails(monkeypatch):
    import pschaos.harness.backends.docker.engine as eng

    def broken():
        raise RuntimeError("500 Server Error")
    monkeypatch.setattr(eng, "client", lambda timeout=30.0: SimpleNamespace(version=broken, close=lambda: None))
    v, why = eng.server_version()
    assert v is None and "500 Server Error" in why


def test_ci_engine_script_merges_the_rule_into_daemon_json(tmp_path):
    import json
    import subprocess

    from pschaos.harness.machinery.tools import REPO

    cfg = tmp_path / "daemon.json"
    cfg.write_text(json.dumps({"log-level": "warn", "bridge": "docker0", "iptables": True}))
    script = REPO / ".ci" / "docker-engine"
    fn = f'source <(sed -n "/^write_daemon_json()/,/^}}/p" {script}); DAEMON_JSON={cfg}; write_daemon_json'
    subprocess.run(["bash", "-c", fn], check=True, timeout=30)
    assert json.loads(cfg.read_text()) == {"log-level": "warn", "bridge": "none", "iptables": False,
                                           "ip6tables": False}
    text = script.read_text()
    assert text.index("\nwrite_daemon_json\n") < text.index("apt-get install")     # before anything installs
    assert "--bridge=none" not in text.split("setsid dockerd")[1].splitlines()[0]   # no key twice: dockerd refuses


# ------------------------------------------------------------------ a reused --out deletes only a run folder
def tiny_runner(out):
    from pschaos.harness.run.runner import Runner
    from pschaos.harness.run.scenario import load_scenario
    from pschaos.harness.machinery.tools import REPO

    sc = load_scenario(REPO / "scenarios" / "kill-primary.yaml")

    def no_backend(*a):
        raise RuntimeError("started")          # reaching the backend means the --out checks passed
    return Runner(sc, 1, out, backend="sim", quiet=True, make_backend=lambda *a: SimpleNamespace(
        events_path=no_backend))


@pytest.mark.parametrize("out", ["/", "/run/..", "/usr", "/etc/", "/var"])
def test_a_system_folder_is_no_out(out):
    with pytest.raises(HarnessError, match="is a system folder"):
        tiny_runner(__import__("pathlib").Path(out))


def test_an_existing_run_folder_without_the_marker_is_kept(tmp_path):
    from pschaos.harness.machinery.registry import RUN_MARKER

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "docker.sock").write_text("someone's")
    with pytest.raises(HarnessError, match="no pschaos run made it"):
        tiny_runner(tmp_path)          # refused before the backend exists (it may make its run folder at once)
    assert (tmp_path / "run" / "docker.sock").exists()
    (tmp_path / "run" / RUN_MARKER).write_text("x\n")             # one a run made is cleaned
    with pytest.raises(RuntimeError, match="started"):
        tiny_runner(tmp_path).run()
    assert [p.name for p in (tmp_path / "run").iterdir()] == [RUN_MARKER]


# ------------------------------------------------------------------ smaller checks (item 9)
@pytest.mark.parametrize("gpus", [0, -2, [], [""]])
def test_gpus_that_request_no_gpu_are_refused(gpus):
    from pydantic import ValidationError

    from pschaos.harness.backends.cluster import ClusterSpec

    with pytest.raises(ValidationError, match="gpus="):
        ClusterSpec(gpus=gpus)
    for ok in (None, -1, 1, ["0", "2"]):
        ClusterSpec(gpus=ok)


def test_memory_limit_headroom_is_bounded():
    import psutil

    assert "params.headroom_mb" in params_error("memory-limit", {"headroom_mb": 0})
    huge = psutil.virtual_memory().total >> 20
    assert "params.headroom_mb" in params_error("memory-limit", {"headroom_mb": huge})
    assert params_error("memory-limit", {"headroom_mb": 16}) is None


def test_stop_passes_its_timeout_and_refuses_one_a_backend_cannot_take():
    import random

    from pschaos.harness.history.clock import WALL
    from pschaos.harness.faults import FaultContext, build

    calls = []
    timed = SimpleNamespace(name="process", stop=lambda name: calls.append((name,)),
                            stop_within=lambda name, timeout: calls.append((name, timeout)))
    untimed = SimpleNamespace(name="sim", stop=lambda name: calls.append((name,)))
    build("stop", FaultContext(timed, random.Random(1), lambda f, v: v, clock=WALL), "shard-0/0",
          {"timeout_s": 0.5}).inject()
    build("stop", FaultContext(untimed, random.Random(1), lambda f, v: v, clock=WALL), "shard-0/0", {}).inject()
    assert calls == [("shard-0/0", 0.5), ("shard-0/0",)]
    with pytest.raises(HarnessError, match="params.timeout_s=0.5: the sim backend's stop takes no timeout"):
        build("stop", FaultContext(untimed, random.Random(1), lambda f, v: v, clock=WALL), "shard-0/0",
              {"timeout_s": 0.5}).inject()


def test_clean_says_when_no_engine_answers(monkeypatch):
    import docker

    import pschaos.harness.backends.docker.reap as reap

    def refuse(timeout):
        raise docker.errors.DockerException("connection refused")
    monkeypatch.setattr(docker, "from_env", refuse)
    gone, problems, unchecked = reap.reap_engine()
    assert gone == [] and problems == [] and "no Docker engine answers" in unchecked


def test_docs_and_hints_point_at_what_exists():
    import pschaos.netfaults.toxiproxy as tp
    from pschaos.harness.machinery.tools import INSTALL, REPO

    for ref in __import__("re").findall(r"docs/[\w/.-]+\.md", tp.__doc__):
        assert (REPO / ref).exists(), ref
    assert "-ldflags" in INSTALL["toxiproxy-server"] and "v2.Version=2.12.0" in INSTALL["toxiproxy-server"]


def test_compose_has_no_constant_peer_token():
    from pschaos.harness.machinery.tools import REPO

    text = (REPO / "docker" / "compose.yaml").read_text()
    assert "compose-peer-token" not in text and "secrets.token_hex" in text and "PSCHAOS_PEER_TOKEN" in text


def test_a_host_without_merged_usr_is_refused(tmp_path):
    from pschaos.harness.backends.docker.image import merged_usr_problem

    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").symlink_to("usr/lib")
    assert "bin is not a link to usr/bin" in merged_usr_problem(str(tmp_path))
    (tmp_path / "bin").rmdir()
    (tmp_path / "bin").symlink_to("usr/bin")
    assert merged_usr_problem(str(tmp_path)) is None


def test_the_volume_holder_outlives_the_nodes_at_teardown(tmp_path):
    """--keep-data: the holder is not among the handles stop_all stops (its tmpfs volumes would be
    empty before they are saved); close saves, then removes it by label."""
    from pschaos.harness.backends.docker.containers import ContainerLauncher
    from pschaos.harness.backends.docker.plan import ImagePlan

    made = []

    class Containers:
        def run(self, *a, **kw):
            c = SimpleNamespace(attrs={"State": {"Pid": 0, "Running": False}, "Config": {"Cmd": []}},
                                reload=lambda: None, name=kw["name"])
            made.append(c)
            return c
    la = ContainerLauncher(SimpleNamespace(containers=Containers()), ImagePlan("img", True), tmp_path, "r1", 0)
    la.run("volumes", ["python"], tmp_path / "logs" / "volumes.log", keep=False)
    la.run("shard-0/0", ["python"], tmp_path / "logs" / "s.log")
    assert [h.name for h in la.handles] == ["shard-0/0"] and "volumes" in la.by_name
