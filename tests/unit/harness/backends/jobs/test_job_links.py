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
    assert be._progress("ps-0", [port]) == {"node": "ps-0", "ports": [port], "acked_step": 0}


def test_links_no_one_role_explains_are_refused_with_the_target_to_write(tmp_path):
    be = backend(tmp_path)
    with pytest.raises(HarnessError, match="workers <-> ps-0"):
        be.link_fault("loss", [("worker-0", "ps-0"), ("worker-1", "ps-1")], {"percent": 20})
    with pytest.raises(HarnessError, match="serves on no port"):
        be.link_fault("partition", [("worker-0", "chief"), ("worker-1", "chief")], {})
