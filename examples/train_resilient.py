"""Fault-tolerant DDP training: checkpoints on rank 0, resumes after a restart.

    torchrun --standalone --nproc-per-node 2 --max-restarts 2 \
        examples/train_resilient.py --checkpoint /tmp/ckpt.pt --kill-at-step 15

With --kill-at-step, one worker SIGKILLs itself at that step in the first
attempt. ringreduce reports the death to the other workers within
milliseconds (instead of a hang until the timeout), they exit with the error,
torchrun restarts the group, and the new workers resume from the checkpoint.

torchrun stops the surviving workers with SIGTERM as soon as it notices a
death, which may be before they have heard of it. A SIGTERM here lets the
step in progress end first (a collective with a dead peer fails within
milliseconds, naming it; a preempted job ends its step), then the worker exits.
"""
import argparse
import os
import signal

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import torch_ringreduce  # noqa: F401  (registers "ringreduce")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--checkpoint-every", type=int, default=5)
    p.add_argument("--kill-at-step", type=int, default=-1)
    p.add_argument("--kill-rank", type=int, default=1)
    return p.parse_args()


def main():
    args = parse_args()
    stop_requested = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.append(signum))
    dist.init_process_group("ringreduce")
    rank = dist.get_rank()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    if os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        if rank == 0:
            print(f"attempt {attempt}: resumed from step {start}", flush=True)
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's (restored) weights
    for step in range(start, args.steps):
        if stop_requested:
            print(f"rank {rank}: SIGTERM, stopping before step {step}", flush=True)
            raise SystemExit(128 + signal.SIGTERM)
        if attempt == 0 and step == args.kill_at_step and rank == args.kill_rank:
            print(f"rank {rank}: killing myself at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        gen = torch.Generator().manual_seed(step * 100 + rank)
        x = torch.randn(32, 16, generator=gen)
        loss = nn.functional.mse_loss(ddp(x), x[:, :1] - x[:, 1:2])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0 and (step + 1) % args.checkpoint_every == 0:
            tmp = args.checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "step": step + 1}, tmp)
            os.replace(tmp, args.checkpoint)  # never leave a torn checkpoint
    if rank == 0:
        print(f"attempt {attempt}: finished {args.steps} steps, loss {loss.item():.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
