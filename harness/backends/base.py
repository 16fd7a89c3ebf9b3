"""The one narrow adapter between the harness and a system under test.

The runner, the faults, the target selectors and the observations go through these methods
only (nothing of psnodes, no work folder, no proxy table), so a second parameter-server
implementation or the Docker or SimPy backends plug in by implementing them; the conformance
test in tests/unit holds ProcessBackend to every signature here. Names are the contract:
`shard-<i>/<r>`, `worker-<j>`, `etcd`. Time comes from `clock` (harness/history/clock.py): the wall
clock here, a virtual one in the simulator.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pschaos.harness.history.clock import Clock


@runtime_checkable
class Backend(Protocol):
    name: str
    proxied: bool       # every directed link passes through a proxy that link faults act on
    hurry: bool         # set during teardown (a second Ctrl-C): cut grace periods short
    clock: Clock        # the time the run is scheduled, recorded and judged in

    def start(self, timeout: float = 30.0, workers_steps: int | None = None, duration: float | None = None,
              step_delay: float = 0.0) -> None:
        """Bring the cluster up (and, with `workers_steps`, its workers); return when it serves."""
        ...

    def start_worker(self, name: str, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        """Start one worker (a new name joins the training: scale-out)."""
        ...

    def teardown(self) -> None:
        """Undo everything started; bounded in time, safe to call again."""
        ...

    # observation
    def nodes(self) -> list[str]:
        """Every shard node's name, `shard-<i>/<r>`."""
        ...

    def shard_nodes(self, shard: int) -> list[str]:
        """The copies of one shard, in slot order."""
        ...

    def workers(self) -> list[str]:
        """Every worker started so far, running or not."""
        ...

    def alive(self, name: str) -> bool:
        """Whether the process (or its model) named runs now."""
        ...

    def routing(self) -> dict[int, Any]:
        """shard -> record with `epoch`, `primary` and `isr`, as the control plane has it now."""
        ...

    def status(self, name: str, checksum: bool = False, applied: bool = False, timeout: float = 2.0,
               audit: bool = False) -> Any:
        """A node's own report (`shard`, `role`, `epoch`, `seq`, `isr`, ...), None when it does not
        answer within `timeout`."""
        ...

    def final_state(self, name: str, under: list[int] | None = None) -> dict | None:
        """What the checkers judge a copy by at the end: `role`, `epoch`, `seq`, `checksum`,
        `pushes`, `applied` (worker -> req ids), `restored_from` and `audit` (or None), and for a
        psnodes copy its `holdings` sorted by owner under `under` (the routing record's shard set
        as the harness read it); None when the node does not answer."""
        ...

    def checkpoint_scan(self) -> list[dict]:
        """Every checkpoint as found on its storage: `dir`, `stray_tmp`, and `seq`, `file`,
        `size_ok`, `loadable` (or `loadable: False` with the `error`)."""
        ...

    def events_path(self, name: str) -> Path:
        """The JSON-lines event file a node or worker writes (history events). The runner writes
        its own history (faults, observations) at `events_path("harness")`, beside them; the
        backend never writes that one."""
        ...

    def event_files(self) -> list[Path]:
        """Every event file this run's nodes, workers, etcd and proxies wrote so far, sorted: the
        sources the runner merges into `history.jsonl`, wherever the backend keeps them. The
        runner's own `events_path("harness")` is not among them (the runner adds it itself)."""
        ...

    def discard_data(self) -> None:
        """Delete what the cluster stored (node data, checkpoints, the control plane's data) once
        the run has observed and scanned it and is torn down; logs and event files stay. The
        runner calls it unless asked to keep the data; safe to call when nothing was started."""
        ...

    def workers_running(self) -> bool:
        """Whether any worker still trains."""
        ...

    # process control (faults)
    def kill(self, name: str) -> None:
        """A crash (SIGKILL): nothing is flushed."""
        ...

    def stop(self, name: str) -> None:
        """A graceful stop (SIGTERM)."""
        ...

    def restart(self, name: str) -> None:
        """Start a stopped or killed process again: same name, address and data."""
        ...

    def pause(self, name: str) -> None:
        """Freeze (SIGSTOP)."""
        ...

    def resume(self, name: str) -> None:
        """Thaw a paused process (SIGCONT)."""
        ...

    def wipe_data(self, name: str) -> None:
        """Delete a node's local data (a lost disk); the shared checkpoint store stays."""
        ...

    def checkpoint_writes(self, name: str) -> list[str]:
        """The checkpoint files a node has begun and not yet finished writing, now (its local
        ones and its shard's shared ones): a kill while one is listed landed mid-write."""
        ...

    # links (network faults)
    def links(self) -> list[tuple[str, str]] | None:
        """Every directed link (src, dst) a network fault can act on; None when the cluster
        runs without link proxies."""
        ...

    def link_fault(self, kind: str, links: list[tuple[str, str]], params: dict) -> Any:
        """A network fault of `kind` on these links, not yet injected: `inject()`, `heal()`,
        and `dropped()` where it counts dropped packets."""
        ...
