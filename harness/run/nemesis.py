"""The random nemesis: a fault schedule drawn from the run's seed before the run starts.

Like Jepsen's combined nemesis, it bundles what to break, how often and how it heals; unlike a
live random process, the whole schedule is fixed by the seed, so `--seed N` replays it.
"""
from __future__ import annotations

import random

from pschaos.harness.faults.targets import default_target
from pschaos.harness.run.scenario import At, Fault, Nemesis

DEFAULT_PARAMS = {"latency": {"latency_ms": 100, "jitter_ms": 20}, "bandwidth": {"rate_kbps": 2000},
                  "loss": {"percent": 10.0}, "slicer": {"average_size": 512, "delay_us": 200},
                  "limit_data": {"bytes": 65536}, "timeout": {"timeout_ms": 500}, "reset_peer": {"timeout_ms": 100}}


def schedule(nem: Nemesis, seed: int) -> list[Fault]:
    """Faults at seeded times: exponential gaps of mean `interval_s`, each healed after `duration_s`;
    one at a time, or with `overlap` two or more at once (a pause during a partition) whenever a
    gap is shorter than a fault."""
    rng = random.Random(f"nemesis-{seed}")
    out: list[Fault] = []
    t = nem.start_s
    while True:
        t += rng.expovariate(1.0 / nem.interval_s)
        if t > nem.stop_s:
            return out
        kind = rng.choice(nem.kinds)
        target = nem.targets.get(kind, default_target(kind))
        if isinstance(target, list):          # a list: one drawn per fault (e.g. the partition shapes)
            target = rng.choice(target)
        params = nem.params.get(kind, DEFAULT_PARAMS.get(kind, {}))
        if isinstance(params, list):          # a list: one drawn per fault (e.g. the moments a kill waits for)
            params = rng.choice(params)
        out.append(Fault(at=At(time=round(t, 3)), kind=kind, target=target, params=params,
                         duration_s=nem.duration_s))
        if not nem.overlap:
            t += nem.duration_s    # one nemesis fault at a time: the next starts after this one heals


def waits(index: int, scripted: int, nem: Nemesis | None, open_faults: list) -> bool:
    """A nemesis fault (`index` past the scenario's `scripted` faults) that is due waits while
    another nemesis fault is open, unless the nemesis overlaps them: the schedule spaces them by
    `duration_s`, but a kill timed to a protocol moment lands late and is healed `duration_s`
    after it landed, so the next one came due while it was still open (nemesis-soak seeds 96 and
    145: a kill during promotion on top of a kill during catch-up took every copy of a shard)."""
    return nem is not None and not nem.overlap and index >= scripted and \
        any(o.spec_index >= scripted for o in open_faults)
