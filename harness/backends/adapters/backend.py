"""The Backend protocol (harness/backends/base.py) over an Adapter: local processes on loopback.

The runner, the faults and the target selectors reach an adapted system only through these
methods, as they reach psnodes, so every process fault, the partition of a node and every
selector work unchanged. Processes are started with the run's tag (procs.Proc) and the run is
registered with its nftables table (registry), so teardown, Ctrl-C and `pschaos clean` reap
them like psnodes' own.
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import psutil

from pschaos.netfaults.nft import NftTable, table_name

from pschaos.harness.machinery import registry
from pschaos.harness.history.clock import WALL, Clock
from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.procs import RUN_ENV, Proc, reap, start_time, stop_all, tagged_processes, wait_until
from pschaos.harness.backends.adapters.api import Adapter, Env
from pschaos.harness.backends.adapters.portcut import PortCut, isolated
from pschaos.harness.backends.adapters.workload import Worker


ELECTION_WAIT_S = 1.0
SOCKET_PATH_MAX = 100      # the kernel's sun_path holds 108 bytes, the terminating NUL among them


def sock_dir(run_dir: Path, run_id: str) -> Path:
    """Where unix sockets go: in the run folder (gone with it, also after a SIGKILLed harness),
    or, when that path would be too long for a socket's name, a folder under /tmp named by the
    run (created in `start`, once the registry names it, so `pschaos clean` removes it after a
    crash; teardown removes it otherwise)."""
    inside = run_dir.resolve() / "sock"
    if len(str(inside / "shard-00-00.sock")) <= SOCKET_PATH_MAX:
        return inside
    return Path(tempfile.gettempdir()) / f"pschaos-sock-{run_id[-6:]}-{uuid.uuid4().hex[:8]}"


@dataclass
class Route:
    """A group's routing record, in the shape target selectors read (`epoch`, `primary`, `isr`)."""

    epoch: int
    primary: str
    isr: list[str] = field(default_factory=list)


class AdapterBackend:
    name = "adapter"          # local processes, like psnodes' "process" backend, but another system's
    WORKER_JOIN_S = 5.0       # teardown waits this long for all the workers together
    proxied = False
    clock: Clock = WALL

    def __init__(self, adapter_cls: type[Adapter], scenario, run_dir: Path, run_id: str, seed: int) -> None:
        self.run_dir, self.run_id, self.seed = run_dir, run_id, seed
        self.sock_dir = sock_dir(run_dir, run_id)
        self.adapter = adapter_cls(Env(run_dir, self.sock_dir, scenario.cluster.copies, dict(scenario.system_options)))
        self.n_workers, self.read_every = scenario.cluster.workers, scenario.workload.read_every
        self.procs: dict[str, Proc] = {}
        self.argv: dict[str, list[str]] = {}
        self.threads: dict[str, Worker] = {}
        self.nft = NftTable(run_id)
        self.hurry = False
        self.closing = False

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 30.0, workers_steps: int | None = None, duration: float | None = None,
              step_delay: float = 0.0) -> None:
        outside = [] if self.sock_dir.is_relative_to(self.run_dir.resolve()) else [str(self.sock_dir)]
        registry.register(self.run_id, os.getpid(), table_name(self.run_id), start_time(os.getpid()), folders=outside)
        self.sock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.adapter.configure()
        self.argv = self.adapter.commands()
        for name in self.argv:
            self._spawn(name)
            if not wait_until(lambda n=name: _quietly(self.adapter.up, n), timeout, 0.05):
                raise HarnessError(f"{self.adapter.name}: {name} did not come up within {timeout:.0f}s; see "
                                   f"{self.run_dir / 'logs' / (name.replace('/', '-') + '.log')}")
            self._check_tagged(name)
        if not wait_until(lambda: _quietly(self.adapter.ready), timeout, 0.1):
            raise HarnessError(f"{self.adapter.name} did not come up within {timeout:.0f}s; see the logs under "
                               f"{self.run_dir / 'logs'}")
        if workers_steps is not None:
            for j in range(self.n_workers):
                self.start_worker(f"worker-{j}", workers_steps, duration, step_delay)

    def _spawn(self, name: str) -> None:
        if not self.closing:
            log = self.run_dir / "logs" / (name.replace("/", "-") + ".log")
            self.procs[name] = Proc(name, self.argv[name], log, self.run_id)

    def _check_tagged(self, name: str, within: float = 3.0) -> None:
        """Fail closed when a process hid the run tag: a program that rewrites its title over its
        environment (Redis unless `set-proc-title no`) could not be reaped by `pschaos clean`.
        Read until it shows: /proc/<pid>/environ reads empty for a moment after the exec."""
        def tagged() -> bool:
            try:
                return psutil.Process(self.procs[name].pid).environ().get(RUN_ENV) == self.run_id
            except psutil.Error:
                return True             # it exited already: what it left is judged elsewhere
        if not wait_until(tagged, within, 0.05):
            raise HarnessError(f"{self.adapter.name}: {name} does not carry the run tag {RUN_ENV} in its environment "
                               "(it rewrote it, e.g. Redis' process title: set-proc-title no), so `pschaos clean` "
                               "could not find it after a crash; change its command line or config")

    def start_worker(self, name: str, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        keys = [f"worker-{j}" for j in range(self.n_workers)]
        w = Worker(name, self.adapter.client, self.events_path(name), keys, self.seed, steps, duration, step_delay,
                   self.read_every, lambda: self.closing)
        self.threads[name] = w
        w.start()

    def teardown(self) -> None:
        """The rules first, then every process with a short grace (a paused one is resumed so it
        can exit), so a worker blocked on a frozen node fails at once; then the workers, all
        against one deadline (they stop at their next operation), whatever this run's tag still
        marks, the socket folder and the registry entry. Each step runs whatever the one before
        raised; the first error is raised once every step has run."""
        self.closing = True

        def join_workers() -> None:
            deadline = time.monotonic() + (0.2 if self.hurry else self.WORKER_JOIN_S)
            for w in self.threads.values():
                w.join(max(0.0, deadline - time.monotonic()))

        def reap_tagged() -> None:
            left = [p for p in tagged_processes(self.run_id) if p.pid != os.getpid()]
            if left:
                reap(left)
        run_all([lambda: self.nft.destroy(force=True),
                 lambda: stop_all(list(self.procs.values()), grace=0.2 if self.hurry else 3.0, hurry=lambda: self.hurry),
                 join_workers, reap_tagged, lambda: shutil.rmtree(self.sock_dir, ignore_errors=True),
                 lambda: registry.unregister(self.run_id)])

    def discard_data(self) -> None:
        """Node data goes; a config the system rewrote (Sentinel's failover state) stays as evidence."""
        data = self.run_dir / "data"
        for f in data.glob("*/*.conf") if data.exists() else []:
            keep = self.run_dir / "configs" / f.parent.name / f.name
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, keep)
        shutil.rmtree(data, ignore_errors=True)

    # ------------------------------------------------------------------ observation
    def nodes(self) -> list[str]:
        return list(self.adapter.nodes)

    def shard_nodes(self, shard: int) -> list[str]:
        return list(self.adapter.nodes) if shard == 0 else []

    def workers(self) -> list[str]:
        return list(self.threads)

    def alive(self, name: str) -> bool:
        if name in self.threads:
            return self.threads[name].is_alive()
        p = self.procs.get(name)
        return p is not None and p.alive()

    def routing(self) -> dict[int, Route]:
        """The group's (term, primary) as the system names them in one reading (Adapter.view);
        mid-election, looked for up to ELECTION_WAIT_S (a fault that came due then would find no
        `primary(shard=0)`)."""
        found: list[tuple[int, str | None]] = []
        wait_until(lambda: bool(found.append(self.adapter.view(0)) or found[-1][1]), ELECTION_WAIT_S, 0.1)
        epoch, primary = found[-1]
        return {0: Route(epoch, primary)} if primary else {}

    def status(self, name: str, checksum: bool = False, applied: bool = False, timeout: float = 2.0,
               audit: bool = False):
        if not self.alive(name):
            return None
        r = self.routing().get(0)
        return SimpleNamespace(shard=0, role="primary" if r and r.primary == name else "replica",
                               epoch=r.epoch if r else 0, seq=0, isr=[])

    def settled(self) -> bool:
        """The adapter says replication came to rest (a probe that raised is a no)."""
        return _quietly(self.adapter.settled)

    def final(self, keys: list[str]) -> tuple[str, dict[str, dict]]:
        """What survived, read back from the primary (Adapter.final)."""
        return self.adapter.final(keys)

    def final_state(self, name: str, under: list[int] | None = None) -> dict | None:
        st = self.status(name)
        return None if st is None else {"role": st.role, "epoch": st.epoch}

    def checkpoint_scan(self) -> list[dict]:
        return []

    def checkpoint_writes(self, name: str) -> list[str]:
        return []

    def events_path(self, name: str) -> Path:
        return self.run_dir / "events" / (name.replace("/", "-") + ".jsonl")

    def event_files(self) -> list[Path]:
        own = self.events_path("harness")
        return sorted(p for p in (self.run_dir / "events").glob("*.jsonl") if p != own)

    def workers_running(self) -> bool:
        return any(w.is_alive() for w in self.threads.values())

    # ------------------------------------------------------------------ faults
    def _proc(self, name: str) -> Proc:
        if name not in self.procs:
            raise HarnessError(f"{name}: no such process of {self.adapter.name}; nodes: {', '.join(self.nodes())}")
        return self.procs[name]

    def kill(self, name: str) -> None:
        self._proc(name).kill()

    def stop(self, name: str) -> None:
        self._proc(name).stop(5.0)

    def restart(self, name: str) -> None:
        if not self.alive(name) and not self.closing:
            self._proc(name)
            self._spawn(name)

    def pause(self, name: str) -> None:
        self._proc(name).signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self._proc(name).signal(signal.SIGCONT)

    def wipe_data(self, name: str) -> None:
        shutil.rmtree(self.run_dir / "data" / name.replace("/", "-"), ignore_errors=True)

    # ------------------------------------------------------------------ links
    def links(self) -> list[tuple[str, str]]:
        return [(a, b) for a in self.adapter.nodes for b in self.adapter.nodes if a != b]

    def link_fault(self, kind: str, links: list[tuple[str, str]], params: dict) -> PortCut:
        node = isolated(links)
        return PortCut(self.nft, kind, self.adapter.cut(node), params, probe=lambda: self._probe(node))

    def _probe(self, node: str) -> dict:
        """The cut node's own progress and the group's (term, primary), each or the error reading it."""
        out: dict = {"node": node}
        for key, read in (("progress", lambda: self.adapter.progress(node)), ("view", lambda: self.adapter.view(0))):
            try:
                out[key] = read()
            except Exception as e:  # noqa: BLE001 - a node that does not answer: recorded as such
                out[key] = {"error": f"{e.__class__.__name__}: {e}"[:200]}
        return out


def run_all(steps: list) -> None:
    """Run every step whatever the ones before raised; then raise the first error."""
    errors: list[BaseException] = []
    for fn in steps:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - every later step still runs; re-raised below
            errors.append(e)
    if errors:
        raise errors[0]


def _quietly(pred, *args) -> bool:
    """A probe that raised (the process is still starting) is a no."""
    try:
        return bool(pred(*args))
    except Exception:  # noqa: BLE001 - not up yet
        return False
