"""Where `--on ray` places a run: what a scenario needs beyond its backend (the power-loss disk,
a system's binaries), nodes with no CPU, and a pinned task that never comes back. The pool's
loop runs against a fake Ray here; tests/integration/test_ray_fanout.py runs it on a real one."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from pschaos.harness.errors import HarnessError
from pschaos.harness.fanout import ray_runs
from pschaos.harness.fanout.nodes import DISK_PART, Placer, describe, lacks, placeable, run_needs
from pschaos.harness.fanout.ray_runs import RayPool

REPO = Path(__file__).resolve().parents[2]
A, B = "a" * 56, "b" * 56      # node ids as Ray writes them (hex)


def _text(name: str) -> str:
    return (REPO / "scenarios" / f"{name}.yaml").read_text()


def _report(node: str, cpus: int = 1, disk: bool = True, redis: bool = True, version: str = "v") -> dict:
    rows = [{"part": DISK_PART, "ok": disk}, {"part": "redis-server", "ok": redis}, {"part": "redis-sentinel", "ok": redis}]
    return {"node": node, "host": "h", "cpus": cpus, "version": version, "rows": rows, "lacks": {"sim": [], "process": []}}


def test_a_process_run_that_cuts_power_needs_the_disk_and_a_redis_one_its_binaries():
    assert run_needs(_text("power-loss-primary-mid-checkpoint"), "process") == (DISK_PART,)
    assert run_needs(_text("power-loss-primary-mid-checkpoint"), "sim") == ()       # the twin's disk is simulated
    assert run_needs(_text("redis-partition-master"), "process") == ("redis-server", "redis-sentinel", "redis")
    assert run_needs(_text("kill-primary"), "process") == ()
    assert run_needs("nemesis:\n  kinds: [kill, torn-write]\n", "process") == (DISK_PART,)     # a nemesis' kinds too
    assert run_needs("name: [not a scenario", "process") == ()       # its run on the node says why


def test_the_kinds_that_need_the_disk_are_the_storage_faults_kinds():
    from pschaos.harness.faults.storage import STORAGE_KINDS
    from pschaos.harness.fanout.nodes import DISK_KINDS

    assert DISK_KINDS == STORAGE_KINDS


def test_a_node_lacks_what_the_run_needs_and_one_with_no_cpu_places_nothing():
    nodisk, head = _report("n1", disk=False), _report("head", cpus=0)
    assert lacks(nodisk, "process", "v") == [] and lacks(nodisk, "process", "v", (DISK_PART,)) == [DISK_PART]
    assert lacks({**nodisk, "rows": []}, "process", "v", (DISK_PART,)) == [DISK_PART]     # not reported: lacking
    reports = [head, nodisk, _report("n2")]
    assert placeable(reports, "process", "v") == {"n1": 1, "n2": 1}
    assert placeable(reports, "process", "v", (DISK_PART,)) == {"n2": 1}
    assert "head: no CPU (runs nothing)" in describe(reports, "process", "v")
    assert "n1: power-loss-disk" in describe(reports, "process", "v", (DISK_PART,))


def test_the_placer_takes_only_an_allowed_node():
    p = Placer({"a": 1, "b": 1})
    assert p.take({"b"}) == "b" and p.take({"b"}) is None and p.has_free()
    assert p.take() == "a" and not p.has_free()


class _Ref:
    def __init__(self, n: int, node: str, value: object) -> None:
        self.n, self.node, self.value, self.cancelled = n, node, value, False

    def __hash__(self) -> int:
        return self.n


class _FakeRay:
    """Tasks finish at once, except on the `stuck` nodes, where they never start."""

    def __init__(self, stuck: set[str] = frozenset()) -> None:
        self.stuck, self.sent, self.count = set(stuck), [], itertools.count()

    def remote(self, **_: object):
        fake = self

        class _Task:
            def __init__(self, fn) -> None:
                self.fn = fn

            def options(self, scheduling_strategy):
                node, fn = scheduling_strategy.node_id, self.fn

                class _Pinned:
                    def remote(self, *args):
                        fake.sent.append((args, node))
                        return _Ref(next(fake.count), node, None if node in fake.stuck else fn(*args))
                return _Pinned()
        return _Task

    def wait(self, refs, num_returns=1, timeout=None):
        ready = [r for r in refs if r.node not in self.stuck or r.cancelled][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref, timeout=None):
        if ref.cancelled or ref.node in self.stuck:
            raise RuntimeError("TaskCancelledError: cancelled")
        return ref.value

    def cancel(self, ref, force=False):
        ref.cancelled = True

    def nodes(self):
        return [{"NodeID": n, "Alive": True} for n in (A, B)]


def _pool(fake: _FakeRay, reports: list[dict]) -> RayPool:
    pool = RayPool(None, 2, "process")
    pool.ray, pool.reports, pool.mine, pool.overdue = fake, reports, "v", {}
    pool.placer = Placer(placeable(reports, "process", "v"))
    return pool


def test_runs_that_need_the_disk_go_only_to_a_node_that_has_it_and_none_is_lost():
    fake = _FakeRay()
    pool = _pool(fake, [_report(A, disk=False), _report(B)])
    done: list = []
    pool._drive(lambda x: x, list(range(6)), lambda i: (i,), lambda i, ref, f, q: done.append((i, ref.node)),
                needs_of=lambda i: (DISK_PART,) if i % 2 else ())
    assert sorted(i for i, _ in done) == list(range(6))
    assert {node for i, node in done if i % 2} == {B}


def test_a_run_no_node_can_take_is_unplaced_with_the_reason_and_a_map_refuses():
    pool = _pool(_FakeRay(), [_report(A, disk=False), _report(B, disk=False)])
    unplaced: list = []
    pool._drive(lambda x: x, [0, 1], lambda i: (i,), lambda *a: None, needs_of=lambda i: (DISK_PART,) if i else (),
                unplaced=lambda i, why: unplaced.append((i, why)))
    assert [i for i, _ in unplaced] == [1] and "no node of the Ray cluster has power-loss-disk" in unplaced[0][1]
    with pytest.raises(HarnessError, match="power-loss-disk"):
        pool._drive(lambda x: x, [1], lambda i: (i,), lambda *a: None, needs_of=lambda i: (DISK_PART,))


def _passing(*args) -> dict:
    """A task's result as run_on_node gives it: a passing report.json."""
    import base64
    import json

    rep = base64.b64encode(json.dumps({"verdict": "pass", "checks": {}}).encode()).decode()
    return {"rc": 0, "wall_s": 1.0, "timed_out": False, "node": B, "version": "v", "files": {"report.json": rep},
            "log_tail": ""}


def _soak(pool: RayPool, tmp_path: Path, seeds=(1, 2, 3)) -> list:
    from pschaos.harness.proof.soak.soak import RunResult, judge_run

    text = _text("kill-primary")
    return pool.run([(s, 1, "kill-primary", text) for s in seeds], lambda s, k: tmp_path / f"seed-{s}", 10.0,
                    RunResult, judge_run)


def test_a_pinned_task_that_never_comes_back_is_cancelled_and_unknown_with_the_reason(tmp_path, monkeypatch):
    """Node a is alive but never starts its task: past the deadline it is cancelled, its run
    unknown saying so, and the soak goes on to the end on node b, whose runs pass."""
    fake = _FakeRay(stuck={A})
    pool = _pool(fake, [_report(A), _report(B)])
    monkeypatch.setattr(ray_runs, "run_on_node", _passing)
    clock = itertools.count(0, 50)
    pool.clock = lambda: float(next(clock))
    got = _soak(pool, tmp_path)
    assert sorted(r.verdict for r in got) == ["pass", "pass", "unknown"]
    (late,) = [r for r in got if r.verdict == "unknown"]
    assert "was not back" in late.reason and "cancelled" in late.reason, late.reason
    assert [node for _, node in fake.sent].count(A) == 1
    # the same pool again, node a healthy now: nothing of the last drive's cancellation sticks
    fake.stuck = set()
    assert [r.verdict for r in _soak(pool, tmp_path, (4, 5))] == ["pass", "pass"]


def test_a_result_that_came_back_as_its_task_was_cancelled_stands(tmp_path, monkeypatch):
    class _LateRay(_FakeRay):
        def get(self, ref, timeout=None):       # the run finished as the cancel went out
            return ref.value if ref.value is not None else _passing()

    fake = _LateRay(stuck={A})
    pool = _pool(fake, [_report(A), _report(B)])
    monkeypatch.setattr(ray_runs, "run_on_node", _passing)
    clock = itertools.count(0, 50)
    pool.clock = lambda: float(next(clock))
    assert [r.verdict for r in _soak(pool, tmp_path)] == ["pass"] * 3


def test_selftest_on_ray_cancels_a_run_not_back_in_time_and_judges_it_unknown_with_the_reason(tmp_path):
    from pschaos.harness.proof.selftest.exec import Task
    from pschaos.harness.proof.selftest.on_ray import _Flight, _outcome, _overdue

    fake = _FakeRay(stuck={A})
    old, new = _Flight(Task(None, "kill-primary", 1, REPO, tmp_path / "a"), A), _Flight(Task(None, "kill-primary", 2, REPO, tmp_path / "b"), A)
    old.t0 -= 5000.0
    r_old, r_new = _Ref(1, A, None), _Ref(2, A, None)
    running = {r_old: old, r_new: new}
    assert _overdue(fake, running, [], 1000.0) == [r_old] and r_old.cancelled and not r_new.cancelled
    o = _outcome(fake, r_old, old)
    assert o.verdict == "unknown" and "was not back 1000 s" in o.reason, o.reason
