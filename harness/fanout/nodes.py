"""What each node of a Ray cluster can run: `pschaos doctor --on ray`, and where `--on ray` places runs.

A sim run needs only pschaos (the same version as the driver's: a run by another version may
judge the same seed differently, and its result is refused) and the Python parts every run
imports. A process-backend run needs the real parts on its node as well: etcd, Toxiproxy,
nftables, and root (nftables tables, the cgroup and network faults). Each alive node is asked
by a task of its own, pinned there (no CPU: a busy node answers too), which runs the doctor's
own checks; a run is then placed only on nodes that lack nothing for its backend, by node
affinity, as many at a time on each as it has CPUs. A node with no CPU (a head started with
`--num-cpus=0`, as clusters often keep theirs) answers the survey but runs nothing.

Some scenarios need more than their backend's parts (`run_needs`): a process run that cuts a
copy's power needs the power-loss disk (FUSE, libfuse3, mfusepy), one of the redis-sentinel
adapter needs Redis' binaries. Such a run goes only to a node that has them too; where no node
has them it is unknown with the reason, never sent to fail there.
"""
from __future__ import annotations

import os
import socket
from typing import Any

PROCESS_PARTS = ("etcd", "toxiproxy-server", "nft")      # beyond the required Python parts
SYSTEM_PARTS = {"redis-sentinel": ("redis-server", "redis-sentinel", "redis"),     # a system's own parts (process runs)
                "accelerate-ddp": ("accelerate",)}
DISK_PART = "power-loss-disk"           # what the kinds below need on processes
DISK_KINDS = ("power-loss", "torn-write")      # harness/faults/storage.py STORAGE_KINDS (below faults: a unit test holds them equal)
SURVEY_TIMEOUT_S = 120.0


def node_report() -> dict:
    """On a node (a Ray task): the doctor's rows, this pschaos' version, and what a sim run and a
    process run would lack here."""
    from pschaos.harness.fanout.task import version
    from pschaos.harness.machinery.parts import power_loss_disk, python_rows, tool_rows

    node = ""
    try:
        import ray
        node = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside a task (tests): no node id
        pass
    rows = tool_rows() + python_rows() + [power_loss_disk()]
    sim = [r["part"] for r in rows if r["required"] and not r["ok"] and r["part"] not in PROCESS_PARTS]
    process = sim + [r["part"] for r in rows if r["part"] in PROCESS_PARTS and not r["ok"]]
    if os.geteuid() != 0:
        process.append("root (nftables tables, cgroup limits)")
    return {"node": node, "host": socket.gethostname(), "version": version(), "rows": rows,
            "lacks": {"sim": sim, "process": process}}


def survey(ray: Any, timeout_s: float = SURVEY_TIMEOUT_S) -> list[dict]:
    """node_report() from every alive node, each with its CPUs; a node that does not answer in
    time is reported with the reason (and places no run)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = [n for n in ray.nodes() if n.get("Alive")]
    task = ray.remote(num_cpus=0, max_retries=0)(node_report)
    refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
            for n in alive]
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=timeout_s)      # one bound for them all
    out = []
    for n, ref in zip(alive, refs):
        cpus = int(n.get("Resources", {}).get("CPU", 0))
        try:
            rep = ray.get(ref, timeout=0.1)
        except Exception as e:  # noqa: BLE001 - a node that cannot answer (in time) places nothing
            rep = {"node": n["NodeID"], "host": n.get("NodeManagerHostname", "?"), "version": None, "rows": [],
                   "lacks": {"sim": [f"no answer ({type(e).__name__})"], "process": [f"no answer ({type(e).__name__})"]}}
        out.append({**rep, "node": n["NodeID"], "cpus": cpus})
    return out


def run_needs(text: str, backend: str) -> tuple[str, ...]:
    """The parts a run of this scenario (its YAML text) needs on its node beyond its backend's:
    none for the twin (its disk and its stores are simulated). A text that does not load needs
    nothing more here: its run says why it cannot run, as a local one would."""
    if backend != "process":
        return ()
    import yaml

    try:         # read as data, not loaded as a Scenario: the run on the node validates it (and names the field)
        data = yaml.safe_load(text)
        faults, nemesis = data.get("faults") or [], data.get("nemesis") or {}
        kinds = {f.get("kind") for f in faults} | set(nemesis.get("kinds") or [])
        system = data.get("system") or "psnodes"
        disk = bool(kinds & set(DISK_KINDS))
        return ((DISK_PART,) if disk else ()) + tuple(SYSTEM_PARTS.get(system, ()))
    except Exception:  # noqa: BLE001 - not a scenario's shape: its run says why, as a local one would
        return ()


def lacks(report: dict, backend: str, mine: str, needs: tuple[str, ...] = ()) -> list[str]:
    """What `report`'s node lacks for a `backend` run driven by pschaos `mine` that also needs
    `needs` (run_needs)."""
    got = list(report["lacks"].get(backend, report["lacks"]["process"]))
    if report.get("version") != mine:
        got.insert(0, f"pschaos {report.get('version')} (the driver runs {mine})")
    ok = {r["part"]: r["ok"] for r in report.get("rows", [])}
    return got + [n for n in needs if not ok.get(n, False) and n not in got]


def placeable(reports: list[dict], backend: str, mine: str, needs: tuple[str, ...] = ()) -> dict[str, int]:
    """node id -> CPUs, for the nodes with a CPU that lack nothing for a `backend` run (that needs `needs`)."""
    return {r["node"]: r["cpus"] for r in reports if r["cpus"] > 0 and not lacks(r, backend, mine, needs)}


def describe(reports: list[dict], backend: str, mine: str, needs: tuple[str, ...] = ()) -> str:
    """Each node and what it lacks for `backend` (and `needs`), one line each (for errors and the doctor)."""
    return "; ".join(f"{r['host']} {r['node'][:8]}: " + ("no CPU (runs nothing)" if r["cpus"] <= 0 else
                                                        ", ".join(lacks(r, backend, mine, needs)) or "ready")
                     for r in reports)


class Placer:
    """Hands out nodes with a free CPU among `slots` (node -> CPUs), and takes them back."""

    def __init__(self, slots: dict[str, int]) -> None:
        self.slots, self.busy = dict(slots), dict.fromkeys(slots, 0)

    @property
    def width(self) -> int:
        return sum(self.slots.values())

    def free(self) -> int:
        """CPUs free on the nodes still placed."""
        return sum(max(0, self.slots[n] - self.busy[n]) for n in self.slots)

    def has_free(self) -> bool:
        return self.free() > 0

    def take(self, allowed: set[str] | None = None) -> str | None:
        """The least busy node with a free CPU (among `allowed`, when given), or None."""
        free = [n for n in self.slots if self.busy[n] < self.slots[n] and (allowed is None or n in allowed)]
        if not free:
            return None
        node = min(free, key=lambda n: (self.busy[n] / self.slots[n], n))
        self.busy[node] += 1
        return node

    def give(self, node: str) -> None:
        if node in self.busy:
            self.busy[node] = max(0, self.busy[node] - 1)

    def drop(self, node: str) -> None:
        """A node that died: no more runs go there."""
        self.slots.pop(node, None)
        self.busy.pop(node, None)
