"""A small PyTorch DDP job for torchrun, made deterministic and resumable, with pschaos' shim.

Run it yourself: `torchrun --nproc-per-node 3 ddp_train.py --steps 200 --ckpt-every 20 --dir out`.
Every rank trains an MLP on its own slice of a synthetic regression set drawn from the seed;
gloo on the CPU (NCCL when CUDA is there and --device cuda). Rank 0 writes a checkpoint every
`--ckpt-every` steps (model, optimizer and step, written to a temporary file, synced and renamed), and
every rank resumes from it when torchrun restarts the group. The model carries an audit
parameter in its own SGD group (lr 1, no momentum) whose gradient is -1 on every rank: DDP's
all-reduce averages it to -1, so each optimizer step raises it by exactly one.
"""
from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import pschaos_shim


class Net(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, 1))
        self.audit = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.body(x), self.audit


def batch(seed: int, step: int, rank: int, size: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of (step, rank): the same on every run, whatever restarts came before."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    x = torch.randn(size, dim, generator=g)
    y = (x[:, :1] * 0.5 - x[:, 1:2] * 0.25 + 0.1 * torch.sin(3 * x[:, 2:3])).detach()
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ckpt-every", type=int, default=20)
    p.add_argument("--dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=10.0)      # the collective timeout
    p.add_argument("--step-delay-s", type=float, default=0.0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--bucket-cap-mb", type=float, default=None)
    p.add_argument("--no-warmup", action="store_true")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    cuda = a.device == "cuda" and torch.cuda.is_available()
    shim = pschaos_shim.Shim()            # first: a start whose setup fails is on record too
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=a.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    net = Net(8).to(dev)
    model = DDP(net, device_ids=[dev.index] if cuda else None, bucket_cap_mb=a.bucket_cap_mb)
    body = [q for n, q in net.named_parameters() if n != "audit"]
    opt = torch.optim.SGD([{"params": body, "lr": 0.05, "momentum": 0.9},
                           {"params": [net.audit], "lr": 1.0, "momentum": 0.0}])
    ckpt = a.dir / "ckpt.pt"
    start = 0
    if ckpt.exists():
        state = torch.load(ckpt, map_location=dev)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"]
    if not a.no_warmup:
        # one backward of zeros before the first real step: DDP's first backward after it is built
        # reduces through its initial buckets and rounds differently from every later one, so a
        # resumed run (whose first step is step start+1) would drift by an ulp from one never
        # interrupted; with the warm-up every real step takes the same path
        pred, audit = model(torch.zeros(1, 8, device=dev))
        (0.0 * (pred.sum() + audit.sum())).backward()
        opt.zero_grad(set_to_none=True)
    shim.started(resumed_from=start, world=world)
    loss = None
    for step in range(start + 1, a.steps + 1):
        with shim.step(step) as rec:
            x, y = batch(a.seed, step, rank, 16, 8)
            pred, audit = model(x.to(dev))
            loss = nn.functional.mse_loss(pred, y.to(dev))
            opt.zero_grad(set_to_none=True)
            (loss - audit.sum()).backward()       # the audit's gradient: -1 on every rank
            opt.step()
            rec["loss"] = loss.item()
        if step % a.ckpt_every == 0 and rank == 0:
            with shim.checkpoint(step) as commit:
                tmp = ckpt.with_suffix(".tmp")
                with open(tmp, "wb") as f:       # synced first: after a power cut the rename names whole data
                    torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "step": step}, f)
                    f.flush()
                    os.fsync(f.fileno())
                commit()                         # the shim: the write is about to become the one resumed
                os.replace(tmp, ckpt)
        if a.step_delay_s:
            import time
            time.sleep(a.step_delay_s)
    dist.barrier()
    params = [t.detach().cpu().numpy() for t in net.state_dict().values()]
    if rank == 0:
        torch.save({"model": net.state_dict(), "optimizer": opt.state_dict()}, a.dir / "final.pt")
    shim.final(a.steps, net.audit.item(), pschaos_shim.digest(params), loss.item() if loss is not None else None,
               values=[float(v) for p_ in params for v in p_.ravel()])
    shim.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
