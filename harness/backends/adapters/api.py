"""The adapter API: what a user writes to put their own system under pschaos.

An adapter says four things, and the harness does the rest (processes, faults, workload,
history, checkers, reports):

- **lifecycle**: `configure()` writes config files and draws ports (from `self.env`); `commands()`
  gives the command line of every process, started in that order as each is `up(name)`. The
  harness starts each one tagged with the run id in its environment (so `pschaos clean` reaps it
  after a crash; a process that overwrites its environment is refused), and kills, pauses and
  restarts it with the same command line.
  Data nodes are named `shard-<group>/<slot>` (the DESIGN contract, so every target selector
  works); helper processes (Sentinels) take any other name and are never fault targets.
- **topology**: `primary(group)` asks the system who leads a group now (its own control plane:
  Sentinel, Raft), `epoch(group)` its term (`view(group)` both from one reading), `peer_ports(node)` the TCP ports its peers reach it
  on (a partition drops every packet on them, or what `cut(node)` says; clients keep their own
  way in), `ready()` and
  `settled()` say when it serves and when replication came to rest after the faults.
- **client**: `client(worker)` returns an object with `update(key, op, amount)` (returns the node
  that acknowledged it; raises `Refused` when the update surely did not happen, anything else
  when it may have) and `read(key)` (how many updates the key holds); `final(keys)` reads what
  survived: per key the op ids applied, their count and their float sum.
- **checks**: `checks`, the checkers that apply (`default_checks` when a scenario names none),
  and `options`, the scenario's `system_options` with their types and defaults.

docs/adapters.md has a complete example; `redis_sentinel.py` and `etcd_cluster.py` are two more.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pschaos.harness.machinery.ports import free_ports
from pschaos.harness.backends.options import OptionsMixin
from pschaos.harness.backends.adapters.portcut import port_matches


class Refused(Exception):
    """The system answered that the update was not applied (a READONLY reply, a lost CAS): the
    history records it as `fail`. Any other exception leaves the update indeterminate (`info`)."""


@dataclass
class Env:
    """What the harness hands an adapter: where to write, how many copies, and free ports."""

    run_dir: Path                  # the run folder: configs, data and logs go below it
    sock_dir: Path                 # a short folder for unix sockets (their paths are capped at 108 bytes)
    copies: int                    # data nodes in the group
    options: dict[str, Any] = field(default_factory=dict)

    def ports(self, n: int) -> list[int]:
        """`n` free loopback ports, reserved for this run (harness/machinery/ports.py)."""
        return free_ports(n)

    def data(self, name: str) -> Path:
        """A node's data folder (created)."""
        d = self.run_dir / "data" / name.replace("/", "-")
        d.mkdir(parents=True, exist_ok=True)
        return d


class Client(Protocol):
    def update(self, key: str, op: int, amount: float) -> str:
        """Apply one acknowledged update (count +1, sum +amount, op id recorded) to `key`;
        return the node that acknowledged it."""
        ...

    def read(self, key: str) -> int:
        """How many updates `key` holds now (a read the system promises is current)."""
        ...

    def close(self) -> None:
        ...


class Adapter(OptionsMixin):
    """Subclass and fill in; the methods below are the whole contract."""

    name: ClassVar[str] = ""
    checks: ClassVar[tuple[str, ...]] = ("no-lost-updates", "counters-match", "linearizable-reads")
    default_checks: ClassVar[tuple[str, ...]] = ("no-lost-updates", "counters-match")
    options: ClassVar[dict[str, tuple[type, Any]]] = {}
    settle_s: ClassVar[float] = 30.0     # how long `settled()` may take after the last heal

    @classmethod
    def scenario_error(cls, copies: int, options: dict[str, Any]) -> str | None:
        """A scenario's settings this adapter cannot run, said with the field and the fix (checked
        when the scenario loads, not found at run time); None when it can."""
        return None

    def __init__(self, env: Env) -> None:
        self.env = env
        self.opt = env.options
        self.nodes = [f"shard-0/{r}" for r in range(env.copies)]

    def configure(self) -> None:
        """Draw ports and write config files (called once, before any process starts)."""

    def commands(self) -> dict[str, list[str]]:
        """Every process's command line by name: data nodes `shard-0/<r>`, helpers any name."""
        raise NotImplementedError

    def up(self, name: str) -> bool:
        """Process `name` serves; the harness starts the next one of `commands()` only then (a
        Sentinel started after the replicas attached sees them at once)."""
        return True

    def ready(self) -> bool:
        """The system serves: a primary is known and every replica follows it."""
        raise NotImplementedError

    def primary(self, group: int = 0) -> str | None:
        """The node the system's own control plane names leader of `group` now, or None."""
        raise NotImplementedError

    def epoch(self, group: int = 0) -> int:
        """The leadership term that named the primary (Sentinel's config epoch, Raft's term)."""
        return 0

    def view(self, group: int = 0) -> tuple[int, str | None]:
        """(term, primary) from one reading of the control plane, so a failover between two
        questions cannot pair the old primary with the new term. The harness asks only this;
        the default asks `epoch` then `primary`, which an adapter whose control plane answers
        both at once (Sentinel's SENTINEL MASTER, etcd's status) should override."""
        return self.epoch(group), self.primary(group)

    def peer_ports(self, node: str) -> list[int]:
        """The TCP ports a node's peers reach it on; a partition drops every packet on them."""
        raise NotImplementedError

    def progress(self, node: str) -> dict | None:
        """The node's own view of where it is (etcd: its term, raft index and whether it thinks it
        leads; Redis: its role and replication offset), read at a partition's start and end as
        evidence of what the cut did; None when the adapter cannot say."""
        return None

    def cut(self, node: str) -> list[str]:
        """What a partition isolating `node` drops, as nftables matches (default: every packet
        to or from its peer ports); a system may spare a link its scenario keeps."""
        return port_matches(self.peer_ports(node))

    def settled(self) -> bool:
        """After the faults: one primary, every live replica caught up with it."""
        return self.ready()

    def client(self, worker: str) -> Client:
        raise NotImplementedError

    def final(self, keys: list[str]) -> tuple[str, dict[str, dict]]:
        """(node read, {key: {"ops": [op ids], "count": n, "sum": s}}), read from the primary."""
        raise NotImplementedError
