"""A partition's or a loss's rules land in one nftables transaction, and leave in one.

Added one `nft add rule` call at a time, the eight rules of `primary(shard=0) <-> replicas(shard=0)`
took effect over some 50 ms on a loaded machine: replicas still heard their primary about 54 ms
after the recorded fault start (partition-primary-replicas, 10 seeds), while the SimPy twin cut
every link at once. Real nft, a table of this test's own (removed after).
"""
import uuid

import pytest

import pschaos.netfaults.nft as nftmod
from pschaos.harness.machinery.tools import find

pytestmark = [pytest.mark.skipif(find("nft") is None, reason="nft (apt-get install nftables) is needed"),
              pytest.mark.xdist_group("pschaos-clean")]   # its tables are in no registry: a concurrent clean drops them


@pytest.fixture
def table():
    t = nftmod.NftTable(f"txtest-{uuid.uuid4().hex[:8]}")
    t.create()
    yield t
    t.destroy()


def _count_calls(monkeypatch) -> list[tuple]:
    calls = []
    real = nftmod.nft

    def counted(*args, input_=None):
        calls.append(args)
        return real(*args, input_=input_)
    monkeypatch.setattr(nftmod, "nft", counted)
    return calls


def test_rules_of_a_fault_are_added_in_one_transaction(table, monkeypatch):
    calls = _count_calls(monkeypatch)
    handles = table.add_drop([65001, 65002, 65003, 65004], 100, "partition")
    assert len(calls) == 1, calls            # old code: 8 `add rule` calls and 2 listings
    assert len(handles) == 8
    assert sorted(r["handle"] for r in table.rules()) == handles
    calls.clear()
    table.delete(handles)
    assert len(calls) == 1, calls
    assert table.rules() == []


def test_loss_rules_keep_their_percentage(table):
    handles = table.add_drop([65011], 5, "loss")
    assert len(handles) == 2
    for r in table.rules():
        assert any("numgen" in str(e) for e in r["expr"]), r


def test_delete_when_one_rule_is_gone_already_removes_the_rest(table):
    handles = table.add_drop([65021, 65022], 100, "partition")
    nftmod.nft("delete", "rule", "inet", table.name, "out", "handle", str(handles[0]))
    table.delete(handles)                     # the one transaction fails; one by one it works
    assert table.rules() == []


def test_a_partition_built_creates_the_table_so_inject_is_one_call(monkeypatch):
    """The table's own nft call used to come inside inject, after the fault's start was taken."""
    from types import SimpleNamespace

    from pschaos.netfaults.faults.partition import Partition

    table = nftmod.NftTable(f"txtest-{uuid.uuid4().hex[:8]}")
    link = ("worker-0", "shard-0/0")
    ctx = SimpleNamespace(nft=table, links=SimpleNamespace(links={link: SimpleNamespace(port=65041, name="p")}))
    try:
        fault = Partition(ctx, [link], {})
        assert table.created
        calls = _count_calls(monkeypatch)
        fault.inject()
        assert len(calls) == 1, calls
        fault.heal()
        assert table.rules() == []
    finally:
        table.destroy()


def test_rules_that_landed_under_a_failed_add_are_swept(table, monkeypatch):
    """The transaction commits, then its echo cannot be read (here: cut short, as a timeout or a
    Ctrl-C would): no caller holds those handles, so before the review of session 24 the rules
    stayed and the links stayed cut after the fault's heal."""
    keep = table.add_drop([65051], 100, "partition")           # another fault's rules stay
    real = nftmod.nft

    def echo_lost(*args, input_=None):
        out = real(*args, input_=input_)
        return "" if "--echo" in args else out
    monkeypatch.setattr(nftmod, "nft", echo_lost)
    with pytest.raises(nftmod.NetFaultError, match="echoed 0 handles"):
        table.add_drop([65052, 65053], 100, "partition")
    assert sorted(r["handle"] for r in table.rules()) == keep
