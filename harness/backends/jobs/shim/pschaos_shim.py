"""pschaos' step shim: the few calls a training script makes so pschaos can judge it black-box.

Standard library only, one file on the job's PYTHONPATH, so any Python that runs the job (its
own virtual environment, another framework) imports it. Outside a pschaos run (no
PSCHAOS_EVENTS_DIR) every call does nothing.

What it records, one JSON line per event in the run's history: each logical update's invoke
and its acknowledgement (`step`), with the process, its incarnation and the step; a resume
from a checkpoint (`job-resume`); each checkpoint write (`checkpoint`, start and done); and the
final model (`job-final`: its digest and the audit variable's value). The audit variable is
the script's: a number kept in the model and raised by exactly one per logical update through
the system's own update path, so lost and doubled updates are judged from the final model,
never from the system's bookkeeping. docs/training-jobs.md has the whole contract.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from typing import Any, Iterable, Iterator


class Shim:
    def __init__(self, node: str | None = None) -> None:
        folder = os.environ.get("PSCHAOS_EVENTS_DIR")
        self.node = node or os.environ.get("PSCHAOS_NODE") or f"rank-{os.environ.get('RANK', '0')}"
        # the harness's restarts of the whole job, then the launcher's own (torchrun's restart count)
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
    def checkpoint(self, n: int) -> Iterator[None]:
        """Wrap the write of the checkpoint that holds step `n`: a kill can be timed to it."""
        self._write("info", "checkpoint", {"step": int(n), "phase": "start"})
        yield
        self._write("info", "checkpoint", {"step": int(n), "phase": "done"})

    def final(self, steps: int, audit: float, digest: str, loss: float | None = None,
              values: list[float] | None = None) -> None:
        """The trained model: the steps it holds, its audit variable, a digest of its values, and
        (for a tolerance instead of bit-identity) its values flattened, for a small model."""
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
