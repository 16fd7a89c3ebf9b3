"""The bug zoo, second part: the classes issue 32 named, bugs the library let through before the
checks that now catch them (registry.py lists them beside the first part). Loaded by registry.py
from beside it, so the zoo stays two files a `--zoo` user can copy."""
from __future__ import annotations

from pschaos.harness.proof.selftest.mutation import Mutant

PLANTED = "  # planted by the bug zoo"


RESTORE_FROM_OWN_FOLDER = Mutant(
    name="restore-from-own-folder",
    description="when every copy of a shard is lost, the restorer reads its own local checkpoint folder "
                "instead of the shard's shared one, and declares the loss",
    models="a recovery that takes the state at hand, not the best state available (a replica restoring from its "
           "own stale snapshot while a newer one sits in shared storage): more acknowledged updates lost than "
           "necessary, each one declared",
    patch={
        "psnodes/server/checkpointing.py": [(
            "        got = read_checkpoint(self.cfg.checkpoint_dir(self.shard), on_damage=self._damaged(\"restore\"))\n"
            "        ckpt = ",
            "        got = read_checkpoint(self.cfg.data_dir(self.name))" + PLANTED + "\n        ckpt = ")],
        "harness/backends/sim/copy/checkpoint.py": [(
            "        got = c.disk.read(shared_dir(c.shard), on_damage=self._damaged(\"restore\"))",
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
    scenarios=("migration-partition-worker", "migration-kill-source-handoff", "scale-out-shards",
               "migration-loss-worker-links"),
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
            "                self._wait_replicated(seq, epoch, deadline, active)\n            else:",
            "                None if duplicate else self._wait_replicated(seq, epoch, deadline, active)" + PLANTED
            + "\n            else:")],
        "harness/backends/sim/copy/copy.py": [(
            "            yield from acks.wait_replicated(self, seq, epoch, deadline)\n        else:",
            "            yield from (iter(()) if d.duplicate else acks.wait_replicated(self, seq, epoch, deadline))"
            + PLANTED + "\n        else:")]},
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
            "                self._wait_replicated(seq, epoch, deadline, active)\n                reply +=",
            "                pass" + PLANTED + "\n                reply +=")],
        "harness/backends/sim/copy/copy.py": [(
            "            yield from acks.wait_replicated(self, seq, epoch, deadline)\n            reply +=",
            "            pass" + PLANTED + "\n            reply +=")]},
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
    scenarios=("async-kill-lagging-replica", "async-kill-primary", "kill-primary", "async-pause-lagging-replica",
               "async-cut-lagging-replica"),
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
    scenarios=("scale-out-shards", "scale-in-shards", "migration-kill-source-handoff", "scale-out-one-worker-transparent"),
    sim="core",
)

HANDOFF_RESETS_ROW_STEPS = Mutant(
    name="handoff-resets-row-steps",
    description="a migration carries a table's moved embedding rows and their optimizer slots but resets "
                "their step counts at the destination",
    models="the sparse half of a hand-off done less carefully than the dense half: every moved row's next "
           "updates are rescaled on the new owner, and nothing that compared dense keys looked at rows",
    patch={"psnodes/store/moving.py": [(
        "        t.merge({\"ids\": ids, \"rows\": arrays[f\"t/{name}/rows\"], \"steps\": arrays[f\"t/{name}/steps\"],",
        "        t.merge({\"ids\": ids, \"rows\": arrays[f\"t/{name}/rows\"], \"steps\": 0 * arrays[f\"t/{name}/steps\"],"
        + PLANTED)]},
    checker="handoff-continuity",
    scenarios=("migration-replica-restart-across-switch",),
    sim="core",
    notes="review of issue 32, finding 3: the hand-off digested dense keys only",
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

# durability: what only a power cut shows (issue 31). A kill leaves every byte in the kernel's page
# cache, so these passed every scenario before the power-loss disk (pschaos.diskfaults).
DATA_RENAMED_UNSYNCED = Mutant(
    name="data-renamed-unsynced",
    description="a checkpoint's files are written aside and renamed into place without an fsync of their data",
    models="the rename-for-atomicity idiom without the fsync before it (ext4's zero-length files after a crash): "
           "the name reaches the disk with the folder's sync, the bytes never do, and after a power cut the "
           "manifest and the file it names are empty",
    patch={"psnodes/store/checkpoint.py": [(
        "            f.write(data)\n            f.flush()\n            os.fsync(f.fileno())\n",
        "            f.write(data)\n            f.flush()" + PLANTED + "\n")],
        "harness/backends/sim/disk.py": [(
            "            synced = True                # psnodes' _write_aside fsyncs each file before its rename",
            "            synced = False" + PLANTED)]},
    checker="checkpoint-loads",
    scenarios=("power-loss-primary-mid-checkpoint",),
    sim="shell",
)

MANIFEST_DIR_UNSYNCED = Mutant(
    name="manifest-dir-unsynced",
    description="a checkpoint's manifest and data are synced and renamed into place, but their folder is never "
                "synced after the renames",
    models="a commit by rename whose directory entry is left in the page cache: after a power cut the folder "
           "holds what it held before the renames, and the node starts on an older checkpoint than it published "
           "(or none)",
    patch={"psnodes/store/checkpoint.py": [(
        "            os.replace(man_tmp, directory / MANIFEST)\n            _fsync_dir(directory)\n",
        "            os.replace(man_tmp, directory / MANIFEST)" + PLANTED + "\n")],
        "harness/backends/sim/disk.py": [(
            "            self._sync_folder(f)         # psnodes: _fsync_dir(directory) after the renames\n",
            "            pass" + PLANTED + "\n")]},
    checker="checkpoint-loads",
    scenarios=("power-loss-primary-mid-checkpoint",),
    sim="shell",
)

CHECKSUM_NOT_CHECKED = Mutant(
    name="checksum-not-checked",
    description="a checkpoint is loaded when its size matches the manifest's, without comparing its CRC-32",
    models="a reader that trusts a length field: a bit flipped at rest (a bad sector, a firmware bug) is loaded as "
           "state and served, or replicated, as if it were acknowledged data",
    patch={"psnodes/store/checkpoint.py": [(
        "    if manifest.get(\"crc32\") is not None and zlib.crc32(blob) != manifest[\"crc32\"]:",
        "    if False:" + PLANTED)]},
    checker="checkpoint-loads",
    scenarios=("bit-rot-newest-checkpoint",),
    sim="core",
)

MANIFEST_IN_PLACE = Mutant(
    name="manifest-in-place",
    description="a checkpoint's manifest is rewritten in place (truncated, written, fsynced) instead of written "
                "aside and renamed",
    models="trusting fsync to make an overwrite atomic: a power cut while the manifest's bytes are in flight "
           "leaves a torn manifest, and the copy loses the whole checkpoint it had synced before",
    patch={"psnodes/store/checkpoint.py": [(
        "            man_tmp = _write_aside(directory / MANIFEST, json.dumps(manifest).encode())\n"
        "            os.replace(state_tmp, directory / name)\n"
        "            os.replace(man_tmp, directory / MANIFEST)\n",
        "            os.replace(state_tmp, directory / name)" + PLANTED + "\n"
        "            with open(directory / MANIFEST, \"wb\") as f:\n"
        "                f.write(json.dumps(manifest).encode())\n"
        "                f.flush()\n"
        "                os.fsync(f.fileno())\n")]},
    checker="checkpoint-loads",
    scenarios=("torn-manifest",),
    sim="the twin's disk writes a manifest at one instant and tears no write (torn-write is refused there): "
        "process only",
)

SEAL_NOT_CHECKED = Mutant(
    name="seal-not-checked",
    description="a checkpoint's manifest is trusted because it parses: its own CRC-32 (the seal) is not compared",
    models="a commit record read without its checksum: a bit flipped at rest in the manifest (a bad sector) "
           "changes the position, the file or the checksum it promises, and the copy loads by it",
    patch={"psnodes/store/checkpoint.py": [(
        "    if man[SEAL] != want:",
        "    if False:" + PLANTED)]},
    checker="checkpoint-loads",
    scenarios=("bit-rot-manifest",),
    sim="core",
)
