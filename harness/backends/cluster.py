"""The cluster a scenario asks for (its `cluster:` block): what every backend takes to start one.

It sits with the backends, below the scenario schema, so that a backend never imports the run
pipeline; the scenario schema (harness/run/scenario.py) builds on it.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pschaos.harness.backends.detector import DetectorSpec


class Strict(BaseModel):
    """A model that refuses unknown fields: a typo in a scenario file is an error, not a default."""

    model_config = ConfigDict(extra="forbid")


class ClusterSpec(Strict):
    shards: int = Field(2, ge=1, le=64)
    # shard groups given addresses (and links) at start, so shards can be added while training;
    # 0 = shards, raised by the schedule's scale-out-shards faults (docs/internals/elastic-shards.md)
    max_shards: int = Field(0, ge=0, le=64)
    copies: int = Field(3, ge=1, le=9)
    workers: int = Field(2, ge=0, le=64)
    replication: Literal["sync", "async"] = "sync"
    training: Literal["async", "bsp", "ssp"] = "async"
    staleness: int = Field(2, ge=0)
    # BSP/SSP: seconds a dead worker still holds the barrier (its registration lease's TTL, whole
    # seconds as etcd takes them): pschaos.psnodes.config.ClusterConfig.member_ttl_s
    member_ttl_s: int = Field(2, ge=1, le=60)
    # BSP/SSP: a config worker not registered this long after the primaries began watching is
    # dropped from the barrier (ClusterConfig.member_join_grace_s); a worker not admitted within
    # member_join_timeout_s gives up with a fatal train-error
    member_join_grace_s: float = Field(60.0, gt=0)
    member_join_timeout_s: float = Field(30.0, gt=0)
    model: Literal["mlp", "widedeep"] = "mlp"
    # a read-only evaluation pass (held-out batch, cold-start ids for widedeep) after every N-th
    # step of each worker, pulling and never pushing, as an evaluator or a server reads a PS; 0: none
    eval_every: int = 0
    device: str = "auto"
    gpus: int | list[str] | None = None          # docker: GPUs per worker, a count or ids (None: all)
    optimizer: Literal["sgd", "adagrad", "adam"] = "adam"
    lr: float = Field(0.01, gt=0)
    checkpoint_interval_s: float = Field(2.0, gt=0)
    max_lag: int = Field(256, ge=1)
    min_isr: int = Field(0, ge=0, le=9)          # 0: 2 when copies >= 3, else 1
    network: Literal["auto", "proxied", "direct"] = "auto"   # auto: proxied when a link fault is scheduled
    detector: DetectorSpec = Field(default_factory=DetectorSpec)   # how replicas suspect their primary
    # --backend docker only: the image the containers run. Left out: the self-contained image
    # pschaos builds from its wheel; "host": the host's paths bind-mounted (fast, for developing
    # pschaos); any other name: the user's own image (harness/backends/docker/plan.py)
    image: str | None = Field(None, min_length=1, max_length=255, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]*$")

    def membership_config(self) -> dict:
        """The ClusterConfig fields of worker membership, as every backend passes them: nodes keep
        membership only when the workers train BSP/SSP (`barrier`)."""
        return {"barrier": self.training != "async", "member_ttl_s": self.member_ttl_s,
                "member_join_grace_s": self.member_join_grace_s, "member_join_timeout_s": self.member_join_timeout_s}

    @field_validator("eval_every")
    @classmethod
    def eval_cadence(cls, v: int) -> int:
        if v < 0:
            raise ValueError(f"eval_every={v}: give the number of training steps between evaluation "
                             "passes (e.g. 25), or 0 for none")
        return v

    @field_validator("gpus")
    @classmethod
    def some_gpus(cls, v: int | list[str] | None) -> int | list[str] | None:
        """A request for no GPU (0, an empty list) or a negative count other than -1 is no GPU
        request the engine can serve: refused here, not at container start."""
        if isinstance(v, int) and not (v == -1 or v >= 1):
            raise ValueError(f"gpus={v}: give a count of at least 1, -1 for every GPU, or device ids "
                             "(e.g. [\"0\", \"2\"]); leave gpus out for all")
        if isinstance(v, list) and (not v or any(not str(g).strip() for g in v)):
            raise ValueError(f"gpus={v!r}: give at least one device id (e.g. [\"0\"]), or leave gpus out for all")
        return v
