"""Elastic shards in the SimPy backend: shard groups started and retired at run time, and
psnodes' own migration coordinator in virtual time.

The methods the shard faults (harness/faults/shards.py) and the migration moments
(harness/faults/moments.py) ask of a backend, as the process backend has them: the groups of
`max_shards` (ClusterSpec) are named at start and their links exist from the start, and a group
is started when a scale-out adds its shard. The coordinator is pschaos.psnodes.elastic.migration.Migrator itself,
run in the calling simulated thread with the simulator's Runtime (virtual clock and sleep), its
etcd client and its stubs over SimNetwork (harness/backends/sim/transport.py), as the worker's client is:
every step is the real code, and the copies serve it with the real decisions
(harness/backends/sim/copy/migrate.py). The coordinator calls from `migrator`, a node of its own on the
network that no link fault names (the process backend's coordinator, in the harness's process,
dials the nodes directly too).
"""
from __future__ import annotations

from typing import Any, Callable

from pschaos.psnodes.elastic import routing
from pschaos.psnodes.etcd import EtcdError
from pschaos.psnodes.runtime import Runtime

from pschaos.harness.backends.observe import retire_groups, start_groups
from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.sim.transport import SimEtcdClient, SimStub

MIGRATOR = "migrator"
COORDINATOR_ETCD_TIMEOUT_S = 1.0     # pschaos.psnodes.elastic.migration.Migrator: Etcd(cfg.etcd, timeout=1.0)
PHASE_ETCD_TIMEOUT_S = 0.5           # backend_process.migration_phase: Etcd(..., timeout=0.5)


class ElasticShards:
    """Mixed into SimBackend (which holds `active`, the shard groups running)."""

    active: list[int]

    def active_shards(self) -> list[int]:
        return list(self.active)

    def slot_nodes(self) -> list[str]:
        """Every copy the cluster has a name and links for, started or not (ClusterSpec.max_shards)."""
        return [n for i in range(max(self.cfg.shards, self.cfg.max_shards)) for n in self.cfg.shard_nodes(i)]

    def start_shard_groups(self, shards: list[int], timeout: float = 30.0) -> None:
        """Start the copies of new shard groups (again, for a group a scale-in retired) and wait
        until each has a primary in etcd."""
        def start(names: list[str]) -> None:
            for n in names:
                if n in self.copies:
                    self.restart(n)
                else:
                    self._new_copy(n)
        start_groups(self, shards, start, self.etcd, timeout)
        self.clock.wait_until(lambda: self._primaries_serve(shards), timeout, 0.001)

    def migrate_shards(self, dst: list[int], record: Callable[[str, dict], Any], hold_s: float = 0.0,
                       nonce: str | None = None, fenced_hold_s: float = 0.0):
        """Run psnodes' migration coordinator to shard set `dst` in this simulated thread."""
        from pschaos.psnodes.elastic.migration import Migrator

        def never() -> bool:
            return False
        rt = Runtime(monotonic=self.clock.monotonic, sleep=self.clock.sleep, time=self.clock.now,
                     pid=lambda: 1, pool=self._no_pool)
        m = Migrator(self.cfg, etcd=SimEtcdClient(self, MIGRATOR, never, timeout=COORDINATOR_ETCD_TIMEOUT_S),
                     emit=record, hold_s=hold_s, runtime=rt, nonce=nonce or "0", fenced_hold_s=fenced_hold_s,
                     stub_factory=lambda node: SimStub(self, MIGRATOR, node, never))
        try:
            return m.run(dst)
        finally:
            m.close()

    @staticmethod
    def _no_pool(n: int, prefix: str):
        raise HarnessError("the migration coordinator runs no thread pool")

    def retire_shard_groups(self, shards: list[int], record: Callable[[str, dict], Any], observe: bool = True) -> None:
        """Stop the groups of shards that own nothing now (backend_common.retire_groups)."""
        retire_groups(self, shards, record, observe, lambda n: n in self.copies, self.etcd)

    def routing_record(self):
        """The routing record in etcd, None when etcd does not answer (a paused etcd is waited for
        as long as the process backend's client waits)."""
        if self.etcd.frozen:
            self.vt.wait_event(self.etcd.thawed | self.env.timeout(PHASE_ETCD_TIMEOUT_S))
        try:
            return routing.read(self.etcd, self.cfg)[0]
        except EtcdError:
            return None

    def migration_phase(self) -> str:
        """The phase of the migration in the routing record ('' when none, or etcd does not answer)."""
        rec = self.routing_record()
        return rec.migration.phase if rec is not None and rec.migration else ""


__all__ = ["ElasticShards", "MIGRATOR"]
