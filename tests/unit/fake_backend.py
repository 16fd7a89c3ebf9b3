"""An in-memory backend on a manual clock: the Backend protocol and nothing else, for unit tests.

It proves the runner needs no processes, ports or psnodes: nodes are names in a set, a failover
is a dictionary update, and every call is logged with the virtual time it came at. It writes the
events a real run has, so the runner's report on it is a real verdict: each primary its `promote`
(epoch 1 at start, one up at a failover), each worker a `train-step` every `step_s` of virtual
time and a `train-done` when its workload ends or it is stopped (SIGTERM); a killed worker writes
nothing more, and a restart runs its workload again from the start, as a new process (`pid`)
would. Its folders are its own (`fake-events/`, `disks/`), not ProcessBackend's: the runner finds
them only through the protocol. Time moves only when the thread that made the clock sleeps (the
runner's drive loop); other threads (the sampler, a flap) wait for it to move.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.history.clock import WALL
from pschaos.harness.backends.cluster import ClusterSpec


class ManualClock:
    """Virtual seconds; `sleep` on the owning thread moves them, anywhere else waits for them.

    When time moves past a waiting thread's deadline, the owner lets that thread wake before it
    moves time on, so a fault thread's waits end at their virtual time however busy the machine."""

    def __init__(self, start: float = 1_000.0, real_limit_s: float = 5.0) -> None:
        self.t = start
        self.owner = threading.get_ident()
        self.cond = threading.Condition()
        self.listeners: list[Callable[[float], None]] = []
        self.waiting: dict[int, float] = {}      # thread -> the virtual time it waits for
        self.real_limit_s = real_limit_s     # a waiter that nobody moves time for gives up (no hung test)

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        if threading.get_ident() != self.owner:
            self.wait_until(lambda: False, s, s)
            return
        with self.cond:
            self.t = round(self.t + s, 9)
            self.cond.notify_all()
            give_up = time.monotonic() + self.real_limit_s
            while any(d <= self.t for d in self.waiting.values()) and time.monotonic() < give_up:
                self.cond.wait(0.001)
        for f in self.listeners:
            f(self.t)

    def spawn(self, fn: Callable[[], Any], name: str) -> threading.Thread:
        return WALL.spawn(fn, name)

    def join(self, handle: threading.Thread, timeout: float | None = None) -> bool:
        return WALL.join(handle, timeout)      # as before the clock had threads: a real join

    def alive(self, handle: threading.Thread) -> bool:
        return handle.is_alive()

    def wait_until(self, pred: Callable[[], Any], timeout: float, period: float = 0.05) -> bool:
        end = round(self.t + timeout, 9)
        if threading.get_ident() == self.owner:
            while self.t < end:
                if pred():
                    return True
                self.sleep(min(period, end - self.t))
            return bool(pred())
        me, give_up = threading.get_ident(), time.monotonic() + self.real_limit_s
        with self.cond:
            self.waiting[me] = end
            try:
                while self.t < end and time.monotonic() < give_up:
                    if pred():
                        return True
                    self.cond.wait(0.005)
            finally:
                del self.waiting[me]
                self.cond.notify_all()
        return bool(pred())


@dataclass
class Route:
    epoch: int
    primary: str
    isr: list[str]


@dataclass
class Status:
    shard: int
    role: str
    epoch: int
    seq: int
    isr: list[str] = field(default_factory=list)


def shard_of(name: str) -> int:
    return int(name.split("-")[1].split("/")[0])


class FakeBackend:
    """The Backend protocol in memory (harness/backends/base.py)."""

    name = "fake"
    proxied = False

    TARGET_LOSS = 0.5

    def __init__(self, spec: ClusterSpec, run_dir: Path, clock: ManualClock, step_s: float = 0.1,
                 dead_on_restart: frozenset[str] = frozenset()) -> None:
        self.spec, self.run_dir, self.clock, self.step_s = spec, run_dir, clock, step_s
        self.dead_on_restart = dead_on_restart    # names a restart does not bring back (a broken process)
        self.hurry = False
        self.t0 = clock.now()
        self.up: set[str] = set()
        self.paused: set[str] = set()
        self.wiped: set[str] = set()
        self.routes = {i: Route(1, f"shard-{i}/0", self.shard_nodes(i)) for i in range(spec.shards)}
        self.steps: dict[str, int] = {}      # worker -> steps done
        self.goal: dict[str, int] = {}
        self.next_at: dict[str, float] = {}
        self.losses: dict[str, list[float]] = {}
        self.pid: dict[str, int] = {}        # name -> its incarnation's fake pid
        self.next_pid = 100
        self.calls: list[tuple[float, str, str]] = []   # (virtual s since start, call, name)
        self.torn_down = False
        self.discarded = False
        self.write_lock = threading.Lock()
        clock.listeners.append(self._tick)

    def _log(self, call: str, name: str) -> None:
        self.calls.append((round(self.clock.now() - self.t0, 3), call, name))

    # ------------------------------------------------------------------ setup
    def start(self, timeout: float = 30.0, workers_steps: int | None = None, duration: float | None = None,
              step_delay: float = 0.0) -> None:
        (self.run_dir / "fake-events").mkdir(parents=True, exist_ok=True)
        self.up |= {"etcd", *self.nodes()}
        for n in self.nodes():
            self._born(n)
            self.disk(n).mkdir(parents=True, exist_ok=True)
            (self.disk(n) / "store").write_text("0")
        for i, r in self.routes.items():
            self._promoted(i)
        if workers_steps is not None:
            for j in range(self.spec.workers):
                self.start_worker(f"worker-{j}", workers_steps, duration, step_delay)

    def start_worker(self, name: str, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        self.up.add(name)
        self.goal[name] = steps
        self._run_worker(name)

    def teardown(self) -> None:
        """Workers still training get a SIGTERM: they end their run (train-done), as real ones do."""
        for w in self.steps:
            if self._training(w) and w not in self.paused:
                self._done(w)
        self.torn_down = True
        self.up.clear()

    def discard_data(self) -> None:
        self.discarded = True
        shutil.rmtree(self.run_dir / "disks", ignore_errors=True)

    # ------------------------------------------------------------ observation
    def nodes(self) -> list[str]:
        return [n for i in range(self.spec.shards) for n in self.shard_nodes(i)]

    def shard_nodes(self, shard: int) -> list[str]:
        return [f"shard-{shard}/{r}" for r in range(self.spec.copies)]

    def workers(self) -> list[str]:
        return sorted(self.steps, key=lambda w: int(w.split("-")[1]))

    def alive(self, name: str) -> bool:
        return name in self.up

    def routing(self) -> dict[int, Any]:
        return {i: Route(r.epoch, r.primary, list(r.isr)) for i, r in self.routes.items()}

    def status(self, name: str, checksum: bool = False, applied: bool = False, timeout: float = 2.0,
               audit: bool = False) -> Any:
        if name not in self.up or name in self.paused:
            return None
        r = self.routes[shard_of(name)]
        return Status(shard_of(name), "primary" if r.primary == name else "replica", r.epoch, 0, list(r.isr))

    def final_state(self, name: str, under: list[int] | None = None) -> dict | None:
        st = self.status(name)
        if st is None:
            return None
        return {"role": st.role, "epoch": st.epoch, "seq": st.seq, "checksum": 0, "pushes": 0, "applied": {},
                "restored_from": "", "audit": None}

    def checkpoint_scan(self) -> list[dict]:
        return []

    def events_path(self, name: str) -> Path:
        return self.run_dir / "fake-events" / (name.replace("/", "-") + ".jsonl")

    def event_files(self) -> list[Path]:
        own = self.events_path("harness")
        return sorted(p for p in (self.run_dir / "fake-events").glob("*.jsonl") if p != own)

    def disk(self, name: str) -> Path:
        return self.run_dir / "disks" / name.replace("/", "-")

    def workers_running(self) -> bool:
        return any(w in self.up and self.steps[w] < self.goal[w] for w in self.steps)

    # ----------------------------------------------------------------- faults
    def kill(self, name: str) -> None:
        self._log("kill", name)
        self._down(name)

    def stop(self, name: str) -> None:
        self._log("stop", name)
        if self._training(name):
            self._done(name)         # SIGTERM: the worker ends its run and says so
        self._down(name)

    def restart(self, name: str) -> None:
        self._log("restart", name)
        if name in self.up or name in self.dead_on_restart:
            return
        self.up.add(name)
        self._born(name)
        if name in self.goal:
            self._run_worker(name)
        elif name.startswith("shard-"):
            r = self.routes[shard_of(name)]
            if r.primary not in self.up:       # a shard with no live copy: the first one back leads
                r.primary, r.epoch = name, r.epoch + 1
                self._promoted(shard_of(name))

    def pause(self, name: str) -> None:
        self._log("pause", name)
        self.paused.add(name)

    def resume(self, name: str) -> None:
        self._log("resume", name)
        self.paused.discard(name)

    def wipe_data(self, name: str) -> None:
        self._log("wipe", name)
        self.wiped.add(name)
        shutil.rmtree(self.disk(name), ignore_errors=True)

    def checkpoint_writes(self, name: str) -> list[str]:
        return []

    def links(self) -> list[tuple[str, str]] | None:
        return None

    def link_fault(self, kind: str, links: list[tuple[str, str]], params: dict) -> Any:
        raise NotImplementedError("the fake backend has no links")

    # --------------------------------------------------------------- internals
    def _emit(self, name: str, f: str, value: dict, t: float | None = None) -> None:
        ev = {"t": self.clock.now() if t is None else t, "node": name, "type": "info", "f": f, "value": value,
              "pid": self.pid.get(name)}
        with self.write_lock, open(self.events_path(name), "a") as out:
            out.write(json.dumps(ev) + "\n")

    def _born(self, name: str) -> None:
        self.next_pid += 1
        self.pid[name] = self.next_pid

    def _promoted(self, shard: int) -> None:
        r = self.routes[shard]
        self._emit(r.primary, "promote", {"shard": shard, "epoch": r.epoch, "node": r.primary, "seq": 0,
                                          "isr": list(r.isr)})

    def _run_worker(self, w: str) -> None:
        """A (new) run of the worker's whole workload, its first step one `step_s` from now."""
        self.steps[w] = 0
        self.losses[w] = []
        self.next_at[w] = self.clock.now() + self.step_s

    def _training(self, w: str) -> bool:
        return w in self.goal and w in self.up and self.steps[w] < self.goal[w]

    def _done(self, w: str, t: float | None = None) -> None:
        tail = self.losses[w][-50:]
        self._emit(w, "train-done", {"worker": w, "steps": self.steps[w],
                                     "final_loss": sum(tail) / len(tail) if tail else float("nan"),
                                     "target_loss": self.TARGET_LOSS, "device": "fake", "pushed_bytes": 0,
                                     "pulled_bytes": 0}, t)

    def _down(self, name: str) -> None:
        self.up.discard(name)
        if name.startswith("shard-"):
            r = self.routes[shard_of(name)]
            if r.primary == name:          # failover: the next live copy, one epoch up
                nxt = [n for n in self.shard_nodes(shard_of(name)) if n in self.up]
                if nxt:
                    r.primary, r.epoch = nxt[0], r.epoch + 1
                    self._promoted(shard_of(name))

    def _tick(self, now: float) -> None:
        """Workers that run (and are not paused) take the steps that came due; the last one ends the run."""
        for w in list(self.steps):
            while self._training(w) and w not in self.paused and now >= self.next_at[w]:
                self.steps[w] += 1
                t = self.next_at[w]
                self.next_at[w] += self.step_s
                loss = 1.0 / self.steps[w]
                self.losses[w].append(loss)
                self._emit(w, "train-step", {"worker": w, "step": self.steps[w], "loss": loss, "pulled_bytes": 0}, t)
                if self.steps[w] == self.goal[w]:
                    self._done(w, t)
