"""Per-request limits of a shard server: what one request may ask of a shard.

A node holds its shard's lock while it applies a push or answers a pull, and replicas suspect
their primary after `suspect_s` without a heartbeat (which needs the same lock). So no single
request may be large enough to hold the lock that long, and no gradient may be large enough to
drive the optimizer state to infinity. Each limit is refused with a status code and a message
that names the field, the limit and the config key that raises it (`limits` in the cluster
config, e.g. `"limits": {"max_ids": 200000}`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from pschaos.psnodes.errors import ConfigError


@dataclass(frozen=True)
class Limits:
    max_dims: int = 8                    # dimensions of one dense tensor (numpy's own cap is 64)
    max_elements: int = 1 << 22          # float32 elements of one dense tensor (16 MiB; an Adam step ~0.2 s)
    max_request_elements: int = 1 << 22  # float32 elements of one push, dense and sparse together
    max_ids: int = 65536                 # embedding ids of one pull or push, all tables together
    max_tensors: int = 4096              # dense tensors (or names) of one request
    max_abs_grad: float = 1e6            # a larger gradient component is refused, not clipped
    max_name_bytes: int = 256            # a parameter, table or worker name

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
                raise ConfigError(f"limits.{f.name}={v!r} must be a positive number")
        if not self.max_abs_grad <= 1e18:
            raise ConfigError(f"limits.max_abs_grad={self.max_abs_grad} must be finite and at most 1e18 (a larger "
                              "gradient overflows float32 optimizer state)")
        if self.max_dims > 32:
            raise ConfigError(f"limits.max_dims={self.max_dims} must be at most 32 (numpy allows 64 in all)")

    @classmethod
    def from_config(cls, d: dict | None) -> "Limits":
        """The limits of a config's `limits` mapping; unknown keys are an error naming the known ones."""
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"limits: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)


#: the defaults, for code that checks without a cluster config (tests, the client's decoder)
DEFAULT = Limits()
