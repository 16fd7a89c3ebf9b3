"""A ScaleSpec from plain settings (command-line flags or a sweep spec's mapping), with errors
that name the field and the fix."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.sim.scale.failures import failures
from pschaos.harness.backends.sim.scale.params import ScaleSpec

FAILURE_KEYS = ("failures", "worker_mtbf", "worker_repair", "server_mtbf", "server_repair", "etcd_mtbf",
                "etcd_repair")
SPEC_KEYS = tuple(f.name for f in fields(ScaleSpec) if f.name != "failures")
KEYS = SPEC_KEYS + FAILURE_KEYS


def build(settings: Mapping[str, Any], where: str = "") -> ScaleSpec:
    """`settings`: ScaleSpec fields plus `failures` (a preset name) and the four distribution
    overrides (`worker_mtbf: exp:6335`, hours; `server_repair: exp:1800`, seconds)."""
    at = f"{where}: " if where else ""
    unknown = sorted(set(settings) - set(KEYS))
    if unknown:
        raise HarnessError(f"{at}unknown setting(s) {unknown}; known: {', '.join(KEYS)}")
    kw = {k: v for k, v in settings.items() if k in SPEC_KEYS and v is not None}
    for k in ("workers", "shards", "copies", "seed", "target_steps", "max_lag", "min_isr", "shards_per_step"):
        if k in kw and not (isinstance(kw[k], int) and not isinstance(kw[k], bool)):
            raise HarnessError(f"{at}{k}={kw[k]!r} must be a whole number")
    for k in ("hours", "param_mb", "heartbeat_s", "suspect_s", "candidate_window_s", "lease_ttl_s",
              "checkpoint_interval_s", "heartbeat_loss", "server_request_s"):
        if k in kw and not isinstance(kw[k], (int, float)) or k in kw and isinstance(kw[k], bool):
            raise HarnessError(f"{at}{k}={kw[k]!r} must be a number")
    try:
        fl = failures(str(settings.get("failures") or "llama3"), *(settings.get(k) and str(settings[k])
                                                                  for k in FAILURE_KEYS[1:]))
        spec = ScaleSpec(**kw, failures=fl)
        spec.check()
    except HarnessError as e:
        raise HarnessError(f"{at}{e}") from None
    return spec
