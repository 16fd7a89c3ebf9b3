"""The yardstick: a parameter server on torch.distributed.rpc, written the way its tutorial does.

Rank 0 holds the tensor; rank 1 calls `push(grad)` (SGD step) and `pull()` with rpc_sync in a
loop. Both ranks are processes on loopback. A pair stays up for the whole benchmark and measures
one timed loop per round on request, so its rounds interleave with ours (machine drift hits both
alike) without paying a torch import and an RPC handshake per round.

Two transports: TensorPipe's default (shared memory and cross-memory-attach between processes of
one host, which no network fault can touch) and TCP only (`_transports=["uv"]`, with the `basic`
channel so tensor payloads also cross the socket): the one that crosses machines.
"""
from __future__ import annotations

import os
import queue
import time
import warnings

from pschaos.harness.machinery.ports import free_ports

_W = None
TCP_TRANSPORTS = ["uv"]
TCP_CHANNELS = ["basic"]


def _push(g):
    _W.sub_(0.001 * g)
    return True


def _pull():
    return _W


def _rank(rank: int, port: int, n: int, tcp_only: bool, cmds, results) -> None:
    import torch
    import torch.distributed.rpc as rpc

    from pschaos.psnodes.server.tuning import tune_malloc

    tune_malloc()     # the same allocator settings as our processes: a fair yardstick
    warnings.filterwarnings("ignore", message="You are using a Backend")   # torch's own init_rpc internals
    global _W
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TP_SOCKET_IFNAME="lo",
                      GLOO_SOCKET_IFNAME="lo")
    extra = {"_transports": TCP_TRANSPORTS, "_channels": TCP_CHANNELS} if tcp_only else {}
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=8, init_method=f"tcp://127.0.0.1:{port}", **extra)
    try:
        rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    except Exception as e:                          # say why instead of a silent timeout
        results.put(("error", f"rank {rank}: init_rpc failed: {e}"))
        return
    if rank == 0:
        _W = torch.zeros(n)
    else:
        g = torch.full((n,), 1e-3)
        rpc.rpc_sync("w0", _push, args=(g,))         # warm-up: connections, first allocations
        rpc.rpc_sync("w0", _pull)
        results.put(("ready", 0.0))
        while (seconds := cmds.get()) is not None:
            k, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                rpc.rpc_sync("w0", _push, args=(g,))
                rpc.rpc_sync("w0", _pull)
                k += 1
            results.put(("ok", 2 * k * n * 4 / 1e6 / (time.perf_counter() - t0)))
    rpc.shutdown()                                   # a barrier: rank 0 waits here for rank 1


class TorchRpcPS:
    """One running torch.distributed.rpc parameter server pair; `measure(s)` is one timed round."""

    def __init__(self, mb: float, tcp_only: bool, start_timeout: float = 180.0) -> None:
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.cmds, self.results = ctx.Queue(), ctx.Queue()
        self.tcp_only = tcp_only
        n = int(mb * (1 << 20) / 4)
        port = free_ports(1)[0]
        self.procs = [ctx.Process(target=_rank, args=(r, port, n, tcp_only, self.cmds, self.results), daemon=True)
                      for r in range(2)]
        for p in self.procs:
            p.start()
        try:
            self._get(start_timeout)
        except BaseException:
            self.close()
            raise

    def _get(self, timeout: float) -> float:
        try:
            kind, val = self.results.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"torch.distributed.rpc ({'TCP only' if self.tcp_only else 'default'}) "
                               f"did not answer within {timeout:.0f}s") from None
        if kind == "error":
            raise RuntimeError(val)
        return float(val)

    def measure(self, seconds: float) -> float:
        self.cmds.put(seconds)
        return self._get(60 + seconds)

    def close(self) -> None:
        self.cmds.put(None)
        for p in self.procs:
            p.join(15)
            if p.is_alive():
                p.kill()
                p.join(5)

    def __enter__(self) -> "TorchRpcPS":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
