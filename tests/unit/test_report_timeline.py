"""The timeline's model from a history, and evidence resolved to moments on it."""
from reports import evidence, timeline, timeline_svg


def ev(t, who, typ, f, op=None, **value):
    e = {"t": t, "node": who, "type": typ, "f": f, "value": value}
    if op:
        e["op_id"] = op
    return e


HISTORY = [
    ev(0.1, "shard-0/0", "info", "promote", shard=0, epoch=1, node="shard-0/0"),
    ev(0.2, "worker-1", "invoke", "push", "w1:1", worker="worker-1", req_id=1, shard=0),
    ev(0.25, "worker-1", "ok", "push", "w1:1", worker="worker-1", req_id=1, shard=0, epoch=1, seq=1),
    ev(1.0, "worker-1", "invoke", "push", "w1:2", worker="worker-1", req_id=2, shard=0),
    ev(1.2, "worker-1", "fail", "push", "w1:2", worker="worker-1", req_id=2, shard=0),
    ev(1.3, "worker-1", "invoke", "push", "w1:3", worker="worker-1", req_id=2, shard=0),     # the retry
    ev(1.9, "worker-1", "ok", "push", "w1:3", worker="worker-1", req_id=2, shard=0, epoch=2, seq=2),
    ev(1.5, "shard-0/1", "info", "promote", shard=0, epoch=2, node="shard-0/1"),
    ev(1.6, "shard-0/1", "info", "sync", src="shard-0/1", dst="shard-0/2", kind="delta", bytes=10),
    ev(2.0, "worker-0", "invoke", "pull", "w0:9", worker="worker-0", shard=0),              # never completes
    ev(2.5, "worker-10", "info", "train-step", worker="worker-10", step=0, loss=0.5),
    ev(3.0, "harness", "info", "quiesce"),
]
FAULTS = [{"kind": "kill", "target": "shard-0/0", "start_s": 1.0, "end_s": 2.0}]


def test_lanes_marks_epochs_and_faults():
    tl = timeline.build(HISTORY, FAULTS)
    names = [ln.name for ln in tl.lanes]
    assert names == ["shard-0/0", "shard-0/1", "worker-0", "worker-1", "worker-10"]   # no harness lane
    lanes = {ln.name: ln for ln in tl.lanes}
    assert [m[1] for m in lanes["worker-1"].marks] == ["ok", "fail", "duplicate"]
    assert lanes["worker-0"].marks[0][1] == "info" and "never completed" in lanes["worker-0"].marks[0][2]
    assert lanes["shard-0/0"].primary == [(0.1, 1.5, "e1 primary")]
    assert lanes["shard-0/1"].primary == [(1.5, 3.0, "e2 primary")]
    assert lanes["shard-0/0"].down == [(1.0, 2.0, "kill: down")]
    assert lanes["shard-0/1"].events[0][1].startswith("sync → shard-0/2")
    assert tl.faults == [(1.0, 2.0, "kill shard-0/0")] and tl.end == 3.0


def test_an_ack_the_ps_called_a_duplicate_is_marked_so():
    h = [ev(0.1, "worker-0", "invoke", "push", "a", worker="worker-0", req_id=5, shard=1),
         ev(0.2, "worker-0", "ok", "push", "a", worker="worker-0", req_id=5, shard=1, duplicate=True)]
    assert timeline.build(h, []).lanes[0].marks[0][1] == "duplicate"


def test_evidence_names_moments_by_op_request_and_time():
    checks = {"no-lost-acks": {"valid": False, "details": {"examples": [{"worker": "worker-1", "req_id": 2}]}},
              "delta-complete": {"valid": False, "details": {"stale": [{"pull": "w0:9"}], "at": [{"t": 2.7}]}},
              "single-primary": {"valid": True, "details": {"op": "w1:1"}}}
    ms = evidence.moments(checks, HISTORY)
    assert set(ms) == {"no-lost-acks", "delta-complete"}                       # a passing check links nothing
    (lost,) = ms["no-lost-acks"]
    assert lost.t == 1.2 and lost.node == "worker-1" and "w1:2" in lost.label  # the first send of request 2
    assert [(m.t, m.node) for m in ms["delta-complete"]] == [(2.0, "worker-0"), (2.7, None)]
    ids = [m.id for v in ms.values() for m in v]
    assert len(set(ids)) == len(ids)


def test_the_drawn_timeline_has_every_lane_and_a_target_per_moment():
    tl = timeline.build(HISTORY, FAULTS)
    ms = evidence.moments({"x": {"valid": False, "details": {"op": "w1:3"}}}, HISTORY)["x"]
    page = timeline_svg.render(tl, ms, badge="simulated · virtual time")
    assert all(f">{ln.name}<" in page for ln in tl.lanes)
    assert f'id="{ms[0].id}"' in page and "simulated · virtual time" in page
    assert 'class="tl-duplicate"' in page and 'class="tl-fail"' in page and "<script" not in page


def test_a_simulated_run_page_says_so_on_every_plot_and_has_no_script():
    from reports import html

    report = {"scenario": "s", "seed": 1, "backend": "sim", "verdict": "fail", "rerun": "pschaos run s.yaml",
              "simulated": {"calibration": "c.json"}, "faults": FAULTS, "metrics": {"final_loss": None},
              "failover_times": [{"kind": "kill", "target": "shard-0/0", "fault_t": 1.0, "ms": 500.0, "new_epoch": 2}],
              "checks": {"no-lost-acks": {"valid": False, "details": {"examples": [{"worker": "worker-1", "req_id": 2}]}}}}
    page = html.render(report, HISTORY)
    plots = page.count('<svg class="plot')
    assert plots == 7 and page.count("simulated · virtual time</text>") == plots
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert 'href="#moment-1"' in page and 'id="moment-1"' in page and ">None<" not in page
