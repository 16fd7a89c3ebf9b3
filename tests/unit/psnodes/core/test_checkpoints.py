"""pschaos.psnodes.core.checkpoints: which checkpoint wins, and who may publish."""
from pschaos.psnodes.core.checkpoints import keeps_current, needs_replication, order, publish_refusal, record_refusal


def test_order_is_term_then_epoch_then_seq():
    assert order({"term": 3, "epoch": 2, "seq": 1}) > order({"term": 2, "epoch": 2, "seq": 99})
    assert order({"epoch": 4, "seq": 7}) == (4, 4, 7)        # older manifests: epoch stands in for term


def test_a_checkpoint_with_a_lower_term_never_replaces():
    cur = {"term": 3, "epoch": 2, "seq": 10}
    assert keeps_current(cur, {"term": 2, "epoch": 2, "seq": 50}, True, True)
    assert keeps_current(cur, dict(cur), True, True)                      # equal: keep
    assert not keeps_current(cur, {"term": 3, "epoch": 2, "seq": 11}, True, True)
    assert not keeps_current(cur, {"term": 2, "epoch": 2, "seq": 5}, False, True)   # local folders
    assert not keeps_current(cur, {"term": 2, "epoch": 2, "seq": 5}, True, False)   # its file is gone
    assert not keeps_current(None, {"term": 1, "epoch": 1, "seq": 1}, True, False)


def test_publish_refusals():
    assert publish_refusal(True, True, 4) == ""
    assert publish_refusal(False, True, 4) == "not the primary of epoch 4 any more"
    assert publish_refusal(True, False, 4) == "not the primary of epoch 4 any more"
    assert needs_replication("sync") and not needs_replication("async")
    assert record_refusal(4, "shard-0/0", 4, "shard-0/0") == ""
    assert record_refusal(5, "shard-0/1", 4, "shard-0/0") == "the shard record names shard-0/1 at epoch 5"
    assert record_refusal(None, None, 4, "shard-0/0") == "the shard record names None at epoch None"
