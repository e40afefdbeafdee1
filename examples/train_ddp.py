"""DDP training on CPU over ringreduce: the project's main job.

    torchrun --standalone --nproc-per-node 2 examples/train_ddp.py

Each rank trains a small MLP on its shard of a synthetic regression problem
(a fixed random teacher network); DistributedDataParallel averages gradients
with ringreduce's allreduce. Rank 0 prints the loss as it falls.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import torch_ringreduce  # noqa: F401  (registers "ringreduce")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="ringreduce")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--log-every", type=int, default=20)
    return p.parse_args()


def make_model(hidden):
    return nn.Sequential(nn.Linear(32, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def main():
    args = parse_args()
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts them)
    teacher = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 1))
    model = DistributedDataParallel(make_model(args.hidden))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    data_gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard

    first = None
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch, 32, generator=data_gen)
        with torch.no_grad():
            y = teacher(x)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # The mean loss over ranks, itself through the backend.
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
        first = mean_loss.item() if first is None else first
        if rank == 0 and (step % args.log_every == 0 or step == 1):
            print(f"step {step:4d}  loss {mean_loss.item():.5f}", flush=True)
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(f"backend {args.backend}, world {world}: loss {first:.5f} -> {mean_loss.item():.5f} "
              f"in {args.steps} steps ({elapsed:.1f} s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
