"""Which of psnodes' checks a scenario's run gives evidence for: every one that applies runs.

A scenario used to name its checks, and a check left out was never run: monotone-reads was
missing from the one-way cut, the very scenario where a read of undone state is most likely.
Now every check whose evidence the run produces is selected by default; a scenario adds the
ones that need a setting of its own (a time budget, a second run) and excludes one only with a
reason the report prints (harness/run/selection.py).

Applicability is decided from the scenario as written (the cluster, the schedule, the nemesis),
never from what a run happened to record: a fault that did not fire must leave its check
unknown, not unselected. Each rule below returns None when the check applies, or the reason
it does not, in words a user reads in the report.
"""
from __future__ import annotations

import re
from typing import Callable

from pschaos.harness.checkers.base import KILLS

# process faults that take a copy or a worker away (the checkers' own lists: replicas.py, barrier.py)
DOWN = (*KILLS, "stop", "restart")
AWAY = DOWN + ("pause", "flap")
CUTS = ("partition", "link-down")
MIGRATIONS = ("scale-out-shards", "scale-in-shards")
COPY = re.compile(r"^(shard-\d+/\d+|primary\(|replicas?\(|shard\(|nodes$)")
WORKER = re.compile(r"worker")
# psnodes' checks that need a setting or a second run of the scenario's own: run when named
ON_REQUEST = {
    "failover-budget": "a time budget of your own (expect.failover_budget_ms): add it to expect.checks to judge one",
    "converge-baseline": "runs the scenario a second time without faults: add it to expect.checks to pay for that",
    "migration-transparent": "runs the scenario a second time without faults and needs one worker and migrations as "
                             "the only faults: add it to expect.checks where that holds",
}


def sides(target: str) -> tuple[str, str | None]:
    """A link target's two ends ('A -> B', 'A <-> B'), or a process target and None."""
    for arrow in ("<->", "->"):
        if arrow in target:
            a, b = target.split(arrow, 1)
            return a.strip(), b.strip()
    return target.strip(), None


class Plan:
    """The scenario's faults as (kind, target, params, duration_s), the nemesis' draws included."""

    def __init__(self, cluster: dict, faults: list[dict], nemesis: dict | None, grace_s: float,
                 default_target: Callable[[str], str] = lambda kind: "replica(shard=any)",
                 drawn: list[dict] | str | None = None) -> None:
        self.cluster, self.grace = cluster, grace_s

        def plan(fs: list[dict]) -> list[tuple]:
            return [(f["kind"], f.get("target") or "workers", f.get("params") or {}, f.get("duration_s")) for f in fs]
        self.faults = plan(faults)
        # certain to fire: the scenario's own faults, and a nemesis' draws where the run's seed is
        # known (a run's selection: the schedule is fixed by the seed before the run starts);
        # without a seed its kinds may never be drawn; "any": whatever some seed may draw (what a
        # scenario may exclude or expect to find)
        self.scheduled = self.faults + plan(drawn if isinstance(drawn, list) else [])
        self.random = bool(nemesis)
        if nemesis:
            for kind in nemesis.get("kinds", []):
                ts = (nemesis.get("targets") or {}).get(kind, default_target(kind))
                ps = (nemesis.get("params") or {}).get(kind, {})
                for t in [ts] if isinstance(ts, str) else ts:
                    for p in [ps] if isinstance(ps, dict) else ps:
                        self.faults.append((kind, t.replace(" ", ""), p, nemesis.get("duration_s")))
        if drawn == "any":
            self.scheduled = list(self.faults)

    def any(self, kinds: tuple[str, ...], target: Callable[[str], bool] = lambda t: True) -> bool:
        return any(k in kinds and target(t) for k, t, _, _ in self.faults)

    def surely(self, kinds: tuple[str, ...], target: Callable[[str], bool] = lambda t: True) -> bool:
        """A scheduled fault of these kinds on such a target: a nemesis may draw none at a seed."""
        return any(k in kinds and target(t) for k, t, _, _ in self.scheduled)


def _copy(t: str) -> bool:
    return bool(COPY.match(t))


def _worker(t: str) -> bool:
    return bool(WORKER.search(t))


def _trains(p: Plan) -> str | None:
    return None if p.cluster.get("workers", 2) else "cluster.workers is 0: no worker trains, pushes or reads"


def _replica(t: str) -> bool:
    return t.startswith(("replica(", "replicas("))


def _catch_up(p: Plan) -> str | None:
    """A replica taken down comes back a replica and catches up. A killed primary or a copy named
    outright may come back as the shard's primary instead (a restore when no replica could take
    over: seen when a new shard's primary died before its replicas heard from it), with nothing
    to catch up, so those faults give no certain evidence."""
    # a kill timed to a promotion takes the primary and its successor, whatever replica(...) it names
    if not any(k in DOWN and _replica(t) and (params or {}).get("during") != "promotion"
               for k, t, params, _ in p.scheduled):
        return ("no scheduled fault takes a replica down (kill, stop or restart of replica(...); a nemesis may "
                "draw none at a seed); a killed primary may come back as the primary by restore, with nothing to "
                "catch up: add it where a catch-up is certain")
    if any(k in DOWN and _copy(t) and params.get("wipe") for k, t, params, _ in p.faults):
        return "a copy restarts with its disk wiped: it catches up by snapshot by design, not by delta"
    return None


def _staleness(p: Plan) -> str | None:
    return None if p.cluster.get("training", "async") != "async" else \
        "async training has no barrier and no staleness bound (bsp or ssp have)"


def _barrier_live(p: Plan) -> str | None:
    if p.cluster.get("training", "async") == "async":
        return "async training has no barrier (bsp or ssp have)"
    lost = p.surely(AWAY, _worker) or p.surely(("scale-in",)) or any(
        k in CUTS and b is not None and (_worker(a) and "etcd" in b or "etcd" in a and _worker(b))
        for k, t, _, _ in p.scheduled for a, b in [sides(t)])
    return None if lost else ("no fault takes a worker away (kill, stop, pause, scale-in, a cut from etcd): the "
                              "barrier never has to move on without one")


def _stops_acking(p: Plan) -> str | None:
    """A sync primary cut from its own replicas for longer than the grace. A scheduled cut of a
    primary from anything else (etcd, workers) is also recorded as a cut primary, which may
    ack on through its lease: the check would judge that cut too, so it does not apply."""
    if p.cluster.get("replication", "sync") != "sync":
        return "async replication: a primary cut from its replicas acks on by design"
    if p.random:
        return "a nemesis draws its cuts at run time: add stops-acking where its partitions cut a primary off"
    cut, other = False, False
    for k, t, _, dur in p.faults:
        a, b = sides(t)
        if k not in CUTS or b is None or not a.startswith("primary("):
            continue
        if b.startswith("replica") and (dur is None or dur > p.grace + 1.0):
            cut = True
        elif not b.startswith("replica"):
            other = True
    if other:
        return "a primary is cut from something other than its replicas (it may ack on through its lease)"
    return None if cut else f"no fault cuts a primary off from its replicas for longer than the {p.grace} s grace"


def _losses(p: Plan) -> str | None:
    """Losses declared by a restore from checkpoint, in sync mode on fixed shards: async
    failover may lose acks within max_lag (no-lost-acks judges that bound), and a migration's
    acks move with their keys (no-lost-acks judges them through the migrating audit buckets)."""
    if p.cluster.get("replication", "sync") != "sync":
        return "async replication may lose acknowledged updates within max_lag on a failover: no-lost-acks judges that bound"
    if p.any(MIGRATIONS):
        return "acks move with their keys in a migration: no-lost-acks judges them through the migrating audit buckets"
    return _trains(p)


def _acks_durable(p: Plan) -> str | None:
    if p.cluster.get("replication", "sync") != "sync":
        return "async replication acks before its replicas apply: there is no in-sync promise to judge"
    return _trains(p)


def _best_promoted(p: Plan) -> str | None:
    """A fault that takes a primary away (a process fault on primary(...), or a cut of it from its
    replicas): a failover elects among candidates. Elsewhere no election may happen at all; nor
    after a power cut of every copy (`copies: all`), which leaves no candidate: a restore follows."""
    deposes = any(k in AWAY and t.startswith("primary(") and (params or {}).get("copies") != "all"
                  for k, t, params, _ in p.scheduled) or any(
        k == "kill" and (params or {}).get("during") == "promotion" for k, _, params, _ in p.scheduled) or any(
        k in CUTS and b is not None and a.startswith("primary(") and b.startswith("replica")
        for k, t, _, _ in p.scheduled for a, b in [sides(t)])
    return None if deposes else ("no scheduled fault takes a primary away (a nemesis may draw none at a seed), so "
                                 "no election is certain to happen")


def _single_owner(p: Plan) -> str | None:
    return None if p.any(MIGRATIONS) else "no shard is added or removed: no key changes owner"


RULES: dict[str, Callable[[Plan], str | None]] = {
    "no-lost-acks": _trains, "single-primary": lambda p: None, "exactly-once": _trains,
    "replicas-match": lambda p: None, "converged": _trains, "catch-up-by-delta": _catch_up,
    "delta-complete": _trains, "pulled-copy-matches": _trains, "monotone-reads": _trains,
    "staleness": _staleness, "barrier-live": _barrier_live, "checkpoints-atomic": lambda p: None,
    "checkpoints-monotone": lambda p: None, "stops-acking": _stops_acking, "losses-accounted": _losses,
    "single-owner": _single_owner, "handoff-continuity": _single_owner, "no-spurious-failovers": lambda p: None, "acks-durable": _acks_durable,
    "reads-committed": _acks_durable, "ownership-exact": lambda p: None,
    "best-promoted": _best_promoted,
    "checkpoint-loads": lambda p: None if p.surely(DOWN + ("flap",), _copy) else
    "no scheduled fault takes a shard's copy down (a nemesis may draw none at a seed): no copy is certain to "
    "restart from its checkpoint",
    "lag-bounded": lambda p: None if p.cluster.get("replication", "sync") == "async" else
    "sync replication acks only what its replicas applied: there is no lag bound to judge",
    **{name: (lambda why: lambda p: why)(why) for name, why in ON_REQUEST.items()},
}
PSNODES_CHECKS = tuple(RULES)


def psnodes(cluster: dict, faults: list[dict], nemesis: dict | None, grace_s: float = 1.0,
            default_target: Callable[[str], str] = lambda kind: "replica(shard=any)",
            drawn: list[dict] | str | None = None) -> dict[str, str | None]:
    """Each of psnodes' checks: None when this scenario's run gives it evidence, else why not.
    `default_target`: the target a nemesis draws for a kind it names no target for (run/nemesis.py);
    `drawn`: the nemesis' faults at the run's seed, judged as surely as scheduled ones (review of
    issue 32, finding 7: without them a random schedule never judged best-promoted,
    checkpoint-loads or catch-up-by-delta, whatever it drew)."""
    plan = Plan(cluster, faults, nemesis, grace_s, default_target, drawn)
    return {name: rule(plan) for name, rule in RULES.items()}
