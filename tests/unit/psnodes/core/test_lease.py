"""pschaos.psnodes.core.lease: the etcd lease bound and failure detection, with time passed in."""
import math

from pschaos.psnodes.core.lease import after_election_error, etcd_silent, keepalive_timeout, renewed, suspects, valid


def test_lease_bound():
    assert valid(1.0, math.inf) and valid(1.0, 1.5) and not valid(1.5, 1.5)
    assert renewed(math.inf, 10.0, 2.0, 0.5) == 11.5           # first grant
    assert renewed(12.0, 10.0, 2.0, 0.5) == 12.0               # a late answer never moves it back
    assert renewed(11.0, 10.0, 2.0, 0.5) == 11.5


def test_keepalive_timeout_is_what_the_lease_has_left_within_bounds():
    assert keepalive_timeout(11.5, 10.0, 2.0) == 1.5
    assert keepalive_timeout(10.1, 10.0, 2.0) == 0.5           # never under half a second
    assert keepalive_timeout(20.0, 10.0, 2.0) == 2.0           # at most a TTL
    assert keepalive_timeout(math.inf, 10.0, 2.0) == 1.0       # no lease yet


def test_etcd_silence_and_suspicion():
    assert etcd_silent(12.1, 10.0, 2.0) and not etcd_silent(12.0, 10.0, 2.0)
    assert suspects(11.0, 10.0, 1.0) and not suspects(10.99, 10.0, 1.0)


def test_an_election_error_retries_four_heartbeats_later():
    assert after_election_error(3.0, 10.0, 1.0, 0.1) == 9.4
    assert after_election_error(9.8, 10.0, 1.0, 0.1) == 9.8       # never moves last_heard back


def test_an_election_error_never_puts_last_heard_in_the_future():
    """phi's silence can be the 150 ms floor, under four 50 ms heartbeats: now - 0.15 + 0.2 used
    to land 50 ms ahead of now, and the `suspect` event's silence then went negative."""
    assert after_election_error(9.9, 10.0, 0.15, 0.05) == 10.0
    assert after_election_error(10.0, 10.0, 0.15, 0.05) == 10.0
