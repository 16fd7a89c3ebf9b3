"""The outcome of a fuzz run: answers per method and status code, how far the requests got into
the handlers, the violations found, and what was left unjudged (noise).

Violations are kept whole for the first few of each kind and counted for all; `groups` folds
the rest by (kind, method, code, start of the details), so ten thousand INTERNAL answers to
random bytes read as one finding with a count and the first case that showed it. Every kept
violation carries the request's bytes (hex, truncated) for a repro.

Reach: a request only tests the handler's logic if it gets past parsing, the token, routing
(shard, primary, client epoch) and, for a Replicate, the sender checks. `reach_of` tells from an
answer's code and details (they name the field) where a request stopped; "reached" means it was
answered OK or refused by a content check (INVALID_ARGUMENT / RESOURCE_EXHAUSTED / NOT_FOUND
naming a field of the content, or a BSP wait that timed out).
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict

SCHEMA = "pschaos.fuzz/2"
KINDS = ("unknown-or-internal", "state-changed-by-refused", "invalid-accepted", "valid-refused", "unclear-refusal",
         "divergence", "delayed-change", "failover", "unauthenticated-accepted", "hang", "node-died",
         "node-error-logged")
KEEP_PER_KIND = 20
KEEP_NOISE = 1000
REACH = ("reached", "parse", "auth", "routing", "sender", "transport", "timeout", "error")

PARSE = ("does not parse as", "could not be split")      # after "<method>: the request "
ROUTING = ("serves shard", "is not the primary", "but the client knows epoch", "etcd lease", "lost primacy")
TRANSPORT = ("larger than max", "Stream removed", "Socket closed", "Connection reset")


def reach_of(method: str, code: str, details: str) -> str:
    """Where a request stopped, from its answer: "reached" (the handler's content checks
    answered), or what turned it away before: "parse", "auth", "routing", "sender" (a Replicate's
    sender or epoch), "transport" (gRPC itself), "timeout", "error" (UNKNOWN / INTERNAL)."""
    if code == "OK":
        return "reached"
    if code == "UNAUTHENTICATED":
        return "auth"
    if code in ("UNKNOWN", "INTERNAL"):
        return "error"
    if any(p in details for p in TRANSPORT):
        return "transport"
    if any(details.startswith(f"{method}: the request {p}") for p in PARSE):
        return "parse"          # the request itself (a payload inside that does not parse is content)
    if any(p in details for p in ROUTING):
        return "routing"
    if method == "Replicate" and (code in ("FAILED_PRECONDITION", "UNAVAILABLE")
                                  or details.startswith("Replicate: primary")):
        return "sender"
    if code in ("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "NOT_FOUND"):
        return "reached"
    if code == "DEADLINE_EXCEEDED" and "min_clock" in details:
        return "reached"
    if code in ("DEADLINE_EXCEEDED", "NO_ANSWER", "CANCELLED", "UNAVAILABLE"):
        return "timeout"       # UNAVAILABLE past routing: a replication wait that ran out
    return "routing"


class Summary:
    def __init__(self, seed: int, requests: int, rerun: str) -> None:
        self.seed, self.requests, self.rerun = seed, requests, rerun
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.reach: dict[str, Counter] = defaultdict(Counter)
        self.sent = self.calls = 0
        self.unauth = Counter()
        self.kinds: Counter = Counter()
        self.kept: list[dict] = []
        self.groups: dict[tuple, dict] = {}
        self.stopped: str | None = None
        self.restarts: list[str] = []
        self.replays = 0
        self.noises: list[dict] = []
        self.n_noise = 0
        self.observed: list[dict] = []

    def count(self, method: str, codes: list[str], unauthenticated: bool, replay: bool = False,
              reach: str = "", form: str = "") -> None:
        if replay:
            self.replays += 1
        else:
            self.sent += 1
            if reach:
                r = self.reach[method]
                r[reach] += 1
                r[f"{form}:sent"] += 1
                r[f"{form}:reached"] += reach == "reached"
        self.calls += len(codes)
        self.counts[method].update(codes)
        if unauthenticated:
            self.unauth["sent"] += len(codes)
            self.unauth["refused"] += codes.count("UNAUTHENTICATED")

    def violation(self, kind: str, rec: dict, detail: str) -> None:
        self.kinds[kind] += 1
        v = {"kind": kind, **rec, "detail": detail[:400]}
        if self.kinds[kind] <= KEEP_PER_KIND:
            self.kept.append(v)
        # a log line is grouped by its message (after "<node>: <date> <time> "), an answer by its details
        words = re.sub(r"^\S+: \S+ \S+ ", "", detail)[:60] if kind == "node-error-logged" else rec["details"][:48]
        key = (kind, rec["method"], rec["code"], words)
        g = self.groups.setdefault(key, {"kind": kind, "method": rec["method"], "code": rec["code"],
                                         "details": rec["details"][:160], "detail": detail[:300],
                                         "count": 0, "first_case": rec["case"], "label": rec["label"][:120],
                                         "hex": rec["hex"]})
        g["count"] += 1

    def noise(self, rec: dict | None, found: list[tuple[str, str]], why: str) -> None:
        """Something a loaded machine explains as well as the request did: kept apart, not judged,
        every item listed (up to KEEP_NOISE) and bounded by the tests."""
        self.n_noise += len(found)
        for kind, detail in found:
            if len(self.noises) < KEEP_NOISE:
                self.noises.append({"kind": kind, "why": why, "detail": detail[:300],
                                    **({"case": rec["case"], "method": rec["method"], "code": rec["code"],
                                        "label": rec["label"][:120], "hex": rec["hex"]} if rec else {})})

    def observe(self, rec: dict, what: str) -> None:
        """A case whose outcome is reported whatever it is (not necessarily a violation)."""
        self.observed.append({"case": rec["case"], "method": rec["method"], "code": rec["code"],
                              "details": rec["details"][:200], "label": rec["label"][:120], "what": what[:300]})

    def stop(self, why: str) -> None:
        self.stopped = why

    def restarted(self, why: str) -> None:
        self.restarts.append(why)

    def n_violations(self) -> int:
        return sum(self.kinds.values())

    def reach_json(self) -> dict:
        out = {}
        for m, r in sorted(self.reach.items()):
            sent = sum(r[k] for k in REACH)
            forms = {f.split(":")[0] for f in r if ":" in f}
            out[m] = {"sent": sent, **{k: r[k] for k in REACH},
                      "by_form": {f: {"sent": r[f"{f}:sent"], "reached": r[f"{f}:reached"]} for f in sorted(forms)}}
        return out

    def to_json(self, elapsed: float) -> dict:
        return {"schema": SCHEMA, "seed": self.seed, "requests": self.requests, "sent": self.sent,
                "calls": self.calls, "replays": self.replays, "elapsed_s": round(elapsed, 1),
                "counts": {m: dict(sorted(c.items())) for m, c in sorted(self.counts.items())},
                "reach": self.reach_json(),
                "unauthenticated": {"sent": self.unauth["sent"], "refused": self.unauth["refused"]},
                "violation_counts": dict(self.kinds), "violations": self.kept,
                "groups": sorted(self.groups.values(), key=lambda g: (g["kind"], -g["count"])),
                "noise": {"count": self.n_noise, "items": self.noises,
                          "kinds": dict(Counter(x["kind"] for x in self.noises))},
                "observed": self.observed,
                "stopped_early": self.stopped, "restarts": self.restarts, "rerun": self.rerun}


def format_text(s: dict) -> str:
    """The summary for a terminal: answers per method and code, how far requests got, noise,
    what was observed, then each group of violations."""
    codes = sorted({c for m in s["counts"].values() for c in m})
    head = f"{'method':10}" + "".join(f" {c:>5}" for c in codes)
    lines = [f"pschaos fuzz: seed {s['seed']}, {s['sent']}/{s['requests']} requests ({s['calls']} calls, "
             f"{s['replays']} replays) in {s['elapsed_s']}s", "", head]
    for m, cs in s["counts"].items():
        lines.append(f"{m:10}" + "".join(f" {cs.get(c, 0):>{max(len(c), 5)}}" for c in codes))
    lines += ["", "reach (answered OK or by a content check, not by parse/auth/routing/sender):",
              f"{'method':10} {'sent':>5} {'reached':>8} {'structured':>12} " + " ".join(f"{k:>9}" for k in REACH[1:])]
    for m, r in s.get("reach", {}).items():
        st = r["by_form"].get("structured", {"sent": 0, "reached": 0})
        lines.append(f"{m:10} {r['sent']:>5} {r['reached']:>8} {st['reached']:>5}/{st['sent']:<6} "
                     + " ".join(f"{r[k]:>9}" for k in REACH[1:]))
    u = s["unauthenticated"]
    lines += ["", f"without the right token: {u['sent']} calls, {u['refused']} UNAUTHENTICATED"]
    if s["restarts"]:
        lines.append(f"fresh clusters: {len(s['restarts'])}, the shard was left broken")
        lines += [f"  {why[:200]}" for why in s["restarts"]]
    nz = s["noise"]
    lines.append(f"noise (not judged: a loaded machine explains it as well): {nz['count']}"
                 + (f" ({', '.join(f'{k} {v}' for k, v in nz['kinds'].items())})" if nz["count"] else ""))
    for x in nz["items"][:40]:
        lines.append(f"  {x['kind']}: case {x.get('case', '-')} {x.get('method', '')} {x['why']}: {x['detail'][:120]}")
    if len(nz["items"]) > 40:
        lines.append(f"  ... {len(nz['items']) - 40} more in summary.json")
    if s.get("observed"):
        lines.append(f"observed ({len(s['observed'])} cases reported whatever they do):")
        for o in s["observed"][:5]:
            lines.append(f"  case {o['case']} {o['method']} {o['label'][:80]} -> {o['code']} "
                         f"{o['details'][:80]!r}; {o['what'][:120]}")
        if len(s["observed"]) > 5:
            lines.append(f"  ... {len(s['observed']) - 5} more in summary.json")
    if s["stopped_early"]:
        lines.append(f"stopped early: {s['stopped_early']}")
    n = sum(s["violation_counts"].values())
    lines += ["", f"violations: {n}" + (" (" + ", ".join(f"{k} {v}" for k, v in s["violation_counts"].items())
                                        + ")" if n else "")]
    for g in s["groups"]:
        lines.append(f"  {g['kind']} x{g['count']}: {g['method']} -> {g['code']} {g['details'][:100]!r}")
        lines.append(f"      first case {g['first_case']}: {g['label'][:100]}")
        if g["detail"]:
            lines.append(f"      {g['detail'][:200]}")
        lines.append(f"      request hex: {g['hex'][:96]}{'...' if len(g['hex']) > 96 else ''}")
    lines.append(f"rerun: {s['rerun']}")
    return "\n".join(lines)
