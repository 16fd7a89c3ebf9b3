"""The timeline's model from a history, and evidence resolved to moments on it."""
from pschaos.reports import evidence, timeline, timeline_svg


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
    assert lost.t == 1.9 and lost.node == "worker-1" and "w1:3" in lost.label  # the acked retry, not the failed send
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
    from pschaos.reports import html

    report = {"scenario": "s", "seed": 1, "backend": "sim", "verdict": "fail", "rerun": "pschaos run s.yaml",
              "simulated": {"calibration": "c.json"}, "faults": FAULTS, "metrics": {"final_loss": None},
              "failover_times": [{"kind": "kill", "target": "shard-0/0", "fault_t": 1.0, "ms": 500.0, "new_epoch": 2}],
              "checks": {"no-lost-acks": {"valid": False, "details": {"examples": [{"worker": "worker-1", "req_id": 2}]}}}}
    page = html.render(report, HISTORY)
    plots = page.count('<svg class="plot')
    assert plots == 7 and page.count("simulated · virtual time</text>") == plots
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert 'href="#moment-1"' in page and 'id="moment-1"' in page and ">None<" not in page


def push(t, who, typ, op, pid, inc, req, shard, **more):
    e = ev(t, who, typ, "push", op, worker=who, incarnation=inc, req_id=req, shard=shard, **more)
    return e | {"pid": pid}


# worker-0 is killed at 1.0 with worker-0:2 in flight and restarts as a new process that counts
# its op ids and request ids from 1 again; every request goes to both shards
RESTART = [
    push(0.1, "worker-0", "invoke", "worker-0:1", 11, 100, 1, 0),
    push(0.2, "worker-0", "ok", "worker-0:1", 11, 100, 1, 0, epoch=1, seq=1),
    push(0.9, "worker-0", "invoke", "worker-0:2", 11, 100, 2, 0),                   # in flight at the kill
    push(2.0, "worker-0", "invoke", "worker-0:1", 12, 200, 1, 0),
    push(2.1, "worker-0", "ok", "worker-0:1", 12, 200, 1, 0, epoch=1, seq=2),
    push(2.2, "worker-0", "invoke", "worker-0:2", 12, 200, 1, 1),
    push(2.3, "worker-0", "ok", "worker-0:2", 12, 200, 1, 1, epoch=1, seq=1),
]


def test_a_restarted_worker_is_a_new_process_not_a_retry():
    marks = timeline.build(RESTART, []).lanes[0].marks
    assert sorted((t, o) for t, o, _ in marks) == [(0.2, "ok"), (0.9, "info"), (2.1, "ok"), (2.3, "ok")]
    took = {t: what for t, _, what in marks}
    assert took[2.1].endswith(", 100 ms)") and took[2.3].endswith(", 100 ms)")   # from its own invoke


def test_evidence_finds_the_request_of_its_incarnation_shard_and_seq():
    def one(details):
        (m,) = evidence.moments({"c": {"valid": False, "details": details}}, RESTART)["c"]
        return m.t

    assert one({"examples": [{"worker": "worker-0", "incarnation": 200, "req_id": 1, "shard": 1}]}) == 2.3
    assert one({"examples": [{"worker": "worker-0", "incarnation": 100, "req_id": 1, "shard": 0}]}) == 0.2
    assert one({"examples": [{"worker": "worker-0", "req_id": 1, "shard": 0, "epoch": 1, "seq": 2}]}) == 2.1
    assert one({"stale": [{"pull": "worker-0:2", "t": 2.3}]}) == 2.3                 # a reused op id, told by t
    assert one({"stale": [{"pull": "worker-0:1", "pid": 11}]}) == 0.2                # or by its process


def test_reports_keys_agree_with_the_checkers():
    from pschaos.harness.checkers import base

    from pschaos.reports import keys

    for e in RESTART + HISTORY:
        assert keys.op_key(e) == base.op_key(e)
    pushes = [e["value"] for e in RESTART]
    same_req = {(keys.request_key(a) == keys.request_key(b)) for a in pushes for b in pushes}
    assert same_req == {True, False}
    for a in pushes:
        for b in pushes:
            harness_same = (base.idem(a), a["req_id"], a["shard"]) == (base.idem(b), b["req_id"], b["shard"])
            assert (keys.request_key(a) == keys.request_key(b)) == harness_same


def test_fault_labels_are_laid_out_per_zoom_and_the_badge_keeps_its_own_row():
    import re

    faults = [{"kind": "latency", "target": f"workers->shard-{i}/0", "start_s": 0.15 * i, "end_s": 0.15 * i + 0.1}
              for i in range(16)]
    page = timeline_svg.render(timeline.build(HISTORY, faults), badge="simulated · virtual time")
    per_zoom = {z: re.findall(rf'y="(\d+)" class="flabel zl zl{z}">', page) for z in timeline_svg.ZOOMS}
    assert len(per_zoom[1]) < 16 and len(per_zoom[8]) == 16                # more room, more labels
    badge_y = float(re.search(r'y="([\d.]+)" class="badge"', page).group(1))
    assert all(float(y) - 10 >= badge_y for ys in per_zoom.values() for y in ys)   # below the badge's row
    assert "zoom in" in page


def test_mark_tooltips_give_the_events_time_not_the_bins():
    h = [ev(0.1234, "worker-0", "invoke", "pull", "p", worker="worker-0"),
         ev(0.1299, "worker-0", "ok", "pull", "p", worker="worker-0")]
    page = timeline_svg.render(timeline.build(h + [ev(1000.0, "harness", "info", "quiesce")], []))
    assert "1 × ok at 130 ms" in page


def test_a_time_that_is_no_number_links_nowhere_and_draws_nothing():
    nan = float("nan")
    checks = {"c": {"valid": False, "details": {"at": [{"t": nan}, {"t": 2.7}]}}}
    ms = evidence.moments(checks, HISTORY)["c"]
    assert [m.t for m in ms] == [2.7]
    h = [ev(nan, "shard-0/0", "info", "checkpoint", seq=3)] + HISTORY          # first: max() would give NaN
    page = timeline_svg.render(timeline.build(h, FAULTS), ms)
    assert "nan" not in page.lower()


def test_a_ten_minute_timeline_ticks_in_whole_minutes_or_seconds():
    import re

    h = [ev(0.0, "worker-0", "info", "x"), ev(600.0, "worker-0", "info", "x")]
    page = timeline_svg.render(timeline.build(h, []))
    for z in timeline_svg.ZOOMS:
        labels = re.findall(rf'class="zt zt{z}">.*?class="tick"[^>]*>([^<]*)<', page)
        assert labels[-1] in ("10 min", "600 s") and len(set(labels)) == len(labels), labels
        assert all(re.fullmatch(r"0|\d+ (s|min)", s) for s in labels), labels
