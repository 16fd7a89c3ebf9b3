"""A link fault on a job: nftables drops on the one role every cut link touches, or a clear refusal."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from pschaos.harness.backends.jobs.backend import JobBackend
from pschaos.harness.backends.jobs.tf_ps import TFParameterServer
from pschaos.harness.errors import HarnessError


def backend(tmp_path) -> JobBackend:
    options = {k: v for k, (_, v) in TFParameterServer.options.items()} | {"python": sys.executable}
    sc = SimpleNamespace(workload=SimpleNamespace(steps=50, step_delay_s=0.0), system_options=options)
    be = JobBackend(TFParameterServer, sc, tmp_path, "links-test", 1)
    be.job.launch()          # the cluster's ports, without starting anything
    return be


def test_a_cut_of_a_parameter_server_drops_its_port_both_ways(tmp_path):
    be = backend(tmp_path)
    links = [(w, "ps-0") for w in ("worker-0", "worker-1")] + [("ps-0", w) for w in ("worker-0", "worker-1")]
    cut = be.link_fault("loss", links, {"percent": 20})
    port = be.job.ports_of("ps-0")[0]
    assert cut.matches == [f"tcp dport {port}", f"tcp sport {port}"] and cut.percent == 20.0
    assert be._progress("ps-0", [port]) == {"node": "ps-0", "ports": [port], "acked_step": 0, "pid": None}


def test_links_no_one_role_explains_are_refused_with_the_target_to_write(tmp_path):
    be = backend(tmp_path)
    with pytest.raises(HarnessError, match="workers <-> ps-0"):
        be.link_fault("loss", [("worker-0", "ps-0"), ("worker-1", "ps-1")], {"percent": 20})
    with pytest.raises(HarnessError, match="serves on no port"):
        be.link_fault("partition", [("worker-0", "chief"), ("worker-1", "chief")], {})


def ddp_backend(tmp_path) -> JobBackend:
    from pschaos.harness.backends.jobs.torchrun_ddp import TorchrunDDP

    options = {k: v for k, (_, v) in TorchrunDDP.options.items()}
    sc = SimpleNamespace(workload=SimpleNamespace(steps=50, step_delay_s=0.0), system_options=options)
    return JobBackend(TorchrunDDP, sc, tmp_path, "ddp-links-test", 1)


def test_a_rank_is_cut_on_its_own_ends_of_its_sockets_now(tmp_path):
    import socket

    be = ddp_backend(tmp_path)
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    try:
        be.job.pid = lambda role, launched: __import__("os").getpid() if role == "rank-1" else None
        ports = be.job.ports_of("rank-1")
        assert server.getsockname()[1] in ports and client.getsockname()[1] in ports
        assert be.job.ports_of("rank-2") == []          # not running: nothing to cut, refused below
        cut = be.link_fault("loss", [("rank-0", "rank-1"), ("rank-1", "rank-0"), ("agent", "rank-1")], {"percent": 10})
        assert f"tcp dport {client.getsockname()[1]}" in cut.matches
        with pytest.raises(HarnessError, match="serves on no port"):
            be.link_fault("partition", [("rank-0", "rank-2"), ("agent", "rank-2")], {})
    finally:
        for s in (client, peer, server):
            s.close()


def test_a_kill_during_checkpoint_sees_the_write_the_shim_has_open_until_its_commit(tmp_path):
    import json

    be = ddp_backend(tmp_path)
    path = be.events_path("rank-0")
    path.parent.mkdir(parents=True, exist_ok=True)
    running = {"pid": 41}
    be._pid = lambda name: running["pid"]

    def write(*events, tail="", head=""):
        with open(path, "a") as f:
            f.write(head)
            f.writelines(json.dumps({"f": e[0], "value": {"incarnation": "0.0", **e[1]}}) + "\n" for e in events)
            f.write(tail)

    write(("job-start", {}), ("checkpoint", {"step": 20, "phase": "start", "pid": 41}),
          ("checkpoint", {"step": 20, "phase": "commit"}))
    assert be.checkpoint_writes("rank-0") == []          # committed: the rename is under way or done
    write(("checkpoint", {"step": 20, "phase": "done"}), ("checkpoint", {"step": 40, "phase": "start", "pid": 41}),
          tail='{"f": "checkpoint", "value": {"st')       # torn: read later
    open_40 = ["checkpoint of step 40 (0.0, pid 41)"]
    assert be.checkpoint_writes("rank-0") == open_40
    assert be.checkpoint_writes("rank-0") == open_40     # read on, not again
    running["pid"] = None                                # killed mid-write: nobody runs the role yet
    assert be.checkpoint_writes("rank-0") == open_40
    running["pid"] = 57                                  # a new process, still importing: not its write
    assert be.checkpoint_writes("rank-0") == []
    write(("job-start", {}), head="\n")    # its shim's first line begins after the torn one
    running["pid"] = None
    assert be.checkpoint_writes("rank-0") == []
