"""The process backend: etcd, shard nodes and workers as local processes on loopback.

This is the narrow adapter the runner talks to (start, stop, signal, routing, status); another
backend (Docker, the SimPy model) implements the same methods. Names are the contract: faults,
history and reports say `shard-0/1` and `worker-0`, never pids or ports.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import time
from pathlib import Path


from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.etcd import Etcd

from pschaos.diskfaults.mounts import reap as reap_disks
from pschaos.harness.backends.process.disks import DiskFaults, NodeDisks
from pschaos.harness.backends.process.observe import ProcessObservation
from pschaos.harness.machinery import registry
from pschaos.harness.backends.observe import retire_groups, start_groups
from pschaos.harness.errors import HarnessError
from pschaos.netfaults.faults import LINK_FAULTS, NetContext
from pschaos.netfaults.links import LinkTable
from pschaos.netfaults.nft import NftTable, table_name

from pschaos.harness.history.clock import WALL, Clock
from pschaos.harness.machinery.etcd_server import EtcdServer
from pschaos.harness.machinery.ports import free_ports
from pschaos.harness.machinery.launcher import Launcher
from pschaos.harness.machinery.procs import Signals, reap, start_time, stop_all, tagged_processes
from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.machinery.toxiproxy_server import ToxiproxyServer

TASK_TABLES = {"mlp": {}, "widedeep": {"emb": 16, "wide": 1}}
# workers run this much nicer than the shard nodes: on a small machine shared by several runs (CI's
# two pytest workers on 2 cores) training compute starved a primary past its replicas' detector
# floor and probe wait, and a live primary was replaced (a spurious failover, replica-restart-
# catchup in CI at stop 41); the nodes' heartbeats and probes now win the CPU, the workers' steps
# only slow down, which no check times
WORKER_NICE = 5


class ProcessBackend(DiskFaults, ProcessObservation):
    name = "process"
    clock: Clock = WALL        # real processes live in real time

    def __init__(self, spec: ClusterSpec, run_dir: Path, run_id: str, seed: int,
                 owner: int | None = None, detach: bool = False, tables: dict[str, int] | None = None,
                 proxied: bool = False, zygote: bool = True, disks: bool = False) -> None:
        self.spec, self.run_dir, self.run_id, self.seed = spec, run_dir, run_id, seed
        self.tables = TASK_TABLES[spec.model] if tables is None else tables
        self.proxied = proxied
        self.launcher = Launcher(run_dir, run_id, owner, detach, use_zygote=zygote)
        self.toxiproxy = ToxiproxyServer(run_dir, run_id, seed, owner, detach) if proxied else None
        self.net: NetContext | None = None
        self.owner, self.detach = owner, detach
        self.procs: dict[str, Signals] = {}
        self.etcd_server = EtcdServer(run_dir, run_id, owner, detach)
        self.cfg: ClusterConfig | None = None
        self.client: PSClient | None = None
        self.worker_args: dict[str, list[str]] = {}
        self.active: list[int] = []    # shard groups running (elastic shards: faults/shards.py)
        self.closing = False       # teardown began: nothing is started any more
        self.hurry = False         # a second Ctrl-C: teardown cuts its grace periods short
        # each shard copy's data behind a power-loss disk: only for a storage fault (process/disks.py)
        self.disks = NodeDisks(self.run_dir / "disks", run_id, owner) if disks else None

    # ------------------------------------------------------------------ setup
    @property
    def config_path(self) -> Path:
        return self.run_dir / "cluster.json"

    @property
    def client_config_path(self) -> Path:
        """The config workers and users get: no peer token, so they cannot replicate."""
        return self.run_dir / "client.json"

    @property
    def work_dir(self) -> Path:
        """Node data and the shared checkpoint store."""
        return self.run_dir / "work"

    def events_path(self, name: str) -> Path:
        return self.run_dir / "events" / (name.replace("/", "-") + ".jsonl")

    def event_files(self) -> list[Path]:
        """Every `*.jsonl` in the events folder but the runner's own: what the nodes, workers and
        any process the run started wrote, including a worker a scale-out added."""
        own = self.events_path("harness")
        return sorted(p for p in (self.run_dir / "events").glob("*.jsonl") if p != own)

    def discard_data(self) -> None:
        """The work folder (node data, checkpoints), etcd's data folder (harness/machinery/etcd_server.py)
        and the power-loss disks' stores (process/disks.py)."""
        for d in (self.work_dir, self.run_dir / "etcd-data", self.run_dir / "disks"):
            shutil.rmtree(d, ignore_errors=True)

    def start(self, timeout: float = 30.0, workers_steps: int | None = None, duration: float | None = None,
              step_delay: float = 0.0) -> None:
        """Start the links, etcd and the nodes. With `workers_steps` the workers start first of all:
        their PyTorch import is the slowest part and overlaps the cluster's start (they wait for it)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        owner = self.owner if self.owner is not None else os.getpid()
        registry.register(self.run_id, owner, table_name(self.run_id), start_time(owner) if owner > 0 else None)
        s = self.spec
        groups = max(s.shards, s.max_shards)    # addresses for every group a scale-out may start
        slots = [f"shard-{i}/{r}" for i in range(groups) for r in range(s.copies)]
        nodes = slots[: s.shards * s.copies]
        ports = free_ports(2 * len(slots))
        self.active = list(range(s.shards))
        self.cfg = ClusterConfig(
            cluster_id=self.run_id, etcd=self.etcd_server.url, shards=s.shards, copies=s.copies, max_shards=groups,
            workers=s.workers, mode=s.replication, tables=self.tables,
            optimizer={"name": s.optimizer, "lr": s.lr}, seed=self.seed,
            addresses={n: f"127.0.0.1:{ports[i]}" for i, n in enumerate(slots)},
            metrics_ports={n: ports[len(slots) + i] for i, n in enumerate(slots)},
            workdir=str(self.work_dir), checkpoint_interval_s=s.checkpoint_interval_s,
            max_lag=s.max_lag, min_isr=s.min_isr, peer_token=secrets.token_hex(16),
            **s.membership_config(), **s.detector.config_fields())
        self.cfg.save(self.config_path)
        self.cfg.client_view().save(self.client_config_path)
        if self.proxied:
            self._build_links(slots, [f"worker-{j}" for j in range(s.workers)])
        self.launcher.start()
        if workers_steps is not None:
            self.start_workers(workers_steps, duration, step_delay)
        self.etcd_server.start()
        self.start_nodes(nodes)
        self.client = PSClient(self.cfg.client_view(), "harness", retry_budget=5.0)
        end = time.monotonic() + timeout
        try:
            self.client.wait_ready(timeout)
        except Exception as e:
            raise HarnessError(f"cluster did not come up: {e}; see {self.run_dir / 'logs'}") from None
        self.wait_copies_up(nodes, end)

    def wait_copies_up(self, nodes: list[str], end: float) -> None:
        """Every started copy answers before the start returns. A shard has a primary as soon as its
        first copy wins the bootstrap, while a loaded host may not have run the last replica's
        process as far as its listen yet: a fault or a check at t=0 would then meet a copy that was
        never up (make test once saw `status(replica)` refused right after the start)."""
        waiting = list(nodes)
        while waiting:
            n = waiting[0]
            if self.status_when_up(n, min(1.0, max(0.1, end - time.monotonic()))) is not None:
                waiting.pop(0)
                continue
            dead = [m for m in waiting if m in self.procs and not self.procs[m].alive()]
            if dead or time.monotonic() >= end:
                why = f"copies {dead} exited while starting" if dead else \
                    f"copies {waiting} did not answer Status by the start's deadline"
                raise HarnessError(f"{why}; see {self.run_dir / 'logs'}")

    def _build_links(self, nodes: list[str], workers: list[str]) -> None:
        """A proxy for every directed link: worker->node, copy->copy within a shard, anyone->etcd."""
        client = self.toxiproxy.start()
        self.net = NetContext(client, LinkTable(self.run_id), NftTable(self.run_id))
        self.add_links(nodes + workers)

    def add_links(self, sources: list[str]) -> None:
        addrs = dict(self.cfg.addresses, etcd=self.cfg.etcd.removeprefix("http://"))
        pairs = []
        for src in sources:
            if src.startswith("worker-"):
                pairs += [(src, n) for n in self.slot_nodes()]
            else:
                shard = int(src.split("-")[1].split("/")[0])
                pairs += [(src, n) for n in self.cfg.shard_nodes(shard) if n != src]
            pairs.append((src, "etcd"))
        self.net.links.build(self.net.toxiproxy, [p for p in pairs if p not in self.net.links.links], addrs)
        for src in sources:
            path = self.links_path(src)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.net.links.map_for(src), indent=1))

    def links_path(self, name: str) -> Path:
        return self.run_dir / "links" / (name.replace("/", "-") + ".json")

    def _link_args(self, name: str) -> list[str]:
        return ["--links", str(self.links_path(name))] if self.proxied else []

    def start_nodes(self, names: list[str]) -> None:
        """Start these copies (one after another: a fork from the zygote takes milliseconds)."""
        for n in names:
            self.start_node(n)

    def start_node(self, name: str) -> None:
        if self.closing:
            return
        if self.disks is not None and name.startswith("shard-"):
            self.disks.ensure(name, self.data_path(name))
        argv = ["--config", str(self.config_path), "--name", name, "--events", str(self.events_path(name)),
                *self._link_args(name)]
        self.procs[name] = self.launcher.spawn(name, "pschaos.psnodes.serve", argv,
                                               self.run_dir / "logs" / (name.replace("/", "-") + ".log"))

    def start_workers(self, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        for j in range(self.spec.workers):
            self.start_worker(f"worker-{j}", steps, duration, step_delay)

    def worker_device(self) -> str:
        """The `--device` a worker is given (a container backend may translate it)."""
        return self.spec.device

    def start_worker(self, name: str, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        if self.closing:
            return
        s = self.spec
        if self.proxied and not self.links_path(name).exists():
            self.add_links([name])                      # a worker added by scale-out gets its links too
        args = [*self._link_args(name), "--config", str(self.client_config_path), "--name", name, "--model", s.model,
                "--mode", s.training,
                "--staleness", str(s.staleness), "--steps", str(steps), "--device", self.worker_device(),
                "--events", str(self.events_path(name)), "--step-delay", str(step_delay), "--nice", str(WORKER_NICE)]
        if s.eval_every:
            args += ["--eval-every", str(s.eval_every)]
        if duration:
            args += ["--duration", str(duration)]
        self.worker_args[name] = args
        self.procs[name] = self.launcher.spawn(name, "pschaos.psnodes.worker", args, self.run_dir / "logs" / f"{name}.log")

    # ---------------------------------------------------------------- queries
    def nodes(self) -> list[str]:
        """The copies of every shard group running now (scale-out adds groups, scale-in retires them)."""
        return [n for i in self.active for n in self.cfg.shard_nodes(i)] if self.cfg else []

    def slot_nodes(self) -> list[str]:
        """Every copy the cluster has an address for, started or not (ClusterSpec.max_shards)."""
        return [n for i in range(max(self.cfg.shards, self.cfg.max_shards)) for n in self.cfg.shard_nodes(i)]

    # ------------------------------------------------------- elastic shards
    def active_shards(self) -> list[int]:
        return list(self.active)

    def start_shard_groups(self, shards: list[int], timeout: float = 30.0) -> None:
        """Start the copies of new shard groups and wait until each has a primary in etcd."""
        start_groups(self, shards, self.start_nodes, Etcd(self.cfg.etcd, timeout=1.0), timeout)

    def migrate_shards(self, dst: list[int], record, hold_s: float = 0.0, nonce: str | None = None,
                       fenced_hold_s: float = 0.0):
        """Run psnodes' migration coordinator to shard set `dst` (its phases go to the history)."""
        from pschaos.psnodes.elastic.migration import Migrator

        m = Migrator(self.cfg, emit=record, hold_s=hold_s, nonce=nonce, fenced_hold_s=fenced_hold_s)
        try:
            return m.run(dst)
        finally:
            m.close()

    def retire_shard_groups(self, shards: list[int], record, observe: bool = True) -> None:
        """Stop the groups of shards that own nothing now (backend_common.retire_groups)."""
        retire_groups(self, shards, record, observe, lambda n: n in self.procs, Etcd(self.cfg.etcd, timeout=1.0))

    def shard_nodes(self, shard: int) -> list[str]:
        return self.cfg.shard_nodes(shard)

    def workers(self) -> list[str]:
        return [n for n in self.procs if n.startswith("worker-")]

    # ----------------------------------------------------------------- faults
    def kill(self, name: str) -> None:
        if name == "etcd":
            self.etcd_server.kill()
        else:
            self.procs[name].kill()

    def stop(self, name: str) -> None:
        self.stop_within(name, 5.0)

    def stop_within(self, name: str, timeout: float) -> None:
        """SIGTERM, SIGKILL after `timeout` s: the stop fault's `timeout_s`. Beside the Backend
        protocol, which the simulator implements without a grace period to set."""
        if name == "etcd":
            self.etcd_server.stop(timeout)
        else:
            self.procs[name].stop(timeout)

    def restart(self, name: str) -> None:
        """Start a stopped or killed process again (same name, same address, same data folder)."""
        if self.alive(name) or self.closing:      # nothing starts again once teardown began
            return
        if name == "etcd":
            self.etcd_server.start()   # same ports, same data: a control-plane outage healed
        elif name.startswith("shard-"):
            self.start_node(name)
        else:
            self.procs[name] = self.launcher.spawn(name, "pschaos.psnodes.worker", self.worker_args[name],
                                                   self.run_dir / "logs" / f"{name}.log")

    def pause(self, name: str) -> None:
        proc = self.etcd_server.proc if name == "etcd" else self.procs[name]
        proc.signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        proc = self.etcd_server.proc if name == "etcd" else self.procs[name]
        proc.signal(signal.SIGCONT)

    def data_path(self, name: str) -> Path:
        """Where a copy's local data is, as this process reads it (the node's own path here; a
        container backend may keep it on a volume)."""
        return Path(self.cfg.data_dir(name))

    def wipe_data(self, name: str) -> None:
        shutil.rmtree(self.data_path(name), ignore_errors=True)

    # ------------------------------------------------------------------ links
    def links(self) -> list[tuple[str, str]] | None:
        return None if self.net is None else list(self.net.links.links)

    def link_fault(self, kind: str, links: list[tuple[str, str]], params: dict):
        return LINK_FAULTS[kind](self.net, links, params)

    # -------------------------------------------------------------- teardown
    def wait_workers(self, timeout: float) -> bool:
        return self.clock.wait_until(lambda: not self.workers_running(), timeout, 0.1)

    def teardown(self) -> None:
        """Undo everything this backend started: bounded in time, and safe to call again (a second
        Ctrl-C sets `hurry`, which only cuts the grace periods short).

        First what outlives a harness killed mid-teardown and harms later runs: the nftables table
        (its rules match ports a later run may reuse) and the Toxiproxy server (every proxy and
        toxic goes with it). Then the workers, all at once, with a short grace (their proxies are
        gone, so they sit in retries), then every node the same way (SIGTERM, SIGKILL after the
        grace), etcd, the zygote, and last any process still carrying this run's tag (one a fault
        thread or an interrupted spawn started where no handle saw it).

        Each step runs whatever the one before raised (an engine error stopping one container
        must not leave the rest running, etcd up and the run registered); the first error is
        raised once every step has run.
        """
        self.closing = True
        self.launcher.begin_close()
        grace = self._grace
        errors: list[BaseException] = []

        def step(fn) -> None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - every later step still runs; re-raised below
                errors.append(e)

        def nft() -> None:
            if self.net is not None or self.proxied:
                NftTable(self.run_id).destroy(force=True)
                if self.net is not None:
                    self.net.nft.created = False
        step(nft)
        if self.toxiproxy is not None:
            step(lambda: self.toxiproxy.stop(timeout=grace(2.0)))       # its proxies and toxics go with it
        handles = {id(h): h for h in [*self.launcher.handles, *self.procs.values()]}
        workers = [h for h in handles.values() if getattr(h, "name", "").startswith("worker-")]
        step(lambda: stop_all(workers, grace=grace(1.0), kill_wait=2.0, hurry=lambda: self.hurry))
        step(lambda: stop_all([h for h in handles.values() if h not in workers], grace=grace(3.0), kill_wait=3.0,
                              hurry=lambda: self.hurry))
        step(lambda: self.etcd_server.stop(timeout=grace(3.0)))
        step(self.launcher.close)
        if self.disks is not None:
            step(self.disks.stop)          # after the copies that had files open on them
            step(lambda: reap_disks(self.run_dir))     # one whose process a step above killed outright

        def leftovers() -> None:
            left = [p for p in tagged_processes(self.run_id) if p.pid != os.getpid()]
            if left:
                reap(left)
        step(leftovers)
        step(lambda: registry.unregister(self.run_id))
        if self.client is not None:
            step(self.client.close)
            self.client = None
        if errors:
            raise errors[0]

    def _grace(self, full: float) -> float:
        return 0.2 if self.hurry else full

    def pids(self) -> dict[str, int]:
        out = {n: p.pid for n, p in self.procs.items() if p.alive()}
        if self.etcd_server.proc and self.etcd_server.proc.alive():
            out["etcd"] = self.etcd_server.proc.pid
        if self.toxiproxy and self.toxiproxy.proc and self.toxiproxy.proc.alive():
            out["toxiproxy"] = self.toxiproxy.proc.pid
        return out
