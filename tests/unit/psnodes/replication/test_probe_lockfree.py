"""A replica's probe is answered without the primary's node lock (M3 of the detector review).

The probe's Status call used to run under `ShardNode.cond`, the lock push apply, checksums and
migration hold: a primary holding it longer than the probe's wait looked dead and was replaced,
alive and reachable. Status with `probe` answers (role, epoch) from one tuple read without it.
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.replication.probe import PrimaryProbe
from pschaos.psnodes.proto import ps_pb2

from tests.unit.inproc import start


@pytest.fixture
def cluster(tmp_path):
    ip = start(tmp_path)
    yield ip
    ip.close()


def test_the_probe_answers_while_the_primary_holds_its_lock(cluster):
    node = cluster.nodes[0]
    replica = SimpleNamespace(links=dict(cluster.cfg.addresses), cfg=cluster.cfg)
    probe = PrimaryProbe(replica)
    try:
        assert probe.clears(node.name, 1, timeout=2.0)          # the channel is up
        with node.cond:                                        # a long push apply, a checksum ...
            t0 = time.monotonic()
            assert probe.clears(node.name, 1, timeout=1.0)
            assert time.monotonic() - t0 < 1.0
            assert not probe.clears(node.name, 2, timeout=1.0)  # still the epoch rule
    finally:
        probe.close()


def test_the_probe_answer_is_role_and_epoch_only_and_the_full_status_still_locks(cluster):
    node = cluster.nodes[0]
    reply = node.status(ps_pb2.StatusRequest(probe=True))
    assert (reply.node, reply.shard, reply.role, reply.epoch, reply.seq) == (node.name, 0, "primary", 1, 0)
    done = threading.Event()
    with node.cond:
        threading.Thread(target=lambda: (node.status(ps_pb2.StatusRequest()), done.set()), daemon=True).start()
        assert not done.wait(0.2)                              # the full Status is consistent: under the lock
    assert done.wait(2.0)


def test_the_term_moves_as_one(cluster):
    node = cluster.nodes[0]
    with node.cond:
        node.follow(3, "shard-0/1", 0)
    assert node.status(ps_pb2.StatusRequest(probe=True)).role == "replica" and node._term == ("replica", 3)
    node.become_primary(ShardRecord(epoch=4, primary=node.name, isr=[node.name]))
    assert node._term == ("primary", 4) and node.role == "primary" and node.epoch == 4


def test_role_and_epoch_cannot_be_set_one_at_a_time(cluster):
    """A setter of one half published a torn pair (the new role with the old epoch) to the
    lock-free probe between two assignments (detector review 2, L3): `_term` moves whole only."""
    node = cluster.nodes[0]
    with pytest.raises(AttributeError):
        node.role = "replica"
    with pytest.raises(AttributeError):
        node.epoch = 7
    assert node._term == ("primary", 1)
