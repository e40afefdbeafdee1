"""FSDP2 (`fully_shard`) training steps of a small MLP on the CPU, ringreduce
against gloo in the same processes (issue 53, step-level figures).

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo torchrun --standalone --nproc-per-node 2 \
        benchmarks/fsdp_step.py [--layers 4] [--width 1024] [--batch 32] [--steps 30] \
        [--warmup 3] [--configs none,fake,gloo,ringreduce,ucx] [--quick]

Each configuration has its own copy of the MLP (the same weights): "none"
trains it unsharded with no communication (the compute), "gloo" and
"ringreduce" shard every Linear+ReLU block and the root with `fully_shard`
on a device mesh made from that backend's group; "ucx" likewise on a
ringreduce group with its host channel off (RINGREDUCE_SHM_BYTES=0: UCX
and cma alone, the path before issue 53); "fake" on torch's `fake` backend,
which communicates nothing (what FSDP2 and torch cost around the
collectives, which no backend avoids; its parameters are garbage, its time
is not) (FSDP2 then all-gathers
parameters before each block's forward and backward and reduce-scatters
gradients: in torch 2.13 on the CPU, all_gather_single and
reduce_scatter_single, synchronous; 16 and 8 per two steps of a 4-block MLP). The configurations take turns step by step,
so that a slow phase of a shared machine lands on all alike. A step is
zero_grad, forward, backward and SGD's step; per step the slowest rank's
time counts. Printed: p50, p90 and mean per configuration, "exposed"
(p50 minus "none"'s), and ringreduce / gloo (and ucx / gloo) at p50 and p90
and for exposed; with "fake", each backend's p50 above fake's.
`--quick` is a smoke run (2 layers of 256, 3 steps): its figures mean nothing.
"""
import argparse
import copy
import os
import time
import warnings

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

import torch_ringreduce  # noqa: F401  registers "ringreduce"
from step_timing import (add_step_arguments, build_mlp, parsed_step_arguments, print_table,
                         slowest_per_step)


def shard(model, group):
    mesh = DeviceMesh.from_group(group, "cpu")
    for block in model:
        if isinstance(block, torch.nn.Linear):
            fully_shard(block, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def main():
    warnings.filterwarnings("ignore")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_arguments(p)
    p.add_argument("--configs", default="none,gloo,ringreduce")
    args = parsed_step_arguments(p)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    dist.init_process_group("ringreduce")
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {"ringreduce": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    configs = args.configs.split(",")
    if "ucx" in configs:
        os.environ["RINGREDUCE_SHM_BYTES"] = "0"  # read when a group is made
        groups["ucx"] = dist.new_group(backend="ringreduce")
        del os.environ["RINGREDUCE_SHM_BYTES"]
    if "fake" in configs:
        from torch.testing._internal.distributed import fake_pg  # noqa: F401  registers "fake"
        groups["fake"] = dist.new_group(backend="fake")
    base = build_mlp(args.layers, args.width)
    models = {c: copy.deepcopy(base) if c == "none" else shard(copy.deepcopy(base), groups[c])
              for c in configs}
    optimizers = {c: torch.optim.SGD(models[c].parameters(), lr=1e-4) for c in configs}
    batch = torch.randn(args.batch, args.width, generator=torch.Generator().manual_seed(rank))
    local = {c: [] for c in configs}
    for i in range(args.warmup + args.steps):
        for c in configs:
            dist.barrier(group=groups["gloo"])
            start = time.perf_counter()
            optimizers[c].zero_grad(set_to_none=True)
            models[c](batch).square().mean().backward()
            optimizers[c].step()
            if i >= args.warmup:
                local[c].append(time.perf_counter() - start)
    steps = {c: slowest_per_step(local[c], groups["gloo"]) for c in configs}
    if rank == 0:
        params = sum(p.numel() for p in base.parameters())
        print_table(f"# FSDP2 step, MLP {args.layers}x{args.width} ({params / 1e6:.1f}M parameters), "
                    f"batch {args.batch}, world {world}, torch {torch.__version__}; per step the "
                    f"slowest rank, configurations taking turns", steps,
                    compute="none" if "none" in steps else None)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
