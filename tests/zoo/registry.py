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
             "            self.folder(d).files[MANIFEST] = json.dumps(seal({**manifest, \"time\": self.clock.now()}))"
             ".encode()\n")]},
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


def _missed():
    """tests/zoo/missed.py, loaded from beside this file (the zoo is loaded by path, not as a package)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("pschaos_zoo_missed", Path(__file__).with_name("missed.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_M = _missed()

MUTANTS: list[Mutant] = [
    SYNC_EARLY_ACK, NO_EPOCH_FENCING, RETRY_APPLIED_TWICE, DELTA_GET_AND_CLEAR, LOG_OVERFLOW_DROPS,
    MANIFEST_BEFORE_DATA, SSP_OFF_BY_ONE, VERSION_ACROSS_EPOCH, OUT_OF_ORDER_APPLY, ISR_DROP_LOCAL_ONLY,
    ADAM_STEP_NOT_PERSISTED, ROWS_CREATED_ON_READ, INCARNATION_IGNORED, NO_LEASE_BOUND,
    _M.RESTORE_FROM_OWN_FOLDER, _M.REJOINER_AT_OLD_CLOCK, _M.HANDOFF_WITHOUT_DEDUP, _M.EARLY_RETRY_ACK,
    _M.NO_READ_BARRIER, _M.LAG_BOUND_OFF, _M.PROMOTION_BY_SLOT, _M.CHECKPOINT_BY_MTIME, _M.HANDOFF_RESETS_STEPS,
    _M.HANDOFF_RESETS_ROW_STEPS, _M.KEYS_KEPT_AFTER_MOVE, _M.DATA_RENAMED_UNSYNCED, _M.MANIFEST_DIR_UNSYNCED,
    _M.CHECKSUM_NOT_CHECKED, _M.MANIFEST_IN_PLACE, _M.SEAL_NOT_CHECKED,
]
