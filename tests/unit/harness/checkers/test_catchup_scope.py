"""catch-up-by-delta judges each restart's own catch-up (review of issue 32, finding 7). Once a
random schedule's draws selected it, nemesis-soak at seed 2 (the twin) failed it on a snapshot
sent to a copy 11 s after its restart: a bridge partition had left that copy two entries ahead of
the shard's new primary, and only a snapshot undoes an unacknowledged tail. The old check judged
every sync to a copy after its first fault; it failed the run."""
from __future__ import annotations

from pschaos.harness.checkers import CHECKERS

from tests.unit.histories import ev, fault_start


def sync(t, dst, kind, shard=0, nbytes=100, from_seq=5, took=0.0):
    return ev(t, "sync", {"src": "shard-0/0", "dst": dst, "shard": shard, "bytes": nbytes, "changed_bytes": nbytes,
                          "snapshot_bytes": 1000, "kind": kind, "from_seq": from_seq, "duration_s": took})


def promote(t, node, epoch, shard=0, seq=0):
    return ev(t, "promote", {"shard": shard, "epoch": epoch, "node": node, "seq": seq}, node=node)


def test_a_later_failovers_snapshot_is_not_the_restarts_catch_up():
    kill = fault_start(1.0, "kill", "shard-0/1")
    h = [promote(0.1, "shard-0/0", 1), promote(0.1, "shard-1/0", 1, shard=1),    # bootstraps tie in time
         kill, sync(2.0, "shard-0/1", "delta"),
         promote(9.0, "shard-0/2", 2), sync(9.1, "shard-0/1", "snapshot")]
    v = CHECKERS["catch-up-by-delta"](h, {})
    assert v.valid is True and [c["kind"] for c in v.details["catchups"]] == ["delta"]
    # a second restart has its own first catch-up, judged
    again = h + [fault_start(10.0, "kill", "shard-0/1"), sync(11.0, "shard-0/1", "snapshot")]
    assert CHECKERS["catch-up-by-delta"](again, {}).valid is False


def test_a_restarted_replicas_snapshot_still_fails_and_a_deposed_primarys_is_named():
    h = [promote(0.1, "shard-0/0", 1), fault_start(1.0, "kill", "shard-0/1"), sync(2.0, "shard-0/1", "snapshot")]
    assert CHECKERS["catch-up-by-delta"](h, {}).valid is False
    # the primary and its successor killed together (a kill timed to a promotion): the old
    # primary came back ahead of its successor's first seq (12 > 10): only a snapshot undoes that
    # tail, by design; the replica's catch-up is judged
    both = fault_start(1.0, "kill", "shard-0/1", victims=["shard-0/0", "shard-0/1"])
    h = [promote(0.1, "shard-0/0", 1), both, promote(1.5, "shard-0/2", 2, seq=10),
         sync(2.0, "shard-0/0", "snapshot", from_seq=12), sync(2.1, "shard-0/1", "delta")]
    v = CHECKERS["catch-up-by-delta"](h, {})
    assert v.valid is True and [c["dst"] for c in v.details["deposed_primary_snapshots"]] == ["shard-0/0"]
    # no tail to undo (it came back at its successor's seq): its snapshot is judged, and fails
    h[3] = sync(2.0, "shard-0/0", "snapshot", from_seq=10)
    assert CHECKERS["catch-up-by-delta"](h, {}).valid is False
    only_deposed = [promote(0.1, "shard-0/0", 1), fault_start(1.0, "kill", "shard-0/0"),
                    promote(1.5, "shard-0/2", 2, seq=10), sync(2.0, "shard-0/0", "snapshot", from_seq=12)]
    assert CHECKERS["catch-up-by-delta"](only_deposed, {}).valid == "unknown"


def test_a_catch_up_that_began_before_the_kill_landed_is_not_the_restarts():
    """A kill timed to a moment is stamped as it starts waiting (`in_place_after_s` later it lands),
    and a catch-up counts from its first send: one that began before the kill landed belongs to
    the copy's earlier life (the second review of this check)."""
    timed = fault_start(1.0, "kill", "shard-0/1", in_place_after_s=3.0)
    h = [promote(0.1, "shard-0/0", 1), timed, sync(3.5, "shard-0/1", "snapshot", took=0.4),
         sync(5.0, "shard-0/1", "delta", took=0.2)]
    v = CHECKERS["catch-up-by-delta"](h, {})
    assert v.valid is True and [c["kind"] for c in v.details["catchups"]] == ["delta"]


def test_a_kill_during_a_catch_up_restarts_its_copy_first_and_lands_on_the_primary_later():
    """nemesis-soak at seed 2 on processes: the kill restarts the copy (shard-0/0) at once, waits
    0.7 s for its catch-up, then kills the primary (shard-0/1, its `down`). The copy's catch-up
    died with that primary and was never recorded; a bridge partition's snapshot to it 11 s later
    was taken for its restart's catch-up and failed the run (on 932ab4e's check)."""
    kill = fault_start(12.9, "kill", "shard-0/1", victims=["shard-0/0", "shard-0/1"], down=["shard-0/1"],
                       in_place_after_s=0.7)
    h = [promote(0.1, "shard-0/0", 1), promote(10.7, "shard-0/1", 2, seq=206), kill,
         ev(13.4, "start", {"shard": 0, "seq": 324, "role": "replica", "epoch": 2}, node="shard-0/0"),
         promote(13.7, "shard-0/2", 3, seq=345),
         ev(15.2, "start", {"shard": 0, "seq": 337, "role": "replica", "epoch": 3}, node="shard-0/1"),
         sync(15.3, "shard-0/1", "delta", from_seq=337), promote(24.7, "shard-0/1", 4, seq=720),
         sync(24.75, "shard-0/0", "snapshot", from_seq=721)]
    v = CHECKERS["catch-up-by-delta"](h, {})
    assert v.valid is True and [c["dst"] for c in v.details["catchups"]] == ["shard-0/1"], v.details
