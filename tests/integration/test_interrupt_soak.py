"""Ctrl-C and SIGKILL at random moments of a run leave nothing behind (issue 7, section 5).

`make test` runs one round of each (PSCHAOS_INTERRUPTS, default 1: a Ctrl-C to the process group
and a SIGKILL), `make test-long` three (the SIGINT to the harness alone and the second Ctrl-C too); the full 20 + 20 is
`python benchmarks/interrupt_soak.py`. Each SIGINT round must end with the harness exiting by
itself within 30 s; each SIGKILL round is followed by `pschaos clean`. After every round: 0
processes of that run, 0 nftables tables, 0 Toxiproxy proxies.
"""
import json
import os

import pytest

from pschaos.harness.machinery.tools import find

from .interrupts import soak, summary

pytestmark = pytest.mark.xdist_group("pschaos-clean")       # `pschaos clean` is machine-wide: one at a time (tests/unit/test_xdist_groups.py)


@pytest.mark.timeout(900)
def test_interrupts_at_random_moments_leave_no_debris(tmp_path):
    if find("toxiproxy-server") is None or find("nft") is None or find("etcd") is None:
        pytest.skip("toxiproxy-server (make install), nft and etcd are needed")
    n = int(os.environ.get("PSCHAOS_INTERRUPTS", "1"))
    rounds = soak(n, n, workdir=tmp_path)
    s = summary(rounds)
    bad = [r.to_json() for r in rounds if r.notes or not r.clean]
    assert not bad, json.dumps(bad, indent=1)
    assert s["sigint"]["processes_left"] == s["sigint"]["tables_left"] == s["sigint"]["proxies_left"] == 0
    assert s["sigkill_clean"]["processes_left"] == s["sigkill_clean"]["tables_left"] == 0
