"""What the runner asks of a system under test, whatever it is, and an Adapter made into one.

The runner schedules faults through the Backend protocol; what it observes besides (periodic
samples, settling after the heals, the final reading the checkers judge) depends on the system,
so it asks the scenario's System: psnodes (psnodes.py) or an Adapter wrapped by AdaptedSystem.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Protocol

from pschaos.harness.backends.base import Backend
from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.adapters.api import Adapter

Record = Callable[..., dict]
Say = Callable[[str], None]
Rerun = Callable[[Any, Path], dict]       # (scenario, out folder) -> its report


class System(Protocol):
    name: str

    def backend_factory(self, backend: str) -> Callable[..., Backend]:
        """(scenario, run_dir, run_id, seed) -> Backend for `--backend NAME`; HarnessError if none."""
        ...

    def sample(self, be: Backend, record: Record, tick: int) -> None:
        """One periodic sample of the nodes, during the workload."""
        ...

    def settle(self, be: Backend, clock: Any, record: Record, say: Say) -> None:
        """Wait (bounded) until replication came to rest after the heals; record `quiesce`."""
        ...

    def observe(self, be: Backend, clock: Any, record: Record, say: Say) -> None:
        """Record what the checkers judge the run by (final states, final reads)."""
        ...

    def prepare(self, sc, out: Path, rerun: Rerun, say: Say) -> dict:
        """Before the run: what the checkers need from elsewhere (psnodes: a fault-free baseline
        run's loss), as context fields. `rerun(scenario, folder)` runs another scenario as this
        run would (same seed, backend and backend factory, quietly) and returns its report."""
        ...

    def context(self, sc) -> dict:
        """The scenario's settings this system's checkers read (recorded in run-start)."""
        ...

    def artifacts(self, history: list[dict], out: Path) -> None:
        """Files beside report.json that hold what the details only sample."""
        ...


class AdaptedSystem:
    """An Adapter as a System: local processes only, settled by the adapter's own word, judged
    by what its client reads back at the end."""

    def __init__(self, adapter: type[Adapter]) -> None:
        self.adapter, self.name = adapter, adapter.name
        self.last: tuple[int, str] | None = None     # the (term, primary) last recorded as promoted

    def backend_factory(self, backend: str) -> Callable[..., Backend]:
        if backend != "process":
            raise HarnessError(f"--backend {backend}: system {self.name} runs as local processes only; "
                               "use --backend process")
        from pschaos.harness.backends.adapters.backend import AdapterBackend

        return lambda sc, run_dir, run_id, seed: AdapterBackend(self.adapter, sc, run_dir, run_id, seed)

    def sample(self, be: Backend, record: Record, tick: int) -> None:
        """Who the system names primary, and a `promote` when that changes at a higher term (as
        seen by the sample: up to its period late)."""
        r = be.routing().get(0)
        record("topology", {"tick": tick, "shard": 0, "primary": r.primary if r else None,
                            "epoch": r.epoch if r else None})
        if r is not None and r.epoch > (self.last or (-1, ""))[0]:
            self.last = (r.epoch, r.primary)
            record("promote", {"shard": 0, "epoch": r.epoch, "node": r.primary, "seen_by": "sample"}, node=r.primary)

    def settle(self, be: Backend, clock: Any, record: Record, say: Say) -> None:
        t = self.adapter.settle_s
        ok = clock.wait_until(be.settled, t, 0.2)
        record("quiesce", {"settled": ok, "timeout_s": t})
        if not ok:      # judged: the updates checks say unknown (harness/checkers/updates.py)
            say(f"{self.name} did not settle within {t}s (one primary, replicas caught up); the checks will be "
                "unknown")

    def observe(self, be: Backend, clock: Any, record: Record, say: Say) -> None:
        for n in be.nodes():
            record("final-state", {"node": n, "shard": 0, "alive": be.alive(n)}, node=n)
        keys = sorted(be.workers())
        for attempt in range(3):          # a primary changing under the reading: once more, after a pause
            try:
                node, final = be.final(keys)
                record("final-read", {"node": node, "keys": final, "attempts": attempt + 1})
                return
            except Exception as e:  # noqa: BLE001 - no final reading: the checkers say unknown, with this
                error = f"{e.__class__.__name__}: {e}"[:300]
                clock.sleep(1.0)
        record("final-read", {"error": error})
        say(f"could not read the final state of {self.name}: {error}")

    def prepare(self, sc, out: Path, rerun: Rerun, say: Say) -> dict:
        return {}

    def context(self, sc) -> dict:
        return {"finds": list(sc.expect.finds)}

    def artifacts(self, history: list[dict], out: Path) -> None:
        """Every lost update (key, op, op id, the node that acknowledged it, when) in
        lost-updates.jsonl: the report's details name only the first 20."""
        from pschaos.harness.checkers.updates import LOST_FILE, lost_updates

        lost = lost_updates(history) if any(e.get("f") == "update" for e in history) else []
        if lost:
            (out / LOST_FILE).write_text("".join(json.dumps(x) + "\n" for x in lost))


def _quietly(pred: Callable[[], bool]) -> bool:
    try:
        return bool(pred())
    except Exception:  # noqa: BLE001 - a node still coming back: not settled yet
        return False
