"""pschaos.psnodes.core.membership: who the BSP/SSP barrier waits for, generation by generation."""
import pytest

from pschaos.psnodes.core.membership import (UNBOUNDED, Change, Member, Record, admitted, barrier_floor, bootstrap,
                                     floor, from_dict, front, leave, newer, pull_ready, reconcile, resume_step,
                                     to_dict)

CFG2 = Record(1, {"worker-0": Member(0, 7), "worker-1": Member(0, 8)})


def test_bootstrap_is_the_config_workers_unregistered_at_clock_0():
    assert bootstrap(2) == Record(0, {"worker-0": Member(0, 0), "worker-1": Member(0, 0)})
    assert bootstrap(0).members == {}


def test_first_reconcile_writes_generation_1_and_fills_registered_leases():
    rec, changes = reconcile(None, {"worker-0": 7}, front=0, workers=2)
    assert rec == Record(1, {"worker-0": Member(0, 7), "worker-1": Member(0, 0)})
    assert changes == []        # the config's workers were members already: nobody new counts


def test_nothing_to_write_when_the_record_holds_the_registrations():
    assert reconcile(CFG2, {"worker-0": 7, "worker-1": 8}, front=50, workers=2) is None


def test_a_config_worker_that_registers_late_keeps_start_0_without_a_new_generation():
    rec = Record(3, {"worker-0": Member(0, 7), "worker-1": Member(0, 0)})
    new, changes = reconcile(rec, {"worker-0": 7, "worker-1": 9}, front=40, workers=2)
    assert new == Record(3, {"worker-0": Member(0, 7), "worker-1": Member(0, 9)}) and changes == []


def test_an_unregistered_config_worker_is_never_dropped():
    rec = Record(1, {"worker-0": Member(0, 7), "worker-1": Member(0, 0)})
    assert reconcile(rec, {"worker-0": 7}, front=40, workers=2) is None


def test_a_joiner_starts_at_the_front_in_a_new_generation():
    new, changes = reconcile(CFG2, {"worker-0": 7, "worker-1": 8, "worker-2": 11}, front=83, workers=2)
    assert new == Record(2, {**CFG2.members, "worker-2": Member(83, 11)})
    assert changes == [Change("join", "worker-2", 2, 83, 11)]


def test_a_member_whose_registration_is_gone_expires():
    new, changes = reconcile(CFG2, {"worker-0": 7}, front=90, workers=2)
    assert new == Record(2, {"worker-0": Member(0, 7)})
    assert [(c.kind, c.worker, c.generation, c.lease) for c in changes] == [("expire", "worker-1", 2, 8)]


def test_a_restarted_worker_is_dropped_and_joins_again_at_the_front_in_one_generation():
    new, changes = reconcile(CFG2, {"worker-0": 7, "worker-1": 12}, front=120, workers=2)
    assert new == Record(2, {"worker-0": Member(0, 7), "worker-1": Member(120, 12)})
    assert [(c.kind, c.worker, c.start, c.lease) for c in changes] == [("expire", "worker-1", 0, 8),
                                                                       ("join", "worker-1", 120, 12)]


def test_everyone_gone_leaves_an_empty_generation_whose_floor_is_unbounded():
    new, _ = reconcile(CFG2, {}, front=10, workers=2)
    assert new == Record(2, {}) and floor({"worker-0": 10}, new) == UNBOUNDED


def test_leave_takes_only_the_registration_it_names():
    assert leave(CFG2, "worker-1", 99) is None                    # an older process's lease: not ours
    assert leave(CFG2, "worker-5", 8) is None
    rec, change = leave(CFG2, "worker-1", 8)
    assert rec == Record(2, {"worker-0": Member(0, 7)}) and change == Change("leave", "worker-1", 2, 0, 8, "graceful stop")


def test_admitted_needs_the_same_lease():
    assert admitted(CFG2, "worker-1", 8) == Member(0, 8)
    assert admitted(CFG2, "worker-1", 9) is None and admitted(None, "worker-1", 8) is None


def test_generations_only_go_forward():
    assert newer(CFG2, None) and newer(Record(2), CFG2)
    assert not newer(Record(1), CFG2) and not newer(Record(0), CFG2)


def test_floor_counts_a_joiner_at_its_start_until_it_pushes_past_it():
    rec = Record(2, {"worker-0": Member(0, 7), "worker-1": Member(0, 8), "worker-2": Member(83, 11)})
    clocks = {"worker-0": 84, "worker-1": 83}
    assert floor(clocks, rec) == 83                    # the joiner (83, no push) does not drag it to 0
    assert floor({**clocks, "worker-2": 5}, rec) == 83      # a stale clock of an old incarnation: still 83
    assert floor({"worker-0": 90, "worker-1": 90, "worker-2": 86}, rec) == 86


def test_floor_ignores_workers_outside_the_generation():
    assert floor({"worker-0": 40, "worker-1": 12, "worker-9": 0}, Record(5, {"worker-0": Member(0, 7)})) == 40


def test_front_is_the_highest_clock_reached():
    assert front({}) == 0 and front({"worker-0": 3, "worker-1": 9}) == 9


def test_barrier_floor_waits_for_a_view_when_elastic_and_keeps_the_fixed_set_without_etcd():
    clocks = {"worker-0": 4}
    assert barrier_floor(clocks, None, 2, elastic=True) is None
    assert barrier_floor(clocks, None, 2, elastic=False) == 0          # worker-1 of the config: at 0
    assert barrier_floor(clocks, Record(3, {"worker-0": Member(0, 7)}), 2, elastic=True) == 4


def test_pull_ready():
    assert pull_ready(-1, None)                 # an ungated pull never waits
    assert not pull_ready(0, None)              # a gated one waits for a generation
    assert pull_ready(3, 3) and not pull_ready(4, 3)


def test_resume_step_never_goes_back():
    assert resume_step(0, 83) == 83 and resume_step(120, 83) == 120


def test_record_round_trips_and_bad_ones_name_the_field():
    assert from_dict(to_dict(CFG2)) == CFG2
    for bad, field in [({"members": {}}, "generation"), ({"generation": -1, "members": {}}, "generation"),
                       ({"generation": 1}, "members"),
                       ({"generation": 1, "members": {"worker-0": {"start": "0", "lease": 1}}}, "members['worker-0']"),
                       ({"generation": 1, "members": {"worker-0": {"start": 0, "lease": -2}}}, "members['worker-0']")]:
        with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
            from_dict(bad)


# ---- review findings (members-review.md); each failed on the code before the fix ----------------
def test_a_config_worker_never_registered_within_its_grace_is_dropped():
    """#5: one that died while starting must not hold the barrier forever."""
    from pschaos.psnodes.core.membership import overdue_workers

    rec = Record(1, {"worker-0": Member(0, 7), "worker-1": Member(0, 0)})
    assert reconcile(rec, {"worker-0": 7}, front=40, workers=2, overdue=()) is None
    new, changes = reconcile(rec, {"worker-0": 7}, front=40, workers=2, overdue={"worker-1"})
    assert new == Record(2, {"worker-0": Member(0, 7)})
    assert [(c.kind, c.worker, c.lease) for c in changes] == [("expire", "worker-1", 0)]
    assert "member_join_grace_s" in changes[0].reason
    # registered after all: it fills its lease as before, overdue or not
    assert reconcile(rec, {"worker-0": 7, "worker-1": 9}, front=40, workers=2, overdue={"worker-1"})[0] == \
        Record(1, {"worker-0": Member(0, 7), "worker-1": Member(0, 9)})
    assert overdue_workers({"worker-1": 10.0, "worker-2": 50.0}, now=70.0, grace_s=60.0) == {"worker-1"}


def test_a_gated_pull_is_served_only_to_a_member_of_the_generation_held():
    """#1/#9: a dropped worker (or a joiner this copy has not adopted yet) waits; an empty
    generation serves no gated pull at all (it used to serve all of them: floor UNBOUNDED)."""
    from pschaos.psnodes.core.membership import pull_wait

    rec = Record(3, {"worker-0": Member(0, 7)})
    clocks = {"worker-0": 10, "worker-1": 4}
    assert pull_wait(5, clocks, rec, "worker-0", 2, elastic=True) is None
    assert "not a member of membership generation 3" in pull_wait(5, clocks, rec, "worker-1", 2, elastic=True)
    assert "not a member" in pull_wait(1, clocks, Record(4, {}), "worker-0", 2, elastic=True)
    assert pull_wait(0, clocks, Record(4, {}), "", 2, elastic=True) is None   # clock 0 waits for nobody
    assert pull_wait(0, clocks, None, "", 2, elastic=True) is not None        # but for a generation
    assert "BSP/SSP wait timed out" in pull_wait(11, clocks, rec, "worker-0", 2, elastic=True)
    assert pull_wait(-1, clocks, Record(4, {}), "worker-9", 2, elastic=True) is None      # ungated
    assert pull_wait(4, clocks, None, "worker-1", 2, elastic=False) is None   # no etcd: the fixed set


def test_a_gated_pull_on_a_cluster_without_a_barrier_is_refused_naming_the_field():
    """#11: nodes of an async-only cluster keep no membership; a BSP pull there says why."""
    from pschaos.psnodes.core.membership import no_barrier

    assert no_barrier(3, barrier=True) is None and no_barrier(-1, barrier=False) is None
    assert "barrier: true" in no_barrier(3, barrier=False)
