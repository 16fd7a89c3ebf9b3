"""staleness and barrier-live judge the BSP/SSP barrier against membership (harness/checkers/barrier.py):
exact histories, each check shown passing, failing and unknown."""
from harness.checkers import CHECKERS

from .histories import ev, fault_start, fault_stop

BSP = {"training": "bsp", "member_ttl_s": 2}
SSP1 = {"training": "ssp", "staleness": 1, "member_ttl_s": 2}


def view(t, gen, members, node="shard-0/0"):
    return ev(t, "member-view", {"shard": 0, "generation": gen, "members": members}, node=node)


def gated_pull(t_inv, t_ok, worker, min_clock, node="shard-0/0", shard=0):
    op = f"{worker}:pull:{t_inv}"
    v = {"worker": worker, "shard": shard, "min_clock": min_clock}
    return [ev(t_inv, "pull", v, "invoke", worker, op),
            ev(t_ok, "pull", {**v, "epoch": 1, "seq": 1, "node": node}, "ok", worker, op)]


def pushed(t, worker, clock):
    return ev(t, "push", {"worker": worker, "req_id": clock + 1, "shard": 0, "clock": clock}, "invoke", worker)


def step(t, worker, s):
    return ev(t, "train-step", {"worker": worker, "step": s, "loss": 0.1}, node=worker)


TWO = {"worker-0": 0, "worker-1": 0}


def test_a_member_of_the_generation_bounds_the_step():
    h = [view(0.0, 1, TWO), pushed(0.5, "worker-1", 2), *gated_pull(1.0, 1.1, "worker-0", 3), step(1.2, "worker-0", 3)]
    assert CHECKERS["staleness"](h, BSP).valid is True
    behind = [view(0.0, 1, TWO), pushed(0.5, "worker-1", 1), *gated_pull(1.0, 1.1, "worker-0", 3),
              step(1.2, "worker-0", 3)]
    v = CHECKERS["staleness"](behind, BSP)
    assert v.valid is False and v.details["violations"][0] == {"worker": "worker-0", "step": 3, "other": "worker-1",
                                                               "other_clock": 1, "lead": 1}
    assert CHECKERS["staleness"](behind, {**SSP1}).valid is True          # within staleness 1


def test_a_joiner_counts_from_its_start_not_from_0():
    members = {**TWO, "worker-2": 5}
    h = [view(0.0, 2, members), pushed(0.4, "worker-1", 4), *gated_pull(1.0, 1.1, "worker-0", 5), step(1.2, "worker-0", 5)]
    assert CHECKERS["staleness"](h, BSP).valid is True                   # worker-2 joined at 5: done 4
    h6 = [view(0.0, 2, members), pushed(0.4, "worker-1", 5), *gated_pull(1.0, 1.1, "worker-0", 6), step(1.2, "worker-0", 6)]
    v = CHECKERS["staleness"](h6, BSP)
    assert v.valid is False and v.details["violations"][0]["other"] == "worker-2"


def test_a_worker_outside_the_generation_holds_nobody():
    h = [view(0.0, 1, TWO), view(0.5, 2, {"worker-0": 0}), pushed(0.1, "worker-1", 0),
         *gated_pull(1.0, 1.1, "worker-0", 9), step(1.2, "worker-0", 9)]
    assert CHECKERS["staleness"](h, BSP).valid is True


def test_a_pull_that_straddles_a_change_is_held_only_by_members_of_every_view_in_its_window():
    # worker-2 joins (start 0) while the pull waits: not surely gating, so not held against it
    h = [view(0.0, 1, TWO), pushed(0.5, "worker-1", 2), *gated_pull(1.0, 1.5, "worker-0", 3),
         view(1.2, 2, {**TWO, "worker-2": 0}), step(1.6, "worker-0", 3)]
    assert CHECKERS["staleness"](h, BSP).valid is True
    # a view of another copy does not count: the serving copy's does
    later = [view(0.0, 1, TWO), view(0.0, 2, {**TWO, "worker-2": 0}, node="shard-0/1"), pushed(0.5, "worker-1", 2),
             *gated_pull(1.0, 1.5, "worker-0", 3), step(1.6, "worker-0", 3)]
    assert CHECKERS["staleness"](later, BSP).valid is True
    served_after = later + [view(0.9, 2, {**TWO, "worker-2": 0})]
    assert CHECKERS["staleness"](served_after, BSP).valid is False


def test_staleness_fails_closed_without_membership_evidence():
    h = [pushed(0.5, "worker-1", 2), *gated_pull(1.0, 1.1, "worker-0", 3), step(1.2, "worker-0", 3)]
    assert CHECKERS["staleness"](h, BSP).valid == "unknown"                     # no view at all
    other_copy = [view(0.0, 1, TWO, node="shard-0/2"), *h]
    v = CHECKERS["staleness"](other_copy, BSP)
    assert v.valid == "unknown" and v.details["steps_unjudged"] == 1           # its pull's copy had none
    no_pull = [view(0.0, 1, TWO), pushed(0.5, "worker-1", 2), step(1.2, "worker-0", 3)]
    assert CHECKERS["staleness"](no_pull, BSP).valid == "unknown"
    assert CHECKERS["staleness"](h, {"training": "async"}).valid == "unknown"


def steady(t0, t1, workers, dt=0.1, s0=0):
    out, t, s = [], t0, s0
    while t < t1:
        out += [step(t, w, s) for w in workers]
        t, s = round(t + dt, 6), s + 1
    return out


def test_barrier_live_measures_the_stall_after_a_kill_and_passes_when_survivors_resume():
    kill = fault_start(1.0, "kill", "worker-2", index=0)
    h = [*steady(0.0, 1.05, ["worker-0", "worker-1"]), kill, *steady(3.4, 12.0, ["worker-0", "worker-1"], s0=20),
         fault_stop(10.0, "kill", "worker-2", index=0)]
    v = CHECKERS["barrier-live"](h, BSP)
    assert v.valid is True
    (stall,) = v.details["stalls"]
    assert stall["stall_s"] == 2.4 and stall["resumed"] and stall["victims"] == ["worker-2"]


def test_barrier_live_fails_when_survivors_wait_for_the_dead_worker():
    kill = fault_start(1.0, "kill", "worker-2", index=0)
    held = [*steady(0.0, 1.05, ["worker-0", "worker-1"]), kill, fault_stop(10.0, "kill", "worker-2", index=0),
            *steady(10.5, 12.0, ["worker-0", "worker-1", "worker-2"], s0=20)]
    v = CHECKERS["barrier-live"](held, BSP)
    assert v.valid is False and v.details["held_by_lost_worker"][0]["silent_at_end_s"] == 9.0


def test_barrier_live_fails_on_a_gated_pull_that_timed_out():
    h = [*steady(0.0, 1.0, ["worker-0"]),
         ev(2.0, "pull", {"worker": "worker-0", "shard": 0, "min_clock": 4,
                          "error": "no primary answered Pull within 20.0s; last error: min_clock=4: the slowest "
                                   "worker is at clock 3 (membership generation 1); BSP/SSP wait timed out"},
            "fail", "worker-0")]
    v = CHECKERS["barrier-live"](h, BSP)
    assert v.valid is False and v.details["timeout_count"] == 1


def test_barrier_live_does_not_judge_a_loss_too_short_to_tell_and_needs_steps():
    kill = fault_start(1.0, "kill", "worker-2", index=0)
    short = [*steady(0.0, 3.0, ["worker-0", "worker-1"]), kill, fault_stop(2.0, "kill", "worker-2", index=0)]
    v = CHECKERS["barrier-live"](short, BSP)
    assert v.valid == "unknown" and v.details["not_judged"][0]["victims"] == ["worker-2"]
    leave = [*steady(0.0, 4.0, ["worker-0", "worker-1"]), fault_start(1.0, "scale-in", "workers", index=0,
                                                                       removed=["worker-1"])]
    v = CHECKERS["barrier-live"](leave, BSP)
    assert v.valid is True and v.details["stalls"][0]["kind"] == "scale-in"     # graceful: judged over 1 s
    assert CHECKERS["barrier-live"]([kill], BSP).valid == "unknown"
