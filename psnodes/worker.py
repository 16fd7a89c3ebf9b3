"""A training worker: `python -m pschaos.psnodes.worker --config C --name worker-0 --model mlp --steps N`.

Each step: pull the dense parameters changed since the last pull (waiting for the slowest worker
under BSP/SSP), pull the embedding rows of the batch, compute the loss and gradients with
PyTorch, and push them to the shards. Every step's loss and every push go to the event log.
Pulls also bring the shards' audit tensors (`__audit__/<s>`); they are not model parameters.
Modes: `async` (no waits), `bsp` (lock-step), `ssp` (at most `staleness` steps ahead).

Under BSP/SSP a worker is a member of the barrier (psnodes/membership/members.py): it registers in etcd under
a lease, waits until the membership record names it, and starts at the step the record gives it
(0 for the config's workers, the shards' front for one that joins later or comes back after a
crash); at the end, or on SIGTERM, it leaves at once. It steps only while its lease surely lives:
once no keepalive was confirmed for member_ttl_s less member_margin_s (cut off from etcd, or
paused) it stops (`member-fenced`), drops the step in hand unpushed, and waits until a keepalive
renews the lease or the lease is found (or surely) gone; then it joins again and goes on from
its new start. A worker the record does not name within member_join_timeout_s writes a
`train-error` (`fatal`) and exits 1.

With `--eval-every K` the worker is also a read-only client, as evaluation and serving are in a
real deployment: after every K-th step it computes the loss on a held-out batch (whose embedding
ids include cold-start ids no training batch draws), pulling rows and pushing nothing, and logs
an `eval` event. Reads that are never followed by a write are what shows a read path that writes.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import numpy as np
import torch

from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.config import ClusterConfig, load_links
from pschaos.psnodes.core import gating, membership
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.membership.members import Fenced, NotAdmitted, WorkerMembership
from pschaos.psnodes.server.tuning import tune_malloc
from pschaos.psnodes.models import make_task, pick_device
from pschaos.psnodes.placement import is_audit
from pschaos.psnodes.runtime import REAL, Runtime

MODES = ("async", "bsp", "ssp")
EVAL_STREAM = 1     # the held-out batches' generator: [seed, worker index, EVAL_STREAM]


class Worker:
    def __init__(self, cfg: ClusterConfig, name: str, model: str, mode: str = "async", staleness: int = 2,
                 device: str = "auto", links: dict[str, str] | None = None, events: EventLog | None = None,
                 seed: int | None = None, step_delay: float = 0.0, *, runtime: Runtime = REAL,
                 client: PSClient | None = None, eval_every: int = 0) -> None:
        """`runtime` and `client` are the machine (pschaos.psnodes.runtime): the simulator passes its own.
        `eval_every`: steps between read-only evaluation passes (0: none)."""
        if mode not in MODES:
            raise ValueError(f"mode={mode!r} is unknown; use one of {', '.join(MODES)}")
        if isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 0:
            raise ValueError(f"eval_every={eval_every!r}: give the number of training steps between "
                             "evaluation passes (e.g. 25), or 0 for none")
        self.cfg, self.name, self.mode, self.staleness = cfg, name, mode, staleness
        self.events = events or EventLog(None, name)
        self.device = pick_device(device)
        self.task = make_task(model, cfg.seed if seed is None else seed, self.device)
        self.rt = runtime
        self.client = client or PSClient(cfg, name, links, self.events)
        self.client.current_values = self.values    # re-offered as INIT if a shard lost them
        index = int(name.rsplit("-", 1)[-1]) if name.rsplit("-", 1)[-1].isdigit() else 0
        self.rng = np.random.default_rng([cfg.seed, index])
        # held-out batches come from their own generator of the same seed: turning evaluation on
        # leaves every training batch as it was, and a restarted worker replays the same ones
        self.eval_rng = np.random.default_rng([cfg.seed, index, EVAL_STREAM])
        self.eval_every = eval_every
        self.eval_losses: list[float] = []
        self.params = dict(self.task.model.named_parameters())
        self.step_delay = step_delay
        self.stop = False
        self.losses: list[float] = []
        #: the barrier membership of a BSP/SSP worker (None in async training: nothing waits on it)
        if mode != "async" and not cfg.barrier:
            raise ValueError(f"mode={mode!r} needs a barrier, but the cluster config has barrier: false "
                             "(nodes keep no worker membership); start the cluster with barrier: true")
        self.members = (WorkerMembership(cfg, name, self.client.etcd, runtime, self.events, self.client.incarnation,
                                         should_stop=lambda: self.stop) if mode != "async" else None)
        self.failed: str | None = None     # why the run ended without training (not admitted)

    def min_clock(self, step: int) -> int:
        """The clock this step's pull waits for (pschaos.psnodes.core.gating)."""
        return gating.wanted_clock(self.mode, step, self.staleness)

    def values(self) -> dict[str, np.ndarray]:
        """The model's current dense values (what this worker last pulled, or its initial ones)."""
        return {n: p.detach().cpu().numpy() for n, p in self.params.items()}

    def start(self) -> int | None:
        """Wait for the shards, offer initial values, join the barrier; the first step to run
        (None: stopped before it was admitted)."""
        self.client.wait_ready()
        self.client.init_dense(self.values())
        return self.members.join() if self.members is not None else 0

    def step(self, step: int) -> float:
        got = self.client.pull_dense(self.min_clock(step))
        with torch.no_grad():
            for n, a in got.dense.items():
                if is_audit(n):
                    continue
                self.params[n].copy_(torch.from_numpy(a.copy()).to(self.device))
        b = self.task.batch(self.rng)
        rows: dict[str, torch.Tensor] = {}
        uniq = inv = None
        if self.task.tables:
            uniq, inv = np.unique(b.ids, return_inverse=True)
            for table, dim in self.task.tables.items():
                r = self.client.pull_rows(table, uniq, dim)
                rows[table] = torch.from_numpy(r).to(self.device).requires_grad_(True)
        gathered = {t: r[torch.from_numpy(inv.reshape(b.ids.shape)).to(self.device)] for t, r in rows.items()}
        self.task.model.zero_grad(set_to_none=True)
        loss = self.task.loss(b, gathered)
        loss.backward()
        self.rt.compute("step")
        dense = {n: p.grad.detach().cpu().numpy() for n, p in self.params.items() if p.grad is not None}
        sparse = {t: (uniq, r.grad.detach().cpu().numpy()) for t, r in rows.items()}
        if self.members is not None and not self.members.valid():
            # the lease may have run out while the step was computed (or its pull waited): the
            # barrier may have dropped us, so the step is not pushed; it is run again once admitted
            raise Fenced(f"{self.name}: lease may have expired before step {step}'s push; the step is redone")
        self.client.push(dense, sparse, clock=step)
        value = float(loss.detach().cpu())
        self.losses.append(value)
        self.events.emit("train-step", {"worker": self.name, "step": step, "loss": value,
                                        "pulled_bytes": got.bytes, "watch_reads": self.client.watch_reads})
        return value

    def evaluate(self, step: int) -> float:
        """The loss on a held-out batch with the dense values this worker last pulled and the rows
        the shards hold now: a read-only pass (no push, no gradient). Rows of ids never pushed read
        as their initializer's and must stay uncreated on every copy (psnodes/store/embedding.py)."""
        t0 = self.rt.monotonic()
        b = self.task.eval_batch(self.eval_rng)
        rows: dict[str, torch.Tensor] = {}
        uniq, cold = np.empty(0, dtype=np.int64), 0
        if self.task.tables:
            uniq, inv = np.unique(b.ids, return_inverse=True)
            cold = int(self.task.is_cold(uniq).sum())
            at = torch.from_numpy(inv.reshape(b.ids.shape)).to(self.device)
            for table, dim in self.task.tables.items():
                rows[table] = torch.from_numpy(self.client.pull_rows(table, uniq, dim)).to(self.device)[at]
        with torch.no_grad():
            value = float(self.task.loss(b, rows).cpu())
        self.rt.compute("eval")
        self.eval_losses.append(value)
        self.events.emit("eval", {"worker": self.name, "step": step, "loss": value, "ids": int(uniq.size),
                                  "cold_ids": cold, "took_s": round(self.rt.monotonic() - t0, 6)})
        return value

    def eval_due(self, step: int) -> bool:
        return bool(self.eval_every) and (step + 1) % self.eval_every == 0 and not self.stop

    def run(self, steps: int, duration: float | None = None) -> float:
        try:
            return self._run(steps, duration)
        finally:
            if self.members is not None:
                self.members.leave()        # graceful: the barrier stops waiting for us at once

    def _admit(self, step: int) -> int | None:
        """Join (again) and the step to go on from; None when stopped first. NotAdmitted escapes."""
        start = self.members.join()
        return None if start is None else membership.resume_step(step, start)

    def _run(self, steps: int, duration: float | None) -> float:
        step = 0
        try:
            first = self.start()
        except NotAdmitted as e:
            return self._fatal(step, e)
        step = first if first is not None else 0
        end = self.rt.monotonic() + duration if duration else None
        while step < steps and not self.stop and (end is None or self.rt.monotonic() < end):
            if self.members is not None and not self.members.hold():
                if self.stop:
                    break
                try:
                    got = self._admit(step)
                except NotAdmitted as e:
                    return self._fatal(step, e)
                if got is None:
                    break
                step = got
            try:
                self.step(step)
            except Fenced as e:
                self.events.emit("train-error", {"worker": self.name, "step": step, "error": str(e)})
                continue                    # not pushed: the same step again, inside the barrier
            except PSError as e:
                self.events.emit("train-error", {"worker": self.name, "step": step, "error": str(e)})
            if self.eval_due(step):
                try:
                    self.evaluate(step)
                except PSError as e:
                    self.events.emit("eval", {"worker": self.name, "step": step, "loss": None, "error": str(e)})
            step += 1
            if self.step_delay:
                self.rt.sleep(self.step_delay)
        tail = self.losses[-50:]     # 50 steps: the estimate must not be a coin flip
        final = float(np.mean(tail)) if tail else float("nan")
        self.events.emit("train-done", {"worker": self.name, "steps": step, "final_loss": final,
                                        "target_loss": self.task.target_loss, "device": str(self.device),
                                        "pushed_bytes": self.client.pushed_bytes,
                                        "pulled_bytes": self.client.pulled_bytes,
                                        "watch_reads": self.client.watch_reads})
        self.client.close()
        return final

    def _fatal(self, step: int, e: NotAdmitted) -> float:
        """Never admitted (etcd unreachable, or no primary reconciled): a train-error saying so,
        no train-done (it did not train), and the process exits 1 (main)."""
        self.failed = str(e)
        self.events.emit("train-error", {"worker": self.name, "step": step, "error": str(e), "fatal": True})
        self.client.close()
        return float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pschaos.psnodes.worker", description=__doc__)
    ap.add_argument("--config", required=True)
    ap.add_argument("--name", required=True, help="worker-<j>")
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--mode", default="async", choices=MODES)
    ap.add_argument("--staleness", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--links")
    ap.add_argument("--events")
    ap.add_argument("--step-delay", type=float, default=0.0)
    ap.add_argument("--eval-every", type=int, default=0,
                    help="a read-only evaluation pass after every N-th step (0: none)")
    ap.add_argument("--nice", type=int, default=0,
                    help="lower this worker's CPU priority by N: training compute then yields the CPU to the "
                         "shard nodes' heartbeats and probes when both share a small machine")
    args = ap.parse_args(argv)
    if args.nice > 0:
        os.nice(args.nice)
    tune_malloc()
    torch.set_num_threads(1)
    try:
        cfg = ClusterConfig.load(args.config)
        w = Worker(cfg, args.name, args.model, args.mode, args.staleness, args.device,
                   load_links(args.links, cfg), EventLog(Path(args.events) if args.events else None, args.name),
                   step_delay=args.step_delay, eval_every=args.eval_every)
    except (PSError, ValueError) as e:
        print(f"pschaos.psnodes.worker: {e}", file=sys.stderr)
        return 2

    def on_term(signum, frame):
        w.stop = True

    signal.signal(signal.SIGTERM, on_term)
    final = w.run(args.steps, args.duration)
    if w.failed:
        print(f"pschaos.psnodes.worker {args.name}: {w.failed}", file=sys.stderr)
        return 1
    print(f"{args.name}: final loss {final:.4f} (target {w.task.target_loss})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
