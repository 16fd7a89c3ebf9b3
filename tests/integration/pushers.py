"""A background pusher that records which pushes were acknowledged (the client's view)."""
from __future__ import annotations

import threading
import time

import numpy as np

from pschaos.psnodes.store.applied import idem_key
from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.wire.codec import rows_to_pb, tensor_to_pb
from pschaos.psnodes.proto import ps_pb2


class Pusher(threading.Thread):
    def __init__(self, client: PSClient, worker: str = "worker-0", ids: bool = False, shard: int = 0) -> None:
        super().__init__(daemon=True)
        self.c, self.worker, self.ids, self.shard = client, worker, ids, shard
        self.acked: list[tuple[int, int, int, str]] = []   # (req_id, epoch, seq, node)
        self.failed: list[int] = []
        self.halt = threading.Event()
        self.rng = np.random.default_rng(0)

    def update(self, req: int) -> ps_pb2.Update:
        u = ps_pb2.Update(worker=self.worker, req_id=req, dense=[tensor_to_pb("w", np.full(64, 1e-3))])
        if self.ids:
            ids = self.rng.integers(0, 100_000, 64)
            u.sparse.append(rows_to_pb("emb", ids, np.full((64, 8), 1e-3), 8))
        return u

    def run(self) -> None:
        req = 0
        while not self.halt.is_set():
            req += 1
            u = self.update(req)
            try:
                rep = self.c.call(self.shard, "Push", lambda ep: ps_pb2.PushRequest(shard=self.shard, epoch=ep,
                                                                                    update=u))
                self.acked.append((req, rep.epoch, rep.seq, rep.node))
            except Exception:
                self.failed.append(req)
            time.sleep(0.002)

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


#: the applied-set key of the Pusher's updates (raw Updates carry incarnation 0)
PUSHER_KEY = idem_key("worker-0", 0)


def applied_contains(ranges: list[list[int]], x: int) -> bool:
    return any(lo <= x <= hi for lo, hi in ranges)


def start_load(be, warmup: float = 1.0, **kw) -> Pusher:
    """Initialise the dense tensor the pusher writes, start it, and let it run `warmup` seconds."""
    be.client.init_dense({"w": np.zeros(64, dtype=np.float32)})
    p = Pusher(be.client, **kw)
    p.start()
    time.sleep(warmup)
    return p
