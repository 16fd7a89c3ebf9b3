"""An in-memory backend on a manual clock: the Backend protocol and nothing else, for unit tests.

It proves the runner needs no processes, ports or psnodes: nodes are names in a set, a failover
is a dictionary update, workers advance one training step every `step_s` of virtual time (and
write their `train-step` events, as real workers do), and every call is logged with the virtual
time it came at. Time moves only when the thread that made the clock sleeps (the runner's drive
loop); other threads (the sampler, a flap) wait for it to move.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.scenario import ClusterSpec


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
    """The Backend protocol in memory (harness/backend.py)."""

    name = "fake"
    proxied = False

    def __init__(self, spec: ClusterSpec, run_dir: Path, clock: ManualClock, step_s: float = 0.1) -> None:
        self.spec, self.run_dir, self.clock, self.step_s = spec, run_dir, clock, step_s
        self.hurry = False
        self.t0 = clock.now()
        self.up: set[str] = set()
        self.paused: set[str] = set()
        self.wiped: set[str] = set()
        self.routes = {i: Route(1, f"shard-{i}/0", self.shard_nodes(i)) for i in range(spec.shards)}
        self.steps: dict[str, int] = {}      # worker -> steps done
        self.goal: dict[str, int] = {}
        self.next_at: dict[str, float] = {}
        self.calls: list[tuple[float, str, str]] = []   # (virtual s since start, call, name)
        self.torn_down = False
        clock.listeners.append(self._tick)

    def _log(self, call: str, name: str) -> None:
        self.calls.append((round(self.clock.now() - self.t0, 3), call, name))

    # ------------------------------------------------------------------ setup
    def start(self, timeout: float = 30.0, workers_steps: int | None = None, duration: float | None = None,
              step_delay: float = 0.0) -> None:
        (self.run_dir / "events").mkdir(parents=True, exist_ok=True)
        self.up |= {"etcd", *self.nodes()}
        if workers_steps is not None:
            for j in range(self.spec.workers):
                self.start_worker(f"worker-{j}", workers_steps, duration, step_delay)

    def start_worker(self, name: str, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        self.up.add(name)
        self.steps.setdefault(name, 0)
        self.goal[name] = steps
        self.next_at[name] = self.clock.now() + self.step_s

    def teardown(self) -> None:
        self.torn_down = True
        self.up.clear()

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

    def final_state(self, name: str) -> dict | None:
        st = self.status(name)
        if st is None:
            return None
        return {"role": st.role, "epoch": st.epoch, "seq": st.seq, "checksum": 0, "pushes": 0, "applied": {},
                "restored_from": "", "audit": None}

    def checkpoint_scan(self) -> list[dict]:
        return []

    def events_path(self, name: str) -> Path:
        return self.run_dir / "events" / (name.replace("/", "-") + ".jsonl")

    def workers_running(self) -> bool:
        return any(w in self.up and self.steps[w] < self.goal[w] for w in self.steps)

    # ----------------------------------------------------------------- faults
    def kill(self, name: str) -> None:
        self._log("kill", name)
        self._down(name)

    def stop(self, name: str) -> None:
        self._log("stop", name)
        self._down(name)

    def restart(self, name: str) -> None:
        self._log("restart", name)
        self.up.add(name)
        if name in self.next_at:
            self.next_at[name] = self.clock.now() + self.step_s

    def pause(self, name: str) -> None:
        self._log("pause", name)
        self.paused.add(name)

    def resume(self, name: str) -> None:
        self._log("resume", name)
        self.paused.discard(name)

    def wipe_data(self, name: str) -> None:
        self._log("wipe", name)
        self.wiped.add(name)

    def checkpoint_writes(self, name: str) -> list[str]:
        return []

    def links(self) -> list[tuple[str, str]] | None:
        return None

    def link_fault(self, kind: str, links: list[tuple[str, str]], params: dict) -> Any:
        raise NotImplementedError("the fake backend has no links")

    # --------------------------------------------------------------- internals
    def _down(self, name: str) -> None:
        self.up.discard(name)
        if name.startswith("shard-"):
            r = self.routes[shard_of(name)]
            if r.primary == name:          # failover: the next live copy, one epoch up
                nxt = [n for n in self.shard_nodes(shard_of(name)) if n in self.up]
                if nxt:
                    r.primary, r.epoch = nxt[0], r.epoch + 1

    def _tick(self, now: float) -> None:
        """Workers that run (and are not paused) take the steps that came due."""
        for w in self.steps:
            while w in self.up and w not in self.paused and self.steps[w] < self.goal[w] and now >= self.next_at[w]:
                self.steps[w] += 1
                self.next_at[w] += self.step_s
                ev = {"t": self.next_at[w] - self.step_s, "node": w, "type": "info", "f": "train-step",
                      "value": {"worker": w, "step": self.steps[w], "loss": 1.0 / self.steps[w], "pulled_bytes": 0}}
                with open(self.events_path(w), "a") as f:
                    f.write(json.dumps(ev) + "\n")
