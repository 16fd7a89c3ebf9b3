"""best-promoted (issue 32, item 2): each failover's winner held the newest position among the
candidates it saw; and async mode excuses only the acks above the best candidate's seq. The
planted promotion-by-slot (tests/zoo) failed both on async-kill-lagging-replica, on both
backends; on the old code it passed every failover scenario."""
from __future__ import annotations

from pschaos.harness.checkers import CHECKERS
from pschaos.harness.checkers.acks import _explained
from pschaos.harness.checkers.promotion import best_candidates

from tests.unit.histories import ev


def elected(node, at, cands, epoch=2):
    return ev(5.0, "elected", {"shard": 0, "epoch": epoch, "node": node, "seq_epoch": at[0], "seq": at[1],
                               "candidates": cands}, node=node)


def promote(node, seq, epoch=2):
    return ev(5.0, "promote", {"shard": 0, "epoch": epoch, "node": node, "seq": seq, "isr": [node]}, node=node)


CANDS = {"shard-0/1": [1, 173], "shard-0/2": [1, 183]}


def test_a_winner_behind_another_candidate_fails_and_the_best_passes():
    v = CHECKERS["best-promoted"]([elected("shard-0/1", [1, 173], CANDS), promote("shard-0/1", 173)], {})
    assert v.valid is False and v.details["worse"][0]["best_nodes"] == ["shard-0/2"]
    assert CHECKERS["best-promoted"]([elected("shard-0/2", [1, 183], CANDS), promote("shard-0/2", 183)], {}).valid is True
    # the epoch of the last entry comes first: a longer log of an older epoch is not newer
    older = {"shard-0/1": [2, 10], "shard-0/2": [1, 50]}
    assert CHECKERS["best-promoted"]([elected("shard-0/1", [2, 10], older), promote("shard-0/1", 10)], {}).valid is True


def test_a_failover_without_its_election_record_is_unknown_and_a_restore_is_not_a_failover():
    assert CHECKERS["best-promoted"]([promote("shard-0/2", 183)], {}).valid == "unknown"
    restore = ev(5.0, "restore", {"shard": 0, "epoch": 2, "restored_seq": 3})
    assert CHECKERS["best-promoted"]([restore, promote("shard-0/2", 3)], {}).valid == "unknown"   # nothing elected
    assert CHECKERS["best-promoted"]([], {}).valid == "unknown"


def test_async_excuses_only_acks_above_the_best_candidates_seq():
    h = [elected("shard-0/1", [1, 173], CANDS), promote("shard-0/1", 173)]
    best = best_candidates(h)
    p = [promote("shard-0/1", 173)["value"]]
    held_by_the_better = {"shard": 0, "epoch": 1, "seq": 180}
    assert _explained(held_by_the_better, p, 64) is not None            # the old allowance: max_lag above the winner
    assert _explained(held_by_the_better, p, 64, best) is None          # the election lost it, not replication
    assert _explained({"shard": 0, "epoch": 1, "seq": 185}, p, 64, best) is not None
