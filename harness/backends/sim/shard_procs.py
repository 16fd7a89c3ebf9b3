"""A simulated copy as a process: its lifecycle (kill, stop, restart, pause, resume, a lost disk)
and what psnodes/serve.py runs for a node, composed from replication (shard_replication.py) and
lease plus election (shard_election.py).

`ProcessControl` is mixed into SimCopy. Everything a copy runs goes through `_drive`: after each
event it waited on, its code goes on only while the copy runs, so a paused copy makes no progress
(its keepalives stop, and etcd expires its lease on time) and a call to it gets no answer until
it is resumed or the caller's deadline passes (DEADLINE_EXCEEDED). `session` moves at every kill
and restart, so code begun before never touches the new incarnation's state; a killed process
runs no clean-up (a checkpoint write leaves its temporary file).

`CopyProcs.start` is serve.py's main: load the local checkpoint, register (retried while etcd is
away), keepalive, bootstrap, the membership watch, "start", the elector, and the periodic checkpoint writer. `stop` is
its SIGTERM path: the writer finishes, the loops stop, the server refuses new calls and gives
those in flight 0.2 s (`server.stop(grace=0.2)` returns at once: the final checkpoint does not
wait for the grace), a final checkpoint, the lease revoked, "stop", and the process exits. A SIGTERM before "start"
(serve.py has not installed its handler yet) ends the process at once, as the default action does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import simpy

from pschaos.psnodes.elastic import routing
from pschaos.psnodes.client.shard_calls import BARRIER_CHECK_S, DEPOSED_CHECK_S
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core.deposed import Watch, verdict
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.client.record_watch import BACKOFF_CAP_S

from pschaos.harness.backends.sim.cpu import io_line, use
from pschaos.harness.backends.sim.disk import local_dir, shared_dir
from pschaos.harness.backends.sim.network import DEADLINE_EXCEEDED, UNAVAILABLE
from pschaos.harness.backends.sim.rpc import Gen, SimRpcError, etcd_call
from pschaos.harness.backends.sim.transport import CLIENT_ETCD_TIMEOUT_S, Killed
from pschaos.harness.backends.sim.shard_election import SimElector
from pschaos.harness.backends.sim.shard_members import member_watch
from pschaos.harness.backends.sim.shard_replication import SimReplication

if TYPE_CHECKING:
    from pschaos.harness.backends.sim.shard import SimCopy

DEADLINE_SLACK_S = 0.02      # pschaos.psnodes.server.calls.deadline_of serves until 20 ms before the caller's deadline
STOP_GRACE_S = 0.2           # serve.py: server.stop(grace=0.2)
REGISTER_RETRY_S = 0.2       # serve.py: waiting for etcd
IDLE_TICK_S = 0.2            # how often a copy's background CPU (copy_idle_cpu_s) is charged


@dataclass
class ClientWatch:
    """A PS client's call under the deposed-primary watch (pschaos.psnodes.client.shard_calls.ShardCalls._call_primary):
    the caller (its link to etcd carries the watch's reads), the epoch its route named, and how
    often it looks at the record (DEPOSED_CHECK_S; BARRIER_CHECK_S for a BSP/SSP barrier pull)."""

    src: str
    epoch: int
    period: float = DEPOSED_CHECK_S
    start: float = 0.0       # when the call began (its request's arrival): the first look is the floor after it
    gone: bool = False       # the caller died: its watch reads no more (workers.py kill, cpu.abort_owner)


def client_watch(caller: str, req: Any, start: float = 0.0) -> ClientWatch:
    """The watch of a PS client's Push or Pull `req` from `caller`, begun at `start`."""
    barrier = isinstance(req, ps_pb2.PullRequest) and req.min_clock >= 0
    return ClientWatch(caller, req.epoch, BARRIER_CHECK_S if barrier else DEPOSED_CHECK_S, start)


class _Gone(Exception):
    """The copy was killed or restarted under this code: it stops here, with no clean-up."""


class ProcessControl:
    """Mixed into SimCopy: its processes, the calls it serves, and the signals a fault sends it."""

    def spawn(self: "SimCopy", gen: Gen) -> simpy.Process:
        """Run one of this copy's processes: it pauses with the copy and ends at its kill (its
        value: what `gen` returned, or None once killed)."""
        def guarded() -> Gen:
            try:
                return (yield from self._drive(gen, None))
            except (simpy.Interrupt, _Gone):
                return None
        p = self.env.process(guarded())
        self.procs = [q for q in self.procs if q.is_alive] + [p]
        return p

    def _drive(self: "SimCopy", gen: Gen, deadline: float | None, call: bool = False,
               watch: ClientWatch | None = None) -> Gen:
        """Run `gen` as this copy's code: after every event, wait while paused; stop once the copy
        was killed or restarted. A call (`call`) also stops at the end of a stop's grace, and gives
        up paused at its `deadline`."""
        session = self.session
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

    def _hold(self: "SimCopy", session: int, deadline: float | None, call: bool,
              watch: ClientWatch | None = None) -> Gen:
        backoff, not_before = 0.0, 0.0        # the watch after failed reads (psnodes/client/record_watch.py)
        look: float | None = None             # when the client looks at the shard record next
        while True:
            if session != self.session or (call and not self.answering):
                if call:
                    raise SimRpcError(UNAVAILABLE, f"{self.name} went down during the call")
                raise _Gone()
            if not self.paused:
                return
            if deadline is None:
                yield self._resumed
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
                    look = watch.start + self.cfg.suspect_floor_s
                    if self.now() > look:
                        look += -(-(self.now() - look) // watch.period) * watch.period
                end = min(look, give_up)
            yield self._resumed | self.env.timeout(max(0.0, end - self.now()))
            if not self.paused or session != self.session or self.now() < end:
                continue
            if self.now() >= give_up:
                raise SimRpcError(DEADLINE_EXCEEDED, f"{self.name} is paused (SIGSTOP): no answer in time")
            if self.now() < not_before - 1e-6:  # within the backoff: the look returns the failed read
                look = self.now() + watch.period
                continue
            began = self.now()
            try:
                v = yield from self._watch_verdict(watch)
            except Killed:                     # the caller died (its CPU left the host): nobody watches
                watch.gone = True              # any more, and its call stays here until served or due
                continue
            except PSError:                    # etcd away or the caller's link to it cut: no news
                backoff = min(BACKOFF_CAP_S, max(watch.period, backoff) * 2)
                not_before = began + backoff
                look = self.now() + watch.period
                continue
            backoff, not_before = 0.0, 0.0
            look = self.now() + watch.period
            if not self.paused or session != self.session:
                continue                       # resumed during the read: the reply comes, and stands
            if v is Watch.DEPOSED:
                raise SimRpcError(UNAVAILABLE, f"{self.name} is paused (SIGSTOP): the shard record names "
                                               "its successor, the client cancelled")
            if v is Watch.RETIRED:
                raise SimRpcError(UNAVAILABLE, f"{self.name} is paused (SIGSTOP): shard {self.shard} was "
                                               "retired, the client cancelled and re-routes")

    def _watch_verdict(self: "SimCopy", watch: ClientWatch) -> Gen:
        """The client's look at the shard record (pschaos.psnodes.client.shard_calls.ShardCalls._watch_read): a read over
        the caller's link to etcd with the client's timeout (a frozen or down etcd, a cut link:
        EtcdError), and for a missing record a read of the routing record; judged by
        pschaos.psnodes.core.deposed.verdict against the call's epoch."""
        def read(fn: Callable[[], Any]) -> Gen:
            return (yield from etcd_call(self.net, self.env, watch.src, fn, timeout=CLIENT_ETCD_TIMEOUT_S,
                                         server=self.etcd))
        kv = yield from read(lambda: self.etcd.get(self.cfg.shard_key(self.shard)))
        if kv is not None:
            rec = ShardRecord.from_json(kv.value)
            return verdict(self.name, watch.epoch, rec.primary, rec.epoch)
        try:
            r, _ = yield from read(lambda: routing.read(self.etcd, self.cfg))
        except PSError:
            return Watch.WAIT
        return verdict(self.name, watch.epoch, None, None, self.shard in r.shards)

    def serve(self: "SimCopy", handler: Callable[[], Gen], deadline: float, watch: ClientWatch | None = None,
              work: float = 0.0, work_after: bool = False) -> Gen:
        """`reply = yield from copy.serve(...)`: one call into this copy, the gRPC server's side. A
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
        yield from self._hold(self.session, deadline, True, watch)
        if not self.alive or not self.accepting:
            raise SimRpcError(UNAVAILABLE, f"{self.name} is not serving: connection refused")

        def handle() -> Gen:
            if not work_after:
                yield from use(self.cpu, work, self.name)
            reply = yield from handler()
            if work_after:
                yield from use(self.cpu, work, self.name)
            return reply
        return (yield from self._drive(handle(), deadline, call=True, watch=watch))

    def kill(self: "SimCopy") -> None:
        """SIGKILL: every process stops where it is, calls in flight get UNAVAILABLE, and the copy
        answers nothing from now on."""
        if self.alive:
            self._exit()

    def _exit(self: "SimCopy") -> None:
        self.alive = self.accepting = self.answering = False
        self.session += 1
        if self.cpu is not None:            # its calls' CPU runs in their callers' processes: take it off
            self.cpu.abort_owner(self.name, SimRpcError(UNAVAILABLE, f"{self.name} went down during the call"))
        active = self.env.active_process
        for p in self.procs:
            if p.is_alive and p is not active:
                p.interrupt("killed")
        self.procs = []
        self.resume()
        self.notify()

    def stop(self: "SimCopy", timeout: float = 5.0) -> simpy.Event | None:
        """SIGTERM, then SIGKILL after `timeout` as the harness's Proc.stop does; a paused copy is
        resumed first. Returns an event that fires once it exited (None: it was not running)."""
        if not self.alive or self.on_stop is None:
            return None
        self.resume()
        return self.on_stop(timeout)

    def restart(self: "SimCopy") -> None:
        """Start a stopped or killed copy again: a new incarnation, from its local checkpoint."""
        if self.alive:
            return
        self.session += 1
        self.incarnation += 1
        self._fresh()
        self.alive = True
        self.on_start()

    def pause(self: "SimCopy") -> None:
        """SIGSTOP: the copy's processes and the calls it serves make no progress until `resume`."""
        if self.alive:
            self.paused = True

    def resume(self: "SimCopy") -> None:
        """SIGCONT."""
        self.paused = False
        ev, self._resumed = self._resumed, self.env.event()
        ev.succeed()

    def wipe_data(self: "SimCopy") -> None:
        """Its local checkpoint folder is gone (a lost disk); the shared checkpoints stay."""
        self.disk.wipe(local_dir(self.name))

    def checkpoint_writes(self: "SimCopy") -> list[str]:
        """The checkpoint files this copy and its shard have begun and not finished (or left)."""
        return self.disk.checkpoint_writes(self.name)


class CopyProcs(SimReplication, SimElector):
    """serve.py for one copy, with its replication manager and elector; `peers` maps names to SimCopy."""

    def __init__(self, copy: "SimCopy", peers: dict[str, "SimCopy"]) -> None:
        self.c, self.peers = copy, peers
        self.main_proc: simpy.Process | None = None
        self.exited: simpy.Event | None = None
        copy.on_promote = self.start_senders
        copy.on_start = self.start
        copy.on_stop = self.stop

    def start(self) -> None:
        c = self.c
        self.announced, self.orphan_since, self.posted, self.deferred = ("", False), None, None, set()
        self.next_report, self.held_until = 0.0, 0.0
        self.exited = None
        if c.start_delay_s > 0:
            c.accepting = False              # no gRPC server yet: calls are refused, as by a starting process
        else:
            c.load_local()
        self.main_proc = c.spawn(self.main())

    def main(self) -> Gen:
        c = self.c
        if c.idle_cpu_s > 0 and c.cpu is not None:
            c.spawn(self.background())
        if c.start_delay_s > 0:              # serve.py up to server.start(): the process, ShardNode, load_local
            yield c.env.timeout(c.start_delay_s)
            c.load_local()
            c.accepting = True
        while True:
            try:
                yield from self.register()
                break
            except PSError:
                yield from c.clock.sleep(REGISTER_RETRY_S)
        c.spawn(self.keepalive())
        try:
            yield from self.bootstrap()
        except PSError:          # serve.py does not catch it: the process exits with the traceback
            c.kill()
            return
        if c.cfg.barrier:           # serve.py: only when some worker trains BSP/SSP
            c.spawn(member_watch(c))
        c.started = True
        c.emit("start", {"shard": c.shard, "seq": c.store.seq, "role": c.role, "epoch": c.epoch})
        c.spawn(self.elector())
        yield from self.checkpointer()

    def background(self) -> Gen:
        """The CPU a real copy's process spends a second from its start to its end whatever it
        serves (calibration copy_idle_cpu_s), outside its GIL (cpu.py io_line: gRPC's polling
        threads; its heartbeats and keepalives are modelled), charged every IDLE_TICK_S for the
        time since the last charge: so a cluster of more copies leaves its workers less of the
        host, as twelve real copies after a scale-out do, and a killed one frees its share. A pause
        stops it with the copy; the tick it resumes in is charged at most two ticks' worth."""
        c = self.c
        last = c.env.now
        while True:
            yield c.env.timeout(IDLE_TICK_S)
            now = c.env.now
            work, last = c.idle_cpu_s * min(now - last, 2 * IDLE_TICK_S), now
            yield from use(c.cpu, work, io_line(c.name))

    def checkpointer(self) -> Gen:
        """serve.py's loop: every checkpoint_interval_s, the local checkpoint when the state moved,
        the shared one too while primary (node.checkpoint decides whether it may publish)."""
        c = self.c
        shared = shared_dir(c.shard)
        last_seq, last_shared = c.store.seq, False
        while True:
            yield c.done | c.env.timeout(c.cfg.checkpoint_interval_s)
            if c.stopping:
                return
            if c.store.seq != last_seq or (c.role == "primary" and not last_shared):
                try:
                    man = yield from c.checkpoint()
                    last_seq, last_shared = man["seq"], man["path"] == shared
                except OSError as e:
                    c.emit("checkpoint-error", {"error": str(e)})

    def stop(self, timeout: float) -> simpy.Event:
        c = self.c
        if self.exited is not None:
            return self.exited
        if not c.started:                   # no SIGTERM handler yet: the default action ends it
            c.kill()
            ev = c.env.event()
            return ev.succeed()
        session = c.session
        down = c.spawn(self.shutdown())

        def watchdog() -> Gen:
            yield down | c.env.timeout(timeout)
            if c.alive and c.session == session:
                c.kill()
        self.exited = c.env.process(watchdog())
        return self.exited

    def shutdown(self) -> Gen:
        c = self.c
        c.stopping = True
        c.done.succeed()
        if self.main_proc is not None and self.main_proc.is_alive:
            yield self.main_proc            # the periodic writer finishes the checkpoint it began
        me = c.env.active_process
        for p in c.procs:                   # node.stopping: elector, keepalive, senders end
            if p.is_alive and p is not me:
                p.interrupt("stopping")
        c.procs = [me]
        c.accepting = False                 # server.stop(grace=0.2), which returns at once
        c.spawn(self.grace())
        try:
            yield from c.checkpoint(shared=c.role == "primary")
        except OSError:                     # serve.py does not catch it: exit without "stop"
            c.kill()
            return
        try:
            yield from c.ecall(lambda: c.etcd.revoke(c.lease))
        except PSError:
            pass
        c.emit("stop", {"shard": c.shard, "seq": c.store.seq})
        c._exit()

    def grace(self) -> Gen:
        """The calls in flight at the SIGTERM are answered for STOP_GRACE_S at most (or until the
        process exits, which comes first when the checkpoint is quick)."""
        c = self.c
        yield from c.clock.sleep(STOP_GRACE_S)
        c.answering = False
        c.notify()


__all__ = ["ClientWatch", "CopyProcs", "ProcessControl", "client_watch"]
