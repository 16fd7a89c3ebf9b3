"""The host's CPU in the twin: its cores shared by whatever runs on them, in virtual time.

Why: a real cluster of this harness runs every process (shard copies, workers, etcd) on one
machine of a few cores. A call's CPU (the client's encoding, the server's handler, a replica's
apply) takes longer when more runs at once, so calls slow down with the shard count and under a
neighbour's load; charging those costs as plain waits made every call in the twin almost free
and a step's cost independent of the cluster's size.

The model is processor sharing: `cores` cores, `k` runnable jobs and `background` jobs of other
tenants (the host's load, a float) - each job progresses at min(1, cores / (k + background))
CPU-seconds per second, divided by `slowdown` when the host's cores run slower than when the
calibration was measured (harness/machinery/hostspeed.py; 1 unless asked). Only what is charged here
slows: a step's compute, the calls' and the copies' CPU, etcd's; the waits the calibration
measured as time (a link's latency, a disk write, a node's start, etcd's service time and, once
the workers' CPU is measured, a worker's step overhead and eval pass; an older calibration
charges those two as CPU, so they slow too) keep their length. The scale level's pushes
(pushclient.py) run at the calibration's speed.
A job charges CPU seconds and completes when it got them. All jobs run
at the same rate, so one service clock (the CPU seconds each job received since the start)
orders every completion: a job ends when the clock reaches its start reading plus its work. The
next completion is recomputed whenever a job starts, ends or is cancelled; equal completions end
in the order their jobs started (a counter, never dict or set order, never the wall clock).

A job may name its `owner`, the process whose CPU it is. A Python process runs one thread at a
time under its GIL, so an owner's jobs run one after another, first come first served: only the
head of each owner's line is runnable, the rest wait without a share (a shard node's concurrent
handlers, a worker's pull threads). Jobs without an owner (etcd, a Go server) run side by side.
A process's CPU outside its GIL (`io_line`: gRPC's C threads) is a second line of its own.

Coarsenings: the GIL is modelled as a line, not as its 5 ms switch interval (a thread back from
I/O waits for the running one's CPU job to end, not for the interval); a job of a paused
(SIGSTOP) process keeps its share; a killed copy's or worker's jobs leave at once (`abort_owner`).
"""
from __future__ import annotations

import heapq
import math
import itertools
from collections import deque
from typing import Any, Generator

import simpy

from pschaos.harness.errors import HarnessError

EPS = 1e-12          # service-clock slack: a job this close to its end is done (float rounding)


class Job:
    """One CPU charge: `done` fires when it got its `work`; `end` is its service-clock reading at
    completion once it runs (`started`)."""

    __slots__ = ("done", "work", "owner", "end", "started", "cancelled")

    def __init__(self, done: simpy.Event, work: float, owner: str | None) -> None:
        self.done, self.work, self.owner = done, work, owner
        self.end, self.started, self.cancelled = 0.0, False, False


class SimCPU:
    """Processor sharing of `cores` cores among the twin's jobs and `background` other jobs."""

    def __init__(self, env: simpy.Environment, cores: float, background: float = 0.0,
                 slowdown: float = 1.0) -> None:
        if not cores > 0:
            raise HarnessError(f"cpu: cores={cores!r}; give the host's CPU count (> 0), as calibration.json "
                               "`cores` records it")
        if not (math.isfinite(background) and background >= 0):
            raise HarnessError(f"cpu: background={background!r}; give the host's other load in runnable jobs "
                               "(>= 0, e.g. its load average), or 0 for an idle host")
        if not (math.isfinite(slowdown) and slowdown > 0):
            raise HarnessError(f"cpu: slowdown={slowdown!r}; give how many times slower the host runs than when "
                               "the calibration was measured (> 0; 1: as calibrated)")
        self.env, self.cores, self.background = env, float(cores), float(background)
        self.speed = 1.0 / float(slowdown)     # calibrated CPU seconds a core serves per second
        self._heap: list[tuple[float, int, Job]] = []
        self._seq = itertools.count()
        self._n = 0                 # jobs running (cancelled and finished ones left out)
        self._served = 0.0          # CPU seconds each running job received since the start
        self._at = 0.0              # when _served was brought up to date
        self._due = -1.0            # when the timer in force fires
        self._timer = 0             # the timer in force: older ones are stale
        self._lines: dict[str, deque[Job]] = {}     # an owner's jobs, the running one first (looked up, never iterated)
        self.busy_s = 0.0           # CPU seconds handed out in all (for reports and tests)
        # when a list, every charge as (now, owner or "", CPU seconds): booked when submitted,
        # refunded (negative) when cancelled; `pschaos sim calibrate` reads a copy's CPU over a
        # training window from it, against a real process's (harness/proof/twin/run_cpu.py: charged_between)
        self.log: list[tuple[float, str, float]] | None = None

    def rate(self) -> float:
        """Calibrated CPU seconds per second each running job gets now: its share of a core, times the
        host's speed against the calibration's (`slowdown`, harness/machinery/hostspeed.py)."""
        if self._n == 0:
            return self.speed
        return self.speed * min(1.0, self.cores / (self._n + self.background))

    def running(self) -> int:
        return self._n

    def submit(self, work: float, owner: str | None = None) -> Job:
        """A job of `work` CPU seconds of `owner` (None: no GIL to wait for); it starts now, or
        once the owner's earlier jobs are done. Its `done` event fires when it is served."""
        done = self.env.event()
        job = Job(done, work, owner)
        if work <= 0:
            done.succeed()
            return job
        self._charge(owner, work)
        if owner is not None:
            line = self._lines.get(owner)
            if line:
                line.append(job)            # the owner's GIL is taken: wait in line
                return job
            self._lines[owner] = deque([job])
        self._advance()
        self._start(job)
        self._arm()
        return job

    def cancel(self, job: Job) -> None:
        """The job's process died: it stops taking a share now (its event never fires)."""
        if job.done.triggered or job.cancelled:
            return
        job.cancelled = True
        if not job.started:
            self._lines[job.owner].remove(job)
            self._charge(job.owner, -job.work)
            return
        self._advance()
        self._n -= 1
        self._charge(job.owner, -min(job.work, max(0.0, job.end - self._served)))
        self._next_of(job.owner)
        self._arm()

    def abort_owner(self, owner: str, exc: BaseException) -> None:
        """The owner's process died (SIGKILL): every job in its lines (its GIL's and its
        threads' outside it, `io_line`) leaves the CPU now, and whoever waits on one gets `exc`
        thrown at its wait. A call into a copy runs in its caller's SimPy process, so without
        this a killed copy's job kept its share to the end and its restarted process waited
        behind it (review of the CPU model, M1)."""
        for o in (owner, io_line(owner)):
            self._abort_line(o, exc)

    def _abort_line(self, owner: str, exc: BaseException) -> None:
        line = self._lines.pop(owner, None)
        if not line:
            return
        self._advance()
        for job in line:
            if job.done.triggered or job.cancelled:
                continue
            job.cancelled = True
            if job.started:
                self._n -= 1
                self._charge(owner, -min(job.work, max(0.0, job.end - self._served)))
            else:
                self._charge(owner, -job.work)
            job.done.defused = True          # nobody waiting on it any more is no crash of the run
            job.done.fail(exc)
        self._arm()

    def use(self, work: float, owner: str | None = None) -> Generator[simpy.Event, Any, None]:
        """`yield from cpu.use(s, owner)` in a SimPy process: spend `s` CPU seconds; a process
        closed or interrupted meanwhile (a kill) takes its job off the CPU."""
        if work <= 0:
            return
        job = self.submit(work, owner)
        try:
            yield job.done
        finally:
            if not job.done.triggered:
                self.cancel(job)

    def _charge(self, owner: str | None, work: float) -> None:
        self.busy_s += work
        if self.log is not None:
            self.log.append((self.env.now, owner or "", work))

    # ------------------------------------------------------------ the service clock
    def _advance(self) -> None:
        now = self.env.now
        if self._n:
            self._served += self.rate() * (now - self._at)
        self._at = now

    def _start(self, job: Job) -> None:
        job.started = True
        job.end = self._served + job.work
        heapq.heappush(self._heap, (job.end, next(self._seq), job))
        self._n += 1

    def _next_of(self, owner: str | None) -> None:
        """The owner's running job left: the next in its line starts."""
        if owner is None:
            return
        line = self._lines[owner]
        line.popleft()
        if line:
            self._start(line[0])
        else:
            del self._lines[owner]

    def _arm(self) -> None:
        """End every job that got its work, then set the timer for the next completion."""
        heap = self._heap
        now, rate = self.env.now, self.rate()
        while heap:
            end, _, job = heap[0]
            if job.cancelled:
                heapq.heappop(heap)
                continue
            rest = end - self._served
            # done once within the slack, or once its rest is too small to move the clock: late in
            # a long run (now > ~8,192 s) half a float step of `now` exceeds EPS, and a timer for
            # such a rest fired at the same instant, served nothing and was armed again (L1)
            if rest > EPS * max(1.0, self._served) and now + rest / rate > now:
                break
            heapq.heappop(heap)
            self._n -= 1
            job.done.succeed()
            self._next_of(job.owner)
        if not heap:
            self._due = -1.0
            return
        due = now + (heap[0][0] - self._served) / self.rate()
        if abs(due - self._due) <= EPS * max(1.0, due):
            return                  # the timer in force already fires then
        self._due = due
        self._timer += 1
        timer = self._timer
        self.env.timeout(due - self.env.now).callbacks.append(lambda _e: self._fire(timer))

    def _fire(self, timer: int) -> None:
        if timer != self._timer:
            return
        self._due = -1.0
        self._advance()
        self._arm()


IO = "~io"     # the suffix of a process's second line: its threads that run outside the GIL


def io_line(owner: str) -> str:
    """A second line of `owner`'s CPU, beside its GIL's: what calibrate measured a real process
    spend beyond the idle bursts' per-call figures (a worker's per RPC, a copy's idle CPU). It
    takes turns with itself, not with the process's Python code, so a call that spends on both
    lines (rpc.call) waits for the longer of its two shares while the process's other threads
    keep their GIL. Part of that CPU is gRPC's threads, which run outside the GIL, part is Python
    under it: the line is a coarsening. Charged on the GIL line with the rest, the twin's steps
    came out slower than real ones with no overhead at all (widedeep 31.3 ms against 29.7)."""
    return owner + IO


def process_of(owner: str) -> str:
    """The process a line belongs to (`io_line` folded into its owner)."""
    return owner[:-len(IO)] if owner.endswith(IO) else owner


def use(cpu: SimCPU | None, work: float, owner: str | None = None) -> Generator[simpy.Event, Any, None]:
    """`yield from use(cpu, s, owner)`: spend `s` CPU seconds on `cpu`; nothing without a CPU model."""
    if cpu is not None and work > 0:
        yield from cpu.use(work, owner)


__all__ = ["IO", "Job", "SimCPU", "io_line", "process_of", "use"]
