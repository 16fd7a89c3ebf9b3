"""FuzzRun: send generated hostile requests to a running 1-shard cluster and judge each answer.

Per case: the copies' state is read before the call and after it. A refused call (any code but
OK) must leave every copy exactly as it was; an accepted one must leave the copies equal again
within `settle_s`, and must not have changed anything if the case is one every correct server
refuses (for a Pull, which changes nothing, such a case must not be answered OK at all). An
accepted Replicate must leave its target exactly as it was in every observed field (seq, epochs,
role, checksum, applied keys, audit counts, pushes, log start, restore source): the fuzzer never
sends one a correct copy could apply. On top: no UNKNOWN or INTERNAL answers (a handler crashed
instead of saying what was wrong), no refusal that fails to name the field a case's `expect`
names (gRPC's "Stream removed" for a message too long to send, say), no definite refusal of a
case every correct server accepts, no token-less call accepted, no call running past its
deadline (or past the server's own wait cap, WAIT_CAP_S, when the client asked for a day), a
copy that goes on answering Status while a case's calls wait (`probe`), no node process dying,
no failover, and no ERROR record or traceback in a node's log (harness/proof/fuzz/nodelogs).

A case is one gRPC call, or several identical ones at once (Snapshot storms, day-long Pulls);
every call goes to the primary or to one of the two replicas, with raw bytes (identity
serializers), so the server's own parsing is under test. Each answer is also placed on the way
into the handler (report.reach_of): the summary says, per method, how many requests the content
checks answered rather than parsing, auth or routing.

The machine is shared and may be loaded: a replica that misses heartbeats for a few hundred ms
starts an election whatever the fuzzer sends. So a failover, hang or divergence counts only
when a replay of the same case on the healed shard shows it again (else it is listed as noise,
every item, and the tests bound how much noise a run may have). The state is read again before
a case that follows a Push or Replicate, or when the last reading is old: a change of content
found then (no request in flight) is the delayed effect of the case before, a violation of its
own ("delayed-change"), unless that case was a Push answered UNAVAILABLE or DEADLINE_EXCEEDED
(which may apply late by design) by anything but the bulkhead (a Busy refusal applied nothing);
only a change of role or epoch alone is noise.

After any violation that may have touched the copies, the shard must be whole again (every
copy running and answering, one primary, one epoch, all equal). One that stays broken ends the
evidence of everything after it: the run stops there, or with `restart` gets a fresh cluster
and goes on with the next case.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

import grpc
import numpy as np

from pschaos.psnodes.wire.bulkhead import is_busy_refusal
from pschaos.psnodes.wire.channels import TOKEN_HEADER, dial
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.server.servicer import SERVICE

from pschaos.harness.proof.fuzz.cases import Case, generate, metadata, refused_by_auth
from pschaos.harness.proof.fuzz.nodelogs import LogWatch
from pschaos.harness.proof.fuzz.observe import CONTENT, FIELDS, converged, describe, diff, healthy, read_state, view, wait_state
from pschaos.harness.proof.fuzz.parts import BIG, DENSE, DIM, TABLE
from pschaos.harness.proof.fuzz.protowire import Ctx, render
from pschaos.harness.proof.fuzz.report import Summary, reach_of

#: what a loaded machine can cause too (a missed heartbeat starts an election): such a finding
#: counts only when a replay of the same case, on the healed shard, shows it again
NOISY = ("failover", "hang", "divergence")
INDEFINITE = {"UNAVAILABLE", "DEADLINE_EXCEEDED"}
STATEFUL = ("Push", "Replicate")
FRESH_S = 0.25       # a state reading older than this is taken again before the next case
#: the longest a server may hold a call whatever deadline the client sends (psnodes caps its
#: waits at 10 s, pschaos.psnodes.server.calls.MAX_WAIT_S): a day-long Pull must be answered by then
WAIT_CAP_S = 10.0
#: what moves with a delayed effect of a request (role and epoch alone move with elections)
LASTING = CONTENT + ("seq_epoch", "log_start", "restored_from")


def may_apply_late(method: str, results: list[tuple]) -> bool:
    """A push answered UNAVAILABLE or DEADLINE_EXCEEDED may still be applied (not yet acked by
    every replica), except a bulkhead refusal: that one was turned away before the store, so a
    change after it is not excused (psnodes/wire/bulkhead.py's promise, which this holds it to)."""
    return method == "Push" and any(r[0] in INDEFINITE and not is_busy_refusal(r[1]) for r in results)


def prepare(be: Any) -> None:
    """Seed the state the cases aim at: the dense parameters of `parts.DENSE` (a scalar of shape
    [], a vector, a matrix) and the largest one (`parts.BIG`, pulled only), a few pushes so
    embedding rows exist. Not the audit tensor: cases.SPECIALS offer it (wrong shapes first)."""
    if be.cfg.shards != 1:
        raise ValueError("the fuzzer drives a 1-shard cluster (every key lives on shard 0)")
    c = be.client
    params = dict(DENSE, **{BIG[0]: BIG[1]})
    init = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[
        ps_pb2.Tensor(name=n, shape=list(s), dtype="float32", data=np.full(s, 0.5, np.float32).tobytes())
        for n, s in params.items()])
    c.call(0, "Push", lambda ep: ps_pb2.PushRequest(shard=0, epoch=ep, update=init))
    rng = np.random.default_rng(0)
    for k in range(4):
        grads = [ps_pb2.Tensor(name=n, shape=list(s), dtype="float32",
                               data=(np.asarray(rng.standard_normal(s), np.float32) * 0.1).tobytes())
                 for n, s in DENSE.items()]
        ids = np.array([1, 2, 3, 100 + k], dtype="<i8")
        rows = ps_pb2.Rows(table=TABLE, ids=ids.tobytes(), dim=DIM,
                           data=rng.standard_normal((4, DIM)).astype("<f4").tobytes())
        push = ps_pb2.Update(worker="fz-seed", req_id=k + 1, incarnation=1, dense=grads, sparse=[rows])
        c.call(0, "Push", lambda ep, u=push: ps_pb2.PushRequest(shard=0, epoch=ep, update=u))


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
        self._calls: dict[tuple[str, str], Callable] = {}
        self._channels: list[grpc.Channel] = []
        self.logs = LogWatch(None)
        self.last: tuple[Case, dict] | None = None       # the last case judged, and its record

    # ------------------------------------------------------------ the cluster
    def _adopt(self, be: Any) -> str:
        """Take `be` as the cluster under test; '' when it is whole, else what is wrong."""
        self.be = be
        self.close_channels()
        self.logs = LogWatch.of(be)
        self.last = None
        self._sweep_logs("while the cluster started (before any case)")
        ok = self._heal()
        return "" if ok else healthy(be, self.state)

    def _roles(self) -> tuple[str, list[str]]:
        primary = view(self.state)[1][0]
        return primary, [n for n in self.be.nodes() if n != primary]

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
    def _send(self, node: str, case: Case, raw: bytes, md: tuple) -> tuple[list[tuple], str]:
        """All of a case's calls at once; per call (code, details, seconds, reply bytes, details
        length), and why a Status probe sent meanwhile failed ('' when it answered or was not sent).
        A call not answered by its deadline (or WAIT_CAP_S) plus the margin is cancelled: NO_ANSWER."""
        fn = self._call(node, case.method)
        cap = min(case.deadline, WAIT_CAP_S) + self.margin
        t0 = time.monotonic()
        done: dict[int, float] = {}
        futs = []
        for i in range(case.parallel):
            f = fn.future(raw, timeout=case.deadline, metadata=md)
            f.add_done_callback(lambda _f, i=i: done.setdefault(i, time.monotonic()))
            futs.append(f)
        probe = self._probe(node, min(0.5, cap / 4)) if case.probe else ""
        out = []
        for i, f in enumerate(futs):
            try:
                reply = f.result(timeout=max(t0 + cap + 0.25 - time.monotonic(), 0.01))
                out.append(("OK", "", done.get(i, time.monotonic()) - t0, len(reply), 0))
            except grpc.FutureTimeoutError:
                f.cancel()
                out.append(("NO_ANSWER", f"no answer in {cap:.1f}s", time.monotonic() - t0, 0, 0))
            except grpc.RpcError as e:
                d = e.details() or ""
                out.append((e.code().name, d[:300], done.get(i, time.monotonic()) - t0, 0, len(d)))
        return out, probe

    def _probe(self, node: str, after: float) -> str:
        """While a case's calls wait: the copy must still answer a Status at once ('' when it did)."""
        time.sleep(after)
        try:
            self._call(node, "Status")(b"", timeout=3.0, metadata=((TOKEN_HEADER, self.be.cfg.token),))
            return ""
        except grpc.RpcError as e:
            return f"{e.code().name} {(e.details() or '')[:120]}"

    def _attempt(self, index: int, case: Case) -> tuple[dict, list[str], list[tuple[str, str, bool]]]:
        """Send one case and judge it: its record, the codes, and the findings (kind, detail,
        noisy: whether a loaded machine could explain it too)."""
        before = self.state
        primary, others = self._roles()
        node = {"primary": primary, "replica": others[0], "replica2": others[-1]}[case.target]
        other = next((n for n in others if n != node), node)
        b = before[node]
        ctx = Ctx(epoch=b["epoch"], primary=primary, target=node, other=other, seq=b["seq"],
                  seq_epoch=b["seq_epoch"], token=self.be.cfg.token)
        raw = render(case.body, ctx)
        peer = getattr(self.be.cfg, "peer_token", "") if case.method == "Replicate" else ""
        results, probe = self._send(node, case, raw, metadata(case.auth, self.be.cfg.token, peer))
        codes = [r[0] for r in results]
        found: list[tuple[str, str, bool]] = []

        def add(kind: str, detail: str, noisy: bool | None = None) -> None:
            found.append((kind, detail, kind in NOISY if noisy is None else noisy))
        unauth = refused_by_auth(case.auth, case.method, peer)
        if unauth and any(c != "UNAUTHENTICATED" for c in codes):
            add("unauthenticated-accepted", f"token {case.auth!r} answered {codes}")
        if any(c in ("UNKNOWN", "INTERNAL") for c in codes):
            add("unknown-or-internal", "")
        self._judge_words(case, results, add)
        slow = max(r[2] for r in results)
        cap = min(case.deadline, WAIT_CAP_S)
        if "NO_ANSWER" in codes or slow > cap + self.margin:
            add("hang", f"answered after {slow:.2f}s (deadline {case.deadline:g}s, the server's cap {WAIT_CAP_S:g}s)"
                if "NO_ANSWER" not in codes else f"{codes.count('NO_ANSWER')} of {len(codes)} calls unanswered "
                f"after {slow:.1f}s (deadline {case.deadline:g}s, the server's cap {WAIT_CAP_S:g}s)")
        if probe:
            add("hang", f"Status to {node} failed while the case's {case.parallel} calls waited: {probe}")
        after = read_state(self.be, first=node)
        moved = view(after) != view(before)
        ok = "OK" in codes
        # a push answered UNAVAILABLE or DEADLINE_EXCEEDED may have been applied (not yet acked by
        # every replica): the client retries it with the same key, so it is judged as accepted;
        # a bulkhead refusal (Busy) applied nothing, so a change after one alone is judged refused
        maybe = may_apply_late(case.method, results) and bool(diff(before, after, CONTENT))
        changed: list[str] = []
        if ok or maybe:
            if not converged(after):
                after, settled = wait_state(self.be, converged, self.settle_s)
                if not settled:
                    add("divergence", f"not equal {self.settle_s}s later: {describe(after)}")
            if case.method == "Replicate":
                # nothing a correct copy could apply is ever sent: an OK leaves the target as it was
                changed = diff({node: before[node]}, {node: after[node]}) + \
                    diff({n: v for n, v in before.items() if n != node}, {n: v for n, v in after.items() if n != node},
                         CONTENT)
                if changed:
                    add("invalid-accepted", "; ".join(changed), noisy=moved)
            else:
                changed = diff(before, after, CONTENT)
                if case.must_refuse and changed:
                    add("invalid-accepted", "; ".join(changed))
            if case.must_refuse and ok and case.method not in STATEFUL:
                add("invalid-accepted", f"answered OK with {max(r[3] for r in results)} bytes")
        else:
            # a role or epoch change is judged as a failover (replayed before it counts)
            changed = diff(before, after, CONTENT if moved else FIELDS)
            if changed:
                add("state-changed-by-refused", "; ".join(changed))
        if case.must_accept:
            refused = [(r[0], r[1][:100]) for r in results if r[0] != "OK" and r[0] not in INDEFINITE]
            if refused:
                add("valid-refused", f"{len(refused)} of {len(results)} calls refused: {refused[0]}")
        dead = [n for n in self.be.nodes() if not self.be.alive(n)]
        if dead:
            add("node-died", ", ".join(dead))
        silent = [n for n, v in after.items() if v is None and n not in dead]
        if silent:
            add("hang", f"no Status answer from {', '.join(silent)} after the call")
        if moved:
            add("failover", f"epoch/primaries {view(before)} -> {view(after)}")
        for n, text in self.logs.new_errors():
            add("node-error-logged", f"{n}: {text}", noisy=False)
        self.state, self.read_at = after, time.monotonic()
        rec = {"case": index, "method": case.method, "target": node, "role": case.target, "auth": case.auth,
               "form": case.form, "label": case.label,
               "code": codes[0] if len(set(codes)) == 1 else ",".join(sorted(set(codes))),
               "details": results[0][1][:200], "details_len": results[0][4], "reply_bytes": results[0][3],
               "reach": reach_of(case.method, results[0][0], results[0][1]),
               "bytes": len(raw), "hex": raw[:128].hex(), "ms": round(slow * 1000, 1),
               "must_refuse": case.must_refuse, "unauthenticated": unauth,
               "may_apply_late": may_apply_late(case.method, results)}
        if case.observe:
            self.summary.observe(rec, "state: " + ("; ".join(changed) or "unchanged"))
        return rec, codes, found

    def _judge_words(self, case: Case, results: list[tuple], add: Callable) -> None:
        """A refusal must say what was wrong: never gRPC's "Stream removed" (details too long to
        send), and for a case with `expect`, naming one of its fields. Under DEADLINE_EXCEEDED it is
        the caller's deadline running out (a loaded machine explains it: replayed before it counts)."""
        for code, details, _, _, n in results:
            if "Stream removed" in details:
                add("unclear-refusal", f"{code} {details[:80]!r} ({n} characters of details)",
                    noisy=code == "DEADLINE_EXCEEDED")
                return
            if case.expect and code not in ("OK", "NO_ANSWER", "UNAUTHENTICATED", *INDEFINITE) and \
                    not any(w in details.lower() for w in case.expect):
                add("unclear-refusal", f"{code} does not name {' or '.join(case.expect)}: {details[:120]!r} "
                                       f"({n} characters)")
                return

    def _record(self, case: Case, rec: dict, codes: list[str], found: list[tuple[str, str, bool]]) -> None:
        self.records.append(rec)
        self.summary.count(case.method, codes, rec["unauthenticated"], replay="replay_of" in rec,
                           reach=rec["reach"], form=rec["form"])
        for kind, detail, _ in found:
            self.summary.violation(kind, rec, detail)

    def one(self, index: int, case: Case) -> tuple[list[str], dict]:
        """Send one case (twice when a loaded machine could explain what it showed), record it,
        and return the kinds of violation kept and its record."""
        rec, codes, found = self._attempt(index, case)
        noisy = {k for k, _, n in found if n}
        if noisy and self._heal():
            rec2, codes2, found2 = self._attempt(index, case)
            rec2["replay_of"] = index
            if not noisy & {k for k, _, n in found2 if n}:
                self.summary.noise(rec, [(k, d) for k, d, n in found if n], "did not happen again on a replay")
                found = [f for f in found if not f[2]]
            self._record(case, rec, codes, found)
            self._record(case, rec2, codes2, found2)
            return [k for k, _, _ in found + found2], rec
        self._record(case, rec, codes, found)
        return [k for k, _, _ in found], rec

    def _heal(self) -> bool:
        """Wait until the shard is whole again (an election takes a few suspicion periods)."""
        self.state, ok = wait_state(self.be, lambda s: not healthy(self.be, s), self.settle_s * 2)
        self.read_at = time.monotonic()
        return ok

    def _refresh(self) -> bool:
        """Read the state again when the last reading is old or the last case could change state
        late: what changed meanwhile, with no request in flight, is the last case's delayed
        effect (or, a role or epoch change alone, an election on a loaded machine: noise).
        False when the shard is not whole."""
        last = self.last
        if time.monotonic() - self.read_at < FRESH_S and not (last and last[0].method in STATEFUL):
            return True
        now = read_state(self.be)
        changed = diff(self.state, now)
        lasting = diff(self.state, now, LASTING)
        self.state, self.read_at = now, time.monotonic()
        if lasting and last is not None:
            case, rec = last
            late_push = rec["may_apply_late"]
            if not late_push:
                self.summary.violation("delayed-change", rec, "after the answer, no request in flight: "
                                       + "; ".join(lasting))
            elif case.must_refuse:
                self.summary.violation("invalid-accepted", rec, "applied after its indefinite answer: "
                                       + "; ".join(lasting))
        elif changed:
            self.summary.noise(last[1] if last else None, [("between-cases", "; ".join(changed))],
                               "no request was in flight")
        return not healthy(self.be, now) or self._heal()

    def _sweep_logs(self, where: str) -> None:
        """ERROR records and tracebacks no case was judged with (at the start, after the last case)."""
        errs = self.logs.new_errors()
        rec = self.last[1] if self.last else {"case": None, "method": "-", "code": "-", "details": "",
                                              "label": where, "hex": ""}
        for n, text in errs:
            self.summary.violation("node-error-logged", rec, f"{n} ({where}): {text}")

    def _recover(self, where: str) -> bool:
        """The shard stayed broken: a fresh cluster when allowed (True), else the run stops."""
        broken = f"{where}: {healthy(self.be, self.state)}"
        self._sweep_logs("after the last case judged on this cluster")
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
        stopped = False
        try:
            for i, case in enumerate(generate(self.seed, self.requests)):
                if not self._refresh() and not self._recover(f"before case {i}"):
                    stopped = True
                    break
                kinds, rec = self.one(i, case)
                self.last = (case, rec)
                if i and i % self.progress_every == 0:
                    print(f"pschaos fuzz: {i}/{self.requests} requests, {self.summary.n_violations()} violation(s), "
                          f"{time.monotonic() - t0:.0f}s", file=self.stream, flush=True)
                quiet = {"unknown-or-internal", "unauthenticated-accepted", "unclear-refusal", "node-error-logged",
                         "valid-refused"}
                if not kinds or set(kinds) <= quiet or self._heal():
                    continue
                if not self._recover(f"after case {i} ({case.method})"):
                    stopped = True
                    break
            if not stopped:
                time.sleep(FRESH_S)             # the last case's late effects and log lines
                self._refresh()
                self._sweep_logs("after the last case")
        finally:
            self.close_channels()
        return self.summary.to_json(time.monotonic() - t0)
