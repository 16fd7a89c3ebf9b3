"""A Migrate step's and a routing adoption's ack waits end once the caller gave the call up, as a
push's and a pull's do: they ran to their deadline, holding a reserved RPC thread (the README
said so; issue 13's left-overs). Here the shell's waits are fakes that record what they were given."""
from __future__ import annotations

import threading
from types import SimpleNamespace

from pschaos.psnodes.server import ownership
from pschaos.psnodes.proto import ps_pb2


class Node:
    def __init__(self, mode: str) -> None:
        self.name, self.shard, self.epoch = "shard-0/0", 0, 3
        self.cond = threading.Condition()
        self.cfg = SimpleNamespace(mode=mode)
        self.peer_seq: dict = {}
        self.metrics = SimpleNamespace(seq=SimpleNamespace(set=lambda v: None))
        self.events = SimpleNamespace(emit=lambda *a: None)
        self.store = SimpleNamespace(routing_epoch=1, seq=7, seq_epoch=3, validate=lambda upd: upd, apply=self._apply)
        self.waits: list = []

    def _apply(self, dec, payload, epoch) -> int:
        self.store.seq += 1
        return self.store.seq

    def _check_primary(self, epoch: int) -> None:
        pass

    def _check_shard(self, shard: int, method: str) -> None:
        pass

    def _wait_replicated(self, seq, epoch, deadline, active=None) -> None:
        self.waits.append(("replicated", active))

    def _wait_followers(self, epoch, deadline, active=None) -> None:
        self.waits.append(("followers", active))


def gone() -> bool:
    return False


def test_a_route_adoption_and_a_migrate_step_pass_the_callers_cancel_to_their_waits():
    for mode, wait in (("sync", "replicated"), ("async", "followers")):
        node = Node(mode)
        ownership.adopt(node, 2, (0, 1), 10.0, gone)
        assert node.waits == [(wait, gone)], mode
        node.waits.clear()
        req = ps_pb2.MigrateRequest(shard=0, op=ps_pb2.MigrateRequest.ROUTE, routing_epoch=5, dst=[0, 1])
        ownership.migrate(node, req, 10.0, gone)
        assert node.waits == [(wait, gone)], mode
