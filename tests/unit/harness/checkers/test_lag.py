"""lag-bounded (issue 32, item 3): async back-pressure judged from the harness' samples. With the
bound switched off (tests/zoo: lag-bound-off) async-backpressure sampled a lag of 19 for a bound
of 2 on processes (15 on the twin); the old library had no check and no lag to see."""
from __future__ import annotations

from pschaos.harness.checkers import CHECKERS

from tests.unit.histories import ev, ok

ASYNC = {"replication": "async", "max_lag": 2, "workers": ["worker-0"]}
ISR = ev(0.1, "promote", {"shard": 0, "epoch": 1, "node": "shard-0/0", "seq": 0,
                          "isr": ["shard-0/0", "shard-0/1", "shard-0/2"]}, node="shard-0/0")


def tick(t, n, primary_seq, replica_seq, replica="shard-0/1"):
    return [ev(t, "sample", {"tick": n, "node": "shard-0/0", "shard": 0, "role": "primary", "epoch": 1,
                             "seq": primary_seq}, node="shard-0/0"),
            ev(t + 0.01, "sample", {"tick": n, "node": replica, "shard": 0, "role": "replica", "epoch": 1,
                                    "seq": replica_seq}, node=replica)]


def test_a_replica_trailing_past_max_lag_fails_and_what_was_acked_between_samples_is_allowed():
    # max_lag + 1, and one applied-but-unacknowledged push of the one worker
    assert CHECKERS["lag-bounded"]([ISR, *tick(1, 1, 10, 6)], ASYNC).valid is True
    v = CHECKERS["lag-bounded"]([ISR, *tick(1, 1, 10, 5)], ASYNC)
    assert v.valid is False and v.details["over"][0]["lag"] == 5
    between = ok(1.005, "worker-0", 1, 0, 1, 10)                                         # acked between the two
    replica_first = [ev(0.99, "sample", {"tick": 1, "node": "shard-0/1", "shard": 0, "role": "replica", "epoch": 1,
                                         "seq": 5}, node="shard-0/1"), tick(1, 1, 10, 5)[0]]
    early = ok(0.995, "worker-0", 1, 0, 1, 10)                                           # between those two
    assert CHECKERS["lag-bounded"]([ISR, early, *replica_first], ASYNC).valid is True
    # read after the primary, the replica can only have caught up meanwhile: no allowance (review of
    # issue 32, a nit on lag.py: the allowance loosened the bound whichever was read first)
    assert CHECKERS["lag-bounded"]([ISR, between, *tick(1, 1, 10, 5)], ASYNC).valid is False
    boot = ev(0.12, "start", {"shard": 0, "seq": 0, "role": "replica", "epoch": 1}, node="shard-0/1")
    assert CHECKERS["lag-bounded"]([ISR, boot, *tick(1, 1, 10, 5)], ASYNC).valid is False        # its boot: judged
    restarted = ev(0.8, "start", {"shard": 0, "seq": 0, "role": "replica", "epoch": 1}, node="shard-0/1")
    assert CHECKERS["lag-bounded"]([ISR, boot, restarted, *tick(1, 1, 50, 5)], ASYNC).valid == "unknown"  # not judged


def test_a_replica_out_of_the_isr_is_not_bounded_and_sync_or_no_pair_is_unknown():
    dropped = ev(0.5, "isr", {"shard": 0, "epoch": 1, "isr": ["shard-0/0", "shard-0/2"], "removed": "shard-0/1"})
    assert CHECKERS["lag-bounded"]([ISR, dropped, *tick(1, 1, 50, 6)], ASYNC).valid == "unknown"
    assert CHECKERS["lag-bounded"]([ISR, *tick(1, 1, 10, 6)], {"replication": "sync", "max_lag": 2}).valid == "unknown"
    assert CHECKERS["lag-bounded"]([ISR], ASYNC).valid == "unknown"
