"""Spurious failovers (harness/checkers/spurious.py): a promotion while the old primary was alive
and reachable, judged from the history's fault events; fail closed without the evidence."""
from __future__ import annotations

import json
from pathlib import Path

from pschaos.harness.checkers.spurious import FAULT_EFFECT_S, judge, spurious_count
from pschaos.harness.proof.soak.soak import RunResult, aggregate, judge_run
from tests.unit.histories import ev


def promote(t, shard, epoch, node):
    return ev(t, "promote", {"shard": shard, "epoch": epoch, "node": node, "seq": 0, "isr": []}, node=node)


def start(t, index, kind, target="", links=(), **params):
    return ev(t, "fault-start", {"kind": kind, "target": target, "index": index, "links": list(links),
                                 "params": params}, node="harness")


def stop(t, index):
    return ev(t, "fault-stop", {"index": index}, node="harness")


BOOT = [promote(1.0, 0, 1, "shard-0/0"), promote(1.0, 1, 1, "shard-1/0")]
TO_REPLICAS = ["shard-0/0->shard-0/1", "shard-0/0->shard-0/2"]


def test_a_failover_after_a_kill_or_a_cut_is_excused():
    h = BOOT + [start(5.0, 0, "kill", "shard-0/0"), promote(5.2, 0, 2, "shard-0/1")]
    v = judge(h)
    assert v.valid is True and v.details["count"] == 0
    assert v.details["failovers"][0]["excused_by"] == ["kill #0"]
    h = BOOT + [start(5.0, 0, "partition", links=TO_REPLICAS), promote(5.3, 0, 2, "shard-0/2"), stop(9.0, 0)]
    assert judge(h).details["failovers"][0]["excused_by"] == ["partition #0"]
    h = BOOT + [start(5.0, 0, "loss", links=TO_REPLICAS, percent=100), promote(5.3, 0, 2, "shard-0/2")]
    assert spurious_count(h) == 0


def test_a_failover_through_a_slow_or_lossy_link_is_spurious():
    h = BOOT + [start(5.0, 0, "latency", links=TO_REPLICAS, latency_ms=150), promote(5.2, 0, 2, "shard-0/1"),
                stop(9.0, 0)]
    v = judge(h)
    assert v.valid is False and v.details["count"] == 1
    (row,) = v.details["spurious"]
    assert (row["shard"], row["epoch"], row["node"], row["old_primary"]) == (0, 2, "shard-0/1", "shard-0/0")
    assert row["degrading_faults"] == ["latency #0"]
    h = BOOT + [start(5.0, 0, "loss", links=TO_REPLICAS, percent=20), promote(5.2, 0, 2, "shard-0/1")]
    assert spurious_count(h) == 1


def test_a_fault_on_someone_else_excuses_nothing():
    h = BOOT + [start(5.0, 0, "kill", "shard-1/0"), promote(5.2, 0, 2, "shard-0/1"),
                start(6.0, 1, "partition", links=["shard-1/0->shard-1/1"]), promote(6.2, 0, 3, "shard-0/2")]
    v = judge(h)
    assert v.details["count"] == 2
    assert [r["old_primary"] for r in v.details["spurious"]] == ["shard-0/0", "shard-0/1"]    # the chain of epochs


def test_the_effect_of_a_healed_fault_lasts_fault_effect_s():
    inside = BOOT + [start(5.0, 0, "pause", "shard-0/0"), stop(6.0, 0), promote(6.0 + FAULT_EFFECT_S - 0.1, 0, 2, "shard-0/1")]
    after = BOOT + [start(5.0, 0, "pause", "shard-0/0"), stop(6.0, 0), promote(6.0 + FAULT_EFFECT_S + 0.1, 0, 2, "shard-0/1")]
    assert spurious_count(inside) == 0 and spurious_count(after) == 1
    before = BOOT + [promote(4.0, 0, 2, "shard-0/1"), start(5.0, 0, "kill", "shard-0/0")]     # not yet injected
    assert spurious_count(before) == 1


def test_a_primary_that_gave_up_primacy_itself_excuses_its_successor():
    h = BOOT + [ev(5.0, "lease-lost", {"shard": 0, "epoch": 1, "reason": "etcd"}, node="shard-0/0"),
                promote(5.3, 0, 2, "shard-0/1")]
    assert judge(h).details["failovers"][0]["excused_by"] == ["shard-0/0 gave up primacy at t=5.0"]
    stale = BOOT + [ev(0.5, "step-down", {"shard": 0}, node="shard-0/0"), promote(5.3, 0, 2, "shard-0/1")]
    assert spurious_count(stale) == 1           # a step-down before it was promoted is no excuse


def test_no_evidence_no_figure():
    assert judge([]).valid == "unknown" and spurious_count([]) is None
    assert "promote events" in judge([start(1.0, 0, "kill", "shard-0/0")]).details["reason"]
    bad = BOOT + [ev(5.0, "promote", {"shard": 0, "epoch": 2}, node="shard-0/1")]
    assert judge(bad).valid == "unknown" and spurious_count(bad) is None
    kindless = BOOT + [ev(5.0, "fault-start", {"target": "shard-0/0"}, node="harness"), promote(5.2, 0, 2, "shard-0/1")]
    assert judge(kindless).valid == "unknown"


def test_a_shard_s_first_term_is_epoch_1_or_a_bootstrap_and_no_failover():
    readded = promote(1.0, 0, 3, "shard-0/2")
    readded["value"]["bootstrap"] = True               # a re-added shard starts above its old life's epochs
    v = judge([readded, promote(1.0, 1, 1, "shard-1/0")])
    assert v.valid is True and v.details["failovers"] == []
    del readded["value"]["bootstrap"]                  # the bootstrap promote (epoch 1) left no event: the
    v = judge([readded, promote(1.0, 1, 1, "shard-1/0")])     # failovers up to epoch 3 are invisible
    assert v.valid == "unknown" and "bootstrap" in v.details["reason"]
    # the old rule took the lowest epoch seen for the first term: a failover at epoch 2 went unjudged
    lost_boot = [promote(1.0, 1, 1, "shard-1/0"), promote(5.2, 0, 2, "shard-0/1")]
    assert judge(lost_boot).valid == "unknown" and spurious_count(lost_boot) is None


def test_a_gap_in_a_shard_s_epochs_is_unknown():
    # epoch 2 (shard-0/1, alive) left no promote event: the kill of shard-0/0 (epoch 1) must not excuse
    # the promotion at epoch 3, whose real old primary no one touched
    h = BOOT + [start(5.0, 0, "kill", "shard-0/0"), promote(9.0, 0, 3, "shard-0/2")]
    v = judge(h)
    assert v.valid == "unknown" and "epoch" in v.details["reason"] and spurious_count(h) is None


def test_an_epoch_no_promote_covers_is_unknown():
    acked_at_2 = ev(6.0, "push", {"worker": "worker-0", "req_id": 3, "shard": 1, "epoch": 2, "seq": 9,
                                  "node": "shard-1/2"}, "ok", "worker-0")
    assert spurious_count(BOOT) == 0 and spurious_count(BOOT + [acked_at_2]) is None
    for f in ("suspect", "detector", "fenced"):      # a shard whose copies left no promote event at all
        e = ev(6.0, f, {"shard": 2, "epoch": 1, "primary": "shard-2/0"}, node="shard-2/1")
        v = judge(BOOT + [e])
        assert v.valid == "unknown" and "shard 2" in v.details["reason"], f
    pulled = ev(6.0, "pull", {"worker": "worker-0", "shard": 0, "epoch": 1, "seq": 9, "node": "shard-0/0"}, "ok")
    assert judge(BOOT + [pulled]).valid is True


def test_every_shard_of_the_cluster_needs_its_first_term():
    run_start = ev(0.0, "run-start", {"scenario": "x", "cluster": {"shards": 3, "copies": 3}}, node="harness")
    v = judge([run_start] + BOOT)
    assert v.valid == "unknown" and "shard 2" in v.details["reason"]
    assert judge([run_start] + BOOT + [promote(1.0, 2, 1, "shard-2/0")]).valid is True


def test_a_re_added_shard_s_new_life_starts_at_its_bootstrap():
    readd = promote(20.0, 0, 5, "shard-0/0")
    readd["value"]["bootstrap"] = True
    h = BOOT + [start(5.0, 0, "kill", "shard-0/0"), promote(5.2, 0, 2, "shard-0/1"), stop(6.0, 0),
                readd, promote(30.0, 0, 6, "shard-0/2")]
    v = judge(h)
    assert v.details["count"] == 1                 # epoch 6 replaced the new life's first primary, alive
    assert [(r["epoch"], r["old_primary"]) for r in v.details["failovers"]] == [(2, "shard-0/0"), (6, "shard-0/0")]
    assert v.details["failovers"][0]["excused_by"] == ["kill #0"]
    low = promote(20.0, 0, 2, "shard-0/2")
    low["value"]["bootstrap"] = True               # a new life at or below the old one's epochs
    assert judge(BOOT + [promote(5.2, 0, 2, "shard-0/1"), low]).valid == "unknown"


def test_a_partly_injected_fault_excuses_nothing():
    partial = ev(5.0, "fault-start", {"kind": "kill", "target": "shard-0/0", "index": 0, "params": {},
                                      "partial": True}, node="harness")
    h = BOOT + [partial, promote(5.2, 0, 2, "shard-0/1")]
    v = judge(h)
    assert v.valid == "unknown" and "partly" in v.details["reason"] and spurious_count(h) is None
    also_full = BOOT + [partial, start(5.1, 1, "kill", "shard-0/0"), promote(5.2, 0, 2, "shard-0/1")]
    assert judge(also_full).details["failovers"][0]["excused_by"] == ["kill #1"]


def test_only_a_cut_of_the_old_primary_s_stream_to_its_copies_or_to_etcd_excuses():
    to_etcd = BOOT + [start(5.0, 0, "partition", links=["shard-0/0->etcd"]), promote(5.3, 0, 2, "shard-0/1")]
    assert judge(to_etcd).details["failovers"][0]["excused_by"] == ["partition #0"]
    workers = BOOT + [start(5.0, 0, "partition", links=["worker-0->shard-0/0", "worker-1->shard-0/0"]),
                      promote(5.3, 0, 2, "shard-0/1")]
    assert spurious_count(workers) == 1            # the stream never passed through the cut
    back_only = BOOT + [start(5.0, 0, "partition", links=["shard-0/1->shard-0/0", "shard-0/2->shard-0/0"]),
                        promote(5.3, 0, 2, "shard-0/1")]
    assert spurious_count(back_only) == 1          # replica->primary carries the probe, not the stream
    other = BOOT + [start(5.0, 0, "link-down", links=["shard-1/0->shard-1/1"]), promote(5.3, 0, 2, "shard-0/1")]
    assert spurious_count(other) == 1


def test_a_slow_host_excuses_only_with_evidence_that_the_process_died():
    for kind in ("cpu-throttle", "memory-limit", "disk-full"):
        h = BOOT + [start(5.0, 0, kind, "shard-0/0"), promote(5.3, 0, 2, "shard-0/1")]
        assert spurious_count(h) == 1, kind        # alive and reachable: the detector's job to ride out
    oom = ev(5.0, "fault-start", {"kind": "memory-limit", "target": "shard-0/0", "index": 0, "params": {},
                                  "reason": "OOMKilled", "exit_code": 137}, node="harness")
    assert judge(BOOT + [oom, promote(5.3, 0, 2, "shard-0/1")]).details["failovers"][0]["excused_by"] == [
        "memory-limit #0"]
    restarted = BOOT + [start(5.0, 0, "disk-full", "shard-0/0"),
                        ev(5.2, "start", {"shard": 0, "seq": 3, "role": "replica", "epoch": 1}, node="shard-0/0"),
                        promote(5.3, 0, 2, "shard-0/1")]
    assert judge(restarted).details["failovers"][0]["excused_by"] == ["disk-full #0"]


def test_sampled_promotions_cannot_be_judged():
    h = [ev(1.0, "promote", {"shard": 0, "epoch": 1, "node": "shard-0/0", "seen_by": "sample"}, node="shard-0/0"),
         ev(5.0, "promote", {"shard": 0, "epoch": 3, "node": "shard-0/1", "seen_by": "sample"}, node="shard-0/1")]
    assert judge(h).valid == "unknown" and spurious_count(h) is None


def fake(d: Path, seed: int, spurious) -> RunResult:
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps({
        "scenario": "latency-primary-replica", "seed": seed, "verdict": "pass" if spurious == 0 else "fail",
        "checks": {}, "metrics": {"lost_acked_updates": 0, "spurious_failovers": spurious}, "failover_times": []}))
    return judge_run(RunResult(seed, 1, d, rc=0, wall_s=1.0))


def test_the_soak_adds_them_up_per_seed(tmp_path):
    runs = [fake(tmp_path / "a", 1, 0), fake(tmp_path / "b", 2, 2), fake(tmp_path / "c", 3, None)]
    sp = aggregate("latency-primary-replica", runs)["spurious_failovers"]
    assert sp == {"sum": None, "per_seed": {"1": 0, "2": 2, "3": None}, "seeds_with_spurious": [2],
                  "sum_of_known": 2, "runs_without_figure": 1}       # seed 3 could not be judged: no total
    repeats = [fake(tmp_path / "d", 4, None), fake(tmp_path / "e", 4, 0), fake(tmp_path / "f", 5, 0)]
    sp = aggregate("latency-primary-replica", repeats)["spurious_failovers"]
    assert sp["per_seed"] == {"4": None, "5": 0} and sp["sum"] is None
    judged_all = aggregate("latency-primary-replica", [fake(tmp_path / "g", 6, 0), fake(tmp_path / "h", 7, 1)])
    assert judged_all["spurious_failovers"]["sum"] == 1


def test_a_kill_timed_to_a_moment_excuses_every_copy_it_hit():
    h = BOOT + [ev(5.0, "fault-start", {"kind": "kill", "target": "shard-0/1", "index": 0, "deposed": "shard-0/0",
                                        "params": {"during": "promotion"}}, node="harness"),
                promote(5.2, 0, 2, "shard-0/1"), promote(5.4, 0, 3, "shard-0/2"),
                ev(7.0, "fault-stop", {"index": 0, "victims": ["shard-0/0", "shard-0/1"]}, node="harness")]
    v = judge(h)
    assert v.valid is True
    assert [r["excused_by"] for r in v.details["failovers"]] == [["kill #0"], ["kill #0"]]
    only_stop = BOOT + [start(5.0, 0, "kill", "shard-0/1"), promote(5.2, 0, 2, "shard-0/1"),
                        ev(7.0, "fault-stop", {"index": 0, "victims": ["shard-0/0"]}, node="harness")]
    assert spurious_count(only_stop) == 0


def test_a_restore_or_the_old_primary_taking_the_next_epoch_is_no_spurious_failover():
    late = BOOT + [start(5.0, 0, "kill", "shard-0/0"), stop(6.0, 0),
                   ev(9.5, "restore", {"shard": 0, "epoch": 2, "restored_seq": 10}, node="shard-0/0"),
                   promote(9.5, 0, 2, "shard-0/1")]
    assert judge(late).details["failovers"][0]["excused_by"] == ["a restore at t=9.5"]
    itself = BOOT + [promote(9.5, 0, 2, "shard-0/0")]
    assert judge(itself).details["failovers"][0]["excused_by"] == ["shard-0/0 itself took the next epoch"]


def test_a_term_cut_off_by_a_kill_mid_promotion_is_read_from_the_fault_record():
    """kill during: promotion kills the successor the moment etcd names it, before it writes its
    promote event; the runner read the record (caught_promoting), so epoch 2 is known, no gap."""
    kill = ev(5.0, "fault-start", {"kind": "kill", "target": "shard-0/1", "index": 0, "shard": 0, "params": {},
                                   "deposed": "shard-0/0", "victims": ["shard-0/0", "shard-0/1"],
                                   "caught_promoting": {"epoch": 2, "after_ms": 0.0}}, node="harness")
    h = BOOT + [kill, promote(6.0, 0, 3, "shard-0/2")]
    v = judge(h)
    assert v.valid is True
    assert [(r["epoch"], r["node"], r["old_primary"], r["excused_by"]) for r in v.details["failovers"]] == [
        (2, "shard-0/1", "shard-0/0", ["kill #0"]), (3, "shard-0/2", "shard-0/1", ["kill #0"])]
    written = judge(BOOT + [kill, promote(5.01, 0, 2, "shard-0/1"), promote(6.0, 0, 3, "shard-0/2")])
    assert [r["epoch"] for r in written.details["failovers"]] == [2, 3]         # the event and the record: one term
    missed = dict(kill, value={**kill["value"], "caught_promoting": None})   # no successor named in time
    assert judge(BOOT + [missed, promote(6.0, 0, 3, "shard-0/2")]).valid == "unknown"


def test_a_term_a_plain_kill_cut_off_by_chance_is_read_from_the_record_it_left():
    """CI, power-loss-all-copies seed 1 (three cuts one after another): a replica won epoch 2 in
    etcd between two cuts and was cut before it wrote its promote event; the kill read the record
    naming it once it was dead (primary_when_killed), so epoch 2 is known and the restore at 3
    is no gap. Without that record the jump stays unknown."""
    first = ev(5.0, "fault-start", {"kind": "power-loss", "target": "shard-1/0", "index": 0, "shard": 1,
                                    "params": {}}, node="harness")
    cut = ev(5.4, "fault-start", {"kind": "power-loss", "target": "shard-1/1", "index": 1, "shard": 1, "params": {},
                                  "primary_when_killed": {"epoch": 2, "node": "shard-1/1"}}, node="harness")
    restore = ev(8.0, "restore", {"shard": 1, "epoch": 3, "restored_seq": 9}, node="shard-1/2")
    h = BOOT + [first, cut, restore, promote(8.0, 1, 3, "shard-1/2")]
    v = judge(h)
    assert v.valid is True, v.details
    assert [(r["epoch"], r["node"], r["old_primary"]) for r in v.details["failovers"]] == [
        (2, "shard-1/1", "shard-1/0"), (3, "shard-1/2", "shard-1/1")]
    bare = dict(cut, value={k: x for k, x in cut["value"].items() if k != "primary_when_killed"})
    assert judge(BOOT + [first, bare, restore, promote(8.0, 1, 3, "shard-1/2")]).valid == "unknown"
    other = dict(cut, value={**cut["value"], "primary_when_killed": {"epoch": 3, "node": "shard-1/1"}})
    assert judge(BOOT + [first, other, restore, promote(8.0, 1, 3, "shard-1/2")]).valid == "unknown"   # two at 3


def _suspect(t, node, silent_ms, silence_ms=150.0, answered=False, took_ms=251.0, ended_ms=5.0):
    probe = {"ran": True, "answered": answered, "wait_ms": 250.0, "took_ms": took_ms, "misses": 1,
             "ended_ms": ended_ms}
    return ev(t, "suspect", {"shard": 0, "epoch": 1, "primary": "shard-0/0", "detector": "phi",
                             "silence_ms": silence_ms, "silent_ms": silent_ms, "probe": probe}, node=node)


def _stall(t, late_ms, role="primary", node="shard-0/0", cpu_ms=3.0, woke_ms=0.0, epoch=1, shard=0):
    return ev(t, "local-pause", {"shard": shard, "epoch": epoch, "role": role, "late_ms": late_ms, "credited_ms": 0.0,
                                 "cpu_ms": cpu_ms, "woke_ms": woke_ms}, node=node)


def _judge_one(*events):
    return judge(BOOT + [*events, promote(5.41, 0, 2, "shard-0/1")])


def test_a_primary_that_stood_still_off_the_cpu_excuses_its_replacement():
    """No fault on record, but the old primary's own elector woke 450 ms late, having used 3 ms of
    CPU, over the 420 ms silence its replica stood on: the host did not run it (an unscheduled
    pause)."""
    v = _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(5.45, 450.0))
    assert v.valid is True, v.details
    (row,) = v.details["failovers"]
    assert row["excused_by"] and "stood still off the CPU" in row["excused_by"][0]
    assert row["suspicion"]["probe"]["answered"] is False
    assert row["old_primary_stalls"][0]["overlap_ms"] == 400.0      # [5.00, 5.45] within [4.98, 5.40]
    # the event written 300 ms after the wake-up (it waited for the node lock): placed at the wake-up
    v = _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(5.75, 450.0, woke_ms=300.0))
    assert v.valid is True and v.details["failovers"][0]["old_primary_stalls"][0]["to"] == 5.45


def test_a_stall_that_is_short_elsewhere_on_cpu_or_of_another_term_excuses_nothing_and_is_shown():
    v = _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(5.30, 120.0))
    assert v.valid is False
    (row,) = v.details["spurious"]
    assert row["suspicion"]["silent_ms"] == 420.0 and row["old_primary_stalls"][0]["late_ms"] == 120.0
    assert _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(4.50, 500.0)).valid is False   # before the silence
    # its own threads kept the CPU (a long collection, a slow serialization): the primary's doing
    v = _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(5.45, 450.0, cpu_ms=440.0))
    assert v.valid is False and v.details["spurious"][0]["old_primary_stalls"][0]["off_cpu"] is False
    assert _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(5.45, 450.0, cpu_ms=None)).valid is False
    assert _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(5.45, 450.0, epoch=3)).valid is False
    assert _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(5.45, 450.0, shard=1)).valid is False
    # the replica's own stall is credited, never an excuse
    assert _judge_one(_suspect(5.40, "shard-0/1", 420.0),
                      _stall(5.45, 450.0, role="replica", node="shard-0/1")).valid is False
    v = _judge_one(_stall(5.45, 450.0))
    assert v.valid is False and v.details["spurious"][0]["suspicion"] is None


def test_stalls_are_not_added_up_across_a_stretch_in_which_the_primary_ran():
    """Two 130 ms stalls with 160 ms of a running primary between them: the replica's detector
    (150 ms) saw a stretch the primary could have filled, so the failover stays spurious."""
    v = _judge_one(_suspect(5.40, "shard-0/1", 420.0), _stall(5.11, 130.0), _stall(5.40, 130.0))
    assert v.valid is False
    assert len(v.details["spurious"][0]["old_primary_stalls"]) == 2


def test_an_unanswered_probe_must_fall_in_the_stall():
    """The silence is covered but the probe's round (its last 250 ms, ended 5 ms before the event)
    mostly is not: the primary ran then and could have answered."""
    # stalls [4.97, 5.12] and [5.25, 5.33]: no stretch of 150 ms left, but the round [5.145, 5.395]
    # is covered for 80 ms of its 250
    v = _judge_one(_suspect(5.40, "shard-0/1", 420.0, took_ms=250.0, ended_ms=5.0),
                   _stall(5.12, 150.0), _stall(5.33, 80.0, cpu_ms=1.0))
    assert v.valid is False
    # the same silence, the second stall [5.22, 5.36] covering 140 ms of the round: excused
    v = _judge_one(_suspect(5.40, "shard-0/1", 420.0, took_ms=250.0, ended_ms=5.0),
                   _stall(5.12, 150.0), _stall(5.36, 140.0, cpu_ms=1.0))
    assert v.valid is True, v.details
