"""FuzzRun: send generated hostile requests to a running 1-shard cluster and judge each answer.

Per case: the copies' state is read before the call and after it. A refused call (any code but
OK) must leave every copy exactly as it was; an accepted one must leave the copies equal again
within `settle_s`, and must not have changed anything if the case is one every correct server
refuses. On top: no UNKNOWN or INTERNAL answers (a handler crashed instead of saying what was
wrong), no token-less call accepted, no call running past its deadline, no node process dying,
no failover. A case is one gRPC call, or a few identical ones at once (concurrent Snapshots);
every call goes to the primary or to one replica, with raw bytes (identity serializers), so the
server's own parsing is under test.

The machine is shared and may be loaded: a replica that misses heartbeats for a few hundred ms
starts an election whatever the fuzzer sends. So a failover, hang or divergence counts only
when a replay of the same case on the healed shard shows it again (else it is listed as noise),
and the state is read again before a case when the last reading is old.

After any violation that may have touched the copies, the shard must be whole again (every
copy running and answering, one primary, one epoch, all equal). One that stays broken ends the
evidence of everything after it: the run stops there, or with `restart` gets a fresh cluster
and goes on with the next case.
"""
from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TextIO

import grpc
import numpy as np

from psnodes.channels import dial
from psnodes.proto import ps_pb2
from psnodes.servicer import SERVICE

from .cases import Case, generate, metadata, refused_by_auth
from .observe import CONTENT, FIELDS, converged, describe, diff, healthy, read_state, view, wait_state
from .parts import DENSE, DIM, TABLE
from .protowire import Ctx, render
from .report import Summary

#: what a loaded machine can cause too (a missed heartbeat starts an election): such a finding
#: counts only when a replay of the same case, on the healed shard, shows it again
NOISY = ("failover", "hang", "divergence")
INDEFINITE = {"UNAVAILABLE", "DEADLINE_EXCEEDED"}
FRESH_S = 0.25       # a state reading older than this is taken again before the next case


def prepare(be: Any) -> None:
    """Seed the state the cases aim at: the dense parameters of `parts.DENSE` (a scalar of shape
    [], a vector, a matrix) and the audit tensor, a few pushes so embedding rows exist."""
    if be.cfg.shards != 1:
        raise ValueError("the fuzzer drives a 1-shard cluster (every key lives on shard 0)")
    c = be.client
    c.init_dense({n: np.full(s, 0.5, np.float32) for n, s in DENSE.items() if s})
    scalar = ps_pb2.Tensor(name="fz/scalar", shape=[], dtype="float32", data=np.float32(0.5).tobytes())
    init = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[scalar])
    c.call(0, "Push", lambda ep: ps_pb2.PushRequest(shard=0, epoch=ep, update=init))
    rng = np.random.default_rng(0)
    for k in range(3):
        c.push({n: rng.standard_normal(s).astype(np.float32) for n, s in DENSE.items() if s},
               {TABLE: (np.array([1, 2, 3, 100 + k]), rng.standard_normal((4, DIM)).astype(np.float32))})
    grad = ps_pb2.Tensor(name="fz/scalar", shape=[], dtype="float32", data=np.float32(0.25).tobytes())
    push = ps_pb2.Update(worker="fz-seed", req_id=1, incarnation=1, dense=[grad])
    c.call(0, "Push", lambda ep: ps_pb2.PushRequest(shard=0, epoch=ep, update=push))


class FuzzRun:
    def __init__(self, be: Any, seed: int, requests: int, *, settle_s: float = 3.0, margin: float = 1.0,
                 rerun: str | None = None, restart: Callable[[], Any] | None = None, max_restarts: int = 0,
                 progress_every: int = 500, stream: TextIO | None = None) -> None:
        self.be, self.seed, self.requests = be, seed, requests
        self.settle_s, self.margin = settle_s, margin
        self.restart, self.max_restarts = restart, max_restarts
        self.progress_every, self.stream = progress_every, stream or sys.stderr
        self.summary = Summary(seed, requests, rerun or f"pschaos fuzz --requests {requests} --seed {seed}")
        self.records: list[dict] = []
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fuzz")
        self._calls: dict[tuple[str, str], Callable] = {}
        self._channels: list[grpc.Channel] = []

    # ------------------------------------------------------------ the cluster
    def _adopt(self, be: Any) -> str:
        """Take `be` as the cluster under test; '' when it is whole, else what is wrong."""
        self.be = be
        self.close_channels()
        ok = self._heal()
        return "" if ok else healthy(be, self.state)

    def _roles(self) -> tuple[str, str, list[str]]:
        primary = view(self.state)[1][0]
        others = [n for n in self.be.nodes() if n != primary]
        return primary, others[0], others

    def _call(self, node: str, method: str) -> Callable:
        if (node, method) not in self._calls:
            ch = dial(self.be.cfg.addresses[node], self.be.cfg.max_message_bytes)
            self._channels.append(ch)
            for m in ("Push", "Pull", "Replicate", "Snapshot", "Status", "Echo"):
                self._calls[(node, m)] = ch.unary_unary(f"/{SERVICE}/{m}", request_serializer=None,
                                                        response_deserializer=None)
        return self._calls[(node, method)]

    def close_channels(self) -> None:
        for ch in self._channels:
            ch.close()
        self._channels, self._calls = [], {}

    # ------------------------------------------------------------------ a case
    def _send(self, node: str, case: Case, raw: bytes, md: tuple) -> list[tuple[str, str, float]]:
        fn = self._call(node, case.method)

        def once() -> tuple[str, str, float]:
            t0 = time.monotonic()
            try:
                fn(raw, timeout=case.deadline, metadata=md)
                return "OK", "", time.monotonic() - t0
            except grpc.RpcError as e:
                return e.code().name, (e.details() or "")[:300], time.monotonic() - t0
        if case.parallel == 1:
            return [once()]
        return [f.result() for f in [self.pool.submit(once) for _ in range(case.parallel)]]

    def _attempt(self, index: int, case: Case) -> tuple[dict, list[str], list[tuple[str, str]]]:
        """Send one case and judge it: its record, the codes, and the violations (kind, detail)."""
        before = self.state
        primary, replica, others = self._roles()
        node = primary if case.target == "primary" else replica
        other = next((n for n in others if n != node), node)
        b = before[node]
        ctx = Ctx(epoch=b["epoch"], primary=primary, target=node, other=other, seq=b["seq"],
                  seq_epoch=b["seq_epoch"], token=self.be.cfg.token)
        raw = render(case.body, ctx)
        peer = getattr(self.be.cfg, "peer_token", "") if case.method == "Replicate" else ""
        results = self._send(node, case, raw, metadata(case.auth, self.be.cfg.token, peer))
        codes = [r[0] for r in results]
        found: list[tuple[str, str]] = []
        unauth = refused_by_auth(case.auth, case.method, peer)
        if unauth and any(c != "UNAUTHENTICATED" for c in codes):
            found.append(("unauthenticated-accepted", f"token {case.auth!r} answered {codes}"))
        if any(c in ("UNKNOWN", "INTERNAL") for c in codes):
            found.append(("unknown-or-internal", ""))
        slow = max(r[2] for r in results)
        if slow > case.deadline + self.margin:
            found.append(("hang", f"answered after {slow:.2f}s (deadline {case.deadline}s)"))
        after = read_state(self.be, first=node)
        moved = view(after) != view(before)
        # a push answered UNAVAILABLE or DEADLINE_EXCEEDED may have been applied (not yet acked by
        # every replica): the client retries it with the same key, so it is judged as accepted
        maybe = case.method == "Push" and bool(set(codes) & INDEFINITE) and bool(diff(before, after, CONTENT))
        if "OK" in codes or maybe:
            if not converged(after):
                after, ok = wait_state(self.be, converged, self.settle_s)
                if not ok:
                    found.append(("divergence", f"not equal {self.settle_s}s later: {describe(after)}"))
            changed = diff(before, after, CONTENT)
            if case.must_refuse and changed:
                found.append(("invalid-accepted", "; ".join(changed)))
        else:
            # a role or epoch change is judged as a failover (replayed before it counts)
            changed = diff(before, after, CONTENT if moved else FIELDS)
            if changed:
                found.append(("state-changed-by-refused", "; ".join(changed)))
        dead = [n for n in self.be.nodes() if not self.be.alive(n)]
        if dead:
            found.append(("node-died", ", ".join(dead)))
        silent = [n for n, v in after.items() if v is None and n not in dead]
        if silent:
            found.append(("hang", f"no Status answer from {', '.join(silent)} after the call"))
        if moved:
            found.append(("failover", f"epoch/primaries {view(before)} -> {view(after)}"))
        self.state, self.read_at = after, time.monotonic()
        rec = {"case": index, "method": case.method, "target": node, "role": case.target, "auth": case.auth,
               "label": case.label, "code": codes[0] if len(set(codes)) == 1 else ",".join(codes),
               "details": results[0][1][:200], "bytes": len(raw), "hex": raw[:128].hex(),
               "ms": round(slow * 1000, 1), "must_refuse": case.must_refuse, "unauthenticated": unauth}
        return rec, codes, found

    def _record(self, case: Case, rec: dict, codes: list[str], found: list[tuple[str, str]]) -> None:
        self.records.append(rec)
        self.summary.count(case.method, codes, rec["unauthenticated"], replay="replay_of" in rec)
        for kind, detail in found:
            self.summary.violation(kind, rec, detail)

    def one(self, index: int, case: Case) -> list[str]:
        """Send one case (twice when a loaded machine could explain what it showed), record it,
        and return the kinds of violation kept."""
        rec, codes, found = self._attempt(index, case)
        noisy = {k for k, _ in found if k in NOISY}
        if noisy and self._heal():
            rec2, codes2, found2 = self._attempt(index, case)
            rec2["replay_of"] = index
            if not noisy & {k for k, _ in found2}:
                self.summary.noise(rec, [f for f in found if f[0] in NOISY], "did not happen again on a replay")
                found = [f for f in found if f[0] not in NOISY]
            self._record(case, rec, codes, found)
            self._record(case, rec2, codes2, found2)
            return [k for k, _ in found + found2]
        self._record(case, rec, codes, found)
        return [k for k, _ in found]

    def _heal(self) -> bool:
        """Wait until the shard is whole again (an election takes a few suspicion periods)."""
        self.state, ok = wait_state(self.be, lambda s: not healthy(self.be, s), self.settle_s * 2)
        self.read_at = time.monotonic()
        return ok

    def _refresh(self) -> bool:
        """Read the state again when the last reading is old (a slow case, a replay that waited
        for an election): what changed meanwhile, with no request in flight, is not a case's doing.
        False when the shard is not whole."""
        if time.monotonic() - self.read_at < FRESH_S:
            return True
        now = read_state(self.be)
        changed = diff(self.state, now)
        self.state, self.read_at = now, time.monotonic()
        if changed:
            self.summary.noise(None, [("between-cases", "; ".join(changed))], "no request was in flight")
        return not healthy(self.be, now) or self._heal()

    def _recover(self, where: str) -> bool:
        """The shard stayed broken: a fresh cluster when allowed (True), else the run stops."""
        broken = f"{where}: {healthy(self.be, self.state)}"
        if self.restart is None or len(self.summary.restarts) >= self.max_restarts:
            self.summary.stop(f"the shard stayed broken {broken}; later cases would prove nothing")
            return False
        print(f"pschaos fuzz: shard broken {broken}; fresh cluster {len(self.summary.restarts) + 1}/"
              f"{self.max_restarts}", file=self.stream, flush=True)
        self.summary.restarted(broken)
        why = self._adopt(self.restart())
        if why:
            self.summary.stop(f"the fresh cluster was not whole: {why}")
        return not why

    # -------------------------------------------------------------------- run
    def run(self) -> dict:
        t0 = time.monotonic()
        why = self._adopt(self.be)
        if why:
            self.summary.stop(f"the cluster was not whole before the first case: {why}")
            return self.summary.to_json(time.monotonic() - t0)
        try:
            for i, case in enumerate(generate(self.seed, self.requests)):
                if not self._refresh() and not self._recover(f"before case {i}"):
                    break
                kinds = self.one(i, case)
                if i and i % self.progress_every == 0:
                    print(f"pschaos fuzz: {i}/{self.requests} requests, {self.summary.n_violations()} violation(s), "
                          f"{time.monotonic() - t0:.0f}s", file=self.stream, flush=True)
                if not kinds or set(kinds) <= {"unknown-or-internal", "unauthenticated-accepted"} or self._heal():
                    continue
                if not self._recover(f"after case {i} ({case.method})"):
                    break
        finally:
            self.close_channels()
            self.pool.shutdown(wait=False)
        return self.summary.to_json(time.monotonic() - t0)
