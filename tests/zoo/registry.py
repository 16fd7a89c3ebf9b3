"""The bug zoo: classic parameter-server and replicated-store bugs, each a small patch of psnodes.

`pschaos selftest` runs the default suite against a temporary copy of the code with each patch
applied and counts the mutants the checkers kill (the mutation score). Nothing in the product
switches a bug on. Every `old` text must occur exactly once in its file (tests/unit/harness/proof/selftest/test_zoo.py
checks it against the current tree), so a refactor that moves the code breaks the zoo loudly.

Where the decision lives in psnodes/core, or in a module both backends run (ShardStore,
EmbeddingTable, the PS client and the worker: the twin runs them as they are), one patch
mutates both backends (`sim="core"`). Where it lives in a shell (psnodes/replication/replication.py,
psnodes/server/checkpointing.py, psnodes/store/checkpoint.py), the mutant carries the same edit of the twin's port
(harness/backends/sim/copy/replication.py, copy/checkpoint.py, disk.py) so the two backends can be
compared mutant by mutant (`sim="shell"`).
"""
from __future__ import annotations

from pschaos.harness.proof.selftest.mutation import Mutant

PLANTED = "  # planted by the bug zoo"

SYNC_EARLY_ACK = Mutant(
    name="sync-early-ack",
    description="sync mode acks a push before every in-sync replica applied it",
    models="a leader that acks on its own write (Kafka acks=1 behind an acks=all promise): an ack lost on failover",
    patch={"psnodes/core/ack.py": [(
        "    return all(r.peer_seq.get(p, 0) >= seq for p in r.isr if p != r.me)",
        "    return r.mode == \"sync\" or all(r.peer_seq.get(p, 0) >= seq for p in r.isr if p != r.me)" + PLANTED)]},
    checker="no-lost-acks",
    scenarios=("partition-primary-replicas", "kill-primary", "pause-primary"),
)

NO_EPOCH_FENCING = Mutant(
    name="no-epoch-fencing",
    description="a replica takes replication from a primary of an older epoch instead of refusing it",
    models="missing fencing tokens: a deposed leader that wakes up is still obeyed by its followers and keeps acking",
    patch={"psnodes/core/fencing.py": [(
        "    if req_epoch < epoch:\n        return Replicate.REFUSE_STALE",
        "    if req_epoch < epoch:\n        return Replicate.ACCEPT" + PLANTED)]},
    checker="single-primary",
    scenarios=("short-cut-primary", "partition-primary-replicas", "pause-primary", "split-brain-restore"),
    notes="killed by short-cut-primary on both backends: an asymmetric cut shorter than the lease leaves the deposed "
          "primary believing its lease, reaching its replica but not hearing from it or etcd, with a worker that "
          "still routes to it; only the replica's refusal of the old epoch stops it acking beside its successor. "
          "The symmetric scenarios do not: the old primary is fenced first by the new one's higher epoch, its ISR "
          "change refused by etcd's record, or its lease"
)

RETRY_APPLIED_TWICE = Mutant(
    name="retry-applied-twice",
    description="a retried push is applied again: the idempotency key is never looked up",
    models="at-least-once delivery taken for exactly-once: a client retry after a lost reply doubles a gradient",
    patch={"psnodes/store/checks.py": [(
        "            if self.applied.contains(local, upd.req_id):",
        "            if False:" + PLANTED)]},
    checker="exactly-once",
    scenarios=("split-brain-restore", "loss-20-worker-links", "kill-primary"),
)

DELTA_GET_AND_CLEAR = Mutant(
    name="delta-get-and-clear",
    description="the keys a delta pull returns come from a changed-set read and cleared at every pull, "
                "not from each key's change seq: keys changed before another worker's pull are lost",
    models="a dirty set tracked by get-and-clear, shared by every reader: one reader's sync empties it for all",
    patch={"psnodes/store/reads.py": [
        ("            if self.dense_mod[n] > since:",
         "            if self.dense_mod[n] > (max(since, getattr(self, \"_cleared\", 0)) if since else 0):" + PLANTED),
        ("        size = sum(a.nbytes for _, a in out)",
         "        self._cleared = self.seq" + PLANTED + "\n        size = sum(a.nbytes for _, a in out)")]},
    checker="delta-complete",
    scenarios=("kill-primary", "kill-replica", "partition-worker-shard"),
)

LOG_OVERFLOW_DROPS = Mutant(
    name="log-overflow-drops",
    description="the bounded update log drops its oldest entries without moving its base, so a lagging "
                "peer it no longer reaches is sent the entries that are left instead of a delta",
    models="a ring buffer that overwrites silently: the follower should get a snapshot, gets a log with a hole",
    patch={"psnodes/store/updatelog.py": [
        ("            self.base_seq, self.base_epoch = old.seq, old.epoch",
         "            pass" + PLANTED),
        ("        start = seq + 1 - self.entries[0].seq",
         "        start = max(0, seq + 1 - self.entries[0].seq)" + PLANTED)],
        # sizes, not the bug: the log must be shorter than the lag a peer catches up by log, or it
        # never overflows under a catch-up (4096 entries against 64 in the product)
        "psnodes/config.py": [("    log_entries: int = 4096", "    log_entries: int = 32" + PLANTED)],
        "psnodes/core/logmatch.py": [("LOG_CATCHUP_MAX = 64", "LOG_CATCHUP_MAX = 4096" + PLANTED)]},
    checker="replicas-match",
    scenarios=("kill-replica", "replica-restart-catchup", "async-kill-primary"),
    notes="with the product's sizes (a 4096-entry log, catch-up by log only within 64 entries) a log that "
          "overflows is never read by a catch-up; the mutant makes the log shorter than that window so "
          "that the bug, not the sizes, is what the suite meets",
)

MANIFEST_BEFORE_DATA = Mutant(
    name="manifest-before-data",
    description="a checkpoint's manifest is written (and renamed into place) before its data file",
    models="a commit record written before the data it names: a crash in between leaves a manifest naming a "
           "missing or torn file",
    patch={
        "psnodes/store/checkpoint.py": [
            ("    state_tmp = _write_aside(directory / name, blob)     # the slow part, outside the lock",
             "    state_tmp = directory / f\"{name}.zoo.tmp\"" + PLANTED),
            ("            os.replace(state_tmp, directory / name)\n            os.replace(man_tmp, directory / MANIFEST)",
             "            os.replace(man_tmp, directory / MANIFEST)" + PLANTED +
             "\n            state_tmp = _write_aside(directory / name, blob)\n"
             "            os.replace(state_tmp, directory / name)")],
        "harness/backends/sim/disk.py": [
            ("        self.folder(d).tmp[state_tmp] = self.env.now\n",
             "        self.folder(d).tmp[state_tmp] = self.env.now\n"
             "        if not keeps_current(self.manifest(d), manifest, newer_only, True):" + PLANTED + "\n"
             "            self.folder(d).files[MANIFEST] = json.dumps({**manifest, \"time\": self.clock.now()}).encode()\n")]},
    checker="checkpoints-atomic",
    scenarios=("kill-during-checkpoint", "stale-checkpoint-writer", "all-copies-lost"),
    sim="shell",
)

SSP_OFF_BY_ONE = Mutant(
    name="ssp-off-by-one",
    description="SSP lets a worker run staleness + 1 clocks ahead of the slowest, not staleness",
    models="an off-by-one in the stale-synchronous-parallel bound (< for <=): staleness silently grows by one",
    patch={"psnodes/core/gating.py": [(
        "        return max(0, step - staleness)",
        "        return max(0, step - staleness - 1)" + PLANTED)]},
    checker="staleness",
    scenarios=("ssp-straggler", "ssp-kill-primary"),
)

VERSION_ACROSS_EPOCH = Mutant(
    name="version-across-epoch",
    description="a worker keeps its pulled version (seq cursor) across an epoch change and pulls "
                "'since' it from the new primary, whose history may differ after that seq",
    models="a client cache keyed by offset alone, not (term, offset): after a failover it skips state it never saw",
    patch={"psnodes/client/client.py": [
        ("            sent[\"since\"] = last_seq if last_epoch == ep else 0",
         "            sent[\"since\"] = last_seq" + PLANTED),
        # and the second guard, a reply at another epoch than the cursor's pulled again whole
        ("            if sent[\"since\"] and rep.epoch != sent[\"cursor_epoch\"]:",
         "            if False:" + PLANTED)]},
    checker="pulled-copy-matches",
    scenarios=("all-copies-lost", "async-kill-primary", "async-pause-primary", "stale-checkpoint-writer"),
    notes="killed on both backends by pulled-copy-matches (all-copies-lost: the restore rolls the shard back "
          "below the workers' cursor, the carried cursor's delta returns nothing, and the client's CRC of its "
          "copy differs from the server's CRC of its state); a rule on the cursor itself is unsound (a carry "
          "to an epoch whose history holds it is right: etcd-outage-failover). async-kill-primary alone does "
          "not kill it at seed 1: the new primary held every seq the workers had read",
)

OUT_OF_ORDER_APPLY = Mutant(
    name="out-of-order-apply",
    description="a replica applies a batch of replicated entries in reverse order",
    models="a follower that applies a batch in the wrong order (a stack for a queue): non-commutative optimizer "
           "steps leave the copy silently diverged",
    patch={"psnodes/store/store.py": [(
        "        for e, dec in steps:",
        "        for e, dec in steps[::-1]:" + PLANTED)]},
    checker="replicas-match",
    scenarios=("kill-primary", "latency-primary-replica", "replica-restart-catchup"),
)

ISR_DROP_LOCAL_ONLY = Mutant(
    name="isr-drop-local-only",
    description="a primary drops a silent replica from its own ISR and acks without it, but never "
                "removes it from the ISR in etcd",
    models="membership changed locally before (or instead of) the coordinator: a replica that misses acked "
           "writes stays electable",
    patch={
        "psnodes/replication/replication.py": [(
            "        with self.isr_lock:\n            if add and add not in node.isr:\n                return False",
            "        with self.isr_lock:\n            if remove:" + PLANTED + "\n"
            "                with node.cond:\n"
            "                    if remove in node.isr:\n"
            "                        node.isr.remove(remove)\n"
            "                    node.cond.notify_all()\n"
            "                return True\n"
            "            if add and add not in node.isr:\n                return False")],
        "harness/backends/sim/copy/replication.py": [(
            "        if add and add not in c.isr:\n            return False\n        key = cfg.shard_key(c.shard)",
            "        if remove:" + PLANTED + "\n"
            "            if remove in c.isr:\n"
            "                c.isr.remove(remove)\n"
            "            c.notify()\n"
            "            return True\n"
            "        if add and add not in c.isr:\n            return False\n        key = cfg.shard_key(c.shard)")]},
    checker="no-lost-acks",
    scenarios=("async-partition-primary", "split-brain-restore", "partition-primary-replicas", "kill-replica"),
    sim="shell",
)

_ZERO_STEPS = ("_steps = (dict(self.store.dense_steps), {n: t.steps.copy() for n, t in self.store.tables.items()})"
               + PLANTED + "\n"
               "            self.store.dense_steps.update({k: 0 for k in _steps[0]})\n"
               "            for _t in self.store.tables.values():\n"
               "                _t.steps[:] = 0\n"
               "            blob, _ = self.store.export_state(0)\n"
               "            self.store.dense_steps.update(_steps[0])\n"
               "            for _n, _t in self.store.tables.items():\n"
               "                _t.steps = _steps[1][_n]")
# the same edit of the twin's port, whose checkpoint side holds its copy as `c`
_ZERO_STEPS_TWIN = _ZERO_STEPS.replace("self.store", "c.store")

ADAM_STEP_NOT_PERSISTED = Mutant(
    name="adam-step-not-persisted",
    description="checkpoints store every optimizer step counter as 0 (Adam's t, per dense tensor and "
                "per embedding row): a copy that loads one restarts its bias correction",
    models="optimizer state saved without its step count (the classic Adam resume bug): the moments are "
           "back, t is not, and the restored copy differs from the others",
    patch={"psnodes/server/checkpointing.py": [("blob, _ = self.store.export_state(0)", _ZERO_STEPS)],
           "harness/backends/sim/copy/checkpoint.py": [("blob, _ = c.store.export_state(0)", _ZERO_STEPS_TWIN)]},
    checker="replicas-match",
    scenarios=("replica-restart-catchup", "kill-replica", "all-copies-lost"),
    sim="shell",
)

ROWS_CREATED_ON_READ = Mutant(
    name="rows-created-on-read",
    description="pulling an embedding row that was never pushed creates it in the table",
    models="a read that writes (get-or-create on the read path): only the copy that served the read has the "
           "row, so copies diverge though no update was logged",
    patch={"psnodes/store/embedding.py": [(
        "        pos = self._positions(ids, create=False)\n        out = np.empty",
        "        pos = self._positions(ids, create=True)" + PLANTED + "\n        out = np.empty")]},
    checker="replicas-match",
    scenarios=("replica-restart-catchup", "async-kill-primary", "kill-during-checkpoint"),
    notes="killed on both backends by replica-restart-catchup, whose workers evaluate every 25 steps "
          "(cluster.eval_every): a held-out batch with cold-start ids, pulled and never pushed, leaves the "
          "primary with rows its replicas never got (seed 1: sim 28 s, process 18 s). Before the evaluator it "
          "survived: every row a worker read it pushed right after, so no read was left without its write",
)

INCARNATION_IGNORED = Mutant(
    name="incarnation-ignored",
    description="the idempotency key names the worker, not the worker process: a restarted worker's "
                "request ids collide with its predecessor's",
    models="dedup by (client, request id) where request ids restart with the process: new writes acked as "
           "duplicates and never applied",
    patch={"psnodes/client/client.py": [(
        "self.incarnation = int(runtime.time() * 1e6)",
        "self.incarnation = 0" + PLANTED)]},
    checker="no-lost-acks",
    scenarios=("kill-restart-worker",),
)

NO_LEASE_BOUND = Mutant(
    name="no-lease-bound",
    description="a primary ignores its etcd lease: it acks whether or not the lease may have expired, and "
                "does not step down when etcd stops confirming it",
    models="leader lease not enforced (no lease-based fencing): a primary cut off from the coordinator acks "
           "on while another copy restores the shard",
    patch={"psnodes/core/lease.py": [
        ("    return now < lease_until", "    return True" + PLANTED),
        ("    return now - lease_seen > ttl", "    return False" + PLANTED)]},
    checker="single-primary",
    scenarios=("split-brain-restore", "stale-checkpoint-writer", "pause-primary"),
)

RESTORE_FROM_OWN_FOLDER = Mutant(
    name="restore-from-own-folder",
    description="when every copy of a shard is lost, the restorer reads its own local checkpoint folder "
                "instead of the shard's shared one, and declares the loss",
    models="a recovery that takes the state at hand, not the best state available (a replica restoring from its "
           "own stale snapshot while a newer one sits in shared storage): more acknowledged updates lost than "
           "necessary, each one declared",
    patch={
        "psnodes/server/checkpointing.py": [(
            "        got = read_checkpoint(self.cfg.checkpoint_dir(self.shard))\n        ckpt = ",
            "        got = read_checkpoint(self.cfg.data_dir(self.name))" + PLANTED + "\n        ckpt = ")],
        "harness/backends/sim/copy/checkpoint.py": [(
            "        got = c.disk.read(shared_dir(c.shard))",
            "        got = c.disk.read(local_dir(c.name))" + PLANTED)]},
    checker="losses-accounted",
    scenarios=("all-copies-lost", "stale-checkpoint-writer", "split-brain-restore"),
    sim="shell",
)

REJOINER_AT_OLD_CLOCK = Mutant(
    name="rejoiner-at-old-clock",
    description="the BSP barrier counts a rejoining worker at the clock its previous incarnation pushed, "
                "not at the start its new membership gives it",
    models="a barrier keyed by worker name, not by incarnation: the restarted worker waits in its first pull "
           "for a floor only its own push could raise, and the job deadlocks",
    patch={"psnodes/core/membership.py": [(
        "    return max(start, clocks.get(worker, 0))\n",
        "    return clocks.get(worker, 0)" + PLANTED + "\n")]},
    checker="progress",
    scenarios=("bsp-kill-worker", "bsp-partition-worker-etcd"),
    sim="core",
    notes="the run ends itself after workload.stall_s of quiet (90 s) with a failing progress check that names "
          "the barrier's members, their clocks and whom each pull waits for, not with a test's timeout",
)

HANDOFF_WITHOUT_DEDUP = Mutant(
    name="handoff-without-dedup",
    description="a migration's hand-off carries the keys but not the dedup state (applied sets) of the "
                "pushes applied to them",
    models="state moved without its idempotency table: a push the source applied before the fence, whose "
           "reply was lost, is applied again by the new owner when its retry is re-routed there",
    patch={"psnodes/store/moving.py": [(
        "    for k, rs in meta[\"applied\"].items():\n        store.foreign[k] = ",
        "    for k, rs in {}.items():" + PLANTED + "\n        store.foreign[k] = ")]},
    checker="exactly-once",
    scenarios=("migration-partition-worker", "migration-kill-source-handoff", "scale-out-shards"),
    sim="core",
)

EARLY_RETRY_ACK = Mutant(
    name="early-retry-ack",
    description="in sync mode, a retried push the primary recognises as a duplicate is acknowledged at once "
                "from its dedup table, without waiting for the entry to reach the in-sync replicas",
    models="an idempotent retry path that skips the durability wait of the first attempt: the retry's ack "
           "promises what the ISR may not hold, and a failover then loses an acknowledged update",
    patch={
        "psnodes/server/node.py": [(
            "                self._wait_replicated(seq, epoch, deadline, active)",
            "                None if duplicate else self._wait_replicated(seq, epoch, deadline, active)" + PLANTED)],
        "harness/backends/sim/copy/copy.py": [(
            "            yield from acks.wait_replicated(self, seq, epoch, deadline)",
            "            yield from (iter(()) if d.duplicate else acks.wait_replicated(self, seq, epoch, deadline))"
            + PLANTED)]},
    checker="acks-durable",
    scenarios=("cut-primary-retries", "one-way-cut-primary", "partition-primary-replicas"),
    sim="shell",
)

NO_READ_BARRIER = Mutant(
    name="no-read-barrier",
    description="in sync mode the primary answers a pull with state its in-sync replicas may not hold yet",
    models="a read served from the leader's local state before the write is committed (a dirty read): a "
           "failover can undo what a worker already trained on",
    patch={
        "psnodes/server/node.py": [(
            "                self._wait_replicated(self.store.seq, epoch, deadline, active)",
            "                pass" + PLANTED)],
        "harness/backends/sim/copy/copy.py": [(
            "            yield from acks.wait_replicated(self, self.store.seq, epoch, deadline)",
            "            pass" + PLANTED)]},
    checker="reads-committed",
    scenarios=("kill-primary", "kill-primary-slow-replication", "cut-primary-retries", "one-way-cut-primary"),
    sim="shell",
)

LAG_BOUND_OFF = Mutant(
    name="lag-bound-off",
    description="async replication's lag bound is never applied: a push never waits for a trailing replica",
    models="back-pressure configured but dead code: a slow follower falls arbitrarily far behind, and a "
           "failover to it loses everything it never received",
    patch={"psnodes/core/ack.py": [(
        "    return replicated(r, head_seq - max_lag)",
        "    return True" + PLANTED)]},
    checker="lag-bounded",
    scenarios=("async-backpressure", "async-kill-primary", "async-pause-primary"),
    sim="core",
)

PROMOTION_BY_SLOT = Mutant(
    name="promotion-by-slot",
    description="an election ranks candidates by replica slot before their position: the lowest slot wins "
                "over a copy that holds more entries",
    models="a leader election by fixed priority that ignores which follower is most up to date (the Raft "
           "up-to-date rule left out): in async mode the acknowledged entries only the better copy held are lost",
    patch={"psnodes/core/promotion.py": [(
        "    return (pos.seq_epoch, pos.seq, -parse_node_name(name)[1])",
        "    return (-parse_node_name(name)[1], pos.seq_epoch, pos.seq)" + PLANTED)]},
    checker="best-promoted",
    scenarios=("async-kill-lagging-replica", "async-kill-primary", "kill-primary"),
    sim="core",
)

CHECKPOINT_BY_MTIME = Mutant(
    name="checkpoint-by-mtime",
    description="a checkpoint reader loads the newest state-* file by modification time instead of the one "
                "the manifest names, a writer's half-written temporary file included",
    models="trusting the newest file over the commit record: a node killed mid-checkpoint restarts from a "
           "torn file (or from nothing, when the torn one is refused)",
    patch={"psnodes/store/checkpoint.py": [(
        "            blob = (directory / manifest[\"file\"]).read_bytes()",
        "            blob = max(directory.glob(\"state-*\"), key=lambda p: p.stat().st_mtime).read_bytes()" + PLANTED)]},
    checker="checkpoint-loads",
    scenarios=("kill-during-checkpoint", "kill-replica", "all-copies-lost"),
    sim="the twin's disk keeps no bytes in a writer's temporary file (only its name and time), so a reader "
        "that picks one up cannot be expressed there",
)

HANDOFF_RESETS_STEPS = Mutant(
    name="handoff-resets-steps",
    description="a migration carries a key's value and optimizer moments but resets its step count at the "
                "destination",
    models="optimizer state half moved: Adam's bias correction starts over on the new owner, so every moved "
           "key's next updates are rescaled, and the loss target absorbs it",
    patch={"psnodes/store/moving.py": [(
        "        store.dense_steps[n] = int(meta[\"dense_steps\"][n])",
        "        store.dense_steps[n] = 0" + PLANTED)]},
    checker="handoff-continuity",
    scenarios=("scale-out-shards", "scale-in-shards", "migration-kill-source-handoff"),
    sim="core",
)

KEYS_KEPT_AFTER_MOVE = Mutant(
    name="keys-kept-after-move",
    description="a catch-up across the entry that dropped a migration's keys is sent as a delta, which cannot "
                "say that keys left",
    models="a copy restarted across a shard split keeps the keys it gave away: its peers dropped them, it "
           "never hears of it, and serves or re-exports them after a failover",
    patch={"psnodes/store/whole_state.py": [(
        "        if since and since < self.shape_seq:\n            since = 0",
        "        if False:" + PLANTED + "\n            since = 0")]},
    checker="ownership-exact",
    scenarios=("migration-replica-restart-across-switch",),
    sim="core",
)

MUTANTS: list[Mutant] = [
    SYNC_EARLY_ACK, NO_EPOCH_FENCING, RETRY_APPLIED_TWICE, DELTA_GET_AND_CLEAR, LOG_OVERFLOW_DROPS,
    MANIFEST_BEFORE_DATA, SSP_OFF_BY_ONE, VERSION_ACROSS_EPOCH, OUT_OF_ORDER_APPLY, ISR_DROP_LOCAL_ONLY,
    ADAM_STEP_NOT_PERSISTED, ROWS_CREATED_ON_READ, INCARNATION_IGNORED, NO_LEASE_BOUND, RESTORE_FROM_OWN_FOLDER,
    REJOINER_AT_OLD_CLOCK, HANDOFF_WITHOUT_DEDUP, EARLY_RETRY_ACK,
    NO_READ_BARRIER, LAG_BOUND_OFF, PROMOTION_BY_SLOT,
    CHECKPOINT_BY_MTIME, HANDOFF_RESETS_STEPS, KEYS_KEPT_AFTER_MOVE,
]
