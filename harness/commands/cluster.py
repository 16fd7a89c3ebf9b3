"""`pschaos cluster up|down|status`: a long-lived local cluster of processes for hands-on use.

`up` starts etcd, the shard nodes and the workers detached from the terminal and writes a state
file; `down` stops every process the state file names (checking each still carries the run tag)
and removes the folder; `status` shows the routing record (epoch, shards, a migration under way)
and each copy of its shards. `pschaos clean --all` reaps such a cluster too. `scale --shards N`
(harness/commands/cluster_scale.py) moves the running cluster to N shards while it trains.
"""
from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

import psutil

from pschaos.harness.backends.process.backend import ProcessBackend
from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery import registry
from pschaos.harness.machinery.procs import stop_tagged, tagged_processes
from pschaos.netfaults.errors import NetFaultError
from pschaos.netfaults.nft import NftTable, tables as nft_tables
from pschaos.harness.backends.cluster import ClusterSpec

DETACHED_OWNER = -1   # no owning process: reaped by `cluster down` or `pschaos clean --all`


def _state_path(d: Path) -> Path:
    return d / "state.json"


def up(args) -> int:
    d = Path(args.dir)
    if _state_path(d).exists():
        raise HarnessError(f"a cluster is already up in {d}; run `pschaos cluster down --dir {d}` first")
    shards = args.shards if args.shards is not None else 2
    spec = ClusterSpec(shards=shards, copies=args.copies, workers=args.workers,
                       replication=args.replication, model=args.model, max_shards=max(shards, args.max_shards or 0))
    run_id = f"cluster-{uuid.uuid4().hex[:6]}"
    backend = getattr(args, "backend", "process")
    if backend == "docker":           # containers outlive this command by nature; labels name the run
        from pschaos.harness.backends.docker.backend import DockerBackend

        be: ProcessBackend = DockerBackend(spec, d, run_id, args.seed, owner=DETACHED_OWNER, detach=True)
    else:
        be = ProcessBackend(spec, d, run_id, args.seed, owner=DETACHED_OWNER, detach=True)
    try:
        be.start()
        be.start_workers(args.steps)
    except BaseException:
        be.teardown()
        shutil.rmtree(d, ignore_errors=True)
        raise
    _state_path(d).write_text(json.dumps({"run_id": run_id, "backend": backend, "pids": be.pids(), "config": str(be.client_config_path),
                                          "etcd": be.cfg.etcd, "started": time.time()}, indent=2))
    print(f"cluster {run_id} up in {d}: etcd {be.cfg.etcd}, {spec.shards} shards x {spec.copies} copies, "
          f"{spec.workers} workers ({spec.model}, {spec.replication} replication)")
    time.sleep(1.0)
    _print_status(be)
    print(f"stop it with: pschaos cluster down --dir {d}")
    return 0


def _print_status(be: ProcessBackend) -> None:
    routes = be.routing()
    for n in be.nodes():
        st = be.status(n)
        prim = routes.get(int(n.split("-")[1].split("/")[0]))
        if st is None:
            print(f"  {n:12} down")
        else:
            mark = "*" if prim and prim.primary == n else " "
            print(f"  {n:12}{mark} {st.role:8} epoch {st.epoch:<3} seq {st.seq:<7} "
                  f"metrics http://127.0.0.1:{be.cfg.metrics_ports[n]}/metrics")
    for w in be.workers():
        print(f"  {w:12}  {'training' if be.alive(w) else 'done'}")


def status(args) -> int:
    d = Path(args.dir)
    if not _state_path(d).exists():
        print(f"no cluster in {d}")
        return 1
    state = json.loads(_state_path(d).read_text())
    from pschaos.psnodes.elastic import routing
    from pschaos.psnodes.client.client import PSClient
    from pschaos.psnodes.config import ClusterConfig
    from pschaos.psnodes.etcd import Etcd, EtcdError

    cfg = ClusterConfig.load(state["config"])
    shards = list(range(cfg.shards))
    try:
        rec = routing.read(Etcd(cfg.etcd, timeout=1.0), cfg)[0]
        shards = list(rec.shards)
        print(f"routing epoch {rec.epoch}: shards {shards}"
              + (f"; migration {rec.migration.id} {list(rec.migration.src)} -> {list(rec.migration.dst)} "
                 f"in phase {rec.migration.phase}" if rec.migration else ""))
    except EtcdError as e:
        print(f"routing record: etcd did not answer ({e}); listing the shards the cluster started with")
    others = [s for s in range(max(cfg.shards, cfg.max_shards)) if s not in shards
              and any(state["pids"].get(n) for n in cfg.shard_nodes(s))]
    client = PSClient(cfg, "status", retry_budget=1.0)
    try:
        for n in [n for s in shards + others for n in cfg.shard_nodes(s)]:
            note = "" if int(n.split("-")[1].split("/")[0]) in shards else "  (not in the routing record)"
            try:
                st = client.status(n)
                fence = f" fenced for {st.fence}" if st.fence else ""
                print(f"  {n:12} {st.role:8} epoch {st.epoch:<3} seq {st.seq:<7} routing epoch {st.routing_epoch}"
                      f"{fence}{note}")
            except Exception:
                print(f"  {n:12} down{note}")
    finally:
        client.close()
    for name, pid in state["pids"].items():
        if name.startswith("worker-"):
            print(f"  {name:12} {'training' if psutil.pid_exists(pid) else 'done'}")
    return 0


def down(args) -> int:
    d = Path(args.dir)
    if not _state_path(d).exists():
        print(f"no cluster in {d}")
        return 0
    state = json.loads(_state_path(d).read_text())
    if state.get("backend") == "docker":
        return _down_containers(d, state)
    # every process of the run: the state file's, and any it lacks (one started as a scale was interrupted)
    pids = {**state["pids"], **{f"tagged-{p.pid}": p.pid for p in tagged_processes(state["run_id"])}}
    n = stop_tagged(pids, state["run_id"])     # graceful first: nodes write their checkpoints
    _forget(state["run_id"])
    shutil.rmtree(d, ignore_errors=True)
    print(f"cluster {state['run_id']} down: {n} process(es) stopped, {d} removed")
    return 0


def _forget(run_id: str) -> None:
    """What `cluster up` registered beside its processes: its nftables table (a proxied cluster's
    rules) and its registry entry, which `pschaos clean` would otherwise find forever (a detached
    cluster's owner never dies)."""
    t = NftTable(run_id)
    try:
        if t.name in nft_tables():        # `cluster up` makes none unless a fault did
            t.destroy(force=True)
    except (NetFaultError, OSError) as e:
        print(f"could not check or delete nftables table {t.name}: {e}; `pschaos clean` deletes it later")
    registry.unregister(run_id)


def _down_containers(d: Path, state: dict) -> int:
    """Stop the run's containers gracefully (nodes write their checkpoints), then remove them and
    its volumes by label."""
    from pschaos.harness.backends.docker import engine
    from pschaos.harness.backends.docker.containers import remove_run, run_containers

    client = engine.client()
    try:
        cs = run_containers(client, state["run_id"])
        for c in cs:
            if c.status == "running":
                c.stop(timeout=5)
        remove_run(client, state["run_id"], cs)
    finally:
        client.close()
    _forget(state["run_id"])
    shutil.rmtree(d, ignore_errors=True)
    print(f"cluster {state['run_id']} down: {len(cs)} container(s) removed, {d} removed")
    return 0
