"""When a replica suspects its primary: an accrual failure detector over the replication stream.

A replica hears its primary by Replicate calls: entries while pushes flow, a heartbeat every
`heartbeat_s` otherwise. A fixed silence timeout is either too eager on a slow or jittery network
or, raised, too slow on a fast one. The phi accrual detector (Hayashibara et al., "The phi
accrual failure detector", SRDS 2004; as Akka and Cassandra use it) learns how long the gaps
between arrivals are and turns the current silence into a suspicion level

    phi(t) = -log10(P(a gap longer than t)),

the gap modelled as a normal distribution of the last `window` inter-arrival times (mean mu,
standard deviation sigma, never under `min_std_s`) shifted by an acceptable pause (Akka's
`acceptable-heartbeat-pause`: a pause that short is no evidence at all). phi = 8 means one such
gap in 10^8 by the stream's own record.

Why normal, not exponential (Cassandra's choice): Cassandra's gossip arrives at random moments,
for which the memoryless exponential (phi = t / mu * log10(e)) fits; our stream is periodic with
jitter (heartbeats every `heartbeat_s`, entries back to back under load), so a gap's tail is
where jitter puts it, and the normal model's sigma is what widens the wait on a jittery network
(a latency fault with +/- jitter, a loaded machine). The exponential would track the mean alone:
a stream of 5 ms entries would be suspected after about 100 ms whatever its jitter.

Three bounds keep it safe and sane:

- the floor (`floor_s`): a replica never suspects before this much silence, whatever phi says.
  It is the bound the primary's async follower lease assumes (pschaos.psnodes.core.ack.followers_fresh):
  a primary acks only while every ISR peer accepted one of its calls less than
  `floor_s - follower_margin_s` ago, so no peer can have suspected it, let alone been promoted.
  Every detector here obeys its floor by construction (`Detector.suspects`), and the config
  passes the same number to the lease (`ClusterConfig.suspect_floor_s`).
- the ceiling (`ceiling_s`: `suspect_s`, the old fixed timeout; see `ceiling`): a replica never
  takes longer than this to suspect, whatever the window holds. Its probe then runs before it
  stands (at least `probe_s`, one TCP retransmission and a margin), so a primary that does not
  answer is replaced by suspect_s + probe_s at the latest.
- the first estimate (`first_s`, the heartbeat period): the window starts with two samples,
  first_s +/- first_s/4 (as Akka's `first-heartbeat-estimate`), so a replica that has heard
  little suspects after about the heartbeat period plus the pause plus a few sigmas. A new
  primary's stream starts from it again (`restart`): the old primary's links taught nothing
  about the new one's.

A gap longer than the ceiling does not enter the window (as Cassandra's ArrivalWindow drops
intervals above its maximum): such a gap was already excused, by the probe (the primary
answered) or by a local pause, and learning it would make every later suspicion slower. One 2 s
gap in a 50 ms stream used to raise the silence needed from 0.16 s to 0.88 s for the next 200
arrivals (10 s). Gaps up to the ceiling are learned even when they were suspected: dropping
every gap longer than the current delay (tried first) meant a step from 50 ms to 200 ms gaps (a
latency fault) was never learned, and every gap after the step was a suspicion (80 of 80).

Everything here is pure: times are numbers passed in (the shell's monotonic clock, or the
simulator's virtual one), so the SimPy twin runs exactly this code.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from pschaos.psnodes.core import lease

DETECTORS = ("fixed", "phi")
# a replica whose own elector woke this much later than it asked was itself stalled (a loaded
# machine, a GC or GIL pause): the silence it measured overlaps its own, and is no evidence
LOCAL_PAUSE_S = 0.1


@dataclass(frozen=True)
class PhiParams:
    """The detector's settings (config fields `phi_*`; see ClusterConfig)."""

    threshold: float = 8.0     # phi at which a replica suspects: one gap in 10^threshold
    floor_s: float = 0.15      # never suspect before this much silence (the follower lease's bound)
    pause_s: float = 0.05      # acceptable pause: added to the mean, no evidence of death
    min_std_s: float = 0.01    # sigma never below this: a steady stream must not make phi a cliff
    window: int = 200          # inter-arrival samples kept
    first_s: float = 0.05      # first estimate of the gap (the heartbeat period)
    ceiling_s: float = math.inf  # never take longer than this to suspect (`ceiling`: suspect_s)

    def z(self) -> float:
        """How many sigmas past mean + pause phi reaches the threshold: P(N(0,1) > z) =
        10^-threshold, found by bisection on `phi` itself, so the delay and phi agree exactly."""
        return z_for(self.threshold)


def ceiling(suspect_s: float, floor_s: float) -> float:
    """The most silence phi ever takes to suspect: `suspect_s` (the fixed detector's timeout),
    never under the floor. A long gap learned from a slow stream can raise phi's own delay past
    it; the probe, not a longer wait, is what tells a slow primary from a dead one."""
    return max(floor_s, suspect_s)


def z_for(threshold: float) -> float:
    """The z with phi(z, 0, 1) = threshold (bisection to a float's precision; phi is increasing)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if phi(mid, 0.0, 1.0) >= threshold:
            hi = mid
        else:
            lo = mid
    return hi


class Window:
    """The last `size` inter-arrival times, with their sum and sum of squares kept exactly enough:
    both are recomputed from the samples once every `size` additions, so rounding never drifts."""

    def __init__(self, size: int, first_s: float) -> None:
        self.size = size
        self.samples: deque[float] = deque(maxlen=size)
        self.total = 0.0
        self.squares = 0.0
        self._since_exact = 0
        for s in (first_s - first_s / 4, first_s + first_s / 4):
            self.add(s)

    def add(self, gap: float) -> None:
        if len(self.samples) == self.size:
            old = self.samples[0]
            self.total -= old
            self.squares -= old * old
        self.samples.append(gap)
        self.total += gap
        self.squares += gap * gap
        self._since_exact += 1
        if self._since_exact >= self.size:
            self.total = math.fsum(self.samples)
            self.squares = math.fsum(s * s for s in self.samples)
            self._since_exact = 0

    def mean(self) -> float:
        return self.total / len(self.samples)

    def std(self) -> float:
        """Population standard deviation (never negative from rounding)."""
        m = self.mean()
        return math.sqrt(max(0.0, self.squares / len(self.samples) - m * m))


def phi(elapsed: float, mean: float, std: float) -> float:
    """-log10 of the chance that a gap from N(mean, std) lasts longer than `elapsed` (inf once the
    chance is below what a float holds)."""
    p = 0.5 * math.erfc((elapsed - mean) / (std * math.sqrt(2.0)))
    return math.inf if p <= 0.0 else -math.log10(p)


class Detector:
    """The interface both shells use: arrivals in (`heard`), a new stream (`restart`), and whether
    a silence since `last_heard` is suspicious. `delay()` is the silence it takes right now."""

    kind = ""

    def __init__(self, floor_s: float) -> None:
        self.floor_s = floor_s

    def heard(self, now: float) -> None:
        """A call from our primary arrived at `now`."""

    def restart(self) -> None:
        """The stream changed (a new primary or epoch): the next arrival starts a new gap."""

    def take_max_gap(self) -> float:
        """The longest gap since the last call (0: this detector does not keep gaps)."""
        return 0.0

    def delay(self) -> float:
        """The silence this detector's own model takes to suspect (before the floor)."""
        raise NotImplementedError

    def silence_s(self) -> float:
        """The silence it takes to suspect now: the model's delay, never under the floor."""
        return max(self.floor_s, self.delay())

    def suspects(self, now: float, last_heard: float) -> bool:
        """Silent since `last_heard` long enough: never before the floor (the follower lease)."""
        return lease.suspects(now, last_heard, self.silence_s())

    def wait(self, now: float, last_heard: float, tick: float) -> float:
        """How long the elector may sleep before it should look again: until the silence would be
        suspicious, at most `tick`, at least a millisecond."""
        return min(tick, max(0.001, last_heard + self.silence_s() - now))

    def stats(self) -> dict:
        """What the replica reports of its detector (its `suspect` and `detector` events)."""
        return {"detector": self.kind, "silence_ms": round(self.silence_s() * 1000, 1)}


class FixedDetector(Detector):
    """Suspect after a fixed silence (the old rule, kept for comparison): floor = the timeout."""

    kind = "fixed"

    def delay(self) -> float:
        return self.floor_s


class PhiDetector(Detector):
    """Phi accrual over the gaps between arrivals (see the module docstring)."""

    kind = "phi"

    def __init__(self, params: PhiParams) -> None:
        super().__init__(params.floor_s)
        self.p = params
        self._z = params.z()
        self.window = Window(params.window, params.first_s)
        self.last: float | None = None
        self.max_gap = 0.0            # the longest gap since the last take_max_gap() (for reports)
        self.dropped = 0              # gaps left out of the window: longer than the silence to suspect

    def heard(self, now: float) -> None:
        if self.last is not None and now >= self.last:
            gap = now - self.last
            if gap > self.p.ceiling_s:
                self.dropped += 1     # already excused (probe, local pause): it teaches nothing
            else:
                self.window.add(gap)
            self.max_gap = max(self.max_gap, gap)
        self.last = now

    def restart(self) -> None:
        """A new primary (or epoch): its stream starts from the first estimate again."""
        self.last = None
        self.window = Window(self.p.window, self.p.first_s)

    def silence_s(self) -> float:
        """The model's delay, never under the floor nor over the ceiling."""
        return min(max(self.floor_s, self.p.ceiling_s), max(self.floor_s, self.delay()))

    def sigma(self) -> float:
        return max(self.p.min_std_s, self.window.std())

    def phi(self, elapsed: float) -> float:
        """The suspicion level after `elapsed` seconds of silence."""
        return phi(elapsed, self.window.mean() + self.p.pause_s, self.sigma())

    def delay(self) -> float:
        """The silence at which phi reaches the threshold: mean + pause + z sigma (the floor and
        the ceiling are applied by `silence_s`)."""
        return self.window.mean() + self.p.pause_s + self._z * self.sigma()

    def stats(self) -> dict:
        return {**super().stats(), "mean_ms": round(self.window.mean() * 1000, 2),
                "std_ms": round(self.window.std() * 1000, 2), "samples": len(self.window.samples),
                "max_gap_ms": round(self.max_gap * 1000, 1), "dropped": self.dropped}

    def take_max_gap(self) -> float:
        """The longest gap since the last call (the periodic `detector` event reports it)."""
        gap, self.max_gap = self.max_gap, 0.0
        return gap


def paused_locally(slept_s: float, asked_s: float, allowance_s: float = LOCAL_PAUSE_S) -> bool:
    """The replica itself stood still: its elector slept `slept_s` when it asked for `asked_s`
    (the primary's calls may sit unread in this very process; `after_local_pause` says what
    follows)."""
    return slept_s - asked_s > allowance_s


def after_local_pause(last_heard: float, now: float, late_s: float, credited: float | None) -> float | None:
    """The `last_heard` to keep after the replica itself stood still `late_s` seconds longer than
    it asked: the silence it measured overlaps its own stall by that much, so its start moves
    forward by `late_s` (never past `now`). Once per silence: `credited` is the `last_heard` an
    earlier credit produced; while nothing was heard since (`last_heard` still at or before it),
    None: no further credit. Moving last_heard to `now` on every late wake-up (the earlier rule)
    let a replica on an overloaded host, late on every wake-up, never suspect a dead primary.
    Moving the start of a silence later only ever delays a suspicion, so the follower lease is
    untouched."""
    if credited is not None and last_heard <= credited:
        return None
    return max(last_heard, min(now, last_heard + late_s))


def may_probe(kind: str, probe_s: float, silent_s: float, ceiling_s: float, probed: bool,
              answered: bool = False, hold_s: float = 0.0) -> bool:
    """Whether a suspecting replica asks its primary directly before it stands (SWIM's direct
    probe): only the phi detector does, only with `probe_s` > 0, and

    - while the silence is under the ceiling, or no probe was made in this silence yet
      (`probed`): the first probe of a silence always runs, also for a replica that first looks
      past the ceiling (on a loaded machine its own late wake-up plus an etcd read carried the
      silence over it, and without a probe it replaced a live primary: kill-primary at load 70,
      6 spurious failovers in 3 seeds);
    - and, once the primary answered a probe in this silence (`answered`), again every heartbeat
      until the silence reaches `hold_s` (`probe_hold_s`): a primary that answers is alive and
      reachable, and replacing it is a spurious failover. Its stream may be stalled by TCP
      retransmissions on a lossy link (the minimum RTO is 200 ms, and it doubles): with the old
      rule, a stall past suspect_s after one answered probe made a replica stand
      (loss-5-primary-replica: 2 spurious failovers at seed 1, loss-20 on the twin: 5).
      `hold_s` bounds it: a primary that answers but has not reached us for that long (a one-way
      cut, a stuck replication thread) is replaced.

    A probe only ever delays a suspicion: the floor, and so the follower lease, is untouched."""
    if kind != "phi" or probe_s <= 0:
        return False
    return silent_s < ceiling_s or not probed or (answered and silent_s < hold_s)


ANSWERED_MISSES = 2   # failed probe rounds in a row it takes to stand once the primary answered


def holds_after_miss(answered: bool, misses: int) -> bool:
    """Whether a probe round that got no answer still holds the suspicion back: only when the
    primary already answered in this silence, and only for fewer than `ANSWERED_MISSES` failed
    rounds in a row. A primary that answered is alive; on a lossy link all of a round's paths
    can fail at once (each needs its probe and its answer through, with one retransmission in
    the wait), and one such round made a replica stand against a primary it had just heard from
    (loss-20-primary-replica on the twin, seed 1: a spurious failover after 1.06 s of held
    silence). A primary that stopped answering costs one more round; one never heard in the
    silence (frozen, cut off, killed) is replaced after its first."""
    return answered and misses < ANSWERED_MISSES


def probe_wait(probe_s: float, silent_s: float, ceiling_s: float) -> float:
    """How long a probe waits for the primary's answer: until the silence reaches the ceiling,
    never less than `probe_s`. A killed primary refuses the connection at once, so it is
    replaced at the floor; one that does not answer (frozen, cut off) is given the fixed
    detector's timeout, or `probe_s` past the moment it was first suspected: one lost packet of
    the probe or of its answer is retransmitted after 200 ms, and a shorter wait read that as a
    dead primary on a lossy link."""
    return max(probe_s, ceiling_s - silent_s)


def late_round(answered: bool, wait_s: float, took_s: float, heard: float, excused: float | None,
               silent_s: float, hold_s: float, allowance_s: float = LOCAL_PAUSE_S) -> bool:
    """Whether a probe round without an answer says nothing of the primary: it took longer than
    its wait by more than a local pause, so this replica's own process did not run to read the
    answer in time (a starved host, as in `paused_locally`). Such a round is no miss; the replica
    holds for a heartbeat and probes again. At most once per `last_heard` (`excused`: the one last
    excused so; it also moves on a local-pause credit or a lost election, a few times a silence at
    most) and only while the silence is under `hold_s` (`probe_hold_s`), so a replica late on
    every round still replaces a dead primary, at most `hold_s` into the silence."""
    return not answered and took_s - wait_s > allowance_s and excused != heard and silent_s < hold_s


def probe_record(answered: bool, wait_s: float, took_s: float, misses: int) -> dict:
    """One probe round as the `suspect` event tells it, so that a failover can be explained from
    the history alone: a miss that took the whole wait is a primary that did not answer in time
    (frozen, cut off, or starved of CPU), a quick one a refused connection (killed)."""
    return {"ran": True, "answered": answered, "wait_ms": round(wait_s * 1000, 1),
            "took_ms": round(took_s * 1000, 1), "misses": misses}


def probe_told(record: dict, ended: float, now: float) -> dict:
    """The probe record as the `suspect` event at `now` carries it: with `ended_ms`, how long
    before the event the round ended (an etcd call comes between), so the round's window can be
    placed in the history (pschaos.harness.checkers.stalls)."""
    return {**record, "ended_ms": round((now - ended) * 1000, 1)} if record.get("ran") else record


def pause_record(shard: int, epoch: int, role: str, late_s: float, credit_s: float, cpu_s: float | None,
                 ago_s: float) -> dict:
    """A `local-pause` event's fields: the lateness, the credit a replica took, the CPU time the
    process used while its elector slept (None where not measured: the twin's copies use none)
    and how long before the event the elector woke (`woke_ms`)."""
    return {"shard": shard, "epoch": epoch, "role": role, "late_ms": round(late_s * 1000, 1),
            "credited_ms": round(credit_s * 1000, 1),
            "cpu_ms": None if cpu_s is None else round(cpu_s * 1000, 1), "woke_ms": round(ago_s * 1000, 1)}


def probe_clears(role: str, epoch: int, primary_epoch: int) -> bool:
    """The probe's answer holds the suspicion back: the primary says it is primary of the very
    epoch we follow (anything else, or no answer in time, lets the replica stand)."""
    return role == "primary" and epoch == primary_epoch


def make(kind: str, suspect_s: float, params: PhiParams) -> Detector:
    """The detector a config names: `fixed` (suspect after `suspect_s`) or `phi`."""
    if kind == "fixed":
        return FixedDetector(suspect_s)
    if kind == "phi":
        return PhiDetector(params)
    raise ValueError(f"detector={kind!r} is unknown; use one of {', '.join(DETECTORS)}")


def probe_round(missed: tuple[float, int], answered_at: float | None, heard: float,
                answered: bool) -> tuple[tuple[float, int], bool, int]:
    """One probe round's bookkeeping, the same in both shells: `missed` is (the silence, keyed by
    its last_heard, failed rounds in a row in it), `answered_at` the silence in which the primary
    last answered. Returns the new `missed`, whether the suspicion is held back, and the failed
    rounds in a row (0 after an answer). A new silence starts the count again."""
    if answered:
        return (heard, 0), True, 0
    misses = missed[1] + 1 if missed[0] == heard else 1
    return (heard, misses), holds_after_miss(answered_at == heard, misses), misses

