"""`pschaos cluster up|down|status`: a long-lived local cluster of processes for hands-on use.

`up` starts etcd, the shard nodes and the workers detached from the terminal and writes a state
file; `down` stops every process the state file names (checking each still carries the run tag)
and removes the folder. `pschaos clean --all` reaps such a cluster too. `scale --shards N` moves
the running cluster to N shards while it trains: it starts the new groups (their addresses were
given at `up`, up to `--max-shards`), runs the live key migration (psnodes/migration.py), and stops
the groups a scale-in retired.
"""
from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

import psutil

from .backend_process import ProcessBackend
from .errors import HarnessError
from .procs import RUN_ENV, reap
from .scenario import ClusterSpec

DETACHED_OWNER = -1   # no owning process: reaped by `cluster down` or `pschaos clean --all`


def _state_path(d: Path) -> Path:
    return d / "state.json"


def up(args) -> int:
    d = Path(args.dir)
    if _state_path(d).exists():
        raise HarnessError(f"a cluster is already up in {d}; run `pschaos cluster down --dir {d}` first")
    shards = args.shards if args.shards is not None else 2
    spec = ClusterSpec(shards=shards, copies=args.replicas + 1, workers=args.workers,
                       replication=args.mode, model=args.model, max_shards=max(shards, args.max_shards or 0))
    run_id = f"cluster-{uuid.uuid4().hex[:6]}"
    backend = getattr(args, "backend", "process")
    if backend == "docker":           # containers outlive this command by nature; labels name the run
        from .backend_docker import DockerBackend

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
    from psnodes.client import PSClient
    from psnodes.config import ClusterConfig

    cfg = ClusterConfig.load(state["config"])
    client = PSClient(cfg, "status", retry_budget=1.0)
    try:
        for n in cfg.all_nodes():
            try:
                st = client.status(n)
                print(f"  {n:12} {st.role:8} epoch {st.epoch:<3} seq {st.seq}")
            except Exception:
                print(f"  {n:12} down")
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
    procs = []
    for name, pid in state["pids"].items():
        try:
            p = psutil.Process(pid)
            if p.environ().get(RUN_ENV) == state["run_id"]:
                procs.append(p)
        except psutil.Error:
            continue
    for p in procs:            # graceful first: nodes write their checkpoints
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=5)
    reap(alive)
    shutil.rmtree(d, ignore_errors=True)
    print(f"cluster {state['run_id']} down: {len(procs)} process(es) stopped, {d} removed")
    return 0


def _down_containers(d: Path, state: dict) -> int:
    """Stop the run's containers gracefully (nodes write their checkpoints), then remove them and
    its volumes by label."""
    from .docker import engine
    from .docker.containers import remove_run, run_containers

    client = engine.client()
    try:
        cs = run_containers(client, state["run_id"])
        for c in cs:
            if c.status == "running":
                c.stop(timeout=5)
        remove_run(client, state["run_id"], cs)
    finally:
        client.close()
    shutil.rmtree(d, ignore_errors=True)
    print(f"cluster {state['run_id']} down: {len(cs)} container(s) removed, {d} removed")
    return 0


def scale(args) -> int:
    """Move a running `cluster up` cluster to `--shards` shards, with live key migration."""
    from psnodes import routing
    from psnodes.config import ClusterConfig
    from psnodes.etcd import Etcd
    from psnodes.migration import ASYNC_REFUSED, Migrator

    from .faults.shards import target_shards
    from .launcher import Launcher

    if getattr(args, "shards", None) is None:
        raise HarnessError("cluster scale: --shards is required (the shard count to move to), e.g. "
                           "`pschaos cluster scale --shards 3`")
    d = Path(args.dir)
    if not _state_path(d).exists():
        raise HarnessError(f"no cluster in {d}; start one with `pschaos cluster up --dir {d} --max-shards N`")
    state = json.loads(_state_path(d).read_text())
    if state.get("backend", "process") != "process":
        raise HarnessError("cluster scale: only a cluster of local processes (cluster up --backend process) scales")
    cfg = ClusterConfig.load(d / "cluster.json")
    if cfg.mode != "sync":
        raise HarnessError(f"cluster scale: the cluster's {ASYNC_REFUSED}")
    rec = routing.read(Etcd(cfg.etcd, timeout=1.0), cfg)[0]
    if rec.migration is not None:
        if not getattr(args, "abort_migration", False):
            raise HarnessError(f"cluster scale: migration {rec.migration.id} ({rec.migration.src} -> "
                               f"{rec.migration.dst}, phase {rec.migration.phase}) is still in the routing record "
                               "(its coordinator was stopped or died; its sources may be fenced); re-run with "
                               "--abort-migration to abort it first (the old routing stays)")
        m = Migrator(cfg, emit=lambda f, v: print(json.dumps({"event": f, **v})))
        try:
            print(f"aborted migration {m.abort_in_progress()}; the cluster keeps shards {list(rec.shards)}")
        finally:
            m.close()
    cur = list(routing.read(Etcd(cfg.etcd, timeout=1.0), cfg)[0].shards)
    room = max(cfg.shards, cfg.max_shards)
    if not 1 <= args.shards <= room:
        raise HarnessError(f"--shards {args.shards}: this cluster has addresses for 1..{room} shards; bring it "
                           f"up again with `pschaos cluster up --max-shards {args.shards}`")
    if args.shards == len(cur):
        print(f"the cluster already has {len(cur)} shards: {cur}")
        return 0
    dst = target_shards(cur, args.shards)
    launcher = Launcher(d, state["run_id"], DETACHED_OWNER, True, use_zygote=False)
    for s in sorted(set(dst) - set(cur)):
        for n in cfg.shard_nodes(s):
            if n in state["pids"] and psutil.pid_exists(state["pids"][n]):
                continue                  # started by an earlier scale that aborted: still running, not orphaned
            h = launcher.spawn(n, "psnodes.serve", ["--config", str(d / "cluster.json"), "--name", n, "--events",
                                                    str(d / "events" / (n.replace("/", "-") + ".jsonl"))],
                               d / "logs" / (n.replace("/", "-") + ".log"))
            state["pids"][n] = h.pid
    _state_path(d).write_text(json.dumps(state, indent=2))
    etcd = Etcd(cfg.etcd, timeout=1.0)
    end = time.monotonic() + 30
    while any(etcd.get(cfg.shard_key(s)) is None for s in dst):
        if time.monotonic() > end:
            raise HarnessError(f"the new shard groups elected no primary within 30 s; see {d / 'logs'}")
        time.sleep(0.1)
    m = Migrator(cfg, emit=lambda f, v: print(json.dumps({"event": f, **v})))
    try:
        out = m.run(dst)
    finally:
        m.close()
    if not out.switched:
        print(f"migration {out.id} aborted ({out.aborted}); the cluster keeps shards {cur}")
        return 1
    for s in out.retired:
        for n in cfg.shard_nodes(s):
            pid = state["pids"].pop(n, None)
            if pid is not None:
                try:
                    psutil.Process(pid).terminate()
                except psutil.Error:
                    pass
    _state_path(d).write_text(json.dumps(state, indent=2))
    print(f"cluster {state['run_id']}: shards {cur} -> {list(dst)} at routing epoch {out.routing_epoch}; "
          f"{out.bytes} bytes shipped for {out.key_bytes} bytes of moved keys, writes fenced {out.unavailable_ms} ms")
    return 0
