"""Model-based test of store plus replication: random pushes, partial replication, crashes from
checkpoints, promotions and catch-ups. Invariants: a copy whose position matches the primary's
history holds exactly the primary's state at that seq (a prefix); catch-up always ends equal."""
import numpy as np
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pschaos.psnodes.store.optimizers import OptimizerConfig
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.wire.codec import rows_to_pb, tensor_to_pb
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore

COPIES = 3


def new_store() -> ShardStore:
    return ShardStore(ShardSpec(shard=0, num_shards=1, tables={"emb": 2}, optimizer=OptimizerConfig("adam", lr=0.1),
                                seed=1, log_entries=8))


class Replication(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.copies = [new_store() for _ in range(COPIES)]
        self.checkpoints: list[bytes | None] = [None] * COPIES
        self.primary, self.epoch, self.req = 0, 1, 0
        p = self.copies[0]
        u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb("w", np.zeros(3))])
        p.apply(p.validate(u), u.SerializeToString(), self.epoch)
        self.ref = {0: new_store().checksum(), 1: p.checksum()}   # seq -> checksum on the primary's history

    @property
    def p(self) -> ShardStore:
        return self.copies[self.primary]

    def replicas(self):
        return [i for i in range(COPIES) if i != self.primary]

    @rule(ids=st.lists(st.integers(0, 20), min_size=0, max_size=4), g=st.floats(-1, 1))
    def push(self, ids, g):
        if "w" not in self.p.dense:   # promoted from an empty prefix: the worker's INIT comes again
            u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb("w", np.zeros(3))])
            seq = self.p.apply(self.p.validate(u), u.SerializeToString(), self.epoch)
            self.ref[seq] = self.p.checksum()
        self.req += 1
        u = ps_pb2.Update(worker="worker-0", req_id=self.req, dense=[tensor_to_pb("w", np.full(3, g))])
        if ids:
            u.sparse.append(rows_to_pb("emb", np.array(ids), np.full((len(ids), 2), g), 2))
        seq = self.p.apply(self.p.validate(u), u.SerializeToString(), self.epoch)
        self.ref[seq] = self.p.checksum()

    @rule(k=st.integers(0, COPIES - 1), n=st.integers(1, 5))
    def replicate(self, k, n):
        if k == self.primary:
            return
        r = self.copies[k]
        if not self.p.matches(r.seq, r.seq_epoch):
            return
        entries = self.p.log.since(r.seq)
        for e in (entries or [])[:n]:
            r.apply_entry(e)

    @rule(k=st.integers(0, COPIES - 1))
    def checkpoint(self, k):
        self.checkpoints[k] = self.copies[k].export_state(0)[0]

    @rule(k=st.integers(0, COPIES - 1))
    def crash(self, k):
        if k == self.primary:
            return
        s = new_store()
        if self.checkpoints[k] is not None:
            s.import_state(self.checkpoints[k])
        self.copies[k] = s

    @rule(k=st.integers(0, COPIES - 1))
    def promote(self, k):
        r = self.copies[k]
        if k == self.primary or not self.p.matches(r.seq, r.seq_epoch):
            return   # only a copy holding a prefix of the history may be promoted (the ISR rule)
        self.primary, self.epoch = k, self.epoch + 1
        self.ref = {s: c for s, c in self.ref.items() if s <= r.seq}

    @rule(k=st.integers(0, COPIES - 1))
    def catch_up(self, k):
        if k == self.primary:
            return
        r = self.copies[k]
        if self.p.matches(r.seq, r.seq_epoch):
            blob, changed = self.p.export_state(r.seq)
        else:
            blob, changed = self.p.export_state(0)
        r.import_state(blob)
        assert r.checksum() == self.p.checksum() and r.seq == self.p.seq

    @invariant()
    def matching_copies_are_prefixes(self):
        for k in self.replicas():
            r = self.copies[k]
            if self.p.matches(r.seq, r.seq_epoch):
                assert r.seq <= self.p.seq
                assert r.checksum() == self.ref[r.seq], f"copy {k} at seq {r.seq} is not a prefix"

    @invariant()
    def primary_state_is_its_history(self):
        assert self.ref[self.p.seq] == self.p.checksum()


Replication.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestReplication = Replication.TestCase
