"""Did the scenario happen as written? The run's own evidence, judged like any other check.

A fault that never came due, failed to inject or to heal, a flap thread that crashed, a
`kill during: checkpoint` that did not land mid-write, a worker that did not finish the workload
it was given: each means the run did not test what the scenario claims, so its verdict cannot
be pass. This check is never False (nothing in the system under test was shown wrong), only
True or "unknown" with every reason.
"""
from __future__ import annotations

import re

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, unknown, victims
from pschaos.harness.checkers.training import short_of_workload


def _fault_reasons(history: list[dict], ctx: dict) -> tuple[list[str], int]:
    reasons: list[str] = []
    for e in by_f(history, "fault-missed"):
        v = e["value"]
        reasons.append(f"fault {v['index']} ({v['kind']} {v.get('selector', '')}) never came due: {v.get('why', '')}")
    for e in by_f(history, "fault-error"):
        v = e["value"]
        reasons.append(f"fault {v.get('index', '?')} ({v['kind']} {v.get('selector', v.get('target', ''))}) "
                       f"failed: {v['error']}")
    starts = [e["value"] for e in by_f(history, "fault-start") if "index" in e["value"]]
    stops = {e["value"]["index"] for e in by_f(history, "fault-stop") if "index" in e["value"]}
    for e in by_f(history, "fault-stop"):
        v = e["value"]
        if v.get("heal_error"):
            reasons.append(f"fault {v.get('index', '?')} ({v['kind']} {v['target']}) did not heal: {v['heal_error']}")
        if v.get("cut_short"):
            reasons.append(f"fault {v.get('index', '?')} ({v['kind']} {v['target']}) was healed at the end of the "
                           "workload, before the time or step the scenario gave it")
    for e in by_f(history, "workload-timeout"):
        reasons.append(f"workers {e['value']['running']} were still running after {e['value']['limit_s']} s; "
                       "the run stopped waiting")
    for v in starts:
        if v["index"] not in stops:
            reasons.append(f"fault {v['index']} ({v['kind']} {v['target']}) was never healed")
        during = (v.get("params") or {}).get("during")
        if during == "checkpoint" and not v.get("caught_writing"):
            reasons.append(f"fault {v['index']} (kill {v['target']} during checkpoint) found no checkpoint "
                           "being written: it was an ordinary kill")
        if during == "catch-up" and not v.get("caught_catching_up"):
            missed = "its power did not go mid-catch-up" if v.get("kind") == "power-loss" else \
                "its primary was not killed mid-catch-up"
            reasons.append(f"fault {v['index']} ({v.get('kind', 'kill')} {v['target']} during catch-up) never saw the "
                           f"restarted copy back outside the ISR: {missed}")
        if (v.get("params") or {}).get("sync_of") and not v.get("caught_syncing"):
            reasons.append(f"fault {v['index']} ({v.get('kind')} {v['target']} at the sync of "
                           f"{v['params']['sync_of']}) saw no such sync: its power went as an ordinary cut's")
        if during in ("migration", "handoff") and not v.get("caught_migrating"):
            reasons.append(f"fault {v['index']} (kill {v['target']} during {during}) found no shard migration in "
                           "that phase: it was an ordinary kill")
        if during == "promotion" and not v.get("caught_promoting"):
            reasons.append(f"fault {v['index']} (kill during promotion on shard {v.get('shard', '?')}) saw no "
                           "successor named: only the primary was killed")
    if isinstance(ctx.get("job"), dict):
        reasons += _job_fault_reasons(history)
    scheduled = ctx.get("scheduled_faults")
    if scheduled is not None:
        fired = {v["index"] for v in starts}
        accounted = fired | {e["value"]["index"] for e in by_f(history, "fault-missed")} | \
            {e["value"].get("index") for e in by_f(history, "fault-error")}
        for i in range(scheduled):
            if i not in accounted:
                reasons.append(f"fault {i} of the schedule left no trace in the history")
    return reasons, len(starts)


def scenario_ran(history: list[dict], ctx: dict) -> Verdict:
    if not by_f(history, "run-start"):
        return unknown("the history has no run-start: it is not a whole run")
    reasons, fired = _fault_reasons(history, ctx)
    missing, short = short_of_workload(history, ctx)
    for w in missing:
        reasons.append(f"{w} never finished its workload (no train-done)")
    for s in short:
        reasons.append(f"{s['worker']} did {s['steps']} of the {s['given']} steps it was given")
    details = {"faults_fired": fired, "reasons": reasons}
    if reasons:
        return Verdict("unknown", {"reason": "; ".join(reasons[:5]), **details})
    return Verdict(True, details)


PROCESS_FAULTS = (*KILLS, "stop", "pause", "restart", "memory-limit", "disk-full")   # memory-limit: OOM-killed, healed by a restart; disk-full: must keep serving


def nodes_back(history: list[dict], ctx: dict) -> Verdict:
    """Every copy and worker a process fault took down is running again at the end: a copy answers
    its final status, a worker finished a run that began after its last heal. One that stays dead
    fails (the run healed it, so it must be back), whatever checks the scenario named."""
    if not by_f(history, "run-start"):
        return unknown("the history has no run-start: it is not a whole run")
    if isinstance(ctx.get("job"), dict):
        return _job_roles_back(history)
    hit: dict[str, float] = {}
    for e in by_f(history, "fault-start"):
        v = e["value"]
        if v.get("kind") in PROCESS_FAULTS:
            for name in victims(v):
                if name.startswith(("shard-", "worker-")):
                    hit.setdefault(name, e["t"])
    healed = {name: e["t"] for e in by_f(history, "fault-stop") for name in victims(e["value"]) if name in hit}
    alive = {s["node"]: s.get("alive") for s in (e["value"] for e in by_f(history, "final-state"))}
    done_at: dict[str, list[float]] = {}
    for e in by_f(history, "train-done"):
        done_at.setdefault(e["value"]["worker"], []).append(e["t"])
    dead = []
    for name in sorted(hit):
        if name.startswith("shard-"):
            if not alive.get(name):
                dead.append({"node": name, "why": "no answer to its final status"})
        elif not any(t > healed.get(name, hit[name]) for t in done_at.get(name, [])):
            dead.append({"node": name, "why": "no run finished after its last heal"})
    return Verdict(not dead, {"faulted": sorted(hit), "dead_at_end": dead})


def _job_roles_back(history: list[dict]) -> Verdict:
    """A training job's roles: one a kill or stop took down is back when it started again after
    the fault (its scheduler's `job-launch`, or its shim's `job-start` for a rank torchrun forks)
    and did not fail after its last start; a paused one, when its pause was healed (SIGCONT sent)."""
    hit: dict[str, tuple[str, float]] = {}
    for e in by_f(history, "fault-start"):
        v = e["value"]
        if v.get("kind") in PROCESS_FAULTS:
            for name in victims(v):
                hit[name] = (v["kind"], e["t"])           # the last fault on it is what must be undone
    healed = {name: e["t"] for e in by_f(history, "fault-stop") if not e["value"].get("heal_error")
              for name in victims(e["value"]) if name in hit}
    started: dict[str, list[float]] = {}
    failed: dict[str, list[float]] = {}           # a process's failed exits (the supervisor's record)
    for e in history:
        if e.get("f") in ("job-launch", "job-start"):
            name = e["value"].get("process") or e["value"].get("worker") or e.get("node")
            started.setdefault(name, []).append(e["t"])
        elif e.get("f") == "job-exit" and e["value"].get("exit_code") not in (0, None):
            failed.setdefault(e["value"].get("process") or e.get("node"), []).append(e["t"])
    dead = []
    for name, (kind, t) in sorted(hit.items()):
        if kind == "pause":
            if name not in healed:
                dead.append({"node": name, "why": "its pause was never healed"})
        elif not any(s > t for s in started.get(name, [])):
            dead.append({"node": name, "why": f"not started again after the {kind}"})
        elif any(x > max(started[name]) for x in failed.get(name, [])):
            dead.append({"node": name, "why": f"started again after the {kind}, then failed (job-exit)"})
    return Verdict(not dead, {"faulted": sorted(hit), "dead_at_end": dead})


def _job_fault_reasons(history: list[dict]) -> list[str]:
    """What a training job's faults did not do as written: a cut that dropped nothing, a cut
    whose role was started again meanwhile (its new sockets were not cut), a kill timed to a
    checkpoint write after which the job resumed from that very checkpoint (it was committed:
    the kill came after the write, not in it)."""
    out = []
    for e in by_f(history, "fault-stop"):
        v = e["value"]
        if v.get("kind") not in ("loss", "partition"):
            continue
        where = f"fault {v.get('index', '?')} ({v['kind']} {v.get('target', '')})"
        if v.get("packets_dropped") in (0, None):
            out.append(f"{where} dropped no packet ({v.get('packets_dropped')!r}): the rules matched no traffic of the job")
        ev = v.get("evidence") or {}
        pids = [(ev.get(k) or {}).get("pid") for k in ("before", "after")]
        if pids[0] != pids[1]:
            out.append(f"{where}: the cut role's process changed during the cut (pid {pids[0]} -> {pids[1]}); "
                       "its new sockets were not cut")
    resumes = [(e["t"], e["value"].get("step")) for e in by_f(history, "job-resume")]
    for e in by_f(history, "fault-start"):
        v = e["value"]
        m = re.match(r"checkpoint of step (\d+)", v.get("caught_writing") or "")
        if not m:
            continue
        nxt = next((s for t, s in resumes if t > e["t"]), None)
        if nxt is not None and nxt >= int(m.group(1)):
            out.append(f"fault {v.get('index', '?')} (kill {v['target']} during checkpoint): the job resumed from "
                       f"step {nxt}, the checkpoint the kill was timed to: it was committed before the kill landed")
    return out
