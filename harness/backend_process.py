"""The process backend: etcd, shard nodes and workers as local processes on loopback.

This is the narrow adapter the runner talks to (start, stop, signal, routing, status); another
backend (Docker, the SimPy model) implements the same methods. Names are the contract: faults,
history and reports say `shard-0/1` and `worker-0`, never pids or ports.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import grpc

from psnodes.client import PSClient
from psnodes.config import ClusterConfig, ShardRecord
from psnodes.etcd import Etcd

from .errors import HarnessError
from .etcd_server import EtcdServer
from .ports import free_ports
from .procs import Proc, python_module, wait_until
from .scenario import ClusterSpec

TASK_TABLES = {"mlp": {}, "widedeep": {"emb": 16, "wide": 1}}


class ProcessBackend:
    name = "process"

    def __init__(self, spec: ClusterSpec, run_dir: Path, run_id: str, seed: int,
                 owner: int | None = None, detach: bool = False, tables: dict[str, int] | None = None) -> None:
        self.spec, self.run_dir, self.run_id, self.seed = spec, run_dir, run_id, seed
        self.tables = TASK_TABLES[spec.model] if tables is None else tables
        self.owner, self.detach = owner, detach
        self.procs: dict[str, Proc] = {}
        self.etcd_server = EtcdServer(run_dir, run_id, owner, detach)
        self.cfg: ClusterConfig | None = None
        self.client: PSClient | None = None
        self.worker_args: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ setup
    @property
    def config_path(self) -> Path:
        return self.run_dir / "cluster.json"

    def events_path(self, name: str) -> Path:
        return self.run_dir / "events" / (name.replace("/", "-") + ".jsonl")

    def start(self, timeout: float = 30.0) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.etcd_server.start()
        s = self.spec
        nodes = [f"shard-{i}/{r}" for i in range(s.shards) for r in range(s.copies)]
        ports = free_ports(2 * len(nodes))
        self.cfg = ClusterConfig(
            cluster_id=self.run_id, etcd=self.etcd_server.url, shards=s.shards, copies=s.copies,
            workers=s.workers, mode=s.replication, tables=self.tables,
            optimizer={"name": s.optimizer, "lr": s.lr}, seed=self.seed,
            addresses={n: f"127.0.0.1:{ports[i]}" for i, n in enumerate(nodes)},
            metrics_ports={n: ports[len(nodes) + i] for i, n in enumerate(nodes)},
            workdir=str(self.run_dir / "work"), checkpoint_interval_s=s.checkpoint_interval_s,
            max_lag=s.max_lag)
        self.cfg.save(self.config_path)
        for n in nodes:
            self.start_node(n)
        self.client = PSClient(self.cfg, "harness", retry_budget=5.0)
        try:
            self.client.wait_ready(timeout)
        except Exception as e:
            raise HarnessError(f"cluster did not come up: {e}; see {self.run_dir / 'logs'}") from None

    def start_node(self, name: str) -> None:
        argv = python_module("psnodes.serve", "--config", str(self.config_path), "--name", name,
                             "--events", str(self.events_path(name)))
        self.procs[name] = Proc(name, argv, self.run_dir / "logs" / (name.replace("/", "-") + ".log"),
                                self.run_id, self.owner, self.detach)

    def start_workers(self, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        for j in range(self.spec.workers):
            self.start_worker(f"worker-{j}", steps, duration, step_delay)

    def start_worker(self, name: str, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        s = self.spec
        args = ["--config", str(self.config_path), "--name", name, "--model", s.model, "--mode", s.training,
                "--staleness", str(s.staleness), "--steps", str(steps), "--device", s.device,
                "--events", str(self.events_path(name)), "--step-delay", str(step_delay)]
        if duration:
            args += ["--duration", str(duration)]
        self.worker_args[name] = args
        self.procs[name] = Proc(name, python_module("psnodes.worker", *args),
                                self.run_dir / "logs" / f"{name}.log", self.run_id, self.owner, self.detach)

    # ---------------------------------------------------------------- queries
    def nodes(self) -> list[str]:
        return self.cfg.all_nodes() if self.cfg else []

    def workers(self) -> list[str]:
        return [n for n in self.procs if n.startswith("worker-")]

    def alive(self, name: str) -> bool:
        if name == "etcd":
            return self.etcd_server.proc is not None and self.etcd_server.proc.alive()
        p = self.procs.get(name)
        return p is not None and p.alive()

    def routing(self) -> dict[int, ShardRecord]:
        etcd = Etcd(self.cfg.etcd, timeout=1.0)
        out = {}
        for i in range(self.cfg.shards):
            kv = etcd.get(self.cfg.shard_key(i))
            if kv is not None:
                out[i] = ShardRecord.from_json(kv.value)
        return out

    def status(self, name: str, checksum: bool = False, applied: bool = False):
        try:
            return self.client.status(name, checksum=checksum, applied=applied)
        except grpc.RpcError:
            return None

    def workers_running(self) -> bool:
        return any(self.procs[w].alive() for w in self.workers())

    # ----------------------------------------------------------------- faults
    def kill(self, name: str) -> None:
        if name == "etcd":
            self.etcd_server.kill()
        else:
            self.procs[name].kill()

    def stop(self, name: str) -> None:
        if name == "etcd":
            self.etcd_server.stop()
        else:
            self.procs[name].stop()

    def restart(self, name: str) -> None:
        """Start a stopped or killed process again (same name, same address, same data folder)."""
        if self.alive(name):
            return
        if name == "etcd":
            self.etcd_server.start()   # same ports, same data: a control-plane outage healed
        elif name.startswith("shard-"):
            self.start_node(name)
        else:
            args = self.worker_args[name]
            self.procs[name] = Proc(name, python_module("psnodes.worker", *args),
                                    self.run_dir / "logs" / f"{name}.log", self.run_id, self.owner, self.detach)

    def pause(self, name: str) -> None:
        proc = self.etcd_server.proc if name == "etcd" else self.procs[name]
        proc.signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        proc = self.etcd_server.proc if name == "etcd" else self.procs[name]
        proc.signal(signal.SIGCONT)

    # -------------------------------------------------------------- teardown
    def wait_workers(self, timeout: float) -> bool:
        return wait_until(lambda: not self.workers_running(), timeout, 0.1)

    def teardown(self) -> None:
        """Stop everything this backend started, workers first; safe to call twice."""
        for name in self.workers():
            self.procs[name].stop(timeout=3)
        for name, p in list(self.procs.items()):
            if name.startswith("shard-"):
                p.stop(timeout=3)
        self.etcd_server.stop()
        if self.client is not None:
            self.client.close()
            self.client = None

    def pids(self) -> dict[str, int]:
        out = {n: p.pid for n, p in self.procs.items() if p.alive()}
        if self.etcd_server.proc and self.etcd_server.proc.alive():
            out["etcd"] = self.etcd_server.proc.pid
        return out


def write_state(path: Path, backend: ProcessBackend) -> None:
    path.write_text(json.dumps({"run_id": backend.run_id, "run_dir": str(backend.run_dir),
                                "pids": backend.pids(), "config": str(backend.config_path),
                                "owner": os.getpid(), "time": time.time()}, indent=2))
