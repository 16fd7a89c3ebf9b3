"""Jepsen's partition shapes (harness/faults/targets.py): what each cuts, resolved on a live cluster's
links, and how a nemesis draws them."""
from __future__ import annotations

import itertools
import random

import pytest

from pschaos.harness.run.nemesis import schedule
from pschaos.harness.run.scenario import Nemesis
from pschaos.harness.faults.targets import is_link_target, resolve_links, shape_cuts, valid_target

MEMBERS = ["shard-0/0", "shard-0/1", "shard-0/2", "etcd"]


def reach(cuts, a):
    return {b for b in MEMBERS if b != a and frozenset((a, b)) not in cuts}


@pytest.mark.parametrize("seed", range(20))
def test_halves_split_in_two_groups_that_talk_within_and_never_across(seed):
    cuts = shape_cuts("halves", MEMBERS, random.Random(seed))
    assert len(cuts) == 4                                    # 2 x 2 pairs across
    side = {MEMBERS[0]} | reach(cuts, MEMBERS[0])
    assert len(side) == 2 and all(reach(cuts, m) == side - {m} for m in side)


@pytest.mark.parametrize("seed", range(20))
def test_a_bridge_sees_everyone_and_the_two_sides_nothing_of_each_other(seed):
    cuts = shape_cuts("bridge", MEMBERS, random.Random(seed))
    bridges = [m for m in MEMBERS if reach(cuts, m) == set(MEMBERS) - {m}]
    assert len(bridges) == 1 and cuts and not any(bridges[0] in p for p in cuts)


@pytest.mark.parametrize("n,seed", list(itertools.product((4, 5), range(10))))
def test_in_a_majorities_ring_every_member_sees_a_majority_and_no_two_the_same(n, seed):
    ms = [f"m{i}" for i in range(n)]
    cuts = shape_cuts("majorities-ring", ms, random.Random(seed))
    views = [frozenset({m} | {o for o in ms if o != m and frozenset((m, o)) not in cuts}) for m in ms]
    assert all(len(v) == n // 2 + 1 for v in views)          # exactly a majority, itself included
    assert len(set(views)) == n                              # each a different one


class FakeBackend:
    def routing(self):
        return {0: object()}

    def shard_nodes(self, shard):
        return MEMBERS[:3]

    def links(self):                                          # copy <-> copy within the shard, anyone -> etcd
        return [(a, b) for a in MEMBERS[:3] for b in MEMBERS[:3] if a != b] + [(a, "etcd") for a in MEMBERS[:3]]


def test_a_shape_resolves_to_the_live_links_it_cuts_and_names_who_lost_etcd():
    links, no_etcd, rest = resolve_links("halves(shard=0)", FakeBackend(), random.Random(3))
    cut = {frozenset(k) for k in links}
    assert links and all(k in FakeBackend().links() for k in links)
    assert sorted(no_etcd + rest) == sorted(MEMBERS) and all(frozenset((n, "etcd")) in cut for n in no_etcd)


def test_a_nemesis_draws_one_of_its_listed_targets_per_fault_and_refuses_misfits():
    nem = Nemesis(kinds=["partition"], interval_s=0.5, start_s=1, stop_s=30,
                  targets={"partition": ["halves(shard=any)", "bridge(shard=0)", "majorities-ring(shard=any)"]})
    drawn = {f.target for f in schedule(nem, 7)}
    assert drawn == {"halves(shard=any)", "bridge(shard=0)", "majorities-ring(shard=any)"}
    assert schedule(nem, 7) == schedule(nem, 7)
    with pytest.raises(ValueError, match="targets.kill"):
        Nemesis(kinds=["kill"], targets={"kill": "halves(shard=0)"})
    with pytest.raises(ValueError, match="targets.partition"):
        Nemesis(kinds=["partition"], targets={"partition": ["nowhere"]})
    assert is_link_target("bridge(shard=any)") and valid_target("majorities-ring(shard=3)")


def test_an_overlapping_nemesis_lets_a_fault_start_before_the_last_one_healed():
    kw = dict(kinds=["partition", "pause"], interval_s=1.0, duration_s=1.5, start_s=1, stop_s=40,
              targets={"partition": "halves(shard=any)", "pause": "primary(shard=any)"})
    one = schedule(Nemesis(**kw), 3)
    many = schedule(Nemesis(**kw, overlap=True), 3)
    gaps = lambda fs: [b.at.time - a.at.time for a, b in zip(fs, fs[1:])]   # noqa: E731
    assert min(gaps(one)) >= 1.5 and min(gaps(many)) < 1.5


def test_a_replica_of_any_shard_is_drawn_among_shards_that_have_one_alive():
    """nemesis-soak seeds 144, 162 and 183: replica(shard=any) drew a shard whose replicas were
    all down (a kill timed to a promotion held two copies) and the run was unknown. Such a shard
    is no longer drawn; with every shard eligible the draw is the one it always was."""
    from types import SimpleNamespace

    from pschaos.harness.errors import HarnessError
    from pschaos.harness.faults.targets import resolve

    class Shards:
        def __init__(self, down):
            self.down = set(down)

        def routing(self):
            return {s: SimpleNamespace(primary=f"shard-{s}/0") for s in (0, 1)}

        def shard_nodes(self, s):
            return [f"shard-{s}/{i}" for i in range(3)]

        def alive(self, n):
            return n not in self.down

    for seed in range(20):
        got = resolve("replica(shard=any)", Shards({"shard-0/1", "shard-0/2"}), random.Random(seed))
        assert got.startswith("shard-1/") and got != "shard-1/0"
        rng_a, rng_b = random.Random(seed), random.Random(seed)
        everyone = resolve("replica(shard=any)", Shards(set()), rng_a)
        shard = rng_b.choice([0, 1])                      # the old draw: a shard, then one of its live replicas
        assert everyone == rng_b.choice([f"shard-{shard}/1", f"shard-{shard}/2"])
    with pytest.raises(HarnessError, match="no shard has a live replica"):
        resolve("replica(shard=any)", Shards({"shard-0/1", "shard-0/2", "shard-1/1", "shard-1/2"}), random.Random(1))
