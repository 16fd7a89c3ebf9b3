"""A push refused by the primary's bulkhead (Busy, UNAVAILABLE) is retried at the same primary
without reading the shard record between tries: the primary lives, it is only loaded, and a
read of etcd every 25 ms per waiting client added to the load (review of session 24, M4).
A failover's UNAVAILABLE still reads the record before each retry."""
from __future__ import annotations

import grpc

from pschaos.psnodes.wire.bulkhead import Bulkhead
from pschaos.psnodes.errors import Busy
from tests.unit.psnodes.client.test_client_deposed import Call, cluster, push


def busy_text() -> str:
    b = Bulkhead("shard-0/0", 1)
    with b.admit("Push"):
        try:
            with b.admit("Push"):
                pass
        except Busy as e:
            return str(e)
    raise AssertionError("the bulkhead did not refuse")


class Refused(grpc.RpcError):
    def __init__(self, details: str) -> None:
        self._d = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return self._d


def refusing(details: str, times: int):
    left = [times]
    real = Call.result

    def result(self, timeout=None):
        if left[0] > 0:
            left[0] -= 1
            raise Refused(details)
        return real(self, timeout)
    return result


def reads_for(details: str, monkeypatch) -> tuple[int, int]:
    monkeypatch.setattr(Call, "result", refusing(details, 4))
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": 0})
    try:
        c.refresh(0)
        before = etcd.reads
        assert push(c).node == "shard-0/0"
        return etcd.reads - before, len(calls)
    finally:
        c.close()


def test_busy_is_retried_without_reading_the_record_and_a_failover_reads_it(monkeypatch):
    busy_reads, busy_calls = reads_for(busy_text(), monkeypatch)
    other_reads, other_calls = reads_for("Push: replication to shard-0/1 did not finish", monkeypatch)
    assert busy_calls == other_calls == 5
    assert busy_reads == 0, busy_reads            # the old code read the record after each of the 4
    assert other_reads >= 4, other_reads
