"""Interrupt `pschaos run` at random moments and count what it leaves behind.

Shared by tests/integration/test_interrupt_soak.py (one round of each kind in `make test`, three in `make test-long`) and
benchmarks/interrupt_soak.py (the full 20 SIGINT + 20 SIGKILL-then-`pschaos clean`).

A round starts a run of a scenario with a packet-loss fault (an nftables table), a latency fault
(Toxiproxy toxics) and a flapping replica (a fault thread that kills and restarts a process
through the zygote), waits a random time, and then either
- sends SIGINT, to the harness alone or to its whole process group as a terminal's Ctrl-C does,
  sometimes a second one during teardown, and expects the harness to exit by itself, or
- SIGKILLs the harness and runs `pschaos clean`.
Then it counts, for that run only: live processes carrying its owner tag, nftables tables named
after it, and proxies held by any Toxiproxy server it left. Each must be 0.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil
import requests

from pschaos.harness.machinery.procs import OWNER_ENV, tagged_processes, wait_until
from pschaos.harness.machinery.tools import REPO
from pschaos.netfaults.nft import PREFIX, delete_table, table_name, tables

SCENARIO = """name: {name}
cluster: {{shards: 1, copies: 2, workers: 1, model: mlp}}
workload: {{steps: 5000}}
faults:
  - at: {{time: 0.3}}
    kind: loss
    target: workers -> nodes
    params: {{percent: 5}}
    duration_s: 120
  - at: {{time: 0.6}}
    kind: latency
    target: workers -> nodes
    params: {{latency_ms: 20}}
    duration_s: 120
  - at: {{time: 1.0}}
    kind: flap
    target: replica(shard=0)
    params: {{count: 50, down_s: 0.5, period_s: 0.5}}
"""

EXIT_BOUND_S = 30.0          # how long a SIGINTed harness may take to tear down and exit


@dataclass
class Round:
    kind: str                 # "sigint" | "sigint-group" | "sigint-twice" | "sigkill+clean"
    delay_s: float            # when the signal came, seconds after the harness started
    phase: str                # how far the run had got: "starting", "running", "faulted"
    exit_s: float | None      # SIGINT: seconds from the signal to the harness's exit
    returncode: int | None
    processes: int
    tables: int
    proxies: int
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.processes == 0 and self.tables == 0 and self.proxies == 0

    def to_json(self) -> dict:
        return {**asdict(self), "clean": self.clean}


def _owned_by(pid: int) -> list[psutil.Process]:
    out = []
    for p in tagged_processes():
        try:
            if p.environ().get(OWNER_ENV) == str(pid) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def _proxies(procs: list[psutil.Process]) -> int:
    """Proxies still held by Toxiproxy servers among `procs` (their API port is on the command line)."""
    n = 0
    for p in procs:
        try:
            argv = p.cmdline()
        except psutil.Error:
            continue
        if argv and argv[0].endswith("toxiproxy-server") and "-port" in argv:
            port = argv[argv.index("-port") + 1]
            try:
                n += len(requests.get(f"http://127.0.0.1:{port}/proxies", timeout=2).json())
            except (requests.RequestException, ValueError):
                continue
    return n


def _phase(hist: Path) -> str:
    try:
        text = hist.read_text()
    except FileNotFoundError:
        return "starting"
    return "faulted" if "fault-start" in text else "running" if "run-start" in text else "starting"


def _tables(name: str) -> list[str]:
    stem = table_name(name)              # tables are pschaos_<name>_<seed>_<hex>
    return [t for t in tables() if t.startswith(stem + "_")]


def one_round(kind: str, delay_s: float, workdir: Path, rng: random.Random) -> Round:
    name = f"isoak-{uuid.uuid4().hex[:6]}"
    sc = workdir / f"{name}.yaml"
    sc.write_text(SCENARIO.format(name=name))
    out = workdir / name
    hist = out / "run" / "events" / "harness.jsonl"
    t0 = time.monotonic()
    harness = subprocess.Popen([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(sc), "--out", str(out), "--quiet"],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    notes: list[str] = []
    exit_s = None
    phase = "starting"
    try:
        time.sleep(max(0.0, delay_s - (time.monotonic() - t0)))
        phase = _phase(hist)
        if harness.poll() is not None:
            notes.append(f"the harness had exited already ({harness.returncode}): "
                         f"{harness.stderr.read()[-300:]}")
        elif kind.startswith("sigint"):
            t_sig = time.monotonic()
            if kind == "sigint-group":
                os.killpg(harness.pid, signal.SIGINT)
            else:
                harness.send_signal(signal.SIGINT)
            if kind == "sigint-twice":
                time.sleep(rng.uniform(0.05, 1.0))
                if harness.poll() is None:
                    harness.send_signal(signal.SIGINT)
            try:
                _, err = harness.communicate(timeout=EXIT_BOUND_S)
                exit_s = round(time.monotonic() - t_sig, 2)
                if harness.returncode not in (130, -signal.SIGINT) or "Traceback" in err:
                    notes.append(f"exit {harness.returncode}: {err.strip()[-400:]}")
            except subprocess.TimeoutExpired:
                notes.append(f"still running {EXIT_BOUND_S:.0f}s after SIGINT")
        else:
            harness.kill()
            harness.wait(10)
            r = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "clean"], cwd=REPO, capture_output=True,
                               text=True, timeout=120)
            if r.returncode != 0:
                notes.append(f"clean exited {r.returncode}: {r.stderr[-300:]}")
    finally:
        if harness.poll() is None:              # a failed round: count first, then never leak it
            harness.kill()
            harness.wait(10)
        wait_until(lambda: not _owned_by(harness.pid), 3, 0.1)   # SIGKILLed stragglers need a moment
        left = _owned_by(harness.pid)
        found = Round(kind, round(delay_s, 2), phase, exit_s,
                      harness.returncode, len(left), len(_tables(name)), _proxies(left), notes)
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        for t in _tables(name):
            delete_table(t)
    return found


def soak(sigints: int, sigkills: int, seed: int | None = None, max_delay_s: float = 12.0,
         workdir: Path | None = None, progress=lambda r: None) -> list[Round]:
    """`sigints` SIGINT rounds (alone, to the group, twice, in turn) and `sigkills` SIGKILL+clean
    rounds, interleaved, each at a uniformly random moment in [0.5, max_delay_s] s of the run."""
    rng = random.Random(seed)
    workdir = workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"pschaos-isoak-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    int_kinds = ["sigint-group", "sigint", "sigint-twice"]     # a terminal's Ctrl-C first: one round has it
    plan = [int_kinds[i % 3] for i in range(sigints)] + ["sigkill+clean"] * sigkills
    rng.shuffle(plan)
    rounds = []
    for kind in plan:
        r = one_round(kind, rng.uniform(0.5, max_delay_s), workdir, rng)
        progress(r)
        rounds.append(r)
    return rounds


def summary(rounds: list[Round]) -> dict:
    ints = [r for r in rounds if r.kind.startswith("sigint")]
    kills = [r for r in rounds if r.kind == "sigkill+clean"]

    def totals(rs: list[Round]) -> dict:
        exits = [r.exit_s for r in rs if r.exit_s is not None]
        return {"rounds": len(rs), "clean_rounds": sum(r.clean for r in rs),
                "processes_left": sum(r.processes for r in rs), "tables_left": sum(r.tables for r in rs),
                "proxies_left": sum(r.proxies for r in rs),
                "phases": {p: sum(r.phase == p for r in rs) for p in ("starting", "running", "faulted")},
                "exit_s_max": max(exits) if exits else None,
                "exit_s_median": sorted(exits)[len(exits) // 2] if exits else None,
                "problems": [r.to_json() for r in rs if r.notes or not r.clean]}
    return {"sigint": totals(ints), "sigkill_clean": totals(kills), "table_prefix": PREFIX}
