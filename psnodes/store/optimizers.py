"""PS-side optimizers: SGD, Adagrad and Adam, applied per key on the shard.

The shard, not the worker, owns the optimizer so that its state (accumulators, moments) is
replicated with the parameters and survives failover. Every update is a pure function of the
current arrays and the gradient, so replicas that apply the same log reach bit-identical state.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pschaos.psnodes.errors import ConfigError

OPTIMIZERS = ("sgd", "adagrad", "adam")


@dataclass(frozen=True)
class OptimizerConfig:
    """Which optimizer a shard runs, with its hyper-parameters."""

    name: str = "adam"
    lr: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    initial_accumulator: float = 0.1

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise ConfigError(f"optimizer.name={self.name!r} is unknown; use one of {', '.join(OPTIMIZERS)}")
        if not (self.lr > 0 and np.isfinite(self.lr)):
            raise ConfigError(f"optimizer.lr={self.lr!r} must be a positive finite number")

    def slot_names(self) -> tuple[str, ...]:
        """Names of the per-element state arrays this optimizer keeps beside each parameter."""
        return {"sgd": (), "adagrad": ("acc",), "adam": ("m", "v")}[self.name]

    def new_slots(self, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """Fresh state arrays for a parameter of `shape`."""
        fill = {"acc": self.initial_accumulator, "m": 0.0, "v": 0.0}
        return {s: np.full(shape, fill[s], dtype=np.float32) for s in self.slot_names()}


def apply_update(cfg: OptimizerConfig, param: np.ndarray, grad: np.ndarray,
                 slots: dict[str, np.ndarray], step: np.ndarray | int) -> None:
    """Apply one gradient in place. `step` is the 1-based update count (per row for embeddings).

    `param`, `grad` and the slots share a shape; `step` broadcasts against it (a scalar for a
    dense tensor, a column vector for embedding rows).
    """
    if cfg.name == "sgd":
        param -= np.float32(cfg.lr) * grad
    elif cfg.name == "adagrad":
        acc = slots["acc"]
        acc += grad * grad
        param -= np.float32(cfg.lr) * grad / (np.sqrt(acc) + np.float32(cfg.eps))
    else:
        m, v = slots["m"], slots["v"]
        b1, b2 = np.float32(cfg.beta1), np.float32(cfg.beta2)
        m *= b1
        m += (1 - b1) * grad
        v *= b2
        v += (1 - b2) * grad * grad
        t = np.asarray(step, dtype=np.float32)
        mhat_scale = 1.0 / (1.0 - np.power(b1, t))
        vhat_scale = 1.0 / (1.0 - np.power(b2, t))
        param -= (np.float32(cfg.lr) * (m * mhat_scale) /
                  (np.sqrt(v * vhat_scale) + np.float32(cfg.eps))).astype(np.float32)


def stepped(cfg: OptimizerConfig, param: np.ndarray, grad: np.ndarray, slots: dict[str, np.ndarray],
            step: np.ndarray | int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One gradient step on copies: (new param, new slots), the inputs untouched. The store commits
    the result only once every array of the update came out finite, so a refused update changes
    no parameter and no optimizer state; the arithmetic is `apply_update`'s, bit for bit."""
    p = param.copy()
    s = {k: v.copy() for k, v in slots.items()}
    apply_update(cfg, p, grad, s, step)
    return p, s
