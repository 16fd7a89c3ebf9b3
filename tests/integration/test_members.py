"""BSP membership with real etcd and real processes: a killed worker leaves the barrier after its
lease's TTL and the others go on; one that joins starts at the front, not at clock 0.

Before membership (a fixed set worker-0..N-1) the survivors of a kill waited at their next pull
until it timed out, step after step: the first test failed on that code (the workers never finished).
"""
from pschaos.harness.history.events import read_events
from pschaos.harness.machinery.procs import wait_until

STEPS = 300


def steps_of(be, name):
    return [e for e in read_events(be.events_path(name)) if e["f"] == "train-step"]


def node_events(be, f):
    return [e for n in be.nodes() for e in read_events(be.events_path(n)) if e["f"] == f]


def test_a_killed_bsp_worker_leaves_the_barrier_and_the_others_go_on(make_cluster):
    be = make_cluster(shards=2, copies=2, workers=3, training="bsp", model="mlp", member_ttl_s=1)
    for j in range(3):
        be.start_worker(f"worker-{j}", STEPS, step_delay=0.005)
    assert wait_until(lambda: len(steps_of(be, "worker-2")) >= 30, 120, 0.05)
    be.kill("worker-2")
    killed_at = max(e["t"] for e in steps_of(be, "worker-2"))
    assert be.wait_workers(120), "the survivors did not finish: the barrier waited for the dead worker"
    for w in ("worker-0", "worker-1"):
        done = [e["value"] for e in read_events(be.events_path(w)) if e["f"] == "train-done"]
        errors = [e["value"]["error"] for e in read_events(be.events_path(w)) if e["f"] == "train-error"]
        assert done and done[-1]["steps"] == STEPS and not errors, (w, errors[:2])
    expired = [e["value"] for e in node_events(be, "member-expire")]
    assert [(v["worker"], v["generation"]) for v in expired] == [("worker-2", 2)]
    views = {e["node"]: e["value"]["members"] for e in node_events(be, "member-view")
             if e["value"]["generation"] == 2}
    assert views and all(sorted(m) == ["worker-0", "worker-1"] for m in views.values())
    after = sorted(e["t"] for e in steps_of(be, "worker-0") if e["t"] > killed_at)
    gaps = [b - a for a, b in zip([killed_at, *after], after)]
    print(f"barrier stall after the kill: {max(gaps):.3f} s (member_ttl_s 1)")


def test_a_joiner_starts_at_the_front_and_is_waited_for(make_cluster):
    be = make_cluster(shards=2, copies=2, workers=2, training="bsp", model="mlp")
    for j in range(2):
        be.start_worker(f"worker-{j}", STEPS, step_delay=0.005)
    assert wait_until(lambda: len(steps_of(be, "worker-0")) >= 60, 120, 0.05)
    be.start_worker("worker-2", STEPS, step_delay=0.005)
    assert be.wait_workers(180)
    (adm,) = [e["value"] for e in read_events(be.events_path("worker-2")) if e["f"] == "member-admitted"]
    first = min(e["value"]["step"] for e in steps_of(be, "worker-2"))
    assert adm["generation"] == 2 and adm["start"] >= 60 and first == adm["start"]
    (join,) = [e["value"] for e in node_events(be, "member-join")]
    assert (join["worker"], join["start"], join["lease"]) == ("worker-2", adm["start"], adm["lease"])
    # from its admission on, nobody finished a step more than 0 ahead of it (BSP)
    pushed = sorted((e["t"], e["value"]["clock"]) for e in read_events(be.events_path("worker-2"))
                    if e["f"] == "push" and e["type"] == "invoke")
    joined_at = min(e["t"] for e in node_events(be, "member-view") if e["value"]["generation"] == 2)
    for w in ("worker-0", "worker-1"):
        for e in steps_of(be, w):
            if e["t"] > joined_at + 1.0:      # every copy adopted it by then (polls every 0.1 s)
                done = max([c for t, c in pushed if t < e["t"]], default=adm["start"] - 1)
                assert e["value"]["step"] - max(done, adm["start"] - 1) - 1 <= 0, (w, e["value"]["step"], done)
