"""A scenario's `cluster.detector`: how the replicas of psnodes suspect their primary.

    cluster:
      detector: {kind: phi, threshold: 8, floor_s: 0.15}

Fields left out keep psnodes' defaults (pschaos.psnodes.config.ClusterConfig, documented in docs/internals/notebook.md's
failure detector section); `kind: fixed` brings back the old fixed timeout (`suspect_s`) for
comparison. The whole block is checked here by psnodes' own config rules, so a floor shorter
than a heartbeat is refused when the scenario loads, not when the nodes start.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.errors import ConfigError

# scenario field -> ClusterConfig field
FIELDS = {"threshold": "phi_threshold", "floor_s": "phi_floor_s", "pause_s": "phi_pause_s",
          "min_std_s": "phi_min_std_s", "window": "phi_window", "probe_s": "probe_s", "probe_paths": "probe_paths",
          "probe_hold_s": "probe_hold_s", "suspect_s": "suspect_s",
          "follower_margin_s": "follower_margin_s"}


class DetectorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["phi", "fixed"] = "phi"
    threshold: float | None = None      # phi at which a replica suspects (psnodes default 8)
    floor_s: float | None = None        # never suspect before this much silence
    pause_s: float | None = None        # acceptable pause added to the mean gap
    min_std_s: float | None = None      # least standard deviation of the gaps
    window: int | None = None           # gaps remembered
    probe_s: float | None = None        # ask the primary before standing, at least this long (0: never)
    probe_paths: int | None = None      # over this many connections at once (any answer holds)
    probe_hold_s: float | None = None   # a primary that answers holds a replica back this much silence at most
    suspect_s: float | None = None      # kind fixed: the timeout (also the ISR drop wait)
    follower_margin_s: float | None = None   # async acks stop this long before the floor

    def config_fields(self) -> dict:
        """The ClusterConfig fields this block sets."""
        out: dict = {"detector": self.kind}
        out.update({FIELDS[k]: v for k, v in self.model_dump(exclude={"kind"}).items() if v is not None})
        return out

    @model_validator(mode="after")
    def valid_for_psnodes(self) -> "DetectorSpec":
        try:
            ClusterConfig(cluster_id="check", etcd="", **self.config_fields())
        except (ConfigError, TypeError) as e:
            msg = str(e)
            for mine, theirs in FIELDS.items():
                msg = msg.replace(f"{theirs}=", f"{mine}=")
            raise ValueError(msg) from None
        return self
