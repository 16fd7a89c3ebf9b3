"""psnodes, our own parameter server, as one system among others: its three backends and how
the runner observes it (sampling, settling, final states, checkpoint scans).

This is what the runner did inline before adapters: the code moved here unchanged, so the
runner knows no system by name. psnodes keeps a richer contract than the Adapter API (three
backends, checkpoints, audit tensors), so it implements the runner's System protocol
(system.py) directly rather than through AdapterBackend.
"""
from __future__ import annotations

import json
from pathlib import Path

from pschaos.harness.backends.base import Backend
from pschaos.harness.backends.adapters.system import Record, Rerun, Say
from pschaos.harness.errors import HarnessError
from pschaos.harness.faults.storage import NOT_ON_DOCKER, storage_kinds_of



def process_backend(scenario, run_dir: Path, run_id: str, seed: int) -> Backend:
    """The default: local processes (imported here, so a runner on another backend needs no psnodes)."""
    from pschaos.harness.backends.process.backend import ProcessBackend

    return ProcessBackend(scenario.cluster, run_dir, run_id, seed, proxied=scenario.proxied(),
                          disks=bool(storage_kinds_of(scenario)))


def sim_backend(scenario, run_dir: Path, run_id: str, seed: int) -> Backend:
    """The SimPy twin: the same scenario in virtual time (harness/backends/sim/backend.py)."""
    from pschaos.harness.backends.sim.backend import SimBackend

    return SimBackend(scenario.cluster, run_dir, run_id, seed)


def docker_backend(scenario, run_dir: Path, run_id: str, seed: int) -> Backend:
    """Every node, worker, etcd and Toxiproxy as a container (harness/backends/docker/backend.py)."""
    from pschaos.harness.backends.docker.backend import DockerBackend

    kinds = [f.kind for f in scenario.faults] + (scenario.nemesis.kinds if scenario.nemesis else [])
    storage = storage_kinds_of(scenario, NOT_ON_DOCKER)
    if storage:
        raise HarnessError(f"fault kind(s) {', '.join(storage)}: the docker backend does not fault a container's "
                           "disk yet (no power-loss disk on its volumes); run the scenario with --backend process")
    return DockerBackend(scenario.cluster, run_dir, run_id, seed, proxied=scenario.proxied(),
                         data_volumes="disk-full" in kinds)


BACKENDS = {"process": process_backend, "docker": docker_backend, "sim": sim_backend}


def consistent(states: list[dict]) -> bool:
    """One live primary per shard, and every live copy of a shard at the same epoch."""
    shards: dict[int, list[dict]] = {}
    for v in states:
        if v["alive"]:
            shards.setdefault(v["shard"], []).append(v)
    return all(sum(c["role"] == "primary" for c in cs) == 1 and len({c["epoch"] for c in cs}) == 1
               for cs in shards.values())


class PsnodesSystem:
    name = "psnodes"

    def backend_factory(self, backend: str):
        if backend not in BACKENDS:
            raise HarnessError(f"--backend {backend}: not available in this version; choose one of "
                               f"{', '.join(BACKENDS)}")
        return BACKENDS[backend]

    def sample(self, be: Backend, record: Record, tick: int) -> None:
        """Each node's role, epoch and seq (replication lag over time in reports)."""
        for n in be.nodes():
            if be.alive(n):
                st = be.status(n, timeout=0.2)
                if st is not None:
                    record("sample", {"tick": tick, "node": n, "shard": st.shard, "role": st.role,
                                      "epoch": st.epoch, "seq": st.seq}, node=n)

    def settle(self, be: Backend, clock, record: Record, say: Say, timeout: float = 20.0) -> None:
        """Wait until every live copy has the primary's seq (replication settled)."""
        def settled() -> bool:
            for shard, rec in be.routing().items():
                p = be.status(rec.primary)
                if p is None or p.role != "primary":
                    return False
                for n in be.shard_nodes(shard):
                    if n != rec.primary and be.alive(n):
                        s = be.status(n)
                        if s is None or s.seq != p.seq or s.epoch != p.epoch:
                            return False
            return True
        ok = clock.wait_until(settled, timeout, 0.1)
        record("quiesce", {"settled": ok, "timeout_s": timeout})
        if not ok:
            say(f"replication did not settle within {timeout}s; the checks will show where")

    def observe(self, be: Backend, clock, record: Record, say: Say, attempts: int = 3) -> None:
        """Each copy's final state, then every checkpoint as found. Copies are read one after
        another, so a failover between two reads would show two primaries that never were at
        once: such a reading is taken again (after settling) up to `attempts` times, and the
        last one is recorded as it is."""
        rec = be.routing_record() if hasattr(be, "routing_record") else None
        # the routing record's shard set; with etcd silent, the groups the harness runs (never a
        # copy's own routing: a copy behind the switch would be judged by its own stale view)
        under = list(rec.shards) if rec is not None else (be.active_shards() if hasattr(be, "active_shards") else None)
        for attempt in range(1, attempts + 1):
            states = [self._final_state(be, n, under) for n in be.nodes()]
            if consistent(states) or attempt == attempts:
                break
            self.settle(be, clock, record, say)
        record("observe", {"attempts": attempt, "consistent": consistent(states)})
        for v in states:
            record("final-state", v, node=v["node"])
        for v in be.checkpoint_scan():      # does each manifest name a whole, loadable file?
            record("checkpoint-scan", v)

    def prepare(self, sc, out: Path, rerun: Rerun, say: Say) -> dict:
        """converge-baseline and migration-transparent: the same scenario without faults, same
        seed; its loss is the bound, its final model (the primaries' state digests) the reference."""
        wanted = [c for c in ("converge-baseline", "migration-transparent") if c in sc.expect.checks]
        if not wanted:
            return {"baseline_loss": None}
        say(f"{sc.name}: fault-free baseline run for {' and '.join(wanted)}")
        base = sc.model_copy(update={"faults": [], "nemesis": None, "name": sc.name,
                                     "expect": sc.expect})
        base = base.model_copy(update={"expect": base.expect_only(
            ["converged"], "a fault-free run made for converge-baseline: only its final loss is used")})
        base.path = sc.path
        rep = rerun(base, out / "baseline")
        model, why = baseline_model(out / "baseline") if rep.get("verdict") == "pass" else (
            None, f"the fault-free run did not pass ({rep.get('verdict')}): its model is no reference")
        return {"baseline_loss": rep["metrics"]["final_loss"], "baseline_model": model, "baseline_model_why": why}

    def context(self, sc) -> dict:
        """The settings psnodes' checkers read: replication, training mode, staleness, bounds."""
        c, e = sc.cluster, sc.expect
        return {"replication": c.replication, "max_lag": c.max_lag, "training": c.training,
                "staleness": c.staleness, "member_ttl_s": c.member_ttl_s, "baseline_margin": e.baseline_margin,
                "stop_acking_grace_s": e.stop_acking_grace_s, "catchup_ratio": e.catchup_ratio,
                # the share of a snapshot a catch-up may move: a bound only where the scenario sets
                # one (a copy down for long has most keys changed, and a delta of them all is right)
                "catchup_vs_snapshot": e.catchup_vs_snapshot if "catchup_vs_snapshot" in e.model_fields_set else None}

    def artifacts(self, history: list[dict], out: Path) -> None:
        """psnodes' evidence is all in history.jsonl and report.json."""

    @staticmethod
    def _final_state(be: Backend, n: str, under: list[int] | None = None) -> dict:
        st = be.final_state(n, under)
        # `running`: the process or container is there; `alive`: it answered (a running copy that
        # did not answer is no evidence of anything, and the checks that need its state say so)
        return {"node": n, "shard": int(n.split("-")[1].split("/")[0]), "alive": st is not None,
                "running": be.alive(n), **(st or {})}


def baseline_model(folder: Path) -> tuple[dict | None, str]:
    """The fault-free run's final model (migration-transparent), from its history; None and why without one."""
    from pschaos.harness.checkers.transparent import model_of

    hist = folder / "history.jsonl"
    if not hist.exists():
        return None, f"the fault-free run left no history ({hist})"
    events = []
    for line in hist.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return model_of(events)
