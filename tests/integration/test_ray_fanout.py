"""`pschaos soak --on ray` on a real Ray cluster of two nodes on this machine, bound to 127.0.0.1
(harness/fanout): the same seeds give the same verdicts and figures as the local soak, the runs
spread over both nodes, nothing Ray starts listens outside loopback, and a task whose Ray worker
is killed is retried once, then counted unknown with the reason."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from pschaos.harness.fanout.local_ray import LocalRay, loopback_env
from pschaos.harness.machinery.tools import REPO

os.environ.update(loopback_env())         # before Ray is imported: it reads this once (harness/fanout/local_ray.py)
ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'pschaos[ray]' (make install does)")

from pschaos.harness.fanout import ray_runs  # noqa: E402
from pschaos.harness.fanout.leftovers import sweep  # noqa: E402
from pschaos.harness.fanout.ray_runs import execute_on_ray  # noqa: E402
from pschaos.harness.proof.soak.soak import RunResult, judge_run  # noqa: E402
from tests.unit.helpers import only_text  # noqa: E402

# one xdist worker runs them all, one after another: the killer below takes any run task's worker;
# with the other tests that run `pschaos clean` (the leftovers sweep runs it: tests/unit/test_xdist_groups.py)
pytestmark = pytest.mark.xdist_group("pschaos-clean")

CLI = [sys.executable, "-m", "pschaos.harness.commands.cli"]
PLACED = """\
name: placed
cluster: {shards: 1, copies: 2, workers: 1, replication: sync, training: async, model: mlp}
workload: {steps: 40}
faults:
  - {at: {step: 20}, kind: kill, target: primary(shard=0)}
expect:
  checks: [no-lost-acks, single-primary]
"""
LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def _listeners() -> set[tuple[str, int, int | None]]:
    return {(c.laddr.ip, c.laddr.port, c.pid) for c in psutil.net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN}


def _rays(found: set, driver: int | None = None) -> set:
    """Of the listeners `found`, Ray's: its servers and workers, and the driver's own (a test
    beside this one may open sockets of its own meanwhile)."""
    out = set()
    for ip, port, pid in found:
        try:
            cmd = " ".join(psutil.Process(pid).cmdline()) if pid else ""
        except psutil.Error:
            cmd = ""
        if pid == driver or any(k in cmd for k in ("ray::", "raylet", "gcs_server", "/ray/", "pschaos-ray-")):
            out.add((ip, port, pid))
    return out


class _Watch(threading.Thread):
    """Every listening socket that appears while the cluster runs, sampled every 0.2 s."""

    def __init__(self, before: set) -> None:
        super().__init__(daemon=True)
        self.before, self.seen, self.stop, self.driver = before, set(), threading.Event(), None

    def run(self) -> None:
        while not self.stop.is_set():
            self.seen |= _rays(_listeners() - self.before, self.driver)
            self.stop.wait(0.2)


def _ours_left(before: set[Path]) -> list[Path]:
    """The folders of local clusters and task runs made since `before` and still there (another
    run on this machine, or a killed one's that `pschaos clean` has not swept yet, is not ours)."""
    return sorted(_folders() - before)


def _folders() -> set[Path]:
    tmp = Path(tempfile.gettempdir())
    return set(tmp.glob("pschaos-ray-*")) | set(tmp.glob("pschaos-task-*"))


def test_soak_on_two_ray_nodes_matches_the_local_soak_and_listens_on_loopback_only(tmp_path):
    folders = _folders()
    before = _listeners()
    watch = _Watch(before)
    watch.start()
    with LocalRay(nodes=2, cpus=1, connect=False) as cluster:
        out = tmp_path / "on-ray"
        # two seeds, two nodes of one CPU each: both run at once, so each node takes one
        p = subprocess.Popen(CLI + ["soak", "kill-primary", "--backend", "sim", "--seeds", "2", "--on",
                                    f"ray={cluster.address}", "--out", str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=REPO, env={**_env(), **loopback_env()})
        watch.driver = p.pid
        stdout, stderr = p.communicate(timeout=600)
    watch.stop.set()
    watch.join()
    assert p.returncode == 0, stdout + stderr
    outside = sorted(s for s in watch.seen if s[0] not in LOOPBACK)
    assert watch.seen and not outside, f"Ray listened outside loopback: {outside}"
    assert any(pid == p.pid for _, _, pid in watch.seen)       # the driver's own server was watched too
    a = json.loads((out / "soak.json").read_text())
    assert len(set(a["ray_nodes"].values())) == 2, a["ray_nodes"]           # both nodes ran seeds
    assert "2/2 done, 0 in flight, 0 queued" in stderr
    local = tmp_path / "local"
    q = subprocess.run(CLI + ["soak", "kill-primary", "--backend", "sim", "--seeds", "2", "-j", "2", "--out", str(local)],
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    b = json.loads((local / "soak.json").read_text())
    assert q.returncode == 0 and a["per_seed"] == b["per_seed"] and a["failover_ms"] == b["failover_ms"]
    for s in range(1, 3):
        ours, theirs = (json.loads((d / f"seed-{s}" / "report.json").read_text()) for d in (out, local))
        assert ours["metrics"] == theirs["metrics"] and ours["seed"] == s
    assert not _ours_left(folders)


def _env() -> dict:
    return dict(os.environ)


def _kill_task_workers(times: int, seen: list[int], stop: threading.Event) -> None:
    """SIGKILL the Ray worker running a run task, `times` times (each retry's worker once), only
    while its run is still going: the worker is stopped first and killed only if its `pschaos run`
    child is then still alive, so it cannot have handed its result back (CI, fresh clone of
    ef816a3: a kill that landed just after the retry's run ended counted, and the seed passed)."""
    while len(seen) < times and not stop.is_set():
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmd = " ".join(proc.info["cmdline"] or [])
            if not cmd.startswith("ray::run_on_node") or proc.info["pid"] in seen:
                continue
            try:
                proc.suspend()
                running = [c for c in proc.children() if c.status() != psutil.STATUS_ZOMBIE]
                if running:
                    seen.append(proc.info["pid"])
                    proc.kill()
                    break
                proc.resume()
            except psutil.Error:
                continue
        stop.wait(0.1)


def _run_one(tmp_path, kills: int, scenario: Path = REPO / "scenarios" / "kill-primary.yaml") -> tuple[RunResult, list[int]]:
    seen: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_task_workers, args=(kills, seen, stop), daemon=True)
    d = tmp_path / "seed-1"
    d.mkdir()
    (d / "report.json").write_text('{"verdict": "pass", "checks": {}}')     # an earlier soak's, in a reused --out
    (d / "history.jsonl").write_text("")
    with LocalRay(nodes=1, cpus=1, connect=False) as cluster:
        killer.start()
        (r,) = execute_on_ray(scenario, [(1, 1)], lambda s, k: tmp_path / f"seed-{s}",
                              "sim", 300.0, cluster.address, 1, RunResult, judge_run,
                              command=lambda s, d: f"pschaos run {scenario} --seed {s} --out {d}")
        stop.set()
        killer.join()
    return r, seen


def test_a_task_whose_worker_is_killed_is_retried_once(tmp_path):
    folders = _folders()
    r, seen = _run_one(tmp_path, kills=1)
    assert len(seen) == 1
    assert r.verdict == "pass" and r.where, r.reason                # the retry ran it to the end
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _task_runs():
        time.sleep(0.2)
    assert not _task_runs()                  # the killed attempt's run got SIGINT with its worker and tore down
    assert not [g for g in sweep() if Path(g) not in folders] and not _ours_left(folders)


def _task_runs() -> list:
    return [p for p in psutil.process_iter(["cmdline"]) if "pschaos-task-" in " ".join(p.info["cmdline"] or [])]


def test_a_task_lost_twice_is_unknown_with_the_reason(tmp_path):
    folders = _folders()
    r, seen = _run_one(tmp_path, kills=2)
    assert len(seen) == 2
    assert r.verdict == "unknown" and "the Ray task failed" in r.reason, r.reason
    assert not _ours_left(folders)                                           # the driver swept what they left
    assert not (tmp_path / "seed-1" / "history.jsonl").exists()              # no earlier run's file beside it


def test_a_failing_run_comes_back_whole_and_judged_as_here(tmp_path):
    """A seed that fails: its verdict, its history and a rerun line for this machine come back,
    as the local soak has them; a result from another pschaos version is unknown."""
    bad = tmp_path / "kill-primary-fails.yaml"
    bad.write_text((REPO / "scenarios" / "kill-primary.yaml").read_text().replace(
        '    - "failovers >= 1"', '    - "failovers >= 1"\n    - "acked_updates < 0"'))
    r, _ = _run_one(tmp_path, kills=0, scenario=bad)
    assert r.verdict == "fail", r.reason
    rep = json.loads((tmp_path / "seed-1" / "report.json").read_text())
    assert rep["rerun"] == f"pschaos run {bad} --seed 1 --out {tmp_path / 'seed-1'}" and rep["ray_node"]
    assert (tmp_path / "seed-1" / "history.jsonl").stat().st_size > 0
    local = tmp_path / "local"
    subprocess.run(CLI + ["run", str(bad), "--backend", "sim", "--seed", "1", "--out", str(local), "--quiet"],
                   capture_output=True, timeout=300, cwd=REPO)
    assert json.loads((local / "report.json").read_text())["verdict"] == "fail"
    assert (local / "history.jsonl").read_bytes() == (tmp_path / "seed-1" / "history.jsonl").read_bytes()


def test_no_run_goes_to_a_node_of_another_pschaos_version_and_its_result_would_be_unknown(tmp_path, monkeypatch):
    """Nodes that run another pschaos than the driver are asked first and get no run (the same
    seed may judge differently there); a result that comes back from one anyway is unknown."""
    from pschaos.harness.errors import HarnessError

    monkeypatch.setattr(ray_runs, "version", lambda: "0.0.0-elsewhere")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(HarnessError, match=r"no node of the cluster can run a sim run: .*the driver runs 0.0.0-elsewhere"):
        _run_one(other, kills=0)

    class Got:
        def get(self, ref):
            return {"rc": 0, "wall_s": 1.0, "timed_out": False, "node": "n1", "version": "0.1.0", "files": {},
                    "log_tail": ""}
    r = ray_runs._result(Got(), None, RunResult(1, 1, other), "0.0.0-elsewhere", "")
    assert judge_run(r).verdict == "unknown" and "install the same pschaos on every node" in r.reason


@pytest.mark.timeout(600)
def test_ctrl_c_cancels_every_task_and_leaves_no_run_behind(tmp_path):
    """A terminal's Ctrl-C (SIGINT to the soak's process group) while process-backend runs train
    on a local Ray cluster: the soak exits, and no run, node, etcd or Ray process is left."""
    import signal
    from pschaos.harness.machinery.tools import find

    if find("etcd") is None or find("toxiproxy-server") is None:
        pytest.skip("etcd and toxiproxy-server are needed (make install)")
    folders = _folders()
    p = subprocess.Popen(CLI + ["soak", "kill-primary", "--seeds", "2", "-j", "2", "--on", "ray", "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 180
    owners: set[int] = set()
    while time.monotonic() < deadline and len(_runs_on(owners)) < 4:     # clusters up: nodes running
        owners |= {r.pid for r in _ray_of_ours() + _task_runs()}   # only ours: the other worker's runs are tagged too
        time.sleep(0.5)
    assert _runs_on(owners), "no run started its cluster"
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=180)
    assert p.returncode != 0, out
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (_runs_on(owners) or _task_runs() or _ray_of_ours()):
        time.sleep(0.5)
    said = out.decode(errors="replace")[-2000:]
    assert not _runs_on(owners) and not _task_runs() and not _ray_of_ours(), said
    assert not _ours_left(folders), said


def _runs_on(ray_pids: set[int]) -> list:
    """This test's runs: tagged processes whose owner is a worker of our local Ray (the other xdist
    worker's runs are tagged too)."""
    from pschaos.harness.machinery.procs import OWNER_ENV, tagged_processes

    out = []
    for t in tagged_processes():
        try:
            if int(t.environ().get(OWNER_ENV, "0")) in ray_pids:
                out.append(t)
        except (psutil.Error, ValueError):
            continue
    return out


def _ray_of_ours() -> list:
    return [p for p in psutil.process_iter(["cmdline"]) if "pschaos-ray-" in " ".join(p.info["cmdline"] or [])]


def test_doctor_on_ray_says_what_each_node_lacks_and_process_runs_go_only_where_the_parts_are(tmp_path, capsys):
    """A head of no CPU (as clusters keep theirs), a node without Toxiproxy (its tasks see
    PSCHAOS_TOXIPROXY_SERVER pointing nowhere) and one without the power-loss disk (its libfuse
    path points nowhere): the doctor names each, process runs all go to the third node, sim runs
    to the two with a CPU, none to the head; a power-loss run, which no node with the parts can
    take, is unknown with the reason and sent nowhere; a cluster where no node has the parts
    refuses a process run, naming what lacks where."""
    from pschaos.harness.commands.doctor import doctor_on_ray
    from pschaos.harness.fanout.nodes import DISK_PART, describe, placeable, survey
    from pschaos.harness.fanout.task import version
    from pschaos.harness.errors import HarnessError

    folders = _folders()
    nowhere = {"PSCHAOS_TOXIPROXY_SERVER": str(tmp_path / "no-toxiproxy")}
    nodisk = {"FUSE_LIBRARY_PATH": str(tmp_path / "no-libfuse3.so")}
    with LocalRay(nodes=3, cpus=1, connect=False, node_env={1: nowhere, 2: nodisk}, head_cpus=0) as cluster:
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        try:
            reports = survey(ray)
        finally:
            ray.shutdown()
        mine = version()
        head = [r["node"] for r in reports if r["cpus"] == 0]
        assert len(reports) == 3 and len(head) == 1 and len(placeable(reports, "sim", mine)) == 2
        (ready,) = placeable(reports, "process", mine)
        lacking = [r for r in reports if r["node"] not in (ready, *head)]
        assert lacking[0]["lacks"]["process"] == ["toxiproxy-server"] and "toxiproxy-server" in describe(
            reports, "process", mine)
        assert not placeable(reports, "process", mine, (DISK_PART,))
        capsys.readouterr()
        assert doctor_on_ray(cluster.address) == 1
        said = capsys.readouterr().out
        assert "no CPU, runs nothing" in said and "also need power-loss-disk" in said, said
        runs = {}
        small = tmp_path / "placed.yaml"      # where a run goes does not depend on what it runs: a small one
        small.write_text(only_text(PLACED, "40 steps: no checkpoint, no target loss; where the runs go is what this test is about"))
        for backend in ("process", "sim"):
            out = tmp_path / backend
            # three sim runs on two nodes of one CPU: both take some; two process runs, all on the one ready node
            seeds = (1, 2, 3) if backend == "sim" else (1, 2)
            got = execute_on_ray(small, [(s, 1) for s in seeds],
                                 lambda s, k, o=out: o / f"seed-{s}", backend, 300.0, cluster.address, 1, RunResult,
                                 judge_run)
            assert [r.verdict for r in got] == ["pass"] * len(seeds), [r.reason for r in got]
            runs[backend] = {r.where for r in got}
        assert runs["process"] == {ready} and len(runs["sim"]) == 2 and not runs["sim"] & set(head)
        (cut,) = execute_on_ray(REPO / "scenarios" / "power-loss-primary-mid-checkpoint.yaml", [(1, 1)],
                                lambda s, k: tmp_path / "cut", "process", 300.0, cluster.address, 1, RunResult, judge_run)
        assert cut.verdict == "unknown" and not cut.where and "has power-loss-disk" in cut.reason, cut.reason
    with LocalRay(nodes=1, cpus=1, connect=False, node_env={0: nowhere}) as cluster:
        with pytest.raises(HarnessError, match="no node of the cluster can run a process run.*toxiproxy-server"):
            execute_on_ray(REPO / "scenarios" / "kill-primary.yaml", [(1, 1)], lambda s, k: tmp_path / "none",
                           "process", 300.0, cluster.address, 1, RunResult, judge_run)
    assert not _ours_left(folders)


@pytest.mark.long
@pytest.mark.timeout(600)
def test_a_hunt_on_ray_finds_the_schedule_a_local_hunt_finds(tmp_path):
    """`pschaos hunt --on ray` on a planted bug (the zoo's early ack, in a copy of the code): its
    trials run as Ray tasks two at a time, and it finds, shrinks and replays the same failing
    schedule as the hunt here; trials past the first failing one are dropped.
    `make test-long` only: the pool it sends its runs through (placement, gathering, judging as
    here) is proved in `make test` by test_soak_on_two_ray_nodes_matches_the_local_soak_and_listens_on_loopback_only
    and test_a_failing_run_comes_back_whole_and_judged_as_here."""
    from .mutants import mutant_copy
    from .test_sim_parity import EARLY_ACK

    folders = _folders()
    root = mutant_copy(tmp_path / "code", EARLY_ACK)
    docs = {}
    for where, extra in (("here", []), ("ray", ["--on", "ray", "-j", "2"])):
        p = subprocess.run(CLI + ["hunt", "kill-primary", "--seed", "2", "--duration", "8", "--budget", "2",
                                  "--shrink-budget", "1", "--no-confirm", "--out", str(tmp_path / where), "--json",
                                  *extra], cwd=root, env={**_env(), **loopback_env(), "PYTHONPATH": str(root)},
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 1, p.stderr[-3000:]
        docs[where] = json.loads(p.stdout)
    here, on_ray = docs["here"], docs["ray"]
    assert on_ray["found"]["seed"] == here["found"]["seed"] and on_ray["found"]["failed"] == here["found"]["failed"]
    assert on_ray["trials"] == here["trials"] and on_ray["verdicts"] == here["verdicts"]
    assert on_ray["shrunk"]["faults"] == here["shrunk"]["faults"] and on_ray["replayed"]["same_failure"] is True
    assert not _ours_left(folders)


def test_a_sweep_on_ray_gives_the_runs_a_local_sweep_gives(tmp_path):
    """`pschaos sim sweep --on ray`: each grid point's seeds run as Ray tasks on two nodes; every
    run's figures (wall time aside) and the aggregate equal the local sweep's, the calibration
    file travelling with the tasks."""
    from pschaos.harness.backends.sim.calibration import DEFAULT_PATH
    from pschaos.harness.backends.sim.scale.sweep import run_sweep

    spec = tmp_path / "tiny.yaml"
    spec.write_text("name: tiny\nbase: {shards: 50, hours: 24, failures: none, server_mtbf: 'exp:20', "
                    "server_repair: 'exp:1800', workers: 2}\ngrid: {copies: [2, 3]}\nseeds: 2\n"
                    "plots: [{x: copies, y: p_shard_loss}]\n")
    cal = tmp_path / "cal.json"
    cal.write_text(Path(DEFAULT_PATH).read_text())
    folders = _folders()
    assert run_sweep(spec, tmp_path / "here", 2, str(cal)) == 0
    with LocalRay(nodes=2, cpus=1, connect=False) as cluster:
        assert run_sweep(spec, tmp_path / "ray", 2, str(cal), (True, cluster.address)) == 0

    def runs(d: Path) -> dict:
        drop = ("wall_s", "worker_steps_per_wall_s", "max_rss_mb", "cal_path")
        return {p.name: {k: v for k, v in json.loads(p.read_text()).items() if k not in drop}
                for p in sorted((d / "runs").glob("*.json"))}
    assert runs(tmp_path / "ray") == runs(tmp_path / "here") and len(runs(tmp_path / "here")) == 4
    rows = [json.loads((tmp_path / d / "sweep.json").read_text())["rows"] for d in ("here", "ray")]
    assert rows[0] == rows[1]
    assert not _ours_left(folders)


@pytest.mark.long
def test_pytest_sends_library_scenarios_to_ray_and_judges_them_as_here(tmp_path):
    """`pytest --pschaos-on ray=ADDRESS`: two library scenarios run as Ray tasks on the twin; each
    item's report comes back into --pschaos-out and is judged as a run here (same metrics).
    `make test-long` only: the pool it sends its runs through (placement, gathering, judging as
    here) is proved in `make test` by test_soak_on_two_ray_nodes_matches_the_local_soak_and_listens_on_loopback_only
    and test_a_failing_run_comes_back_whole_and_judged_as_here."""
    folders = _folders()
    items = [str(REPO / "scenarios" / f"{n}.yaml") for n in ("kill-primary", "pause-primary")]
    with LocalRay(nodes=2, cpus=1, connect=False) as cluster:
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *items,
                            "--pschaos-backend", "sim", "--pschaos-on", f"ray={cluster.address}",
                            "--pschaos-out", str(tmp_path / "ray")], capture_output=True, text=True, timeout=600,
                           cwd=REPO, env={**_env(), **loopback_env()})
    assert p.returncode == 0 and "2 passed" in p.stdout, p.stdout[-3000:] + p.stderr[-2000:]
    for n in ("kill-primary", "pause-primary"):
        ours = json.loads((tmp_path / "ray" / f"{n}-1" / "report.json").read_text())
        here = tmp_path / "here" / n
        subprocess.run(CLI + ["run", n, "--backend", "sim", "--seed", "1", "--out", str(here), "--quiet"],
                       capture_output=True, timeout=300, cwd=REPO)
        assert ours["metrics"] == json.loads((here / "report.json").read_text())["metrics"] and ours["ray_node"]
    assert not _ours_left(folders)


@pytest.mark.long
@pytest.mark.timeout(600)
def test_selftest_on_ray_kills_what_the_local_selftest_kills(tmp_path):
    """`pschaos selftest --on ray`: the baseline and two mutants' runs as Ray tasks on two nodes,
    each node making the mutant's copy itself; the verdicts per mutant equal the local selftest's.
    `make test-long` only: the pool it sends its runs through (placement, gathering, judging as
    here) is proved in `make test` by test_soak_on_two_ray_nodes_matches_the_local_soak_and_listens_on_loopback_only
    and test_a_failing_run_comes_back_whole_and_judged_as_here."""
    folders = _folders()
    args = ["selftest", "--backend", "sim", "--mutants", "sync-early-ack,delta-get-and-clear", "--scenarios",
            "kill-primary", "--min-score", "0", "--json"]
    here = subprocess.run(CLI + args + ["--out", str(tmp_path / "here")], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    with LocalRay(nodes=2, cpus=1, connect=False) as cluster:
        there = subprocess.run(CLI + args + ["--out", str(tmp_path / "ray"), "--on", f"ray={cluster.address}"],
                               capture_output=True, text=True, timeout=600, cwd=REPO, env={**_env(), **loopback_env()})
    assert here.returncode == there.returncode == 0, there.stderr[-3000:]
    a, b = json.loads(here.stdout), json.loads(there.stdout)
    verdicts = [{m["name"]: m["status"] for m in d["mutants"]} for d in (a, b)]
    assert verdicts[0] == verdicts[1] and set(verdicts[0].values()) == {"killed"}, verdicts
    assert a["baseline"]["verdict"] == b["baseline"]["verdict"] == "pass"
    assert "as Ray tasks" in there.stderr and not _ours_left(folders)


@pytest.mark.long
@pytest.mark.timeout(600)
def test_validate_sends_its_twins_to_ray_and_they_are_the_twins_it_runs_here(tmp_path):
    """`pschaos sim validate --on ray`: the real run stays here, its twin runs as a Ray task and
    comes back where a twin run here writes; with the load and speed fixed, its report is the
    twin this machine makes.
    `make test-long` only: the pool it sends its runs through (placement, gathering, judging as
    here) is proved in `make test` by test_soak_on_two_ray_nodes_matches_the_local_soak_and_listens_on_loopback_only
    and test_a_failing_run_comes_back_whole_and_judged_as_here."""
    from pschaos.harness.proof.twin.runs import run_one as _run
    from pschaos.harness.run import library

    folders = _folders()
    out = tmp_path / "validate"
    with LocalRay(nodes=1, cpus=1, connect=False) as cluster:
        p = subprocess.run(CLI + ["sim", "validate", "--scenario", "kill-primary", "--seeds", "1", "--background", "0",
                                  "--host-slowdown", "1", "--out", str(out), "--on", f"ray={cluster.address}"],
                           capture_output=True, text=True, timeout=600, cwd=REPO, env={**_env(), **loopback_env()})
    assert p.returncode in (0, 1), p.stderr[-3000:]                    # targets may or may not hold: not judged here
    assert "as a Ray task" in p.stderr
    ours = json.loads((out / "kill-primary" / "sim-1" / "report.json").read_text())
    here = json.loads((_run(library.path_of("kill-primary"), "sim", 1, tmp_path / "here", None) / "report.json").read_text())
    assert ours["metrics"] == here["metrics"] and ours["verdict"] == here["verdict"] == "pass"
    assert not _ours_left(folders)
