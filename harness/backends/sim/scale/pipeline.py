"""A sync shard's replication pipeline: how long workers wait on each other's replicate calls.

Why: in sync mode a primary answers a pull only with what every in-sync copy applied (psnodes'
node, "read only what is replicated"), acks a push once its entry is replicated, and its sender
keeps one Replicate in flight per replica, shipping whatever piled up meanwhile as the next one
(psnodes/replication/replication.py). So a worker's pull that lands while another worker's push is being
replicated waits for that call to come back, and a push that finds the sender busy waits for the
call in flight before its own goes. With a step's own overhead at 1.5 ms (the CPU model's
calibration) these waits were 0.36 ms of a 3.5 ms step for 4 workers on 4 shards in the per-RPC
twin, which runs the real code; a scale level without them stepped 14% faster
(tests/integration/test_scale_twin_agreement.py). The waits also line workers up (a pull that
waited ends as the push it waited for is acked, so both workers compute side by side and push
together), which no closed-form queue of independent arrivals captures, so this module runs the
pipeline itself: one shard, its sender, and the workers that touch it, each looping pull,
compute (the calibrated step, lognormal spread), push, in a small deterministic discrete-event
run (a seeded generator, a counter for ties). The shards of a dense step see the same workers at
the same moments, so one shard stands for all; a sparse step's shards see different workers,
so its wait is the largest of `touched` independent shards' waits.

Coarsenings: every copy of the shard answers alike (its replicas' calls run side by side and
take the same time); the wait is measured at the step time without the primaries' CPU queue
(params.step_rate adds that queue on top); more than CAP workers on a shard keep its sender
busy all the time, so CAP of them wait as long as more would.
"""
from __future__ import annotations

import heapq
import itertools
from functools import lru_cache

import numpy as np

CAP = 32            # workers simulated on one shard: beyond, the sender never idles and waits stop growing
PUSHES = 3000       # pushes a run simulates (split among its workers)


@lru_cache(maxsize=256)
def sync_wait_s(workers: int, touched: int, think_s: float, jitter: float, fixed_s: float, msg_s: float,
                apply_s: float, rep_fixed_s: float, rep_entry_s: float, seed: int) -> float:
    """The mean time a step spends waiting on other workers' replication, beyond an uncontended
    pull and push: `workers` workers on one shard (capped at CAP), each step a pull (`fixed_s`
    out, `msg_s` back), `think_s` times exp(jitter x N(0,1)) of compute, and a push (`msg_s` out,
    the primary's `apply_s`, one Replicate, `fixed_s` back); a Replicate of n entries takes
    `rep_fixed_s` + n `rep_entry_s` (the wire both ways and both ends' CPU per call; the bytes
    and the replica's apply per entry). `touched` > 1: the largest of that many independent
    shards' waits (a sparse step)."""
    w = max(1, min(workers, CAP))
    if w == 1:
        return 0.0
    rng = np.random.default_rng([seed, w, 7919])
    def rep_time(n: int) -> float:
        return rep_fixed_s + n * rep_entry_s

    steps = max(40, PUSHES // w)
    thinks = think_s * np.exp(jitter * rng.standard_normal((w, steps))) if jitter else np.full((w, steps), think_s)
    tie = itertools.count()
    heap: list = []
    seq = replicated = sending = 0          # applied at the primary; acked by the replicas; in flight up to
    busy = False
    waiting: list = []                      # (seq needed, tie, worker, kind) until replicated >= seq
    step_of = [0] * w
    began = [0.0] * w
    waits: list[list[float]] = [[] for _ in range(w)]
    bare = fixed_s + msg_s + msg_s + apply_s + rep_time(1) + fixed_s     # an uncontended pull and push

    def at(t: float, what: str, who: int = -1) -> None:
        heapq.heappush(heap, (t, next(tie), what, who))

    def send(now: float) -> None:
        nonlocal busy, sending
        if busy or seq <= replicated:
            return
        busy, n, sending = True, seq - replicated, seq
        at(now + rep_time(n), "replicated")

    for i in range(w):
        at(0.0, "pull", i)
    while heap:
        now, _, what, who = heapq.heappop(heap)
        if what == "pull":                  # the worker sends its pull
            began[who] = now
            at(now + fixed_s, "pull-in", who)
        elif what == "pull-in":             # at the primary: answered once what it holds is replicated
            if replicated >= seq:
                at(now + msg_s, "pulled", who)
            else:
                heapq.heappush(waiting, (seq, next(tie), who, "pulled"))
        elif what == "pulled":              # compute, then push
            at(now + float(thinks[who, step_of[who]]), "push", who)
        elif what == "push":
            at(now + msg_s + apply_s, "push-in", who)
        elif what == "push-in":             # applied; acked once replicated
            seq += 1
            heapq.heappush(waiting, (seq, next(tie), who, "pushed"))
            send(now)
        elif what == "replicated":
            busy, replicated = False, sending
            while waiting and waiting[0][0] <= replicated:
                _, _, i, kind = heapq.heappop(waiting)
                at(now + (msg_s if kind == "pulled" else fixed_s), kind, i)
            send(now)
        elif what == "pushed":              # the step is done
            took = now - began[who]
            waits[who].append(took - float(thinks[who, step_of[who]]) - bare)
            step_of[who] += 1
            if step_of[who] < steps:
                at(now, "pull", who)
    samples = np.array([x for ws in waits for x in ws[len(ws) // 5:]])      # a fifth of each warms up
    if touched <= 1:
        return max(0.0, float(samples.mean()))
    xs = np.sort(samples)                   # E[max of k iid draws] from the empirical distribution
    n = xs.size
    cdf = np.arange(1, n + 1) / n
    weights = cdf ** touched - np.concatenate(([0.0], cdf[:-1])) ** touched
    return max(0.0, float((xs * weights).sum()))


__all__ = ["CAP", "sync_wait_s"]
