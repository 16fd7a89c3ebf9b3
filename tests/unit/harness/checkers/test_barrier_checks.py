"""staleness and barrier-live judge the BSP/SSP barrier against membership (harness/checkers/barrier.py):
exact histories, each check shown passing, failing and unknown."""
from pschaos.harness.checkers import CHECKERS

from tests.unit.histories import ev, fault_start, fault_stop

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
    assert v.valid is False and v.details["violations"][0] == {"worker": "worker-0", "step": 3, "shard": 0,
                                                               "other": "worker-1", "other_clock": 1, "lead": 1}
    assert CHECKERS["staleness"](behind, {**SSP1}).valid is True          # within staleness 1


def test_a_joiner_counts_from_its_start_not_from_0():
    members = {**TWO, "worker-2": 5}
    h = [view(0.0, 2, members), pushed(0.4, "worker-1", 4), *gated_pull(1.0, 1.1, "worker-0", 5), step(1.2, "worker-0", 5)]
    assert CHECKERS["staleness"](h, BSP).valid is True                   # worker-2 joined at 5: done 4
    h6 = [view(0.0, 2, members), pushed(0.4, "worker-1", 5), *gated_pull(1.0, 1.1, "worker-0", 6), step(1.2, "worker-0", 6)]
    v = CHECKERS["staleness"](h6, BSP)
    assert v.valid is False and v.details["violations"][0]["other"] == "worker-2"


def test_a_worker_outside_the_generation_holds_nobody():
    h = [view(0.0, 1, {**TWO, "worker-2": 0}), view(0.5, 2, {"worker-0": 0, "worker-2": 0}), pushed(0.1, "worker-1", 0),
         pushed(0.6, "worker-2", 8), *gated_pull(1.0, 1.1, "worker-0", 9), step(1.2, "worker-0", 9)]
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
    assert stall["stall_s"] == 2.4 and not stall["held"] and stall["victims"] == ["worker-2"]


def test_barrier_live_fails_when_survivors_wait_for_the_dead_worker():
    kill = fault_start(1.0, "kill", "worker-2", index=0)
    held = [*steady(0.0, 1.05, ["worker-0", "worker-1"]), kill, fault_stop(10.0, "kill", "worker-2", index=0),
            *steady(10.5, 12.0, ["worker-0", "worker-1", "worker-2"], s0=20)]
    v = CHECKERS["barrier-live"](held, BSP)
    assert v.valid is False and v.details["held_by_lost_worker"][0]["stall_s"] == 9.0


def test_barrier_live_does_not_judge_a_loss_too_short_to_tell_and_needs_steps():
    kill = fault_start(1.0, "kill", "worker-2", index=0)
    short = [*steady(0.0, 3.0, ["worker-0", "worker-1"]), kill, fault_stop(2.0, "kill", "worker-2", index=0)]
    v = CHECKERS["barrier-live"](short, BSP)
    assert v.valid == "unknown" and v.details["not_judged"][0]["victims"] == ["worker-2"]
    leave = [*steady(0.0, 4.5, ["worker-0", "worker-1"]), fault_start(1.0, "scale-in", "workers", index=0,
                                                                       removed=["worker-1"])]
    v = CHECKERS["barrier-live"](leave, BSP)
    assert v.valid is True and v.details["stalls"][0]["kind"] == "scale-in"     # graceful: judged over GRACEFUL_S
    assert CHECKERS["barrier-live"]([kill], BSP).valid == "unknown"


# ---- review findings (members-review.md); each failed on the code before the fix ----------------
def member(t, f, worker, lease, node="shard-0/0", **kw):
    return ev(t, f"member-{f}", {"worker": worker, "lease": lease, **kw}, node=node)


def inc_pushed(t, worker, clock, inc=1, shard=0):
    return ev(t, "push", {"worker": worker, "incarnation": inc, "req_id": clock + 1, "shard": shard, "clock": clock},
              "invoke", worker)


def test_staleness_is_unknown_with_nobody_to_compare():
    """#2: a single worker (or a step gated by its own membership alone) compares nothing."""
    alone = [view(0.0, 1, {"worker-0": 0}), pushed(0.5, "worker-0", 2), *gated_pull(1.0, 1.1, "worker-0", 3),
             step(1.2, "worker-0", 3)]
    v = CHECKERS["staleness"](alone, BSP)
    assert v.valid == "unknown" and v.details["steps_solo"] == 1 and v.details["steps_compared"] == 0


def test_an_empty_generation_is_unknown_not_pass():
    """#1: a barrier with no member waits for nobody: nothing was judged."""
    empty = [view(0.0, 2, {}), *gated_pull(1.0, 1.1, "worker-0", 9), step(1.2, "worker-0", 9)]
    v = CHECKERS["staleness"](empty, BSP)
    assert v.valid == "unknown" and v.details["steps_unjudged"] == 1


def test_a_worker_pushing_after_the_record_dropped_it_fails_staleness():
    """#1 (and #4: judged by the worker's own events): worker-1 cut from etcd goes on pushing."""
    h = [view(0.0, 1, TWO), member(0.0, "register", "worker-1", 8, node="worker-1", incarnation=1),
         member(0.05, "admitted", "worker-1", 8, node="worker-1", generation=1, start=0),
         inc_pushed(0.5, "worker-1", 2), *gated_pull(1.0, 1.1, "worker-0", 3), step(1.2, "worker-0", 3),
         member(2.0, "expire", "worker-1", 8, generation=2, start=0, by="shard-0/0"),
         inc_pushed(2.5, "worker-1", 3)]
    v = CHECKERS["staleness"](h, BSP)
    assert v.valid is False and v.details["outside_count"] == 1
    assert v.details["pushes_outside_membership"][0]["clock"] == 3
    ok_h = h[:-1] + [member(2.4, "register", "worker-1", 9, node="worker-1", incarnation=1),
                     member(2.45, "admitted", "worker-1", 9, node="worker-1", generation=3, start=3),
                     inc_pushed(2.5, "worker-1", 3)]
    assert CHECKERS["staleness"](ok_h, BSP).valid is True                # it joined again first


def test_staleness_judges_the_other_push_against_the_pulls_ok_not_the_steps_end():
    """#3: worker-1's push of clock 2 came after worker-0's pull of step 3 was served: the gate
    served it a step early, even though the push was invoked before worker-0's step ended."""
    h = [view(0.0, 1, TWO), pushed(0.5, "worker-1", 1), *gated_pull(1.0, 1.1, "worker-0", 3),
         pushed(1.15, "worker-1", 2), step(1.2, "worker-0", 3)]
    v = CHECKERS["staleness"](h, BSP)
    assert v.valid is False and v.details["violations"][0]["other_clock"] == 1


def test_a_worker_restarted_within_its_ttl_is_two_members_not_one_with_the_smaller_start():
    """#6: expire and join in one generation; the old incarnation pushed up to 30, the new one
    joined at 50. A pull whose window spans both views is not held by either incarnation."""
    v1 = ev(0.0, "member-view", {"shard": 0, "generation": 1, "members": {"worker-0": 0, "worker-1": 0, "worker-2": 0},
                                 "leases": {"worker-0": 7, "worker-1": 8, "worker-2": 9}}, node="shard-0/0")
    v2 = ev(1.05, "member-view", {"shard": 0, "generation": 2, "members": {"worker-0": 0, "worker-1": 50, "worker-2": 0},
                                  "leases": {"worker-0": 7, "worker-1": 12, "worker-2": 9}}, node="shard-0/0")
    h = [v1, pushed(0.2, "worker-1", 30), pushed(0.9, "worker-2", 51), v2,
         *gated_pull(1.0, 1.1, "worker-0", 52), step(1.2, "worker-0", 52)]
    v = CHECKERS["staleness"](h, BSP)
    assert v.valid is True and v.details["steps_compared"] == 1


def test_a_join_whose_start_no_worker_reached_fails():
    """#4: a reconcile that admits a joiner at front + 10 is caught by the workers' own pushes."""
    def run(start):
        return [view(0.0, 1, TWO), pushed(0.5, "worker-0", 39), pushed(0.5, "worker-1", 39),
                member(1.0, "join", "worker-2", 11, by="shard-0/0", generation=2, start=start),
                view(1.0, 2, {**TWO, "worker-2": start}),
                pushed(1.2, "worker-1", 40), pushed(1.2, "worker-2", 40),
                *gated_pull(1.3, 1.4, "worker-0", 41), step(1.5, "worker-0", 41)]
    assert CHECKERS["staleness"](run(40), BSP).valid is True
    v = CHECKERS["staleness"](run(50), BSP)
    assert v.valid is False and v.details["join_start_violations"][0]["invoked_front"] == 40


def test_barrier_live_is_unknown_without_a_loss():
    """#7: a scale-out (nobody lost) gives the check nothing to judge."""
    v = CHECKERS["barrier-live"](steady(0.0, 5.0, ["worker-0", "worker-1"]), BSP)
    assert v.valid == "unknown" and "no worker was lost" in v.details["reason"]


def test_barrier_live_fails_a_stall_longer_than_the_ttl_and_grace_even_if_survivors_resumed_before_the_heal():
    """#7: survivors held 7.5 s by a worker with a 2 s TTL, resuming 1.5 s before the heal."""
    kill = fault_start(1.0, "kill", "worker-2", index=0)
    h = [*steady(0.0, 1.05, ["worker-0", "worker-1"]), kill, *steady(8.5, 12.0, ["worker-0", "worker-1"], s0=20),
         fault_stop(10.0, "kill", "worker-2", index=0)]
    v = CHECKERS["barrier-live"](h, BSP)
    assert v.valid is False and v.details["held_by_lost_worker"][0]["bound_s"] == 5.0


def test_barrier_live_does_not_fail_a_live_member_correctly_held_or_a_survivor_without_train_done():
    """#8: a gated pull that timed out while a live member held BSP is reported, not failed; a
    survivor whose last event came early does not make the time after it count as silence."""
    kill = fault_start(1.0, "kill", "worker-2", index=0)
    timeout = ev(3.0, "pull", {"worker": "worker-0", "shard": 1, "min_clock": 30,
                               "error": "min_clock=30: the slowest worker is at clock 29 (membership generation 2); "
                                        "BSP/SSP wait timed out"}, "fail", "worker-0")
    h = [*steady(0.0, 7.0, ["worker-0", "worker-1"]), kill, timeout, fault_stop(20.0, "kill", "worker-2", index=0),
         ev(30.0, "final-state", {}, node="harness")]
    v = CHECKERS["barrier-live"](h, BSP)
    assert v.valid is True and v.details["gated_pull_failure_count"] == 1
    assert v.details["stalls"][0]["until"] < 7.0


def test_barrier_live_judges_a_worker_cut_off_from_etcd():
    cut = fault_start(1.0, "partition", "worker-1 -> etcd", index=0)
    fine = [*steady(0.0, 1.05, ["worker-0", "worker-1"]), cut, *steady(3.5, 9.0, ["worker-0"], s0=20),
            fault_stop(8.0, "partition", "worker-1 -> etcd", index=0)]
    v = CHECKERS["barrier-live"](fine, BSP)
    assert v.valid is True and v.details["stalls"][0]["kind"] == "cut-from-etcd"
    held = [*steady(0.0, 1.05, ["worker-0", "worker-1"]), cut, fault_stop(8.0, "partition", "worker-1 -> etcd", index=0),
            *steady(8.5, 9.0, ["worker-0", "worker-1"], s0=20)]
    assert CHECKERS["barrier-live"](held, BSP).valid is False
