"""What psnodes/serve.py runs for a node, for one simulated copy: composed from replication
(replication.py), lease plus election (election.py) and the membership watch (members.py).

`CopyProcs.start` is serve.py's main: load the local checkpoint, register (retried while etcd is
away), keepalive, bootstrap, the membership watch, "start", the elector, and the periodic checkpoint writer. `stop` is
its SIGTERM path: the writer finishes, the loops stop, the server refuses new calls and gives
those in flight 0.2 s (`server.stop(grace=0.2)` returns at once: the final checkpoint does not
wait for the grace), a final checkpoint, the lease revoked, "stop", and the process exits. A SIGTERM before "start"
(serve.py has not installed its handler yet) ends the process at once, as the default action does.

As serve.py holds its ShardNode, this holds the copy (as state.py's CopyState) and hooks itself
into it (`on_start`, `on_stop`, `on_promote`), so the copy never imports its driver.
"""
from __future__ import annotations

from typing import Mapping

import simpy

from pschaos.psnodes.errors import PSError

from pschaos.harness.backends.sim.cpu import io_line, use
from pschaos.harness.backends.sim.disk import shared_dir
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.harness.backends.sim.copy.election import SimElector
from pschaos.harness.backends.sim.copy.members import member_watch
from pschaos.harness.backends.sim.copy.replication import SimReplication
from pschaos.harness.backends.sim.copy.state import CopyState, Peer

STOP_GRACE_S = 0.2           # serve.py: server.stop(grace=0.2)
REGISTER_RETRY_S = 0.2       # serve.py: waiting for etcd
IDLE_TICK_S = 0.2            # how often a copy's background CPU (copy_idle_cpu_s) is charged


class CopyProcs:
    """serve.py for one copy, with its replication manager (`replication`) and elector
    (`election`); `peers` maps names to every copy of the shard."""

    def __init__(self, copy: CopyState, peers: Mapping[str, Peer]) -> None:
        self.c = copy
        self.replication = SimReplication(copy, peers)
        self.election = SimElector(copy, peers)
        self.main_proc: simpy.Process | None = None
        self.exited: simpy.Event | None = None
        self.start_cpu_s = 0.0        # of the start's time, the process's own CPU (calibration node_start_cpu_s)
        copy.on_promote = self.replication.start_senders
        copy.on_start = self.start
        copy.on_stop = self.stop

    def start(self) -> None:
        c = self.c
        self.election.fresh()
        self.replication.deferred = set()
        self.exited = None
        if c.start_delay_s > 0:
            c.accepting = False              # no gRPC server yet: calls are refused, as by a starting process
        else:
            c.load_local()
        self.main_proc = c.spawn(self.main())

    def main(self) -> Gen:
        c, election = self.c, self.election
        if c.idle_cpu_s > 0 and c.cpu is not None:
            c.spawn(self.background())
        if c.start_delay_s > 0:              # serve.py up to server.start(): the process, ShardNode, load_local
            cpu_s = min(self.start_cpu_s, c.start_delay_s) if c.cpu is not None else 0.0
            if cpu_s > 0:                    # its own CPU, on the host's shared cores: a busy host stretches it
                yield from use(c.cpu, cpu_s, c.name)
            yield c.env.timeout(c.start_delay_s - cpu_s)
            c.load_local()
            c.accepting = True
        while True:
            try:
                yield from election.register()
                break
            except PSError:
                yield from c.clock.sleep(REGISTER_RETRY_S)
        c.spawn(election.keepalive())
        try:
            yield from election.bootstrap()
        except PSError:          # serve.py does not catch it: the process exits with the traceback
            c.kill()
            return
        if c.cfg.barrier:           # serve.py: only when some worker trains BSP/SSP
            c.spawn(member_watch(c))
        c.started = True
        c.emit("start", {"shard": c.shard, "seq": c.store.seq, "role": c.role, "epoch": c.epoch})
        c.spawn(election.elector())
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
        c.exit()

    def grace(self) -> Gen:
        """The calls in flight at the SIGTERM are answered for STOP_GRACE_S at most (or until the
        process exits, which comes first when the checkpoint is quick)."""
        c = self.c
        yield from c.clock.sleep(STOP_GRACE_S)
        c.answering = False
        c.notify()


__all__ = ["CopyProcs"]
