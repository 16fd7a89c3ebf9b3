"""What the fuzzer observes of a cluster between calls: every copy's state, and whether it is whole.

A hostile request must leave a shard exactly as it was unless it was accepted, so the state of
a copy is everything its Status reports that a request could change: role, epoch, seq and the
epoch of its last entry, the checksum of parameters and optimizer state, the applied
idempotency keys, the audit tensor's counts and the push counter, and the traces a repair
leaves: the log's first seq (a copy that took a snapshot starts its log there) and where it
was restored from. A replica that a request wiped is repaired by its primary within a
heartbeat or two, so the target copy is read first, and the traces outlive the repair. The ISR
is left out: it moves on its own with replica lag, not with requests.
"""
from __future__ import annotations

import time
from typing import Any

FIELDS = ("role", "epoch", "seq", "seq_epoch", "checksum", "applied_json", "audit_json", "pushes", "log_start",
          "restored_from")
CONTENT = ("seq", "checksum", "applied_json", "audit_json", "pushes")   # what an applied update moves

State = dict[str, dict[str, Any] | None]      # node -> fields (None: it did not answer)


def read_state(be: Any, first: str | None = None) -> State:
    """Every copy's state, `first` read first; the dict is in node order either way."""
    got: State = {}
    for n in sorted(be.nodes(), key=lambda n: n != first):
        st = be.status(n, checksum=True, applied=True, audit=True, timeout=5.0)   # a loaded machine is slow
        got[n] = None if st is None else {f: getattr(st, f) for f in FIELDS}
    return {n: got[n] for n in be.nodes()}


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 24 else s[:10] + "..." + s[-6:]


def diff(before: State, after: State, fields: tuple[str, ...] = FIELDS) -> list[str]:
    """Each change, as `node: field old->new`."""
    out = []
    for n in sorted(set(before) | set(after)):
        b, a = before.get(n), after.get(n)
        if b is None or a is None:
            if (b is None) != (a is None):
                out.append(f"{n}: {'answers' if a is not None else 'stopped answering'} Status")
            continue
        out += [f"{n}: {f} {_short(b[f])}->{_short(a[f])}" for f in fields if b[f] != a[f]]
    return out


def describe(state: State) -> str:
    """`node seq N checksum` per copy (or `silent`), to say how copies differ."""
    parts = []
    for n, v in state.items():
        parts.append(f"{n} silent" if v is None else f"{n} {v['role']} epoch {v['epoch']} seq {v['seq']} "
                                                      f"{v['checksum'][:8]}")
    return ", ".join(parts)


def converged(state: State) -> bool:
    """Every copy answers and all hold the same seq and checksum."""
    vals = list(state.values())
    return all(v is not None for v in vals) and len({(v["seq"], v["checksum"]) for v in vals}) == 1


def view(state: State) -> tuple[int, tuple[str, ...]]:
    """(highest epoch, copies that call themselves primary): what a failover changes."""
    live = {n: v for n, v in state.items() if v is not None}
    return (max((v["epoch"] for v in live.values()), default=0),
            tuple(sorted(n for n, v in live.items() if v["role"] == "primary")))


def healthy(be: Any, state: State) -> str:
    """'' when the shard is whole: every copy alive and answering, one primary, one epoch, all
    equal; else what is wrong."""
    dead = [n for n in be.nodes() if not be.alive(n)]
    if dead:
        return f"not running: {', '.join(dead)}"
    silent = [n for n, v in state.items() if v is None]
    if silent:
        return f"not answering Status: {', '.join(silent)}"
    epochs = {v["epoch"] for v in state.values()}
    prim = view(state)[1]
    if len(epochs) != 1 or len(prim) != 1:
        return f"not one primary at one epoch: {describe(state)}"
    if not converged(state):
        return "copies differ: " + describe(state)
    return ""


def wait_state(be: Any, ok: Any, timeout: float, poll: float = 0.05) -> tuple[State, bool]:
    """Read the state until `ok(state)` or `timeout`; returns the last state and whether it held."""
    end = time.monotonic() + timeout
    while True:
        st = read_state(be)
        if ok(st):
            return st, True
        if time.monotonic() >= end:
            return st, False
        time.sleep(poll)
