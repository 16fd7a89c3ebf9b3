"""`pschaos sim calibrate`: measure on real clusters every timing the twin uses, write a calibration.

Measured here, on this machine, each as the median of repeated trials:
- the network: Echo round trips of 0 B to 1 MiB on a real node (raw bytes, no protobuf): the
  one-way fixed cost is half the smallest round trip, the per-byte cost the slope over sizes;
- a shard's apply: a sync push to a 1-copy shard of 1 MiB and 4 MiB of dense gradient, less the
  wire's cost for those bytes, per MiB;
- a worker's step per model: psnodes' own task (batch, forward, backward) on the CPU;
- a checkpoint's write: pschaos.psnodes.store.checkpoint.write_checkpoint of a 4 MiB state, MB/s;
- etcd: psnodes' own client's get and put on the real server, less the modelled wire;
- a copy's start: kill and restart, until its server answers a Status, and the started
  process's own CPU by then (`node_start_cpu_s`); and of each kill, how
  long its connections stay open (`kill_teardown_s`, and each kill's in `kill_teardown_samples`),
  then how long a replica's probe takes to fail on them, less the request's wire
  (`network.probe_refused_s` and its samples).
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

from pschaos.harness.backends.sim.calibration import Calibration
from pschaos.harness.machinery.hostspeed import identity
from pschaos.harness.proof.twin.calibrate_cpu import (copies_cpu, copy_idle_extra, idle_rates, push_cpu, replicate_cpu,
                                                      server_cpu, twin_idle_rates, IDLE_SETTLE_S)
from pschaos.harness.proof.twin.microbench import apply_cost, checkpoint_rate, etcd_ops, network, node_start, worker_steps
from pschaos.harness.proof.twin.overheads import RUNS, worker_overheads


def _ms_a_s(rates: dict[str, float]) -> str:
    return ", ".join(f"{n} {r * 1e3:.1f}" for n, r in sorted(rates.items())) + " ms a second"


def calibrate(out: Path, say: Callable[[str], None] = print) -> Calibration:
    from pschaos.harness.backends.process.backend import ProcessBackend
    from pschaos.harness.backends.cluster import ClusterSpec

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
            etcd_read, etcd_write, etcd_cpu, etcd_client, etcd_wake = etcd_ops(be, net, say)
            say("node start (kill and restart, until it answers):")
            start_s, start_cpu_s, teardown_s, probes, teardowns = node_start(be, say)
            # the probe's failure beyond the request's wire, which the twin charges on its own
            beyond = [round(max(0.0, p - net["fixed_s"]), 6) for p in probes]
            net.update(probe_refused_s=statistics.median(beyond), probe_refused_samples=beyond)
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
                      checkpoint_mb_s=ckpt, node_start_s=start_s, kill_teardown_s=teardown_s,
                      kill_teardown_samples=teardowns, node_start_cpu_s=start_cpu_s, etcd_wake_s=etcd_wake, etcd_read_s=etcd_read, etcd_write_s=etcd_write,
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


__all__ = ["calibrate"]
