"""Kills timed against protocol moments (harness/faults/moments.py) on a scripted shard in virtual time."""
from __future__ import annotations

import random

import pytest

from pschaos.harness.errors import HarnessError
from pschaos.harness.faults import FaultContext, build, params_error
from pschaos.harness.run.nemesis import schedule
from pschaos.harness.run.scenario import Nemesis

from tests.unit.fake_backend import ManualClock, Route, Status

NAMES = ["shard-0/0", "shard-0/1", "shard-0/2"]


class MiniShard:
    """One shard's copies as the moments see them: a dead primary is replaced 0.3 s later by the
    first live ISR member, a dead replica leaves the ISR 0.3 s later, a restarted copy answers
    0.1 s after its start and is back in the ISR 0.05 s after that."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.route = Route(1, NAMES[0], list(NAMES))
        self.down: dict[str, float] = {}
        self.started: dict[str, float] = {}
        self.calls: list[tuple[str, str, float]] = []
        clock.listeners.append(self.tick)

    def tick(self, now: float) -> None:
        r = self.route
        for n, t in list(self.down.items()):
            if now - t >= 0.3 and n in r.isr:
                isr = [m for m in r.isr if m != n]
                if n == r.primary:
                    live = [m for m in isr if m not in self.down]
                    self.route = r = Route(r.epoch + 1, live[0], isr) if live else Route(r.epoch, n, isr)
                else:
                    self.route = r = Route(r.epoch, r.primary, isr)
        for n, t in list(self.started.items()):
            if now - t >= 0.15 and n not in r.isr and r.primary not in self.down:
                self.route = r = Route(r.epoch, r.primary, [*r.isr, n])
                del self.started[n]

    def routing(self) -> dict:
        return {0: self.route}

    def alive(self, name: str) -> bool:
        return name not in self.down

    def status(self, name: str, **_) -> Status | None:
        if name in self.down or self.clock.now() - self.started.get(name, -1e9) < 0.1:
            return None
        return Status(0, "primary" if name == self.route.primary else "replica", self.route.epoch, 100)

    def kill(self, name: str) -> None:
        self.calls.append(("kill", name, self.clock.now()))
        self.down[name] = self.clock.now()

    def restart(self, name: str) -> None:
        self.calls.append(("restart", name, self.clock.now()))
        if self.down.pop(name, None) is not None:
            self.started[name] = self.clock.now()


def make(kind_params: dict, target: str):
    clock = ManualClock()
    be = MiniShard(clock)
    ctx = FaultContext(backend=be, rng=random.Random(1), record=lambda f, v: v, clock=clock)
    return be, build("kill", ctx, target, kind_params)


def test_kill_during_promotion_kills_the_successor_the_moment_it_is_named():
    be, f = make({"during": "promotion"}, "shard-0/2")
    f.inject()
    assert [c[:2] for c in be.calls] == [("kill", "shard-0/0"), ("kill", "shard-0/1")]
    assert f.target == "shard-0/1" and f.info["deposed"] == "shard-0/0"
    assert f.info["victims"] == ["shard-0/0", "shard-0/1"] and f.info["was_primary"] and f.info["epoch"] == 1
    assert f.info["caught_promoting"]["epoch"] == 2 and f.info["caught_promoting"]["after_ms"] < 1
    f.heal()
    assert [c[1] for c in be.calls if c[0] == "restart"] == ["shard-0/0", "shard-0/1"]


def test_kill_during_catch_up_kills_the_primary_while_the_copy_is_back_outside_the_isr():
    be, f = make({"during": "catch-up"}, "shard-0/1")
    f.inject()
    kills = [c for c in be.calls if c[0] == "kill"]
    assert [c[1] for c in kills] == ["shard-0/1", "shard-0/0"]
    restart = next(c for c in be.calls if c[0] == "restart")
    # the copy was restarted only once out of the ISR, and the primary died before it got back in
    assert restart[2] - kills[0][2] >= 0.3 and kills[1][2] - restart[2] < 0.15
    assert f.info["caught_catching_up"]["copy"] == "shard-0/1" and f.target == "shard-0/0"
    assert be.alive("shard-0/1") and not be.alive("shard-0/0")


def test_a_moment_that_never_comes_is_recorded_as_missed_not_faked():
    be, f = make({"during": "catch-up", "wait_s": 0.2}, "shard-0/1")   # the ISR drop takes 0.3 s
    f.inject()
    assert f.info["caught_catching_up"] is None and f.target == "shard-0/1"
    assert [c[1] for c in be.calls if c[0] == "kill"] == ["shard-0/1"]


def test_catch_up_needs_a_replica_target():
    be, f = make({"during": "catch-up"}, "shard-0/0")
    with pytest.raises(HarnessError, match="name a replica"):
        f.inject()


@pytest.mark.parametrize("params, words", [
    ({"during": "checkpiont"}, "params.during='checkpiont' is not a moment"),
    ({"during": "promotion", "wipe": True}, "wipe cannot go with during: promotion"),
    ({"during": "catch-up", "wait_s": 0}, "wait_s must be > 0"),
    ({"after_s": -1.0}, "after_s=-1.0 must be >= 0"),
    ({"after_s": 61.0}, "after_s must be between 0 and 60"),
    ({"during": "promotion", "after_s": 0.5}, "after_s delays a plain kill"),
])
def test_bad_kill_params_are_refused_by_name(params, words):
    assert words in (params_error("kill", params) or "")


def test_nemesis_params_lists_are_drawn_per_fault_and_checked():
    nem = Nemesis(kinds=["kill"], interval_s=1.0, duration_s=0.5, start_s=0, stop_s=30,
                  params={"kill": [{}, {"during": "catch-up"}, {"during": "promotion"}]})
    drawn = {f.params.get("during", "") for f in schedule(nem, 7)}
    assert drawn == {"", "catch-up", "promotion"}
    assert schedule(nem, 7) == schedule(nem, 7)
    with pytest.raises(ValueError, match=r"params.kill\[1\]: kill: params.during='soon'"):
        Nemesis(kinds=["kill"], params={"kill": [{}, {"during": "soon"}]})
    with pytest.raises(ValueError, match="params.kill: an empty list"):
        Nemesis(kinds=["kill"], params={"kill": []})


class Writer:
    """A copy whose checkpoint writes show the manifest's temporary file first, then the data's."""

    def __init__(self) -> None:
        self.polls, self.dead = 0, False

    def checkpoint_writes(self, name: str) -> list[str]:
        self.polls += 1
        if self.dead:
            return ["d/state-1.psb.9.tmp"]
        return ["d/manifest.json.9.tmp"] + (["d/state-1.psb.9.tmp"] if self.polls > 3 else [])

    def kill(self, name: str) -> None:
        self.dead = True

    def alive(self, name: str) -> bool:
        return not self.dead

    def checkpoint_scan(self) -> list[dict]:
        return [{"dir": "d", "stray_tmp": ["state-1.psb.9.tmp"], "loadable": False, "error": "FileNotFoundError"}]


def test_kill_during_checkpoint_waits_for_the_data_file_and_scans_what_the_kill_left():
    be, recorded = Writer(), []
    ctx = FaultContext(backend=be, rng=random.Random(1), record=lambda f, v: recorded.append((f, v)) or v,
                       clock=ManualClock())
    f = build("kill", ctx, "shard-0/0", {"during": "checkpoint"})
    f.inject()
    assert f.info["caught_writing"] == "d/state-1.psb.9.tmp" and be.polls > 3
    assert recorded == [("checkpoint-scan", {**be.checkpoint_scan()[0], "after_kill": "shard-0/0"})]


def test_moment_kills_on_targets_they_cannot_act_on_are_refused_at_load():
    from pschaos.harness.run.scenario import Fault

    for target, params, words in [("worker-0", {"during": "promotion"}, "acts on a shard's copies"),
                                  ("etcd", {"during": "catch-up"}, "acts on a shard's copies"),
                                  ("primary(shard=0)", {"during": "catch-up"}, "names the replica")]:
        with pytest.raises(ValueError, match=words):
            Fault(at={"step": 1}, kind="kill", target=target, params=params)
    assert Fault(at={"step": 1}, kind="kill", target="primary(shard=0)", params={"during": "promotion"})
    with pytest.raises(ValueError, match="give params.during too"):
        Fault(at={"step": 1}, kind="kill", target="shard-0/1", params={"wait_s": 3.0})
    with pytest.raises(ValueError, match="pause is not in kinds"):
        Nemesis(kinds=["kill"], params={"pause": {}})
    with pytest.raises(ValueError, match=r"params.kill\[1\]: with targets.kill 'primary\(shard=any\)'"):
        Nemesis(kinds=["kill"], targets={"kill": "primary(shard=any)"}, params={"kill": [{}, {"during": "catch-up"}]})


def test_a_catch_up_moment_missed_after_the_restart_is_recorded_not_raised():
    be, f = make({"during": "catch-up", "wait_s": 0.5}, "shard-0/1")
    be.status = lambda name, **_: None if name == "shard-0/1" else Status(0, "primary", 1, 100)   # never answers
    f.inject()
    assert f.info["caught_catching_up"] is None and f.info["down"] == [] and not f.info["was_primary"]
    # it came back into the ISR unseen each time: tried again, never the primary killed
    assert set(c[1] for c in be.calls if c[0] == "kill") == {"shard-0/1"} and be.alive("shard-0/0")


def test_a_copy_back_in_the_isr_before_it_answered_is_killed_again_until_the_moment_is_caught():
    """CI (kill-mid-protocol, a loaded machine): the restarted copy was back in the ISR before the
    harness saw its first answer, and the run was unknown. The first start here rejoins at 0.05 s,
    before its answer at 0.1 s; the second is the usual one, and is caught."""
    be, f = make({"during": "catch-up"}, "shard-0/1")
    fast = [0.05]
    tick = be.tick

    def quick_rejoin(now: float) -> None:
        for n, t in list(be.started.items()):
            if fast and now - t >= fast[0] and n not in be.route.isr:
                be.route = Route(be.route.epoch, be.route.primary, [*be.route.isr, n])
                del be.started[n]
                fast.pop()
        tick(now)
    be.clock.listeners[:] = [quick_rejoin]
    f.inject()
    kills = [c[1] for c in be.calls if c[0] == "kill"]
    assert kills == ["shard-0/1", "shard-0/1", "shard-0/0"] and f.info["attempts"] == 2
    assert f.info["caught_catching_up"]["copy"] == "shard-0/1" and f.target == "shard-0/0"
    assert be.alive("shard-0/1") and not be.alive("shard-0/0")


def test_a_moment_missed_on_every_try_is_recorded_after_the_last():
    be, f = make({"during": "catch-up", "wait_s": 1.0}, "shard-0/1")
    be.status = lambda name, **_: (Status(0, "replica", 1, 100) if name in be.route.isr and name not in be.down
                                   else None)      # the copy answers only once back in the ISR
    f.inject()
    assert f.info["caught_catching_up"] is None and f.info["attempts"] == 3
    assert [c[1] for c in be.calls if c[0] == "kill"] == ["shard-0/1"] * 3 and be.alive("shard-0/1")


def test_a_kill_after_s_lands_that_long_after_it_came_due():
    """tf-kill-worker-mid-closure: the step trigger fires as step 100 begins; the kill must land
    in that step's closure after its update, not as it starts."""
    be, f = make({"after_s": 0.5}, "shard-0/1")
    t0 = be.clock.now()
    f.inject()
    assert be.calls == [("kill", "shard-0/1", t0 + 0.5)] and f.info["in_place_after_s"] == 0.5


class Relaunching:
    """A supervised job's role: the supervisor has it running again as soon as it was killed."""

    def __init__(self, supervised: bool) -> None:
        self.supervised, self.kills = supervised, []

    def kill(self, name: str) -> None:
        self.kills.append(name)

    def alive(self, name: str) -> bool:
        return True


def test_a_supervised_role_running_again_after_its_kill_is_no_failed_kill():
    """tf-kill-worker at seed 2: the supervisor had relaunched worker-0 before the kill's check
    looked, and the run was unknown ("still alive after SIGKILL"). A supervised backend's kill()
    confirms the pid it killed is gone; anything else still must be dead when the kill returns."""
    for supervised, fails in ((True, False), (False, True)):
        be = Relaunching(supervised)
        ctx = FaultContext(backend=be, rng=random.Random(1), record=lambda f, v: v, clock=ManualClock())
        f = build("kill", ctx, "worker-0", {})
        if fails:
            with pytest.raises(HarnessError, match="still alive after SIGKILL"):
                f.inject()
        else:
            f.inject()
        assert be.kills == ["worker-0"]
