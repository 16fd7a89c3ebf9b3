"""pschaos' step shim: the few calls a training script makes so pschaos can judge it black-box.

Standard library only, one file on the job's PYTHONPATH, so any Python that runs the job
imports it; outside a pschaos run (no PSCHAOS_EVENTS_DIR) every call does nothing. It records,
a JSON line each: every logical update's invoke and acknowledgement (`step`: process,
incarnation, step), a resume (`job-resume`), each checkpoint write (start, commit, done) and
the final model (`job-final`: its digest and the audit variable, which the script raises by one
per update through the system's own update path). docs/training-jobs.md has the contract.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from typing import Any, Callable, Iterable, Iterator


class Shim:
    def __init__(self, node: str | None = None) -> None:
        folder = os.environ.get("PSCHAOS_EVENTS_DIR")
        self.node = node or os.environ.get("PSCHAOS_NODE") or f"rank-{os.environ.get('RANK', '0')}"
        # the harness's restarts of the whole job, then the launcher's own (torchrun's)
        self.incarnation = f"{os.environ.get('PSCHAOS_INCARNATION', '0')}.{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        path = os.path.join(folder or "", self.node + ".jsonl")
        self.f = open(path, "a", buffering=1) if folder else None
        if self.f is not None and not _ends_clean(path):
            self.f.write("\n")        # the last incarnation died mid-line: keep this one's lines whole
        self._write("info", "job-start", {"pid": os.getpid()})    # before setup: a start that never trains counts

    def _write(self, type_: str, f: str, value: dict, op_id: str | None = None) -> None:
        if self.f is None:
            return
        ev = {"t": time.time(), "node": self.node, "type": type_, "f": f,
              "value": {"worker": self.node, "incarnation": self.incarnation, **value}}
        self.f.write(json.dumps({**ev, **({"op_id": op_id} if op_id is not None else {})}) + "\n")

    def started(self, resumed_from: int = 0, **facts: Any) -> None:
        """Call once the job is set up: `resumed_from` is the step its checkpoint holds (0: fresh)."""
        self._write("info", "job-resume", {"step": int(resumed_from), "pid": os.getpid(), **facts})

    @contextlib.contextmanager
    def step(self, n: int) -> Iterator[dict]:
        """Wrap logical update `n` (1-based): invoke on entry, acknowledged when the block ends
        without an exception (put the optimizer's step, after the all-reduce, inside it). Set
        `loss` in the yielded dict to have it recorded."""
        oid = f"{self.node}/{self.incarnation}/s{n}"
        out: dict = {}
        self._write("invoke", "step", {"step": int(n)}, oid)
        try:
            yield out
        except BaseException as e:
            self._write("info", "step", {"step": int(n), "error": f"{e.__class__.__name__}: {e}"[:200]}, oid)
            raise
        self._write("ok", "step", {"step": int(n), **({"loss": float(out["loss"])} if "loss" in out else {})}, oid)

    @contextlib.contextmanager
    def checkpoint(self, n: int) -> Iterator[Callable[[], None]]:
        """Wrap the write of the checkpoint that holds step `n`, and call what it yields just before
        the write becomes the one a restart loads (the rename): a kill timed to the checkpoint
        lands between start and that commit (PSCHAOS_CHECKPOINT_HOLD_S, set by the harness for
        such a kill only, holds the commit open that long)."""
        self._write("info", "checkpoint", {"step": int(n), "phase": "start", "pid": os.getpid()})

        def commit() -> None:
            time.sleep(float(os.environ.get("PSCHAOS_CHECKPOINT_HOLD_S") or 0))
            self._write("info", "checkpoint", {"step": int(n), "phase": "commit"})
        yield commit
        self._write("info", "checkpoint", {"step": int(n), "phase": "done"})

    def final(self, steps: int, audit: float, digest: str, loss: float | None = None,
              values: list[float] | None = None) -> None:
        """The trained model: its steps, audit, digest, and (for a tolerance) its values flattened."""
        self._write("info", "job-final", {"steps": int(steps), "audit": float(audit), "digest": digest,
                                          **({"loss": float(loss)} if loss is not None else {}),
                                          **({"values": [float(v) for v in values]} if values is not None else {})})

    def close(self) -> None:
        f, self.f = self.f, None
        if f is not None:
            f.close()


def _ends_clean(path: str) -> bool:
    try:
        with open(path, "rb") as g:
            g.seek(-1, os.SEEK_END)
            return g.read(1) == b"\n"
    except OSError:
        return True            # empty


def digest(arrays: Iterable[Any]) -> str:
    """sha256 over the bytes of each array (a tensor's `.numpy()`, a NumPy array, bytes), in order:
    bit-identical models have equal digests."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(a if isinstance(a, (bytes, bytearray)) else a.tobytes())
    return h.hexdigest()
