"""The closed-form reference for losing a shard's data: an N-copy group as a Markov chain.

Each of the N copies fails at rate `lam` while it is up (and in sync) and each failed copy is
back, caught up, at rate `mu` — repairs run in parallel, one per failed copy. State k is the
number of copies down; the group's data is lost when k reaches N (no copy holds the acked
history; the shard restores from its checkpoint). The chance of that within a time T, starting
with every copy up, is one minus the survival mass of exp(Q T) over the transient states, Q the
generator restricted to k < N. Q is tridiagonal with positive off-diagonal products, so it is
similar to a symmetric matrix: `eigh` of the symmetrized form gives exp(Q T) exactly and stably,
no scipy needed. The simulator's data-loss fraction over many groups must agree with this within
the binomial error of the number of groups (tests/unit/harness/backends/sim/scale/test_scale_markov.py).
"""
from __future__ import annotations

import math

import numpy as np


def generator(n: int, lam: float, mu: float) -> np.ndarray:
    """Q over the transient states k = 0..n-1 (k copies down): k -> k+1 at (n-k) lam, k -> k-1 at k mu."""
    q = np.zeros((n, n))
    for k in range(n):
        up, down = (n - k) * lam, k * mu
        q[k, k] = -(up + down)
        if k + 1 < n:
            q[k, k + 1] = up
        if k > 0:
            q[k, k - 1] = down
    return q


def p_loss(n: int, lam: float, mu: float, t: float) -> float:
    """Probability that all `n` copies are down at some moment within `t` (rates per unit of t)."""
    if n < 1 or t <= 0 or lam <= 0:
        return 0.0
    if mu <= 0:                  # no repair: every copy's own exponential clock must run out
        return (1.0 - math.exp(-lam * t)) ** n
    q = generator(n, lam, mu)
    # D^-1 Q D symmetric for d_k = sqrt(prod of up rates / prod of down rates)
    d = np.ones(n)
    for k in range(1, n):
        d[k] = d[k - 1] * math.sqrt(q[k - 1, k] / q[k, k - 1])
    s = (q * d[:, None]) / d[None, :]            # D Q D^-1
    s = (s + s.T) / 2
    w, v = np.linalg.eigh(s)
    e = (v * np.exp(w * t)) @ v.T                # exp(S t)
    p = (e / d[:, None]) * d[None, :]            # back: exp(Q t) = D^-1 exp(S t) D
    survive = float(p[0].sum())
    return min(1.0, max(0.0, 1.0 - survive))


def mttdl(n: int, lam: float, mu: float) -> float:
    """Mean time to data loss from all-up: the first row of (-Q)^-1 summed."""
    q = generator(n, lam, mu)
    return float(np.linalg.solve(-q, np.ones(n))[0])


def binomial_sigma(p: float, groups: int) -> float:
    """The standard error of a loss fraction measured over `groups` independent groups."""
    return math.sqrt(max(p * (1 - p), 0.0) / max(groups, 1))
