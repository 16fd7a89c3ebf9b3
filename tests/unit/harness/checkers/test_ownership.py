"""ownership-exact (issue 32, item 8): every copy holds exactly the keys its routing assigns. The
planted keys-kept-after-move (tests/zoo: a catch-up delta across the switch that dropped keys)
failed it on migration-replica-restart-across-switch; every check there passed before it."""
from __future__ import annotations

import numpy as np

from pschaos.harness.checkers import CHECKERS
from pschaos.psnodes.placement import owner, row_owners
from pschaos.psnodes.store.holdings import holdings, id_set_hash

from tests.unit.histories import ev
from tests.unit.helpers import store

NAMES = [f"layer{i}.weight" for i in range(12)]
START = ev(0.0, "run-start", {"cluster": {"shards": 2}}, node="harness")


def held(shard: int, shards=(0, 1), names=NAMES, extra=(), drop=(), rows=None) -> dict:
    mine = [n for n in names if owner(n, shards) == shard and n not in drop] + list(extra)
    return {"under": list(shards), "dense": sorted(mine), "rows": rows or {}}


def final(node: str, h: dict | None, seq: int = 10, routing_epoch: int = 0, alive: bool = True) -> dict:
    shard = int(node.split("-")[1].split("/")[0])
    return ev(9.0, "final-state", {"node": node, "shard": shard, "alive": alive, "seq": seq,
                                   "routing_epoch": routing_epoch, "holdings": h}, node=node)


def judge(history):
    return CHECKERS["ownership-exact"](history, {})


def cluster(**over) -> list[dict]:
    """Two shards of two copies each, every copy holding exactly its own (`over`: node -> holdings)."""
    out = [START]
    for n in ("shard-0/0", "shard-0/1", "shard-1/0", "shard-1/1"):
        out.append(final(n, over.get(n, held(int(n[6])))))
    return out


def test_copies_holding_exactly_their_keys_pass_and_the_names_are_counted():
    v = judge(cluster())
    assert v.valid is True, v.details
    assert v.details["copies_judged"] == 4 and v.details["dense_names"] == len(NAMES)


def test_a_key_another_shard_owns_left_on_a_copy_fails_and_names_its_owner():
    stray = next(n for n in NAMES if owner(n, (0, 1)) == 1)
    v = judge(cluster(**{"shard-0/1": held(0, extra=[stray])}))
    assert v.valid is False
    assert v.details["violations"][0]["keys"] == [stray] and v.details["violations"][0]["owners"] == {stray: 1}


def test_a_key_its_shard_owns_missing_on_one_copy_fails():
    mine = next(n for n in NAMES if owner(n, (0, 1)) == 0)
    v = judge(cluster(**{"shard-0/0": held(0, drop=[mine])}))
    assert v.valid is False and v.details["violations"][0]["why"].startswith("lacks")


def test_a_key_only_a_push_acknowledged_counts_as_existing():
    lost = "late.weight"
    ack = ev(5.0, "push", {"worker": "worker-0", "req_id": 1, "shard": owner(lost, (0, 1)), "keys": [lost]},
             type_="ok", node="worker-0")
    assert judge(cluster() + [ack]).valid is False


def test_rows_of_another_shard_fail_and_owned_rows_that_differ_between_copies_at_one_seq_fail():
    rows_ok = {"emb": {"0": [5, "a" * 16]}}
    assert judge(cluster(**{"shard-0/0": held(0, rows=rows_ok), "shard-0/1": held(0, rows=rows_ok)})).valid is True
    stray = {"emb": {"0": [5, "a" * 16], "1": [2, "b" * 16]}}
    assert judge(cluster(**{"shard-0/0": held(0, rows=rows_ok), "shard-0/1": held(0, rows=stray)})).valid is False
    fewer = {"emb": {"0": [4, "c" * 16]}}
    v = judge(cluster(**{"shard-0/0": held(0, rows=rows_ok), "shard-0/1": held(0, rows=fewer)}))
    assert v.valid is False and v.details["violations"][0]["why"] == "copies at one seq hold different owned rows"


def test_evidence_read_under_another_shard_set_or_missing_is_unknown():
    assert judge(cluster(**{"shard-0/0": held(0, shards=(0, 1, 2))})).valid == "unknown"
    assert judge(cluster(**{"shard-0/0": None})).valid == "unknown"
    assert judge([START, final("shard-0/0", None, alive=False)]).valid == "unknown"
    assert judge(cluster()[1:]).valid == "unknown"            # no run-start: no shard set


def test_a_switch_is_judged_by_its_new_shard_set_and_a_switch_nobody_read_after_is_unknown():
    new = (0, 1, 2)
    switch = ev(5.0, "migration-switch", {"migration": "m", "routing_epoch": 1, "shards": list(new)}, node="harness")
    copies = [final(f"shard-{s}/0", held(s, shards=new), routing_epoch=1) for s in new]
    after = [ev(5.5, "holdings", {"node": f"shard-{s}/0", "shard": s, "migration": "m", "routing_epoch": 1,
                                  **held(s, shards=new)}, node="harness") for s in new]
    read = ev(5.6, "holdings-read", {"migration": "m", "routing_epoch": 1, "shards": list(new),
                                     "read": [f"shard-{s}/0" for s in new], "down": [], "behind": []}, node="harness")
    assert judge([START, switch, *after, read, *copies]).valid is True
    assert judge([START, switch, *copies]).valid == "unknown"
    assert judge([START, switch, *after[:2], read, *copies]).valid == "unknown"     # shard 2 never read
    kept = next(n for n in NAMES if owner(n, new) == 2)
    bad = ev(5.5, "holdings", {"node": "shard-0/0", "shard": 0, "migration": "m", "routing_epoch": 1,
                               **held(0, shards=new, extra=[kept])}, node="harness")
    v = judge([START, switch, bad, *after[1:], read, *copies])
    assert v.valid is False and v.details["violations"][0]["when"] == "after m"


def test_a_copy_that_never_applied_the_switch_fails_once_settled_and_is_unknown_otherwise():
    new = (0, 1, 2)
    switch = ev(5.0, "migration-switch", {"migration": "m", "routing_epoch": 1, "shards": list(new)}, node="harness")
    after = [ev(5.5, "holdings", {"node": f"shard-{s}/0", "shard": s, "migration": "m", "routing_epoch": 1,
                                  **held(s, shards=new)}, node="harness") for s in new]
    read = ev(5.6, "holdings-read", {"migration": "m", "routing_epoch": 1, "shards": list(new), "down": [],
                                     "behind": ["shard-0/1"]}, node="harness")
    copies = [final(f"shard-{s}/0", held(s, shards=new), routing_epoch=1) for s in new]
    stale = final("shard-0/1", held(0, shards=new), routing_epoch=0)
    quiet = ev(8.0, "quiesce", {"settled": True}, node="harness")
    assert judge([START, switch, *after, read, *copies, stale, quiet]).valid is False
    loud = ev(8.0, "quiesce", {"settled": False}, node="harness")
    assert judge([START, switch, *after, read, *copies, stale, loud]).valid == "unknown"


def test_a_running_copy_that_did_not_answer_or_a_shard_with_no_judged_copy_is_unknown():
    h = cluster()
    h[1] = ev(9.0, "final-state", {"node": "shard-0/0", "shard": 0, "alive": False, "running": True}, node="shard-0/0")
    assert judge(h).valid == "unknown"
    h[1]["value"]["running"] = False                         # down: the other copy of shard 0 judges it
    assert judge(h).valid is True
    h[2] = ev(9.0, "final-state", {"node": "shard-0/1", "shard": 0, "alive": False, "running": False}, node="shard-0/1")
    assert judge(h).valid == "unknown"                       # no copy of shard 0 left to judge


def test_fewer_owned_rows_at_the_end_than_after_the_last_switch_fails():
    new = (0, 1, 2)
    switch = ev(5.0, "migration-switch", {"migration": "m", "routing_epoch": 1, "shards": list(new)}, node="harness")
    rows = {s: {"emb": {str(s): [10, "a" * 16]}} for s in new}
    after = [ev(5.5, "holdings", {"node": f"shard-{s}/0", "shard": s, "migration": "m", "routing_epoch": 1,
                                  **held(s, shards=new, rows=rows[s])}, node="harness") for s in new]
    read = ev(5.6, "holdings-read", {"migration": "m", "routing_epoch": 1, "shards": list(new)}, node="harness")
    grown = [final(f"shard-{s}/0", held(s, shards=new, rows={"emb": {str(s): [12, "b" * 16]}}), routing_epoch=1)
             for s in new]
    quiet = ev(8.0, "quiesce", {"settled": True}, node="harness")
    assert judge([START, switch, *after, read, *grown, quiet]).valid is True
    shrunk = grown[:2] + [final("shard-2/0", held(2, shards=new, rows={"emb": {"2": [9, "c" * 16]}}), routing_epoch=1)]
    v = judge([START, switch, *after, read, *shrunk, quiet])
    assert v.valid is False and v.details["violations"][0]["before"] == 10
    # not settled, or a failover of the shard after the reading: fewer rows are no evidence
    assert judge([START, switch, *after, read, *shrunk]).valid is True
    promote = ev(6.0, "promote", {"shard": 2, "epoch": 2, "node": "shard-2/1", "seq": 5}, node="shard-2/1")
    assert judge([START, switch, *after, read, promote, *shrunk, quiet]).valid is True


def test_holdings_count_rows_by_owner_and_the_id_hash_ignores_order():
    s = store(shards=2)
    s.dense["w"], s.dense["v"] = np.ones(2, dtype=np.float32), np.ones(2, dtype=np.float32)
    ids = np.arange(40, dtype=np.int64)
    t = s.tables["emb"]
    t.push(ids, np.zeros((40, 4), dtype=np.float32), seq=1)
    h = holdings(s.dense, s.tables, [0, 1])
    own = row_owners("emb", ids, (0, 1))
    assert h["dense"] == ["v", "w"] and h["under"] == [0, 1]
    for o in (0, 1):
        assert h["rows"]["emb"][str(o)] == [int((own == o).sum()), id_set_hash("emb", ids[own == o])]
    assert id_set_hash("emb", ids[::-1]) == id_set_hash("emb", ids) != id_set_hash("emb", ids[1:])
    assert s.holdings([])["rows"] == holdings(s.dense, s.tables, s.shards)["rows"]   # empty: its own routing
    # the state hashes follow values, not placement: a row's change changes its owner's hash only
    before = holdings(s.dense, s.tables, [0, 1])["row_digests"]["emb"]
    t.rows[int(np.nonzero(own == 1)[0][0])] += 1.0
    after = holdings(s.dense, s.tables, [0, 1])["row_digests"]["emb"]
    assert after["0"] == before["0"] and after["1"] != before["1"]
    assert set(s.holdings([])["digests"]) == {"v", "w"}
