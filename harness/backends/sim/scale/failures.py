"""How nodes fail and come back: time-between-failures and repair-time distributions, and presets
taken from published fleet data.

A distribution is written `exp:MEAN`, `fixed:VALUE` or `lognormal:MEDIAN:SIGMA`, in hours for
MTBF and seconds for repair (the units people quote them in). Presets (docs/internals/scale.md cites them):

- `llama3`: Meta's Llama 3 405B pre-training ("The Llama 3 Herd of Models", 2024):
  419 unexpected interruptions in 54 days on 16,384 H100 GPUs in 2,048 servers of 8. A worker is
  one 8-GPU server: MTBF = 54 x 24 x 2,048 / 419 = 6,335 h. 58.7% of the interruptions were GPU
  faults (faulty GPU, HBM3, SRAM, GPU system processor, NVLink...), which a CPU parameter-server
  host does not have: a PS host fails at the other 41.3%, MTBF 15,340 h.
- `osdi14`: Li et al., "Scaling Distributed Machine Learning with the Parameter Server" (OSDI
  2014), Table 1: of the jobs of about 1,000 machine-hours in a three-month period, 13.7% failed,
  i.e. a machine MTBF of -1,000 / ln(1 - 0.137) = 6,790 h, for workers and servers alike (the
  100-hour jobs give 1,240 h and the 10,000-hour ones 35,200 h: failures are not memoryless;
  choose your row with `--worker-mtbf` / `--server-mtbf`).

Neither source gives repair times; the presets use 10 minutes for a worker (a replacement host
takes its place) and 30 minutes for a parameter-server host, both exponential, and say so. Nor
do they give etcd's: no preset fails it; `--etcd-mtbf` / `--etcd-repair` (default exp:60 s) do.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pschaos.harness.errors import HarnessError


@dataclass(frozen=True)
class Dist:
    """A positive random duration: `kind` exp (mean), fixed (value) or lognormal (median, sigma)."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str, field: str) -> "Dist":
        parts = str(text).split(":")
        try:
            vals = [float(p) for p in parts[1:]]
        except ValueError:
            vals = []
        want = {"exp": 1, "fixed": 1, "lognormal": 2}
        if parts[0] not in want or len(vals) != want[parts[0]] or any(v <= 0 for v in vals[:1]) \
                or any(v < 0 or not math.isfinite(v) for v in vals):
            raise HarnessError(f"{field}={text!r}: write exp:MEAN, fixed:VALUE or lognormal:MEDIAN:SIGMA "
                               f"with a positive, finite MEAN/VALUE/MEDIAN (e.g. exp:6335)")
        return cls(parts[0], *vals)

    @property
    def mean(self) -> float:
        if self.kind == "lognormal":
            return self.a * math.exp(self.b ** 2 / 2)
        return self.a

    def draw(self, rng: np.random.Generator, n: int | None = None, scale: float = 1.0):
        """`n` draws (one float when n is None), times `scale` (hours to seconds)."""
        if self.kind == "exp":
            v = rng.exponential(self.a, n)
        elif self.kind == "fixed":
            v = np.full(n, self.a) if n is not None else self.a
        else:
            v = self.a * np.exp(self.b * rng.standard_normal(n))
        return v * scale

    def text(self) -> str:
        return f"{self.kind}:{self.a:g}" + (f":{self.b:g}" if self.kind == "lognormal" else "")


@dataclass(frozen=True)
class Failures:
    """Per node kind: time between failures (hours) and repair time (seconds)."""

    name: str
    worker_mtbf_h: Dist | None
    worker_repair_s: Dist
    server_mtbf_h: Dist | None
    server_repair_s: Dist
    source: str = ""
    etcd_mtbf_h: Dist | None = None       # the control plane (no preset's source gives it: yours)
    etcd_repair_s: Dist = Dist("exp", 60.0)

    def to_json(self) -> dict:
        def t(d: Dist | None) -> str | None:
            return None if d is None else d.text()
        return {"preset": self.name, "worker_mtbf_h": t(self.worker_mtbf_h), "worker_repair_s": t(self.worker_repair_s),
                "server_mtbf_h": t(self.server_mtbf_h), "server_repair_s": t(self.server_repair_s),
                "etcd_mtbf_h": t(self.etcd_mtbf_h), "etcd_repair_s": t(self.etcd_repair_s), "source": self.source}


LLAMA3_HOST_MTBF_H = 54 * 24 * 2048 / 419                # every cause: one 8-GPU server
LLAMA3_PS_MTBF_H = LLAMA3_HOST_MTBF_H / (1 - 0.587)       # without the GPU faults
OSDI14_MTBF_H = -1000 / math.log(1 - 0.137)

PRESETS: dict[str, Failures] = {
    "none": Failures("none", None, Dist("fixed", 600.0), None, Dist("fixed", 1800.0), "no failures"),
    "llama3": Failures("llama3", Dist("exp", LLAMA3_HOST_MTBF_H), Dist("exp", 600.0),
                       Dist("exp", LLAMA3_PS_MTBF_H), Dist("exp", 1800.0),
                       "Llama 3 405B pre-training: 419 unexpected interruptions in 54 days on 16,384 GPUs "
                       "(Meta, The Llama 3 Herd of Models, 2024)"),
    "osdi14": Failures("osdi14", Dist("exp", OSDI14_MTBF_H), Dist("exp", 600.0),
                       Dist("exp", OSDI14_MTBF_H), Dist("exp", 1800.0),
                       "13.7% of ~1,000 machine-hour jobs failed (Li et al., OSDI 2014, Table 1)"),
}


def failures(preset: str, worker_mtbf: str | None = None, worker_repair: str | None = None,
             server_mtbf: str | None = None, server_repair: str | None = None, etcd_mtbf: str | None = None,
             etcd_repair: str | None = None) -> Failures:
    """A preset with any of its distributions replaced (per node kind: workers, parameter-server
    hosts, etcd)."""
    if preset not in PRESETS:
        raise HarnessError(f"--failures={preset!r} is not a preset; use one of {sorted(PRESETS)}")
    p = PRESETS[preset]
    given = (worker_mtbf, worker_repair, server_mtbf, server_repair, etcd_mtbf, etcd_repair)
    return Failures(
        preset if not any(given) else f"{preset}+custom",
        Dist.parse(worker_mtbf, "worker_mtbf") if worker_mtbf else p.worker_mtbf_h,
        Dist.parse(worker_repair, "worker_repair") if worker_repair else p.worker_repair_s,
        Dist.parse(server_mtbf, "server_mtbf") if server_mtbf else p.server_mtbf_h,
        Dist.parse(server_repair, "server_repair") if server_repair else p.server_repair_s,
        p.source,
        Dist.parse(etcd_mtbf, "etcd_mtbf") if etcd_mtbf else p.etcd_mtbf_h,
        Dist.parse(etcd_repair, "etcd_repair") if etcd_repair else p.etcd_repair_s)
