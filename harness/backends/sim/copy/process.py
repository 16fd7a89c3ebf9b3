"""A simulated copy as a process: its lifecycle (kill, stop, restart, pause, resume, a lost disk)
and the calls it serves.

Everything a copy runs goes through `_drive`: after each event it waited on, its code goes on
only while the copy runs, so a paused copy makes no progress (its keepalives stop, and etcd
expires its lease on time) and a call to it gets no answer until it is resumed or the caller's
deadline passes (DEADLINE_EXCEEDED). `session` moves at every kill and restart, so code begun
before never touches the new incarnation's state; a killed process runs no clean-up (a
checkpoint write leaves its temporary file).

The copy (copy.py) owns one ProcessControl and answers its callers' spawn, serve and signals
through it; the control sees the copy only as state.py's CopyState, so it does not import the
module that defines it.
"""
from __future__ import annotations

from typing import Any, Callable

import simpy

from pschaos.psnodes.elastic import routing
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core.deposed import Watch, verdict
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.client.record_watch import BACKOFF_CAP_S

from pschaos.harness.backends.sim.cpu import use
from pschaos.harness.backends.sim.disk import local_dir
from pschaos.harness.backends.sim.network import DEADLINE_EXCEEDED, UNAVAILABLE
from pschaos.harness.backends.sim.rpc import Gen, SimRpcError, etcd_call
from pschaos.harness.backends.sim.transport import CLIENT_ETCD_TIMEOUT_S, Killed
from pschaos.harness.backends.sim.copy.state import CopyState
from pschaos.harness.backends.sim.copy.values import ClientWatch

DEADLINE_SLACK_S = 0.02      # pschaos.psnodes.server.calls.deadline_of serves until 20 ms before the caller's deadline


class _Gone(Exception):
    """The copy was killed or restarted under this code: it stops here, with no clean-up."""


class ProcessControl:
    """One copy's processes, the calls it serves, and the signals a fault sends it."""

    def __init__(self, c: CopyState) -> None:
        self.c = c
        self.resumed = c.env.event()        # SIGCONT: what a paused copy's code and calls wait on

    def spawn(self, gen: Gen) -> simpy.Process:
        """Run one of the copy's processes: it pauses with the copy and ends at its kill (its
        value: what `gen` returned, or None once killed)."""
        c = self.c

        def guarded() -> Gen:
            try:
                return (yield from self._drive(gen, None))
            except (simpy.Interrupt, _Gone):
                return None
        p = c.env.process(guarded())
        c.procs = [q for q in c.procs if q.is_alive] + [p]
        return p

    def _drive(self, gen: Gen, deadline: float | None, call: bool = False,
               watch: ClientWatch | None = None) -> Gen:
        """Run `gen` as the copy's code: after every event, wait while paused; stop once the copy
        was killed or restarted. A call (`call`) also stops at the end of a stop's grace, and gives
        up paused at its `deadline`."""
        session = self.c.session
        send: Any = None
        throw: BaseException | None = None
        while True:
            try:
                ev = gen.throw(throw) if throw is not None else gen.send(send)
            except StopIteration as done:
                return done.value
            send, throw = None, None
            try:
                send = yield ev
            except simpy.Interrupt:
                gen.close()
                raise
            except Exception as e:  # noqa: BLE001 - a failed event goes into the code that waited on it
                throw = e
            try:
                yield from self._hold(session, deadline, call, watch)
            except BaseException:
                gen.close()
                raise

    def _hold(self, session: int, deadline: float | None, call: bool,
              watch: ClientWatch | None = None) -> Gen:
        c = self.c
        backoff, not_before = 0.0, 0.0        # the watch after failed reads (psnodes/client/record_watch.py)
        look: float | None = None             # when the client looks at the shard record next
        while True:
            if session != c.session or (call and not c.answering):
                if call:
                    raise SimRpcError(UNAVAILABLE, f"{c.name} went down during the call")
                raise _Gone()
            if not c.paused:
                return
            if deadline is None:
                yield self.resumed
                continue
            give_up = deadline + DEADLINE_SLACK_S
            # a PS client's call (`watch`, pschaos.psnodes.client.shard_calls.ShardCalls._call_primary) is given up once
            # the shard record names another primary or a later epoch. Its calling thread first
            # looks at the record the detector's floor after the call began, then `period` after
            # each look returned (`fut.result(timeout=period)`): a look that reads (over the
            # caller's link to etcd) moves every later one by the read's own time. A read that
            # fails is no news; until the real watch's backoff has passed, a look reads nothing.
            # Looks made before the copy froze found nothing: their grid is taken as `period`
            # apart (the reads they made are not modelled).
            end = give_up
            if call and watch is not None and not watch.gone:
                if look is None:
                    look = watch.start + c.cfg.suspect_floor_s
                    if c.now() > look:
                        look += -(-(c.now() - look) // watch.period) * watch.period
                end = min(look, give_up)
            yield self.resumed | c.env.timeout(max(0.0, end - c.now()))
            if not c.paused or session != c.session or c.now() < end:
                continue
            if c.now() >= give_up:
                raise SimRpcError(DEADLINE_EXCEEDED, f"{c.name} is paused (SIGSTOP): no answer in time")
            if c.now() < not_before - 1e-6:  # within the backoff: the look returns the failed read
                look = c.now() + watch.period
                continue
            began = c.now()
            try:
                v = yield from self._watch_verdict(watch)
            except Killed:                     # the caller died (its CPU left the host): nobody watches
                watch.gone = True              # any more, and its call stays here until served or due
                continue
            except PSError:                    # etcd away or the caller's link to it cut: no news
                backoff = min(BACKOFF_CAP_S, max(watch.period, backoff) * 2)
                not_before = began + backoff
                look = c.now() + watch.period
                continue
            backoff, not_before = 0.0, 0.0
            look = c.now() + watch.period
            if not c.paused or session != c.session:
                continue                       # resumed during the read: the reply comes, and stands
            if v is Watch.DEPOSED:
                raise SimRpcError(UNAVAILABLE, f"{c.name} is paused (SIGSTOP): the shard record names "
                                               "its successor, the client cancelled")
            if v is Watch.RETIRED:
                raise SimRpcError(UNAVAILABLE, f"{c.name} is paused (SIGSTOP): shard {c.shard} was "
                                               "retired, the client cancelled and re-routes")

    def _watch_verdict(self, watch: ClientWatch) -> Gen:
        """The client's look at the shard record (pschaos.psnodes.client.shard_calls.ShardCalls._watch_read): a read over
        the caller's link to etcd with the client's timeout (a frozen or down etcd, a cut link:
        EtcdError), and for a missing record a read of the routing record; judged by
        pschaos.psnodes.core.deposed.verdict against the call's epoch."""
        c = self.c

        def read(fn: Callable[[], Any]) -> Gen:
            return (yield from etcd_call(c.net, c.env, watch.src, fn, timeout=CLIENT_ETCD_TIMEOUT_S,
                                         server=c.etcd))
        kv = yield from read(lambda: c.etcd.get(c.cfg.shard_key(c.shard)))
        if kv is not None:
            rec = ShardRecord.from_json(kv.value)
            return verdict(c.name, watch.epoch, rec.primary, rec.epoch)
        try:
            r, _ = yield from read(lambda: routing.read(c.etcd, c.cfg))
        except PSError:
            return Watch.WAIT
        return verdict(c.name, watch.epoch, None, None, c.shard in r.shards)

    def serve(self, handler: Callable[[], Gen], deadline: float, watch: ClientWatch | None = None,
              work: float = 0.0, work_after: bool = False) -> Gen:
        """`reply = yield from copy.serve(...)`: one call into the copy, the gRPC server's side. A
        paused copy answers once resumed, unless the caller's deadline passes first or (a PS
        client's call, `watch`) the shard record names its successor; a stopping one refuses
        new calls. The handler first spends `work` CPU seconds on the host's cores; with
        `work_after` it runs at once and its reply waits for them instead.

        The call runs in the caller's SimPy process, so the caller's death (an interrupt) ends
        it. Where the callee's effect must not hang on the caller's life, `work_after`: a
        Replicate's entries are the replica's once they arrived, as a real replica's handler
        applies them whether or not its primary dies meanwhile (before, an async primary killed
        while the replica spent the call's CPU took back an update it had acked: review of the
        CPU model, H1)."""
        c = self.c
        yield from self._hold(c.session, deadline, True, watch)
        if not c.alive or not c.accepting:
            raise SimRpcError(UNAVAILABLE, f"{c.name} is not serving: connection refused")

        def handle() -> Gen:
            if not work_after:
                yield from use(c.cpu, work, c.name)
            reply = yield from handler()
            if work_after:
                yield from use(c.cpu, work, c.name)
            return reply
        return (yield from self._drive(handle(), deadline, call=True, watch=watch))

    def kill(self) -> None:
        """SIGKILL: every process stops where it is and the copy answers nothing from now on; calls
        in flight and new ones get UNAVAILABLE once the kernel has torn the process down and closed
        its sockets (`teardown_s` from now: rpc.refused). A SIGTERM path closes them itself."""
        if self.c.alive:
            self.c.closed_at = self.c.env.now + self.c.teardown_s
            self.exit()

    def exit(self) -> None:
        """The process is gone, by a kill or at the end of its SIGTERM path."""
        c = self.c
        c.alive = c.accepting = c.answering = False
        c.session += 1
        if c.cpu is not None:            # its calls' CPU runs in their callers' processes: take it off
            c.cpu.abort_owner(c.name, SimRpcError(UNAVAILABLE, f"{c.name} went down during the call"))
        active = c.env.active_process
        for p in c.procs:
            if p.is_alive and p is not active:
                p.interrupt("killed")
        c.procs = []
        self.resume()
        c.notify()

    def stop(self, timeout: float = 5.0) -> simpy.Event | None:
        """SIGTERM, then SIGKILL after `timeout` as the harness's Proc.stop does; a paused copy is
        resumed first. Returns an event that fires once it exited (None: it was not running)."""
        c = self.c
        if not c.alive or c.on_stop is None:
            return None
        self.resume()
        return c.on_stop(timeout)

    def restart(self) -> None:
        """Start a stopped or killed copy again: a new incarnation, from its local checkpoint."""
        c = self.c
        if c.alive:
            return
        c.session += 1
        c.incarnation += 1
        c.closed_at = min(c.closed_at, c.env.now)     # the old process is gone: the harness waited for it
        c.fresh()
        c.alive = True
        c.on_start()

    def pause(self) -> None:
        """SIGSTOP: the copy's processes and the calls it serves make no progress until `resume`."""
        if self.c.alive:
            self.c.paused = True

    def resume(self) -> None:
        """SIGCONT."""
        self.c.paused = False
        ev, self.resumed = self.resumed, self.c.env.event()
        ev.succeed()

    def wipe_data(self) -> None:
        """Its local checkpoint folder is gone (a lost disk); the shared checkpoints stay."""
        self.c.disk.wipe(local_dir(self.c.name))

    def checkpoint_writes(self) -> list[str]:
        """The checkpoint files the copy and its shard have begun and not finished (or left)."""
        return self.c.disk.checkpoint_writes(self.c.name)


__all__ = ["DEADLINE_SLACK_S", "ProcessControl"]
