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


def candidate(t, node, at, isr=("shard-0/1", "shard-0/2"), primary="shard-0/0"):
    return ev(t, "candidate", {"shard": 0, "epoch": 1, "node": node, "seq_epoch": at[0], "seq": at[1],
                               "isr": list(isr), "primary": primary}, node=node)


def test_the_winners_view_is_held_to_what_each_copy_says_it_posted():
    """The winner's own view was the only evidence: a winner whose read missed a better posting,
    or saw it at an older position, passed as the best of what it saw (review of issue 32,
    finding 2). A posting that returned before the winner's own cannot be missing from its reads."""
    blind = {"shard-0/1": [1, 173]}                       # it saw only itself
    h = [candidate(4.90, "shard-0/2", [1, 183]), candidate(4.95, "shard-0/1", [1, 173]),
         elected("shard-0/1", [1, 173], blind), promote("shard-0/1", 173)]
    v = CHECKERS["best-promoted"](h, {})
    assert v.valid is False and v.details["missed_postings"][0]["candidate"] == "shard-0/2", v.details
    stale = {"shard-0/1": [1, 173], "shard-0/2": [1, 160]}
    h[2] = elected("shard-0/1", [1, 173], stale)
    assert CHECKERS["best-promoted"](h, {}).valid is False   # seen older than it posted
    # a missed posting that would not have won changed nothing (its key may have gone with its lease)
    lower = [candidate(4.90, "shard-0/2", [1, 150]), candidate(4.95, "shard-0/1", [1, 173]),
             elected("shard-0/1", [1, 173], blind), promote("shard-0/1", 173)]
    assert CHECKERS["best-promoted"](lower, {}).valid is True
    # posted after the winner's own put returned: its read may rightly have missed it
    late = [candidate(4.95, "shard-0/1", [1, 173]), candidate(4.97, "shard-0/2", [1, 183]),
            elected("shard-0/1", [1, 173], blind), promote("shard-0/1", 173)]
    assert CHECKERS["best-promoted"](late, {}).valid is True
    # a copy outside the record's ISR, or a posting long gone with its lease, is not owed
    outside = [candidate(4.90, "shard-0/2", [1, 183]), candidate(4.95, "shard-0/1", [1, 173], isr=("shard-0/1",)),
               elected("shard-0/1", [1, 173], blind), promote("shard-0/1", 173)]
    assert CHECKERS["best-promoted"](outside, {}).valid is True
    gone = [candidate(2.0, "shard-0/2", [1, 183]), *h[1:2], elected("shard-0/1", [1, 173], blind),
            promote("shard-0/1", 173)]
    assert CHECKERS["best-promoted"](gone, {}).valid is True
    # the winner left no posting while others did: unknown
    mute = [candidate(4.90, "shard-0/2", [1, 183]), elected("shard-0/1", [1, 173], CANDS), promote("shard-0/1", 173)]
    assert CHECKERS["best-promoted"](mute, {}).valid == "unknown"
    full = [candidate(4.90, "shard-0/2", [1, 183]), candidate(4.95, "shard-0/1", [1, 183]),
            elected("shard-0/1", [1, 183], {"shard-0/1": [1, 183], "shard-0/2": [1, 183]}), promote("shard-0/1", 183)]
    v = CHECKERS["best-promoted"](full, {})
    assert v.valid is True and v.details["views_cross_checked"] is True
