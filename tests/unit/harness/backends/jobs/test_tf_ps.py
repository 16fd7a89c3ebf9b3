"""The tf-ps job's contract with the harness: its roles, TF_CONFIG, who restarts, when it is over."""
from __future__ import annotations

import json
import sys

import pytest
from pydantic import ValidationError

from pschaos.harness.backends.jobs.api import JobEnv
from pschaos.harness.backends.jobs.tf_ps import TFParameterServer
from pschaos.harness.errors import HarnessError
from pschaos.harness.run.scenario import Scenario


def job(tmp_path, **opt) -> TFParameterServer:
    options = {k: v for k, (_, v) in TFParameterServer.options.items()} | {"python": sys.executable} | opt
    return TFParameterServer(JobEnv(tmp_path, 3, 120, 0.0, options))


def test_roles_are_the_coordinator_the_workers_and_the_ps_tasks(tmp_path):
    assert job(tmp_path, workers=3, ps=1).roles() == ["chief", "worker-0", "worker-1", "worker-2", "ps-0"]


def test_every_task_gets_its_place_in_one_loopback_cluster(tmp_path):
    j = job(tmp_path)
    argv = j.launch()
    assert sorted(argv) == sorted(j.roles())
    cfgs = {name: json.loads(j.environment(name)["TF_CONFIG"]) for name in argv}
    cluster = cfgs["chief"]["cluster"]
    assert all(c["cluster"] == cluster for c in cfgs.values())
    addrs = [a for group in cluster.values() for a in group]
    assert len(set(addrs)) == 5 and all(a.startswith("127.0.0.1:") for a in addrs)
    assert cfgs["ps-1"]["task"] == {"type": "ps", "index": 1}
    assert cfgs["chief"]["task"] == {"type": "chief", "index": 0}
    assert j.environment("worker-1")["PSCHAOS_NODE"] == "worker-1"
    line = argv["chief"]
    assert line[0] == sys.executable and line[line.index("--steps") + 1] == "120"
    assert line[line.index("--seed") + 1] == "3"


def test_a_task_is_restarted_alone_and_the_job_ends_with_the_coordinator(tmp_path):
    j = job(tmp_path)
    assert j.restart_scope("ps-0") == "process" and j.restart_scope("chief") == "process"
    launched = j.roles()
    assert j.finished({"chief": 0}, launched)
    assert not j.finished({"chief": 1}, launched)          # a failed coordinator is restarted, not done
    assert not j.finished({"worker-0": -9, "ps-0": 0}, launched)
    assert j.loopback_only and j.progress_role == "chief"


def test_the_plan_names_the_coordinator_as_the_acknowledging_rank(tmp_path):
    p = job(tmp_path, ckpt_every=7).plan()
    assert p["ranks"] == ["chief"] and p["ckpt_every"] == 7 and p["steps"] == 120


BASE = {"name": "t", "system": "tf-ps", "workload": {"steps": 50}}


def error(**over) -> str:
    with pytest.raises(ValidationError) as e:
        Scenario.model_validate({**BASE, **over})
    return str(e.value)


def test_a_missing_tensorflow_python_is_named_with_the_fix(monkeypatch):
    monkeypatch.delenv("PSCHAOS_TF_PYTHON", raising=False)
    msg = error(system_options={"python": "/nowhere/python"})
    assert "system_options.python" in msg and "make tf-venv" in msg
    Scenario.model_validate(BASE)             # unset: the scenario loads (pschaos list needs no TensorFlow)...


def test_no_tensorflow_python_stops_the_run_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("PSCHAOS_TF_PYTHON", raising=False)
    with pytest.raises(HarnessError, match="PSCHAOS_TF_PYTHON"):    # ...and the run says what is missing
        job(tmp_path, python="").launch()


def test_sizes_and_intervals_out_of_range_are_refused(monkeypatch):
    monkeypatch.setenv("PSCHAOS_TF_PYTHON", sys.executable)
    assert "1 to 4 of each" in error(system_options={"ps": 9})
    assert "at least 1 step" in error(system_options={"ckpt_every": 0})
    assert "is not a role of tf-ps" in error(faults=[{"at": {"step": 5}, "kind": "kill", "target": "ps-3"}])
    sc = Scenario.model_validate({**BASE, "faults": [{"at": {"step": 5}, "kind": "pause", "target": "ps-1"}]})
    assert sc.system_options["workers"] == 2


def test_link_faults_aim_at_a_parameter_server_and_others_are_refused(monkeypatch):
    monkeypatch.setenv("PSCHAOS_TF_PYTHON", sys.executable)
    loss = {"at": {"step": 5}, "kind": "loss", "target": "workers <-> ps-0", "params": {"percent": 20}, "duration_s": 2}
    assert Scenario.model_validate({**BASE, "faults": [loss]}).faults[0].kind == "loss"
    lat = {**loss, "kind": "latency", "target": "workers -> ps-1", "params": {"latency_ms": 50}}
    assert Scenario.model_validate({**BASE, "faults": [lat]}).faults[0].kind == "latency"
    assert "not slicer" in error(faults=[{**loss, "kind": "slicer", "params": {"average_size": 10}}])
    assert "is not a role of tf-ps" in error(faults=[{**loss, "target": "workers <-> ps-7"}])


def test_a_parameter_servers_cut_is_its_port_for_every_client(tmp_path):
    j = job(tmp_path, workers=2, ps=2)
    j.launch()
    links = j.links()
    assert ("worker-1", "ps-0") in links and ("ps-0", "worker-1") in links and ("chief", "ps-1") in links
    assert all("ps-" in a + b for a, b in links)          # worker->PS links; no worker<->worker
    port = int(j.cluster["ps"][1].rsplit(":", 1)[1])
    assert j.ports_of("ps-1") == [port] and j.ports_of("ps-5") == []


def test_with_proxies_every_task_dials_them_but_a_server_keeps_its_own_address(tmp_path):
    j = job(tmp_path, ps=2)
    j.launch()
    real = list(j.cluster["ps"])
    j.via = {"ps-0": "127.0.0.1:1111", "ps-1": "127.0.0.1:2222"}
    ps_of = {n: json.loads(j.environment(n)["TF_CONFIG"])["cluster"]["ps"] for n in j.roles()}
    assert ps_of["chief"] == ps_of["worker-0"] == ["127.0.0.1:1111", "127.0.0.1:2222"]
    assert ps_of["ps-0"] == [real[0], "127.0.0.1:2222"] and ps_of["ps-1"] == ["127.0.0.1:1111", real[1]]
    assert j.proxied_roles() == ["ps-0", "ps-1"]
