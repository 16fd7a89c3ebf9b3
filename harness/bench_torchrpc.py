"""The yardstick: a parameter server on torch.distributed.rpc, written the way its tutorial does.

Rank 0 holds the tensor; rank 1 calls `push(grad)` (SGD step) and `pull()` with rpc_sync in a
loop. Both ranks are processes on loopback.
"""
from __future__ import annotations

import os
import time

from .ports import free_ports

_W = None


def _push(g):
    _W.sub_(0.001 * g)
    return True


def _pull():
    return _W


def _rank(rank: int, port: int, n: int, seconds: float, q) -> None:
    import torch
    import torch.distributed.rpc as rpc

    from psnodes.tuning import tune_malloc

    tune_malloc()     # the same allocator settings as our processes: a fair yardstick
    global _W
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TP_SOCKET_IFNAME="lo",
                      GLOO_SOCKET_IFNAME="lo")
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=8, init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        _W = torch.zeros(n)
    else:
        g = torch.full((n,), 1e-3)
        rpc.rpc_sync("w0", _push, args=(g,))
        rpc.rpc_sync("w0", _pull)
        k, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            rpc.rpc_sync("w0", _push, args=(g,))
            rpc.rpc_sync("w0", _pull)
            k += 1
        q.put(2 * k * n * 4 / 1e6 / (time.perf_counter() - t0))
    rpc.shutdown()


def torch_rpc_mb_s(mb: float, seconds: float) -> float:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_ports(1)[0]
    n = int(mb * (1 << 20) / 4)
    procs = [ctx.Process(target=_rank, args=(r, port, n, seconds, q)) for r in range(2)]
    for p in procs:
        p.start()
    try:
        return float(q.get(timeout=120 + seconds))
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
