"""The timing parameters of the twin, measured on real clusters by `pschaos sim calibrate`.

A calibration file is JSON: `network` (harness/backends/sim/network.py NetCalibration: one-way fixed cost
and per-byte cost of a message, TCP retransmission; `probe_refused_s` with its
`probe_refused_samples`, a replica's probe over its paths to a killed copy whose connections
closed, less the request's wire: gRPC's failure path, charged as the prober's CPU outside its
GIL, ~1 ms on an idle host, 2.4-7.9 ms in traced failovers on a busy one), `worker_step_s` per model (the compute of one
training step, charged in virtual time; the gradients themselves are computed for real),
`worker_overhead_s` per model (what a real step costs beyond everything the twin models - the
compute, the wire, and the CPU of every call on the shared cores (harness/backends/sim/cpu.py) - charged
once per step with the compute as the worker's CPU: the leftover, a real step's time from the
train-step events of process runs less a simulated step's without it; it was ~10 ms a step before
the CPU model charged the calls, and shrinks toward 0 as the model covers what a step costs),
`worker_step_jitter` per model (the spread of a real step's time: the standard deviation of its
logarithm over a real run's steps, outliers above the 95th percentile left out; each simulated
step is the calibrated time times exp(jitter x a standard normal draw from the run's seed), so
its median stays the calibrated one and workers drift apart as real ones do, which is what SSP
staleness and the interleaving of pushes depend on), `worker_eval_s` per model (a read-only
evaluation pass, psnodes/worker.py `evaluate`: its forward pass and the client's work on its row
pulls beyond the modelled wire, charged once per pass without a draw; the median `took_s` of
a real run's eval events less a simulated pass's without it), `apply_s_per_mb` (a shard applying an update), `checkpoint_mb_s` (writing a checkpoint),
`node_start_s` (a shard copy's start, from the harness's spawn until its gRPC server takes
calls: the process, its ShardNode and its local checkpoint; a simulated copy refuses calls that
long after each start, so a restarted replica misses as many pushes as a real one),
`kill_teardown_s` (a copy's SIGKILL until its sockets close: the kernel unmaps a process's memory
before it closes its files, tens of ms for a Python process with PyTorch loaded, so a call in
flight to a killed copy fails that long after the kill and the harness's kill returns then; the
median of the same kills' times until the process was reaped; absent in older files: at once;
`kill_teardown_samples`, each of those kills' own, from which the twin draws one per kill: a
failover's clients begin their retries at the teardown, and where their retries fall against the
promotion moves its time by up to a retry's pause), `node_start_cpu_s` (the started process's
own CPU seconds within node_start_s: the twin charges that part on the host's shared cores, so a
start on a busy host stretches as a real one does, and waits the rest; None in older files: all
of it a wait),
`etcd_wake_s` (how much later etcd answers a call when it sat idle: [gap, extra] points, each the
median read after that long a pause less the median read back to back, applied to every call
(reads, writes, compare-and-swaps, keepalives) by the gap since etcd last answered or was asked;
a failover's reads and compare-and-swaps come after such pauses; absent in older files: none),
`etcd_read_s` and `etcd_write_s` (the real etcd's time to answer a read, and a write or lease
grant that goes through its log, beyond the modelled wire: its HTTP gateway, the client's
JSON and, for a write, the WAL's fsync), `etcd_start_s` (a killed etcd started again until it serves: the process backend's restart
blocks that long; 0.6 s in the process runs' histories, fault-stop minus fault-start minus the
outage), `server_request_s` (a primary's own CPU time per small request, pushes and pulls of a
few kB alike: its process's CPU seconds over a burst of calls divided by their count; the scale
level's server capacity comes from it; the twin charges it on every Push, Pull and
Migrate a copy serves, plus `apply_s_per_mb` for the bytes the request carries),
`client_request_s` (the caller's own CPU time per such call: the PS client's encoding, gRPC and
decoding, from the same burst as the calling process's CPU seconds; charged on every call a
worker or the migration coordinator makes), `replicate_request_s`, `replicate_s_per_mb` and
`replicate_send_s` (replication's own CPU, measured on a 1-shard x 3-copy sync cluster: a
replica's per Replicate it serves and per MB the request carries, and the primary's per
Replicate it sends; charged on every Replicate instead of a push's server and caller CPU, which
a hand-encoded Replicate of raw bytes does not cost; absent (an older file), the push's figures
stand in), `etcd_request_s` and
`etcd_client_s` (the etcd server's CPU per operation and the Python client's, over a burst of
reads and writes: charged on the CPU within etcd_read_s / etcd_write_s, the rest of which (the
WAL's fsync, the gateway's scheduling) stays a plain wait), `cores` (the measuring host's CPU
count: the twin's processes share that many cores, harness/backends/sim/cpu.py; absent, every job runs at
full speed as on an unbounded host), `push_cpu_extra_s` and `replicate_cpu_extra_s` per model
(keyed as the overhead: the CPU a real primary spends per push it applies, its pulls included,
and a real replica per Replicate carrying entries, beyond the per-call figures above: each copy's
process CPU seconds over the training window of a real 2-shard x 3-copy run (first step, or
the first reading of every copy if later, to 0.5 s before the last) less its twin's without them, per new push its shard's primary acknowledged; a replica's
then times the entries a Replicate carries in the calibrated twin, several under load). The per-call figures come
from short bursts on an idle cluster; in a training run on a busy host a real copy spent 2-4x
as much (context switches, gRPC's threads), and without these the twin put all of it on the
workers as overhead: their steps matched, but a sync push took 3.3 ms in the twin against 7.8 ms
for real, and a lost replica freed no CPU. Charged on the copy's own CPU line (its GIL), the
primary's after the apply, the replica's with the Replicate; absent (older files), none),
`client_cpu_extra_s` per model (keyed as the overhead: what a real worker's process spends per Push
or Pull it makes beyond `client_request_s`, from the same runs: its CPU seconds over its own
training window per push and pull its history logged, less its twin's, over the Push and Pull
RPCs the twin's workers made per logged call (widedeep's pull is three RPCs a shard: the dense
state and each table's rows); charged with every Push and Pull RPC a worker makes, outside its
GIL (cpu.py io_line), so a step that touches twice the shards costs
the worker twice of it, as after a real scale-out from 2 shards to 4, where a real worker's CPU
went from 3.5 to 6.3 ms a step while the twin's per-step overhead left its steps almost as
cheap; with it, the worker's CPU is measured whole: the overhead and an eval pass's cost are
then charged as a wait, not as CPU), `copy_idle_cpu_s` (a live copy's CPU seconds a second
beyond what the twin charges it idle - its heartbeats' and keepalives' CPU -: a real 1x3
cluster's copies' CPU over seconds with nothing asked of them less its twin's, the mean over
copies; real copies spent 25-45 ms a second, their twins 10-20; charged outside the copy's GIL
(cpu.py io_line) from its start until it is killed or begins its SIGTERM shutdown, nothing while
it is paused, copy/procs.py `background`: so twelve copies leave the workers less of the host
than six and a killed one frees its share; absent, none). When the twin with all those extras
steps slower than the real runs (widedeep: part of a real process's CPU runs side by side where
the twin queues it), calibrate charges the share of the three extras that matches the real
step, and says so. `measured` says when, where, and with what command. The committed default lives beside this module;
a run's report names the file it used.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pschaos.harness.errors import HarnessError

DEFAULT_PATH = Path(__file__).with_name("calibration.json")
# Real step (median, 2 shards x 3 copies, 2 workers, an idle 2-core machine: mlp sync ~10 ms over
# the process runs' histories, widedeep async ~14.5-15 ms in a run of async-kill-primary) less the
# simulated step with the measured compute and no overhead (mlp 4.1 ms, widedeep 4.5 ms).
OVERHEAD_S = {"mlp": 0.006, "widedeep": 0.010}
# An eval pass (a forward pass and one row pull per table and shard) beyond the modelled wire, as
# measured by `pschaos sim calibrate` (the committed file carries the measured figure)
EVAL_S = {"mlp": 0.0004, "widedeep": 0.006}
KEYS = ("network", "worker_step_s", "worker_overhead_s", "worker_step_jitter", "worker_eval_s", "apply_s_per_mb",
        "checkpoint_mb_s",
        "node_start_s", "kill_teardown_s", "kill_teardown_samples", "node_start_cpu_s", "etcd_wake_s", "etcd_read_s", "etcd_write_s", "etcd_start_s", "server_request_s", "client_request_s",
        "etcd_request_s", "etcd_client_s", "replicate_request_s", "replicate_s_per_mb", "replicate_send_s", "cores",
        "push_cpu_extra_s", "replicate_cpu_extra_s", "client_cpu_extra_s", "copy_idle_cpu_s", "host_probe_ms", "measured")


#: keys that hold model -> seconds maps (every value a figure), and those that hold one figure
_MAPS = ("worker_step_s", "worker_overhead_s", "worker_step_jitter", "worker_eval_s", "push_cpu_extra_s",
         "replicate_cpu_extra_s", "client_cpu_extra_s", "host_probe_ms")
_FIGURES = ("apply_s_per_mb", "checkpoint_mb_s", "node_start_s", "node_start_cpu_s", "kill_teardown_s", "etcd_read_s", "etcd_write_s", "etcd_start_s",
            "server_request_s", "client_request_s", "etcd_request_s", "etcd_client_s", "replicate_request_s",
            "replicate_s_per_mb", "replicate_send_s", "cores", "copy_idle_cpu_s")


def _figure_problem(name: str, v: Any, positive: bool = False) -> str | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v > 0 if positive else v >= 0)
    return None if ok else f"{name}={v!r} must be a finite number {'above' if positive else 'at or above'} 0"


def bad_figure(data: dict) -> str | None:
    """The first figure a calibration file gives that the twin cannot use, or None: a NaN cost
    made etcd answer at once and broke the CPU model's ordering, `cores: 0` read as an unlimited
    host, a string failed deep in a run (review of the CPU model, M2). None means "not measured"
    where a key allows it."""
    for k in _FIGURES:
        if data.get(k) is not None:
            why = _figure_problem(k, data[k], positive=k in ("cores", "checkpoint_mb_s"))
            if why:
                return why
    teardowns = data.get("kill_teardown_samples")         # None: not measured (the median stands)
    if teardowns is not None and (not isinstance(teardowns, list) or any(_figure_problem("", v) for v in teardowns)):
        return f"kill_teardown_samples={teardowns!r} must be a list of seconds, finite numbers >= 0"
    cpu, start = data.get("node_start_cpu_s"), data.get("node_start_s")
    if cpu is not None and start is not None and cpu > start:
        return (f"node_start_cpu_s={cpu!r} is more than node_start_s={start!r}: the start's own CPU is part of "
                "its time; measure both again with `pschaos sim calibrate`")
    wake = data.get("etcd_wake_s", [])
    if not isinstance(wake, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(_figure_problem("", v) is None for v in p) for p in wake):
        return f"etcd_wake_s={wake!r} must be a list of [idle gap s, extra s] pairs of finite numbers >= 0"
    if any(b[0] <= a[0] for a, b in zip(wake, wake[1:])):
        return f"etcd_wake_s={wake!r}: the gaps must rise"
    net = data.get("network", {})
    if not isinstance(net, dict):
        return f"network must map a timing name to seconds, not {type(net).__name__}"
    for k, v in net.items():
        if v is None and k == "keepalive_s":
            continue                      # not measured: the network's default (the one figure that may be None)
        vs = v if k == "probe_refused_samples" and isinstance(v, list) else [v]
        why = next(filter(None, (_figure_problem(f"network.{k}", x) for x in vs)), None)
        if why or (k == "probe_refused_samples" and not isinstance(v, list)):
            return why or f"network.probe_refused_samples={v!r} must be a list of seconds"
    for k in _MAPS:
        m = data.get(k, {})
        if not isinstance(m, dict):
            return f"{k} must map a model name to seconds, not {type(m).__name__}"
        for model, v in m.items():
            why = _figure_problem(f"{k}[{model!r}]", v, positive=k == "host_probe_ms")
            if why:
                return why
    return None


def wake_after(points: list, gap: float) -> float:
    """The extra answer time of an etcd call `gap` seconds after etcd last answered or was asked
    (`etcd_wake_s` points from (0, 0), linear between them, the last one's beyond it; none
    without points): a tight loop keeps etcd's threads and the host's cores awake, a failover's
    reads and compare-and-swaps come after pauses."""
    if not points:
        return 0.0
    pts = [(0.0, 0.0), *((float(g), float(e)) for g, e in points)]
    for (g0, e0), (g1, e1) in zip(pts, pts[1:]):
        if gap <= g1:
            return e0 + (e1 - e0) * max(0.0, gap - g0) / (g1 - g0) if g1 > g0 else e1
    return pts[-1][1]


@dataclass
class Calibration:
    network: dict[str, Any] = field(default_factory=dict)
    worker_step_s: dict[str, float] = field(default_factory=lambda: {"mlp": 0.004, "widedeep": 0.008})
    worker_overhead_s: dict[str, float] = field(default_factory=lambda: dict(OVERHEAD_S))
    worker_step_jitter: dict[str, float] = field(default_factory=dict)
    worker_eval_s: dict[str, float] = field(default_factory=lambda: dict(EVAL_S))
    apply_s_per_mb: float = 0.004
    checkpoint_mb_s: float = 200.0
    node_start_s: float = 0.0
    kill_teardown_s: float = 0.0              # a SIGKILL until the copy's sockets close (0: at once)
    kill_teardown_samples: list = field(default_factory=list)   # each measured kill's (none: the median always)
    node_start_cpu_s: float | None = None     # of node_start_s, the started process's own CPU (None: a wait)
    etcd_wake_s: list = field(default_factory=list)   # [[idle gap s, extra answer s], ...], gaps rising
    etcd_read_s: float = 0.0
    etcd_write_s: float = 0.0
    etcd_start_s: float = 0.6
    server_request_s: float | None = None     # a primary's CPU per small request (None: not measured)
    client_request_s: float = 0.0             # a caller's CPU per call
    etcd_request_s: float = 0.0               # the etcd server's CPU per operation
    etcd_client_s: float = 0.0                # the etcd client's CPU per operation
    replicate_request_s: float | None = None  # a replica's CPU per Replicate (None: not measured)
    replicate_s_per_mb: float | None = None   # a replica's CPU per MB a Replicate carries
    replicate_send_s: float | None = None     # a primary's CPU per Replicate it sends
    cores: float | None = None                # the measuring host's CPUs (None: a file from before the CPU model)
    push_cpu_extra_s: dict[str, float] = field(default_factory=dict)       # a primary's CPU per push beyond the calls'
    replicate_cpu_extra_s: dict[str, float] = field(default_factory=dict)  # a replica's per Replicate with entries
    client_cpu_extra_s: dict[str, float] = field(default_factory=dict)     # a worker's per call it makes
    copy_idle_cpu_s: float | None = None      # a live copy's CPU seconds a second beyond its calls' (None: not measured)
    host_probe_ms: dict[str, float] = field(default_factory=dict)  # the speed probe in each key's training runs
    measured: dict[str, Any] = field(default_factory=dict)
    path: str = "(built-in defaults)"

    @classmethod
    def load(cls, path: str | Path) -> "Calibration":
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise HarnessError(f"calibration file {p} does not exist; write one with `pschaos sim calibrate "
                               f"--out {p}`") from None
        except json.JSONDecodeError as e:
            raise HarnessError(f"calibration file {p} is not JSON: {e}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise HarnessError(f"calibration file {p} could not be read ({type(e).__name__}: {e}); give a "
                               "readable JSON file, as `pschaos sim calibrate --out FILE` writes") from None
        if not isinstance(data, dict):
            raise HarnessError(f"calibration file {p} holds a {type(data).__name__}, not an object of keys")
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise HarnessError(f"calibration file {p}: unknown key(s) {', '.join(unknown)}; known: {', '.join(KEYS)}")
        problem = bad_figure(data)
        if problem:
            raise HarnessError(f"calibration file {p}: {problem}; measure again with `pschaos sim calibrate --out {p}`")
        return cls(**data, path=str(p))

    @classmethod
    def default(cls) -> "Calibration":
        return cls.load(DEFAULT_PATH) if DEFAULT_PATH.exists() else cls()

    @staticmethod
    def _key(d: dict[str, float], model: str, replication: str, training: str) -> str | None:
        """The key `_pick` reads for this kind of run, or None when it falls back to the largest value."""
        for k in (f"{model}/{replication}/{training}", f"{model}/{replication}", model):
            if k in d:
                return k
        return None

    @staticmethod
    def _pick(d: dict[str, float], model: str, replication: str, training: str, default: float) -> float:
        """The most specific key measured: `model/replication/training` (SSP, BSP), then
        `model/replication`, then `model`, then the largest value (an unmeasured model)."""
        for k in (f"{model}/{replication}/{training}", f"{model}/{replication}", model):
            if k in d:
                return float(d[k])
        return float(max(d.values(), default=default))

    def compute_s(self, model: str) -> float:
        """A step's compute for `model` (the largest measured for an unmeasured model)."""
        return float(self.worker_step_s.get(model, max(self.worker_step_s.values(), default=0.005)))

    @property
    def worker_cpu_measured(self) -> bool:
        """Whether the workers' process CPU was measured (`client_cpu_extra_s`): then a worker's
        CPU is its compute and its calls', and the overhead and an eval pass's cost are the
        time a real step takes beyond every CPU second measured - a wait, not CPU (charged as
        CPU too, they counted the worker's CPU twice: review of the per-call CPU, H2)."""
        return self.cpu_model and bool(self.client_cpu_extra_s)

    def step_s(self, model: str, replication: str = "sync", training: str = "async") -> float:
        """Virtual seconds one training step of `model` costs its worker: compute plus overhead.
        The overhead is keyed `model/replication[/training]` where the calibration measured that
        mode (an async primary answers before its replicas apply, so a real step costs less), else
        `model`."""
        return self.compute_s(model) + self._pick(self.worker_overhead_s, model, replication, training, 0.0)

    def jitter(self, model: str, replication: str = "sync", training: str = "async") -> float:
        """The log-sd of a step's time for `model` (0: every step takes the calibrated time)."""
        return self._pick(self.worker_step_jitter, model, replication, training, 0.0)

    def eval_s(self, model: str, replication: str = "sync", training: str = "async") -> float:
        """Virtual seconds one evaluation pass of `model` costs its worker beyond the wire, keyed
        as the overhead is."""
        return self._pick(self.worker_eval_s, model, replication, training, 0.0)

    @property
    def cpu_model(self) -> bool:
        """Whether this file was measured for the CPU model (it records the host's `cores`). One
        from before charges no call any server or replication CPU: its worker overhead already
        holds the server's share of a step's calls, and charging both slowed every step twice
        (review of the CPU model, M3)."""
        return self.cores is not None

    def request_cpu(self) -> float:
        """A copy's CPU per call it serves (0 for a file from before the CPU model)."""
        return (self.server_request_s or 0.0) if self.cpu_model else 0.0

    def replicate_cpu(self) -> tuple[float, float, float]:
        """A replica's CPU per Replicate and per MB it carries, and the primary's per Replicate sent.
        A calibration from before they were measured: a push's server CPU, apply and caller CPU;
        one from before the CPU model: none."""
        if not self.cpu_model:
            return 0.0, 0.0, 0.0
        server = self.server_request_s or 0.0
        return (server if self.replicate_request_s is None else self.replicate_request_s,
                self.apply_s_per_mb if self.replicate_s_per_mb is None else self.replicate_s_per_mb,
                self.client_request_s if self.replicate_send_s is None else self.replicate_send_s)

    def copy_cpu_extra(self, model: str, replication: str = "sync", training: str = "async") -> tuple[float, float]:
        """A primary's CPU per push and a replica's per replicated push beyond the per-call
        figures, keyed as the overhead is (none for a file without them or before the CPU model)."""
        if not self.cpu_model:
            return 0.0, 0.0
        return (self._pick(self.push_cpu_extra_s, model, replication, training, 0.0),
                self._pick(self.replicate_cpu_extra_s, model, replication, training, 0.0))

    def idle_cpu(self) -> float:
        """A live copy's CPU seconds a second whatever it serves (0 for a file without it or
        before the CPU model)."""
        return (self.copy_idle_cpu_s or 0.0) if self.cpu_model else 0.0

    def client_cpu_extra(self, model: str, replication: str = "sync", training: str = "async") -> float:
        """A worker's CPU per Push or Pull it makes beyond `client_request_s`, keyed as the
        overhead is (0 for a file without it or before the CPU model)."""
        if not self.cpu_model:
            return 0.0
        return self._pick(self.client_cpu_extra_s, model, replication, training, 0.0)

    def probe_ms(self, model: str, replication: str = "sync", training: str = "async") -> float | None:
        """The host's speed probe (harness/machinery/hostspeed.py) during the training runs that this kind of
        run's overhead was fitted on: the key `step_s` reads the overhead from, and only that one;
        None when the overhead is another model's fallback or that key's runs read no probe (no
        baseline of that speed: no correction, never another kind's, which ran at its own)."""
        key = self._key(self.worker_overhead_s, model, replication, training)
        v = self.host_probe_ms.get(key) if key is not None else None
        return float(v) if v is not None else None

    def to_json(self) -> dict:
        return {"network": self.network, "worker_step_s": self.worker_step_s,
                "worker_overhead_s": self.worker_overhead_s, "worker_step_jitter": self.worker_step_jitter,
                "worker_eval_s": self.worker_eval_s,
                "apply_s_per_mb": self.apply_s_per_mb,
                "checkpoint_mb_s": self.checkpoint_mb_s, "node_start_s": self.node_start_s,
                "kill_teardown_s": self.kill_teardown_s, "kill_teardown_samples": self.kill_teardown_samples,
                "node_start_cpu_s": self.node_start_cpu_s, "etcd_wake_s": self.etcd_wake_s,
                "etcd_read_s": self.etcd_read_s,
                "etcd_write_s": self.etcd_write_s, "etcd_start_s": self.etcd_start_s,
                "server_request_s": self.server_request_s, "client_request_s": self.client_request_s,
                "etcd_request_s": self.etcd_request_s, "etcd_client_s": self.etcd_client_s,
                "replicate_request_s": self.replicate_request_s, "replicate_s_per_mb": self.replicate_s_per_mb,
                "replicate_send_s": self.replicate_send_s, "cores": self.cores,
                "push_cpu_extra_s": self.push_cpu_extra_s, "replicate_cpu_extra_s": self.replicate_cpu_extra_s,
                "client_cpu_extra_s": self.client_cpu_extra_s, "copy_idle_cpu_s": self.copy_idle_cpu_s,
                "host_probe_ms": self.host_probe_ms, "measured": self.measured}


__all__ = ["Calibration", "DEFAULT_PATH"]
