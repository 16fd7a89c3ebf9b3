"""Rendezvous placement moves the minimum: on n -> n+1 shards only keys the new shard wins, about
1/(n+1) of them; on a removal only the removed shard's keys. Measured on the library models' dense
names and embedding ids (and a larger population of layer names), figures printed (pytest -s)."""
import numpy as np
import pytest
import torch

from pschaos.psnodes.core.migration import moved_fraction, rows_moved_fraction
from pschaos.psnodes.models import make_task
from pschaos.psnodes.placement import owner, row_owners


def model_names() -> list[str]:
    names = []
    for m in ("mlp", "widedeep"):
        names += [f"{m}/{n}" for n, _ in make_task(m, 1, torch.device("cpu")).model.named_parameters()]
    return names


@pytest.mark.parametrize("n", [2, 3])
def test_adding_a_shard_moves_about_one_in_n_plus_one(n: int):
    old, new = list(range(n)), list(range(n + 1))
    ids = np.arange(50_000 * 4)                          # widedeep's vocabulary, 4 fields
    rows = rows_moved_fraction("emb", ids, old, new)
    layers = [f"layer.{i}.{p}" for i in range(1000) for p in ("weight", "bias")]
    dense = moved_fraction(layers, old, new)
    models = moved_fraction(model_names(), old, new)
    print(f"\n{n}->{n + 1}: optimum {1 / (n + 1):.4f}; embedding ids {rows:.4f}; 2000 layer names {dense:.4f}; "
          f"the library models' {len(model_names())} dense names {models:.4f}")
    assert abs(rows - 1 / (n + 1)) < 0.01
    assert abs(dense - 1 / (n + 1)) < 0.04
    # and every key that moved went to the new shard: none moved between the shards that stayed
    assert all(owner(k, new) in (owner(k, old), n) for k in layers)
    o, w = row_owners("emb", ids, old), row_owners("emb", ids, new)
    assert ((o == w) | (w == n)).all()


def test_removing_a_shard_moves_only_its_keys():
    layers = [f"layer.{i}.weight" for i in range(2000)]
    for k in layers:
        a, b = owner(k, [0, 1, 2, 3]), owner(k, [0, 1])
        assert a == b or a in (2, 3)
    ids = np.arange(100_000)
    a, b = row_owners("wide", ids, [0, 1, 2, 3]), row_owners("wide", ids, [0, 1])
    assert ((a == b) | (a >= 2)).all()
    assert abs(rows_moved_fraction("wide", ids, [0, 1, 2, 3], [0, 1]) - 0.5) < 0.01


def test_a_shard_set_is_not_a_count():
    """Placement depends on which shards there are, not on how many: shards {0, 2} place like
    no static cluster of two, and a static cluster is placement over 0..n-1."""
    from pschaos.psnodes.placement import dense_shard

    names = [f"t{i}" for i in range(200)]
    assert [dense_shard(n, 3) for n in names] == [owner(n, [0, 1, 2]) for n in names]
    assert {owner(n, [0, 2]) for n in names} == {0, 2}
