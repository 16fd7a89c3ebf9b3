"""An in-memory etcd in virtual time, with psnodes/etcd.py's client API, for the SimPy twin.

A node shell is handed either `pschaos.psnodes.etcd.Etcd` or `SimEtcd`: the method names, arguments,
return shapes (`KV`, bool, lease ids, TTLs) and error type (`EtcdError`) are the same, and so is
the store's behaviour as etcd has it: one global revision (1 for an empty store) that every write
transaction moves by one; a key's `mod_revision` is the revision of its last write; a missing key
compares as mod revision 0; a transaction's puts share one revision; deleting nothing or a failed
compare moves nothing; a put on a lease that does not exist is refused.

Leases live in virtual time. A lease granted or kept alive at t with TTL T dies at exactly t + T:
an Environment event fires then and deletes its keys in one revision, and every call checks the
deadlines first, so a lease is alive iff now < deadline whatever the order of events at that
instant. etcd raises a TTL under its minimum (ceil(1.5 × election timeout): 1 s for the harness's
etcd, --election-timeout 500) to that minimum, and so does `min_ttl` here.

Calls are instantaneous: no time passes inside SimEtcd, so a call made from a SimPy process
returns in the same instant. Delay, loss and timeouts between a node and etcd are the simulated
network's job (harness/backends/sim/network.py): a shell delivers the request on its link to `etcd`, calls
SimEtcd, holds the reply for the server's service time (`service_s`: `write_s` for a call that
goes through the raft log (put, delete, txn, even one whose compare failed, lease grant and
revoke: etcd fsyncs its WAL before answering), `read_s` for a range or a keepalive; both
measured on the real etcd by `pschaos sim calibrate`; with a CPU model, the client's and the
server's CPU per operation are charged on the host's cores and only the rest waits), then delivers the reply. A server that
goes down during that time answers nothing: the caller gets EtcdError though the call may have
been applied (an indeterminate write, as a real client sees it); one that freezes answers after
the thaw or not at all. One coarsening: the write is visible to others from the start of that
service time, where the real server applies it after the fsync. `timeout=` arguments are accepted for the same signatures and
ignored. One coarsening: etcd's lessor checks deadlines every 500 ms; here a lease dies on time.

`available = False` models etcd unreachable from every client: each call raises `EtcdError`
at once, as the real client does on a refused connection (`revoke` swallows it and `healthy`
says False, also as the real client does). The server keeps running behind it, so leases go on
expiring on time: nobody can keep them alive.

The server process itself (the `kill`, `stop` and `pause` faults on `etcd`, as the process
backend signals its etcd): `crash()` is a killed or stopped server: every call is refused at once
and no lease expires, since no lessor runs; `start()` brings it back with its data (the keys
and leases of its data dir), and, as etcd's lessor does when its member becomes leader
(`Promote(electionTimeout)`), every lease is refreshed to `promote_extend_s` + TTL from then, so
a holder that keeps it alive from now on keeps it. `freeze()` is SIGSTOP: the server accepts
connections but answers nothing, so a call waits (`etcd_call`, harness/backends/sim/rpc.py) until
`thaw()` or its timeout, and no lease expires meanwhile; at `thaw()` the ones past their deadline
expire at once, before any call is answered.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field

import simpy

from pschaos.psnodes.etcd import KV, EtcdError

from pschaos.harness.backends.sim.calibration import wake_after
from pschaos.harness.backends.sim.cpu import SimCPU


@dataclass(frozen=True)
class Change:
    """One write as a watcher would see it: virtual time, revision, "put" or "delete", key, and
    why ("put", "txn", "delete", "expire": the lease ran out, "revoke")."""
    t: float
    revision: int
    kind: str
    key: str
    cause: str


@dataclass
class _Lease:
    ttl: int
    deadline: float
    keys: set[str] = field(default_factory=set)


LOGGED = ("/kv/put", "/kv/deleterange", "/kv/txn", "/lease/grant", "/kv/lease/revoke")   # through raft + WAL
PROMOTE_EXTEND_S = 0.5      # the harness's etcd: --election-timeout 500 (harness/machinery/etcd_server.py)


class SimEtcd:
    """etcd's key space and leases over `env`'s virtual time; `changes` records every write."""

    endpoint = "sim://etcd"

    def __init__(self, env: simpy.Environment, min_ttl: int = 1, first_lease: int = 1,
                 promote_extend_s: float = PROMOTE_EXTEND_S, read_s: float = 0.0, write_s: float = 0.0,
                 cpu: SimCPU | None = None, cpu_s: float = 0.0, client_cpu_s: float = 0.0) -> None:
        self.env = env
        self.read_s, self.write_s = float(read_s), float(write_s)
        # CPU per operation on the host's cores (harness/backends/sim/cpu.py), the server's and the client's;
        # both are part of read_s / write_s (what the calibration measured), the rest a plain wait
        self.cpu, self.cpu_s, self.client_cpu_s = cpu, float(cpu_s), float(client_cpu_s)
        self.last_path: str | None = None     # the API path of the last call (its service time)
        # calibration etcd_wake_s: (gap since the last answer, extra answer time) points, rising; a
        # server that sat idle answers later (Go's parked threads, the host's idle cores to wake)
        self.wake_points: list[tuple[float, float]] = []
        self.last_active = -math.inf          # when it last answered or was asked (virtual time)
        self.min_ttl = min_ttl
        self.promote_extend_s = promote_extend_s
        self.available = True
        self.running = True         # the server process: False once killed or stopped
        self.frozen = False         # SIGSTOP: alive, answers nothing
        self.thawed = env.event()   # fires at the next thaw()
        self.revision = 1
        self.changes: list[Change] = []
        self._kv: dict[str, KV] = {}
        self._leases: dict[int, _Lease] = {}
        self._next_lease = first_lease

    # ------------------------------------------------------------------ plumbing
    def service_s(self) -> float:
        """The server's time to answer its last call beyond the CPU charged on `cpu`: a write
        through the log, or a read."""
        total = self.write_s if self.last_path in LOGGED else self.read_s
        if self.cpu is None:
            return total
        return max(0.0, total - sum(self.cpu_of()))

    def wake_s(self, now: float) -> float:
        """The extra answer time of a call that finds the server idle since it last answered or
        was asked (`last_active`): calibration.wake_after over the calibrated points (measured on
        this 2-core VM, 2026-12-07: +2.1 ms 25 ms after the last call). The call that asks marks
        it active, so calls that arrive together pay the idle once."""
        extra = wake_after(self.wake_points, now - self.last_active)
        self.last_active = now
        return extra

    def touch(self, now: float) -> None:
        """A read that bypasses etcd_call (the harness's own looks at the routing) keeps the server
        awake as the real harness's reads do."""
        self.last_active = max(self.last_active, now)

    def cpu_of(self) -> tuple[float, float]:
        """The client's and the server's CPU for the last call. Their sum may exceed the call's
        answer time (measured: 1.06 ms of CPU in a 0.29 ms read on an idle host; Go's and the
        client's threads run side by side), so both are scaled down to fit it: an idle host
        answers in the calibrated time, a busy one slows the CPU part."""
        total = self.write_s if self.last_path in LOGGED else self.read_s
        cpu = self.client_cpu_s + self.cpu_s
        k = min(1.0, total / cpu) if cpu > 0 else 0.0
        return self.client_cpu_s * k, self.cpu_s * k

    def _enter(self, path: str) -> None:
        """Every call: unreachable raises; otherwise leases past their deadline go first."""
        self.last_path = path
        if not self.running:
            raise EtcdError(f"etcd at {self.endpoint} unreachable: ConnectionError (the server is down) on {path}")
        if self.frozen:         # a call that did not wait for the thaw (etcd_call waits): it timed out
            raise EtcdError(f"etcd at {self.endpoint} unreachable: ReadTimeout (the server is paused) on {path}")
        if not self.available:
            raise EtcdError(f"etcd at {self.endpoint} unreachable: down (simulated) on {path}")
        self._expire_due()

    def _lessor_runs(self) -> bool:
        return self.running and not self.frozen

    def _expire_due(self) -> None:
        if not self._lessor_runs():
            return
        now = self.env.now
        for lid in sorted(self._leases, key=lambda i: (self._leases[i].deadline, i)):
            if self._leases[lid].deadline <= now:
                self._drop_lease(lid, "expire")

    def _on_deadline(self, lid: int, deadline: float) -> None:
        """The Environment's event at a lease's deadline: expire it unless it was renewed since."""
        lease = self._leases.get(lid)
        if lease is not None and lease.deadline == deadline:
            self._expire_due()

    def _arm(self, lid: int, extend: float = 0.0) -> None:
        lease = self._leases[lid]
        lease.deadline = self.env.now + extend + lease.ttl
        ev = self.env.timeout(extend + lease.ttl)
        ev.callbacks.append(lambda _e, lid=lid, dl=lease.deadline: self._on_deadline(lid, dl))

    def _drop_lease(self, lid: int, cause: str) -> None:
        """Delete the lease and its keys, all in one revision (none if it held no keys)."""
        lease = self._leases.pop(lid)
        self._write({k: None for k in sorted(lease.keys)}, cause)

    def _write(self, ops: dict[str, tuple[bytes, int] | None], cause: str) -> None:
        """Apply puts (value, lease) and deletes (None) as one revision; deletes of absent keys
        are no writes, and a transaction that writes nothing keeps the revision."""
        ops = {k: v for k, v in ops.items() if v is not None or k in self._kv}
        if not ops:
            return
        self.revision += 1
        for key, op in ops.items():
            old = self._kv.pop(key, None)
            if old is not None and old.lease in self._leases:
                self._leases[old.lease].keys.discard(key)
            if op is not None:
                value, lease = op
                self._kv[key] = KV(key, value, self.revision, lease)
                if lease:
                    self._leases[lease].keys.add(key)
            self.changes.append(Change(self.env.now, self.revision, "delete" if op is None else "put",
                                       key, cause))

    def _check_lease(self, path: str, lease: int) -> None:
        if lease and lease not in self._leases:
            raise EtcdError(f"etcd {path}: etcdserver: requested lease not found")

    @staticmethod
    def _bytes(value: str | bytes) -> bytes:
        return value.encode() if isinstance(value, str) else bytes(value)

    # ------------------------------------------------------------------ key space
    def get(self, key: str, serializable: bool = False) -> KV | None:
        """One member: a serializable read reads the same store as a linearizable one."""
        self._enter("/kv/range")
        return self._kv.get(key)

    def get_prefix(self, prefix: str) -> list[KV]:
        """Every key under `prefix`, sorted by key bytes as etcd returns a range."""
        self._enter("/kv/range")
        return [self._kv[k] for k in sorted(self._kv, key=str.encode) if k.startswith(prefix)]

    def put(self, key: str, value: str | bytes, lease: int = 0) -> None:
        self._enter("/kv/put")
        self._check_lease("/kv/put", lease)
        self._write({key: (self._bytes(value), lease)}, "put")

    def delete(self, key: str) -> None:
        self._enter("/kv/deleterange")
        self._write({key: None}, "delete")

    def cas(self, key: str, expect_mod_revision: int, value: str | bytes, lease: int = 0,
            also_put: list[tuple[str, str | bytes, int]] = (),
            also_compare: list[tuple[str, int]] = (), also_delete: list[str] = ()) -> bool:
        """One txn, as the client builds it: compare MOD == rev for (key, expect_mod_revision) and
        each of `also_compare` (absent key: 0); on success put `value` on `key` and each
        (key, value, lease) of `also_put`, and delete each key of `also_delete`, all at one new
        revision; on failure nothing."""
        self._enter("/kv/txn")
        puts = [(key, value, lease), *also_put]
        written = [k for k, _, _ in puts] + list(also_delete)
        if len(set(written)) != len(written):     # etcd refuses it before comparing
            raise EtcdError("etcd /kv/txn: etcdserver: duplicate key given in txn request")
        for k, rev in [(key, expect_mod_revision), *also_compare]:
            kv = self._kv.get(k)
            if (kv.mod_revision if kv else 0) != int(rev):
                return False
        for _, _, l in puts:                               # leases are checked on the path taken
            self._check_lease("/kv/txn", l)
        self._write({**{k: (self._bytes(v), l) for k, v, l in puts}, **{k: None for k in also_delete}}, "txn")
        return True

    # ------------------------------------------------------------------ leases
    def grant(self, ttl: int, timeout: float | None = None) -> int:
        """A new lease of max(ttl, min_ttl) seconds from now; ids count up from `first_lease`."""
        self._enter("/lease/grant")
        lid, self._next_lease = self._next_lease, self._next_lease + 1
        self._leases[lid] = _Lease(ttl=max(int(ttl), self.min_ttl), deadline=0.0)
        self._arm(lid)
        return lid

    def keepalive(self, lease: int, timeout: float | None = None) -> int:
        """Restart the lease's TTL from now; returns its TTL, or 0 if it is gone (etcd answers a
        keepalive on an unknown lease with TTL 0, not an error)."""
        self._enter("/lease/keepalive")
        if lease not in self._leases:
            return 0
        self._arm(lease)
        return self._leases[lease].ttl

    def revoke(self, lease: int) -> None:
        """Drop the lease and its keys now; like the client, errors (down, unknown) are swallowed."""
        try:
            self._enter("/kv/lease/revoke")
        except EtcdError:
            return
        if lease in self._leases:
            self._drop_lease(lease, "revoke")

    def healthy(self) -> bool:
        return self.available and self._lessor_runs()

    # ------------------------------------------------------------------ the server process
    def crash(self) -> None:
        """Killed or stopped (SIGKILL or SIGTERM: etcd loses nothing it acknowledged either way). A
        paused server dies too: the calls waiting on it are refused (their connection reset)."""
        self.running = False
        if self.frozen:
            self.frozen = False
            ev, self.thawed = self.thawed, self.env.event()
            ev.succeed()

    def start(self) -> None:
        """Started again on its data dir: keys and leases as they were; every lease refreshed to
        `promote_extend_s` + TTL from now, as etcd's lessor does when its member becomes leader."""
        if self.running:
            return
        self.running = True
        for lid in sorted(self._leases):
            self._arm(lid, self.promote_extend_s)

    def freeze(self) -> None:
        """SIGSTOP: calls wait for `thaw` (or their timeout); no lease expires meanwhile."""
        self.frozen = True

    def thaw(self) -> None:
        """SIGCONT: leases past their deadline expire first, then the waiting calls are answered."""
        if not self.frozen:
            return
        self.frozen = False
        self._expire_due()
        ev, self.thawed = self.thawed, self.env.event()
        ev.succeed()

    def lease_deadline(self, lease: int) -> float | None:
        """When the lease dies in virtual time (None: gone), for tests and reports; not in the
        client's API."""
        self._expire_due()
        got = self._leases.get(lease)
        return got.deadline if got else None


__all__ = ["Change", "SimEtcd"]
