"""The Backend protocol over a training job: its processes on loopback, supervised like a scheduler.

The runner, the faults and the target selectors reach a job only through these methods, as they
reach psnodes. Launched processes carry the run tag (procs.Proc) and the run is registered with
its nftables table, so teardown, Ctrl-C and `pschaos clean` reap them and what they forked. A
supervisor thread restarts a launched process that exited before the job finished (a new
incarnation, after reaping whatever of the old one is left, as a pod restart does), at most
`job_restarts` times, and records each exit and restart in the history.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil

from pschaos.netfaults.faults import LINK_FAULTS, NetContext
from pschaos.netfaults.links import LinkTable, proxy_name
from pschaos.netfaults.nft import NftTable, table_name

from pschaos.harness.backends.adapters.backend import Route, run_all
from pschaos.harness.backends.adapters.portcut import PortCut, isolated, port_matches
from pschaos.harness.backends.jobs.api import SHIM_DIR, TOXIC_KINDS, JobEnv, TrainingJob
from pschaos.harness.backends.jobs.loopback import preload
from pschaos.harness.errors import HarnessError
from pschaos.harness.history.clock import WALL, Clock
from pschaos.harness.history.events import History, read_events
from pschaos.harness.machinery import registry
from pschaos.harness.machinery.procs import Proc, reap, start_time, tagged_processes, wait_until
from pschaos.harness.machinery.toxiproxy_server import ToxiproxyServer


# how long the shim holds a checkpoint's commit open when a kill is timed to it: the window the
# harness must see the write in and land the kill (a failpoint, as etcd's gofail and FoundationDB's
# buggify place them); only in a run whose scenario has such a kill
CHECKPOINT_HOLD_S = 0.3


class JobBackend:
    name = "job"
    proxied = False
    # a killed role may run again at once (the supervisor's or the launcher's restart): kill()
    # itself confirms that the process it killed is gone, not the role
    supervised = True
    clock: Clock = WALL

    def __init__(self, job_cls: type[TrainingJob], scenario, run_dir: Path, run_id: str, seed: int) -> None:
        self.run_dir, self.run_id, self.seed = run_dir, run_id, seed
        w = scenario.workload
        self.job = job_cls(JobEnv(run_dir, seed, w.steps, w.step_delay_s, dict(scenario.system_options)))
        self.job.running = self.launched
        self.procs: dict[str, Proc] = {}
        self.argv: dict[str, list[str]] = {}
        self.incarnation = 0
        self.restarts_left = int(self.job.opt.get("job_restarts", 0))
        self.finished = threading.Event()      # the job is over: done, out of restarts, or torn down
        self.lock = threading.RLock()
        self.nft = NftTable(run_id)
        self.hurry = False
        self.closing = False
        self.log = History(self.events_path("supervisor"))
        self.supervisor: threading.Thread | None = None
        self.paused: dict[str, int] = {}        # role -> the pid its pause stopped
        self.exits_seen: set[tuple[str, int]] = set()     # (process, incarnation) already recorded
        self.preload: Path | None = None                  # the loopback library, for a job that binds everything
        # a Toxiproxy server only when the scenario has a fault that needs one (latency, bandwidth)
        toxic = any(f.kind in TOXIC_KINDS for f in getattr(scenario, "faults", []))
        self.toxiproxy = ToxiproxyServer(run_dir, run_id, seed) if toxic else None
        self.net: NetContext | None = None
        self.hold_checkpoints = any(f.kind == "kill" and (f.params or {}).get("during") == "checkpoint"
                                    for f in getattr(scenario, "faults", []))
        self._ckpt_seen: dict[str, tuple[int, str | None]] = {}     # role -> (events read, checkpoint open)

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 60.0, workers_steps: int | None = None, duration: float | None = None,
              step_delay: float = 0.0) -> None:
        registry.register(self.run_id, os.getpid(), table_name(self.run_id), start_time(os.getpid()))
        if self.job.loopback_only:
            self.preload = preload()
        self.argv = self.job.launch()
        if self.toxiproxy is not None:
            self._proxies()
        with self.lock:
            for name in self.argv:
                self._spawn(name)
        self.supervisor = threading.Thread(target=self._supervise, name="pschaos-job-supervisor", daemon=True)
        self.supervisor.start()
        if not wait_until(lambda: self.finished.is_set() or self._trained(), timeout, 0.1) or not self._trained():
            raise HarnessError(f"{self.job.name}: {self.job.progress_role} did not start (no shim record) within {timeout:.0f}s"
                               f"{' and the job is over' if self.finished.is_set() else ''}; see {self.run_dir / 'logs'}")

    def _proxies(self) -> None:
        """One proxy in front of each proxied role, before any process starts (their environment
        names it); every link into the role is that proxy (its clients share it)."""
        client = self.toxiproxy.start()
        self.net = NetContext(client, LinkTable(self.run_id), self.nft)
        for role in self.job.proxied_roles():
            ports = self.job.ports_of(role)
            if not ports:
                raise HarnessError(f"{self.job.name}: proxied role {role} serves on no port (ports_of)")
            p = client.create(proxy_name(self.run_id, "clients", role), "127.0.0.1:0", f"127.0.0.1:{ports[0]}")
            self.job.via[role] = p.listen
            for src, dst in self.job.links():
                if dst == role:
                    self.net.links.links[(src, dst)] = p

    def _trained(self) -> bool:
        return self.events_path("worker-0").exists()

    def _env(self, name: str) -> dict[str, str]:
        py = os.environ.get("PYTHONPATH")
        own = self.job.environment(name)
        if self.job.loopback_only:
            pre = [str(self.preload)] + ([own["LD_PRELOAD"]] if own.get("LD_PRELOAD") else [])
            own = {**own, "LD_PRELOAD": " ".join(pre)}
        if self.hold_checkpoints:      # a kill is timed to a checkpoint write: hold each commit open
            own = {**own, "PSCHAOS_CHECKPOINT_HOLD_S": str(CHECKPOINT_HOLD_S)}
        # temporary files in the run's data, removed with it: torchrun's agent makes a
        # torchelastic_* folder in the temp dir at each launch and leaves it there
        return {**own, "TMPDIR": str(self.job.env.data("tmp")), "PSCHAOS_EVENTS_DIR": str(self.run_dir / "events"),
                "PSCHAOS_INCARNATION": str(self.incarnation),
                "PYTHONPATH": str(SHIM_DIR) + (os.pathsep + py if py else "")}

    def _spawn(self, name: str) -> None:
        (self.run_dir / "events").mkdir(parents=True, exist_ok=True)
        log = self.run_dir / "logs" / f"{name}.log"
        self.procs[name] = Proc(name, self.argv[name], log, self.run_id, extra_env=self._env(name))
        self.log.record("job-launch", {"process": name, "incarnation": self.incarnation,
                                       "pid": self.procs[name].pid}, node=name)

    def _supervise(self) -> None:
        """Wait for the launched processes; restart the job when one failed and restarts are left."""
        while not self.closing:
            with self.lock:
                exited = {n: p.popen.poll() for n, p in self.procs.items() if p.popen.poll() is not None}
                if exited and not self.closing:
                    for n, rc in exited.items():      # each exit once, while the others still run
                        if (n, self.incarnation) not in self.exits_seen:
                            self.exits_seen.add((n, self.incarnation))
                            self.log.record("job-exit", {"process": n, "exit_code": rc,
                                                         "incarnation": self.incarnation}, node=n)
                    if self.job.finished(exited, list(self.procs)):
                        break
                    failed = [n for n, rc in exited.items() if not self.job.done(rc)]
                    if failed:
                        if self.restarts_left <= 0:
                            self.log.record("job-gave-up", {"incarnation": self.incarnation,
                                                            "why": "a launched process failed and no job restart is left"})
                            break
                        if all(self.job.restart_scope(n) == "process" for n in failed):
                            self._relaunch(failed)
                        else:
                            self._relaunch()
            time.sleep(0.1)
        self.finished.set()

    def _relaunch(self, only: list[str] | None = None) -> None:
        """A scheduler's restart: every process of the old incarnation goes and the job starts
        anew, or (`only`) just those failed processes start again, the others untouched."""
        if only is None:
            for p in self.procs.values():
                if p.alive():
                    p.kill()
                p.release()
            keep = {os.getpid()} | ({self.toxiproxy.proc.pid} if self.toxiproxy and self.toxiproxy.proc else set())
            left = [p for p in tagged_processes(self.run_id) if p.pid not in keep]     # the proxies stay
            if left:
                reap(left)
        else:
            for n in only:
                self.procs[n].release()
        self.restarts_left -= 1
        self.incarnation += 1
        self.log.record("job-restart", {"incarnation": self.incarnation, "restarts_left": self.restarts_left,
                                        **({"processes": only} if only is not None else {})})
        for name in only if only is not None else self.argv:
            self._spawn(name)

    def teardown(self) -> None:
        self.closing = True

        def stop_procs() -> None:
            with self.lock:
                for p in self.procs.values():
                    if p.alive():
                        p.signal(signal.SIGCONT)
                        p.kill()
                    p.release()

        def reap_tagged() -> None:
            left = [p for p in tagged_processes(self.run_id) if p.pid != os.getpid()]
            if left:
                reap(left)
        run_all([lambda: self.nft.destroy(force=True),
                 lambda: self.toxiproxy.stop(timeout=2.0) if self.toxiproxy else None, stop_procs, reap_tagged,
                 lambda: self.supervisor.join(2.0) if self.supervisor else None, self.log.close,
                 lambda: registry.unregister(self.run_id)])

    def discard_data(self) -> None:
        shutil.rmtree(self.run_dir / "data", ignore_errors=True)

    # ------------------------------------------------------------------ observation
    def nodes(self) -> list[str]:
        return self.job.roles()

    def shard_nodes(self, shard: int) -> list[str]:
        return []

    def workers(self) -> list[str]:
        return []

    def launched(self) -> dict[str, int]:
        return {n: p.pid for n, p in self.procs.items() if p.alive()}

    def _pid(self, role: str) -> int | None:
        return self.job.pid(role, self.launched())

    def alive(self, name: str) -> bool:
        pid = self._pid(name)
        return pid is not None and _running(pid)

    def routing(self) -> dict[int, Route]:
        return {}

    def status(self, name: str, **_: object):
        return SimpleNamespace(shard=0, role="job", epoch=self.incarnation, seq=0, isr=[]) if self.alive(name) else None

    def settled(self) -> bool:
        return self.finished.is_set()

    def final_state(self, name: str, under: list[int] | None = None) -> dict | None:
        return None

    def checkpoint_scan(self) -> list[dict]:
        return []

    def checkpoint_writes(self, name: str) -> list[str]:
        """The checkpoint the role's shim says it is writing and has not committed (a `checkpoint`
        start with no commit or done after it), named by step, incarnation and pid, or none: what
        a kill `during: checkpoint` waits for. Only the writer's own: the role's process now, or
        none running (killed just now, not yet started again); a write a dead incarnation left
        open is not a new process's. The events are read on from where the last look stopped, so
        a wait can poll every half millisecond."""
        path = self.events_path(name)
        pos, open_ = self._ckpt_seen.get(name, (0, None))
        try:
            with open(path, "rb") as f:
                f.seek(pos)
                chunk = f.read()
        except OSError:
            return []
        whole = chunk[:chunk.rfind(b"\n") + 1]           # a line still being written is read next time
        for line in whole.splitlines():
            if b'"checkpoint"' not in line and b'"job-start"' not in line:
                continue
            try:
                e = json.loads(line)
                v = e["value"]
            except (ValueError, KeyError, TypeError):
                continue
            # a new incarnation's start, a commit or a done closes the write
            open_ = v if e.get("f") == "checkpoint" and v.get("phase") == "start" else None
        self._ckpt_seen[name] = (pos + len(whole), open_)
        if not open_:
            return []
        now = self._pid(name)
        if now is not None and now != open_.get("pid"):
            return []
        return [f"checkpoint of step {open_.get('step')} ({open_.get('incarnation')}, pid {open_.get('pid')})"]

    def events_path(self, name: str) -> Path:
        name = self.job.progress_role if name == "worker-0" else name      # the runner follows worker-0's steps
        return self.run_dir / "events" / (name.replace("/", "-") + ".jsonl")

    def event_files(self) -> list[Path]:
        own = self.events_path("harness")
        return sorted(p for p in (self.run_dir / "events").glob("*.jsonl") if p != own)

    def workers_running(self) -> bool:
        return not self.finished.is_set()

    # ------------------------------------------------------------------ faults
    def _signal(self, name: str, sig: int) -> int:
        """Signal the role's process now and return its pid: looked up and signalled under the
        supervisor's lock, so a restart cannot slip between the two."""
        if name not in self.job.roles():
            raise HarnessError(f"{name}: no such role of {self.job.name}; roles: {', '.join(self.job.roles())}")
        with self.lock:
            pid = self._pid(name)
            if pid is None:
                raise HarnessError(f"{name}: not running now (incarnation {self.incarnation})")
            os.kill(pid, sig)
        return pid

    def kill(self, name: str) -> None:
        pid = self._signal(name, signal.SIGKILL)
        # gone, or a zombie its parent has not reaped yet: either way it runs no more
        if not wait_until(lambda: not _running(pid), 2.0, 0.01):
            raise HarnessError(f"kill {name}: pid {pid} still alive 2 s after SIGKILL")

    def stop(self, name: str) -> None:
        self._signal(name, signal.SIGTERM)

    def restart(self, name: str) -> None:
        """Nothing to do: torchrun restarts its ranks and the supervisor restarts a launched process."""

    def pause(self, name: str) -> None:
        self.paused[name] = self._signal(name, signal.SIGSTOP)     # the pid stopped is the one resumed

    def resume(self, name: str) -> None:
        pid = self.paused.pop(name, None)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGCONT)      # the process paused, even if a restart replaced the role
            except ProcessLookupError:
                pass

    def wipe_data(self, name: str) -> None:
        raise HarnessError(f"{self.job.name}: wipe is not a fault a training job takes")

    # ------------------------------------------------------------------ links
    def links(self) -> list[tuple[str, str]]:
        return self.job.links()

    def link_fault(self, kind: str, links: list[tuple[str, str]], params: dict):
        """Drop packets on the ports of the one role every link touches (its clients' traffic to
        it, all of it: on loopback no rule tells one client's connections from another's), or for
        latency and bandwidth a toxic on the one proxy in front of it, which its clients share."""
        try:
            node = isolated(links)
        except HarnessError:
            raise HarnessError(f"{kind}: a link fault on {self.job.name} cuts one role from its peers; the links "
                               f"{sorted(links)[:4]} share no one role. Write the target as a group <-> the one role "
                               "('workers <-> ps-0', 'nodes <-> rank-1')") from None
        if kind in TOXIC_KINDS:
            into = sorted(link for link in links if link[1] == node and self.net and link in self.net.links.links)
            if not into:
                raise HarnessError(f"{kind}: no proxy leads to {node}; {self.job.name} proxies "
                                   f"{', '.join(self.job.proxied_roles()) or 'no role'}: aim it at one of those")
            return LINK_FAULTS[kind](self.net, into[:1], params)     # one toxic on the shared proxy
        ports = self.job.ports_of(node)
        if not ports:
            raise HarnessError(f"{kind}: {node} serves on no port of {self.job.name}'s; cut a role that serves "
                               f"(the links: {', '.join(sorted({b for _, b in self.job.links()}))})")
        return PortCut(self.nft, kind, port_matches(ports), params, probe=lambda: self._progress(node, ports))

    def _progress(self, node: str, ports: list[int]) -> dict:
        """The job's progress when the cut starts and before it heals: its last acknowledged step."""
        steps = [e["value"]["step"] for e in read_events(self.events_path("worker-0"))
                 if e.get("f") == "step" and e.get("type") == "ok"]
        return {"node": node, "ports": ports, "acked_step": max(steps, default=0), "pid": self._pid(node)}


def _running(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
