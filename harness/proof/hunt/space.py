"""The space of fault schedules a hunt draws from, and how one schedule is drawn.

A schedule is a short list of explicit faults (`pschaos.harness.run.scenario.Fault`: kind, target, time,
duration, params), the same objects a scenario file holds, so a schedule that fails is written
back as a scenario without translation. The menu of targets is Jepsen's vocabulary applied to a
parameter server: crash, stop or freeze a primary, a replica or etcd; cut a primary from its
replicas, from one replica only, or from etcd only; cut the workers from a primary; slow or
lossy links between workers and a shard or between a primary and its replicas; and Jepsen's
partition shapes over a shard's copies and etcd (random halves, a bridge, a majorities ring);
kills of a worker (restarted by the heal: a new incarnation) and kills timed against protocol
moments (mid-checkpoint, a primary mid-catch-up of a restarted replica, a successor
mid-promotion; harness/faults/moments.py). Two faults may
overlap in time (a pause during a partition), but never more process faults at once on one
shard than it can lose and keep its data (copies - 1; so none on a 1-copy shard), nor two on
etcd: losing every copy is a known, accounted loss (the all-copies-lost scenario), not a bug
to hunt.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from pschaos.harness.faults import LINK_KINDS
from pschaos.harness.faults.moments import MOMENTS       # a kill's `during`, drawn with its target
from pschaos.harness.run.nemesis import DEFAULT_PARAMS
from pschaos.harness.run.scenario import At, Fault

PROCESS_MENU = ("kill", "stop", "pause", "restart")
DEFAULT_KINDS = ("kill", "pause", "stop", "partition", "link-down", "loss", "latency")
HUNT_PARAMS: dict[str, dict[str, Any]] = {**DEFAULT_PARAMS, "loss": {"percent": 30.0},
                                          "latency": {"latency_ms": 150, "jitter_ms": 50}}


@dataclass(frozen=True)
class FaultSpace:
    """What a hunt may break (`kinds`), on a cluster of `shards` x `copies` with `workers`, with
    fault starts in [start_s, stop_s] of the run and durations in [min_duration_s, max_duration_s]."""

    shards: int
    copies: int
    workers: int
    kinds: tuple[str, ...] = DEFAULT_KINDS
    start_s: float = 2.0
    stop_s: float = 14.0
    max_faults: int = 3
    min_duration_s: float = 0.3
    max_duration_s: float = 3.0
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    moments: tuple[str, ...] = MOMENTS       # what a kill may be timed to (none: plain kills only)

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in PROCESS_MENU + LINK_KINDS]
        if bad:
            raise ValueError(f"kinds: {bad} cannot be hunted; choose from {', '.join(PROCESS_MENU + LINK_KINDS)}")
        if not self.kinds:
            raise ValueError("kinds: give at least one fault kind to hunt with")
        if not 0 <= self.start_s < self.stop_s:
            raise ValueError(f"start_s={self.start_s}, stop_s={self.stop_s}: need 0 <= start_s < stop_s")
        if not 0 < self.min_duration_s <= self.max_duration_s:
            raise ValueError(f"durations {self.min_duration_s}..{self.max_duration_s}: need 0 < min <= max")
        if self.max_faults < 1:
            raise ValueError(f"max_faults={self.max_faults}: at least 1")
        if set(self.moments) - set(MOMENTS):
            raise ValueError(f"moments: {sorted(set(self.moments) - set(MOMENTS))} are not moments; "
                             f"choose from {', '.join(MOMENTS)}")

    # ------------------------------------------------------------ targets
    def targets(self, kind: str) -> list[str]:
        """Every target this kind may hit on this cluster (selectors, resolved at fault time)."""
        shards = range(self.shards)
        if kind in PROCESS_MENU:
            out = [f"{role}(shard={s})" for s in shards for role in ("primary", "replica")
                   if role == "primary" or self.copies > 1]
            out += ["worker(any)"] if self.workers and kind in ("kill", "restart") else []
            return out + ["etcd"] if kind in ("pause", "kill", "stop") else out
        if kind in ("partition", "link-down"):
            out = []
            for s in shards:
                if self.copies > 1:
                    out += [f"primary(shard={s})<->replicas(shard={s})", f"primary(shard={s})<->replica(shard={s})"]
                out += [f"primary(shard={s})<->etcd", f"workers->primary(shard={s})"]
                if kind == "partition":          # Jepsen's shapes over the shard's copies and etcd
                    out += [f"{shape}(shard={s})" for shape in ("halves", "bridge", "majorities-ring")]
            return out
        out = [f"workers->shard({s})" for s in shards]
        return out + ([f"primary(shard={s})->replicas(shard={s})" for s in shards] if self.copies > 1 else [])

    def params_for(self, kind: str) -> dict[str, Any]:
        return dict(self.params.get(kind, HUNT_PARAMS.get(kind, {})))

    # ------------------------------------------------------------ drawing
    def draw(self, rng: random.Random) -> list[Fault]:
        """One schedule: 1..max_faults faults, in time order, within the window and the rule on
        concurrent process faults (module docstring)."""
        n = rng.randint(1, self.max_faults)
        out: list[Fault] = []
        for _ in range(n * 4):                      # a few tries per wanted fault; fewer is fine
            if len(out) == n:
                break
            kind = rng.choice(self.kinds)
            t = round(rng.uniform(self.start_s, self.stop_s), 2)
            dur = round(rng.uniform(self.min_duration_s, self.max_duration_s), 2)
            target, params = rng.choice(self.targets(kind)), self.params_for(kind)
            if kind == "kill" and self.moments and target.startswith(("primary(", "replica(")) \
                    and "during" not in params:
                during = rng.choice(("",) + self.moments)   # a plain kill as often as each moment
                if during == "catch-up" and self.copies < 2:
                    during = ""
                if during:
                    params = {**params, "during": during}
                    target = target.replace("primary(", "replica(") if during == "catch-up" and self.copies > 1 \
                        else target
            f = make_fault(kind, target, t, dur, params)
            if self.admits(out + [f]):
                out.append(f)
        return sorted(out, key=lambda f: f.at.time)

    def admits(self, faults: list[Fault], slack_s: float = 0.3) -> bool:
        """Per shard at most copies - 1 process faults open at once, and one on etcd: faults are
        closed intervals widened by `slack_s` (the runner injects before it heals in one pass,
        and a healed copy is down until it started again), a restart counts for `slack_s`."""
        spans: dict[str, list[tuple[float, float]]] = {}
        for f in faults:
            if f.kind not in PROCESS_MENU:
                continue
            m = re.search(r"shard=(\d+)", f.target)
            key = "etcd" if f.target == "etcd" else (m.group(1) if m else f.target)
            span = (f.at.time, f.at.time + (f.duration_s or 0.0) + slack_s)
            # a timed kill takes two copies down: a primary and its successor, or a replica and its primary
            hits = 2 if (f.params or {}).get("during") in ("catch-up", "promotion") else 1
            spans.setdefault(key, []).extend([span] * hits)
        for key, ss in spans.items():
            limit = 1 if key in ("etcd", "worker(any)") else max(0, self.copies - 1)
            for t, _ in ss:
                if sum(1 for a, b in ss if a <= t <= b) > limit:
                    return False
        return True


def make_fault(kind: str, target: str, t: float, duration: float | None, params: dict[str, Any]) -> Fault:
    """A validated Fault (the scenario model's own checks: kind, target shape, params)."""
    return Fault(at=At(time=t), kind=kind, target=target, params=params,
                 duration_s=None if kind == "restart" else duration)


__all__ = ["DEFAULT_KINDS", "FaultSpace", "make_fault"]
