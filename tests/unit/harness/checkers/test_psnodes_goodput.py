"""ETTR and goodput of psnodes' workers: time on kept steps over each worker's span."""
from __future__ import annotations

from pschaos.harness.checkers.goodput import psnodes_goodput


def ev(t, f, node, pid, type_="info", **v):
    return {"t": t, "node": node, "type": type_, "f": f, "pid": pid, "value": {"worker": node, **v}}


def worker(node, pid, t0, n, dt=1.0):
    """A worker process: its first pull at t0, then n steps dt apart."""
    out = [ev(t0, "pull", node, pid, "invoke")]
    out += [ev(t0 + dt * (i + 1), "train-step", node, pid, step=i) for i in range(n)]
    return out


def test_a_worker_that_only_trained_spent_all_its_span_on_steps():
    h = worker("worker-0", 1, 0.0, 4) + [ev(4.0, "train-done", "worker-0", 1, steps=4)]
    assert psnodes_goodput(h, 0, 8) == {"ettr": 1.0, "goodput": 1.0, "surviving_steps": 4}


def test_a_killed_workers_downtime_and_restart_setup_are_not_training():
    # 4 steps, killed at 4, its restart's first call at 8, 4 more steps: 8 s of steps in a 12 s span
    h = worker("worker-0", 1, 0.0, 4) + worker("worker-0", 2, 8.0, 4) + [ev(12.0, "train-done", "worker-0", 2, steps=4)]
    g = psnodes_goodput(h, 0, 16)
    assert g["ettr"] == round(8 / 12, 4) and g["surviving_steps"] == 8


def test_lost_acknowledged_updates_take_their_share_and_no_figure_is_none():
    h = worker("worker-0", 1, 0.0, 4) + [ev(4.0, "train-done", "worker-0", 1, steps=4)]
    assert psnodes_goodput(h, 2, 8)["ettr"] == 0.75
    assert psnodes_goodput(h, None, 8)["ettr"] is None            # no-lost-acks could not say
    assert psnodes_goodput(worker("worker-0", 1, 0.0, 4), 0, 8)["ettr"] is None   # never finished
