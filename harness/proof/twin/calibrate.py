"""`pschaos sim calibrate`: measure on real clusters every timing the twin uses, write a calibration.

Measured here, on this machine, each as the median of repeated trials:
- the network: Echo round trips of 0 B to 1 MiB on a real node (raw bytes, no protobuf): the
  one-way fixed cost is half the smallest round trip, the per-byte cost the slope over sizes;
- a shard's apply: a sync push to a 1-copy shard of 1 MiB and 4 MiB of dense gradient, less the
  wire's cost for those bytes, per MiB;
- a worker's step per model: psnodes' own task (batch, forward, backward) on the CPU;
- a checkpoint's write: pschaos.psnodes.store.checkpoint.write_checkpoint of a 4 MiB state, MB/s;
- etcd: psnodes' own client's get and put on the real server, less the modelled wire;
- a copy's start: kill and restart, until its server answers a Status.
Heartbeat, suspicion and lease timings are the cluster config's own constants (the twin reads the
same config), so they are not measured; `pschaos sim validate` compares what they add up to.
- the CPU of a call: a burst of pushes and pulls, the node's and the caller's process CPU seconds
  per call (psutil); of an etcd operation likewise, the etcd server's and the caller's; of
  replication, on a 1-shard x 3-copy sync cluster, a replica's per Replicate and per MB and the
  primary's per Replicate sent (harness/proof/twin/calibrate_cpu.py);
- the host's cores (os.cpu_count): the twin shares that many among its processes (cpu.py).
Then, from the same real training runs, what a copy's process spends beyond the per-call figures
(`push_cpu_extra_s`, `replicate_cpu_extra_s`; calibrate_cpu.py: each copy's CPU over the training
window against its twin's). Last, `worker_overhead_s`: a real step's time beyond everything the twin models (compute, wire,
the CPU of every call on the shared cores), from a real 2-shard x 3-copy training run per model
less its twin's step without overhead, the twin given the load other tenants put on the host
during the real runs (report.json host_load); and from the same
runs (which evaluate every 10 steps) `worker_eval_s`: a real evaluation pass's time less its
twin's without that cost.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

import numpy as np

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.hostspeed import identity
from pschaos.harness.proof.twin.calibrate_cpu import (RunCpu, charged_between, copies_cpu, copy_cpu_extras, copy_idle_extra, cpu_of,
                            idle_rates, per_call_workers, per_op, per_push_roles, push_cpu, replicate_cpu,
                            server_cpu, training_window, twin_idle_rates, worker_windows, IDLE_SETTLE_S, WINDOW_TAIL_S)
from pschaos.harness.backends.sim.calibration import Calibration

SIZES = (0, 16 << 10, 256 << 10, 1 << 20)


def _median(fn: Callable[[], None], n: int) -> float:
    fn()                                            # warm-up
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def network(be, say: Callable[[str], None], n: int = 40) -> dict:
    from pschaos.psnodes.server.servicer import SERVICE

    node = be.routing()[0].primary
    ch = be.client.stub(node)._channel if hasattr(be.client.stub(node), "_channel") else None
    from pschaos.psnodes.wire.channels import dial

    ch = ch or dial(be.cfg.addresses[node], be.cfg.max_message_bytes)
    echo = ch.unary_unary(f"/{SERVICE}/Echo", request_serializer=None, response_deserializer=None)
    rtts = []
    for size in SIZES:
        blob = bytes(size)
        rtts.append(_median(lambda: echo(blob, timeout=10, metadata=be.client.md), n))
        say(f"  echo {size:>8} B: round trip {rtts[-1] * 1e3:.3f} ms")
    slope = float(np.polyfit(np.array(SIZES, float), np.array(rtts), 1)[0])
    return {"fixed_s": round(rtts[0] / 2, 7), "per_byte_s": max(0.0, slope / 2)}


def apply_cost(be, net: dict, say: Callable[[str], None], n: int = 15) -> float:
    from pschaos.psnodes.wire.codec import tensor_to_pb
    from pschaos.psnodes.proto import ps_pb2

    per_mb = []
    for mb in (1, 4):
        size = mb * (1 << 20) // 4
        be.client.init_dense({f"cal{mb}": np.zeros(size, np.float32)})
        push = ps_pb2.PushRequest(shard=0, update=ps_pb2.Update(
            worker="calibrate", dense=[tensor_to_pb(f"cal{mb}", np.full(size, 1e-3, np.float32))]))
        rid = iter(range(1, 1 << 40))

        def once() -> None:
            push.update.req_id = next(rid)
            be.client.call(0, "Push", lambda ep: (push.__setattr__("epoch", ep), push)[1])
        t = _median(once, n)
        wire = 2 * net["fixed_s"] + mb * (1 << 20) * net["per_byte_s"]
        per_mb.append(max(0.0, t - wire) / mb)
        say(f"  push {mb} MiB: {t * 1e3:.2f} ms, apply {per_mb[-1] * 1e3:.2f} ms/MiB")
    return round(statistics.mean(per_mb), 6)


def etcd_ops(be, net: dict, say: Callable[[str], None], n: int = 40) -> tuple[float, float, float, float]:
    """The real etcd's answer time for a read and for a write (a put: through the WAL and its
    fsync), through psnodes' own client, less the modelled wire both ways; and the CPU per
    operation of the etcd server and of this process (the client), over a burst of 4n reads
    and writes alike (the twin charges those on the host's cores, the rest of the answer time
    stays a wait)."""
    import psutil

    from pschaos.psnodes.etcd import Etcd

    etcd = Etcd(be.cfg.etcd, timeout=5.0)
    key = f"/pschaos-calibrate/{uuid.uuid4().hex[:8]}"
    vals = iter(range(1 << 30))
    write = _median(lambda: etcd.put(key, str(next(vals))), n)
    read = _median(lambda: etcd.get(key), n)

    def burst() -> None:
        for _ in range(2 * n):
            etcd.put(key, str(next(vals)))
            etcd.get(key)
    per = per_op({"server": cpu_of(psutil.Process(be.pids()["etcd"])), "client": cpu_of(psutil.Process())},
                  burst, 4 * n)
    etcd.delete(key)
    wire = 2 * net["fixed_s"]
    say(f"  etcd read {read * 1e3:.2f} ms, write {write * 1e3:.2f} ms (round trips, wire included); CPU an "
        f"operation: server {per['server'] * 1e3:.3f} ms, client {per['client'] * 1e3:.3f} ms")
    return (round(max(0.0, read - wire), 6), round(max(0.0, write - wire), 6), round(per["server"], 7),
            round(per["client"], 7))


def node_start(be, say: Callable[[str], None], n: int = 5) -> float:
    """A copy's start: from the backend's restart (a fork from the zygote) until its gRPC server
    answers a Status, the median of `n` kill-and-restart trials of the cluster's one copy."""
    node = be.nodes()[0]
    out = []
    for _ in range(n):
        be.kill(node)
        t0 = time.perf_counter()
        be.restart(node)
        while be.status(node, timeout=0.2) is None and time.perf_counter() - t0 < 30:
            time.sleep(0.002)
        out.append(time.perf_counter() - t0)
    s = statistics.median(out)
    say(f"  node start: {s * 1e3:.0f} ms (median of {n}: {', '.join(f'{x * 1e3:.0f}' for x in out)})")
    return round(s, 4)


def worker_steps(say: Callable[[str], None], n: int = 30) -> dict[str, float]:
    import torch

    from pschaos.psnodes.models import make_task

    torch.set_num_threads(1)
    out = {}
    for model in ("mlp", "widedeep"):
        task = make_task(model, 1, torch.device("cpu"))
        rng = np.random.default_rng(1)

        def step() -> None:
            b = task.batch(rng)
            rows = {}
            if task.tables:
                uniq, inv = np.unique(b.ids, return_inverse=True)
                for t, dim in task.tables.items():
                    r = torch.zeros((uniq.size, dim), requires_grad=True)
                    rows[t] = r[torch.from_numpy(inv.reshape(b.ids.shape))]
            task.model.zero_grad(set_to_none=True)
            task.loss(b, rows).backward()
        out[model] = round(_median(step, n), 6)
        say(f"  worker step {model}: {out[model] * 1e3:.2f} ms")
    return out


def checkpoint_rate(say: Callable[[str], None], n: int = 5) -> float:
    from pschaos.psnodes.store.checkpoint import write_checkpoint

    blob = bytes(4 << 20)
    with tempfile.TemporaryDirectory() as d:
        seq = iter(range(1, 1 << 30))
        t = _median(lambda: write_checkpoint(Path(d), blob, next(seq), 1, "calibrate", term=1), n)
    rate = round(4 * 1.048576 / t, 1)
    say(f"  checkpoint 4 MiB: {t * 1e3:.1f} ms ({rate} MB/s)")
    return rate


STEP_SCENARIO = """\
name: calibrate-steps-{model}
cluster: {{shards: 2, copies: 3, workers: 2, replication: {mode}, training: {training}, model: {model}, eval_every: 10}}
workload: {{steps: 300}}
expect: {{checks: [no-lost-acks]}}
"""


RUNS = 5                # real runs per model and mode (worker_overheads): one run's median step moves ~10% run to run


def _step_gaps(run_dir: Path) -> list[float]:
    """The times between a worker's consecutive train-step events, over every worker; a gap with
    an evaluation pass in it is left out (that pass is `worker_eval_s`, not a step's time)."""
    from pschaos.harness.history.events import read_events

    by: dict[str, list[tuple[float, str]]] = {}
    for e in read_events(run_dir / "history.jsonl"):
        if e["f"] in ("train-step", "eval"):
            by.setdefault(e["node"], []).append((e["t"], e["f"]))
    gaps = []
    for evs in by.values():
        last = None
        for t, f in evs:
            if f == "eval":
                last = None
                continue
            if last is not None:
                gaps.append(t - last)
            last = t
    return gaps


def _median_eval(run_dir: Path) -> float:
    """The median time of an evaluation pass (its `took_s`) over every worker."""
    from pschaos.harness.history.events import read_events

    took = [e["value"]["took_s"] for e in read_events(run_dir / "history.jsonl")
            if e["f"] == "eval" and e["value"].get("took_s") is not None]
    return statistics.median(took) if took else 0.0


def _workers(runner) -> list[str]:
    return [f"worker-{i}" for i in range(runner.sc.cluster.workers)]


def _real_roles(run_dir: Path, runner, cpu: RunCpu, shards: int, say: Callable[[str], None]
                ) -> tuple[float, float, float] | None:
    """A real run's primary and replica CPU per push and a worker's per call over its training
    window (None, said, for a run with a failover: a copy's CPU then spans two roles)."""
    from pschaos.harness.history.events import read_events

    hist = list(read_events(run_dir / "history.jsonl"))
    if sum(1 for e in hist if e["f"] == "promote") > shards:
        say(f"  (a failover in {run_dir.name}: its copies' CPU is left out of the per-push figures)")
        return None
    window = training_window(hist, WINDOW_TAIL_S)
    if window is None:
        raise HarnessError(f"calibrate: the real run {run_dir.name} recorded no training steps; see its logs")
    t0 = runner.history.t0
    nodes = runner.backend.nodes()
    window = (max(window[0], cpu.first_read(nodes) - t0), window[1])
    if window[1] - window[0] < 1.0:
        say(f"  (the copies of {run_dir.name} were read for less than a second of its training: left out)")
        return None
    read = cpu.between(nodes, t0 + window[0], t0 + window[1])
    try:
        windows = {w: worker_windows(hist, [w], start=cpu.first_read([w]) - t0)[w] for w in _workers(runner)}
    except HarnessError as e:
        say(f"  ({run_dir.name}: {e}: left out)")
        return None
    workers = {w: cpu.between([w], t0 + a, t0 + b)[w] for w, (a, b) in windows.items()}
    return (*per_push_roles(hist, read, window, runner.sc.cluster.copies), per_call_workers(hist, workers, windows))


def _twin_roles(be, runner) -> tuple[float, float, float]:
    """The twin's primary and replica CPU per push and a worker's per call over its run's training
    window (as `_real_roles`;
    a failover in the twin is refused: it has no failure to meet, so one means the model is off)."""
    from pschaos.harness.history.events import read_events

    hist = list(read_events(runner.out / "history.jsonl"))
    if sum(1 for e in hist if e["f"] == "promote") > runner.sc.cluster.shards:
        raise HarnessError(f"calibrate: the twin's run in {runner.out} failed over; its copies' CPU spans two roles")
    window = training_window(hist, WINDOW_TAIL_S)
    if window is None:
        raise HarnessError(f"calibrate: the twin's run in {runner.out} recorded no training steps")
    base = runner.history.t0 - runner.clock.epoch            # history t -> the SimPy clock
    charged = charged_between(be.cpu.log, base + window[0], base + window[1])
    windows = worker_windows(hist, _workers(runner), min_s=0.0)
    workers = {w: v for w, (a, b) in windows.items() for o, v in charged_between(be.cpu.log, base + a, base + b).items()
               if o == w}
    return (*per_push_roles(hist, charged, window, runner.sc.cluster.copies), per_call_workers(hist, workers, windows))


def fit_share(real: float, without: float, full: float) -> float:
    """The share of the CPU extras that brings a twin's step (`without` them, `full` with all of
    them) to the `real` one, by linear interpolation, within [0, 1]: 1 when the full twin is no
    slower than real, 0 when even the twin without them is."""
    if full <= real:
        return 1.0
    if without >= real or full <= without:
        return 0.0
    return (real - without) / (full - without)


def _rpcs_per_invoke(be, runner) -> float:
    """The Push and Pull RPCs the twin's workers made per push or pull their history logged: a
    logged pull is one RPC per shard for the dense state and one per table and shard more for a
    model's embedding rows (widedeep: three a shard), retries and re-pulls aside. The real
    workers' CPU is read per logged call; the twin charges the extra per RPC (review of the
    per-call CPU, H1: widedeep's was charged twice)."""
    from pschaos.harness.history.events import read_events

    workers = set(_workers(runner))
    logged = sum(1 for e in read_events(runner.out / "history.jsonl")
                 if e["node"] in workers and e["type"] == "invoke" and e["f"] in ("push", "pull"))
    rpcs = sum(n for w, n in be.data_calls.items() if w in workers)
    if not logged or not rpcs:
        raise HarnessError(f"calibrate: the twin's workers in {runner.out} made no push or pull")
    return rpcs / logged


def _entries_per_call(be) -> float:
    """The entries a Replicate carrying any carried, on average over the twin's replicas."""
    calls, entries = (sum(c.replicate_load[i] for c in be.copies.values()) for i in (0, 1))
    return entries / calls if calls else 1.0


def _median_step(run_dir: Path) -> float:
    gaps = _step_gaps(run_dir)
    return statistics.median(gaps) if gaps else 0.0


def _log_spread(gaps: list[float]) -> float:
    """The standard deviation of log(step time), the slowest 5% left out (a GC pause or a step
    that met a retry is not the spread of ordinary steps)."""
    xs = sorted(g for g in gaps if g > 0)
    xs = xs[:max(2, int(len(xs) * 0.95))]
    return round(statistics.pstdev(np.log(xs).tolist()), 4) if len(xs) >= 2 else 0.0


def worker_overheads(base: Calibration, say: Callable[[str], None]
                     ) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, float], dict[str, float],
                                dict[str, float]]:
    """Per model and replication mode (keys `mlp`, `widedeep` for sync, `mlp/async`, `widedeep/async`;
    and `mlp/sync/ssp` for SSP training, whose real steps cost more than async training's beyond
    the gating the twin models: ssp-kill-primary's throughput was overpredicted by 35% without it):
    a real step (2 shards x 3 copies, 2 workers) less the simulated step with
    everything else measured (`base`: compute, wire, etcd) and no overhead: what the client's and
    nodes' CPU add per step; the real steps' spread (`_log_spread`); and an evaluation pass's cost
    beyond the wire (a real pass less the twin's with none). First, from the same real runs, what a
    primary and a replica spend per push beyond the per-call figures (`copy_cpu_extras`: each
    copy's process CPU against its twin's) and a worker per call beyond the caller's burst figure
    (its process's CPU per Push or Pull), so the overhead left per step is what no process's
    measured CPU accounts for: without the copies' a sync push took 3.3 ms in the twin against
    7.8 ms real, and without the worker's the twin's steps did not slow as a real one's do when
    a scale-out doubles its calls."""
    from dataclasses import replace

    from pschaos.harness.history.events import read_events
    from pschaos.harness.run.runner import Runner
    from pschaos.harness.run.scenario import load_scenario
    from pschaos.harness.backends.sim.backend import SimBackend
    from pschaos.harness.proof.twin.validate import measured_background, measured_probe

    out, spread, evals, push_x, repl_x, call_x, probe_ms = {}, {}, {}, {}, {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="pschaos-calibrate-") as tmp:
        for model, mode, training in (("mlp", "sync", "async"), ("widedeep", "sync", "async"),
                                      ("mlp", "async", "async"), ("widedeep", "async", "async"),
                                      ("mlp", "sync", "ssp")):
            key = f"{model}/{mode}/{training}" if training != "async" else model if mode == "sync" else f"{model}/{mode}"
            f = Path(tmp) / f"{model}-{mode}-{training}.yaml"
            f.write_text(STEP_SCENARIO.format(model=model, mode=mode, training=training))
            sc = load_scenario(f)
            # the median of RUNS real runs: one 300-step run's median step moved by a quarter between
            # two calibrations minutes apart (mlp/async 7.4 ms, then 10.3 ms), and a prediction with it
            reals, gaps, real_evals, loads, roles, probes = [], [], [], [], [], []
            for seed in range(1, RUNS + 1):
                d = Path(tmp) / f"real-{key}-{seed}"
                runner = Runner(sc, seed, d, "process", quiet=True)
                with RunCpu(runner) as cpu:
                    rep = runner.run()
                if rep.get("verdict") != "pass":
                    raise HarnessError(f"calibrate: the real run {d.name} did not pass ({rep.get('verdict')}); its "
                                       "timings are no calibration; see its report.json")
                roles.append(_real_roles(d, runner, cpu, sc.cluster.shards, say))
                g = _step_gaps(d)
                reals.append(statistics.median(g) if g else 0.0)
                gaps += g
                real_evals.append(_median_eval(d))
                loads.append(measured_background(d))
                probe = measured_probe(d)
                if probe is not None:
                    probes.append(probe)
            real, real_eval = statistics.median(reals), statistics.median(real_evals)
            load = statistics.median(loads)        # the twin under the load the real runs met (hostload.py)
            if probes:       # how fast the host ran while these were measured: validate's baseline (hostspeed.py)
                probe_ms[key] = round(statistics.median(probes), 4)

            def twin(cal: Calibration, d: Path) -> tuple[SimBackend, Runner]:
                made: list[SimBackend] = []

                def make(s, dd, rid, seed) -> SimBackend:
                    made.append(SimBackend(s.cluster, dd, rid, seed, calibration=cal, background_load=load))
                    made[-1].charge_log = []          # every charge, to read the training window's
                    return made[-1]
                r = Runner(sc, 1, d, "sim", quiet=True, make_backend=make)
                rep = r.run()
                promotes = sum(1 for e in read_events(d / "history.jsonl") if e["f"] == "promote")
                if rep.get("verdict") != "pass" or promotes > sc.cluster.shards:
                    raise HarnessError(f"calibrate: the twin's run in {d.name} did not pass or failed over "
                                       f"({rep.get('verdict')}, {promotes} promotions); the model is off there")
                return made[0], r
            bare = replace(base, worker_overhead_s={key: 0.0}, worker_step_jitter={}, worker_eval_s={key: 0.0},
                           push_cpu_extra_s={key: 0.0}, replicate_cpu_extra_s={key: 0.0}, client_cpu_extra_s={key: 0.0})
            usable = [r for r in roles if r is not None]
            if len(usable) < (RUNS + 1) // 2:
                raise HarnessError(f"calibrate: {RUNS - len(usable)} of {RUNS} real runs of {key} failed over or were "
                                   "read too briefly (said above); too few to read the processes' CPU from (a loaded "
                                   "host?); calibrate again")
            sim_be, sim_run = twin(bare, Path(tmp) / f"sim-cpu-{key}")
            px, rx, cx = copy_cpu_extras(usable, _twin_roles(sim_be, sim_run))
            rpcs = _rpcs_per_invoke(sim_be, sim_run)
            cx = round(cx / rpcs, 7)                  # read per logged call, charged per RPC
            bare = replace(bare, push_cpu_extra_s={key: px}, replicate_cpu_extra_s={key: rx}, client_cpu_extra_s={key: cx})
            twin(bare, Path(tmp) / f"sim-{key}")
            sim0 = _median_step(Path(tmp) / f"sim-{key}")
            fit = 1.0
            if sim0 > real:
                # the twin with every process's measured CPU is slower than the real step: part of
                # that CPU ran side by side in the real processes (gRPC's threads) where the twin
                # queues it on one line (widedeep: 36.4 ms against 34.9 with no overhead at all);
                # charge the share of the extras that brings the step back to the real one (their
                # effect is near linear between none, the CPU-reading twin's step, and all)
                without = _median_step(Path(tmp) / f"sim-cpu-{key}")
                fit = fit_share(real, without, sim0)
                px, rx, cx = round(px * fit, 7), round(rx * fit, 7), round(cx * fit, 7)
                bare = replace(bare, push_cpu_extra_s={key: px}, replicate_cpu_extra_s={key: rx},
                               client_cpu_extra_s={key: cx})
                say(f"  {key}: the twin with all the measured CPU steps in {sim0 * 1e3:.2f} ms against the real "
                    f"{real * 1e3:.2f} ms (none of it: {without * 1e3:.2f} ms); charging {fit:.0%} of the extras")
                twin(bare, Path(tmp) / f"sim-fit-{key}")
                sim0 = _median_step(Path(tmp) / f"sim-fit-{key}")
            out[key] = round(max(0.0, real - sim0), 6)
            # measured per push, charged per Replicate with entries: times the entries such a call
            # carries (a sender ships what piled up, several pushes a call under load), read from a
            # twin with the overhead too, whose steps and so whose batching are the real run's
            full, _ = twin(replace(bare, worker_overhead_s={key: out[key]}), Path(tmp) / f"sim-batch-{key}")
            batch = _entries_per_call(full)
            rx = round(rx * batch, 7)
            push_x[key], repl_x[key], call_x[key] = px, rx, cx
            if sim0 > real:
                say(f"  note: the twin's step without overhead ({sim0 * 1e3:.2f} ms) is already slower than the real "
                    f"one ({real * 1e3:.2f} ms) for {key}: overhead 0, and the twin predicts slow steps there")
            spread[key] = _log_spread(gaps)
            sim_eval = _median_eval(Path(tmp) / (f"sim-fit-{key}" if fit < 1.0 else f"sim-{key}"))
            evals[key] = round(max(0.0, real_eval - sim_eval), 6)
            say(f"  step {model} ({mode} replication, {training} training): copies' CPU beyond the calls' "
                f"{px * 1e3:.3f} ms a push (primary), {rx * 1e3:.3f} ms a Replicate of {batch:.2f} entries (replica), "
                f"{cx * 1e3:.3f} ms an RPC (worker, {rpcs:.2f} RPCs a logged call); "
                f"real {real * 1e3:.2f} ms (log-sd {spread[key]:.3f}), "
                f"other tenants {load:.2f} cores, simulated without overhead {sim0 * 1e3:.2f} ms -> overhead "
                f"{out[key] * 1e3:.2f} ms; "
                f"eval pass real {real_eval * 1e3:.2f} ms, simulated without its cost {sim_eval * 1e3:.2f} ms")
    return out, spread, evals, push_x, repl_x, call_x, probe_ms


def _ms_a_s(rates: dict[str, float]) -> str:
    return ", ".join(f"{n} {r * 1e3:.1f}" for n, r in sorted(rates.items())) + " ms a second"


def calibrate(out: Path, say: Callable[[str], None] = print) -> Calibration:
    from pschaos.harness.backends.process.backend import ProcessBackend
    from pschaos.harness.run.scenario import ClusterSpec

    t0 = time.time()
    say("pschaos sim calibrate: starting a 1-copy cluster of real processes")
    spec = ClusterSpec(shards=1, copies=1, workers=0, replication="sync", optimizer="sgd", checkpoint_interval_s=3600)
    with tempfile.TemporaryDirectory(prefix="pschaos-calibrate-") as tmp:
        be = ProcessBackend(spec, Path(tmp) / "c", f"calibrate-{uuid.uuid4().hex[:6]}", 1)
        try:
            be.start()
            say("network (Echo round trips):")
            net = network(be, say)
            # the CPU of a call before apply_cost's 5 MiB of tensors land on the shard: every delta
            # pull digests the shard's whole state on both ends (psnodes/store/digest.py), so measured
            # after them a pull cost 1.35 ms of the primary's CPU, not a scenario's ~0.4
            say("call CPU (a primary's and its caller's own CPU time per request, a scenario-sized shard):")
            server_s, client_s = server_cpu(be, say)
            solo_push = push_cpu(be)
            say("shard apply (sync pushes):")
            apply_s = apply_cost(be, net, say)
            say("etcd (reads and writes through the real server):")
            etcd_read, etcd_write, etcd_cpu, etcd_client = etcd_ops(be, net, say)
            say("node start (kill and restart, until it answers):")
            start_s = node_start(be, say)
        finally:
            be.teardown()
        say("replication CPU (a 1-shard x 3-copy sync cluster: a replica's per Replicate and per MB, the "
            "primary's per send):")
        spec3 = ClusterSpec(shards=1, copies=3, workers=0, replication="sync", optimizer="sgd",
                            checkpoint_interval_s=3600)
        be = ProcessBackend(spec3, Path(tmp) / "r", f"calibrate-{uuid.uuid4().hex[:6]}", 1)
        try:
            be.start()
            time.sleep(IDLE_SETTLE_S)                    # past the start-up's own CPU (registration), as the twin's
            real_idle = idle_rates(copies_cpu(be))
            rep_request, rep_mb, rep_send = replicate_cpu(be, solo_push, say)
        finally:
            be.teardown()
    say("worker compute (psnodes' own tasks on the CPU):")
    steps = worker_steps(say)
    say("checkpoint writes:")
    ckpt = checkpoint_rate(say)
    say(f"worker step overhead (real 2x3 clusters with 2 workers, sync and async replication per model and SSP, "
        f"{RUNS} runs each, then their twins; about four minutes):")
    cal = Calibration(network=net, worker_step_s=steps, apply_s_per_mb=apply_s,
                      checkpoint_mb_s=ckpt, node_start_s=start_s, etcd_read_s=etcd_read, etcd_write_s=etcd_write,
                      server_request_s=server_s, client_request_s=client_s, etcd_request_s=etcd_cpu,
                      etcd_client_s=etcd_client, replicate_request_s=rep_request, replicate_s_per_mb=rep_mb,
                      replicate_send_s=rep_send, cores=os.cpu_count(),
                      measured={"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                "host": platform.node(), "python": platform.python_version(),
                                "command": f"pschaos sim calibrate --out {out}"})
    with tempfile.TemporaryDirectory(prefix="pschaos-calibrate-") as tmp:
        twin_idle = twin_idle_rates(cal, spec3, Path(tmp) / "idle")
    cal.copy_idle_cpu_s = copy_idle_extra(real_idle, twin_idle)
    say(f"idle copies (the same 1x3 cluster, nothing asked of it): real {_ms_a_s(real_idle)}, twin "
        f"{_ms_a_s(twin_idle)} -> {cal.copy_idle_cpu_s * 1e3:.1f} ms a second a copy")
    (cal.worker_overhead_s, cal.worker_step_jitter, cal.worker_eval_s, cal.push_cpu_extra_s,
     cal.replicate_cpu_extra_s, cal.client_cpu_extra_s, cal.host_probe_ms) = worker_overheads(cal, say)
    cal.measured["probe"] = identity()
    say("the host's speed probe in the training runs (harness/machinery/hostspeed.py): "
        + (", ".join(f"{k} {v:.3f} ms" for k, v in cal.host_probe_ms.items()) if cal.host_probe_ms
           else "not read (no run's window held a sample): validate will correct nothing"))
    cal.measured["took_s"] = round(time.time() - t0, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cal.to_json(), indent=2) + "\n")
    cal.path = str(out)
    say(f"pschaos sim calibrate: wrote {out} in {time.time() - t0:.0f}s")
    return cal


__all__ = ["calibrate", "fit_share"]
