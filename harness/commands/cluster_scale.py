"""`pschaos cluster scale --shards N`: move a running `cluster up` cluster to N shards while it trains.

It starts the new shard groups (their addresses were given at `up`, up to `--max-shards`), runs
psnodes' live key migration (psnodes/elastic/migration.py), then stops the groups a scale-in retired and
removes their records from etcd (psnodes/elastic/retirement.py).

Nothing it starts outlives a failure (review section 4): the groups it started for a migration
that did not switch (aborted, an announce that never landed, new groups that elected no primary,
Ctrl-C) are stopped again, unless the routing record names them (a switch that landed after all).
A shard group running outside the routing record (left by a coordinator that was killed) is
stopped before anything else starts, so a re-run never writes over `state["pids"]` of a process
that still runs, and no process is orphaned.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import psutil

from pschaos.psnodes.elastic import retirement, routing
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.etcd import Etcd, EtcdError
from pschaos.psnodes.elastic.migration import ASYNC_REFUSED, Migrator

from pschaos.harness.errors import HarnessError
from pschaos.harness.faults.shards import target_shards
from pschaos.harness.machinery.launcher import Launcher
from pschaos.harness.commands.cluster import DETACHED_OWNER
from pschaos.harness.machinery.procs import stop_tagged, tagged_processes

ELECT_S = 30.0             # how long new groups may take to elect a primary
MAX_FENCED_HOLD_S = 10.0   # as the scale faults' fenced_hold_s: the moving keys are unwritable that long


class Scale:
    """One `cluster scale` call on the cluster in `d`: its state file, config and etcd."""

    def __init__(self, d: Path) -> None:
        self.d = d
        self.state_path = d / "state.json"
        if not self.state_path.exists():
            raise HarnessError(f"no cluster in {d}; start one with `pschaos cluster up --dir {d} --max-shards N`")
        self.state = json.loads(self.state_path.read_text())
        if self.state.get("backend", "process") != "process":
            raise HarnessError("cluster scale: only a cluster of local processes (cluster up --backend process) scales")
        self.cfg = ClusterConfig.load(d / "cluster.json")
        if self.cfg.mode != "sync":
            raise HarnessError(f"cluster scale: the cluster's {ASYNC_REFUSED}")
        self.etcd = Etcd(self.cfg.etcd, timeout=1.0)

    def save(self) -> None:
        self.state_path.write_text(json.dumps(self.state, indent=2))

    def migrator(self, fenced_hold_s: float = 0.0) -> Migrator:
        return Migrator(self.cfg, emit=lambda f, v: print(json.dumps({"event": f, **v}), flush=True),
                        fenced_hold_s=fenced_hold_s)

    # ------------------------------------------------------------ groups
    def spawned(self, names: list[str]) -> dict[str, int]:
        """The processes of this run started as one of `names` (by the `--name` of their command
        line), whether or not the state file has their pids."""
        out = {}
        for p in tagged_processes(self.state["run_id"]):
            try:
                cmd = p.cmdline()
            except psutil.Error:
                continue
            if "--name" in cmd[:-1] and cmd[cmd.index("--name") + 1] in names:
                out[f"{cmd[cmd.index('--name') + 1]}@{p.pid}"] = p.pid
        return out

    def strays(self, owners: list[int]) -> list[int]:
        """Shard groups with a process of this run that the routing record does not name (`owners`)."""
        room = max(self.cfg.shards, self.cfg.max_shards)
        others = [s for s in range(room) if s not in owners]
        found = {k.split("@")[0] for k in self.spawned([n for s in others for n in self.cfg.shard_nodes(s)])}
        return [s for s in others if found & set(self.cfg.shard_nodes(s))]

    def start(self, shards: list[int]) -> None:
        """Spawn the copies of `shards`, each pid saved at once (one whose pid an interrupt kept out
        of the state file is still found by its run tag: `spawned`, `cluster down`)."""
        launcher = Launcher(self.d, self.state["run_id"], DETACHED_OWNER, True, use_zygote=False)
        names = [n for s in shards for n in self.cfg.shard_nodes(s)]
        running = self.spawned(names)
        if running:
            raise HarnessError(f"{sorted(running)} still run; not starting them twice")
        for s in shards:
            for n in self.cfg.shard_nodes(s):
                log = n.replace("/", "-")
                h = launcher.spawn(n, "pschaos.psnodes.serve", ["--config", str(self.d / "cluster.json"), "--name", n,
                                                        "--events", str(self.d / "events" / f"{log}.jsonl")],
                                   self.d / "logs" / f"{log}.log")
                self.state["pids"][n] = h.pid
                self.save()

    def wait_primaries(self, shards: list[int]) -> None:
        end = time.monotonic() + ELECT_S
        while any(self.etcd.get(self.cfg.shard_key(s)) is None for s in shards):
            if time.monotonic() > end:
                raise HarnessError(f"the new shard groups {shards} elected no primary within {ELECT_S:.0f} s; "
                                   f"see {self.d / 'logs'}")
            time.sleep(0.1)

    def stop(self, shards: list[int], why: str) -> None:
        """Remove the records of `shards` from etcd (psnodes/elastic/retirement.py), then stop their
        groups, then remove the records again (a copy restarted meanwhile may have written one):
        with no record, no replica of a stopping group stands (backend_common.retire_groups)."""
        if not shards:
            return
        self._forget(shards, quiet=True)
        names = [n for s in shards for n in self.cfg.shard_nodes(s)]
        pids = {k: self.state["pids"][k] for k in names if k in self.state["pids"]}
        pids.update(self.spawned(names))       # one started as Ctrl-C came, before its pid was saved
        n = stop_tagged(pids, self.state["run_id"])
        for k in names:
            self.state["pids"].pop(k, None)
        self.save()
        self._forget(shards, quiet=False)
        print(f"stopped shard groups {shards} ({n} process(es)): {why}")

    def _forget(self, shards: list[int], quiet: bool) -> None:
        for s in shards:
            try:
                retirement.forget(self.etcd, self.cfg, s)
            except EtcdError as e:
                if not quiet:
                    print(f"shard {s}: its record stays in etcd ({e}); the next start of its group removes it")

    def stop_unless_routed(self, shards: list[int], why: str) -> None:
        """After a failure: stop `shards` unless the routing record names them (then they own keys,
        or a migration still in the record may: keep them and say so)."""
        if not shards:
            return
        try:
            rec = routing.read(self.etcd, self.cfg)[0]
        except EtcdError as e:
            print(f"kept shard groups {shards}: the routing record could not be read ({e}); run "
                  f"`pschaos cluster scale --dir {self.d}` again (it stops groups the record does not name) or "
                  f"`pschaos cluster down --dir {self.d}`")
            return
        named = set(rec.shards) | set(rec.migration.dst if rec.migration else ())
        if named & set(shards):
            print(f"kept shard groups {shards}: the routing record names them ({list(rec.shards)}"
                  f"{f', migration {rec.migration.id}' if rec.migration else ''})")
            return
        self.stop(shards, why)


def scale(args) -> int:
    """Move a running `cluster up` cluster to `--shards` shards, with live key migration."""
    if getattr(args, "shards", None) is None:
        raise HarnessError("cluster scale: --shards is required (the shard count to move to), e.g. "
                           "`pschaos cluster scale --shards 3`")
    hold = float(getattr(args, "fenced_hold_s", 0.0) or 0.0)
    if not 0 <= hold <= MAX_FENCED_HOLD_S:
        raise HarnessError(f"--fenced-hold-s {hold}: give 0 to {MAX_FENCED_HOLD_S:.0f} seconds (the moving keys are "
                           "unavailable for writes that long)")
    sc = Scale(Path(args.dir))
    cfg = sc.cfg
    rec = routing.read(sc.etcd, cfg)[0]
    if rec.migration is not None:
        if not getattr(args, "abort_migration", False):
            raise HarnessError(f"cluster scale: migration {rec.migration.id} ({rec.migration.src} -> "
                               f"{rec.migration.dst}, phase {rec.migration.phase}) is still in the routing record "
                               "(its coordinator was stopped or died; its sources may be fenced); re-run with "
                               "--abort-migration to abort it first (the old routing stays)")
        m = sc.migrator()
        try:
            print(f"aborted migration {m.abort_in_progress()}; the cluster keeps shards {list(rec.shards)}")
        finally:
            m.close()
    cur = list(routing.read(sc.etcd, cfg)[0].shards)
    room = max(cfg.shards, cfg.max_shards)
    if not 1 <= args.shards <= room:
        raise HarnessError(f"--shards {args.shards}: this cluster has addresses for 1..{room} shards; bring it "
                           f"up again with `pschaos cluster up --max-shards {args.shards}`")
    sc.stop(sc.strays(cur), f"running outside the routing record (shards {cur}): left by an earlier scale")
    if args.shards == len(cur):
        print(f"the cluster already has {len(cur)} shards: {cur}")
        return 0
    dst = target_shards(cur, args.shards)
    added = sorted(set(dst) - set(cur))
    for s in added:
        retirement.forget(sc.etcd, cfg, s)        # a record an earlier life of the shard left behind
    try:
        sc.start(added)
        sc.wait_primaries(added)
        m = sc.migrator(hold)
        try:
            out = m.run(dst)
        finally:
            m.close()
    except BaseException as e:
        sc.stop_unless_routed(added, f"the scale failed ({e.__class__.__name__}: {e})")
        raise
    if not out.switched:
        sc.stop(added, f"migration {out.id} aborted")
        print(f"migration {out.id} aborted ({out.aborted}); the cluster keeps shards {cur}")
        return 1
    sc.stop(out.retired, f"retired by migration {out.id}")
    print(f"cluster {sc.state['run_id']}: shards {cur} -> {list(dst)} at routing epoch {out.routing_epoch}; "
          f"{out.bytes} bytes shipped for {out.key_bytes} bytes of moved keys, writes fenced {out.unavailable_ms} ms")
    return 0
