"""The twin's network: delivery of one message on a directed link, in virtual time.

Each link A->B is what the process backend makes a Toxiproxy proxy of: A dials it, its requests
travel *upstream* (A to B) and B's replies come back *downstream* on the same connection. So
`deliver(src, dst, n, deadline)` sends a request on link src->dst, and `reply=True` sends a reply
from src back to dst on link dst->src, downstream - the stream a toxic's `stream` param picks.

A fault takes the kind and params the scenarios use; they are checked by the netfaults class of
that kind itself, so names, defaults and limits cannot drift from the real backend. Only kinds in
`SUPPORTED` are modelled; anything else is refused by name (fail closed, never skipped).

Decisions (each the real stack's behaviour, coarsened to one message):
- loss / partition act on both directions of the link (nftables drops to and from the proxy
  port). A lost message is retransmitted by the transport (TCP) after an RTO that doubles up to
  `rto_max_s`, not by the caller: the caller sees added delay, or DEADLINE_EXCEEDED at its
  deadline (UNAVAILABLE once `retries_max` retransmissions were lost, as TCP gives up). Loss is
  drawn per message attempt, not per packet. A healed partition lets the next retransmission
  through, as TCP does.
- link-down disables the proxy: connections are refused, so the caller sees UNAVAILABLE after
  `refused_s` (gRPC fails fast without wait_for_ready), not a timeout.
- timeout stalls the message; with timeout_ms > 0 the connection closes timeout_ms after the
  message started waiting (UNAVAILABLE), else it waits to its deadline. reset_peer resets
  (UNAVAILABLE) timeout_ms after the message arrives at the proxy. Both count from the message.
- limit_data closes a connection once `bytes` passed on it (per link and stream): the message
  that would cross the limit fails UNAVAILABLE and the next one rides a fresh connection.
- latency adds latency_ms plus a uniform draw in [-jitter_ms, +jitter_ms] (floored at 0);
  bandwidth sends rate_kbps * 1000 bytes/s, queued FIFO per link and stream (rate 0: no cap, as
  in Toxiproxy); slicer adds delay_us per slice of average_size bytes (variation leaves the mean
  count unchanged, so it is not drawn).
- toxicity < 1 is drawn once per link and stream when the fault is added: Toxiproxy rolls it
  per connection, and gRPC keeps one connection per link.
- `keepalive_s` (calibration, default None): when set, a stalled message fails UNAVAILABLE that
  long after it stalled, as gRPC keepalive closes a dead transport; None waits to the deadline.
A message the timeout toxic holds with no close, deadline or keepalive never completes, as a real call.
All randomness comes from the one generator given, in the order messages are sent.
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, fields
from typing import Any, Generator, Iterable, Mapping

import simpy

from pschaos.netfaults.errors import NetFaultError
from pschaos.netfaults.faults import LINK_FAULTS

from pschaos.harness.errors import HarnessError

UNAVAILABLE = "UNAVAILABLE"
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
BOTH_WAYS = ("loss", "partition", "link-down")      # act on the link, not on one stream
SUPPORTED: dict[str, str] = {
    "latency": "adds latency_ms +/- jitter_ms per message",
    "bandwidth": "rate_kbps * 1000 bytes/s, FIFO per link and stream",
    "slicer": "delay_us per average_size-byte slice",
    "limit_data": "connection closes after `bytes`: UNAVAILABLE",
    "timeout": "stall; UNAVAILABLE after timeout_ms if > 0, else DEADLINE_EXCEEDED",
    "reset_peer": "UNAVAILABLE timeout_ms after the message",
    "loss": "percent of attempts lost, retransmitted after an RTO",
    "partition": "every attempt lost until healed",
    "link-down": "connection refused: UNAVAILABLE after refused_s",
}
Link = tuple[str, str]
_End = tuple[float, "str | None", "str | None"]      # (when, gRPC status or None: retry, cause)


class SimNetworkError(HarnessError):
    """A fault the simulated network cannot take: unknown kind, bad params, unknown handle."""


@dataclass(frozen=True)
class NetCalibration:
    """Timing of a clean link, from `pschaos sim calibrate`; other calibration keys are ignored."""

    fixed_s: float = 0.0005          # one-way cost of a small message (gRPC ~1 ms per round trip)
    per_byte_s: float = 2e-9         # serialization and copy per byte
    rto_s: float = 0.2               # Linux's minimum TCP retransmission timeout
    rto_max_s: float = 60.0
    retries_max: int = 15            # Linux tcp_retries2: then the connection errors (UNAVAILABLE)
    refused_s: float = 0.0005        # time to a refused connect
    probe_refused_s: float = 0.0     # a replica's probe of a dead primary: its CPU beyond the wire (probe.py)
    probe_refused_samples: tuple[float, ...] = ()   # its measured spread: a probe draws one of them
    keepalive_s: float | None = None

    @classmethod
    def of(cls, cal: "NetCalibration | Mapping[str, Any] | None") -> "NetCalibration":
        if cal is None or isinstance(cal, NetCalibration):
            return cal or cls()
        kw = {f.name: cal[f.name] for f in fields(cls) if f.name in cal}
        if "probe_refused_samples" in kw:
            kw["probe_refused_samples"] = tuple(float(x) for x in kw["probe_refused_samples"])
        return cls(**kw)

    def probe_refused(self, rng: random.Random) -> float:
        """What one probe of a dead primary costs beyond the wire (`rng`: SimNetwork.probe_rng): one of the measured samples
        (the two replicas' probes in a traced failover took 2.4 and 2.9 ms, 3.1 and 6.4, 4.2 and
        7.9: the spread moves one candidate's stand past the other's, and the election's poll
        waits for it), or the median where none were kept (0 in an older calibration file)."""
        return rng.choice(self.probe_refused_samples) if self.probe_refused_samples else self.probe_refused_s


@dataclass(frozen=True)
class Delivery:
    """The outcome a caller sees: delivered (`ok`) or the gRPC status it would get, after `delay` s."""

    ok: bool
    delay: float
    error: str | None = None         # UNAVAILABLE | DEADLINE_EXCEEDED
    cause: str | None = None         # the fault kind behind the error or the stall, for traces


@dataclass
class _Fault:
    handle: int
    kind: str
    links: frozenset[Link]
    params: dict[str, Any]
    streams: tuple[str, ...]
    off: frozenset[tuple[Link, str]]     # (link, stream) the toxicity draw spared


def _first(end: _End) -> tuple[float, bool]:
    """Earliest end; on a tie the give-up wins: a retransmission sent at the deadline is already late."""
    return end[0], end[1] is None


def _link(x: str | Link) -> Link:
    if isinstance(x, tuple):
        return x
    a, sep, b = x.partition("->")
    if not sep or not a.strip() or not b.strip():
        raise SimNetworkError(f"link {x!r} must be 'A->B', e.g. 'worker-0->shard-0/0'")
    return a.strip(), b.strip()


class SimNetwork:
    """Directed links with their faults; `deliver` is a SimPy event yielding a `Delivery`."""

    def __init__(self, env: simpy.Environment, rng: random.Random,
                 calibration: NetCalibration | Mapping[str, Any] | None = None) -> None:
        self.env, self.rng, self.cal = env, rng, NetCalibration.of(calibration)
        # the probes' costs (NetCalibration.probe_refused) come from a stream of their own, seeded
        # from the run's without drawing from it: a tuple of ints hashes alike in every process
        # (its state's words only: None hashes by address before Python 3.12)
        self._base = hash(rng.getstate()[1])
        self.probe_rng = random.Random(self._base)
        self.faults: dict[int, _Fault] = {}
        self._ids = itertools.count(1)
        self._busy: dict[tuple[int, Link, str], float] = {}     # bandwidth queue: free again at
        self._sent: dict[tuple[int, Link, str], int] = {}       # limit_data: bytes on the connection

    def stream(self, name: str) -> random.Random:
        """A random stream of its own for `name` (a channel's reconnect pauses), from the run's seed
        without drawing from the run's stream: adding one shifts no other draw."""
        return random.Random(f"{self._base}:{name}")

    def refuses(self, src: str, dst: str) -> bool:
        """Whether a connection src->dst is refused now (a link-down: the proxy disabled)."""
        return any(f.kind == "link-down" for f in self.active((src, dst), "upstream"))

    def blocks(self, src: str, dst: str) -> bool:
        """Whether a connection attempt src->dst fails now: refused, or every packet dropped (a
        partition): a channel's reconnect attempt then fails (reconnect.py)."""
        return any(f.kind in ("link-down", "partition") for f in self.active((src, dst), "upstream"))

    def add_fault(self, kind: str, links: Iterable[str | Link], params: Mapping[str, Any] | None = None) -> int:
        """Start a fault on links; returns the handle for `remove_fault`. Refuses what it cannot model."""
        if kind not in SUPPORTED:
            why = "is not a network fault" if kind not in LINK_FAULTS else "is not modelled by the sim network"
            raise SimNetworkError(f"fault kind {kind!r} {why}; the sim network supports: {', '.join(SUPPORTED)}")
        ls = sorted({_link(x) for x in links})
        try:      # the real class checks the params: same names, defaults and limits (it needs no ctx to check)
            p = dict(LINK_FAULTS[kind](None, ls, dict(params or {})).params)  # type: ignore[arg-type]
        except NetFaultError as e:
            raise SimNetworkError(f"sim network: {e}") from None
        if kind == "slicer" and p["average_size"] <= 0:
            raise SimNetworkError("slicer: params.average_size must be > 0")
        streams = ("upstream", "downstream") if kind in BOTH_WAYS or p.get("stream") == "both" else (p["stream"],)
        tox = p.get("toxicity", 1.0)
        off = frozenset((ln, s) for ln in ls for s in streams if tox < 1 and not self.rng.random() < tox)
        h = next(self._ids)
        self.faults[h] = _Fault(h, kind, frozenset(ls), p, streams, off)
        return h

    def remove_fault(self, handle: int) -> None:
        if self.faults.pop(handle, None) is None:
            raise SimNetworkError(f"no active fault with handle {handle!r}; active: {sorted(self.faults)}")
        for d in (self._busy, self._sent):
            for k in [k for k in d if k[0] == handle]:
                del d[k]

    def active(self, link: Link, stream: str) -> list[_Fault]:
        """Faults acting on one stream of a link now, in the order they were added."""
        return [f for f in self.faults.values()
                if link in f.links and stream in f.streams and (link, stream) not in f.off]

    def deliver(self, src: str, dst: str, nbytes: int, deadline: float | None = None, *,
                reply: bool = False) -> simpy.Process:
        """Send `nbytes` from src to dst; `deadline` is absolute virtual time (None: none)."""
        link, stream = ((dst, src), "downstream") if reply else ((src, dst), "upstream")
        return self.env.process(self._send(link, stream, nbytes, deadline))

    def _send(self, link: Link, stream: str, n: int, deadline: float | None) -> Generator[simpy.Event, Any, Delivery]:
        t0, rto = self.env.now, self.cal.rto_s
        stalled: float | None = None
        for attempt in itertools.count():
            fs = self.active(link, stream)
            lost = next((f for f in fs if self._drops(f)), None)
            if lost is None:
                break
            stalled = self.env.now if stalled is None else stalled
            retry = self.env.now + rto
            rto = min(2 * rto, self.cal.rto_max_s)
            give_up = attempt == self.cal.retries_max          # the last retransmission's RTO ran out
            ends = [(retry, UNAVAILABLE if give_up else None, lost.kind)]
            ends += self._stall_ends(stalled, deadline, lost.kind)
            at, err, cause = min(ends, key=_first)
            yield self.env.timeout(at - self.env.now)
            if err is not None:
                return Delivery(False, self.env.now - t0, err, cause)
        for f in fs:
            if f.kind == "link-down":
                return (yield from self._end(t0, self.env.now + self.cal.refused_s, deadline, UNAVAILABLE, f.kind))
            if f.kind == "timeout":
                close = self.env.now + f.params["timeout_ms"] / 1000 if f.params["timeout_ms"] else None
                ends = self._stall_ends(self.env.now, deadline, f.kind)
                ends += [(close, UNAVAILABLE, f.kind)] if close is not None else []
                if not ends:
                    yield self.env.event()     # a black hole without deadline or keepalive: never completes
                at, err, cause = min(ends, key=_first)
                return (yield from self._end(t0, at, deadline, err, cause))
            if f.kind == "reset_peer":
                reset = self.env.now + f.params["timeout_ms"] / 1000
                return (yield from self._end(t0, reset, deadline, UNAVAILABLE, f.kind))
        arrive = self.env.now + self.cal.fixed_s + self.cal.per_byte_s * n
        for f in fs:
            key = (f.handle, link, stream)
            if f.kind == "latency":
                j = f.params["jitter_ms"]
                arrive += max(0.0, f.params["latency_ms"] + (self.rng.uniform(-j, j) if j else 0.0)) / 1000
            elif f.kind == "bandwidth" and f.params["rate_kbps"] > 0:
                start = max(self.env.now, self._busy.get(key, 0.0))
                self._busy[key] = start + n / (f.params["rate_kbps"] * 1000)
                arrive += self._busy[key] - self.env.now
            elif f.kind == "slicer":
                arrive += math.ceil(n / f.params["average_size"]) * f.params["delay_us"] / 1e6
            elif f.kind == "limit_data":
                sent = self._sent.get(key, 0) + n
                self._sent[key] = 0 if sent >= f.params["bytes"] else sent
                if sent > f.params["bytes"]:
                    return (yield from self._end(t0, self.env.now + self.cal.fixed_s, deadline, UNAVAILABLE, f.kind))
        return (yield from self._end(t0, arrive, deadline, None, None))

    def _drops(self, f: _Fault) -> bool:
        """Whether this attempt is lost to `f`; a draw only for partial loss: a certain outcome uses no randomness."""
        if f.kind == "partition":
            return True
        return f.kind == "loss" and (f.params["percent"] >= 100 or self.rng.random() * 100 < f.params["percent"])

    def _stall_ends(self, since: float, deadline: float | None, cause: str) -> list[_End]:
        """When a stalled message gives up: its deadline, or keepalive noticing the dead transport."""
        ends: list[_End] = []
        if deadline is not None:
            ends.append((max(deadline, self.env.now), DEADLINE_EXCEEDED, cause))
        if self.cal.keepalive_s is not None:
            ends.append((max(since + self.cal.keepalive_s, self.env.now), UNAVAILABLE, cause))
        return ends

    def _end(self, t0: float, at: float, deadline: float | None, err: str | None,
             cause: str | None) -> Generator[simpy.Event, Any, Delivery]:
        """Complete at `at` with `err` (None: delivered), unless the deadline comes first."""
        if deadline is not None and at > deadline:
            at, err = max(deadline, self.env.now), DEADLINE_EXCEEDED
        yield self.env.timeout(at - self.env.now)
        return Delivery(err is None, self.env.now - t0, err, cause)
