"""The SimPy backend: a whole cluster in virtual time behind the harness's Backend protocol.

Shard copies are SimCopy processes (pschaos.psnodes.core and the real ShardStore), etcd is SimEtcd, every
directed link is SimNetwork's, and each worker is psnodes' own Worker and PSClient, run in a
thread under the virtual clock (harness/backends/sim/vtime.py) with the simulator's stubs, etcd and pool
(harness/backends/sim/transport.py). They all share the host's cores (harness/backends/sim/cpu.py: the calibration's
`cores`, and `background_load` jobs of other tenants, 0 unless asked: `pschaos sim validate` gives
the twin the real run's measured load). The runner drives it like any backend: its sleeps are virtual, so a
scenario takes as long as its computation. Nothing outside the run folder is touched: no process,
port or file elsewhere.

Process faults act on copies, workers and etcd as the process backend's signals do (etcd: SimEtcd's
crash, start, freeze and thaw); link faults are SimNetwork's. Shard groups are started and
retired at run time, and psnodes' migration coordinator runs in virtual time (elastic.py). A
fault kind the model cannot express is refused by name when it comes due (a HarnessError the
runner records as a fault-error, so the run is `unknown` and says which kind): fail closed,
never skipped.
"""
from __future__ import annotations

import math
import random
import shutil
from pathlib import Path
from typing import Any

import simpy

from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.etcd import EtcdError
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.runtime import Runtime

from pschaos.harness.backends.observe import routes_from_copies
from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.backends.sim.calibration import Calibration
from pschaos.harness.backends.sim.clock import SimClock
from pschaos.harness.backends.sim.copy.copy import SimCopy
from pschaos.harness.backends.sim.copy.procs import CopyProcs
from pschaos.harness.backends.sim.cpu import SimCPU
from pschaos.harness.backends.sim.disk import SimDisk, local_dir
from pschaos.harness.backends.sim.elastic import ElasticShards
from pschaos.harness.backends.sim.etcd import SimEtcd
from pschaos.harness.backends.sim.eventfiles import EventFiles
from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.rpc import DEADLINE_MARGIN_S, ETCD
from pschaos.harness.backends.sim.threadclock import ThreadClock
from pschaos.harness.backends.sim.transport import Killed, SimEtcdClient, SimPool, SimStub
from pschaos.harness.backends.sim.vtime import Baton, VirtualTime
from pschaos.harness.backends.sim.workers import SimWorkers


class SimBackend(ElasticShards):
    name = "sim"
    proxied = True          # every directed link is modelled: link faults always apply

    def __init__(self, spec: ClusterSpec, run_dir: Path, run_id: str, seed: int,
                 calibration: Calibration | None = None, tables: dict[str, int] | None = None,
                 background_load: float = 0.0, host_slowdown: float = 1.0) -> None:
        from pschaos.psnodes.models import MLPTask, WideDeepTask

        self.spec, self.run_dir, self.run_id, self.seed = spec, run_dir, run_id, seed
        self.cal = calibration or Calibration.default()
        self.background_load = background_load
        self.host_slowdown = host_slowdown      # cpu.py: the host's cores this many times slower than calibrated
        self.charge_log: list | None = None     # a list: every CPU charge is logged in it (calibration reads it)
        # the Push and Pull RPCs each caller made (transport.py): a worker's logged pull is one RPC
        # per shard for its dense state, one per table and shard more for its rows (widedeep: 3)
        self.data_calls: dict[str, int] = {}
        tasks = {t.name: dict(t.tables) for t in (MLPTask, WideDeepTask)}
        self.tables = tasks[spec.model] if tables is None else tables
        self.env = simpy.Environment()
        self.rng = random.Random(seed)
        self.vt = VirtualTime(self.env)
        self.clock = ThreadClock(self.vt)
        self.sim_clock = SimClock(self.env)
        self.hurry = False
        self.cfg: ClusterConfig | None = None
        self.copies: dict[str, SimCopy] = {}
        self.procs: dict[str, CopyProcs] = {}
        self.active: list[int] = []    # shard groups running (elastic shards: elastic.py)
        self.files = EventFiles(run_dir / "events", self.clock.now)
        self.workers_ = SimWorkers(self)
        self.etcd_starting = False

    # ------------------------------------------------------------------ setup
    def start(self, timeout: float = 30.0, workers_steps: int | None = None, duration: float | None = None,
              step_delay: float = 0.0) -> None:
        s = self.spec
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # the host's cores, shared by every simulated process and `background_load` jobs of others
        self.cpu = SimCPU(self.env, self.cal.cores or math.inf, self.background_load, self.host_slowdown)
        self.cpu.log = self.charge_log
        self.etcd = SimEtcd(self.env, read_s=self.cal.etcd_read_s, write_s=self.cal.etcd_write_s, cpu=self.cpu,
                            cpu_s=self.cal.etcd_request_s, client_cpu_s=self.cal.etcd_client_s)
        self.etcd.wake_points = [(float(g), float(e)) for g, e in self.cal.etcd_wake_s]
        self.net = SimNetwork(self.env, self.rng, self.cal.network)
        self._teardowns: random.Random | None = None      # a stream of its own for the kills' teardowns
        self.disk = SimDisk(self.env, self.sim_clock, self.cal.to_json())     # checkpoint_mb_s: the write rate
        self.cfg = ClusterConfig(cluster_id=self.run_id, etcd="sim://etcd", shards=s.shards, copies=s.copies,
                                 max_shards=max(s.shards, s.max_shards),
                                 workers=s.workers, mode=s.replication, tables=self.tables,
                                 optimizer={"name": s.optimizer, "lr": s.lr}, seed=self.seed,
                                 workdir=str(self.run_dir / "work"), checkpoint_interval_s=s.checkpoint_interval_s,
                                 max_lag=s.max_lag, min_isr=s.min_isr, **s.membership_config(),
                                 **s.detector.config_fields(),
                                 peer_token=f"sim-{self.seed}")
        self.active = list(range(s.shards))
        for n in self.cfg.all_nodes():
            self._new_copy(n)
        if workers_steps is not None:
            self.workers_.start_all(workers_steps, duration, step_delay)
        ok = self.clock.wait_until(self._primaries_serve, timeout, 0.05)
        if not ok:
            raise HarnessError(f"simulated cluster did not elect a primary for every shard in {timeout}s virtual")

    def _primaries_serve(self, shards: list[int] | None = None) -> bool:
        """Every routed primary (of `shards`, default all) has taken its role: the record's
        compare-and-swap and the copy's promotion land at one virtual instant, and a look between
        them saw a primary in etcd whose Status still said `starting`."""
        routes = self.routing()
        return all(i in routes and (c := self.copies.get(routes[i].primary)) is not None and c.role == "primary"
                   for i in (self.active if shards is None else shards))

    def _new_copy(self, name: str) -> None:
        self.files.pids[name] = self.files.pids.get(name, 1000 + 10 * len(self.files.pids)) + 1
        c = SimCopy(self.env, self.sim_clock, self.etcd, self.net, self.cfg, name, self.files, disk=self.disk)
        c.start_delay_s = self.cal.node_start_s
        c.teardown_s = self.cal.kill_teardown_s or 0.0
        c.cpu = self.cpu
        c.request_s, c.apply_s_per_mb = self.cal.request_cpu(), self.cal.apply_s_per_mb
        c.call_apply_cpu = self.cal.cpu_model     # a file from before the model: pushes cost no apply CPU
        c.replicate_s, c.replicate_s_per_mb, c.send_s = self.cal.replicate_cpu()
        c.push_extra_s, c.replicate_extra_s = self.cal.copy_cpu_extra(self.spec.model, self.spec.replication,
                                                                     self.spec.training)
        c.idle_cpu_s = self.cal.idle_cpu()
        self.copies[name] = c
        self.procs[name] = CopyProcs(c, self.copies)
        self.procs[name].start_cpu_s = self.cal.node_start_cpu_s or 0.0
        self.procs[name].start()

    def start_worker(self, name: str, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        self.workers_.start(name, steps, duration, step_delay)

    def teardown(self) -> None:
        self.workers_.kill_all()
        self.vt.close()
        self.files.close()

    # ------------------------------------------------------------ observation
    def nodes(self) -> list[str]:
        """The copies of every shard group running now (scale-out adds groups, scale-in retires them)."""
        return [n for i in self.active for n in self.cfg.shard_nodes(i)] if self.cfg else []

    def shard_nodes(self, shard: int) -> list[str]:
        return self.cfg.shard_nodes(shard)

    def workers(self) -> list[str]:
        return self.workers_.names()

    def alive(self, name: str) -> bool:
        if name == ETCD:
            return self.etcd.running if self.cfg else False
        if name.startswith("worker-"):
            return self.workers_.alive(name)
        c = self.copies.get(name)
        return c is not None and c.alive

    def routing(self) -> dict[int, ShardRecord]:
        """The routing table from etcd; while etcd is down, as the live copies themselves report it
        (the process backend's fallback)."""
        out = {}
        if self.etcd.frozen:        # a paused etcd: the process backend's client waits up to 1 s
            self.vt.wait_event(self.etcd.thawed | self.env.timeout(1.0))
        try:
            self.etcd.touch(self.env.now)     # the harness's reads keep etcd awake, as the real ones do
            for i in self.active:
                kv = self.etcd.get(self.cfg.shard_key(i))
                if kv is not None:
                    out[i] = ShardRecord.from_json(kv.value)
            return out
        except EtcdError:
            pass
        return routes_from_copies(self.nodes(), self.alive, self.status)

    def status(self, name: str, checksum: bool = False, applied: bool = False, timeout: float = 2.0,
               audit: bool = False) -> Any:
        """The copy's answer to a Status call (SimCopy.serve_status, in virtual time): a paused copy
        answers nothing, so this waits `timeout` (or until it is resumed) as the process backend's
        client does; a down or stopping one refuses it at once. None when there is no answer."""
        c = self.copies.get(name)
        if c is None or not c.alive:
            return None
        req = ps_pb2.StatusRequest(checksum=checksum, applied=applied, audit=audit)
        try:
            # the server's deadline, 20 ms before the caller's, as every handler's (pschaos.psnodes.server.calls.deadline_of)
            return self.vt.run_process(c.serve_status(req, self.env.now + timeout - DEADLINE_MARGIN_S))
        except PSError:
            return None

    def final_state(self, name: str, under: list[int] | None = None) -> dict | None:
        """The process backend's final_state: from the copy's Status answer, None without one."""
        if self.status(name) is None:
            return None
        st = self.copies[name].final_state(under)
        return {k: v for k, v in st.items() if k not in ("node", "shard", "alive")}

    def checkpoint_scan(self) -> list[dict]:
        return self.disk.checkpoint_scan() if self.cfg else []

    def events_path(self, name: str) -> Path:
        return self.files.path(name)

    def event_files(self) -> list[Path]:
        """Every event file but the runner's own: the copies' (EventFiles) and the workers' (EventLog)."""
        own = self.events_path("harness")
        return sorted(p for p in (self.run_dir / "events").glob("*.jsonl") if p != own)

    def discard_data(self) -> None:
        shutil.rmtree(self.run_dir / "work", ignore_errors=True)

    def workers_running(self) -> bool:
        return self.workers_.running()

    # ---------------------------------------------------------------- faults
    def _copy(self, name: str, what: str) -> SimCopy:
        if name == ETCD:
            raise HarnessError(f"{what} etcd: only a shard copy's data can be wiped; etcd keeps its data dir "
                               "across a kill, in the simulator as in the process backend")
        c = self.copies.get(name)
        if c is None:
            raise HarnessError(f"{what}: no simulated node named {name!r}")
        return c

    def kill(self, name: str) -> None:
        if name == ETCD:
            self.etcd.crash()
        elif name.startswith("worker-"):
            self.workers_.kill(name)
        else:
            c = self._copy(name, "kill")
            was_alive = c.alive
            if was_alive and self.cal.kill_teardown_samples:   # each real kill's own teardown, drawn (calibration.py)
                if self._teardowns is None:
                    self._teardowns = self.net.stream("kill-teardown")
                c.teardown_s = float(self._teardowns.choice(self.cal.kill_teardown_samples))
            c.kill()
            if was_alive and c.teardown_s > 0:     # as the process backend's kill waits for the reap
                self.vt.wait_event(self.env.timeout(c.teardown_s))

    def stop(self, name: str) -> None:
        if name == ETCD:
            self.etcd.crash()        # etcd on SIGTERM: it exits at once and keeps its data
        elif name.startswith("worker-"):
            self.workers_.kill(name, graceful=True)
        else:
            exited = self._copy(name, "stop").stop()
            if exited is not None:          # Proc.stop returns once the process exited: so does this
                self.vt.wait_event(exited)

    def restart(self, name: str) -> None:
        if self.alive(name):
            return
        if name == ETCD:
            self._restart_etcd()
            return
        if name.startswith("worker-"):
            self.workers_.restart(name)
            return
        c = self._copy(name, "restart")
        if self.env.now < c.closed_at:       # another thread's kill has not returned yet (the reap)
            self.vt.wait_event(self.env.timeout(c.closed_at - self.env.now))
        self.files.pids[name] += 1
        self.copies[name].restart()

    def _restart_etcd(self) -> None:
        """EtcdServer.start: the same data dir; returns once it serves, `etcd_start_s` (calibration)
        later, as the process backend's restart blocks until etcd is healthy."""
        if self.etcd_starting:
            return
        self.etcd_starting = True
        try:
            self.clock.sleep(self.cal.etcd_start_s)
            self.etcd.start()
        finally:
            self.etcd_starting = False

    def pause(self, name: str) -> None:
        if name == ETCD:
            self.etcd.freeze()
        elif name.startswith("worker-"):
            self.workers_.pause(name)
        else:
            self._copy(name, "pause").pause()

    def resume(self, name: str) -> None:
        if name == ETCD:
            self.etcd.thaw()
        elif name.startswith("worker-"):
            self.workers_.resume(name)
        else:
            self._copy(name, "resume").resume()

    def wipe_data(self, name: str) -> None:
        self._copy(name, "wipe").wipe_data()

    def power_loss(self, name: str, torn: dict | None = None) -> dict:
        """The dead copy's local folder as a power cut leaves it (sim/disk.py: what it synced)."""
        if torn is not None:
            raise HarnessError(f"torn-write {name}: the twin's disk writes no partial data; run it with "
                               "--backend process (the power-loss disk tears writes)")
        if self.alive(name):
            raise HarnessError(f"power-loss {name}: the copy still runs; its power goes after its kill")
        return self.disk.power_loss(local_dir(self._copy(name, "power-loss").name))

    def rot(self, name: str, file: str, choose) -> dict:
        """A bit of the dead copy's file at rest flipped (sim/disk.py)."""
        if self.alive(name):
            raise HarnessError(f"bit-rot {name}: the copy runs again; a file rots at rest only while it is down")
        try:
            return self.disk.rot(local_dir(self._copy(name, "bit-rot").name), file, choose)
        except LookupError as e:
            raise HarnessError(f"bit-rot {name}: {e}: nothing to rot; rot it later, or name params.file") from None

    def held_writes(self, name: str) -> dict:
        raise HarnessError(f"torn-write {name}: the twin's disk writes no partial data; run it with "
                           "--backend process (the power-loss disk tears writes)")

    def checkpoint_writes(self, name: str) -> list[str]:
        c = self.copies.get(name)
        return c.checkpoint_writes() if c is not None and hasattr(c, "checkpoint_writes") else []

    # ----------------------------------------------------------------- links
    def links(self) -> list[tuple[str, str]]:
        out = []
        for n in self.slot_nodes():     # the groups a scale-out may start have their links from the start
            out.append((n, ETCD))
            shard = int(n.split("-")[1].split("/")[0])
            out += [(n, p) for p in self.shard_nodes(shard) if p != n]
        for w in self.workers_.planned():
            out += [(w, ETCD)] + [(w, n) for n in self.slot_nodes()]
        return out

    def link_fault(self, kind: str, links: list[tuple[str, str]], params: dict) -> "SimLinkFault":
        return SimLinkFault(self.net, kind, links, params)


class SimLinkFault:
    """One network fault on the simulated links: the netfaults kinds SimNetwork models."""

    def __init__(self, net: SimNetwork, kind: str, links: list[tuple[str, str]], params: dict) -> None:
        from pschaos.harness.backends.sim.network import SUPPORTED

        if kind not in SUPPORTED:
            raise HarnessError(f"fault kind {kind!r} is not modelled by the simulator; it models: "
                               f"{', '.join(SUPPORTED)}")
        self.net, self.kind, self.links, self.params = net, kind, links, params
        self.handle: int | None = None

    def inject(self) -> None:
        self.handle = self.net.add_fault(self.kind, self.links, self.params)

    def heal(self) -> None:
        if self.handle is not None:
            self.net.remove_fault(self.handle)
            self.handle = None


__all__ = ["SimBackend", "SimLinkFault"]


def sim_factory(calibration: str | None = None, background: float = 0.0, slowdown: float = 1.0):
    """A Runner backend factory: the twin with this calibration file (default: the committed one),
    `background` jobs of other tenants on its cores and its cores `slowdown` times slower than when
    the calibration was measured. `pschaos run --calibration --background --host-slowdown` and `sim
    validate` build their runs with it, so a report's rerun line replays the same history."""
    cal = Calibration.load(calibration) if calibration else Calibration.default()

    def make(s, run_dir: Path, run_id: str, seed: int) -> SimBackend:
        return SimBackend(s.cluster, run_dir, run_id, seed, calibration=cal, background_load=background,
                          host_slowdown=slowdown)
    return make

