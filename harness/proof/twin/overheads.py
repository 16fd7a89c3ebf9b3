"""What real training runs cost beyond the measured parts: real runs of a small scenario, their steps, evals and per-role CPU, held against the twin's same run, give the worker overheads and the per-call CPU extras."""
from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Callable
import numpy as np

from pschaos.harness.errors import HarnessError
from pschaos.harness.proof.twin.run_cpu import (RunCpu, charged_between, copy_cpu_extras, per_call_workers, per_push_roles,
                                                training_window, worker_windows, WINDOW_TAIL_S)
from pschaos.harness.backends.sim.calibration import Calibration


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
    from pschaos.harness.proof.twin.measured import measured_background, measured_probe

    out, spread, evals, push_x, repl_x, call_x, probe_ms = {}, {}, {}, {}, {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="pschaos-calibrate-") as tmp:
        for model, mode, training in (("mlp", "sync", "async"), ("widedeep", "sync", "async"),
                                      ("mlp", "async", "async"), ("widedeep", "async", "async"),
                                      ("mlp", "sync", "ssp")):
            key = f"{model}/{mode}/{training}" if training != "async" else model if mode == "sync" else f"{model}/{mode}"
            f = Path(tmp) / f"{model}-{mode}-{training}.yaml"
            f.write_text(STEP_SCENARIO.format(model=model, mode=mode, training=training))
            sc = load_scenario(f)
            sc = sc.model_copy(update={"expect": sc.expect_only(
                ["no-lost-acks"], "a calibration run: only its timings are used, and it must have lost nothing")})
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
