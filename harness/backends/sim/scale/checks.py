"""Every setting of a scale run checked before it runs: errors name the field, the value and the
fix (a bad value must not become a traceback mid-run, a run that never ends, or a silent 0)."""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from pschaos.psnodes.core.detector import DETECTORS

from pschaos.harness.errors import HarnessError

if TYPE_CHECKING:
    from pschaos.harness.backends.sim.scale.params import ScaleSpec

TARGET = re.compile(r"^(primary|replica)\(shard=(\d+)\)$|^shard-(\d+)/(\d+)$|^worker-(\d+)$|^etcd$")
MAX_HOURS = 24 * 366


def _finite(name: str, v: Any, low: float, low_ok: bool = False, high: float = math.inf) -> None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and \
        (v >= low if low_ok else v > low) and v <= high
    if not ok:
        bound = f">= {low:g}" if low_ok else f"> {low:g}"
        raise HarnessError(f"{name}={v!r} must be a finite number {bound}" + (f" and <= {high:g}" if high < math.inf
                                                                              else ""))


def check(spec: "ScaleSpec", model_bytes: dict) -> None:
    for f in ("workers", "shards", "copies"):
        v = getattr(spec, f)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise HarnessError(f"{f}={v!r} must be a whole number >= 1")
    if not isinstance(spec.seed, int) or isinstance(spec.seed, bool) or spec.seed < 0:
        raise HarnessError(f"seed={spec.seed!r} must be a whole number >= 0")
    _finite("hours", spec.hours, 0.0, high=MAX_HOURS)
    if spec.model not in model_bytes:
        raise HarnessError(f"model={spec.model!r}: use one of {sorted(model_bytes)}")
    if spec.replication not in ("sync", "async"):
        raise HarnessError(f"replication={spec.replication!r}: use sync or async")
    if spec.training not in ("async", "bsp"):
        raise HarnessError(f"training={spec.training!r}: use async or bsp (SSP is not modelled at this level)")
    if spec.shards_per_step is not None and not (isinstance(spec.shards_per_step, int)
                                                 and 1 <= spec.shards_per_step <= spec.shards):
        raise HarnessError(f"shards_per_step={spec.shards_per_step!r} must be between 1 and shards={spec.shards} "
                           f"(leave it out for a dense model: every step touches every shard)")
    if spec.min_isr is not None and not (isinstance(spec.min_isr, int) and 1 <= spec.min_isr <= spec.copies):
        raise HarnessError(f"min_isr={spec.min_isr!r} must be between 1 and copies={spec.copies}")
    if spec.param_mb is not None:
        _finite("param_mb", spec.param_mb, 0.0)
    for f in ("heartbeat_s", "suspect_s", "checkpoint_interval_s", "lease_ttl_s"):
        _finite(f, getattr(spec, f), 0.0)
    _finite("candidate_window_s", spec.candidate_window_s, 0.0, low_ok=True)
    if spec.server_request_s is not None:
        _finite("server_request_s", spec.server_request_s, 0.0, low_ok=True)
    if spec.detector not in DETECTORS:
        raise HarnessError(f"detector={spec.detector!r} is unknown; use 'phi' (adaptive, psnodes' default) "
                           "or 'fixed' (suspect_s of silence)")
    if spec.suspect_s <= spec.heartbeat_s:
        raise HarnessError(f"suspect_s={spec.suspect_s} must be longer than heartbeat_s={spec.heartbeat_s} "
                           f"(a replica would suspect between two heartbeats)")
    _finite("heartbeat_loss", spec.heartbeat_loss, 0.0, low_ok=True, high=0.99)
    if spec.target_steps is not None and not (isinstance(spec.target_steps, int) and spec.target_steps > 0):
        raise HarnessError(f"target_steps={spec.target_steps!r} must be a whole number > 0")
    if not isinstance(spec.max_lag, int) or spec.max_lag < 0:
        raise HarnessError(f"max_lag={spec.max_lag!r} must be a whole number >= 0")
    check_schedule(spec)


def check_schedule(spec: "ScaleSpec") -> None:
    if not isinstance(spec.schedule, list):
        raise HarnessError(f"schedule={spec.schedule!r} must be a list of {{at_s, kind, target}}")
    for i, f in enumerate(spec.schedule):
        at = f"schedule[{i}]"
        if not isinstance(f, dict) or set(f) - {"at_s", "kind", "target", "restart_after_s"}:
            raise HarnessError(f"{at}={f!r}: write {{at_s, kind: kill|restart, target, restart_after_s}}")
        _finite(f"{at}.at_s", f.get("at_s"), 0.0, low_ok=True)
        if f.get("kind") not in ("kill", "restart"):
            raise HarnessError(f"{at}.kind={f.get('kind')!r}: use kill or restart")
        if f.get("restart_after_s") is not None:
            _finite(f"{at}.restart_after_s", f["restart_after_s"], 0.0, low_ok=True)
        m = TARGET.match(str(f.get("target", "")))
        if not m:
            raise HarnessError(f"{at}.target={f.get('target')!r}: use primary(shard=I), replica(shard=I), "
                               f"shard-I/R, worker-J or etcd")
        shard = m.group(2) or m.group(3)
        if shard is not None and int(shard) >= spec.shards:
            raise HarnessError(f"{at}.target={f['target']!r}: there are {spec.shards} shards (0..{spec.shards - 1})")
        if m.group(4) is not None and int(m.group(4)) >= spec.copies:
            raise HarnessError(f"{at}.target={f['target']!r}: there are {spec.copies} copies a shard")
        if m.group(5) is not None and int(m.group(5)) >= spec.workers:
            raise HarnessError(f"{at}.target={f['target']!r}: there are {spec.workers} workers")
