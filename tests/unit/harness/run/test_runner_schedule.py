"""The runner's fault schedule, driven against the in-memory backend in virtual time: no process,
port or psnodes import. Injection at a step and at a time, heal after a duration or at a step,
an instant fault, a fault that never comes due, and one the end of the workload cuts short.

The fake writes the events a real run has (promotions, training steps, each worker's train-done),
so every test also holds the report's verdict and checks: a run whose schedule did not happen as
written is unknown with the reason, one where a faulted worker never came back fails, and one
where everything happened passes."""
from __future__ import annotations

import json

from pschaos.harness.run.runner import Runner
from pschaos.harness.run.scenario import Scenario

from tests.unit.fake_backend import FakeBackend, ManualClock
from tests.unit.helpers import only


def scenario(faults: list[dict], steps: int = 100, **cluster) -> Scenario:
    return only(Scenario.model_validate({
        "name": "fake-schedule", "cluster": {"shards": 2, "copies": 3, "workers": 1, **cluster},
        "workload": {"steps": steps}, "faults": faults,
        "expect": {"checks": ["single-primary"]}}))


def run(tmp_path, sc: Scenario, keep_data: bool = False, **fake) -> tuple[dict, FakeBackend, list[dict]]:
    clock = ManualClock()
    made: list[FakeBackend] = []

    def make(scenario, run_dir, run_id, seed):
        made.append(FakeBackend(scenario.cluster, run_dir, clock, **fake))
        return made[-1]
    rep = Runner(sc, 7, tmp_path / "out", "fake", quiet=True, keep_data=keep_data, make_backend=make).run()
    harness = [json.loads(x) for x in made[0].events_path("harness").read_text().splitlines()]
    return rep, made[0], harness


def valid(rep: dict) -> dict:
    """Each check's verdict, as the report has it."""
    return {name: c["valid"] for name, c in rep["checks"].items()}


def merged(tmp_path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "out" / "history.jsonl").read_text().splitlines()]


def near(t: float, want: float, slack: float = 0.05) -> bool:
    return want - 1e-6 <= t <= want + slack


def test_schedule_injects_heals_misses_and_cuts_short_in_virtual_time(tmp_path):
    sc = scenario([
        {"at": {"step": 20}, "kind": "kill", "target": "primary(shard=0)", "duration_s": 2.0},
        {"at": {"time": 3.0}, "kind": "pause", "target": "shard-1/1", "until": {"step": 60}},
        {"at": {"time": 1.0}, "kind": "restart", "target": "shard-0/2"},
        {"at": {"time": 9.5}, "kind": "stop", "target": "replica(shard=1)", "duration_s": 5.0},
        {"at": {"step": 500}, "kind": "kill", "target": "shard-1/0"},
    ])
    rep, be, hist = run(tmp_path, sc)
    calls = {(c, n): t for t, c, n in be.calls}

    # injected at its step (worker-0 takes a step every 0.1 virtual s), healed after its duration
    assert near(calls[("kill", "shard-0/0")], 2.0)
    assert near(calls[("restart", "shard-0/0")] - calls[("kill", "shard-0/0")], 2.0)
    # at a time, healed at a step
    assert near(calls[("pause", "shard-1/1")], 3.0)
    assert near(calls[("resume", "shard-1/1")], 6.0)
    # an instant fault: stopped and started at once
    assert near(calls[("stop", "shard-0/2")], 1.0) and calls[("restart", "shard-0/2")] == calls[("stop", "shard-0/2")]

    starts = {e["value"]["index"]: e for e in hist if e["f"] == "fault-start"}
    stops = {e["value"]["index"]: e for e in hist if e["f"] == "fault-stop"}
    assert set(starts) == set(stops) == {0, 1, 2, 3}
    assert starts[0]["value"] | {"target": "shard-0/0", "was_primary": True, "epoch": 1, "shard": 0} == starts[0]["value"]
    assert starts[0]["value"]["step"] == 20 and stops[0]["value"]["why"] == "scheduled"
    assert stops[1]["value"]["why"] == "scheduled" and stops[2]["value"]["why"] == "instant"
    # the workload (100 steps, 10 s) ends before the stop's 5 s are over: healed early, and said so
    assert near(calls[("stop", starts[3]["value"]["target"])], 9.5)
    assert stops[3]["value"]["why"] == "end of workload" and stops[3]["value"]["cut_short"] is True
    assert not any(stops[i]["value"].get("cut_short") for i in (0, 1, 2))
    # never came due: recorded as missed, never injected
    missed = [e["value"] for e in hist if e["f"] == "fault-missed"]
    assert [(m["index"], m["why"]) for m in missed] == [(4, "the workload ended first")]
    assert ("kill", "shard-1/0") not in calls

    # history times are the virtual clock's, from the run's start; faults in the report likewise
    t0 = hist[0]["t"]
    assert near(starts[1]["t"] - t0, 3.0) and near(stops[0]["t"] - starts[0]["t"], 2.0)
    assert [(f["kind"], f["target"]) for f in rep["faults"]][:2] == [("restart", "shard-0/2"), ("kill", "shard-0/0")]
    assert all(f["end_s"] >= f["start_s"] for f in rep["faults"])

    # observed through the protocol: the failover the kill caused, every copy healed and alive
    finals = {e["value"]["node"]: e["value"] for e in hist if e["f"] == "final-state"}
    assert finals["shard-0/1"]["role"] == "primary" and finals["shard-0/1"]["epoch"] == 2
    assert all(v["alive"] for v in finals.values())
    assert [e["value"]["settled"] for e in hist if e["f"] == "quiesce"] == [True]
    assert be.torn_down and rep["scenario"] == "fake-schedule" and rep["backend"] == "fake"

    # the verdict: every faulted copy came back and one primary led each epoch, but the schedule
    # did not happen as written (a fault missed, one cut short), so the run cannot pass
    assert rep["verdict"] == "unknown"
    assert valid(rep) == {"single-primary": True, "scenario-ran": "unknown", "nodes-back": True, "progress": True}
    assert rep["checks"]["single-primary"]["details"]["epochs"] == {"0": 2, "1": 1}
    assert rep["checks"]["nodes-back"]["details"]["faulted"] == \
        sorted({"shard-0/0", "shard-0/2", "shard-1/1", starts[3]["value"]["target"]})
    reasons = rep["checks"]["scenario-ran"]["details"]["reasons"]
    assert reasons == ["fault 4 (kill shard-1/0) never came due: the workload ended first",
                       f"fault 3 (stop {starts[3]['value']['target']}) was healed at the end of the workload, "
                       "before the time or step the scenario gave it"]
    assert list(rep["unknown_reasons"]) == ["scenario-ran"]

    # the history was gathered through the protocol (the fake keeps its own folders), and the
    # cluster's data was discarded through it after the run
    hist_all = merged(tmp_path)
    assert {e["node"] for e in hist_all} >= {"harness", "shard-0/0", "shard-0/1", "shard-1/0", "worker-0"}
    assert [(e["value"]["worker"], e["value"]["steps"]) for e in hist_all if e["f"] == "train-done"] == \
        [("worker-0", 100)]
    assert be.discarded and not (tmp_path / "out" / "run" / "disks").exists()
    assert (tmp_path / "out" / "run" / "fake-events" / "worker-0.jsonl").exists()


def test_a_fault_that_cannot_be_injected_is_recorded_not_raised(tmp_path):
    sc = scenario([{"at": {"step": 5}, "kind": "latency", "target": "workers -> shard(0)",
                    "params": {"latency_ms": 10}}], steps=20)
    rep, be, hist = run(tmp_path, sc)
    errs = [e["value"] for e in hist if e["f"] == "fault-error"]
    assert len(errs) == 1 and "without link proxies" in errs[0]["error"]
    # registered before it acts, so it is healed (and said to be partial) like any other
    assert [e["value"]["partial"] for e in hist if e["f"] == "fault-start"] == [True]
    assert [e["value"]["why"].startswith("injection failed") for e in hist if e["f"] == "fault-stop"] == [True]
    assert be.calls == []
    # the fault did not happen: unknown, with the error as the reason; the rest ran as it should
    assert rep["verdict"] == "unknown"
    assert valid(rep) == {"single-primary": True, "scenario-ran": "unknown", "nodes-back": True, "progress": True}
    reason = rep["unknown_reasons"]["scenario-ran"]
    assert reason.startswith("fault 0 (latency workers->shard(0)) failed: HarnessError") and "link proxies" in reason


def test_a_worker_fault_keeps_the_drive_loop_going_until_it_heals(tmp_path):
    sc = scenario([{"at": {"step": 10}, "kind": "kill", "target": "worker-0", "duration_s": 1.0}], steps=30)
    rep, be, hist = run(tmp_path, sc)
    calls = {(c, n): t for t, c, n in be.calls}
    assert near(calls[("kill", "worker-0")], 1.0) and near(calls[("restart", "worker-0")], 2.0)
    assert be.steps["worker-0"] == 30
    assert [e["value"]["why"] for e in hist if e["f"] == "fault-stop"] == ["scheduled"]
    # the killed run wrote no train-done; the restarted one (a new pid) ran the workload again and did
    done = [e for e in merged(tmp_path) if e["f"] == "train-done"]
    assert [e["value"]["steps"] for e in done] == [30] and near(done[0]["t"], 5.0)
    first_pid = next(e["pid"] for e in merged(tmp_path) if e["f"] == "train-step")
    assert done[0]["pid"] != first_pid
    # everything happened as written and the worker is back: the run passes
    assert rep["verdict"] == "pass"
    assert valid(rep) == {"single-primary": True, "scenario-ran": True, "nodes-back": True, "progress": True}
    assert rep["checks"]["nodes-back"]["details"] == {"faulted": ["worker-0"], "dead_at_end": []}
    assert rep["metrics"]["steps"] == 30


def test_a_worker_that_a_heal_does_not_bring_back_fails_the_run(tmp_path):
    sc = scenario([{"at": {"step": 10}, "kind": "kill", "target": "worker-0", "duration_s": 1.0}], steps=30)
    rep, be, hist = run(tmp_path, sc, dead_on_restart=frozenset({"worker-0"}))
    assert ("restart", "worker-0") in {(c, n) for _, c, n in be.calls} and be.steps["worker-0"] == 10
    assert not [e for e in merged(tmp_path) if e["f"] == "train-done"]
    assert rep["verdict"] == "fail"
    assert valid(rep) == {"single-primary": True, "scenario-ran": "unknown", "nodes-back": False, "progress": True}
    assert rep["checks"]["nodes-back"]["details"]["dead_at_end"] == \
        [{"node": "worker-0", "why": "no run finished after its last heal"}]
    assert rep["unknown_reasons"]["scenario-ran"] == "worker-0 never finished its workload (no train-done)"


def test_a_stopped_worker_ends_its_run_and_the_data_stays_when_asked(tmp_path):
    sc = scenario([{"at": {"step": 10}, "kind": "stop", "target": "worker-0", "duration_s": 1.0}], steps=30)
    rep, be, _ = run(tmp_path, sc, keep_data=True)
    # SIGTERM: the stopped run says how far it got; the restarted one does the whole workload
    assert [e["value"]["steps"] for e in merged(tmp_path) if e["f"] == "train-done"] == [10, 30]
    assert rep["verdict"] == "pass"
    assert valid(rep) == {"single-primary": True, "scenario-ran": True, "nodes-back": True, "progress": True}
    assert not be.discarded and (tmp_path / "out" / "run" / "disks" / "shard-0-0" / "store").exists()


def test_flap_waits_on_the_backends_clock(tmp_path):
    sc = scenario([{"at": {"step": 10}, "kind": "flap", "target": "replica(shard=0)", "duration_s": 8.0,
                    "params": {"count": 2, "down_s": 1.0, "period_s": 1.0}}])
    rep, be, hist = run(tmp_path, sc)
    flaps = [(t, c) for t, c, n in be.calls if c in ("kill", "restart")]
    assert [c for _, c in flaps] == ["kill", "restart", "kill", "restart"]
    assert flaps[1][0] - flaps[0][0] >= 1.0 - 1e-6 and flaps[2][0] - flaps[1][0] >= 1.0 - 1e-6
    assert [e["value"]["flap"] for e in hist if e["f"] == "fault-start" and "flap" in e["value"]] == [0, 1]
    assert not [e for e in hist if e["f"] == "fault-error"]
    assert rep["verdict"] == "pass"
    assert valid(rep) == {"single-primary": True, "scenario-ran": True, "nodes-back": True, "progress": True}
    flapped = {e["value"]["target"] for e in hist if e["f"] == "fault-start" and "flap" in e["value"]}
    assert len(flapped) == 1 and rep["checks"]["nodes-back"]["details"] == {"faulted": sorted(flapped),
                                                                            "dead_at_end": []}
