"""Three-valued verdicts, as in Jepsen's checker: True, False, or "unknown" (could not decide).

A checker that raises yields "unknown" with the error: a crash is never a pass. A checker
without the evidence it needs says "unknown" too, and so does an empty list of checks: no
evidence, no pass.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

#: fault kinds that SIGKILL their target and start it again at the heal: a kill, and a power cut of
#: its disk, a bit flipped while it is down (harness/faults/process.py, harness/faults/storage.py)
KILLS = ("kill", "power-loss", "torn-write", "bit-rot")

Valid = bool | Literal["unknown"]


@dataclass
class Verdict:
    valid: Valid
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"valid": self.valid, "details": self.details}


def unknown(reason: str, **details: Any) -> Verdict:
    """The checker had no evidence to judge by: never a pass."""
    return Verdict("unknown", {"reason": reason, **details})


def worst(a: Valid, b: Valid) -> Valid:
    if a is False or b is False:
        return False
    if a == "unknown" or b == "unknown":
        return "unknown"
    return True


def compose(verdicts: dict[str, Verdict]) -> Valid:
    """The worst of the verdicts; "unknown" when there are none (nothing was checked)."""
    if not verdicts:
        return "unknown"
    out: Valid = True
    for v in verdicts.values():
        out = worst(out, v.valid)
    return out


def run_check(fn: Callable[[list[dict], dict], Verdict], history: list[dict], ctx: dict) -> Verdict:
    try:
        v = fn(history, ctx)
    except Exception as e:  # noqa: BLE001 - a crash must become "unknown", never a pass
        return Verdict("unknown", {"error": f"{e.__class__.__name__}: {e}",
                                   "trace": traceback.format_exc(limit=3)})
    if not isinstance(v, Verdict) or v.valid not in (True, False, "unknown"):
        return Verdict("unknown", {"error": f"checker returned {v!r}, not a Verdict"})
    return v


class History(list):
    """A run's events, with an index by (f, type) built on first use: the checkers and metrics
    filter one history some fifty times, and a 30 s soak's holds some 10^5 events. The index is
    rebuilt whenever the length changed (the judge never edits a history in place)."""

    def select(self, f: str, type_: str | None) -> list[dict]:
        idx = self.__dict__.get("_index")
        if idx is None or self.__dict__.get("_indexed") != len(self):
            idx = {}
            for e in self:
                g, t = e.get("f"), e.get("type")
                idx.setdefault((g, None), []).append(e)        # type_=None: every type
                if t is not None:
                    idx.setdefault((g, t), []).append(e)
            self.__dict__.update(_index=idx, _indexed=len(self))
        return list(idx.get((f, type_), ()))


def by_f(history: list[dict], f: str, type_: str | None = None) -> list[dict]:
    """The events of kind `f` (and type `type_`), in history order."""
    if isinstance(history, History):
        return history.select(f, type_)
    return [e for e in history if e.get("f") == f and (type_ is None or e.get("type") == type_)]


def final_states(history: list[dict]) -> list[dict]:
    return [e["value"] for e in by_f(history, "final-state")]


def op_key(e: dict) -> tuple:
    """What pairs an invoke with its completion: the op id within its process (a restarted
    worker counts its op ids from 1 again)."""
    return (e.get("pid"), e.get("op_id"))


def idem(v: dict) -> str:
    """The applied-set key of a push: worker and incarnation (a restarted worker is a new one), and
    the shard its request id was numbered for when a migration re-routed it elsewhere (`origin`),
    as the shard records it (psnodes/store/moving.py push_key).
    A re-routed part is its own identity, `worker#inc@origin/t1/t2..` (the shards it was split to);
    a duplicate answered from an ancestor's key (the whole push, or a coarser part: `applied_as`)
    is that key, as the shard that applied it holds it."""
    if v.get("applied_as"):
        key, by = v["applied_as"], v.get("applied_on", v.get("shard"))
        return key[: -len(f"@{by}")] if key.endswith(f"@{by}") else key
    key = f"{v['worker']}#{v.get('incarnation', 0)}"
    origin = v.get("origin")
    if v.get("part"):
        return f"{key}@{origin if origin is not None else v.get('shard')}/" + "/".join(str(t) for t in v["part"])
    return key if origin is None or origin == v.get("shard") else f"{key}@{origin}"


def shard_of(node: str) -> int | None:
    """`shard-3/1` -> 3; None for workers, etcd and the harness."""
    if not node.startswith("shard-"):
        return None
    return int(node.split("-")[1].split("/")[0])


def landed(e: dict) -> float:
    """When a fault-start's fault took effect: its record is stamped as the inject began, and a
    kill timed to a moment (`during`, `after_s`) says how long it waited (`in_place_after_s`)."""
    return e["t"] + float(e["value"].get("in_place_after_s") or 0)


def went_down(e: dict) -> list[tuple[str, float]]:
    """(node, when) for each process a fault-start took down: what a timed kill waited for (its
    `down` list, or its target) when it landed; its other victims (the copy a kill during a
    catch-up restarts first to be caught up) as it began."""
    v = e["value"]
    hit = v.get("down") or [v.get("target")]
    return [(n, landed(e) if n in hit else e["t"]) for n in victims(v)]


def victims(v: dict) -> list[str]:
    """The processes a fault's start (or stop) names as hit: its target, or every copy a kill
    timed to a protocol moment took down (mid-promotion: the deposed primary and its successor;
    mid-catch-up: the restarted replica and its primary)."""
    vs = v.get("victims")
    return [str(x) for x in vs] if isinstance(vs, list) and vs else [str(v.get("target", ""))]
