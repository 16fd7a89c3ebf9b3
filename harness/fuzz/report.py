"""The outcome of a fuzz run: answers per method and status code, and the violations found.

Violations are kept whole for the first few of each kind and counted for all; `groups` folds
the rest by (kind, method, code, start of the details), so ten thousand INTERNAL answers to
random bytes read as one finding with a count and the first case that showed it. Every kept
violation carries the request's bytes (hex, truncated) for a repro.
"""
from __future__ import annotations

from collections import Counter, defaultdict

SCHEMA = "pschaos.fuzz/1"
KINDS = ("unknown-or-internal", "state-changed-by-refused", "invalid-accepted", "divergence", "failover",
         "unauthenticated-accepted", "hang", "node-died")
KEEP_PER_KIND = 20


class Summary:
    def __init__(self, seed: int, requests: int, rerun: str) -> None:
        self.seed, self.requests, self.rerun = seed, requests, rerun
        self.counts: dict[str, Counter] = defaultdict(Counter)
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

    def count(self, method: str, codes: list[str], unauthenticated: bool, replay: bool = False) -> None:
        if replay:
            self.replays += 1
        else:
            self.sent += 1
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
        key = (kind, rec["method"], rec["code"], rec["details"][:48])
        g = self.groups.setdefault(key, {"kind": kind, "method": rec["method"], "code": rec["code"],
                                         "details": rec["details"][:160], "detail": detail[:200],
                                         "count": 0, "first_case": rec["case"], "label": rec["label"][:120],
                                         "hex": rec["hex"]})
        g["count"] += 1

    def noise(self, rec: dict | None, found: list[tuple[str, str]], why: str) -> None:
        """Something a loaded machine explains as well as the request did: kept apart, not judged."""
        self.n_noise += len(found)
        for kind, detail in found:
            if len(self.noises) < KEEP_PER_KIND * 2:
                self.noises.append({"kind": kind, "why": why, "detail": detail[:300],
                                    **({"case": rec["case"], "method": rec["method"], "code": rec["code"],
                                        "label": rec["label"][:120], "hex": rec["hex"]} if rec else {})})

    def stop(self, why: str) -> None:
        self.stopped = why

    def restarted(self, why: str) -> None:
        self.restarts.append(why)

    def n_violations(self) -> int:
        return sum(self.kinds.values())

    def to_json(self, elapsed: float) -> dict:
        return {"schema": SCHEMA, "seed": self.seed, "requests": self.requests, "sent": self.sent,
                "calls": self.calls, "replays": self.replays, "elapsed_s": round(elapsed, 1),
                "counts": {m: dict(sorted(c.items())) for m, c in sorted(self.counts.items())},
                "unauthenticated": {"sent": self.unauth["sent"], "refused": self.unauth["refused"]},
                "violation_counts": dict(self.kinds), "violations": self.kept,
                "groups": sorted(self.groups.values(), key=lambda g: (g["kind"], -g["count"])),
                "noise": {"count": self.n_noise, "items": self.noises},
                "stopped_early": self.stopped, "restarts": self.restarts, "rerun": self.rerun}


def format_text(s: dict) -> str:
    """The summary for a terminal: answers per method and code, then each group of violations."""
    codes = sorted({c for m in s["counts"].values() for c in m})
    head = f"{'method':10}" + "".join(f" {c:>5}" for c in codes)
    lines = [f"pschaos fuzz: seed {s['seed']}, {s['sent']}/{s['requests']} requests ({s['calls']} calls, "
             f"{s['replays']} replays) in {s['elapsed_s']}s", "", head]
    for m, cs in s["counts"].items():
        lines.append(f"{m:10}" + "".join(f" {cs.get(c, 0):>{max(len(c), 5)}}" for c in codes))
    u = s["unauthenticated"]
    lines += ["", f"without the right token: {u['sent']} calls, {u['refused']} UNAUTHENTICATED"]
    if s["restarts"]:
        lines.append(f"fresh clusters: {len(s['restarts'])}, the shard was left broken")
        lines += [f"  {why[:200]}" for why in s["restarts"]]
    if s["noise"]["count"]:
        kinds = Counter(x["kind"] for x in s["noise"]["items"])
        lines.append(f"not judged (the machine explains them as well): {s['noise']['count']} "
                     f"({', '.join(f'{k} {v}' for k, v in kinds.items())}); see noise in summary.json")
    if s["stopped_early"]:
        lines.append(f"stopped early: {s['stopped_early']}")
    n = sum(s["violation_counts"].values())
    lines += ["", f"violations: {n}" + (" (" + ", ".join(f"{k} {v}" for k, v in s["violation_counts"].items())
                                        + ")" if n else "")]
    for g in s["groups"]:
        lines.append(f"  {g['kind']} x{g['count']}: {g['method']} -> {g['code']} {g['details'][:100]!r}")
        lines.append(f"      first case {g['first_case']}: {g['label'][:100]}")
        if g["detail"]:
            lines.append(f"      {g['detail'][:160]}")
        lines.append(f"      request hex: {g['hex'][:96]}{'...' if len(g['hex']) > 96 else ''}")
    lines.append(f"rerun: {s['rerun']}")
    return "\n".join(lines)
