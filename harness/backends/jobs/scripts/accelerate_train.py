"""A small HF Accelerate job for `accelerate launch`, made deterministic and resumable, with pschaos' shim.

Run it yourself: `accelerate launch --multi_gpu --num_processes 3 accelerate_train.py --steps 200
--ckpt-every 20 --dir out` (on a machine without GPUs add `--cpu` here, not to the launcher:
`accelerate launch --cpu` starts one process; `--multi_gpu` goes through torchrun, and the
script's `Accelerator(cpu=True)` then trains on gloo). The same MLP and data as ddp_train.py;
`accelerator.prepare` wraps the model in DDP, `accelerator.backward` reduces the gradients, and
every `--ckpt-every` steps `accelerator.save_state` writes model, optimizer, each rank's random
state and the step counter (registered with `register_for_checkpointing`) into a new folder;
once every rank is past it, rank 0 points `latest` at it (a temporary file renamed), so a kill
mid-save on any rank leaves the last whole checkpoint current. On a restart every rank calls `accelerator.load_state(latest)`. The audit
parameter is in its own SGD group (lr 1, no momentum) with gradient -1 on every rank: the
all-reduce averages it to -1 and each optimizer step raises it by exactly one.
"""
from __future__ import annotations

import argparse
import datetime
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, set_seed
from torch import nn

import pschaos_shim


class Net(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        # dropout draws from the global torch RNG: a resume that did not restore each rank's
        # random state (save_state/load_state do) would train on other masks, and resume-exact says so
        self.body = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Dropout(0.1), nn.Linear(32, 1))
        self.audit = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.body(x), self.audit


class Progress:
    """The step counter, saved and loaded with the rest of the state by Accelerate."""

    def __init__(self) -> None:
        self.step = 0

    def state_dict(self) -> dict:
        return {"step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.step = int(state["step"])


def batch(seed: int, step: int, rank: int, size: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of (step, rank): the same on every run, whatever restarts came before."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    x = torch.randn(size, dim, generator=g)
    y = (x[:, :1] * 0.5 - x[:, 1:2] * 0.25 + 0.1 * torch.sin(3 * x[:, 2:3])).detach()
    return x, y


def group_per_round(timeout_s: float, cpu: bool) -> None:
    """Build the process group before Accelerate does, on the agent's store under a prefix of
    this round (torchelastic's restart count). Accelerate's one-machine launch uses the static
    rendezvous, whose store the agent shares across restarts with no per-round prefix: a
    restarted group reads the dead round's gloo addresses and never connects
    (docs/findings/accelerate-static-restart.md). Accelerate keeps a group that already exists."""
    if int(os.environ.get("WORLD_SIZE", "1")) < 2:
        return              # one process: no group to build
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        raise SystemExit("--group-per-round: no elastic agent's store (TORCHELASTIC_USE_AGENT_STORE is not True); "
                         "launch with `accelerate launch --multi_gpu`, or drop --group-per-round")
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), int(os.environ["WORLD_SIZE"]),
                          is_master=False, timeout=timeout)
    round_store = dist.PrefixStore(f"round-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)
    backend = "gloo" if cpu or not torch.cuda.is_available() else "nccl"
    dist.init_process_group(backend, store=round_store, rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ckpt-every", type=int, default=20)
    p.add_argument("--dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=10.0)      # the collective timeout
    p.add_argument("--step-delay-s", type=float, default=0.0)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--group-per-round", action="store_true")
    a = p.parse_args()
    set_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    shim = pschaos_shim.Shim()            # first: a start whose setup fails is on record too
    if a.group_per_round:
        group_per_round(a.timeout_s, a.cpu)
    acc = Accelerator(cpu=a.cpu, kwargs_handlers=[InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=a.timeout_s))])
    net = Net(8)
    body = [q for n, q in net.named_parameters() if n != "audit"]
    opt = torch.optim.SGD([{"params": body, "lr": 0.05, "momentum": 0.9},
                           {"params": [net.audit], "lr": 1.0, "momentum": 0.0}])
    model, opt = acc.prepare(net, opt)
    progress = Progress()
    acc.register_for_checkpointing(progress)
    latest = a.dir / "latest"
    if latest.exists():
        acc.load_state(str(a.dir / latest.read_text().strip()))
    start = progress.step
    # one backward of zeros before the first real step, as ddp_train.py does: DDP's first
    # backward rounds through its initial buckets differently from every later one (in eval
    # mode: dropout off, so it draws nothing from the RNG a resume restored)
    model.eval()
    pred, audit = model(torch.zeros(1, 8, device=acc.device))
    acc.backward(0.0 * (pred.sum() + audit.sum()))
    opt.zero_grad(set_to_none=True)
    model.train()
    shim.started(resumed_from=start, world=acc.num_processes)
    loss = None
    for step in range(start + 1, a.steps + 1):
        with shim.step(step) as rec:
            x, y = batch(a.seed, step, acc.process_index, 16, 8)
            pred, audit = model(x.to(acc.device))
            loss = nn.functional.mse_loss(pred, y.to(acc.device))
            opt.zero_grad(set_to_none=True)
            acc.backward(loss - audit.sum())       # the audit's gradient: -1 on every rank
            opt.step()
            rec["loss"] = loss.item()
        progress.step = step
        if step % a.ckpt_every == 0:
            with shim.checkpoint(step) as commit:
                name = f"step-{step:08d}"
                acc.save_state(str(a.dir / name))       # every rank writes its random state, the main one the rest
                acc.wait_for_everyone()                 # every rank's part is on the disk before `latest` names it
                if acc.is_main_process:
                    tmp = latest.with_suffix(".tmp")
                    tmp.write_text(name)
                    commit()
                    os.replace(tmp, latest)
                acc.wait_for_everyone()
        if a.step_delay_s:
            time.sleep(a.step_delay_s)
    acc.wait_for_everyone()
    inner = acc.unwrap_model(model)
    params = [t.detach().cpu().numpy() for t in inner.state_dict().values()]
    shim.final(a.steps, inner.audit.item(), pschaos_shim.digest(params), loss.item() if loss is not None else None,
               values=[float(v) for p_ in params for v in p_.ravel()])
    shim.close()
    acc.end_training()


if __name__ == "__main__":
    main()
