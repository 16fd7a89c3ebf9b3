"""The adapter API without processes: the scenario schema for other systems, the checkers on
hand-made histories (they find lost updates and bad reads, and pass correct ones), the
partition's choice of node, and the pytest item's reading of `expect.finds`."""
from __future__ import annotations

import inspect

import pytest

from pschaos.harness.backends.adapters import SYSTEMS, adapter_class, system_named
from pschaos.harness.backends.adapters.portcut import isolated
from pschaos.harness.checkers.updates import counters_match, linearizable_reads, no_lost_updates
from pschaos.harness.errors import HarnessError, ScenarioError
from pschaos.harness.plugin.outcome import as_expected
from pschaos.harness.run.scenario import Scenario, load_scenario


def load(tmp_path, text: str) -> Scenario:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return load_scenario(p)


REDIS = "name: r\nsystem: redis-sentinel\ncluster: {shards: 1, copies: 3, workers: 2}\n"


def test_psnodes_is_the_default_and_adapters_get_their_own_checks(tmp_path):
    assert load(tmp_path, "name: p\nworkload: {steps: 5}\n").system == "psnodes"
    sc = load(tmp_path, REDIS)
    assert sc.selection().checks == list(adapter_class("redis-sentinel").default_checks)
    assert sc.system_options["down_after_ms"] == 1000          # defaults filled in
    assert set(SYSTEMS) == {"psnodes", "redis-sentinel", "etcd"}


@pytest.mark.parametrize("text, where, says", [
    ("name: r\nsystem: redis\n", ":2: system", "redis-sentinel"),
    (REDIS.replace("shards: 1", "shards: 2"), "cluster.shards", "one group"),
    (REDIS + "system_options: {wait_replica: 1}\n", "wait_replica", "wait_replicas"),
    (REDIS + "system_options: {wait_replicas: one}\n", "wait_replicas", "int"),
    (REDIS + "expect: {checks: [replicas-match]}\n", "expect.checks", "no-lost-updates"),
    (REDIS + "expect: {checks: [counters-match], finds: [linearizable-reads]}\n", "expect.finds", "do not run here"),
    (REDIS + "expect: {exclude: {no-lost-updates: because}}\n", "expect.exclude", "the reason"),
    (REDIS + "expect: {exclude: {linearizable-reads: not among the defaults here}}\n", "exclude.linearizable-reads",
     "does not run here anyway"),
    (REDIS + "expect: {checks: [counters-match], exclude: {counters-match: added and excluded at once}}\n",
     "exclude.counters-match", "not both"),
    (REDIS + "faults:\n  - {at: {time: 1}, kind: latency, target: 'shard-0/0 -> shard-0/1', params: {latency_ms: 5}}\n",
     "faults", "partition"),
    ("name: p\nexpect: {checks: [no-lost-updates]}\n", "expect.checks", "adapted system"),
    ("name: p\nsystem_options: {x: 1}\n", "system_options", "psnodes"),
])
def test_bad_system_settings_name_the_field_and_the_fix(tmp_path, text, where, says):
    msg = str(pytest.raises(ScenarioError, load, tmp_path, text).value)
    assert where in msg and says in msg, msg


def test_an_adapted_system_runs_on_processes_only():
    with pytest.raises(HarnessError, match="--backend process"):
        system_named("etcd").backend_factory("sim")
    assert callable(system_named("redis-sentinel").backend_factory("process"))
    assert callable(system_named("psnodes").backend_factory("sim"))


def test_a_partition_isolates_the_one_node_every_link_touches():
    links = [("shard-0/0", "shard-0/1"), ("shard-0/1", "shard-0/0"), ("shard-0/0", "shard-0/2")]
    assert isolated(links) == "shard-0/0"
    with pytest.raises(HarnessError, match="one node"):
        isolated([("shard-0/0", "shard-0/1"), ("shard-0/2", "shard-0/1"), ("shard-0/2", "shard-0/0")])


# ---------------------------------------------------------------- checkers on hand-made histories
def ev(t, type_, f, op_id=None, **value):
    e = {"t": t, "node": value.get("worker", "harness"), "type": type_, "f": f, "value": value}
    if op_id:
        e["op_id"] = op_id
    return e


def update(t0, t1, key, op, result="ok", amount=1.0):
    oid = f"{key}/u{op}"
    return [ev(t0, "invoke", "update", oid, worker=key, key=key, op=op, amount=amount),
            ev(t1, result, "update", oid, worker=key, key=key, op=op, amount=amount, node="shard-0/0")]


def read(t0, t1, key, value, n):
    oid = f"r/{n}"
    return [ev(t0, "invoke", "read", oid, worker="worker-9", key=key),
            ev(t1, "ok", "read", oid, worker="worker-9", key=key, value=value)]


def final(**keys):
    return ev(99, "info", "final-read", node="shard-0/1", keys={k: {"ops": ops, "count": len(ops), "sum": float(len(ops))}
                                                                   for k, ops in keys.items()})


def test_no_lost_updates_says_how_many_and_which():
    h = update(1, 2, "w", 1) + update(3, 4, "w", 2) + update(5, 6, "w", 3, "info") + [final(w=[1])]
    v = no_lost_updates(h, {})
    assert v.valid is False and v.details["lost"] == 1
    assert v.details["examples"] == [{"key": "w", "op": 2, "op_id": "w/u2", "acked_by_node": "shard-0/0",
                                      "acked_at_s": 4}]
    assert v.details["lost_by_acking_node"] == {"shard-0/0": 1} and v.details["lost_fraction"] == 0.5
    assert no_lost_updates(h[:-1] + [final(w=[1, 2, 3])], {}).valid is True     # an info op may land
    assert no_lost_updates(h[:-1], {}).valid == "unknown"                         # no final read
    assert no_lost_updates([final(w=[])], {}).valid == "unknown"                  # nothing acked


def test_counters_match_finds_a_count_off_its_ops_and_ops_never_invoked():
    h = update(1, 2, "w", 1) + update(3, 4, "w", 2)
    assert counters_match(h + [final(w=[1, 2])], {}).valid is True
    bad = final(w=[1, 2])
    bad["value"]["keys"]["w"]["count"] = 3
    assert counters_match(h + [bad], {}).valid is False
    assert counters_match(h + [final(w=[1, 2, 7])], {}).details["mismatched"][0]["never_invoked"] == [7]


def test_linearizable_reads_pass_a_correct_history_and_catch_stale_and_backwards_reads():
    h = update(1, 2, "w", 1) + update(3, 4, "w", 2)
    good = h + read(2.5, 2.6, "w", 1, 1) + read(3.5, 3.6, "w", 1, 2) + read(3.5, 3.7, "w", 2, 3) + read(5, 6, "w", 2, 4)
    assert linearizable_reads(good + [final(w=[1, 2])], {}).valid is True
    assert linearizable_reads(good, {}).valid == "unknown"         # no final read to hold the reads to
    stale = h + read(5, 6, "w", 1, 1)                  # both acked before it began
    assert linearizable_reads(stale, {}).details["stale"] == 1
    back = h + read(3.1, 3.2, "w", 2, 1) + read(3.3, 3.4, "w", 1, 2)    # saw 2, then 1 after it
    assert linearizable_reads(back, {}).details["went_back"] == 1
    nowhere = h + read(0.1, 0.2, "w", 1, 1)            # before any update was invoked
    assert linearizable_reads(nowhere, {}).details["from_nowhere"] == 1
    assert linearizable_reads(h, {}).valid == "unknown"


# ---------------------------------------------------------------- expect.finds as a test
def report(**checks):
    """Checks by name: a valid value, or (valid, failure kinds)."""
    def one(v):
        valid, kinds = v if isinstance(v, tuple) else (v, ["lost"] if v is False else [])
        return {"valid": valid, "details": {"kinds": kinds}}
    return {"verdict": "fail" if False in checks.values() else "pass",
            "checks": {k: one(v) for k, v in checks.items()}}


def test_a_finding_counts_only_when_exactly_the_named_checks_fail(tmp_path):
    sc = load(tmp_path, REDIS + "expect: {checks: [no-lost-updates, counters-match], finds: [no-lost-updates]}\n")
    assert as_expected(sc, report(**{"no-lost-updates": False, "counters-match": True, "scenario-ran": True}))
    assert not as_expected(sc, report(**{"no-lost-updates": True, "counters-match": True}))
    assert not as_expected(sc, report(**{"no-lost-updates": False, "counters-match": False}))
    assert not as_expected(sc, report(**{"no-lost-updates": False, "scenario-ran": "unknown"}))


def test_the_adapter_backend_implements_every_backend_method_with_its_signature():
    from pschaos.harness.backends.adapters.backend import AdapterBackend

    from tests.unit.harness.backends.test_backend_protocol import protocol_methods, shape

    for name, sig in protocol_methods().items():
        impl = getattr(AdapterBackend, name, None)
        assert callable(impl), f"AdapterBackend lacks {name}"
        assert shape(inspect.signature(impl)) == shape(sig), f"AdapterBackend.{name}{inspect.signature(impl)} != {sig}"


def test_an_adapted_systems_failover_is_timed_by_the_term_its_acks_carry():
    from pschaos.harness.checkers.failover import failover_times
    from pschaos.harness.run.metrics import failovers

    start = ev(1.0, "info", "fault-start", kind="pause", target="shard-0/0", index=0, shard=0, epoch=0,
               was_primary=True)
    promotes = [ev(t, "info", "promote", shard=0, epoch=e, node=n) for t, e, n in ((0.1, 0, "shard-0/0"),
                                                                               (2.0, 1, "shard-0/1"))]
    acks = [dict(e, value={**e["value"], "shard": 0, "epoch": ep}) for ep, e in
            ((0, update(1.5, 1.6, "w", 1)[1]), (1, update(3.0, 3.5, "w", 2)[1]))]
    h = sorted([start, *promotes, *acks, ev(4.0, "info", "fault-stop", kind="pause", target="shard-0/0", index=0)],
               key=lambda e: e["t"])
    assert [f["ms"] for f in failover_times(h)] == [2500.0]         # the first ack above epoch 0
    assert failovers(h, adapted=True) == 1 and failovers(h) == 0      # Sentinel's terms start at 0
    untimed = [e for e in h if e["f"] != "update"] + update(3.0, 3.5, "w", 2)   # no term on the ack (etcd)
    assert failover_times(sorted(untimed, key=lambda e: e["t"])) == []


# ---------------------------------------------------------------- fail closed (review of the adapters)
def heal(t, kind="pause", **v):
    return ev(t, "info", "fault-stop", kind=kind, target="shard-0/0", index=0, **v)


def test_an_empty_final_read_is_no_finding_but_unknown():
    h = update(1, 2, "w", 1) + update(3, 4, "w", 2) + [heal(2.5)]
    v = no_lost_updates(h + [final(w=[])], {})
    assert v.valid == "unknown" and "none of the 1 updates acknowledged after the last heal" in v.details["reason"]
    assert no_lost_updates(h + [final(w=[2])], {}).valid is False        # holds the later ack: op 1 is lost


def test_no_update_acknowledged_after_the_last_heal_is_unknown():
    h = update(1, 2, "w", 1) + [heal(5.0)] + [final(w=[1])]
    v = no_lost_updates(h, {})
    assert v.valid == "unknown" and "after the last heal" in v.details["reason"]


def test_a_system_that_never_settled_or_a_partition_that_dropped_nothing_is_unknown():
    h = update(1, 2, "w", 1) + update(3, 4, "w", 2) + [final(w=[1, 2])]
    assert no_lost_updates(h, {}).valid is True
    unsettled = h + [ev(5, "info", "quiesce", settled=False, timeout_s=40)]
    for check in (no_lost_updates, counters_match):
        v = check(unsettled, {})
        assert v.valid == "unknown" and "never settled" in v.details["reason"], v
    blunt = h + [heal(2.5, kind="partition", packets_dropped=0)]
    assert "dropped no packet" in no_lost_updates(blunt, {}).details["reason"]
    assert no_lost_updates(h + [heal(2.5, kind="partition", packets_dropped=7)], {}).valid is True


def test_a_leader_fault_with_no_new_term_seen_decides_only_a_finding():
    start = ev(0.5, "info", "fault-start", kind="pause", target="shard-0/0", index=0, epoch=3, was_primary=True)
    h = [start] + update(1, 2, "w", 1) + update(3, 4, "w", 2) + [heal(2.5), final(w=[2])]
    plain = no_lost_updates(h, {})
    assert plain.valid is False and "no new primary was seen elected" in plain.details["notes"][0]
    assert no_lost_updates(h, {"finds": ["no-lost-updates"]}).valid == "unknown"
    seen = h + [ev(2.0, "info", "topology", tick=3, shard=0, primary="shard-0/1", epoch=4)]
    assert no_lost_updates(sorted(seen, key=lambda e: e["t"]), {"finds": ["no-lost-updates"]}).valid is False


def test_many_sample_errors_make_the_checks_unknown():
    h = update(1, 2, "w", 1) + [final(w=[1])]
    errs = [ev(0.1 * i, "info", "sample-error", tick=i, error="KeyError: 'header'") for i in range(3)]
    ok = [ev(0.1 * i, "info", "topology", tick=i, shard=0, primary="shard-0/0", epoch=2) for i in range(3)]
    assert "sample-error" in no_lost_updates(h + errs + ok, {}).details["reason"]
    assert no_lost_updates(h + errs[:1] + ok * 3, {}).valid is True


def test_the_final_read_counts_as_a_read_after_every_op():
    h = update(1, 2, "w", 1) + update(3, 4, "w", 2, "info") + read(5, 6, "w", 2, 1)
    v = linearizable_reads(h + [final(w=[1])], {})          # a read saw op 2, then it vanished
    assert v.valid is False and v.details["final_below_read"] == 1 and v.details["kinds"] == ["final_below_read"]
    assert linearizable_reads(h + [final(w=[1, 2])], {}).valid is True


def test_a_finding_must_be_of_a_kind_the_scenario_accepts(tmp_path):
    sc = load(tmp_path, REDIS + "expect: {checks: [no-lost-updates, linearizable-reads], "
                                "finds: [no-lost-updates, linearizable-reads]}\n")
    assert as_expected(sc, report(**{"no-lost-updates": False, "linearizable-reads": (False, ["stale"])}))
    # a refused update that was applied is the harness' or the adapter's error, not a finding
    assert not as_expected(sc, report(**{"no-lost-updates": False, "linearizable-reads": (False, ["from_nowhere"])}))
    assert not as_expected(sc, report(**{"no-lost-updates": False}))          # a check it finds is absent
    only_stale = load(tmp_path, REDIS + "expect: {checks: [linearizable-reads], finds: [{linearizable-reads: [stale]}]}\n")
    assert as_expected(only_stale, report(**{"linearizable-reads": (False, ["stale"])}))
    assert not as_expected(only_stale, report(**{"linearizable-reads": (False, ["stale", "went_back"])}))
    msg = str(pytest.raises(ScenarioError, load, tmp_path,
                            REDIS + "expect: {checks: [linearizable-reads], finds: [{linearizable-reads: [old]}]}\n").value)
    assert "expect.finds.linearizable-reads" in msg and "stale" in msg


def test_the_runner_names_no_system():
    import pschaos.harness.run.runner as runner

    text = inspect.getsource(runner)
    for word in ("psnodes", "process_backend", "BACKENDS", "baseline", "replication", "staleness"):
        assert word not in text, word


def test_a_sample_that_raises_is_recorded_and_the_sampler_goes_on():
    from types import SimpleNamespace

    from pschaos.harness.history.clock import WALL
    from pschaos.harness.run.runner import Runner

    events, calls = [], []

    def sample(be, record, tick):
        calls.append(tick)
        if tick == 3:
            fake.sampling = False
        if tick < 3:
            raise KeyError("header")          # etcd's status with an error body, a paused node
    fake = SimpleNamespace(sampling=True, backend=None, clock=WALL, system=SimpleNamespace(sample=sample),
                           history=SimpleNamespace(record=lambda f, v, **kw: events.append((f, v))))
    Runner._sample(fake, period=0.01)
    assert calls == [1, 2, 3]
    assert [f for f, _ in events] == ["sample-error", "sample-error"] and "KeyError" in events[0][1]["error"]


def test_routing_reads_term_and_primary_from_one_view():
    from pschaos.harness.backends.adapters.api import Adapter
    from pschaos.harness.backends.adapters.backend import AdapterBackend

    class Flipping(Adapter):
        """A failover between two questions: primary() answers before it, epoch() after."""
        def primary(self, group=0):
            return "shard-0/0"

        def epoch(self, group=0):
            return 5

        def view(self, group=0):
            return 5, "shard-0/1"

    be = AdapterBackend.__new__(AdapterBackend)
    be.adapter = Flipping.__new__(Flipping)
    r = be.routing()[0]
    assert (r.epoch, r.primary) == (5, "shard-0/1")
    assert Adapter.view(Flipping.__new__(Flipping)) == (5, "shard-0/0")      # the default: both questions


@pytest.mark.parametrize("extra, where, says", [
    ("faults:\n  - {at: {time: 1}, kind: kill, target: worker-0, duration_s: 1}\n", "faults[0]", "shard-0/0 .. shard-0/2"),
    ("faults:\n  - {at: {time: 1}, kind: kill, target: etcd, duration_s: 1}\n", "faults[0]", "not a node"),
    ("faults:\n  - {at: {time: 1}, kind: kill, target: shard-0/5, duration_s: 1}\n", "faults[0]", "not a data node"),
    ("faults:\n  - {at: {time: 1}, kind: kill, target: primary(shard=0), duration_s: 1, params: {during: promotion}}\n",
     "params.during", "remove during"),
    ("system_options: {partition_keeps_replica: true}\n", "partition_keeps_replica", "copies: 3"),
    ("system_options: {wait_replicas: 3}\n", "wait_replicas", "copies"),
])
def test_an_adapted_scenario_that_could_only_fail_at_run_time_is_refused_at_load(tmp_path, extra, where, says):
    text = (REDIS.replace("copies: 3", "copies: 1") if "keeps" in extra else REDIS) + extra
    msg = str(pytest.raises(ScenarioError, load, tmp_path, text).value)
    assert where in msg and says in msg, msg


def test_settings_another_system_would_ignore_are_refused(tmp_path):
    msg = str(pytest.raises(ScenarioError, load, tmp_path, REDIS.replace("workers: 2", "workers: 2, replication: async,"
                                                                          " training: bsp")).value)
    assert "cluster" in msg and "['replication', 'training']" in msg and "system_options" in msg
    msg = str(pytest.raises(ScenarioError, load, tmp_path, "name: p\nworkload: {steps: 5, read_every: 3}\n").value)
    assert "workload.read_every" in msg and "remove read_every" in msg


# ---------------------------------------------------------------- debris
class Empty:
    """An adapter with no processes: what start and teardown do around any adapter."""
    name, options, settle_s = "empty", {}, 1.0

    def __init__(self, env):
        self.env, self.nodes = env, []

    def configure(self):
        pass

    def commands(self):
        return {}

    def ready(self):
        return True


def backend(tmp_path, monkeypatch, long_path: bool):
    from types import SimpleNamespace

    from pschaos.harness.machinery import registry
    from pschaos.harness.backends.adapters.backend import AdapterBackend

    monkeypatch.setattr(registry, "DIR", tmp_path / "runs")
    run_dir = tmp_path / ("x" * 120 if long_path else "r") / "run"
    run_dir.mkdir(parents=True)
    sc = SimpleNamespace(cluster=SimpleNamespace(copies=1, workers=0), workload=SimpleNamespace(read_every=0),
                         system_options={})
    return AdapterBackend(Empty, sc, run_dir, "t-debris-" + tmp_path.name[-6:], 1)


def test_a_socket_folder_outside_the_run_is_registered_and_clean_removes_it(tmp_path, monkeypatch):
    import json

    from pschaos.harness.machinery import registry
    from pschaos.harness.commands.clean import remove_folders

    be = backend(tmp_path, monkeypatch, long_path=True)
    try:
        be.start(timeout=2)
        assert be.sock_dir.is_dir() and str(be.sock_dir).startswith("/tmp/pschaos-")
        entry = json.loads((registry.DIR / f"{be.run_id}.json").read_text())
        assert entry["folders"] == [str(be.sock_dir)]              # a SIGKILLed harness leaves this
        assert remove_folders(entry) == [str(be.sock_dir)] and not be.sock_dir.exists()
        assert remove_folders({"folders": [str(tmp_path)]}) == []  # nothing outside /tmp/pschaos-*
    finally:
        be.teardown()
    assert not (registry.DIR / f"{be.run_id}.json").exists()


def test_teardown_runs_every_step_and_joins_the_workers_against_one_deadline(tmp_path, monkeypatch):
    import time

    from pschaos.harness.machinery import registry

    be = backend(tmp_path, monkeypatch, long_path=True)
    be.start(timeout=2)

    class Stuck:
        def join(self, t):
            time.sleep(t)

        def is_alive(self):
            return True
    be.threads = {"worker-0": Stuck(), "worker-1": Stuck(), "worker-2": Stuck()}
    be.WORKER_JOIN_S = 0.3

    def broken(force=False):
        raise RuntimeError("nft: table busy")
    be.nft.destroy = broken
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="table busy"):
        be.teardown()
    assert time.monotonic() - t0 < 0.8                                  # not 3 x 0.3 (nor 3 x 5 s)
    assert not be.sock_dir.exists() and not (registry.DIR / f"{be.run_id}.json").exists()


def test_discarding_data_keeps_the_configs_the_system_rewrote(tmp_path, monkeypatch):
    be = backend(tmp_path, monkeypatch, long_path=False)
    node = be.run_dir / "data" / "sentinel-0"
    node.mkdir(parents=True)
    (node / "sentinel.conf").write_text("sentinel known-replica mymaster 127.0.0.1 7001\n")
    (node / "dump.rdb").write_text("data")
    be.discard_data()
    assert not (be.run_dir / "data").exists()
    assert "known-replica" in (be.run_dir / "configs" / "sentinel-0" / "sentinel.conf").read_text()


# ---------------------------------------------------------------- did the cut bite
def test_a_partition_records_the_cut_nodes_progress_and_the_term_before_it_heals(monkeypatch):
    import pschaos.harness.backends.adapters.portcut as portcut

    class Table:
        created, name, rules = True, "t", []

        def handles(self):
            return list(range(len(self.rules)))

        def delete(self, handles):
            self.rules.clear()

        def dropped(self, handles):
            return 9
    table = Table()
    monkeypatch.setattr(portcut, "nft", lambda *a: table.rules.append(a))
    reads = iter([{"node": "shard-0/0", "progress": {"term": 2, "index": 100, "leads": True}, "view": (2, "shard-0/0")},
                  {"node": "shard-0/0", "progress": {"term": 2, "index": 180, "leads": True}, "view": (3, "shard-0/1")}])
    cut = portcut.PortCut(table, "partition", ["tcp dport 5"], {}, probe=lambda: next(reads))
    cut.inject()
    ev_ = cut.evidence()              # as the link fault asks it: before it heals (harness/faults/link.py)
    cut.heal()
    assert ev_["new_primary_elected"] is True and ev_["cut_node_advanced"] is True     # its log still grew
    assert ev_["after"]["progress"]["index"] == 180 and not table.rules


def test_a_partition_of_the_primary_with_no_new_term_seen_is_noted():
    start = ev(0.5, "info", "fault-start", kind="partition", target="primary(shard=0) <-> replicas(shard=0)", index=0,
               isolated_primary={"node": "shard-0/0", "epoch": 2, "shard": 0})
    h = [start] + update(1, 2, "w", 1) + update(3, 4, "w", 2) + [heal(2.5, kind="partition", packets_dropped=5),
                                                                 final(w=[1, 2])]
    assert "no new primary was seen elected" in no_lost_updates(h, {}).details["notes"][0]


def test_a_check_the_scenario_may_find_must_be_decided_either_way(tmp_path):
    sc = load(tmp_path, REDIS + "expect: {checks: [no-lost-updates, counters-match], may_find: [no-lost-updates]}\n")
    assert as_expected(sc, report(**{"no-lost-updates": True, "counters-match": True, "scenario-ran": True}))
    assert as_expected(sc, report(**{"no-lost-updates": False, "counters-match": True, "scenario-ran": True}))
    assert not as_expected(sc, report(**{"no-lost-updates": "unknown", "counters-match": True}))
    assert not as_expected(sc, report(**{"no-lost-updates": True, "counters-match": False}))
    assert not as_expected(sc, report(**{"counters-match": True}))                  # absent: not decided
    assert load_scenario("scenarios/redis-kill-master.yaml").expect.may_find == ["no-lost-updates"]
    msg = str(pytest.raises(ScenarioError, load, tmp_path, REDIS + "expect: {checks: [no-lost-updates], finds: "
                                                                   "[no-lost-updates], may_find: [no-lost-updates]}\n").value)
    assert "expect.may_find" in msg and "one of them" in msg


def test_a_failing_item_says_what_it_may_find():
    from pschaos.harness.plugin.outcome import explain

    rep = {"scenario": "k", "seed": 1, "backend": "process", "verdict": "unknown", "rerun": "pschaos run k",
           "scenario_spec": {"expect": {"finds": [], "may_find": ["no-lost-updates"]}},
           "checks": {"no-lost-updates": {"valid": "unknown", "details": {"reason": "never settled"}}}}
    assert "may find: no-lost-updates" in explain(rep) and "never settled" in explain(rep)
